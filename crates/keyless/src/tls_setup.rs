//! The mutual-TLS settings both ends use: TLS 1.3 only, certificates verified against a
//! configured CA on both sides.

use boring::ssl::{SslAcceptor, SslConnector, SslFiletype, SslMethod, SslVerifyMode, SslVersion};
use boring::x509::X509Ref;
use std::path::Path;

fn err<'a>(what: &'static str, path: &'a Path) -> impl Fn(boring::error::ErrorStack) -> String + 'a {
    move |e| format!("{what} {}: {e}", path.display())
}

/// The key server's acceptor: presents `cert`/`key`, requires a client certificate issued by
/// `client_ca`.
pub fn acceptor(cert: &Path, key: &Path, client_ca: &Path) -> Result<SslAcceptor, String> {
    let mut b = SslAcceptor::mozilla_intermediate_v5(SslMethod::tls()).map_err(|e| e.to_string())?;
    b.set_min_proto_version(Some(SslVersion::TLS1_3))
        .map_err(|e| e.to_string())?;
    b.set_max_proto_version(Some(SslVersion::TLS1_3))
        .map_err(|e| e.to_string())?;
    b.set_certificate_chain_file(cert).map_err(err("certificate", cert))?;
    b.set_private_key_file(key, SslFiletype::PEM).map_err(err("key", key))?;
    b.check_private_key()
        .map_err(err("key does not match the certificate:", key))?;
    b.set_ca_file(client_ca).map_err(err("client_ca", client_ca))?;
    b.set_verify(SslVerifyMode::PEER | SslVerifyMode::FAIL_IF_NO_PEER_CERT);
    Ok(b.build())
}

/// The gateway's connector: presents `cert`/`key`, verifies key servers against `ca`.
pub fn connector(cert: &Path, key: &Path, ca: &Path) -> Result<SslConnector, String> {
    let mut b = SslConnector::builder(SslMethod::tls()).map_err(|e| e.to_string())?;
    b.set_min_proto_version(Some(SslVersion::TLS1_3))
        .map_err(|e| e.to_string())?;
    b.set_max_proto_version(Some(SslVersion::TLS1_3))
        .map_err(|e| e.to_string())?;
    b.set_ca_file(ca).map_err(err("keyless.server_ca", ca))?;
    b.set_certificate_chain_file(cert)
        .map_err(err("keyless.client_certificate", cert))?;
    b.set_private_key_file(key, SslFiletype::PEM)
        .map_err(err("keyless.client_key", key))?;
    b.check_private_key()
        .map_err(err("keyless.client_key does not match the certificate:", key))?;
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
