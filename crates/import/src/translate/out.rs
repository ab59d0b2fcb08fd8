//! The TOML document the translation writes: tables in order, each field with the nginx line it
//! came from as a trailing comment. Written as text (the configuration model only reads TOML);
//! every string is written as a one-line basic string with TOML's escapes.

use std::fmt::Write as _;

/// One `key = value` line.
#[derive(Debug, Clone)]
pub struct Field {
    /// The key.
    pub key: String,
    /// The value, already a TOML literal.
    pub value: String,
    /// Where it came from (`FILE:LINE`), written as a comment.
    pub from: Option<String>,
}

/// A `[table]` or `[[array.table]]` with its fields.
#[derive(Debug, Clone)]
pub struct Table {
    /// `[tls]`, `[[site]]`, ...
    pub header: String,
    /// Comment lines written above the header.
    pub notes: Vec<String>,
    /// Its fields, in order.
    pub fields: Vec<Field>,
}

impl Table {
    /// An empty table.
    pub fn new(header: impl Into<String>) -> Self {
        Self {
            header: header.into(),
            notes: Vec::new(),
            fields: Vec::new(),
        }
    }

    /// Sets `key` (replacing an earlier value of the same key).
    pub fn set(&mut self, key: &str, value: String, from: Option<String>) {
        self.fields.retain(|f| f.key != key);
        self.fields.push(Field {
            key: key.into(),
            value,
            from,
        });
    }

    /// Whether `key` is set.
    pub fn has(&self, key: &str) -> bool {
        self.fields.iter().any(|f| f.key == key)
    }
}

/// The whole document.
#[derive(Debug, Clone, Default)]
pub struct Doc {
    /// Comment lines at the top.
    pub preamble: Vec<String>,
    /// Tables in order.
    pub tables: Vec<Table>,
}

impl Doc {
    /// The TOML text.
    pub fn render(&self) -> String {
        let mut out = String::new();
        for line in &self.preamble {
            let _ = writeln!(out, "# {line}");
        }
        for t in &self.tables {
            // Plain tables without fields say nothing; array tables always count.
            if t.fields.is_empty() && !t.header.starts_with("[[") {
                continue;
            }
            out.push('\n');
            for n in &t.notes {
                let _ = writeln!(out, "# {n}");
            }
            let _ = writeln!(out, "{}", t.header);
            for f in &t.fields {
                match &f.from {
                    Some(from) => {
                        let _ = writeln!(out, "{} = {}  # {}", f.key, f.value, one_line(from));
                    }
                    None => {
                        let _ = writeln!(out, "{} = {}", f.key, f.value);
                    }
                }
            }
        }
        out
    }
}

fn one_line(s: &str) -> String {
    s.replace(['\n', '\r'], " ")
}

/// A TOML basic string literal (one line: control characters escaped).
pub fn q(s: &str) -> String {
    let mut out = String::with_capacity(s.len() + 2);
    out.push('"');
    for c in s.chars() {
        match c {
            '"' => out.push_str("\\\""),
            '\\' => out.push_str("\\\\"),
            '\n' => out.push_str("\\n"),
            '\r' => out.push_str("\\r"),
            '\t' => out.push_str("\\t"),
            c if (c as u32) < 0x20 || c == '\u{7f}' => {
                let _ = write!(out, "\\u{:04X}", c as u32);
            }
            c => out.push(c),
        }
    }
    out.push('"');
    out
}

/// A TOML array of strings.
pub fn arr<S: AsRef<str>>(items: &[S]) -> String {
    let inner: Vec<String> = items.iter().map(|s| q(s.as_ref())).collect();
    format!("[{}]", inner.join(", "))
}

/// A TOML boolean.
pub fn boolean(b: bool) -> String {
    b.to_string()
}

/// An inline table of header edits: `{ set = { "name" = "value" }, remove = ["name"] }`.
pub fn header_edits(set: &[(String, String)], remove: &[String]) -> String {
    let mut parts = Vec::new();
    if !set.is_empty() {
        let kv: Vec<String> = set.iter().map(|(k, v)| format!("{} = {}", q(k), q(v))).collect();
        parts.push(format!("set = {{ {} }}", kv.join(", ")));
    }
    if !remove.is_empty() {
        parts.push(format!("remove = {}", arr(remove)));
    }
    format!("{{ {} }}", parts.join(", "))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn renders_tables_with_provenance() {
        let mut d = Doc::default();
        d.preamble.push("generated".into());
        let mut t = Table::new("[tls]");
        t.set("min_version", q("1.2"), Some("a.conf:3".into()));
        d.tables.push(t);
        d.tables.push(Table::new("[server]"));
        let mut s = Table::new("[[site]]");
        s.set("name", q("a \"b\"\n"), None);
        d.tables.push(s);
        let text = d.render();
        assert_eq!(
            text,
            "# generated\n\n[tls]\nmin_version = \"1.2\"  # a.conf:3\n\n[[site]]\nname = \"a \\\"b\\\"\\n\"\n"
        );
        let v: toml::Table = toml::from_str(&text).unwrap();
        assert_eq!(v["site"][0]["name"].as_str(), Some("a \"b\"\n"));
    }

    #[test]
    fn header_edits_are_valid_toml() {
        let text = format!(
            "x = {}\n",
            header_edits(&[("X-A".into(), "1 \"2\"".into())], &["X-B".into()])
        );
        let v: toml::Table = toml::from_str(&text).unwrap();
        assert_eq!(v["x"]["set"]["X-A"].as_str(), Some("1 \"2\""));
    }
}
