//! The TLS and TCP options `tlsgate bench` and `tlsgate probe` share: one clap struct that both
//! flatten into their arguments (`--tls`, `--ciphers`, `--groups`, `--sigalgs`, `--alpn`,
//! `--sni`, `--connect-to`, `--cacert`, `--no-ticket`, `--tfo`, `--timeout`), and what both build
//! from it: the client TLS context, the address to connect to, the SNI, the per-connection SSL
//! object and the TCP connection (with Fast Open).

use crate::values::{host_port, parse_duration};
use anyhow::{bail, Context};
use boring::ssl::{
    Ssl, SslConnector, SslConnectorBuilder, SslContextBuilder, SslMethod, SslOptions, SslVerifyMode, SslVersion,
};
use std::net::{SocketAddr, ToSocketAddrs};
use std::path::PathBuf;
use std::time::Duration;
use tokio::net::{TcpSocket, TcpStream};

/// TLS and TCP knobs of the client.
#[derive(clap::Args, Debug, Clone)]
#[command(next_help_heading = "TLS and TCP options (shared by bench and probe)")]
pub struct TlsOpts {
    /// Only this protocol version: `1.2` or `1.3` (default: either, 1.3 preferred).
    #[arg(long = "tls", value_parser = ["1.2", "1.3"])]
    pub tls: Option<String>,
    /// TLS 1.2 cipher list (BoringSSL syntax); TLS 1.3 suites are not configurable.
    #[arg(long)]
    pub ciphers: Option<String>,
    /// Key-exchange groups offered, in order (BoringSSL names, `:`-separated, e.g.
    /// `X25519MLKEM768:X25519:P-256`). TLS 1.2 servers use an ECDSA certificate only if its curve
    /// is listed (P-256 for most).
    #[arg(long)]
    pub groups: Option<String>,
    /// Signature algorithms offered, in order (`:`-separated, e.g.
    /// `ecdsa_secp256r1_sha256:rsa_pss_rsae_sha256`, or OpenSSL-style `ECDSA+SHA256`): the server
    /// picks its certificate and its handshake signature from these.
    #[arg(long)]
    pub sigalgs: Option<String>,
    /// Offer the ML-DSA signature schemes (`mldsa44:mldsa65:mldsa87`, TLS 1.3) first, before
    /// `--sigalgs` or BoringSSL's default list: a server with an ML-DSA certificate serves it.
    #[arg(long)]
    pub mldsa: bool,
    /// ALPN protocols offered, comma-separated, in order (`h2,http/1.1`); empty: no ALPN
    /// extension. Default: `http/1.1` (`h2` with `bench --h2`).
    #[arg(long)]
    pub alpn: Option<String>,
    /// Server name sent in the ClientHello (default: the target's host unless it is an IP
    /// address; empty: none).
    #[arg(long)]
    pub sni: Option<String>,
    /// Connect to this `HOST:PORT` instead of the target's (the target still gives Host and SNI).
    #[arg(long, value_name = "HOST:PORT")]
    pub connect_to: Option<String>,
    /// Verify the server's certificate (and name) against this CA file (PEM); no verification
    /// without it.
    #[arg(long, value_name = "FILE")]
    pub cacert: Option<PathBuf>,
    /// Send no session-ticket extension: TLS 1.2 resumes by session ID only, TLS 1.3 never
    /// (its resumption is ticket-only).
    #[arg(long)]
    pub no_ticket: bool,
    /// Client TCP Fast Open (`TCP_FASTOPEN_CONNECT`): the ClientHello rides in the SYN when the
    /// kernel holds a cookie for the server.
    #[arg(long)]
    pub tfo: bool,
    /// Longest wait for each connect, handshake or response.
    #[arg(long, value_parser = parse_duration, default_value = "10s")]
    pub timeout: Duration,
}

impl Default for TlsOpts {
    fn default() -> Self {
        Self {
            tls: None,
            ciphers: None,
            groups: None,
            sigalgs: None,
            mldsa: false,
            alpn: None,
            sni: None,
            connect_to: None,
            cacert: None,
            no_ticket: false,
            tfo: false,
            timeout: Duration::from_secs(10),
        }
    }
}

/// Comma-separated protocol names → ALPN wire format (empty list: empty wire, no extension).
pub fn alpn_wire(list: &str) -> anyhow::Result<Vec<u8>> {
    let mut wire = Vec::new();
    for p in list.split(',').map(str::trim).filter(|p| !p.is_empty()) {
        let len =
            u8::try_from(p.len()).with_context(|| format!("--alpn: protocol name {p:?} is longer than 255 bytes"))?;
        wire.push(len);
        wire.extend_from_slice(p.as_bytes());
    }
    Ok(wire)
}

/// Whether an ALPN wire list offers `proto`.
pub fn alpn_offers(mut wire: &[u8], proto: &[u8]) -> bool {
    while let Some((&len, rest)) = wire.split_first() {
        let len = usize::from(len);
        if len > rest.len() {
            return false;
        }
        if &rest[..len] == proto {
            return true;
        }
        wire = &rest[len..];
    }
    false
}

impl TlsOpts {
    /// The ALPN list to offer in wire format; `default` when `--alpn` is not given.
    pub fn alpn_wire(&self, default: &str) -> anyhow::Result<Vec<u8>> {
        alpn_wire(self.alpn.as_deref().unwrap_or(default))
    }

    /// The ClientHello server name for `host`: `--sni` (empty: none), else the host unless it is
    /// an IP address.
    pub fn sni(&self, host: &str) -> Option<String> {
        match &self.sni {
            Some(s) if s.is_empty() => None,
            Some(s) => Some(s.clone()),
            None if host.parse::<std::net::IpAddr>().is_ok() => None,
            None => Some(host.to_string()),
        }
    }

    /// Where to connect: `--connect-to` (its port defaults to `port`), else `host:port`.
    pub fn addr(&self, host: &str, port: u16) -> anyhow::Result<SocketAddr> {
        let (h, p) = match &self.connect_to {
            Some(to) => host_port(to, port).with_context(|| format!("--connect-to {to}"))?,
            None => (host.to_string(), port),
        };
        (h.as_str(), p)
            .to_socket_addrs()
            .with_context(|| format!("cannot resolve {h}"))?
            .next()
            .with_context(|| format!("{h} has no address"))
    }

    /// A client context with the version range, groups, ciphers, signature algorithms, ALPN
    /// (`alpn_wire`, none when empty), verification and `--no-ticket` applied; the caller adds
    /// its session handling and builds it.
    pub fn connector(&self, alpn_wire: &[u8]) -> anyhow::Result<SslConnectorBuilder> {
        let mut b = SslConnector::builder(SslMethod::tls()).context("cannot create a TLS context")?;
        let (min, max) = match self.tls.as_deref() {
            Some("1.2") => (SslVersion::TLS1_2, SslVersion::TLS1_2),
            Some("1.3") => (SslVersion::TLS1_3, SslVersion::TLS1_3),
            Some(v) => bail!("--tls {v}: expected 1.2 or 1.3"),
            None => (SslVersion::TLS1_2, SslVersion::TLS1_3),
        };
        b.set_min_proto_version(Some(min))?;
        b.set_max_proto_version(Some(max))?;
        self.configure(&mut b, alpn_wire)?;
        Ok(b)
    }

    /// The client context of a QUIC connection (`probe --h3`): the same groups, signature
    /// algorithms and verification as [`Self::connector`]'s, TLS 1.3 only (QUIC has no other);
    /// quiche sets the ALPN list itself.
    pub fn quic_context(&self) -> anyhow::Result<SslContextBuilder> {
        if self.tls.as_deref() == Some("1.2") {
            bail!("--tls 1.2: QUIC is TLS 1.3 only");
        }
        let mut b = SslContextBuilder::new(SslMethod::tls()).context("cannot create a TLS context")?;
        b.set_min_proto_version(Some(SslVersion::TLS1_3))?;
        b.set_max_proto_version(Some(SslVersion::TLS1_3))?;
        self.configure(&mut b, &[])?;
        Ok(b)
    }

    /// What [`Self::connector`] and [`Self::quic_context`] have in common.
    fn configure(&self, b: &mut SslContextBuilder, alpn_wire: &[u8]) -> anyhow::Result<()> {
        if let Some(groups) = &self.groups {
            b.set_curves_list(groups)
                .with_context(|| format!("--groups {groups}: unknown group"))?;
        }
        if let Some(ciphers) = &self.ciphers {
            b.set_strict_cipher_list(ciphers)
                .with_context(|| format!("--ciphers {ciphers}: not a valid cipher list"))?;
        }
        if let Some(sigalgs) = self.sigalgs_offered() {
            let sigalgs = &sigalgs;
            // SSL_CTX_set1_sigalgs_list: for a client, the list sent in signature_algorithms
            // (and the one it verifies the server's signature against).
            b.set_sigalgs_list(sigalgs).with_context(|| {
                format!(
                    "--sigalgs {sigalgs}: not a valid signature algorithm list (names such as \
                     ecdsa_secp256r1_sha256, rsa_pss_rsae_sha256, rsa_pkcs1_sha256, ed25519, \
                     `:`-separated)"
                )
            })?;
        }
        if !alpn_wire.is_empty() {
            b.set_alpn_protos(alpn_wire)?;
        }
        match &self.cacert {
            Some(ca) => {
                b.set_ca_file(ca)
                    .with_context(|| format!("--cacert {}: cannot load", ca.display()))?;
                b.set_verify(SslVerifyMode::PEER);
            }
            None => b.set_verify(SslVerifyMode::NONE),
        }
        if self.no_ticket {
            b.set_options(SslOptions::NO_TICKET);
        }
        Ok(())
    }

    /// The signature algorithm list to set: `--sigalgs`, with the ML-DSA schemes in front under
    /// `--mldsa` (before BoringSSL's default verify list when `--sigalgs` is absent).
    pub fn sigalgs_offered(&self) -> Option<String> {
        /// BoringSSL's default client list (ssl/extensions.cc, kVerifySignatureAlgorithms).
        const DEFAULT: &str = "ecdsa_secp256r1_sha256:rsa_pss_rsae_sha256:rsa_pkcs1_sha256:\
ecdsa_secp384r1_sha384:rsa_pss_rsae_sha384:rsa_pkcs1_sha384:rsa_pss_rsae_sha512:rsa_pkcs1_sha512:rsa_pkcs1_sha1";
        match (&self.sigalgs, self.mldsa) {
            (Some(list), true) => Some(format!("mldsa44:mldsa65:mldsa87:{list}")),
            (None, true) => Some(format!("mldsa44:mldsa65:mldsa87:{DEFAULT}")),
            (list, false) => list.clone(),
        }
    }

    /// A connection object from `connector` for server name `sni` (none sent when `None`),
    /// checking the certificate's name against `sni` or `host` under `--cacert`.
    pub fn ssl(&self, connector: &SslConnector, sni: Option<&str>, host: &str) -> anyhow::Result<Ssl> {
        let mut cfg = connector.configure()?;
        cfg.set_verify_hostname(self.cacert.is_some());
        cfg.set_use_server_name_indication(sni.is_some());
        Ok(cfg.into_ssl(sni.unwrap_or(host))?)
    }

    /// A failed handshake's message for the report: BoringSSL's reasons, and when the server
    /// answered with a handshake_failure alert (it found nothing acceptable in the ClientHello)
    /// while the offer was restricted, which options restricted it.
    pub fn handshake_error<S: std::fmt::Debug>(&self, e: &tokio_boring::HandshakeError<S>) -> String {
        self.describe_failure(&e.to_string(), tlsgate_tls::failure::peer_alert(e))
    }

    /// [`Self::handshake_error`] from the error's text and the alert the server sent, if any
    /// (by its code: BoringSSL's reason, never the text).
    fn describe_failure(&self, text: &str, alert: Option<u8>) -> String {
        /// TLS alert 40.
        const HANDSHAKE_FAILURE: u8 = 40;
        let mut out = if text.starts_with("TLS handshake failed") {
            text.to_string()
        } else {
            format!("TLS handshake failed: {text}")
        };
        if alert == Some(HANDSHAKE_FAILURE) {
            if let Some(r) = self.restrictions() {
                out.push_str(&format!(" (the server accepted none of what was offered with {r})"));
            }
        }
        out
    }

    /// Describes the restricting options given (`--sigalgs X, --groups Y`), for error hints.
    pub fn restrictions(&self) -> Option<String> {
        let list: Vec<String> = [
            ("--tls", &self.tls),
            ("--ciphers", &self.ciphers),
            ("--groups", &self.groups),
            ("--sigalgs", &self.sigalgs),
            ("--alpn", &self.alpn),
        ]
        .into_iter()
        .filter_map(|(flag, v)| v.as_ref().map(|v| format!("{flag} {v}")))
        .collect();
        (!list.is_empty()).then(|| list.join(", "))
    }
}

/// A TCP connection to `addr`, with `TCP_FASTOPEN_CONNECT` set first when `tfo`.
pub async fn tcp_connect(addr: SocketAddr, tfo: bool) -> std::io::Result<TcpStream> {
    let socket = if addr.is_ipv4() {
        TcpSocket::new_v4()?
    } else {
        TcpSocket::new_v6()?
    };
    if tfo {
        use std::os::fd::AsFd;
        tlsgate_tls::client_ffi::set_tcp_fastopen_connect(socket.as_fd())?;
    }
    socket.connect(addr).await
}

#[cfg(test)]
mod tests {
    use super::*;
    use clap::Parser;

    #[derive(clap::Parser)]
    struct Cli {
        #[command(flatten)]
        opts: TlsOpts,
    }

    fn opts(args: &[&str]) -> TlsOpts {
        let mut all = vec!["x"];
        all.extend_from_slice(args);
        Cli::try_parse_from(all).expect("parses").opts
    }

    #[test]
    fn alpn_lists() {
        assert_eq!(alpn_wire("h2, http/1.1").unwrap(), b"\x02h2\x08http/1.1");
        assert_eq!(alpn_wire("").unwrap(), b"");
        assert!(alpn_wire(&"x".repeat(256)).is_err());
        assert!(alpn_offers(b"\x08http/1.1\x02h2", b"h2"));
        assert!(!alpn_offers(b"\x08http/1.1", b"h2"));
        assert!(!alpn_offers(b"\x03h2c", b"h2"));
        assert!(!alpn_offers(b"\x09http", b"http"), "truncated list");
        let o = opts(&["--alpn", "h2"]);
        assert_eq!(o.alpn_wire("http/1.1").unwrap(), b"\x02h2");
        assert_eq!(opts(&[]).alpn_wire("http/1.1").unwrap(), b"\x08http/1.1");
    }

    #[test]
    fn sni_and_addresses() {
        let o = opts(&[]);
        assert_eq!(o.sni("127.0.0.1"), None);
        assert_eq!(o.sni("example.test").as_deref(), Some("example.test"));
        assert_eq!(opts(&["--sni", ""]).sni("example.test"), None);
        assert_eq!(opts(&["--sni", "a.test"]).sni("127.0.0.1").as_deref(), Some("a.test"));
        assert_eq!(o.addr("127.0.0.1", 8443).unwrap(), "127.0.0.1:8443".parse().unwrap());
        let to = opts(&["--connect-to", "127.0.0.2"]);
        assert_eq!(to.addr("example.test", 9).unwrap(), "127.0.0.2:9".parse().unwrap());
        assert!(opts(&["--connect-to", "127.0.0.1:x"]).addr("a", 1).is_err());
    }

    #[test]
    fn context_options_are_checked() {
        let good = opts(&[
            "--tls",
            "1.3",
            "--groups",
            "X25519:P-256",
            "--sigalgs",
            "ecdsa_secp256r1_sha256:rsa_pss_rsae_sha256:ECDSA+SHA384",
            "--ciphers",
            "ECDHE-ECDSA-AES128-GCM-SHA256",
        ]);
        assert!(good.connector(b"\x02h2").is_ok());
        let err = |args: &[&str]| format!("{:#}", opts(args).connector(b"").err().expect("refused"));
        let e = err(&["--sigalgs", "ecdsa_secp256r1_sha256:nonsense"]);
        assert!(
            e.contains("--sigalgs ecdsa_secp256r1_sha256:nonsense: not a valid signature algorithm list"),
            "{e}"
        );
        assert!(err(&["--groups", "P-999"]).contains("--groups P-999: unknown group"));
        assert!(err(&["--ciphers", "NOPE"]).contains("--ciphers NOPE"));
        assert_eq!(opts(&[]).restrictions(), None);
        let o = opts(&["--sigalgs", "ed25519"]);
        assert_eq!(
            o.describe_failure("TLS handshake failed [SSLV3_ALERT_HANDSHAKE_FAILURE]", Some(40)),
            "TLS handshake failed [SSLV3_ALERT_HANDSHAKE_FAILURE] (the server accepted none of what was \
             offered with --sigalgs ed25519)"
        );
        assert_eq!(
            o.describe_failure("connection reset", None),
            "TLS handshake failed: connection reset"
        );
        assert_eq!(
            opts(&[]).describe_failure("[SSLV3_ALERT_HANDSHAKE_FAILURE]", Some(40)),
            "TLS handshake failed: [SSLV3_ALERT_HANDSHAKE_FAILURE]"
        );
        assert_eq!(
            opts(&["--sigalgs", "ed25519", "--tls", "1.3"])
                .restrictions()
                .as_deref(),
            Some("--tls 1.3, --sigalgs ed25519")
        );
    }

    #[test]
    fn mldsa_goes_in_front_of_the_offer() {
        assert_eq!(opts(&[]).sigalgs_offered(), None, "BoringSSL's default list");
        let o = opts(&["--mldsa", "--sigalgs", "ed25519"]);
        assert_eq!(o.sigalgs_offered().as_deref(), Some("mldsa44:mldsa65:mldsa87:ed25519"));
        let o = opts(&["--mldsa"]);
        let list = o.sigalgs_offered().unwrap();
        assert!(
            list.starts_with("mldsa44:mldsa65:mldsa87:ecdsa_secp256r1_sha256:"),
            "{list}"
        );
        assert!(o.connector(b"").is_ok(), "BoringSSL knows every name: {list}");
    }
}
