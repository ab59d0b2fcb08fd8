//! `tlsgate import nginx`: read an nginx configuration (a real tokenizer and parser with
//! `include` expansion, [`nginx`]) and translate its TLS and proxy parts into tlsgate TOML
//! ([`translate`]), listing every directive that could not be carried over and why.
//!
//! The crate reads files only through [`nginx::Source`], so the fuzz target and the unit tests
//! run the whole path on in-memory files.
#![forbid(unsafe_code)]

mod error;
pub mod nginx;
pub mod translate;

pub use error::{ImportError, SyntaxError};
pub use translate::{Finding, Translation};

use std::path::Path;

/// Parses `file` (includes resolved against `prefix`, nginx's configuration prefix) and
/// translates it.
pub fn import_nginx(source: &dyn nginx::Source, file: &Path, prefix: &Path) -> Result<Translation, ImportError> {
    let conf = nginx::load(source, file, prefix)?;
    translate::translate_with_prefix(&conf, prefix)
}
