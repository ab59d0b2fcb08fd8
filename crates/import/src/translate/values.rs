//! nginx values and inheritance: times (`1d`, `90s`, `500ms`), sizes (`10m`), and the scope a
//! directive is looked up in (a location inherits from its server, which inherits from `http`;
//! array directives such as `add_header` are inherited only when the inner level has none).

use crate::nginx::Directive;

/// An nginx time (`30`, `30s`, `1h30m`, `1d`, `500ms`) in milliseconds.
pub fn parse_time(text: &str) -> Option<u64> {
    let t = text.trim();
    if t.is_empty() {
        return None;
    }
    if t.bytes().all(|b| b.is_ascii_digit()) {
        return t.parse::<u64>().ok()?.checked_mul(1000);
    }
    let mut total: u64 = 0;
    let mut rest = t;
    while !rest.is_empty() {
        rest = rest.trim_start();
        let digits = rest.bytes().take_while(u8::is_ascii_digit).count();
        if digits == 0 {
            return None;
        }
        let n: u64 = rest[..digits].parse().ok()?;
        rest = &rest[digits..];
        let (unit, len) = if rest.starts_with("ms") {
            (1, 2)
        } else {
            let unit = match rest.chars().next() {
                Some('s') => 1000,
                Some('m') => 60_000,
                Some('h') => 3_600_000,
                Some('d') => 86_400_000,
                Some('w') => 7 * 86_400_000,
                Some('M') => 30 * 86_400_000,
                Some('y') => 365 * 86_400_000,
                _ => return None,
            };
            (unit, 1)
        };
        rest = &rest[len..];
        total = total.checked_add(n.checked_mul(unit)?)?;
    }
    Some(total)
}

/// Milliseconds as a tlsgate duration string in the largest exact unit (`"1d"`, `"90s"`).
pub fn duration_text(ms: u64) -> String {
    for (unit, name) in [(86_400_000, "d"), (3_600_000, "h"), (60_000, "m"), (1000, "s")] {
        if ms >= unit && ms.is_multiple_of(unit) {
            return format!("{}{name}", ms / unit);
        }
    }
    format!("{ms}ms")
}

/// An nginx size (`512`, `8k`, `10m`, `1g`) in bytes.
pub fn parse_size(text: &str) -> Option<u64> {
    let t = text.trim();
    let (num, mul) = match t.chars().last()? {
        'k' | 'K' => (&t[..t.len() - 1], 1024),
        'm' | 'M' => (&t[..t.len() - 1], 1024 * 1024),
        'g' | 'G' => (&t[..t.len() - 1], 1024 * 1024 * 1024),
        _ => (t, 1),
    };
    num.parse::<u64>().ok()?.checked_mul(mul)
}

/// A host name tlsgate accepts in `server_names` (letters, digits, `-`; non-empty labels; an
/// optional leading `*.`).
pub fn valid_server_name(name: &str) -> bool {
    let rest = name.strip_prefix("*.").unwrap_or(name);
    !rest.is_empty()
        && rest
            .split('.')
            .all(|l| !l.is_empty() && l.chars().all(|c| c.is_ascii_alphanumeric() || c == '-'))
}

/// The directives visible at one place: the innermost level first (location, server, http).
#[derive(Debug, Clone, Default)]
pub struct Scope<'a> {
    levels: Vec<Vec<&'a Directive>>,
}

impl<'a> Scope<'a> {
    /// A scope of one (outermost) level.
    pub fn root(level: Vec<&'a Directive>) -> Self {
        Self { levels: vec![level] }
    }

    /// This scope with `level` inside it.
    pub fn inner(&self, level: &'a [Directive]) -> Self {
        let mut levels = vec![level.iter().collect()];
        levels.extend(self.levels.iter().cloned());
        Self { levels }
    }

    /// The value of a single-valued directive: the last one at the innermost level having it.
    pub fn last(&self, name: &str) -> Option<&'a Directive> {
        self.levels
            .iter()
            .find_map(|level| level.iter().rev().find(|d| d.name == name).copied())
    }

    /// Every occurrence of an array directive at the innermost level having any.
    pub fn all(&self, name: &str) -> Vec<&'a Directive> {
        self.levels
            .iter()
            .map(|level| level.iter().filter(|d| d.name == name).copied().collect::<Vec<_>>())
            .find(|v| !v.is_empty())
            .unwrap_or_default()
    }

    /// The innermost level's own directives.
    pub fn own(&self) -> &[&'a Directive] {
        self.levels.first().map_or(&[], Vec::as_slice)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::nginx::parser::parse;

    #[test]
    fn times_and_sizes() {
        assert_eq!(parse_time("1d"), Some(86_400_000));
        assert_eq!(parse_time("90"), Some(90_000));
        assert_eq!(parse_time("1h30m"), Some(5_400_000));
        assert_eq!(parse_time("1h 30m"), Some(5_400_000));
        assert_eq!(parse_time("500ms"), Some(500));
        assert_eq!(parse_time("1440m"), Some(86_400_000));
        assert_eq!(parse_time("x"), None);
        assert_eq!(parse_time("99999999999999999999d"), None);
        assert_eq!(duration_text(86_400_000), "1d");
        assert_eq!(duration_text(90_000), "90s");
        assert_eq!(duration_text(1500), "1500ms");
        assert_eq!(parse_size("10m"), Some(10 * 1024 * 1024));
        assert_eq!(parse_size("8k"), Some(8192));
        assert_eq!(parse_size("k"), None);
    }

    #[test]
    fn server_names() {
        assert!(valid_server_name("*.example.com"));
        assert!(valid_server_name("a-b.example"));
        assert!(!valid_server_name("_"));
        assert!(!valid_server_name("www.example.*"));
        assert!(!valid_server_name("a..b"));
    }

    #[test]
    fn arrays_inherit_only_when_the_inner_level_has_none() {
        let http = parse("add_header A 1; add_header B 2; proxy_read_timeout 5s;", 0).unwrap();
        let server = parse("add_header C 3; proxy_read_timeout 7s; proxy_read_timeout 9s;", 0).unwrap();
        let location = parse("proxy_pass http://x;", 0).unwrap();
        let scope = Scope::root(http.iter().collect()).inner(&server).inner(&location);
        let names: Vec<&str> = scope.all("add_header").iter().map(|d| d.arg(0).unwrap()).collect();
        assert_eq!(names, ["C"]);
        assert_eq!(scope.last("proxy_read_timeout").unwrap().arg(0), Some("9s"));
        assert!(scope.last("ssl_protocols").is_none());
        assert_eq!(scope.own().len(), 1);
    }
}
