//! quic-go's HTTP/3 client (tests/go/h3client), a client tlsgate did not write, built once per
//! test binary with `go build`, a runner returning its JSON lines, and the configuration pieces
//! the HTTP/3 tests share (needs the test binary's `common` module).
#![allow(dead_code)]

use serde_json::Value;
use std::path::Path;
use std::sync::OnceLock;
use std::time::Duration;

/// The quic-go client, built once per test binary into a temporary directory.
pub fn h3client() -> &'static Path {
    static BUILT: OnceLock<tlsgate_testkit::go::GoProgram> = OnceLock::new();
    &BUILT
        .get_or_init(|| {
            let src = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/go/h3client");
            tlsgate_testkit::go::build(&src, "h3client")
        })
        .path
}

/// Runs the client with `args`; its JSON lines.
pub fn client(ca: &Path, args: &[&str]) -> Vec<Value> {
    let mut all = vec!["-ca", ca.to_str().unwrap()];
    all.extend_from_slice(args);
    let out = tlsgate_testkit::run(
        h3client().to_str().unwrap(),
        &all,
        b"",
        Duration::ZERO,
        Duration::from_secs(30),
    );
    out.stdout
        .lines()
        .map(|l| serde_json::from_str(l).unwrap_or_else(|e| panic!("{e}: {l}\n{}", out.all())))
        .collect()
}

/// An `[http3]` section with HTTP/3 on and `extra` lines.
pub fn http3(extra: &str) -> String {
    format!("[http3]\nenabled = true\n{extra}\n")
}

/// Routes everything but `/hello` to `origin`.
pub fn to_origin(origin: &tlsgate_testkit::Origin) -> String {
    format!(
        "{}{}",
        crate::common::upstream_route(None, "/", "o"),
        crate::common::upstream("o", &[origin.addr()], "")
    )
}
