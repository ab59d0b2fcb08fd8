//! The server side of an experiment: a `tlsgate serve` process in namespace B with sites (one
//! per certificate chain, picked by SNI) and fixed-response routes `/n/<N>/` answering N bytes.
//! Killed (SIGTERM, then SIGKILL) on drop.

use crate::netns::{self, Netns};
use crate::topology::ADDR_B;
use anyhow::{bail, Context};
use std::fmt::Write as _;
use std::net::{SocketAddr, TcpStream};
use std::path::{Path, PathBuf};
use std::process::{Child, Stdio};
use std::time::{Duration, Instant};

/// One site (certificate chain) of the gateway.
#[derive(Debug, Clone)]
pub struct Site {
    /// Site name, also the SNI it answers to (`<name>.lab`).
    pub name: String,
    /// Chain PEM.
    pub chain: PathBuf,
    /// Key PEM.
    pub key: PathBuf,
    /// A DER OCSP response to staple; `None` = no stapling.
    pub ocsp_file: Option<PathBuf>,
    /// Further certificates of the site, (chain PEM, key PEM): e.g. an ML-DSA chain beside the
    /// ECDSA one, served to clients that offer its scheme.
    pub extra: Vec<(PathBuf, PathBuf)>,
}

impl Site {
    /// The SNI of this site.
    pub fn sni(&self) -> String {
        format!("{}.lab", self.name)
    }
}

/// Gateway settings an experiment varies.
#[derive(Debug, Clone)]
pub struct GatewaySpec {
    /// HTTPS port on 10.77.0.2.
    pub port: u16,
    /// Admin port on B's loopback.
    pub admin_port: u16,
    /// `tls.dynamic_records`.
    pub dynamic_records: bool,
    /// `tls.tickets.early_data`.
    pub early_data: bool,
    /// Listener `tcp_fastopen` queue (0 = off).
    pub tcp_fastopen: u32,
    /// Sites; the first is the default.
    pub sites: Vec<Site>,
    /// Response sizes served at `/n/<N>/`.
    pub bodies: Vec<usize>,
    /// `server.handshake_timeout` and `server.silent_timeout`, seconds; `None` = the gateway's
    /// defaults (10 s and 5 s). The experiments use [`LAB_HANDSHAKE_TIMEOUT_S`]: on a lossy
    /// emulated link a handshake can legitimately take longer than 10 s (retransmission timeouts
    /// back off to 3, 6, 12 s), and a gateway that gives up on it closes a connection whose
    /// client already finished its side of the handshake and sent its request (issue 22).
    pub handshake_timeout_s: Option<u64>,
    /// `[http3] enabled` (QUIC on the same port, UDP), with `retry = "never"`: no Retry round
    /// trip, so a new client's address is unvalidated until its Handshake packets arrive and
    /// the anti-amplification limit (3x the bytes received) applies to the server's first flight.
    pub http3: bool,
    /// `[http3] congestion_control` (`bbr2`, `cubic`, `reno`); `None` = the gateway's default.
    pub quic_congestion_control: Option<String>,
}

/// The experiments' handshake and silent timeouts: the clients' own timeout (`probe --timeout`).
pub const LAB_HANDSHAKE_TIMEOUT_S: u64 = 60;

impl GatewaySpec {
    /// The configuration file's text.
    pub fn to_toml(&self) -> String {
        let mut s = String::new();
        let _ = writeln!(s, "[server]\nworkers = 1");
        if let Some(t) = self.handshake_timeout_s {
            let _ = writeln!(s, "handshake_timeout = \"{t}s\"\nsilent_timeout = \"{t}s\"");
        }
        let _ = writeln!(s, "\n[log]\nlevel = \"warn\"\naccess_log = false\n");
        let _ = writeln!(s, "[admin]\nlisten = \"127.0.0.1:{}\"\n", self.admin_port);
        let _ = writeln!(
            s,
            "[tls]\ncert_compression = false\ndynamic_records = {}\n",
            self.dynamic_records
        );
        let _ = writeln!(s, "[tls.tickets]\nearly_data = {}\n", self.early_data);
        if self.http3 {
            let _ = writeln!(s, "[http3]\nenabled = true\nretry = \"never\"");
            if let Some(cc) = &self.quic_congestion_control {
                let _ = writeln!(s, "congestion_control = \"{cc}\"");
            }
            let _ = writeln!(s);
        }
        let _ = writeln!(
            s,
            "[[listener]]\nlisten = \"{}:{}\"\ntcp_fastopen = {}\n",
            ADDR_B, self.port, self.tcp_fastopen
        );
        for (i, site) in self.sites.iter().enumerate() {
            let _ = writeln!(
                s,
                "[[site]]\nname = \"{}\"\nserver_names = [\"{}\"]\ndefault = {}\n",
                site.name,
                site.sni(),
                i == 0
            );
            let _ = writeln!(
                s,
                "[[site.certificate]]\nchain = {:?}\nkey = {:?}",
                site.chain.display().to_string(),
                site.key.display().to_string()
            );
            match &site.ocsp_file {
                Some(f) => {
                    let _ = writeln!(s, "ocsp_file = {:?}\n", f.display().to_string());
                }
                None => {
                    let _ = writeln!(s, "ocsp = \"off\"\n");
                }
            }
            for (chain, key) in &site.extra {
                let _ = writeln!(
                    s,
                    "[[site.certificate]]\nchain = {:?}\nkey = {:?}\nocsp = \"off\"\n",
                    chain.display().to_string(),
                    key.display().to_string()
                );
            }
            for n in &self.bodies {
                let _ = writeln!(
                    s,
                    "[[site.route]]\npath_prefix = \"/n/{n}/\"\nfixed_response = {{ status = 200, body = \"{}\", content_type = \"application/octet-stream\" }}\n",
                    "x".repeat(*n)
                );
            }
        }
        s
    }
}

/// A running gateway.
#[derive(Debug)]
pub struct Gateway {
    child: Child,
    /// Where clients connect.
    pub addr: SocketAddr,
    /// Its log (stderr).
    pub log: PathBuf,
}

impl Gateway {
    /// Writes `<dir>/<stem>.toml` and starts `exe serve` inside `ns`; returns once it accepts
    /// connections.
    pub fn start(exe: &Path, ns: &Netns, dir: &Path, stem: &str, spec: &GatewaySpec) -> anyhow::Result<Self> {
        let conf = dir.join(format!("{stem}.toml"));
        std::fs::write(&conf, spec.to_toml()).with_context(|| format!("write {}", conf.display()))?;
        let log = dir.join(format!("{stem}.log"));
        let child = ns
            .command(exe)
            .arg("serve")
            .arg("--config")
            .arg(&conf)
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(std::fs::File::create(&log)?)
            .spawn()
            .context("cannot start tlsgate serve")?;
        netns::register_child(child.id());
        let mut gw = Self {
            child,
            addr: SocketAddr::from((ADDR_B, spec.port)),
            log,
        };
        let addr = gw.addr;
        let deadline = Instant::now() + Duration::from_secs(20);
        loop {
            if let Some(st) = gw.child.try_wait()? {
                bail!(
                    "tlsgate serve exited ({st}): {}",
                    std::fs::read_to_string(&gw.log).unwrap_or_default()
                );
            }
            let ok = ns
                .spawn(move || TcpStream::connect_timeout(&addr, Duration::from_millis(200)).is_ok())?
                .join()
                .unwrap_or(false);
            if ok {
                return Ok(gw);
            }
            if Instant::now() > deadline {
                bail!(
                    "tlsgate serve did not listen on {addr}: {}",
                    std::fs::read_to_string(&gw.log).unwrap_or_default()
                );
            }
            std::thread::sleep(Duration::from_millis(100));
        }
    }
}

impl Drop for Gateway {
    fn drop(&mut self) {
        let pid = nix::unistd::Pid::from_raw(self.child.id() as i32);
        let _ = nix::sys::signal::kill(pid, nix::sys::signal::Signal::SIGTERM);
        let deadline = Instant::now() + Duration::from_secs(3);
        while Instant::now() < deadline {
            if let Ok(Some(_)) = self.child.try_wait() {
                break;
            }
            std::thread::sleep(Duration::from_millis(20));
        }
        let _ = self.child.kill();
        let _ = self.child.wait();
        netns::unregister_child(self.child.id());
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn spec(timeout: Option<u64>) -> GatewaySpec {
        GatewaySpec {
            port: 443,
            admin_port: 9090,
            dynamic_records: true,
            early_data: false,
            tcp_fastopen: 0,
            sites: vec![Site {
                name: "a".into(),
                chain: "a.pem".into(),
                key: "a.key".into(),
                ocsp_file: None,
                extra: vec![("m.pem".into(), "m.key".into())],
            }],
            bodies: vec![10],
            handshake_timeout_s: timeout,
            http3: false,
            quic_congestion_control: None,
        }
    }

    #[test]
    fn timeouts_and_extra_certificates_reach_the_configuration() {
        let t = spec(Some(LAB_HANDSHAKE_TIMEOUT_S)).to_toml();
        let server = &t[t.find("[server]").unwrap()..t.find("[log]").unwrap()];
        assert!(server.contains("handshake_timeout = \"60s\""), "{t}");
        assert!(server.contains("silent_timeout = \"60s\""), "{t}");
        assert!(!spec(None).to_toml().contains("handshake_timeout"));
        assert_eq!(t.matches("[[site.certificate]]").count(), 2, "{t}");
        assert!(t.contains("chain = \"m.pem\"\nkey = \"m.key\"\nocsp = \"off\""), "{t}");
        assert!(!t.contains("[http3]"));
        let h3 = GatewaySpec {
            http3: true,
            ..spec(None)
        }
        .to_toml();
        assert!(h3.contains("[http3]\nenabled = true\nretry = \"never\""), "{h3}");
    }
}
