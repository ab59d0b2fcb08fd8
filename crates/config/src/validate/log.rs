//! `[log]`: where the access log goes.

use crate::issue::Issue;
use crate::model::LogConfig;

/// `[log]`: the access-log file must be creatable where it is asked for.
pub(super) fn check(log: &LogConfig, issues: &mut Vec<Issue>) {
    let Some(path) = &log.access_log_file else { return };
    if path.as_os_str().is_empty() || path.is_dir() {
        issues.push(Issue::error("log.access_log_file", "must name a file"));
        return;
    }
    match path.parent().filter(|p| !p.as_os_str().is_empty()) {
        Some(dir) if !dir.is_dir() => issues.push(Issue::error(
            "log.access_log_file",
            format!("directory {} does not exist", dir.display()),
        )),
        _ => {}
    }
    if !log.access_log {
        issues.push(Issue::warning(
            "log.access_log_file",
            "is set but access_log = false: nothing will be written to it",
        ));
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn issues(text: &str) -> Vec<String> {
        let config = crate::parse(&format!("[log]\n{text}\n")).unwrap();
        let mut issues = Vec::new();
        check(&config.log, &mut issues);
        issues.iter().map(ToString::to_string).collect()
    }

    #[test]
    fn access_log_file_needs_an_existing_directory() {
        let dir = std::env::temp_dir();
        let ok = format!("access_log_file = {:?}", dir.join("tlsgate-access.log"));
        assert!(issues(&ok).is_empty(), "{:?}", issues(&ok));
        let missing = format!("access_log_file = {:?}", dir.join("no-such-dir/access.log"));
        assert!(issues(&missing)[0].contains("does not exist"), "{:?}", issues(&missing));
        let a_dir = format!("access_log_file = {dir:?}");
        assert!(issues(&a_dir)[0].contains("must name a file"), "{:?}", issues(&a_dir));
        let off = format!("{ok}\naccess_log = false");
        assert!(issues(&off)[0].starts_with("warning"), "{:?}", issues(&off));
    }
}
