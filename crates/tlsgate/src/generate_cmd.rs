//! `tlsgate generate`: files made by the binary itself for packaging (scripts/package.sh,
//! dist/debian/postinst). Man pages and shell completions come from the same clap definition that
//! parses the command line, so they cannot drift from it; `placeholder-certificate` makes the
//! throwaway certificate the Debian package's example configuration points at until the operator
//! installs a real one. main.rs hands `tlsgate generate ...` here before its own parser runs, so
//! this helper is absent from `tlsgate --help` and from the man pages and completions it writes.

use anyhow::Context;
use std::io::Write;
use std::path::{Path, PathBuf};
use std::process::ExitCode;
use tlsgate_tls::pki::{CertSpec, Certified, KeyKind};

/// Packaging helpers: man pages, shell completions, a placeholder certificate.
#[derive(clap::Parser, Debug)]
#[command(name = "tlsgate generate", bin_name = "tlsgate generate")]
struct GenerateCli {
    #[command(subcommand)]
    what: What,
}

#[derive(clap::Subcommand, Debug)]
enum What {
    /// Write man pages into DIR: tlsgate.1 and one per subcommand (tlsgate-serve.1,
    /// tlsgate-ctl-show.1, ...).
    Man {
        /// Output directory (created if missing).
        dir: PathBuf,
    },
    /// Print the completion script for SHELL on stdout.
    Completions {
        /// bash, zsh, fish, elvish or powershell.
        shell: clap_complete::Shell,
    },
    /// Write a throwaway ECDSA P-256 certificate for localhost (a one-off CA, whose key is never
    /// written, and a leaf; the chain file holds both so `tlsgate check` needs no --ca). Refuses
    /// to overwrite either file.
    PlaceholderCertificate {
        /// Chain file to write (leaf, then the CA), mode 0644.
        #[arg(long)]
        chain: PathBuf,
        /// Private key file to write (PKCS#8 PEM), mode 0640.
        #[arg(long)]
        key: PathBuf,
        /// Names for subjectAltName (DNS names or IP addresses).
        #[arg(long = "name", default_values = ["localhost", "127.0.0.1", "::1"])]
        names: Vec<String>,
        /// Validity in days.
        #[arg(long, default_value_t = 3650)]
        days: u64,
    },
}

/// `tlsgate generate ...` (the process's arguments); `cli` is the public command line
/// definition (`Cli::command()`) the man pages and completions describe.
pub fn main(cli: clap::Command) -> ExitCode {
    let args = <GenerateCli as clap::Parser>::parse_from(std::env::args_os().skip(1));
    match run(&args, cli) {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("tlsgate generate: {e:#}");
            ExitCode::FAILURE
        }
    }
}

fn run(args: &GenerateCli, cli: clap::Command) -> anyhow::Result<()> {
    match &args.what {
        What::Man { dir } => {
            std::fs::create_dir_all(dir).with_context(|| format!("cannot create {}", dir.display()))?;
            let written = man_pages(cli, dir)?;
            for page in written {
                println!("{}", page.display());
            }
        }
        What::Completions { shell } => {
            let mut out = Vec::new();
            completions(*shell, cli, &mut out);
            std::io::stdout().write_all(&out).context("cannot write to stdout")?;
        }
        What::PlaceholderCertificate {
            chain,
            key,
            names,
            days,
        } => {
            let names: Vec<&str> = names.iter().map(String::as_str).collect();
            placeholder_certificate(chain, key, &names, *days)?;
            println!("{}\n{}", chain.display(), key.display());
        }
    }
    Ok(())
}

/// Writes `tlsgate.1` and a page per visible subcommand, nested ones included (clap_mangen names
/// them `tlsgate-ctl-show.1`); returns the man pages now in `dir`, sorted.
fn man_pages(cli: clap::Command, dir: &Path) -> anyhow::Result<Vec<PathBuf>> {
    clap_mangen::generate_to(cli, dir).with_context(|| format!("cannot write man pages to {}", dir.display()))?;
    let entries = std::fs::read_dir(dir).with_context(|| format!("cannot read {}", dir.display()))?;
    let mut pages: Vec<PathBuf> = entries
        .filter_map(|e| e.ok().map(|e| e.path()))
        .filter(|p| p.extension().is_some_and(|x| x == "1"))
        .collect();
    pages.sort();
    Ok(pages)
}

/// The completion script for `shell`.
fn completions(shell: clap_complete::Shell, mut cli: clap::Command, out: &mut Vec<u8>) {
    clap_complete::generate(shell, &mut cli, "tlsgate", out);
}

/// Writes a leaf for `names` and the one-off CA that issued it to `chain`, the leaf's key to `key`.
fn placeholder_certificate(chain: &Path, key: &Path, names: &[&str], days: u64) -> anyhow::Result<()> {
    let ca = Certified::issue(
        &CertSpec::ca("tlsgate placeholder CA (replace me)", KeyKind::EcdsaP256, days),
        None,
    )?;
    let leaf = Certified::issue(&CertSpec::leaf(names, KeyKind::EcdsaP256, days), Some(&ca))?;
    // The key first: a chain without its key would be a half-made pair on the next attempt.
    write_new(key, &leaf.key_pem, 0o640)?;
    write_new(chain, &format!("{}{}", leaf.cert_pem, ca.cert_pem), 0o644)
}

/// Creates `path` (never overwrites) with `mode` and writes `text`.
fn write_new(path: &Path, text: &str, mode: u32) -> anyhow::Result<()> {
    use std::os::unix::fs::OpenOptionsExt;
    std::fs::OpenOptions::new()
        .write(true)
        .create_new(true)
        .mode(mode)
        .open(path)
        .and_then(|mut f| {
            // Exactly `mode`, whatever the umask (the key must stay readable by the group).
            f.set_permissions(std::os::unix::fs::PermissionsExt::from_mode(mode))?;
            f.write_all(text.as_bytes())
        })
        .with_context(|| format!("cannot write {}", path.display()))
}

#[cfg(test)]
mod tests {
    use super::*;
    use tlsgate_config::Severity;
    use tlsgate_tls::lint::{lint_one, TrustAnchors};

    /// The public command line definition of main.rs.
    fn cli() -> clap::Command {
        <crate::Cli as clap::CommandFactory>::command()
    }

    #[test]
    fn man_pages_cover_every_subcommand_and_not_this_helper() {
        let dir = tempfile::tempdir().unwrap();
        let pages = man_pages(cli(), dir.path()).unwrap();
        let names: Vec<String> = pages
            .iter()
            .map(|p| p.file_name().unwrap().to_string_lossy().into_owned())
            .collect();
        let mut want = vec!["tlsgate.1".to_string(), "tlsgate-ctl-show.1".to_string()];
        want.extend(cli().get_subcommands().map(|s| format!("tlsgate-{}.1", s.get_name())));
        for page in &want {
            assert!(names.contains(page), "{page} missing from {names:?}");
        }
        assert!(
            !names.iter().any(|n| n.contains("generate") || n.contains("help")),
            "{names:?}"
        );
        let check = std::fs::read_to_string(dir.path().join("tlsgate-check.1")).unwrap();
        assert!(check.contains(".TH tlsgate-check 1"), "{check}");
        assert!(
            check.contains("\\-\\-config") && check.contains("Configuration file"),
            "{check}"
        );
    }

    #[test]
    fn completions_offer_the_subcommands_and_not_this_helper() {
        use clap_complete::Shell;
        // Fish names long options without their dashes (`-l config`).
        for (shell, config, demo) in [
            (Shell::Bash, "--config", "--demo"),
            (Shell::Zsh, "--config", "--demo"),
            (Shell::Fish, "-l config", "-l demo"),
        ] {
            let mut out = Vec::new();
            completions(shell, cli(), &mut out);
            let text = String::from_utf8(out).unwrap();
            for word in ["serve", "reopen-logs", config, demo] {
                assert!(text.contains(word), "{shell}: no {word}");
            }
            assert!(!text.contains("generate"), "{shell}: offers the hidden helper");
        }
    }

    #[test]
    fn the_placeholder_passes_the_lint_with_warnings_only() {
        let dir = tempfile::tempdir().unwrap();
        let (chain, key) = (dir.path().join("p.pem"), dir.path().join("p.key"));
        placeholder_certificate(&chain, &key, &["localhost", "127.0.0.1", "::1"], 3650).unwrap();
        let issues = lint_one(
            "site[0].certificate[0]",
            &chain,
            Some(&key),
            &["localhost".to_string()],
            &TrustAnchors::system_plus(&[]).unwrap(),
            std::time::SystemTime::now()
                .duration_since(std::time::UNIX_EPOCH)
                .unwrap()
                .as_secs() as i64,
        );
        let errors: Vec<_> = issues.iter().filter(|i| i.severity == Severity::Error).collect();
        assert!(errors.is_empty(), "{issues:?}");
        use std::os::unix::fs::PermissionsExt;
        let mode = |p: &Path| std::fs::metadata(p).unwrap().permissions().mode() & 0o777;
        assert_eq!((mode(&key), mode(&chain)), (0o640, 0o644));
        // Never overwrites: a second run fails and leaves the first pair as it was.
        let before = std::fs::read(&key).unwrap();
        assert!(placeholder_certificate(&chain, &key, &["localhost"], 1).is_err());
        assert_eq!(std::fs::read(&key).unwrap(), before);
    }
}
