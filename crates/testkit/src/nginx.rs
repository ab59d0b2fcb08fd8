//! nginx (Debian's `nginx-light`) as a real origin server: a configuration written into a
//! temporary directory, one foreground process (`master_process off`, so killing it leaves no
//! worker behind) on the ports the caller chose, killed on drop.
//!
//! The `http {}` block starts with every temporary path and the access log inside the temporary
//! directory, `ssl_protocols TLSv1.2 TLSv1.3` (nginx 1.22's default leaves TLS 1.3 out) and the
//! echo module loaded (`echo`, `echo_read_request_body`, `echo_request_body`; `nginx-light`
//! depends on `libnginx-mod-http-echo`); the caller's text (`server {}` blocks) follows.

use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

/// The echo module's shared object, as `libnginx-mod-http-echo` installs it.
const ECHO_MODULE: &str = "/usr/lib/nginx/modules/ngx_http_echo_module.so";

/// A running nginx, killed on drop.
pub struct Nginx {
    child: Child,
    dir: tempfile::TempDir,
}

impl Nginx {
    /// Starts nginx with `http` inside its `http {}` block and waits until every one of `ports`
    /// (which `http`'s `listen` directives name, on 127.0.0.1) accepts connections. Panics with
    /// nginx's error log if it exits or does not listen within 10 s.
    pub fn start(http: &str, ports: &[u16]) -> Self {
        crate::require("nginx");
        assert!(
            Path::new(ECHO_MODULE).is_file(),
            "{ECHO_MODULE} is missing; install nginx-light (it depends on libnginx-mod-http-echo)"
        );
        let dir = tempfile::tempdir().expect("temp dir");
        let d = dir.path().display().to_string();
        let conf = format!(
            r#"load_module {ECHO_MODULE};
worker_processes 1;
master_process off;
events {{ worker_connections 1024; }}
http {{
    access_log {d}/access.log;
    client_body_temp_path {d}/client_body;
    proxy_temp_path {d}/proxy;
    fastcgi_temp_path {d}/fastcgi;
    uwsgi_temp_path {d}/uwsgi;
    scgi_temp_path {d}/scgi;
    ssl_protocols TLSv1.2 TLSv1.3;
    default_type text/plain;
{http}
}}
"#
        );
        let conf_path = dir.path().join("nginx.conf");
        std::fs::write(&conf_path, conf).expect("write nginx.conf");
        let error_log = dir.path().join("error.log");
        let globals = format!("daemon off; pid {d}/nginx.pid; error_log {d}/error.log info;");
        let mut child = Command::new("nginx")
            .arg("-p")
            .arg(dir.path())
            .arg("-e")
            .arg(&error_log)
            .arg("-c")
            .arg(&conf_path)
            .args(["-g", &globals])
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .expect("start nginx");
        let deadline = Instant::now() + Duration::from_secs(10);
        for &port in ports {
            while !crate::listening(port) {
                let exited = child.try_wait().ok().flatten();
                if exited.is_some() || Instant::now() > deadline {
                    let _ = child.kill();
                    let _ = child.wait();
                    panic!(
                        "nginx did not listen on 127.0.0.1:{port} ({}):\n{}",
                        exited.map_or("still running after 10 s".to_string(), |s| s.to_string()),
                        std::fs::read_to_string(&error_log).unwrap_or_default()
                    );
                }
                std::thread::sleep(Duration::from_millis(20));
            }
        }
        Self { child, dir }
    }

    /// The temporary directory holding the configuration, the logs and the temporary paths.
    pub fn dir(&self) -> &Path {
        self.dir.path()
    }

    /// The configuration file nginx runs with.
    pub fn conf_path(&self) -> PathBuf {
        self.dir.path().join("nginx.conf")
    }

    /// nginx's error log so far.
    pub fn error_log(&self) -> String {
        std::fs::read_to_string(self.dir.path().join("error.log")).unwrap_or_default()
    }

    /// nginx's access log (combined format) so far.
    pub fn access_log(&self) -> String {
        std::fs::read_to_string(self.dir.path().join("access.log")).unwrap_or_default()
    }
}

impl Drop for Nginx {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}
