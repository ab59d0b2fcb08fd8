//! Private-key operations behind a small trait, reached through BoringSSL's asynchronous
//! private-key hook.
//!
//! The handshake never touches a key directly: it asks a [`KeyBackend`] to sign. The local
//! backend answers at once (BoringSSL polls the future immediately, so a ready future costs no
//! suspension); a remote key server (the keyless issue) answers later and the handshake suspends
//! while the worker serves other connections.

use boring::hash::MessageDigest;
use boring::pkey::{Id, PKey, Private};
use boring::rsa::Padding;
use boring::sign::{RsaPssSaltlen, Signer};
use boring::ssl::{
    AsyncPrivateKeyMethod, AsyncPrivateKeyMethodError, BoxPrivateKeyMethodFinish, BoxPrivateKeyMethodFuture, SslRef,
    SslSignatureAlgorithm,
};
use std::future::Future;
use std::pin::Pin;
use std::sync::Arc;

/// The kind of key behind a certificate.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum KeyType {
    /// ECDSA on P-256.
    EcdsaP256,
    /// ECDSA on P-384.
    EcdsaP384,
    /// RSA of any size.
    Rsa,
    /// Ed25519.
    Ed25519,
    /// ML-DSA (FIPS 204) of one parameter set: TLS 1.3 only, chosen for clients that offer its
    /// scheme (`mldsa.rs`).
    MlDsa(crate::mldsa::Level),
    /// Anything else (shown as `other` in metrics).
    Other,
}

impl KeyType {
    /// Label for metrics and logs.
    pub fn as_str(self) -> &'static str {
        match self {
            KeyType::EcdsaP256 => "ecdsa_p256",
            KeyType::EcdsaP384 => "ecdsa_p384",
            KeyType::Rsa => "rsa",
            KeyType::Ed25519 => "ed25519",
            KeyType::MlDsa(level) => level.name(),
            KeyType::Other => "other",
        }
    }

    /// Whether this is an ECDSA key (preferred for clients that can verify it).
    pub fn is_ecdsa(self) -> bool {
        matches!(self, KeyType::EcdsaP256 | KeyType::EcdsaP384)
    }

    /// The ML-DSA parameter set, for an ML-DSA key.
    pub fn mldsa(self) -> Option<crate::mldsa::Level> {
        match self {
            KeyType::MlDsa(level) => Some(level),
            _ => None,
        }
    }

    /// The key type of a public or private key.
    pub fn of<T: boring::pkey::HasPublic>(key: &boring::pkey::PKeyRef<T>) -> Self {
        match key.id() {
            Id::RSA => KeyType::Rsa,
            Id::ED25519 => KeyType::Ed25519,
            Id::EC => match key.bits() {
                256 => KeyType::EcdsaP256,
                384 => KeyType::EcdsaP384,
                _ => KeyType::Other,
            },
            id => crate::mldsa::Level::of_id(id).map_or(KeyType::Other, KeyType::MlDsa),
        }
    }
}

/// Why a signature could not be made.
#[derive(Debug, thiserror::Error)]
pub enum KeyError {
    /// The key cannot produce this algorithm.
    #[error("signature algorithm {0:?} is not supported by this key")]
    UnsupportedAlgorithm(SslSignatureAlgorithm),
    /// The crypto library failed.
    #[error("signing failed: {0}")]
    Crypto(#[source] boring::error::ErrorStack),
    /// A remote backend failed (unreachable, timed out, refused): its own error, whose side,
    /// kind and retry safety this one passes on.
    #[error("key backend unavailable: {0}")]
    Unavailable(#[source] tlsgate_error::Error),
}

impl tlsgate_error::Classify for KeyError {
    fn side(&self) -> tlsgate_error::Side {
        match self {
            KeyError::UnsupportedAlgorithm(_) | KeyError::Crypto(_) => tlsgate_error::Side::Internal,
            KeyError::Unavailable(e) => e.side(),
        }
    }

    fn kind(&self) -> &'static str {
        match self {
            KeyError::UnsupportedAlgorithm(_) => "unsupported_signature_algorithm",
            KeyError::Crypto(_) => "signing_failed",
            KeyError::Unavailable(e) => e.kind(),
        }
    }

    /// A signature changes nothing, so a remote failure is retry-safe unless the key server
    /// refused on purpose (its error says which).
    fn retry_safe(&self) -> bool {
        match self {
            KeyError::Unavailable(e) => e.retry_safe(),
            _ => false,
        }
    }
}

/// A pending signature.
pub type SignFuture = Pin<Box<dyn Future<Output = Result<Vec<u8>, KeyError>> + Send>>;

/// Something that can sign TLS handshakes with one private key.
///
/// Contract: `sign` must not block the calling thread for longer than a local signature takes;
/// remote work is returned as a pending future. The returned bytes are the complete signature in
/// the TLS wire encoding for `algorithm` (DER for ECDSA, raw for RSA and Ed25519).
pub trait KeyBackend: Send + Sync + 'static {
    /// The key type, so certificate selection can match it with what the client supports.
    fn key_type(&self) -> KeyType;
    /// Signs `input` (the raw message; the backend hashes it as `algorithm` requires).
    fn sign(&self, algorithm: SslSignatureAlgorithm, input: &[u8]) -> SignFuture;
    /// Issues a delegated credential (RFC 9345): signs `input`, the credential signing input,
    /// with the scheme `algorithm` (a code point). `None` for backends that do not issue
    /// credentials (a key in this process needs none: it signs handshakes at local cost).
    fn delegate(&self, algorithm: u16, input: Vec<u8>) -> Option<SignFuture> {
        let _ = (algorithm, input);
        None
    }
}

/// A private key held in this process, signing with BoringSSL.
pub struct LocalKey {
    key: PKey<Private>,
    key_type: KeyType,
}

impl LocalKey {
    /// Wraps a parsed private key.
    pub fn new(key: PKey<Private>) -> Self {
        let key_type = KeyType::of(&key);
        Self { key, key_type }
    }

    /// Signs synchronously.
    pub fn sign_now(&self, algorithm: SslSignatureAlgorithm, input: &[u8]) -> Result<Vec<u8>, KeyError> {
        let (md, pss) = digest_for(algorithm).ok_or(KeyError::UnsupportedAlgorithm(algorithm))?;
        // An ML-DSA key signs with its own parameter set's scheme only.
        let level = crate::mldsa::Level::ALL.into_iter().find(|l| l.scheme() == algorithm);
        if level.is_some() && level != self.key_type.mldsa() {
            return Err(KeyError::UnsupportedAlgorithm(algorithm));
        }
        let crypto = KeyError::Crypto;
        let mut signer = match md {
            Some(md) => Signer::new(md, &self.key),
            None => Signer::new_without_digest(&self.key),
        }
        .map_err(crypto)?;
        if pss {
            signer.set_rsa_padding(Padding::PKCS1_PSS).map_err(crypto)?;
            signer
                .set_rsa_pss_saltlen(RsaPssSaltlen::DIGEST_LENGTH)
                .map_err(crypto)?;
        }
        if md.is_none() {
            return signer.sign_oneshot_to_vec(input).map_err(crypto);
        }
        signer.update(input).map_err(crypto)?;
        signer.sign_to_vec().map_err(crypto)
    }
}

impl KeyBackend for LocalKey {
    fn key_type(&self) -> KeyType {
        self.key_type
    }

    fn sign(&self, algorithm: SslSignatureAlgorithm, input: &[u8]) -> SignFuture {
        Box::pin(std::future::ready(self.sign_now(algorithm, input)))
    }
}

/// Whether `signature` is `public`'s signature over `input` with the TLS scheme `algorithm`
/// (checks a key server's answer before it is served, e.g. a delegated credential).
pub fn verify<T: boring::pkey::HasPublic>(
    public: &boring::pkey::PKeyRef<T>,
    algorithm: SslSignatureAlgorithm,
    input: &[u8],
    signature: &[u8],
) -> bool {
    let Some((md, pss)) = digest_for(algorithm) else {
        return false;
    };
    let verified = || -> Result<bool, boring::error::ErrorStack> {
        let mut v = match md {
            Some(md) => boring::sign::Verifier::new(md, public)?,
            None => boring::sign::Verifier::new_without_digest(public)?,
        };
        if pss {
            v.set_rsa_padding(Padding::PKCS1_PSS)?;
            v.set_rsa_pss_saltlen(RsaPssSaltlen::DIGEST_LENGTH)?;
        }
        if md.is_none() {
            return v.verify_oneshot(signature, input);
        }
        v.update(input)?;
        v.verify(signature)
    };
    verified().unwrap_or(false)
}

/// Digest and PSS flag for a TLS signature algorithm; `Some((None, _))` means no pre-hash
/// (Ed25519, ML-DSA: BoringSSL signs the whole message, pure ML-DSA with an empty context).
fn digest_for(alg: SslSignatureAlgorithm) -> Option<(Option<MessageDigest>, bool)> {
    use SslSignatureAlgorithm as A;
    Some(match alg {
        A::RSA_PKCS1_SHA256 | A::ECDSA_SECP256R1_SHA256 => (Some(MessageDigest::sha256()), false),
        A::RSA_PKCS1_SHA384 | A::ECDSA_SECP384R1_SHA384 => (Some(MessageDigest::sha384()), false),
        A::RSA_PKCS1_SHA512 | A::ECDSA_SECP521R1_SHA512 => (Some(MessageDigest::sha512()), false),
        A::RSA_PSS_RSAE_SHA256 => (Some(MessageDigest::sha256()), true),
        A::RSA_PSS_RSAE_SHA384 => (Some(MessageDigest::sha384()), true),
        A::RSA_PSS_RSAE_SHA512 => (Some(MessageDigest::sha512()), true),
        A::ED25519 | A::ML_DSA_44 | A::ML_DSA_65 | A::ML_DSA_87 => (None, false),
        _ => return None,
    })
}

/// Bridges BoringSSL's async private-key hook to a [`KeyBackend`].
pub(crate) struct KeyMethod(pub Arc<dyn KeyBackend>);

impl AsyncPrivateKeyMethod for KeyMethod {
    fn sign(
        &self,
        ssl: &mut SslRef,
        input: &[u8],
        algorithm: SslSignatureAlgorithm,
        _output: &mut [u8],
    ) -> Result<BoxPrivateKeyMethodFuture, AsyncPrivateKeyMethodError> {
        // Every signature is charged to the source's full-handshake budget (handshake_budget).
        if !crate::handshake_budget::may_sign(ssl) {
            return Err(AsyncPrivateKeyMethodError);
        }
        let pending = self.0.sign(algorithm, input);
        Ok(Box::pin(async move {
            let signature = pending.await.map_err(|e| {
                static LIMIT: tlsgate_error::log_limit::LogLimit = tlsgate_error::log_limit::LogLimit::new(std::time::Duration::from_secs(1));
                if let Some(left_out) = LIMIT.allow() {
                    tracing::warn!(error = %e, left_out, "private-key operation failed (at most one line a second; left_out = failures not logged since the last line)");
                }
                AsyncPrivateKeyMethodError
            })?;
            let finish: BoxPrivateKeyMethodFinish = Box::new(move |_ssl, output: &mut [u8]| {
                let out = output.get_mut(..signature.len()).ok_or(AsyncPrivateKeyMethodError)?;
                out.copy_from_slice(&signature);
                Ok(signature.len())
            });
            Ok(finish)
        }))
    }

    fn decrypt(
        &self,
        _ssl: &mut SslRef,
        _input: &[u8],
        _output: &mut [u8],
    ) -> Result<BoxPrivateKeyMethodFuture, AsyncPrivateKeyMethodError> {
        // RSA key exchange is disabled: tlsgate never decrypts with a private key.
        Err(AsyncPrivateKeyMethodError)
    }
}
