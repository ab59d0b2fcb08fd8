//! The Debian package (issue #26 part 3). scripts/package.sh builds it once per run from the
//! release binary these tests were built with (`--no-build --fast`, into
//! `$CARGO_TARGET_TMPDIR/package-test`); dpkg-deb lists, reads and unpacks it. It is never
//! installed (`dpkg -i` would change the machine): in the unpacked tree the postinst's file steps
//! are replayed with the tree as root — the placeholder certificate by the very command line the
//! packaged postinst runs, its paths prefixed with the tree; the log directory — and then:
//!
//! - the file list, modes, owners, control fields, conffiles and maintainer scripts are the
//!   intended ones, and the unit, example configuration and logrotate snippet are the files of
//!   dist/ byte for byte (tests/systemd.rs runs `systemd-analyze verify` on that unit);
//! - the unpacked `tlsgate check` accepts the example configuration with one path moved into the
//!   tree (`/var/log/tlsgate/`, the access log's directory, which the postinst makes);
//! - the unpacked gateway serves the example configuration (listeners and admin moved to free
//!   loopback ports) over TLS with the placeholder certificate, and the logrotate snippet —
//!   accepted as shipped by `logrotate -d`, then run for real with its paths pointed at that
//!   gateway and `systemctl` stubbed — rotates the access log and gets the gateway to reopen it;
//! - the bash completion parses (`bash -n`) and completes subcommands and options; the zsh and
//!   fish files are completion scripts for tlsgate; none offers the hidden `generate` helper;
//! - every man page parses without a warning (`groff -k -man -ww`) and describes its command.

mod common;

use std::path::{Path, PathBuf};
use std::process::Command;
use std::sync::OnceLock;
use std::time::Duration;
use tlsgate_testkit::{free_port, require};

/// The package, built and unpacked once for all the tests of this file.
struct Unpacked {
    /// The .deb.
    deb: PathBuf,
    /// Its files (`dpkg-deb -x`), with the postinst's file steps replayed.
    root: PathBuf,
    /// Its control files (`dpkg-deb -e`).
    control: PathBuf,
    /// Where package.sh wrote its output (the -dbgsym .ddeb too).
    out: PathBuf,
}

impl Unpacked {
    fn file(&self, absolute: &str) -> PathBuf {
        rebase(&self.root, absolute)
    }

    fn text(&self, absolute: &str) -> String {
        std::fs::read_to_string(self.file(absolute)).unwrap_or_else(|e| panic!("{absolute}: {e}"))
    }

    fn binary(&self) -> PathBuf {
        self.file("/usr/bin/tlsgate")
    }
}

fn repo() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../..")
}

/// `/etc/x` under `root`.
fn rebase(root: &Path, absolute: &str) -> PathBuf {
    root.join(absolute.strip_prefix('/').expect("an absolute path"))
}

/// `text` with `from` replaced by `to`, which must occur exactly `times` times (the shipped
/// file's shape is pinned: a rewrite that silently matches nothing would test nothing).
fn replace(text: &str, from: &str, to: &str, times: usize) -> String {
    assert_eq!(text.matches(from).count(), times, "{from:?} in:\n{text}");
    text.replace(from, to)
}

fn run_ok(cmd: &mut Command) -> String {
    let out = cmd.output().unwrap_or_else(|e| panic!("{cmd:?}: {e}"));
    let said = format!(
        "{}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(out.status.success(), "{cmd:?}: {}\n{said}", out.status);
    String::from_utf8_lossy(&out.stdout).into_owned()
}

fn package() -> &'static Unpacked {
    static PACKAGE: OnceLock<Unpacked> = OnceLock::new();
    PACKAGE.get_or_init(build_and_unpack)
}

fn build_and_unpack() -> Unpacked {
    require("dpkg-deb");
    let dir = Path::new(env!("CARGO_TARGET_TMPDIR")).join("package-test");
    let _ = std::fs::remove_dir_all(&dir);
    let (out, root, control) = (dir.join("out"), dir.join("root"), dir.join("control"));
    std::fs::create_dir_all(&out).unwrap();
    // The binary these tests were built with: target/release/tlsgate.
    let target = common::binary().parent().and_then(Path::parent).expect("target dir");
    run_ok(
        Command::new(repo().join("scripts/package.sh"))
            .args(["--no-build", "--fast", "--output"])
            .arg(format!("{}/", out.display()))
            .env("CARGO_TARGET_DIR", target),
    );
    let deb = std::fs::read_dir(&out)
        .unwrap()
        .map(|e| e.unwrap().path())
        .find(|p| {
            let name = p.file_name().unwrap().to_string_lossy();
            name.starts_with("tlsgate_") && name.ends_with(".deb")
        })
        .expect("package.sh wrote no tlsgate_*.deb");
    run_ok(Command::new("dpkg-deb").arg("-x").arg(&deb).arg(&root));
    run_ok(Command::new("dpkg-deb").arg("-e").arg(&deb).arg(&control));

    // The postinst's file steps, under `root`: the log directory, then the placeholder
    // certificate made by the postinst's own command line with its paths rebased.
    std::fs::create_dir_all(rebase(&root, "/var/log/tlsgate")).unwrap();
    std::fs::create_dir_all(rebase(&root, "/etc/tlsgate/tls")).unwrap();
    let postinst = std::fs::read_to_string(control.join("postinst")).unwrap();
    let line = postinst
        .lines()
        .find(|l| l.contains("generate placeholder-certificate"))
        .expect("the postinst makes the placeholder certificate");
    let words: Vec<PathBuf> = line
        .split_whitespace()
        .take_while(|w| !w.starts_with('>'))
        .map(|w| {
            if w.starts_with('/') {
                rebase(&root, w)
            } else {
                PathBuf::from(w)
            }
        })
        .collect();
    assert_eq!(words[0], rebase(&root, "/usr/bin/tlsgate"), "{line}");
    run_ok(Command::new(&words[0]).args(&words[1..]));
    Unpacked {
        deb,
        root,
        control,
        out,
    }
}

/// `dpkg-deb -c`: (mode, owner, path) per entry.
fn listing(deb: &Path) -> Vec<(String, String, String)> {
    run_ok(Command::new("dpkg-deb").arg("-c").arg(deb))
        .lines()
        .map(|l| {
            let f: Vec<&str> = l.split_whitespace().collect();
            (
                f[0].to_string(),
                f[1].to_string(),
                f[5].trim_start_matches('.').to_string(),
            )
        })
        .collect()
}

#[test]
fn the_package_holds_the_intended_files_fields_and_scripts() {
    let p = package();
    let files = listing(&p.deb);
    let mode_of = |path: &str| {
        files
            .iter()
            .find(|(_, _, f)| f == path)
            .map(|(m, _, _)| m.as_str())
            .unwrap_or_else(|| panic!("{path} is not in the package: {files:#?}"))
    };
    for (path, mode) in [
        ("/usr/bin/tlsgate", "-rwxr-xr-x"),
        ("/etc/tlsgate/tlsgate.toml", "-rw-r--r--"),
        ("/etc/logrotate.d/tlsgate", "-rw-r--r--"),
        ("/usr/lib/systemd/system/tlsgate.service", "-rw-r--r--"),
        ("/usr/share/bash-completion/completions/tlsgate", "-rw-r--r--"),
        ("/usr/share/zsh/vendor-completions/_tlsgate", "-rw-r--r--"),
        ("/usr/share/fish/vendor_completions.d/tlsgate.fish", "-rw-r--r--"),
        ("/usr/share/man/man1/tlsgate.1.gz", "-rw-r--r--"),
        ("/usr/share/doc/tlsgate/copyright", "-rw-r--r--"),
        ("/usr/share/doc/tlsgate/CONFIG.md", "-rw-r--r--"),
        ("/usr/share/doc/tlsgate/OPERATIONS.md", "-rw-r--r--"),
    ] {
        assert_eq!(mode_of(path), mode, "{path}");
    }
    // A man page per subcommand (nested ones too), none for the hidden helper.
    let pages: Vec<&str> = files
        .iter()
        .filter_map(|(_, _, f)| f.strip_prefix("/usr/share/man/man1/"))
        .filter(|f| !f.is_empty())
        .collect();
    for cmd in [
        "serve",
        "check",
        "reload",
        "reopen-logs",
        "bench",
        "probe",
        "keyserver",
        "ctl",
        "ctl-show",
        "console",
        "lab",
        "import",
        "import-nginx",
    ] {
        let page = format!("tlsgate-{cmd}.1.gz");
        assert!(pages.contains(&page.as_str()), "{page} missing: {pages:?}");
    }
    assert!(
        !pages.iter().any(|p| p.contains("generate") || p.contains("help")),
        "{pages:?}"
    );
    assert!(files.iter().all(|(_, owner, _)| owner == "0/0"), "{files:#?}");
    // Debug info goes to the -dbgsym package, not this one.
    assert!(
        !files.iter().any(|(_, _, f)| f.starts_with("/usr/lib/debug")),
        "{files:#?}"
    );
    let ddeb = std::fs::read_dir(&p.out)
        .unwrap()
        .map(|e| e.unwrap().path())
        .find(|f| f.to_string_lossy().ends_with(".ddeb"))
        .expect("no -dbgsym .ddeb");
    assert!(
        listing(&ddeb)
            .iter()
            .any(|(_, _, f)| f.starts_with("/usr/lib/debug/.build-id/") && f.ends_with(".debug")),
        "{ddeb:?}"
    );

    // The shipped files are dist/'s.
    for (shipped, source) in [
        (
            "/usr/lib/systemd/system/tlsgate.service",
            "dist/systemd/tlsgate.service",
        ),
        ("/etc/tlsgate/tlsgate.toml", "dist/debian/tlsgate.toml"),
        ("/etc/logrotate.d/tlsgate", "dist/debian/logrotate"),
    ] {
        assert_eq!(
            p.text(shipped),
            std::fs::read_to_string(repo().join(source)).unwrap(),
            "{shipped} differs from {source}"
        );
    }
    let unit = p.text("/usr/lib/systemd/system/tlsgate.service");
    assert!(
        unit.lines()
            .any(|l| l == "ExecStart=/usr/bin/tlsgate serve --config /etc/tlsgate/tlsgate.toml"),
        "{unit}"
    );

    // Control fields.
    let field = |name: &str| {
        run_ok(Command::new("dpkg-deb").arg("-f").arg(&p.deb).arg(name))
            .trim()
            .to_string()
    };
    let arch = run_ok(Command::new("dpkg").arg("--print-architecture"));
    assert_eq!(field("Package"), "tlsgate");
    assert_eq!(field("Version"), format!("{}-1", env!("CARGO_PKG_VERSION")));
    assert_eq!(field("Architecture"), arch.trim());
    assert_eq!(field("Section"), "httpd");
    assert_eq!(field("Recommends"), "logrotate");
    let depends = field("Depends");
    assert!(depends.contains("libc6") && depends.contains("passwd"), "{depends}");
    assert!(!field("Maintainer").is_empty() && !field("Description").is_empty());
    let mut conffiles: Vec<String> = std::fs::read_to_string(p.control.join("conffiles"))
        .unwrap()
        .lines()
        .map(str::to_string)
        .collect();
    conffiles.sort();
    assert_eq!(conffiles, ["/etc/logrotate.d/tlsgate", "/etc/tlsgate/tlsgate.toml"]);

    // Maintainer scripts: valid sh, the systemd fragments in place of #DEBHELPER#, the unit
    // neither enabled nor started at installation, restarted after an upgrade if running.
    for script in ["postinst", "prerm", "postrm"] {
        let path = p.control.join(script);
        run_ok(Command::new("sh").arg("-n").arg(&path));
        let text = std::fs::read_to_string(&path).unwrap();
        assert!(!text.contains("#DEBHELPER#"), "{script}:\n{text}");
        use std::os::unix::fs::PermissionsExt;
        let mode = std::fs::metadata(&path).unwrap().permissions().mode();
        assert_eq!(mode & 0o111, 0o111, "{script} is not executable");
    }
    let postinst = std::fs::read_to_string(p.control.join("postinst")).unwrap();
    assert!(postinst.contains("useradd --system --user-group"), "{postinst}");
    assert!(
        postinst.contains("deb-systemd-invoke try-restart tlsgate.service"),
        "{postinst}"
    );
    assert!(!postinst.contains("deb-systemd-invoke start"), "{postinst}");
    let postrm = std::fs::read_to_string(p.control.join("postrm")).unwrap();
    assert!(postrm.contains("deb-systemd-helper purge tlsgate.service"), "{postrm}");
}

#[test]
fn the_example_configuration_passes_check_once_the_postinst_has_run() {
    let p = package();
    let version = run_ok(Command::new(p.binary()).arg("--version"));
    assert_eq!(version.trim(), format!("tlsgate {}", env!("CARGO_PKG_VERSION")));
    // Next to the shipped file (its relative certificate paths resolve the same), with the access
    // log's directory moved into the tree.
    let shipped = p.text("/etc/tlsgate/tlsgate.toml");
    let under_root = replace(
        &shipped,
        "\"/var/log/tlsgate/",
        &format!("\"{}/", p.file("/var/log/tlsgate").display()),
        1,
    );
    let config = p.file("/etc/tlsgate/check-under-root.toml");
    std::fs::write(&config, under_root).unwrap();
    let out = Command::new(p.binary())
        .args(["check", "--config"])
        .arg(&config)
        .output()
        .unwrap();
    let said = String::from_utf8_lossy(&out.stdout);
    assert_eq!(
        out.status.code(),
        Some(0),
        "{said}{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(said.contains(": 0 error(s)"), "{said}");
    // Its only findings are about the placeholder (the CA in the chain).
    for line in said.lines().filter(|l| l.contains(": warning: ")) {
        assert!(line.contains("placeholder.pem"), "{said}");
    }
}

#[test]
fn the_example_configuration_serves_and_logrotate_rotates_its_access_log() {
    require("curl");
    require("logrotate");
    let p = package();
    let (https, http, admin) = (free_port(), free_port(), free_port());
    let dir = tempfile::tempdir().unwrap();
    let work = dir.path().to_path_buf();
    let logs = work.join("log");
    std::fs::create_dir(&logs).unwrap();
    let placeholder = p.file("/etc/tlsgate/tls/placeholder.pem");

    // The shipped configuration, moved onto free loopback ports and this test's directories.
    let mut text = p.text("/etc/tlsgate/tlsgate.toml");
    for (from, to, times) in [
        ("listen = \"0.0.0.0:443\"", format!("listen = \"127.0.0.1:{https}\""), 1),
        ("listen = \"0.0.0.0:80\"", format!("listen = \"127.0.0.1:{http}\""), 1),
        (
            "listen = \"127.0.0.1:9090\"",
            format!("listen = \"127.0.0.1:{admin}\""),
            1,
        ),
        ("\"/var/log/tlsgate/", format!("\"{}/", logs.display()), 1),
        (
            "\"tls/placeholder.",
            format!("\"{}/placeholder.", p.file("/etc/tlsgate/tls").display()),
            2,
        ),
    ] {
        text = replace(&text, from, &to, times);
    }
    let config = work.join("tlsgate.toml");
    std::fs::write(&config, text).unwrap();
    let gw = tlsgate_testkit::GatewayProcess::spawn(
        &p.binary(),
        &["serve", "--config", config.to_str().unwrap()],
        dir,
        config.clone(),
        admin,
        &[https, http],
    )
    .unwrap_or_else(|e| panic!("the unpacked gateway did not start: {e}"));

    // TLS with the placeholder (its chain file holds the CA that issued it) and the fixed page.
    let get = |path: &str| {
        let url = format!("https://localhost:{https}{path}");
        let out = tlsgate_testkit::run(
            "curl",
            &[
                "-sS",
                "--max-time",
                "10",
                "--cacert",
                placeholder.to_str().unwrap(),
                "-w",
                "\n%{http_code}",
                &url,
            ],
            b"",
            Duration::ZERO,
            Duration::from_secs(15),
        );
        assert_eq!(out.status, Some(0), "{}\n{}", out.all(), gw.log());
        assert!(out.stdout.ends_with("\n503"), "{}", out.stdout);
        assert!(out.stdout.contains("tlsgate is installed"), "{}", out.stdout);
    };
    let access = logs.join("access.log");
    let read = |p: &Path| std::fs::read_to_string(p).unwrap_or_default();
    get("/first");
    assert!(
        common::wait_until(Duration::from_secs(10), || read(&access).contains("/first")),
        "{}",
        gw.log()
    );

    // `logrotate -d` accepts the snippet as shipped.
    let state = work.join("logrotate.state");
    let snippet = p.file("/etc/logrotate.d/tlsgate");
    run_ok(Command::new("logrotate").arg("-d").arg("-s").arg(&state).arg(&snippet));

    // Run for real with its paths on this gateway; `systemctl` (is-active) is a stub that says
    // yes and records what it was asked; `tlsgate` is the unpacked one.
    let conf = work.join("logrotate.conf");
    let mut rotate = replace(
        &p.text("/etc/logrotate.d/tlsgate"),
        "/var/log/tlsgate/",
        &format!("{}/", logs.display()),
        1,
    );
    // The configuration is named twice: in the header comment and in the command.
    rotate = replace(&rotate, "/etc/tlsgate/tlsgate.toml", config.to_str().unwrap(), 2);
    std::fs::write(&conf, rotate).unwrap();
    let stub = work.join("stub");
    std::fs::create_dir(&stub).unwrap();
    let calls = work.join("systemctl.calls");
    let systemctl = stub.join("systemctl");
    std::fs::write(
        &systemctl,
        format!(
            "#!/bin/sh\necho \"$*\" >> {}\n[ \"$*\" = \"--quiet is-active tlsgate.service\" ]\n",
            calls.display()
        ),
    )
    .unwrap();
    use std::os::unix::fs::PermissionsExt;
    std::fs::set_permissions(&systemctl, std::fs::Permissions::from_mode(0o755)).unwrap();
    let path = format!(
        "{}:{}:{}",
        stub.display(),
        p.file("/usr/bin").display(),
        std::env::var("PATH").unwrap_or_default()
    );
    let out = Command::new("logrotate")
        .args(["-v", "-f", "-s"])
        .arg(&state)
        .arg(&conf)
        .env("PATH", path)
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "logrotate: {}\n{}\n{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr),
        gw.log()
    );
    // reopen-logs did it: systemctl was only asked whether the unit runs.
    assert_eq!(read(&calls), "--quiet is-active tlsgate.service\n");
    assert!(gw.log().contains("access log reopened"), "{}", gw.log());
    let rotated = logs.join("access.log.1");
    assert!(
        read(&rotated).contains("/first"),
        "{:?}",
        std::fs::read_dir(&logs).unwrap().collect::<Vec<_>>()
    );

    // The next request goes to the new file, not to the rotated one.
    get("/second");
    assert!(
        common::wait_until(Duration::from_secs(10), || read(&access).contains("/second")),
        "{}",
        gw.log()
    );
    assert!(!read(&access).contains("/first"));
    assert!(!read(&rotated).contains("/second"));
}

#[test]
fn the_completions_parse_and_complete_subcommands_and_options() {
    require("bash");
    let p = package();
    let bash = p.file("/usr/share/bash-completion/completions/tlsgate");
    run_ok(Command::new("bash").arg("-n").arg(&bash));
    let complete = |words: &[&str]| -> Vec<String> {
        let line = words.join(" ");
        let script = format!(
            "source '{}'; complete -p tlsgate; COMP_WORDS=({line}); COMP_CWORD={}; COMP_LINE='{line}'; \
             COMP_POINT=${{#COMP_LINE}}; _tlsgate tlsgate '{}' '{}'; printf '%s\\n' \"${{COMPREPLY[@]}}\"",
            bash.display(),
            words.len() - 1,
            words[words.len() - 1],
            words[words.len() - 2],
        );
        let out = run_ok(Command::new("bash").arg("-c").arg(script));
        let mut lines = out.lines();
        let registration = lines.next().unwrap_or_default();
        assert!(
            registration.contains("-F _tlsgate") && registration.ends_with(" tlsgate"),
            "{out}"
        );
        lines.filter(|l| !l.is_empty()).map(str::to_string).collect()
    };
    assert_eq!(complete(&["tlsgate", "re"]), ["reload", "reopen-logs"]);
    let options = complete(&["tlsgate", "check", "--c"]);
    assert!(
        options.contains(&"--config".to_string()) && options.contains(&"--ca".to_string()),
        "{options:?}"
    );
    assert!(complete(&["tlsgate", "gen"]).is_empty(), "the hidden helper is offered");

    let zsh = p.text("/usr/share/zsh/vendor-completions/_tlsgate");
    assert!(zsh.starts_with("#compdef tlsgate\n"), "{}", &zsh[..zsh.len().min(200)]);
    let fish = p.text("/usr/share/fish/vendor_completions.d/tlsgate.fish");
    assert!(fish.contains("complete -c tlsgate ") && fish.contains("reopen-logs"));
    for (shell, text) in [
        ("bash", p.text("/usr/share/bash-completion/completions/tlsgate")),
        ("zsh", zsh),
        ("fish", fish),
    ] {
        assert!(
            !text.contains("generate"),
            "{shell} completion offers the hidden helper"
        );
    }
}

#[test]
fn every_man_page_parses_and_describes_its_command() {
    require("groff");
    require("gzip");
    let p = package();
    let dir = p.file("/usr/share/man/man1");
    let mut pages: Vec<PathBuf> = std::fs::read_dir(&dir).unwrap().map(|e| e.unwrap().path()).collect();
    pages.sort();
    assert!(pages.len() > 10, "{pages:?}");
    for page in &pages {
        let source = run_ok(Command::new("gzip").arg("-dc").arg(page));
        let name = page
            .file_name()
            .unwrap()
            .to_string_lossy()
            .trim_end_matches(".1.gz")
            .to_string();
        assert!(source.contains(&format!("\n.TH {name} 1 ")), "{page:?}:\n{source}");
        // -k: preconv (UTF-8 input, as man does); -ww: every warning; -P -cbou: plain text.
        let out = tlsgate_testkit::run(
            "groff",
            &["-k", "-man", "-Tutf8", "-ww", "-P", "-cbou"],
            source.as_bytes(),
            Duration::ZERO,
            Duration::from_secs(30),
        );
        assert_eq!(out.status, Some(0), "{page:?}: {}", out.all());
        assert!(out.stderr.is_empty(), "{page:?}: groff warned:\n{}", out.stderr);
        assert!(
            out.stdout.contains("NAME") && out.stdout.contains(&name),
            "{page:?}:\n{}",
            out.stdout
        );
    }
    let check = run_ok(Command::new("gzip").arg("-dc").arg(dir.join("tlsgate-check.1.gz")));
    let text = tlsgate_testkit::run(
        "groff",
        &["-k", "-man", "-Tutf8", "-P", "-cbou"],
        check.as_bytes(),
        Duration::ZERO,
        Duration::from_secs(30),
    )
    .stdout;
    assert!(
        text.contains("-c, --config <CONFIG>") && text.contains("Configuration file"),
        "{text}"
    );
    let top = run_ok(Command::new("gzip").arg("-dc").arg(dir.join("tlsgate.1.gz")));
    assert!(top.contains("tlsgate\\-reopen\\-logs(1)"), "{top}");
}
