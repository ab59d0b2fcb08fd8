//! The staples themselves: [`StapleSlot`], the response currently stapled for one configured
//! certificate, swapped atomically by the refresher (tlsgate-proxy's `stapling`) and read by
//! every handshake that asks for it without rebuilding any context; [`StapleRegistry`], the
//! slots, kept across configuration reloads so that a reload neither loses the last good
//! response nor restarts fetching; and [`staple`], the certificate-selection step that staples.
//!
//! A handshake is stapled only when the client sent `status_request` and the slot holds a
//! response that has not expired at that moment; an expired, revoked or unverifiable response
//! is never stapled.

use super::request::OcspTarget;
use super::response::{Rejection, Staple};
use crate::error::TlsBuildError;
use crate::handshake_info::{self, StapleCounter};
use crate::keys::KeyType;
use arc_swap::ArcSwapOption;
use boring::hash::MessageDigest;
use boring::ssl::{ClientHello, ExtensionType};
use boring::x509::X509;
use std::path::PathBuf;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, SystemTime};
use tlsgate_config::{CertificateConfig, OcspMode, SiteConfig};

/// Where a certificate's staple comes from.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum StapleSource {
    /// Fetched from this `http://` responder.
    Responder(String),
    /// Read from this DER file (at startup and on reload).
    File(PathBuf),
}

/// The staple of one configured certificate (`site[i].certificate[j]`).
pub struct StapleSlot {
    /// Site name.
    pub site: String,
    /// Key type of the certificate (the `cert` metric label, as in `tlsgate_handshakes_total`).
    pub cert: &'static str,
    /// The configuration field, `site[i].certificate[j]`, for logs.
    pub field: String,
    /// Where responses come from.
    pub source: StapleSource,
    /// `ocsp_refresh`.
    pub refresh: Option<Duration>,
    /// The certificate and its issuer.
    pub target: OcspTarget,
    leaf_fingerprint: Vec<u8>,
    current: ArcSwapOption<Staple>,
    stapled: AtomicU64,
}

impl std::fmt::Debug for StapleSlot {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("StapleSlot")
            .field("field", &self.field)
            .field("site", &self.site)
            .field("source", &self.source)
            .finish_non_exhaustive()
    }
}

impl StapleSlot {
    /// The response stapled now (possibly expired: handshakes check again).
    pub fn current(&self) -> Option<Arc<Staple>> {
        self.current.load_full()
    }

    /// Replaces the stapled response (`None`: staple nothing).
    pub fn store(&self, staple: Option<Staple>) {
        self.current.store(staple.map(Arc::new));
    }

    /// Handshakes stapled since the last call.
    pub fn take_stapled(&self) -> u64 {
        self.stapled.swap(0, Ordering::Relaxed)
    }

    /// Checks a response for this certificate and, when good, staples it; returns the verdict.
    pub fn accept(&self, der: &[u8], now: SystemTime) -> Result<(), Rejection> {
        match self.target.check(der, now) {
            Ok(staple) => {
                self.store(Some(staple));
                Ok(())
            }
            Err(rejection) => {
                // A revoked certificate loses its staple at once; otherwise the last good one
                // stays (until it expires).
                if matches!(rejection, Rejection::Revoked(_)) {
                    self.store(None);
                }
                Err(rejection)
            }
        }
    }

    /// Drops the staple if it has expired; returns whether it did.
    pub fn drop_expired(&self, now: SystemTime) -> bool {
        if self.current().is_some_and(|s| !s.is_fresh(now)) {
            self.store(None);
            true
        } else {
            false
        }
    }

    /// Reads and checks `path` (a DER OCSPResponse) into this slot.
    fn load_file(&self, path: &std::path::Path) -> Result<(), TlsBuildError> {
        let der = std::fs::read(path).map_err(|source| TlsBuildError::Read {
            field: format!("{}.ocsp_file", self.field),
            path: path.display().to_string(),
            source,
        })?;
        if let Err(rejection) = self.accept(&der, SystemTime::now()) {
            tracing::warn!(
                field = %self.field,
                site = %self.site,
                file = %path.display(),
                "{}.ocsp_file: not stapling: {rejection}",
                self.field
            );
            self.store(None);
        }
        Ok(())
    }
}

/// Every certificate's staple slot, kept across reloads (a rebuilt configuration gets the same
/// slot back for an unchanged certificate and staple settings).
#[derive(Debug, Default)]
pub struct StapleRegistry {
    slots: Mutex<Vec<Arc<StapleSlot>>>,
}

impl StapleRegistry {
    /// The slot for `site.certificates[cert_index]` (whose parsed chain is `chain`), or `None`
    /// when it is not stapled (`ocsp = "off"`, no responder and no file, no issuer in the chain).
    pub(crate) fn slot_for(
        &self,
        site_index: usize,
        site: &SiteConfig,
        cert_index: usize,
        cert: &CertificateConfig,
        chain: &[X509],
        key_type: KeyType,
    ) -> Result<Option<Arc<StapleSlot>>, TlsBuildError> {
        let field = format!("site[{site_index}].certificate[{cert_index}]");
        if cert.ocsp == OcspMode::Off {
            return Ok(None);
        }
        let Some(leaf) = chain.first() else {
            return Ok(None);
        };
        let source = if let Some(path) = &cert.ocsp_file {
            StapleSource::File(path.clone())
        } else if let Some(url) = &cert.ocsp_url {
            StapleSource::Responder(url.clone())
        } else {
            let urls: Vec<String> = leaf
                .ocsp_responders()
                .map(|s| s.iter().map(|u| u.to_string()).collect())
                .unwrap_or_default();
            match urls.iter().find(|u| u.starts_with("http://")) {
                Some(url) => StapleSource::Responder(url.clone()),
                None if urls.is_empty() => {
                    // Normal since public CAs dropped OCSP: no staple, nothing to warn about.
                    tracing::debug!(%field, "the certificate names no OCSP responder: no staple");
                    return Ok(None);
                }
                None => {
                    tracing::warn!(%field, ?urls, "{field}: the certificate's OCSP responders are not http:// URLs; not stapling (set ocsp_url)");
                    return Ok(None);
                }
            }
        };
        let target = match OcspTarget::from_chain(chain) {
            Ok(t) => t,
            Err(why) => {
                tracing::warn!(%field, "{field}: not stapling OCSP: {why}");
                return Ok(None);
            }
        };
        let fingerprint = leaf
            .digest(MessageDigest::sha256())
            .map(|d| d.to_vec())
            .unwrap_or_default();
        let mut slots = self.slots.lock().unwrap_or_else(|e| e.into_inner());
        let existing = slots
            .iter()
            .find(|s| {
                s.site == site.name
                    && s.field == field
                    && s.leaf_fingerprint == fingerprint
                    && s.source == source
                    && s.refresh == cert.ocsp_refresh.map(|d| d.get())
            })
            .cloned();
        let slot = match existing {
            Some(slot) => slot,
            None => {
                // The same certificate with other settings keeps its last good response.
                let seed = slots
                    .iter()
                    .find(|s| s.site == site.name && s.leaf_fingerprint == fingerprint)
                    .and_then(|s| s.current())
                    .filter(|s| s.is_fresh(SystemTime::now()));
                let slot = Arc::new(StapleSlot {
                    site: site.name.clone(),
                    cert: key_type.as_str(),
                    field,
                    source,
                    refresh: cert.ocsp_refresh.map(|d| d.get()),
                    target,
                    leaf_fingerprint: fingerprint,
                    current: ArcSwapOption::new(seed),
                    stapled: AtomicU64::new(0),
                });
                slots.push(slot.clone());
                slot
            }
        };
        drop(slots);
        if let StapleSource::File(path) = &slot.source {
            slot.load_file(path)?;
        }
        Ok(Some(slot))
    }

    /// Forgets every slot not in `live` (those of the running configuration).
    pub fn retain(&self, live: &[Arc<StapleSlot>]) {
        self.slots
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .retain(|s| live.iter().any(|l| Arc::ptr_eq(l, s)));
    }

    /// Number of slots kept.
    pub fn len(&self) -> usize {
        self.slots.lock().unwrap_or_else(|e| e.into_inner()).len()
    }

    /// Whether no slot is kept.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }
}

/// Counts the handshakes that carried this slot's staple (`tlsgate_ocsp_stapled_handshakes_total`).
impl StapleCounter for StapleSlot {
    fn count_stapled(&self) {
        self.stapled.fetch_add(1, Ordering::Relaxed);
    }
}

/// In the certificate-selection finish step, after the site context is set: staples the slot's
/// response when the client asked for OCSP status and the response is still fresh, and records
/// it on the connection's trace (counted when the handshake completes, if it was not resumed).
pub(crate) fn staple(hello: &mut ClientHello<'_>, slot: Option<&Arc<StapleSlot>>) {
    let Some(slot) = slot else { return };
    // status_request with status_type ocsp(1).
    if hello
        .get_extension(ExtensionType::STATUS_REQUEST)
        .and_then(|e| e.first())
        != Some(&1)
    {
        return;
    }
    let current = slot.current.load();
    let Some(staple) = current.as_ref().filter(|s| s.is_fresh(SystemTime::now())) else {
        return;
    };
    let ssl = hello.ssl_mut();
    if ssl.set_ocsp_status(&staple.der).is_ok() {
        handshake_info::record_staple(ssl, slot.clone());
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::ocsp::test_responses::{pki, respond, spec, time};
    use x509_ocsp::{CertStatus, RevokedInfo};

    #[test]
    fn slot_keeps_the_last_good_response_until_revoked_or_expired() {
        let p = pki();
        let target = OcspTarget::new(&p.leaf, &p.issuer).unwrap();
        let good = respond(spec(&p, &target), &p.ca_key);
        let slot = StapleSlot {
            site: "s".into(),
            cert: "ecdsa_p256",
            field: "site[0].certificate[0]".into(),
            source: StapleSource::Responder("http://127.0.0.1:1/".into()),
            refresh: None,
            target,
            leaf_fingerprint: vec![],
            current: ArcSwapOption::empty(),
            stapled: AtomicU64::new(0),
        };
        let now = SystemTime::now();
        slot.accept(&good, now).unwrap();
        assert!(slot.accept(b"junk", now).is_err());
        assert!(slot.current().is_some(), "an invalid answer keeps the last good staple");
        assert!(!slot.drop_expired(now));
        assert!(slot.drop_expired(now + Duration::from_secs(7200)));
        assert!(slot.current().is_none());
        slot.accept(&good, now).unwrap();
        let mut s = spec(&p, &slot.target);
        s.status = CertStatus::revoked(RevokedInfo {
            revocation_time: time(now),
            revocation_reason: None,
        });
        assert!(slot.accept(&respond(s, &p.ca_key), now).is_err());
        assert!(slot.current().is_none(), "revoked drops the staple at once");
    }
}
