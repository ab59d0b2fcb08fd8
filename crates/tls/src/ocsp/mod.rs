//! OCSP stapling (RFC 6960 responses, RFC 6066 `status_request`, TLS 1.3 certificate-entry
//! status), one job per module:
//!
//! - `request`: what to fetch: [`OcspTarget`] (one certificate with its issuer and responders)
//!   and the OCSP request for it. The HTTP fetch and its schedule run in tlsgate-proxy's
//!   `stapling`, which asks [`Staple::refresh_in`] when to fetch again.
//! - `response`: checking a response ([`OcspTarget::check`]) into a [`Staple`], or a
//!   [`Rejection`] saying why not.
//! - `registry`: the staples served: [`StapleSlot`] per certificate, [`StapleRegistry`] across
//!   reloads, and the certificate-selection step that staples a handshake.
//! - `oid`: the object identifiers they share.
//!
//! The paths `tlsgate_tls::ocsp::{OcspTarget, Rejection, StapleSlot, ...}` are re-exported here.

mod oid;
mod registry;
mod request;
mod response;
#[cfg(test)]
mod test_responses;

pub use oid::ID_AD_OCSP;
pub(crate) use oid::{ECDSA_SHA256, ID_PKIX_OCSP_BASIC, RSA_SHA256};
pub(crate) use registry::staple;
pub use registry::{StapleRegistry, StapleSlot, StapleSource};
pub use request::{OcspError, OcspTarget};
pub use response::{format_time, Invalid, Rejection, Staple, CLOCK_SKEW, VALIDITY_WITHOUT_NEXT_UPDATE};
