//! tlsgate configuration: the TOML model ([`model`]), loading with errors that name the file
//! and the field ([`load()`], [`ConfigError`]), and semantic validation ([`validate`]).
//!
//! Loading never touches certificates' contents: that is `tlsgate check`'s job (tlsgate-tls's
//! `lint` module), so that this crate stays free of TLS dependencies.
#![forbid(unsafe_code)]

pub mod address;
pub mod duration;
mod error;
mod issue;
mod load;
pub mod member;
pub mod model;
pub mod request_edit;
pub mod validate;

pub use address::{split_authority, AddressError, Host, OriginAddr};
pub use duration::Duration;
pub use error::{ConfigError, ParseError};
pub use issue::{Issue, Severity};
pub use load::{load, parse, resolve_paths, LoadedConfig};
pub use member::Member;
pub use model::*;
pub use request_edit::{Cidr, HeaderEdits};
