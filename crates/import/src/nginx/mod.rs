//! nginx configuration files: the tokenizer ([`lexer`]), the block parser ([`parser`]),
//! `include` expansion with globs ([`include`], [`glob`]) and the tree they produce.
//!
//! The syntax follows nginx's own `ngx_conf_read_token`: words separated by blanks, `;` ends a
//! directive, `{ ... }` a block, `#` a comment at the start of a word, `"..."`/`'...'` quoted
//! words, `\` escapes (`\"`, `\'`, `\\`, `\t`, `\r`, `\n`), and `${var}` braces that do not open
//! a block.

pub mod glob;
pub mod include;
pub mod lexer;
pub mod parser;

pub use include::{load, FsSource, MemSource, Source};

use std::path::PathBuf;

/// Where a directive starts: a file (index into [`Conf::files`]), a line and a column, 1-based.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct Pos {
    /// Index into [`Conf::files`].
    pub file: usize,
    /// 1-based line.
    pub line: u32,
    /// 1-based column, in characters.
    pub col: u32,
}

/// One word of a directive, after unescaping.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Word {
    /// The text (quotes removed, escapes applied).
    pub text: String,
    /// Written in quotes.
    pub quoted: bool,
}

impl Word {
    /// Whether the text refers to an nginx variable (`$name` or `${name}`).
    pub fn has_variable(&self) -> bool {
        has_variable(&self.text)
    }
}

/// Whether `text` refers to an nginx variable (`$name` or `${name}`).
pub fn has_variable(text: &str) -> bool {
    let b = text.as_bytes();
    b.iter().enumerate().any(|(i, c)| {
        *c == b'$'
            && b.get(i + 1)
                .is_some_and(|n| n.is_ascii_alphanumeric() || *n == b'_' || *n == b'{')
    })
}

/// A directive: its name, its arguments and, for block directives, the directives inside.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Directive {
    /// The first word (`server`, `listen`, ...).
    pub name: String,
    /// The other words.
    pub args: Vec<Word>,
    /// `Some` for a block directive (`server { ... }`), with what it contains.
    pub block: Option<Vec<Directive>>,
    /// Where its first word starts.
    pub at: Pos,
}

impl Directive {
    /// The argument texts.
    pub fn arg_texts(&self) -> Vec<&str> {
        self.args.iter().map(|w| w.text.as_str()).collect()
    }

    /// The `i`th argument's text, if any.
    pub fn arg(&self, i: usize) -> Option<&str> {
        self.args.get(i).map(|w| w.text.as_str())
    }

    /// The block's directives (empty for a simple directive).
    pub fn children(&self) -> &[Directive] {
        self.block.as_deref().unwrap_or(&[])
    }
}

/// Something `include` expansion could not do; the translation lists it with the others.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct IncludeNote {
    /// The `include` directive.
    pub at: Pos,
    /// Why it was not followed.
    pub why: String,
}

/// A whole configuration: every file read (the first is the main one), the directive tree with
/// `include`s replaced by what they name, and the includes that could not be followed.
#[derive(Debug, Clone, Default)]
pub struct Conf {
    /// Files in the order they were first read, as they are shown in messages.
    pub files: Vec<PathBuf>,
    /// The main context.
    pub directives: Vec<Directive>,
    /// Includes left out.
    pub notes: Vec<IncludeNote>,
}

impl Conf {
    /// `FILE:LINE` of a position.
    pub fn place(&self, at: Pos) -> String {
        let file = self.files.get(at.file).map_or("?".into(), |p| p.display().to_string());
        format!("{file}:{}", at.line)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn variables_are_recognised() {
        assert!(has_variable("https://$host$request_uri"));
        assert!(has_variable("${host}x"));
        assert!(!has_variable("max-age=63072000"));
        assert!(has_variable("$1"));
        assert!(!has_variable("100$ and $ 5"));
        assert!(!has_variable("trailing$"));
    }
}
