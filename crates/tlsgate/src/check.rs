//! `tlsgate check`: parse, validate and lint a configuration; one line per finding.

use std::path::{Path, PathBuf};
use std::process::ExitCode;
use tlsgate_config::Severity;
use tlsgate_tls::lint::{flight_report, lint_config, TrustAnchors};

pub fn run(path: &Path, ca: &[PathBuf]) -> anyhow::Result<ExitCode> {
    let shown = path.display();
    let text = match std::fs::read_to_string(path) {
        Ok(t) => t,
        Err(e) => {
            println!("{shown}: error: cannot read: {e}");
            return Ok(ExitCode::FAILURE);
        }
    };
    let mut config = match tlsgate_config::parse(&text) {
        Ok(c) => c,
        Err(e) => {
            println!("{shown}: error: {}", e.to_string().trim_end());
            return Ok(ExitCode::FAILURE);
        }
    };
    tlsgate_config::resolve_paths(&mut config, path.parent().unwrap_or(Path::new(".")));
    let mut issues = tlsgate_config::validate::validate(&config);
    issues.extend(tlsgate_config::validate::secret_file_permissions(&config));
    let extra: Vec<&Path> = ca.iter().map(PathBuf::as_path).collect();
    let anchors = TrustAnchors::system_plus(&extra).map_err(|e| anyhow::anyhow!("--ca: {e}"))?;
    let now = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)?
        .as_secs() as i64;
    // File-existence errors are already reported by validation; lint only what can be read.
    let missing: Vec<String> = issues
        .iter()
        .filter(|i| i.message.ends_with("no such file"))
        .map(|i| i.field.clone())
        .collect();
    for issue in lint_config(&config, &anchors, now) {
        if !missing.iter().any(|m| {
            issue
                .field
                .starts_with(m.trim_end_matches(".chain").trim_end_matches(".key"))
        }) {
            issues.push(issue);
        }
    }
    let (flight_info, flight_warnings) = flight_report(&config);
    issues.extend(flight_warnings);
    let errors = issues.iter().filter(|i| i.severity == Severity::Error).count();
    let warnings = issues.len() - errors;
    for line in &flight_info {
        println!("{shown}: info: {line}");
    }
    for issue in &issues {
        println!("{shown}: {issue}");
    }
    println!("{shown}: {errors} error(s), {warnings} warning(s)");
    Ok(if errors > 0 {
        ExitCode::FAILURE
    } else {
        ExitCode::SUCCESS
    })
}
