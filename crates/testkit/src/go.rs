//! The tests' Go programs (`crates/tlsgate/tests/go/<name>`: clients tlsgate did not write, on Go's
//! own TLS, HTTP/2 and QUIC stacks), each built with `go build` into a temporary directory that
//! lives as long as the returned [`GoProgram`].

use std::path::{Path, PathBuf};

/// A built Go program.
#[derive(Debug)]
pub struct GoProgram {
    _dir: tempfile::TempDir,
    /// The executable.
    pub path: PathBuf,
}

/// Builds the Go module in `src` (a directory) as `name`. `TLSGATE_GO` names another `go` than
/// the one on `PATH` (scripts/deps.sh puts Go 1.26 first on `PATH`); a missing `go` or a failed
/// build fails the test, with go's own message.
pub fn build(src: &Path, name: &str) -> GoProgram {
    let go = std::env::var("TLSGATE_GO").unwrap_or_else(|_| "go".into());
    if go == "go" {
        crate::require("go");
    }
    let dir = tempfile::tempdir().expect("a temporary directory");
    let path = dir.path().join(name);
    let out = std::process::Command::new(&go)
        .args(["build", "-o"])
        .arg(&path)
        .arg(".")
        .current_dir(src)
        .env("GOFLAGS", "-mod=mod")
        .env("CGO_ENABLED", "0")
        .output()
        .expect("run go build");
    assert!(
        out.status.success(),
        "go build of {}: {}",
        src.display(),
        String::from_utf8_lossy(&out.stderr)
    );
    GoProgram { _dir: dir, path }
}
