//! `include` patterns: shell-style matching of one path component (`*`, `?`, `[abc]`,
//! `[a-z]`, `[!x]`), as glob(3) does for nginx, without recursion or backtracking blow-ups.

/// Whether `text` contains a glob metacharacter.
pub fn is_pattern(text: &str) -> bool {
    text.contains(['*', '?', '['])
}

/// Whether `name` matches `pattern` (one path component). A leading `.` in `name` must be
/// matched by a literal `.` (glob(3) without GLOB_PERIOD).
pub fn matches(pattern: &str, name: &str) -> bool {
    if name.starts_with('.') && !pattern.starts_with('.') {
        return false;
    }
    let p: Vec<char> = pattern.chars().collect();
    let n: Vec<char> = name.chars().collect();
    // Iterative matching with one backtrack point for the last `*`: linear-ish, never exponential.
    let (mut pi, mut ni) = (0usize, 0usize);
    let mut star: Option<(usize, usize)> = None;
    while ni < n.len() {
        if pi < p.len() {
            match p[pi] {
                '*' => {
                    star = Some((pi, ni));
                    pi += 1;
                    continue;
                }
                '?' => {
                    pi += 1;
                    ni += 1;
                    continue;
                }
                '[' => {
                    if let Some((hit, next)) = class(&p, pi, n[ni]) {
                        if hit {
                            pi = next;
                            ni += 1;
                            continue;
                        }
                    } else if n[ni] == '[' {
                        // An unclosed `[` is a literal.
                        pi += 1;
                        ni += 1;
                        continue;
                    }
                }
                c if c == n[ni] => {
                    pi += 1;
                    ni += 1;
                    continue;
                }
                _ => {}
            }
        }
        match star {
            Some((sp, sn)) => {
                pi = sp + 1;
                ni = sn + 1;
                star = Some((sp, sn + 1));
            }
            None => return false,
        }
    }
    p[pi..].iter().all(|c| *c == '*')
}

/// A `[...]` class at `p[at]`: whether `c` is in it and the index after `]`; None if unclosed.
fn class(p: &[char], at: usize, c: char) -> Option<(bool, usize)> {
    let mut i = at + 1;
    let negate = matches!(p.get(i), Some('!') | Some('^'));
    if negate {
        i += 1;
    }
    let mut hit = false;
    let mut first = true;
    while i < p.len() {
        if p[i] == ']' && !first {
            return Some((hit != negate, i + 1));
        }
        first = false;
        if i + 2 < p.len() && p[i + 1] == '-' && p[i + 2] != ']' {
            if p[i] <= c && c <= p[i + 2] {
                hit = true;
            }
            i += 3;
        } else {
            if p[i] == c {
                hit = true;
            }
            i += 1;
        }
    }
    None
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn shell_patterns() {
        assert!(matches("*.conf", "ssl.conf"));
        assert!(!matches("*.conf", "ssl.conf.bak"));
        assert!(!matches("*", ".hidden"));
        assert!(matches(".*", ".hidden"));
        assert!(matches("site-?", "site-a"));
        assert!(matches("[ab]*", "api"));
        assert!(!matches("[!ab]*", "api"));
        assert!(matches("[a-c]x", "bx"));
        assert!(matches("a[", "a["));
        assert!(matches("*a*b*c", "xxaxxbxxc"));
        assert!(!matches("*a*b*c", "xxaxxbxx"));
    }

    #[test]
    fn pathological_patterns_finish() {
        let name = "a".repeat(5000);
        assert!(!matches(&"*a".repeat(200), &format!("{name}b")));
        assert!(matches(&"*a".repeat(200), &name));
        assert!(matches("*", &name));
    }
}
