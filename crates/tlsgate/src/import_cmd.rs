//! `tlsgate import nginx FILE`: translate an nginx configuration into tlsgate TOML (stdout or
//! `--output`), listing on stderr, one `FILE:LINE: directive: why` line each, what was not
//! translated. Exit status 0 when a configuration was produced, 2 when the nginx text does not
//! parse (`FILE:LINE:COL: ...`), 1 otherwise (unreadable file, no TLS server).

use std::path::{Path, PathBuf};
use std::process::ExitCode;
use tlsgate_import::nginx::FsSource;

/// `tlsgate import`.
#[derive(clap::Args, Debug)]
pub struct ImportArgs {
    #[command(subcommand)]
    from: ImportFrom,
}

#[derive(clap::Subcommand, Debug)]
enum ImportFrom {
    /// Translate the TLS and proxy parts of an nginx configuration (server blocks with
    /// `listen ... ssl`, certificates, ssl_* settings, HSTS, redirects, locations with
    /// proxy_pass, upstream blocks) into tlsgate TOML.
    Nginx {
        /// The nginx configuration file (nginx.conf, or one site's file).
        file: PathBuf,
        /// Write the TOML here instead of stdout.
        #[arg(long, short)]
        output: Option<PathBuf>,
        /// nginx's configuration prefix, against which relative `include` and certificate paths
        /// resolve (default: FILE's directory, or its parent for a file in sites-available/,
        /// sites-enabled/ or conf.d/).
        #[arg(long)]
        prefix: Option<PathBuf>,
    },
}

/// The prefix nginx would use: the main file's directory; for a site file of Debian's layout,
/// the directory above (where `include snippets/...` resolves).
fn default_prefix(file: &Path) -> PathBuf {
    let dir = file
        .parent()
        .filter(|d| !d.as_os_str().is_empty())
        .unwrap_or(Path::new("."));
    let layout = ["sites-available", "sites-enabled", "conf.d"];
    match (dir.file_name().and_then(|n| n.to_str()), dir.parent()) {
        (Some(name), Some(up)) if layout.contains(&name) => {
            if up.as_os_str().is_empty() {
                PathBuf::from(".")
            } else {
                up.to_path_buf()
            }
        }
        _ => dir.to_path_buf(),
    }
}

pub fn run(args: &ImportArgs) -> anyhow::Result<ExitCode> {
    let ImportFrom::Nginx { file, output, prefix } = &args.from;
    let prefix = prefix.clone().unwrap_or_else(|| default_prefix(file));
    let translation = match tlsgate_import::import_nginx(&FsSource, file, &prefix) {
        Ok(t) => t,
        Err(e) => {
            eprintln!("tlsgate import: {e}");
            return Ok(if e.is_syntax() {
                ExitCode::from(2)
            } else {
                ExitCode::FAILURE
            });
        }
    };
    for f in &translation.findings {
        eprintln!("{f}");
    }
    match output {
        Some(path) => std::fs::write(path, &translation.toml)
            .map_err(|e| anyhow::anyhow!("cannot write {}: {e}", path.display()))?,
        None => print!("{}", translation.toml),
    }
    Ok(ExitCode::SUCCESS)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn prefix_follows_debians_layout() {
        assert_eq!(
            default_prefix(Path::new("/etc/nginx/nginx.conf")),
            Path::new("/etc/nginx")
        );
        assert_eq!(
            default_prefix(Path::new("/etc/nginx/sites-available/default")),
            Path::new("/etc/nginx")
        );
        assert_eq!(default_prefix(Path::new("site.conf")), Path::new("."));
        assert_eq!(default_prefix(Path::new("conf.d/a.conf")), Path::new("."));
    }
}
