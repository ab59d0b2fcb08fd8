//! Tokens to a directive tree: `name args... ;` or `name args... { ... }`, with nginx's errors
//! (`unexpected ";"`, `unexpected "}"`, end of file inside a directive or a block) and a bound
//! on nesting, so hostile input cannot exhaust the stack.

use super::lexer::{tokenize, Tok, Token};
use super::{Directive, Pos, Word};
use crate::error::SyntaxError;

/// Deepest block nesting accepted (real configurations use 4 or 5: http, server, location, if).
pub const MAX_DEPTH: usize = 64;

/// A parse error at a line and column of the file.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ParseError {
    /// Line.
    pub line: u32,
    /// Column.
    pub col: u32,
    /// What.
    pub what: SyntaxError,
}

/// Parses the text of file number `file` into its top-level directives.
pub fn parse(text: &str, file: usize) -> Result<Vec<Directive>, ParseError> {
    let tokens = tokenize(text).map_err(|e| ParseError {
        line: e.line,
        col: e.col,
        what: e.what,
    })?;
    let end = end_of(text);
    let mut p = Parser {
        tokens,
        i: 0,
        file,
        end,
    };
    p.block(0, false)
}

/// The line and column just after the last character (where "unexpected end of file" points).
fn end_of(text: &str) -> (u32, u32) {
    let mut line = 1u32;
    let mut col = 1u32;
    for c in text.chars() {
        if c == '\n' {
            line = line.saturating_add(1);
            col = 1;
        } else {
            col = col.saturating_add(1);
        }
    }
    (line, col)
}

struct Parser {
    tokens: Vec<Token>,
    i: usize,
    file: usize,
    end: (u32, u32),
}

impl Parser {
    fn error(&self, line: u32, col: u32, what: SyntaxError) -> ParseError {
        ParseError { line, col, what }
    }

    fn eof(&self, expecting: &'static str) -> ParseError {
        self.error(self.end.0, self.end.1, SyntaxError::UnexpectedEof(expecting))
    }

    /// Directives up to the end of the file (`inside` false) or the `}` closing this block.
    fn block(&mut self, depth: usize, inside: bool) -> Result<Vec<Directive>, ParseError> {
        let mut out = Vec::new();
        loop {
            let Some(first) = self.tokens.get(self.i).cloned() else {
                return if inside { Err(self.eof("\"}\"")) } else { Ok(out) };
            };
            self.i += 1;
            let name = match first.tok {
                Tok::Close if inside => return Ok(out),
                Tok::Close => return Err(self.error(first.line, first.col, SyntaxError::Unexpected('}'))),
                Tok::Semi => return Err(self.error(first.line, first.col, SyntaxError::Unexpected(';'))),
                Tok::Open => return Err(self.error(first.line, first.col, SyntaxError::Unexpected('{'))),
                Tok::Word { text, .. } => text,
            };
            let at = Pos {
                file: self.file,
                line: first.line,
                col: first.col,
            };
            let mut args = Vec::new();
            loop {
                let Some(t) = self.tokens.get(self.i).cloned() else {
                    return Err(self.eof("\";\" or \"}\""));
                };
                self.i += 1;
                match t.tok {
                    Tok::Word { text, quoted } => args.push(Word { text, quoted }),
                    Tok::Semi => {
                        out.push(Directive {
                            name,
                            args,
                            block: None,
                            at,
                        });
                        break;
                    }
                    Tok::Open => {
                        if depth + 1 > MAX_DEPTH {
                            return Err(self.error(t.line, t.col, SyntaxError::TooDeep(MAX_DEPTH)));
                        }
                        let inner = self.block(depth + 1, true)?;
                        out.push(Directive {
                            name,
                            args,
                            block: Some(inner),
                            at,
                        });
                        break;
                    }
                    Tok::Close => return Err(self.error(t.line, t.col, SyntaxError::Unexpected('}'))),
                }
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn nested_blocks_with_positions() {
        let d = parse("http {\n  server {\n    listen 443 ssl;\n  }\n}\n", 0).unwrap();
        assert_eq!(d.len(), 1);
        let server = &d[0].children()[0];
        assert_eq!(server.name, "server");
        let listen = &server.children()[0];
        assert_eq!(listen.arg_texts(), ["443", "ssl"]);
        assert_eq!((listen.at.line, listen.at.col), (3, 5));
    }

    #[test]
    fn errors_have_line_and_column() {
        let e = parse("server {\n listen 443;\n", 0).unwrap_err();
        assert_eq!(e.what, SyntaxError::UnexpectedEof("\"}\""));
        assert_eq!(e.line, 3);
        let e = parse("server { listen 443 }", 0).unwrap_err();
        assert_eq!((e.line, e.col, e.what), (1, 21, SyntaxError::Unexpected('}')));
        let e = parse("a;\n}", 0).unwrap_err();
        assert_eq!((e.line, e.col, e.what), (2, 1, SyntaxError::Unexpected('}')));
        let e = parse("  ;", 0).unwrap_err();
        assert_eq!((e.line, e.col, e.what), (1, 3, SyntaxError::Unexpected(';')));
        let e = parse("listen 443", 0).unwrap_err();
        assert_eq!(e.what, SyntaxError::UnexpectedEof("\";\" or \"}\""));
    }

    #[test]
    fn deep_nesting_is_refused_not_a_crash() {
        let text = "a{".repeat(100_000);
        let e = parse(&text, 0).unwrap_err();
        assert_eq!(e.what, SyntaxError::TooDeep(MAX_DEPTH));
        let ok = format!("{}{}", "a{".repeat(MAX_DEPTH), "}".repeat(MAX_DEPTH));
        assert!(parse(&ok, 0).is_ok());
    }
}
