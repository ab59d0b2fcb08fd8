//! Client certificates from downstream (`[site.client_auth]`): what a site context needs to ask
//! for and verify them, what each connection of the site needs, and the verified identity read
//! once per connection after the handshake.
//!
//! BoringSSL keeps the verify mode and depth per connection (copied from the *front* context at
//! `SSL_new`), but the trust store, the CA names sent in the CertificateRequest and the session-ID
//! context in the certificate configuration that `SSL_set_SSL_CTX` switches to. So a site context
//! carries the store, the names and its session-ID context ([`SiteClientAuth::install`]), and the
//! certificate-selection hook sets the mode and depth on the connection ([`Policy::apply`]).
//!
//! Verification is BoringSSL's own (chain to one of `ca`, validity, the `clientAuth` purpose,
//! depth). `required`: no certificate fails the handshake (alert `certificate_required` in TLS
//! 1.3, `handshake_failure` in 1.2); `optional`: no certificate is fine, but one that does not
//! verify fails the handshake, as nginx's `ssl_verify_client optional` and HAProxy's
//! `verify optional` do (alerts `unknown_ca`, `certificate_expired`, `bad_certificate`, …).
//!
//! Resumption keeps the identity: the client's certificate is part of the session (ticket or
//! session-ID entry, node-local or in the cluster store) and comes back on resumption. A session
//! resumes only where its session-ID context matches; a site with client certificates has one of
//! its own, derived from the site name, the mode and the CA certificates ([`session_id_context`]),
//! so a session made without a certificate (another site, this site before client certificates
//! were required, or under other CAs) is never resumed where one is required: the client gets a
//! full handshake and is asked for its certificate.

use crate::error::TlsBuildError;
use boring::ex_data::Index;
use boring::hash::{hash, MessageDigest};
use boring::ssl::{Ssl, SslContextBuilder, SslRef, SslVerifyMode};
use boring::x509::store::X509StoreBuilder;
use boring::x509::{X509Ref, X509};
use std::sync::LazyLock;
use std::time::Duration;
use tlsgate_config::{ClientAuthConfig, ClientAuthMode, SiteConfig};
use tlsgate_error::log_limit::LogLimit;

/// BoringSSL's session-ID context limit (`SSL_MAX_SID_CTX_LENGTH`).
const SID_CTX_LEN: usize = 32;

/// What each connection of a site with client certificates gets at certificate selection.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Policy {
    mode: SslVerifyMode,
    depth: u32,
}

/// Marks a connection whose site asked for a client certificate ([`Policy::apply`]). Kept in the
/// connection's ex_data, not read back from its verify mode: the mode is handshake
/// configuration, which BoringSSL frees once the handshake is done
/// ([`crate::ffi::shed_handshake_config`]).
static ASKED: LazyLock<Index<Ssl, ()>> = LazyLock::new(|| Ssl::new_ex_index().expect("BoringSSL ex_data index"));

impl Policy {
    /// Asks the connection's client for a certificate (and requires one, per the mode).
    pub fn apply(self, ssl: &mut SslRef) {
        ssl.set_verify(self.mode);
        ssl.set_verify_depth(self.depth);
        ssl.set_ex_data(*ASKED, ());
    }
}

/// A site's client-certificate setup, built from `[site.client_auth]` with `mode` not `off`.
pub struct SiteClientAuth {
    /// The CAs that issue client certificates.
    cas: Vec<X509>,
    /// The per-connection part.
    pub policy: Policy,
    /// The site's session-ID context (see [`session_id_context`]).
    pub sid_ctx: [u8; SID_CTX_LEN],
}

impl SiteClientAuth {
    /// Loads site `index`'s client-certificate settings; None when it asks for none.
    pub fn for_site(index: usize, site: &SiteConfig) -> Result<Option<Self>, TlsBuildError> {
        let Some(config) = site.client_auth.as_ref() else {
            return Ok(None);
        };
        let mode = match config.mode {
            ClientAuthMode::Off => return Ok(None),
            ClientAuthMode::Optional => SslVerifyMode::PEER,
            ClientAuthMode::Required => SslVerifyMode::PEER | SslVerifyMode::FAIL_IF_NO_PEER_CERT,
        };
        let field = format!("site[{index}].client_auth.ca");
        let Some(path) = config.ca.as_deref() else {
            return Err(TlsBuildError::File {
                field,
                path: "(not set)".into(),
                message: "a CA file is required unless mode = \"off\"".into(),
            });
        };
        let cas = load_cas(&field, path)?;
        let sid_ctx = session_id_context(&site.name, config, &cas);
        Ok(Some(Self {
            cas,
            policy: Policy {
                mode,
                depth: config.verify_depth,
            },
            sid_ctx,
        }))
    }

    /// Installs the trust store and the CA names on a site context (`at` names the field).
    pub fn install(&self, b: &mut SslContextBuilder, at: &str) -> Result<(), TlsBuildError> {
        let setting = |source| TlsBuildError::Setting {
            field: format!("{at}.client_auth"),
            source,
        };
        let mut store = X509StoreBuilder::new().map_err(setting)?;
        for ca in &self.cas {
            store.add_cert(ca).map_err(setting)?;
            b.add_client_ca(ca).map_err(setting)?;
        }
        b.set_verify_cert_store(store.build()).map_err(setting)?;
        // For completeness; connections take theirs from `Policy::apply`.
        b.set_verify(self.policy.mode);
        b.set_session_id_context(&self.sid_ctx).map_err(setting)?;
        Ok(())
    }
}

/// Reads a client-CA bundle (`field` names it): at least one PEM certificate. (Not
/// `context::load_chain`: `context` imports this module, and no import circle is wanted.)
pub fn load_cas(field: &str, path: &std::path::Path) -> Result<Vec<X509>, TlsBuildError> {
    let shown = || path.display().to_string();
    let pem = std::fs::read(path).map_err(|source| TlsBuildError::Read {
        field: field.into(),
        path: shown(),
        source,
    })?;
    let cas = X509::stack_from_pem(&pem).map_err(|source| TlsBuildError::Parse {
        field: field.into(),
        path: shown(),
        what: "PEM certificate bundle",
        source,
    })?;
    if cas.is_empty() {
        return Err(TlsBuildError::File {
            field: field.into(),
            path: shown(),
            message: "no certificate in file".into(),
        });
    }
    Ok(cas)
}

/// `tlsgate check`'s findings about the client-CA bundles (`site[i].client_auth.ca`): a file
/// that cannot be read or holds no PEM certificate is an error, a certificate in it that is not
/// a CA (it could never issue a client certificate) a warning. A missing file is validation's.
pub fn lint(config: &tlsgate_config::Config) -> Vec<tlsgate_config::Issue> {
    use tlsgate_config::Issue;
    let mut out = Vec::new();
    for (i, site) in config.sites.iter().enumerate() {
        let Some(path) = site.client_auth.as_ref().and_then(|c| c.ca.as_deref()) else {
            continue;
        };
        let field = format!("site[{i}].client_auth.ca");
        let cas = match load_cas(&field, path) {
            Ok(cas) => cas,
            Err(e) => {
                let text = e.to_string();
                let message = text.strip_prefix(&format!("{field}: ")).unwrap_or(&text).to_string();
                out.push(Issue::error(field, message));
                continue;
            }
        };
        for (k, ca) in cas.iter().enumerate() {
            let is_ca = ca
                .to_der()
                .ok()
                .and_then(|der| x509_parser::parse_x509_certificate(&der).ok().map(|(_, c)| c.is_ca()));
            if is_ca == Some(false) {
                out.push(Issue::warning(
                    &field,
                    format!(
                        "{}: certificate {k} ({}) is not a CA certificate: no client certificate can chain to it",
                        path.display(),
                        subject_text(ca)
                    ),
                ));
            }
        }
    }
    out
}

/// The session-ID context of a site with client certificates: `tlsgate:` and 24 bytes of
/// SHA-256 over the site name, the mode, the depth and every CA certificate. Equal on every node
/// with the same configuration (sessions resume across a cluster), different from the plain
/// `tlsgate:<name>` of the site without client certificates and from any other mode or CA set.
pub fn session_id_context(site: &str, config: &ClientAuthConfig, cas: &[X509]) -> [u8; SID_CTX_LEN] {
    let mut input = Vec::new();
    input.extend_from_slice(b"tlsgate client_auth v1\0");
    input.extend_from_slice(site.as_bytes());
    input.push(0);
    input.push(config.mode as u8);
    input.extend_from_slice(&config.verify_depth.to_be_bytes());
    for ca in cas {
        let der = ca.to_der().unwrap_or_default();
        input.extend_from_slice(&(der.len() as u64).to_be_bytes());
        input.extend_from_slice(&der);
    }
    let digest = hash(MessageDigest::sha256(), &input)
        .map(|d| d.to_vec())
        .unwrap_or_default();
    let mut out = [0u8; SID_CTX_LEN];
    out[..8].copy_from_slice(b"tlsgate:");
    for (o, d) in out[8..].iter_mut().zip(digest) {
        *o = d;
    }
    out
}

/// A connection's verified client certificate, read once after the handshake.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ClientIdentity {
    /// The subject as RFC 4514 text, as OpenSSL's `-nameopt RFC2253` and nginx's
    /// `$ssl_client_s_dn` print it: printable ASCII only (other bytes escaped as `\XX`).
    pub subject: String,
    /// SHA-256 of the certificate's DER, lowercase hex.
    pub sha256: String,
}

impl ClientIdentity {
    /// The verified client certificate of a finished handshake (full or resumed); None when the
    /// site asks for none, the client sent none, or it did not verify.
    pub fn of(ssl: &SslRef) -> Option<Self> {
        ssl.ex_data(*ASKED)?;
        let cert = ssl.peer_certificate()?;
        if let Err(e) = ssl.verify_result() {
            // BoringSSL fails the handshake first; never trust a certificate that did not verify.
            static UNVERIFIED_LOG: LogLimit = LogLimit::new(Duration::from_secs(1));
            if let Some(left_out) = UNVERIFIED_LOG.allow() {
                tracing::warn!(error = %e, left_out, "client certificate present but not verified; no identity");
            }
            return None;
        }
        Some(Self::from_certificate(&cert))
    }

    /// The identity a certificate carries (its subject and fingerprint), unverified.
    pub fn from_certificate(cert: &X509Ref) -> Self {
        Self {
            subject: subject_text(cert),
            sha256: cert
                .digest(MessageDigest::sha256())
                .map(|d| hex(&d))
                .unwrap_or_default(),
        }
    }
}

/// A certificate's subject as RFC 4514 text (BoringSSL's `X509_NAME_print_ex` with
/// `XN_FLAG_RFC2253`), with anything outside printable ASCII escaped as `\XX` should the
/// printer ever let a byte through (it escapes controls and non-ASCII bytes itself).
fn subject_text(cert: &X509Ref) -> String {
    let printed = cert
        .subject_name()
        .print_ex(boring_sys::XN_FLAG_RFC2253)
        .unwrap_or_default();
    if printed.bytes().all(|b| (0x20..0x7f).contains(&b)) {
        return printed;
    }
    let mut out = String::with_capacity(printed.len());
    for b in printed.bytes() {
        if (0x20..0x7f).contains(&b) {
            out.push(char::from(b));
        } else {
            out.push_str(&format!("\\{b:02X}"));
        }
    }
    out
}

fn hex(bytes: &[u8]) -> String {
    bytes.iter().map(|b| format!("{b:02x}")).collect()
}
