//! Why an import failed: the nginx text could not be parsed (with file:line:col), a file could
//! not be read, or nothing in it listens with TLS.

use tlsgate_error::{Classify, Side};

/// What is wrong at one place of an nginx configuration file.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum SyntaxError {
    /// `;`, `{` or `}` where a directive name was expected, or after a quoted word.
    #[error("unexpected \"{0}\"")]
    Unexpected(char),
    /// The file ended inside a directive, a quoted string or a block.
    #[error("unexpected end of file, expecting {0}")]
    UnexpectedEof(&'static str),
    /// Blocks nested deeper than nginx configurations ever go (hostile input).
    #[error("blocks nested more than {0} deep")]
    TooDeep(usize),
    /// An `include` that includes itself, directly or not.
    #[error("include cycle: {0} is already being read")]
    IncludeCycle(String),
    /// Includes nested too deep.
    #[error("includes nested more than {0} deep")]
    IncludeTooDeep(usize),
}

/// Why `tlsgate import nginx` produced no configuration.
#[derive(Debug, thiserror::Error)]
pub enum ImportError {
    /// The configuration does not parse: `FILE:LINE:COL: what`.
    #[error("{file}:{line}:{col}: {what}")]
    Syntax {
        /// The file, as named by the command line or the `include`.
        file: String,
        /// 1-based line.
        line: u32,
        /// 1-based column (characters).
        col: u32,
        /// What is wrong there.
        what: SyntaxError,
    },
    /// The main file could not be read.
    #[error("{file}: cannot read: {source}")]
    Read {
        /// The file.
        file: String,
        /// Why.
        source: std::io::Error,
    },
    /// No `server` block listens with `ssl`: there is nothing tlsgate could serve.
    #[error("no server block listens with ssl (listen ... ssl): nothing to translate")]
    NoTlsServer,
}

impl ImportError {
    /// True for errors in the text itself (exit status 2), as opposed to unreadable files or
    /// configurations without any TLS server.
    pub fn is_syntax(&self) -> bool {
        matches!(self, ImportError::Syntax { .. })
    }
}

impl Classify for ImportError {
    fn side(&self) -> Side {
        Side::Config
    }
    fn kind(&self) -> &'static str {
        match self {
            ImportError::Syntax { .. } => "nginx_syntax",
            ImportError::Read { .. } => "nginx_read",
            ImportError::NoTlsServer => "nginx_no_tls_server",
        }
    }
}

impl Classify for SyntaxError {
    fn side(&self) -> Side {
        Side::Config
    }
    fn kind(&self) -> &'static str {
        match self {
            SyntaxError::Unexpected(_) => "nginx_unexpected",
            SyntaxError::UnexpectedEof(_) => "nginx_unexpected_eof",
            SyntaxError::TooDeep(_) => "nginx_too_deep",
            SyntaxError::IncludeCycle(_) => "nginx_include_cycle",
            SyntaxError::IncludeTooDeep(_) => "nginx_include_too_deep",
        }
    }
}

/// Why one directive cannot be carried over to tlsgate's configuration. It is not a failure of
/// the import: it becomes a line of the report (`FILE:LINE: not translated: ...`) and the
/// translation goes on with the rest.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{0}")]
pub struct Untranslatable(pub String);

impl From<String> for Untranslatable {
    fn from(why: String) -> Self {
        Untranslatable(why)
    }
}

impl From<&str> for Untranslatable {
    fn from(why: &str) -> Self {
        Untranslatable(why.to_string())
    }
}

impl Classify for Untranslatable {
    fn side(&self) -> Side {
        Side::Config
    }
    fn kind(&self) -> &'static str {
        "nginx_untranslatable"
    }
}
