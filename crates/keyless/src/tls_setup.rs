//! The mutual-TLS settings both ends use: TLS 1.3 only, certificates verified against a
//! configured CA on both sides.

use boring::error::ErrorStack;
use boring::ssl::{SslAcceptor, SslConnector, SslFiletype, SslMethod, SslVerifyMode, SslVersion};
use boring::x509::X509Ref;
use std::path::{Path, PathBuf};
use tlsgate_error::{Classify, Side};

/// Why a key server's acceptor or a gateway's connector could not be set up.
#[derive(Debug, thiserror::Error)]
pub enum TlsSetupError {
    /// The TLS library refused a setting that is not read from a file.
    #[error("TLS setup: {0}")]
    Library(#[source] ErrorStack),
    /// A certificate, key or CA file is missing, unreadable, or does not fit.
    #[error("{what} {}: {source}", path.display())]
    File {
        /// Which setting (`certificate`, `keyless.client_key`, …).
        what: &'static str,
        /// The file.
        path: PathBuf,
        /// What the TLS library said.
        #[source]
        source: ErrorStack,
    },
}

impl Classify for TlsSetupError {
    fn side(&self) -> Side {
        match self {
            TlsSetupError::Library(_) => Side::Internal,
            TlsSetupError::File { .. } => Side::Config,
        }
    }
    fn kind(&self) -> &'static str {
        match self {
            TlsSetupError::Library(_) => "tls_library",
            TlsSetupError::File { .. } => "tls_file",
        }
    }
}

fn file<'a>(what: &'static str, path: &'a Path) -> impl Fn(ErrorStack) -> TlsSetupError + 'a {
    move |source| TlsSetupError::File {
        what,
        path: path.to_path_buf(),
        source,
    }
}

/// The key server's acceptor: presents `cert`/`key`, requires a client certificate issued by
/// `client_ca`.
pub fn acceptor(cert: &Path, key: &Path, client_ca: &Path) -> Result<SslAcceptor, TlsSetupError> {
    let mut b = SslAcceptor::mozilla_intermediate_v5(SslMethod::tls()).map_err(TlsSetupError::Library)?;
    b.set_min_proto_version(Some(SslVersion::TLS1_3))
        .map_err(TlsSetupError::Library)?;
    b.set_max_proto_version(Some(SslVersion::TLS1_3))
        .map_err(TlsSetupError::Library)?;
    b.set_certificate_chain_file(cert).map_err(file("certificate", cert))?;
    b.set_private_key_file(key, SslFiletype::PEM)
        .map_err(file("key", key))?;
    b.check_private_key()
        .map_err(file("key does not match the certificate:", key))?;
    b.set_ca_file(client_ca).map_err(file("client_ca", client_ca))?;
    b.set_verify(SslVerifyMode::PEER | SslVerifyMode::FAIL_IF_NO_PEER_CERT);
    Ok(b.build())
}

/// The gateway's connector: presents `cert`/`key`, verifies key servers against `ca`.
pub fn connector(cert: &Path, key: &Path, ca: &Path) -> Result<SslConnector, TlsSetupError> {
    let mut b = SslConnector::builder(SslMethod::tls()).map_err(TlsSetupError::Library)?;
    b.set_min_proto_version(Some(SslVersion::TLS1_3))
        .map_err(TlsSetupError::Library)?;
    b.set_max_proto_version(Some(SslVersion::TLS1_3))
        .map_err(TlsSetupError::Library)?;
    b.set_ca_file(ca).map_err(file("keyless.server_ca", ca))?;
    b.set_certificate_chain_file(cert)
        .map_err(file("keyless.client_certificate", cert))?;
    b.set_private_key_file(key, SslFiletype::PEM)
        .map_err(file("keyless.client_key", key))?;
    b.check_private_key()
        .map_err(file("keyless.client_key does not match the certificate:", key))?;
    Ok(b.build())
}

/// The identities of a client certificate: `cn:NAME` (each common name) and `spki:HEX`.
pub fn identities(cert: &X509Ref) -> Vec<String> {
    let mut ids: Vec<String> = cert
        .subject_name()
        .entries_by_nid(boring::nid::Nid::COMMONNAME)
        .filter_map(|e| e.data().as_utf8().ok().map(|s| format!("cn:{s}")))
        .collect();
    if let Ok(key) = cert.public_key() {
        if let Ok(id) = crate::keystore::key_id(&key) {
            ids.push(format!("spki:{}", crate::keystore::hex(&id)));
        }
    }
    ids
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_missing_file_is_a_config_error_naming_the_setting() {
        let dir = tempfile::tempdir().unwrap();
        let missing = dir.path().join("missing.pem");
        let Err(e) = connector(&missing, &missing, &missing) else {
            panic!("a missing CA file is accepted")
        };
        assert_eq!((e.side(), e.kind()), (Side::Config, "tls_file"));
        assert!(
            e.to_string()
                .starts_with(&format!("keyless.server_ca {}: ", missing.display())),
            "{e}"
        );
        assert!(std::error::Error::source(&e).is_some());
        let Err(e) = acceptor(&missing, &missing, &missing) else {
            panic!("a missing certificate file is accepted")
        };
        assert!(e.to_string().starts_with("certificate "), "{e}");
    }
}
