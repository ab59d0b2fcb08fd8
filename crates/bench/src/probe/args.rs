//! Command-line options of `tlsgate probe` and their validation into a [`ProbePlan`].

use crate::tls_opts::TlsOpts;
use crate::values::host_port;
use anyhow::{bail, Context};
use std::net::SocketAddr;
use std::path::PathBuf;

/// `tlsgate probe HOST:PORT`: connect N times and report what each handshake did.
#[derive(clap::Args, Debug, Clone)]
pub struct ProbeArgs {
    /// Server, `HOST[:PORT]` (443 by default); `https://HOST[:PORT][/PATH]` is accepted too.
    pub target: String,
    /// Connections, one after the other; each offers the newest session received (like
    /// `openssl s_client -reconnect`).
    #[arg(short = 'n', long = "connections", default_value_t = 2)]
    pub connections: usize,
    /// Path of the GET sent on each connection (the HSTS header is read from its response).
    #[arg(long)]
    pub path: Option<String>,
    /// Send the request as TLS 1.3 early data (0-RTT) when the offered session allows it.
    #[arg(long)]
    pub early_data: bool,
    /// Over QUIC and HTTP/3 (UDP, same port unless `--connect-to` says otherwise) instead of
    /// TCP; the same report, TLS facts included.
    #[arg(long)]
    pub h3: bool,
    /// Offer this saved session (DER, from `--sess-out`) on the first connection.
    #[arg(long, value_name = "FILE")]
    pub sess_in: Option<PathBuf>,
    /// Save the newest session received (DER) to this file at the end.
    #[arg(long, value_name = "FILE")]
    pub sess_out: Option<PathBuf>,
    /// Print the report as JSON on stdout instead of text.
    #[arg(long)]
    pub json: bool,
    /// Fail unless every connection that could resume (each after the first, and the first with
    /// `--sess-in`) resumed.
    #[arg(long, conflicts_with = "expect_no_resume")]
    pub expect_resume: bool,
    /// Fail if any connection resumed.
    #[arg(long)]
    pub expect_no_resume: bool,
    /// Fail unless every handshake that negotiated a key exchange used this group (e.g. `X25519`).
    #[arg(long, value_name = "NAME")]
    pub expect_group: Option<String>,
    /// Fail unless every full handshake carried an OCSP staple with status `good`.
    #[arg(long)]
    pub expect_staple: bool,
    /// Fail unless every connection negotiated this version (`1.2`, `1.3`, `TLSv1.3`).
    #[arg(long, value_name = "VERSION")]
    pub expect_version: Option<String>,
    /// Fail unless every connection selected this ALPN protocol.
    #[arg(long, value_name = "PROTOCOL")]
    pub expect_alpn: Option<String>,
    /// Fail unless every full handshake was signed by the server with this signature algorithm
    /// (e.g. `rsa_pss_rsae_sha256`; see `--sigalgs`).
    #[arg(long, value_name = "NAME")]
    pub expect_sigalg: Option<String>,
    /// Fail unless every connection after the first (or every one, with `--sess-in`) had its
    /// 0-RTT data accepted (implies `--early-data`).
    #[arg(long)]
    pub expect_early_data: bool,
    /// Offer Encrypted ClientHello with this ECHConfigList (base64, as `tlsgate ech` prints it or
    /// the DNS HTTPS record's `ech=` holds): the SNI is then the inner, encrypted name.
    #[arg(long, value_name = "BASE64")]
    pub ech_config: Option<String>,
    /// Fail unless every connection had its Encrypted ClientHello accepted (needs --ech-config).
    #[arg(long, requires = "ech_config")]
    pub expect_ech: bool,
    /// TLS and TCP options (shared with `tlsgate bench`).
    #[command(flatten)]
    pub opts: TlsOpts,
}

/// A validated probe.
#[derive(Debug, Clone)]
pub struct ProbePlan {
    /// The options as given.
    pub args: ProbeArgs,
    /// Host (for SNI and `Host:`).
    pub host: String,
    /// Port.
    pub port: u16,
    /// Where to connect.
    pub addr: SocketAddr,
    /// ClientHello server name.
    pub sni: Option<String>,
    /// Request path.
    pub path: String,
    /// ALPN wire format.
    pub alpn_wire: Vec<u8>,
    /// Whether to send early data.
    pub early_data: bool,
    /// The expected version as BoringSSL names it (`TLSv1.3`).
    pub expect_version: Option<String>,
    /// The ECHConfigList to offer (`--ech-config`, decoded).
    pub ech_config_list: Option<Vec<u8>>,
}

/// `1.3`, `TLSv1.3`, `tls1.3` → `TLSv1.3`.
pub fn normalise_version(v: &str) -> anyhow::Result<String> {
    let lower = v.trim().to_ascii_lowercase();
    let digits = lower.trim_start_matches("tlsv").trim_start_matches("tls");
    match digits {
        "1.2" | "1.3" => Ok(format!("TLSv{digits}")),
        _ => bail!("unknown TLS version {v:?} (expected 1.2 or 1.3)"),
    }
}

impl ProbeArgs {
    /// Checks the options and resolves the target.
    pub fn plan(&self) -> anyhow::Result<ProbePlan> {
        if self.connections == 0 {
            bail!("-n must be at least 1");
        }
        let (authority, url_path) = match self.target.strip_prefix("https://") {
            Some(rest) => match rest.find('/') {
                Some(i) => (&rest[..i], Some(rest[i..].to_string())),
                None => (rest, None),
            },
            None => (self.target.as_str(), None),
        };
        let (host, port) = host_port(authority, 443).with_context(|| format!("{}: bad HOST:PORT", self.target))?;
        let addr = self.opts.addr(&host, port)?;
        let sni = self.opts.sni(&host);
        let path = self.path.clone().or(url_path).unwrap_or_else(|| "/".into());
        if !path.starts_with('/') {
            bail!("--path must start with /");
        }
        let expect_version = self.expect_version.as_deref().map(normalise_version).transpose()?;
        let ech_config_list = match &self.ech_config {
            Some(text) => Some(tlsgate_tls::ech::from_base64(text).context("--ech-config: not base64")?),
            None => None,
        };
        Ok(ProbePlan {
            args: self.clone(),
            host,
            port,
            addr,
            sni,
            path,
            alpn_wire: self.opts.alpn_wire("http/1.1")?,
            early_data: self.early_data || self.expect_early_data,
            expect_version,
            ech_config_list,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use clap::Parser;

    #[derive(clap::Parser)]
    struct Cli {
        #[command(flatten)]
        args: ProbeArgs,
    }

    fn plan(args: &[&str]) -> anyhow::Result<ProbePlan> {
        let mut all = vec!["probe"];
        all.extend_from_slice(args);
        Cli::try_parse_from(all)?.args.plan()
    }

    #[test]
    fn defaults_and_targets() {
        let p = plan(&["127.0.0.1:8443"]).unwrap();
        assert_eq!((p.args.connections, p.port, p.path.as_str()), (2, 8443, "/"));
        assert_eq!(p.sni, None);
        assert_eq!(p.alpn_wire, b"\x08http/1.1");
        let p = plan(&[
            "https://localhost:9/x?y",
            "--alpn",
            "h2,http/1.1",
            "--expect-early-data",
            "--sigalgs",
            "rsa_pss_rsae_sha256",
            "--connect-to",
            "127.0.0.1:8443",
        ])
        .unwrap();
        assert_eq!(p.addr, "127.0.0.1:8443".parse().unwrap());
        assert_eq!(p.port, 9, "the target still gives the port for Host");
        assert_eq!(p.args.opts.sigalgs.as_deref(), Some("rsa_pss_rsae_sha256"));
        assert_eq!((p.host.as_str(), p.path.as_str()), ("localhost", "/x?y"));
        assert_eq!(p.sni.as_deref(), Some("localhost"));
        assert_eq!(p.alpn_wire, b"\x02h2\x08http/1.1");
        assert!(p.early_data);
        assert_eq!(plan(&["localhost"]).unwrap().port, 443);
    }

    #[test]
    fn versions_and_bad_input() {
        assert_eq!(normalise_version("1.3").unwrap(), "TLSv1.3");
        assert_eq!(normalise_version("TLSv1.2").unwrap(), "TLSv1.2");
        assert!(normalise_version("1.1").is_err());
        assert!(plan(&["-n", "0", "127.0.0.1:1"]).is_err());
        assert!(plan(&["127.0.0.1:x"]).is_err());
        assert!(plan(&["--expect-resume", "--expect-no-resume", "127.0.0.1:1"]).is_err());
        assert!(plan(&["--path", "x", "127.0.0.1:1"]).is_err());
    }
}
