//! `tlsgate serve --demo`: a working gateway on a fresh machine with no files at all.
//!
//! Creates (once) a throwaway CA and two leaves for localhost (ECDSA P-256 and RSA-2048) in the
//! state directory, writes the configuration it runs with next to them (`tlsgate.toml`, a
//! starting point for a real one), and serves a built-in page.

use anyhow::Context;
use std::path::{Path, PathBuf};

/// Ports the demo listens on (all on 127.0.0.1).
#[derive(Debug, Clone, Copy)]
pub struct DemoPorts {
    pub https: u16,
    pub http: u16,
    pub admin: u16,
}

const PAGE: &str = r#"<!doctype html><html><head><meta charset="utf-8"><title>tlsgate</title></head><body><h1>tlsgate is serving</h1><p>This page came through a TLS 1.3/1.2 gateway on BoringSSL. See /metrics on the admin port for handshake counts, and try <code>openssl s_client -connect localhost:PORT -reconnect</code> to watch session resumption.</p></body></html>"#;

/// Makes sure the demo PKI and configuration exist; returns the configuration's path.
pub fn prepare(state_dir: &Path, ports: DemoPorts) -> anyhow::Result<PathBuf> {
    std::fs::create_dir_all(state_dir)
        .with_context(|| format!("cannot create state directory {}", state_dir.display()))?;
    let ca_path = state_dir.join("ca.pem");
    if !ca_path.exists() || !state_dir.join("ecdsa.key").exists() || !state_dir.join("rsa.key").exists() {
        let pki = tlsgate_tls::pki::demo_pki()?;
        // Private keys (the CA's too) readable by their owner only; certificates by everyone.
        let write = |name: &str, text: &str, mode: u32| -> anyhow::Result<()> {
            use std::io::Write;
            use std::os::unix::fs::OpenOptionsExt;
            let p = state_dir.join(name);
            let _ = std::fs::remove_file(&p);
            std::fs::OpenOptions::new()
                .write(true)
                .create_new(true)
                .mode(mode)
                .open(&p)
                .and_then(|mut f| f.write_all(text.as_bytes()))
                .with_context(|| format!("cannot write {}", p.display()))
        };
        write("ecdsa.pem", &pki.ecdsa.cert_pem, 0o644)?;
        write("ecdsa.key", &pki.ecdsa.key_pem, 0o600)?;
        write("rsa.pem", &pki.rsa.cert_pem, 0o644)?;
        write("rsa.key", &pki.rsa.key_pem, 0o600)?;
        write("ca.key", &pki.ca.key_pem, 0o600)?;
        write("ca.pem", &pki.ca.cert_pem, 0o644)?;
    }
    // Keys an earlier version wrote world-readable are closed up.
    for key in ["ecdsa.key", "rsa.key", "ca.key"] {
        use std::os::unix::fs::PermissionsExt;
        let p = state_dir.join(key);
        if std::fs::metadata(&p).is_ok_and(|m| m.permissions().mode() & 0o077 != 0) {
            std::fs::set_permissions(&p, std::fs::Permissions::from_mode(0o600))
                .with_context(|| format!("cannot chmod 600 {}", p.display()))?;
        }
    }
    let config = format!(
        r#"# Written by `tlsgate serve --demo`; edit a copy for real use (docs/CONFIG.md).
[admin]
listen = "127.0.0.1:{admin}"

# `tlsgate serve --demo --upgrade` (or kill -USR2) takes over from a running demo: a binary
# upgrade without refusing a connection (docs/OPERATIONS.md, "Upgrading the binary").
[server]
upgrade_socket = "upgrade.sock"

[[listener]]
listen = "127.0.0.1:{https}"

[[listener]]
listen = "127.0.0.1:{http}"
kind = "redirect"
https_port = {https}

# HTTP/3 over QUIC on the same port (UDP), advertised to TCP clients with Alt-Svc (docs/HTTP3.md).
[http3]
enabled = true
alt_svc = true

[[site]]
name = "demo"
server_names = ["localhost", "127.0.0.1"]
default = true

[[site.certificate]]
chain = "ecdsa.pem"
key = "ecdsa.key"

[[site.certificate]]
chain = "rsa.pem"
key = "rsa.key"

# A fixed 13-byte answer for benchmarks.
[[site.route]]
path_prefix = "/hello"
fixed_response = {{ body = "Hello, world!" }}

[[site.route]]
path_prefix = "/"
fixed_response = {{ body = '{page}', content_type = "text/html; charset=utf-8" }}
"#,
        admin = ports.admin,
        https = ports.https,
        http = ports.http,
        page = PAGE,
    );
    let path = state_dir.join("tlsgate.toml");
    std::fs::write(&path, config).with_context(|| format!("cannot write {}", path.display()))?;
    Ok(path)
}

/// What to print once the demo is up.
pub fn banner(state_dir: &Path, ports: DemoPorts) -> String {
    let ca = state_dir.join("ca.pem");
    let ca = ca.display();
    let (https, http, admin) = (ports.https, ports.http, ports.admin);
    format!(
        "\ntlsgate demo is up.\n\
         \n  page      https://localhost:{https}/   (plain http://localhost:{http}/ redirects there)\
         \n  metrics   http://127.0.0.1:{admin}/metrics\
         \n  config    {state}/tlsgate.toml\
         \n\nTry:\
         \n  curl --cacert {ca} https://localhost:{https}/hello\
         \n  curl --cacert {ca} --http2 -sI https://localhost:{https}/   (Alt-Svc: HTTP/3 on UDP {https})\
         \n  openssl s_client -connect localhost:{https} -servername localhost -CAfile {ca} -tls1_2 -reconnect </dev/null | grep -E '^(New|Reused)'\
         \n  curl -s http://127.0.0.1:{admin}/metrics | grep tlsgate_handshakes\
         \n  {exe} reload --config {state}/tlsgate.toml\n",
        state = state_dir.display(),
        exe = std::env::current_exe().map_or_else(|_| "tlsgate".to_string(), |p| p.display().to_string()),
    )
}
