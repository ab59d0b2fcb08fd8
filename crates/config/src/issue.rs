//! What validation finds: an [`Issue`] (a field path, a message) and its [`Severity`].

use std::fmt;

/// How bad an [`Issue`] is.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Severity {
    /// The configuration cannot be used.
    Error,
    /// Usable, but probably not what the operator meant.
    Warning,
}

/// One finding about a configuration.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Issue {
    /// Error or warning.
    pub severity: Severity,
    /// The field, as a path: `tls.groups`, `site[1].certificate[0].chain`.
    pub field: String,
    /// What is wrong, and what to do about it.
    pub message: String,
}

impl Issue {
    /// An error about `field`.
    pub fn error(field: impl Into<String>, message: impl Into<String>) -> Self {
        Self {
            severity: Severity::Error,
            field: field.into(),
            message: message.into(),
        }
    }

    /// A warning about `field`.
    pub fn warning(field: impl Into<String>, message: impl Into<String>) -> Self {
        Self {
            severity: Severity::Warning,
            field: field.into(),
            message: message.into(),
        }
    }
}

impl fmt::Display for Issue {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let level = match self.severity {
            Severity::Error => "error",
            Severity::Warning => "warning",
        };
        write!(f, "{level}: {}: {}", self.field, self.message)
    }
}
