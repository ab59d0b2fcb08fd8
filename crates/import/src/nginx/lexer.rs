//! The nginx tokenizer: words (quoted or not, unescaped), `;`, `{`, `}`, with the line and
//! column where each starts. Mirrors `ngx_conf_read_token`, including its errors (`unexpected
//! "}"`, a quoted word not followed by a blank, `;` or `{`, end of file inside a quote).

use crate::error::SyntaxError;

/// One token.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Tok {
    /// A word (directive name or argument).
    Word {
        /// Unescaped text.
        text: String,
        /// Written in quotes.
        quoted: bool,
    },
    /// `;`
    Semi,
    /// `{`
    Open,
    /// `}`
    Close,
}

/// A token and where it starts (1-based line and column).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Token {
    /// The token.
    pub tok: Tok,
    /// Line.
    pub line: u32,
    /// Column (characters).
    pub col: u32,
}

/// A lexing error at a line and column.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct LexError {
    /// Line.
    pub line: u32,
    /// Column.
    pub col: u32,
    /// What.
    pub what: SyntaxError,
}

/// Splits `text` into tokens.
pub fn tokenize(text: &str) -> Result<Vec<Token>, LexError> {
    let mut lx = Lexer {
        chars: text.chars().collect(),
        i: 0,
        line: 1,
        col: 1,
    };
    let mut out = Vec::new();
    while let Some(t) = lx.next_token()? {
        out.push(t);
    }
    Ok(out)
}

struct Lexer {
    chars: Vec<char>,
    i: usize,
    line: u32,
    col: u32,
}

fn is_blank(c: char) -> bool {
    matches!(c, ' ' | '\t' | '\r' | '\n')
}

impl Lexer {
    fn peek(&self) -> Option<char> {
        self.chars.get(self.i).copied()
    }

    fn bump(&mut self) -> Option<char> {
        let c = self.peek()?;
        self.i += 1;
        if c == '\n' {
            self.line += 1;
            self.col = 1;
        } else {
            self.col += 1;
        }
        Some(c)
    }

    fn err(&self, line: u32, col: u32, what: SyntaxError) -> LexError {
        LexError { line, col, what }
    }

    fn next_token(&mut self) -> Result<Option<Token>, LexError> {
        // Blanks and comments.
        loop {
            match self.peek() {
                None => return Ok(None),
                Some(c) if is_blank(c) => {
                    self.bump();
                }
                Some('#') => {
                    while let Some(c) = self.bump() {
                        if c == '\n' {
                            break;
                        }
                    }
                }
                Some(_) => break,
            }
        }
        let (line, col) = (self.line, self.col);
        let tok = |tok| Ok(Some(Token { tok, line, col }));
        match self.peek() {
            Some(';') => {
                self.bump();
                tok(Tok::Semi)
            }
            Some('{') => {
                self.bump();
                tok(Tok::Open)
            }
            Some('}') => {
                self.bump();
                tok(Tok::Close)
            }
            Some(q @ ('"' | '\'')) => {
                self.bump();
                let raw = self.quoted(q, line, col)?;
                // nginx: a closing quote must be followed by a blank, `;`, `{` or `)`.
                match self.peek() {
                    None => {}
                    Some(c) if is_blank(c) || c == ';' || c == '{' || c == ')' => {}
                    Some(c) => return Err(self.err(self.line, self.col, SyntaxError::Unexpected(c))),
                }
                tok(Tok::Word {
                    text: unescape(&raw),
                    quoted: true,
                })
            }
            Some(_) => {
                let raw = self.bare();
                tok(Tok::Word {
                    text: unescape(&raw),
                    quoted: false,
                })
            }
            None => Ok(None),
        }
    }

    /// The raw text of a quoted word up to its closing quote (consumed), escapes kept.
    fn quoted(&mut self, q: char, line: u32, col: u32) -> Result<Vec<char>, LexError> {
        let mut raw = Vec::new();
        loop {
            match self.bump() {
                None => {
                    let _ = (line, col);
                    return Err(self.err(self.line, self.col, SyntaxError::UnexpectedEof("a closing quote")));
                }
                Some('\\') => {
                    raw.push('\\');
                    if let Some(c) = self.bump() {
                        raw.push(c);
                    }
                }
                Some(c) if c == q => return Ok(raw),
                Some(c) => raw.push(c),
            }
        }
    }

    /// The raw text of an unquoted word: up to a blank, `;` or `{` (not consumed); `}` and `#`
    /// inside a word are part of it; `\x` takes `x` literally; `${` does not open a block.
    fn bare(&mut self) -> Vec<char> {
        let mut raw = Vec::new();
        let mut variable = false;
        while let Some(c) = self.peek() {
            if c == '{' && variable {
                variable = false;
                raw.push(c);
                self.bump();
                continue;
            }
            variable = false;
            if is_blank(c) || c == ';' || c == '{' {
                break;
            }
            self.bump();
            raw.push(c);
            match c {
                '\\' => {
                    if let Some(n) = self.bump() {
                        raw.push(n);
                    }
                }
                '$' => variable = true,
                _ => {}
            }
        }
        raw
    }
}

/// nginx's unescaping of a word: `\"`, `\'`, `\\` lose the backslash; `\t`, `\r`, `\n` become
/// the control characters; any other `\x` stays as written.
fn unescape(raw: &[char]) -> String {
    let mut out = String::with_capacity(raw.len());
    let mut i = 0;
    while i < raw.len() {
        if raw[i] == '\\' {
            match raw.get(i + 1) {
                Some(c @ ('"' | '\'' | '\\')) => {
                    out.push(*c);
                    i += 2;
                    continue;
                }
                Some('t') => {
                    out.push('\t');
                    i += 2;
                    continue;
                }
                Some('r') => {
                    out.push('\r');
                    i += 2;
                    continue;
                }
                Some('n') => {
                    out.push('\n');
                    i += 2;
                    continue;
                }
                _ => {}
            }
        }
        out.push(raw[i]);
        i += 1;
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    fn words(text: &str) -> Vec<String> {
        tokenize(text)
            .unwrap()
            .into_iter()
            .map(|t| match t.tok {
                Tok::Word { text, quoted: true } => format!("q:{text}"),
                Tok::Word { text, .. } => text,
                Tok::Semi => ";".into(),
                Tok::Open => "{".into(),
                Tok::Close => "}".into(),
            })
            .collect()
    }

    #[test]
    fn words_blocks_and_comments() {
        assert_eq!(
            words("server { listen 443 ssl; # comment ; {\n root /x; }"),
            ["server", "{", "listen", "443", "ssl", ";", "root", "/x", ";", "}"]
        );
    }

    #[test]
    fn quotes_and_escapes() {
        assert_eq!(
            words(r#"add_header X "a \"b\" c" 'it\'s' a\;b "t\tx\q";"#),
            ["add_header", "X", "q:a \"b\" c", "q:it's", "a\\;b", "q:t\tx\\q", ";"]
        );
    }

    #[test]
    fn hash_inside_a_word_and_variable_braces() {
        assert_eq!(words("return 200 a#b;"), ["return", "200", "a#b", ";"]);
        assert_eq!(words("set $x ${host}y;"), ["set", "$x", "${host}y", ";"]);
        assert_eq!(words("if ($a) {"), ["if", "($a)", "{"]);
    }

    #[test]
    fn positions_are_line_and_column() {
        let t = tokenize("a;\n  bb \"c\";").unwrap();
        assert_eq!((t[2].line, t[2].col), (2, 3));
        assert_eq!((t[3].line, t[3].col), (2, 6));
    }

    #[test]
    fn errors_name_the_place() {
        let e = tokenize("a \"unterminated;\n").unwrap_err();
        assert_eq!(e.what, SyntaxError::UnexpectedEof("a closing quote"));
        let e = tokenize("a \"x\"y;").unwrap_err();
        assert_eq!((e.line, e.col, e.what), (1, 6, SyntaxError::Unexpected('y')));
    }

    #[test]
    fn anything_tokenizes_or_fails_cleanly() {
        for text in ["\\", "\"\\", "${", "$", "'", "#", "\u{0}\u{ffff}", "a\\\n;", "}}}{{{"] {
            let _ = tokenize(text);
        }
    }
}
