//! Building BoringSSL contexts from the configuration.
//!
//! One *front* context per configuration generation accepts every connection: it carries the
//! protocol policy and the session machinery (session-ID cache, ticket keys), and its
//! asynchronous certificate-selection hook picks a *site* context by SNI and by what the client can
//! verify (ML-DSA for a TLS 1.3 client offering its scheme, else ECDSA, else RSA). Site contexts
//! carry a certificate chain and a [`KeyBackend`] reached through the async private-key hook.
//! BoringSSL keeps using the front context for sessions after the switch (`SSL_set_SSL_CTX`
//! swaps only the certificate configuration).

pub use crate::error::TlsBuildError;
use crate::keys::{KeyBackend, KeyMethod, KeyType, LocalKey};
use crate::session_cache::SessionCache;
use crate::tickets::TicketKeyRing;
use crate::{ffi, handshake_info};
use boring::ex_data::Index;
use boring::pkey::PKey;
use boring::ssl::{
    AlpnError, AsyncSelectCertError, BoxSelectCertFinish, BoxSelectCertFuture, ClientHello, ExtensionType, NameType,
    SniError, Ssl, SslAlert, SslContext, SslContextBuilder, SslMethod, SslMode, SslOptions, SslRef,
    SslSessionCacheMode, SslVersion,
};
use boring::x509::X509;
use std::collections::HashMap;
use std::path::Path;
use std::sync::{Arc, LazyLock};
use tlsgate_config::{Config, SiteConfig, TlsConfig, TlsVersion, UnknownSni};
use tlsgate_wire::client_hello::ClientCapabilities;

/// State that outlives configuration reloads: resumption must keep working across them.
#[derive(Debug, Clone)]
pub struct SessionState {
    /// TLS 1.2 session-ID cache.
    pub cache: Arc<SessionCache>,
    /// Ticket keys.
    pub tickets: Arc<TicketKeyRing>,
    /// OCSP staples per certificate (the last good response survives reloads).
    pub staples: Arc<crate::ocsp::StapleRegistry>,
    /// 0-RTT admission (single-use ticket claims).
    pub early_data: Arc<crate::early_data::EarlyData>,
    /// Encrypted ClientHello keys (derived from the cluster secret per epoch; `ech_ring`).
    pub ech: Arc<crate::ech_ring::EchRing>,
    /// Pending ACME challenge answers (HTTP-01 tokens, TLS-ALPN-01 certificates).
    pub acme: Arc<crate::acme_challenges::AcmeChallenges>,
    /// Delegated credentials of keyless certificates (a reload hands them on).
    pub delegations: Arc<crate::delegation::DelegationRegistry>,
}

impl SessionState {
    /// Creates the session state for a configuration.
    pub fn new(tls: &TlsConfig) -> Self {
        Self {
            cache: Arc::new(SessionCache::new(
                tls.session_cache.size,
                tls.session_cache.timeout.get(),
            )),
            tickets: Arc::new(TicketKeyRing::new(tls.tickets.lifetime.get())),
            staples: Arc::default(),
            early_data: Arc::default(),
            ech: Arc::default(),
            acme: Arc::default(),
            delegations: Arc::default(),
        }
    }

    /// Applies a reloaded configuration's limits without losing sessions or keys.
    pub fn reconfigure(&self, tls: &TlsConfig) {
        self.cache
            .reconfigure(tls.session_cache.size, tls.session_cache.timeout.get());
        self.tickets.set_lifetime(tls.tickets.lifetime.get());
        self.tickets.set_rotation(tls.tickets.rotation.get());
    }
}

/// One certificate of a site, ready to serve.
pub struct SiteVariant {
    /// Key type of the certificate.
    pub key_type: KeyType,
    /// The context to switch to.
    pub ctx: SslContext,
    /// Its OCSP staple, if the certificate is stapled.
    pub staple: Option<Arc<crate::ocsp::StapleSlot>>,
    /// The leaf's notAfter, Unix seconds (0 when it cannot be read).
    pub not_after: i64,
    /// DER bytes of the chain sent (leaf and intermediates).
    pub chain_bytes: usize,
    /// What each connection gets when the site asks for client certificates.
    pub client_auth: Option<crate::client_auth::Policy>,
    /// Its delegated credential, for a keyless certificate with delegation on.
    pub delegation: Option<Arc<crate::delegation::DelegationSlot>>,
}

/// A site's TLS side.
pub struct SiteTls {
    /// Index of the site in the configuration.
    pub index: usize,
    /// Site name.
    pub name: String,
    /// ECDSA variants first, then the rest, ML-DSA last, in configuration order.
    pub variants: Vec<SiteVariant>,
}

/// What a site context knows about itself (stored in its ex_data).
#[derive(Debug, Clone, Copy)]
struct SiteTag {
    site: usize,
}

static SITE_TAG: LazyLock<Index<SslContext, SiteTag>> =
    LazyLock::new(|| SslContext::new_ex_index().expect("BoringSSL ex_data index"));

/// The TLS side of one configuration generation.
pub struct TlsService {
    front: SslContext,
    selector: Arc<Selector>,
}

/// Server names to their site. Looked up for every SNI and every request's `Host`: foldhash
/// (~3× cheaper than SipHash for a host name) seeded per process; the maps are built from the
/// configuration only, so a client's names can at worst walk the longest probe sequence the
/// configured names make.
type NameMap = HashMap<String, usize, foldhash::fast::RandomState>;

struct Selector {
    sites: Vec<SiteTls>,
    exact: NameMap,
    wildcard: NameMap,
    default: usize,
    unknown_sni: UnknownSni,
    tls13: bool,
    /// JA4 fingerprints and the access rules by fingerprint (`fingerprint.rs`).
    fingerprints: crate::fingerprint::Policy,
}

impl Selector {
    fn site_for(&self, sni: Option<&str>) -> Option<usize> {
        let Some(name) = sni else {
            return Some(self.default);
        };
        let name = name.trim_end_matches('.');
        // Clients send lowercase names; only a name with capitals costs a copy.
        let name: std::borrow::Cow<'_, str> = if name.bytes().any(|b| b.is_ascii_uppercase()) {
            name.to_ascii_lowercase().into()
        } else {
            name.into()
        };
        if let Some(i) = self.exact.get(name.as_ref()) {
            return Some(*i);
        }
        if let Some((_, parent)) = name.split_once('.') {
            if let Some(i) = self.wildcard.get(parent) {
                return Some(*i);
            }
        }
        match self.unknown_sni {
            UnknownSni::Default => Some(self.default),
            UnknownSni::Reject => None,
        }
    }

    /// The site whose `server_names` name `host` (exact, then `*.parent`), if any.
    fn named(&self, host: &str) -> Option<usize> {
        let host = host.trim_end_matches('.');
        self.exact
            .get(host)
            .or_else(|| host.split_once('.').and_then(|(_, parent)| self.wildcard.get(parent)))
            .copied()
    }

    fn choose(&self, hello: &ClientHello<'_>) -> Option<&SiteVariant> {
        let site = &self.sites[self.site_for(hello.servername(NameType::HOST_NAME))?];
        if let [only] = site.variants.as_slice() {
            return Some(only);
        }
        let sigalgs = hello.get_extension(ExtensionType::SIGNATURE_ALGORITHMS);
        let caps = ClientCapabilities::from_parts(
            sigalgs,
            hello.get_extension(ExtensionType::SUPPORTED_VERSIONS),
            hello.ciphers(),
        );
        // ML-DSA (TLS 1.3 only) for a client that offers the certificate's scheme.
        if caps.offers_tls13 && self.tls13 {
            let mldsa = site.variants.iter().find(|v| {
                v.key_type
                    .mldsa()
                    .is_some_and(|level| crate::mldsa::offered(sigalgs, level))
            });
            if mldsa.is_some() {
                return mldsa;
            }
        }
        let ecdsa_ok = caps.can_use_ecdsa(self.tls13);
        site.variants
            .iter()
            .filter(|v| v.key_type.mldsa().is_none())
            .find(|v| v.key_type.is_ecdsa() == ecdsa_ok)
            .or(site.variants.first())
    }
}

impl TlsService {
    /// Builds every context of a configuration. Fails with a message naming the field and file.
    pub fn build(config: &Config, sessions: &SessionState) -> Result<Self, TlsBuildError> {
        let tls = &config.tls;
        let mut sites = Vec::with_capacity(config.sites.len());
        for (i, site) in config.sites.iter().enumerate() {
            sites.push(build_site(tls, sessions, i, site, config.keyless.as_ref())?);
        }
        let mut exact = NameMap::default();
        let mut wildcard = NameMap::default();
        for (i, site) in config.sites.iter().enumerate() {
            for name in &site.server_names {
                let name = name.to_ascii_lowercase();
                match name.strip_prefix("*.") {
                    Some(parent) => wildcard.insert(parent.to_string(), i),
                    None => exact.insert(name, i),
                };
            }
        }
        let selector = Arc::new(Selector {
            sites,
            exact,
            wildcard,
            default: config.sites.iter().position(|s| s.default).unwrap_or(0),
            unknown_sni: tls.unknown_sni,
            tls13: tls.max_version == TlsVersion::V1_3,
            fingerprints: crate::fingerprint::Policy::from_config(config),
        });
        let front = build_front(tls, sessions, selector.clone())?;
        sessions
            .ech
            .install(&front, config.ech.as_ref(), std::time::SystemTime::now())
            .map_err(setting("ech"))?;
        Ok(Self { front, selector })
    }

    /// The TLS side of a generation for QUIC (HTTP/3): the same sites, certificates, key
    /// backends, session machinery and certificate selection as [`TlsService::build`], with
    /// ALPN `h3` and TLS 1.3 only. Built with the generation, from the files as they are then
    /// (like the TCP side); each QUIC endpoint then takes a front context of its own
    /// ([`Self::quic_front`]).
    pub fn build_quic(config: &Config, sessions: &SessionState) -> Result<Self, TlsBuildError> {
        let mut config = config.clone();
        config.tls = quic_tls(&config.tls);
        Self::build(&config, sessions)
    }

    /// A front context for quiche (`quiche::Config::with_boring_ssl_ctx_builder`, which takes it
    /// unbuilt) selecting among this QUIC service's sites: reads no file.
    pub fn quic_front(&self, tls: &TlsConfig, sessions: &SessionState) -> Result<SslContextBuilder, TlsBuildError> {
        front_builder(&quic_tls(tls), sessions, self.selector.clone())
    }

    /// A new server-side connection object; its handshake configuration is freed once the
    /// handshake is done ([`crate::ffi::shed_handshake_config`]).
    pub fn new_ssl(&self) -> Result<Ssl, boring::error::ErrorStack> {
        let mut ssl = Ssl::new(&self.front)?;
        handshake_info::attach(&mut ssl);
        crate::ffi::shed_handshake_config(&mut ssl);
        Ok(ssl)
    }

    /// The front context, on which the ECH keys are swapped at each epoch (`ech_ring`).
    pub fn front(&self) -> &boring::ssl::SslContextRef {
        &self.front
    }

    /// The generation's JA4 policy and access rules (`fingerprint.rs`).
    pub fn fingerprints(&self) -> &crate::fingerprint::Policy {
        &self.selector.fingerprints
    }

    /// The site a finished handshake selected.
    pub fn site_of(&self, ssl: &SslRef) -> Option<usize> {
        ssl.ssl_context().ex_data(*SITE_TAG).map(|t| t.site)
    }

    /// The site (configuration index) whose server names cover `host` (lower-case, no port),
    /// without falling back to the default site: used to refuse a request whose Host belongs
    /// to another site than the connection's certificate (421 Misdirected Request).
    pub fn site_named(&self, host: &str) -> Option<usize> {
        self.selector.named(host)
    }

    /// Site names, in configuration order.
    pub fn site_names(&self) -> Vec<&str> {
        self.selector.sites.iter().map(|s| s.name.as_str()).collect()
    }

    /// Every certificate served: (site, key type, notAfter in Unix seconds, chain bytes).
    pub fn certificates(&self) -> Vec<(&str, KeyType, i64, usize)> {
        let sites = self.selector.sites.iter();
        sites
            .flat_map(|s| {
                s.variants
                    .iter()
                    .map(move |v| (s.name.as_str(), v.key_type, v.not_after, v.chain_bytes))
            })
            .collect()
    }

    /// Every certificate's delegated-credential slot (keyless certificates with delegation on).
    pub fn delegation_slots(&self) -> Vec<Arc<crate::delegation::DelegationSlot>> {
        self.selector
            .sites
            .iter()
            .flat_map(|s| s.variants.iter().filter_map(|v| v.delegation.clone()))
            .collect()
    }

    /// The OCSP staple slots of every stapled certificate (for the refresher and metrics).
    pub fn staple_slots(&self) -> Vec<Arc<crate::ocsp::StapleSlot>> {
        let variants = self.selector.sites.iter().flat_map(|s| &s.variants);
        variants.filter_map(|v| v.staple.clone()).collect()
    }
}

fn setting(field: &str) -> impl Fn(boring::error::ErrorStack) -> TlsBuildError + '_ {
    move |source| TlsBuildError::Setting {
        field: field.to_string(),
        source,
    }
}

fn version(v: TlsVersion) -> SslVersion {
    match v {
        TlsVersion::V1_2 => SslVersion::TLS1_2,
        TlsVersion::V1_3 => SslVersion::TLS1_3,
    }
}

/// Settings every context shares: versions, suites, groups, ALPN.
/// The signature algorithms tlsgate signs with (`keys::digest_for`), in preference order.
const SIGNING_ALGORITHMS: &str = "ECDSA+SHA256:ECDSA+SHA384:ECDSA+SHA512:ed25519:\
RSA-PSS+SHA256:RSA-PSS+SHA384:RSA-PSS+SHA512:RSA+SHA256:RSA+SHA384:RSA+SHA512:mldsa44:mldsa65:mldsa87";

fn base_builder(tls: &TlsConfig) -> Result<SslContextBuilder, TlsBuildError> {
    let mut b = SslContextBuilder::new(SslMethod::tls()).map_err(setting("tls"))?;
    // A write BoringSSL could not finish (the socket was full) is retried with the same bytes,
    // but not necessarily at the same address: hyper compacts or grows its write buffer while
    // the write waits (more of the response body arrives). Without this mode BoringSSL refuses
    // such a retry (`BAD_WRITE_RETRY`) and the response is cut; it checks the length either way.
    b.set_mode(SslMode::ACCEPT_MOVING_WRITE_BUFFER);
    b.set_min_proto_version(Some(version(tls.min_version)))
        .map_err(setting("tls.min_version"))?;
    b.set_max_proto_version(Some(version(tls.max_version)))
        .map_err(setting("tls.max_version"))?;
    // TLS 1.2 as written (`[a|b]` groups leave the choice inside them to the client) unless the
    // order is strict; TLS 1.3 always AES-128-GCM first (BoringSSL's own server order lets the
    // client choose, and OpenSSL-based clients list AES-256-GCM first: a SHA-384 key schedule).
    // Clients that list ChaCha20 first get it per connection (`chacha20_first_list`).
    if tls.strict_cipher_order {
        b.set_cipher_list(&strict_cipher_list(&tls.ciphers_tls12))
            .map_err(setting("tls.ciphers_tls12"))?;
    } else {
        b.set_cipher_list(&tls.ciphers_tls12)
            .map_err(setting("tls.ciphers_tls12"))?;
    }
    ffi::set_strict_tls13_cipher_order(&mut b).map_err(setting("tls.strict_cipher_order"))?;
    if tls.cert_compression {
        crate::cert_compression::install(&mut b).map_err(setting("tls.cert_compression"))?;
    }
    b.set_curves_list(&tls.groups.join(":"))
        .map_err(setting("tls.groups"))?;
    // Only the signature algorithms the key backends make (no SHA-1): a TLS 1.2 client without
    // the signature_algorithms extension (which means SHA-1 only) then gets a handshake_failure
    // alert from BoringSSL instead of a failed signing attempt and a silent close.
    b.set_sigalgs_list(SIGNING_ALGORITHMS).map_err(setting("tls"))?;
    b.set_options(SslOptions::CIPHER_SERVER_PREFERENCE | SslOptions::NO_RENEGOTIATION);
    if !tls.tickets.enabled {
        b.set_options(SslOptions::NO_TICKET);
    }
    let alpn: Vec<Vec<u8>> = tls.alpn.iter().map(|p| p.as_bytes().to_vec()).collect();
    b.set_alpn_select_callback(move |_ssl, client| select_alpn(&alpn, client).ok_or(AlpnError::NOACK));
    Ok(b)
}

/// Session machinery. BoringSSL runs the callbacks of the front (session) context, but the
/// `boring` wrappers look their closures up on the connection's current context, which is the
/// site context after the switch; so every context gets the same closures.
fn install_sessions(b: &mut SslContextBuilder, tls: &TlsConfig, sessions: &SessionState) {
    let lifetime = u32::try_from(tls.tickets.lifetime.get().as_secs()).unwrap_or(u32::MAX);
    let id_timeout = u32::try_from(tls.session_cache.timeout.get().as_secs()).unwrap_or(u32::MAX);
    ffi::set_session_lifetime(b, lifetime.max(id_timeout));
    if tls.session_cache.enabled {
        b.set_session_cache_mode(SslSessionCacheMode::SERVER | SslSessionCacheMode::NO_INTERNAL);
        ffi::install_session_cache(b, sessions.cache.clone());
    } else {
        b.set_session_cache_mode(SslSessionCacheMode::OFF);
    }
    // Front and site contexts alike: SSL_set_SSL_CTX copies the site context's 0-RTT flag.
    ffi::set_ctx_early_data_enabled(b, tls.tickets.enabled && tls.tickets.early_data);
    if tls.tickets.enabled {
        ffi::install_ticket_keys(b, sessions.tickets.clone());
        ffi::set_num_tickets(b, 2);
    } else {
        ffi::set_num_tickets(b, 0);
    }
}

/// A TLS 1.2 cipher list with its equal-preference groups flattened (`[a|b]:c` → `a:b:c`), so
/// the server's written order is strict.
fn strict_cipher_list(list: &str) -> String {
    list.replace(['[', ']'], "").replace('|', ":")
}

/// The TLS 1.2 list a client that lists ChaCha20-Poly1305 first is served with: `list`'s
/// ChaCha20 suites, then the others, each in written order, strictly. `None` with
/// `strict_cipher_order` (ChaCha20 then only for clients that offer nothing else).
fn chacha20_first_list(tls: &TlsConfig) -> Option<std::ffi::CString> {
    if tls.strict_cipher_order {
        return None;
    }
    let flat = strict_cipher_list(&tls.ciphers_tls12);
    let (chacha, rest): (Vec<&str>, Vec<&str>) = flat
        .split(':')
        .filter(|s| !s.is_empty())
        .partition(|s| s.contains("CHACHA20"));
    std::ffi::CString::new([chacha, rest].concat().join(":")).ok()
}

/// Server-preference ALPN: the first of ours that the client offers.
fn select_alpn<'a>(ours: &[Vec<u8>], client: &'a [u8]) -> Option<&'a [u8]> {
    for proto in ours {
        let mut rest = client;
        while let Some((&len, tail)) = rest.split_first() {
            let Some(name) = tail.get(..usize::from(len)) else {
                break;
            };
            if name == proto.as_slice() {
                return Some(name);
            }
            rest = &tail[usize::from(len)..];
        }
    }
    None
}

/// `tls` as QUIC uses it: ALPN `h3`, TLS 1.3 only.
fn quic_tls(tls: &TlsConfig) -> TlsConfig {
    let mut tls = tls.clone();
    tls.alpn = vec!["h3".into()];
    tls.min_version = TlsVersion::V1_3;
    tls.max_version = TlsVersion::V1_3;
    tls
}

fn build_front(tls: &TlsConfig, sessions: &SessionState, selector: Arc<Selector>) -> Result<SslContext, TlsBuildError> {
    Ok(front_builder(tls, sessions, selector)?.build())
}

fn front_builder(
    tls: &TlsConfig,
    sessions: &SessionState,
    selector: Arc<Selector>,
) -> Result<SslContextBuilder, TlsBuildError> {
    let mut b = base_builder(tls)?;
    install_sessions(&mut b, tls, sessions);
    let early = tls.tickets.early_data.then(|| sessions.early_data.clone());
    let ticket_lifetime = tls.tickets.lifetime.get();
    let ring = sessions.tickets.clone();
    let ours: crate::handshake_budget::KeyNameCheck =
        Arc::new(move |name: &[u8]| ring.key_names().iter().any(|k| k[..] == *name));
    let budget = crate::handshake_budget::HelloCheck::new(tls, ours);
    let (acme_tls, acme_sessions) = (tls.clone(), sessions.clone());
    let ech = sessions.ech.clone();
    let chacha20_list = chacha20_first_list(tls).map(Arc::new);
    b.set_async_select_certificate_callback(move |hello| {
        ech.observe(hello);
        // Before any work for this hello: over its source's handshake budget, it is refused
        // here (BoringSSL sends handshake_failure).
        if !budget.admit(hello) {
            return Err(AsyncSelectCertError);
        }
        // TLS-ALPN-01 (RFC 8737): a CA validating a pending challenge gets its certificate.
        if let Some(ctx) = acme_alpn_context(hello, &acme_tls, &acme_sessions) {
            let fut: BoxSelectCertFuture = Box::pin(async move {
                let finish: BoxSelectCertFinish = Box::new(move |mut hello: ClientHello<'_>| {
                    hello.ssl_mut().set_ssl_context(&ctx).map_err(|_| AsyncSelectCertError)
                });
                Ok(finish)
            });
            return Ok(fut);
        }
        // Another node's pending challenge, published in the cluster's store.
        if let Some(lookup) = acme_sessions.acme.remote_alpn_answer(hello) {
            let (tls, sessions) = (acme_tls.clone(), acme_sessions.clone());
            let fut: BoxSelectCertFuture = Box::pin(async move {
                let ctx = lookup
                    .await
                    .and_then(|(cert, key)| acme_challenge_context(&cert, &key, &tls, &sessions));
                let finish: BoxSelectCertFinish = Box::new(move |mut hello: ClientHello<'_>| match ctx {
                    Some(ctx) => hello.ssl_mut().set_ssl_context(&ctx).map_err(|_| AsyncSelectCertError),
                    None => Err(AsyncSelectCertError),
                });
                Ok(finish)
            });
            return Ok(fut);
        }
        // JA4, when a feature uses it, and the access rules by fingerprint (a denial fails here).
        selector.fingerprints.inspect(hello)?;
        let claim = early.as_ref().and_then(|ed| {
            let fut = ed.claim_for(
                hello.get_extension(ExtensionType::PRE_SHARED_KEY),
                hello.get_extension(ExtensionType::EARLY_DATA).is_some(),
                ticket_lifetime,
            )?;
            Some((ed.clone(), fut))
        });
        let chacha20 = chacha20_list
            .clone()
            .filter(|_| tlsgate_wire::client_hello::prefers_chacha20(hello.ciphers()));
        let ctx = match selector.choose(hello) {
            Some(variant) => Some((
                variant.ctx.clone(),
                variant.key_type,
                variant.staple.clone(),
                variant.client_auth,
                crate::delegation::offer(variant.delegation.as_ref(), hello),
            )),
            None => {
                // Refused in the servername callback below, which can choose the alert.
                handshake_info::mark_sni_rejected(hello.ssl());
                None
            }
        };
        let fut: BoxSelectCertFuture = Box::pin(async move {
            let refuse_early_data = match claim {
                Some((ed, fut)) => {
                    let outcome = fut.await;
                    ed.count(outcome);
                    outcome != crate::early_data::Claim::Fresh
                }
                None => false,
            };
            let finish: BoxSelectCertFinish = Box::new(move |mut hello: ClientHello<'_>| match ctx {
                Some((ctx, key_type, staple, client_auth, delegated)) => {
                    hello
                        .ssl_mut()
                        .set_ssl_context(&ctx)
                        .map_err(|_| AsyncSelectCertError)?;
                    // Verify mode and depth are per connection (SSL_set_SSL_CTX keeps the front
                    // context's): ask this site's clients for their certificates.
                    if let Some(policy) = client_auth {
                        policy.apply(hello.ssl_mut());
                    }
                    if let Some(list) = chacha20 {
                        ffi::prefer_chacha20(hello.ssl_mut(), &list).map_err(|_| AsyncSelectCertError)?;
                    }
                    handshake_info::record_certificate(hello.ssl_mut(), key_type);
                    if refuse_early_data {
                        // After the switch (SSL_set_SSL_CTX copies the context's 0-RTT flag) and
                        // before BoringSSL reads the early_data extension: 0-RTT off for this
                        // connection only; the client repeats its request after the handshake.
                        ffi::set_early_data_enabled(hello.ssl_mut(), false);
                    }
                    // Per connection, after the switch: the context stays untouched by refreshes.
                    crate::ocsp::staple(&mut hello, staple.as_ref());
                    // Ahead of the certificate's own key (BoringSSL prefers added credentials),
                    // used only if the client asked for one with our scheme.
                    if let Some(offered) = delegated {
                        crate::delegation::attach(hello.ssl_mut(), offered).map_err(|_| AsyncSelectCertError)?;
                    }
                    Ok(())
                }
                None => Ok(()),
            });
            Ok(finish)
        });
        Ok(fut)
    });
    // Runs after certificate selection, always on the front context's callback.
    b.set_servername_callback(|ssl, alert| {
        if handshake_info::sni_rejected(ssl) {
            tracing::debug!(sni = ?ssl.servername(NameType::HOST_NAME), "unknown SNI rejected");
            *alert = SslAlert::UNRECOGNIZED_NAME;
            Err(SniError::ALERT_FATAL)
        } else {
            Ok(())
        }
    });
    Ok(b)
}

/// The TLS-ALPN-01 challenge context for `hello`, when it is a CA's validation of a pending one.
fn acme_alpn_context(hello: &ClientHello<'_>, tls: &TlsConfig, sessions: &SessionState) -> Option<SslContext> {
    let (cert, key) = sessions.acme.alpn_answer(hello)?;
    acme_challenge_context(&cert, &key, tls, sessions)
}

/// The context that answers a TLS-ALPN-01 validation with `cert`.
fn acme_challenge_context(
    cert: &X509,
    key: &boring::pkey::PKeyRef<boring::pkey::Private>,
    tls: &TlsConfig,
    sessions: &SessionState,
) -> Option<SslContext> {
    let mut b = base_builder(tls).ok()?;
    install_sessions(&mut b, tls, sessions);
    crate::acme_challenges::configure(&mut b, cert, key).ok()?;
    Some(b.build())
}

fn build_site(
    tls: &TlsConfig,
    sessions: &SessionState,
    index: usize,
    site: &SiteConfig,
    keyless: Option<&tlsgate_config::KeylessConfig>,
) -> Result<SiteTls, TlsBuildError> {
    let mut variants = Vec::new();
    let client_auth = crate::client_auth::SiteClientAuth::for_site(index, site)?;
    let client_auth = client_auth.as_ref();
    for (j, cert) in site.certificates.iter().enumerate() {
        let at = format!("site[{index}].certificate[{j}]");
        let chain = load_chain(&format!("{at}.chain"), &cert.chain)?;
        let leaf_key = chain[0].public_key().map_err(setting(&at))?;
        let backend: Arc<dyn KeyBackend> = match &cert.key {
            // Keyless: the key servers sign; the key type comes from the certificate.
            None => {
                let pool = cert.key_server_pool.as_deref();
                crate::remote_keys::backend(keyless, pool, &cert.key_servers, &leaf_key).map_err(|source| {
                    TlsBuildError::KeyServers {
                        field: format!("{at}.key_servers"),
                        source,
                    }
                })?
            }
            Some(key_path) => {
                let key = load_key(&format!("{at}.key"), key_path)?;
                if !leaf_key.public_eq(&key) {
                    return Err(TlsBuildError::File {
                        field: format!("{at}.key"),
                        path: key_path.display().to_string(),
                        message: format!("private key does not match the certificate in {}", cert.chain.display()),
                    });
                }
                Arc::new(LocalKey::new(key))
            }
        };
        let delegation = keyless
            .filter(|k| cert.key.is_none() && k.delegated_credentials.enabled)
            .and_then(|k| {
                sessions
                    .delegations
                    .slot_for(&site.name, at.clone(), &chain, &backend, k.delegated_credentials)
            });
        let mut variant = build_variant(tls, sessions, index, site, &chain, backend, &at, client_auth)?;
        variant.delegation = delegation;
        variants.push(variant);
    }
    // OCSP staples; variants are still in configuration order here.
    for (j, (variant, cert)) in variants.iter_mut().zip(&site.certificates).enumerate() {
        let mut chain: Vec<X509> = variant.ctx.certificate().map(|c| c.to_owned()).into_iter().collect();
        chain.extend(ffi::extra_chain_certs(&variant.ctx));
        variant.staple = sessions
            .staples
            .slot_for(index, site, j, cert, &chain, variant.key_type)?;
    }
    // ECDSA first, ML-DSA last: selection takes the first variant the client can use, and only
    // a client offering ML-DSA gets an ML-DSA one.
    variants.sort_by_key(|v| (v.key_type.mldsa().is_some(), !v.key_type.is_ecdsa()));
    Ok(SiteTls {
        index,
        name: site.name.clone(),
        variants,
    })
}

/// Builds a site context for one chain and key backend (the keyless issue calls this with a
/// remote backend), asking for client certificates when `client_auth` is given.
#[allow(clippy::too_many_arguments)]
pub fn build_variant(
    tls: &TlsConfig,
    sessions: &SessionState,
    index: usize,
    site: &SiteConfig,
    chain: &[X509],
    backend: Arc<dyn KeyBackend>,
    at: &str,
    client_auth: Option<&crate::client_auth::SiteClientAuth>,
) -> Result<SiteVariant, TlsBuildError> {
    let mut b = base_builder(tls)?;
    install_sessions(&mut b, tls, sessions);
    b.set_certificate(&chain[0]).map_err(setting(at))?;
    for c in &chain[1..] {
        b.add_extra_chain_cert(c.clone()).map_err(setting(at))?;
    }
    match client_auth {
        // Its own session-ID context too (client_auth.rs): no session made without a
        // certificate resumes where one is asked for.
        Some(auth) => auth.install(&mut b, &format!("site[{index}]"))?,
        None => b
            .set_session_id_context(format!("tlsgate:{}", site.name).as_bytes())
            .map_err(setting(at))?,
    }
    let key_type = backend.key_type();
    b.set_async_private_key_method(KeyMethod(backend));
    b.set_ex_data(*SITE_TAG, SiteTag { site: index });
    let ders: Vec<Vec<u8>> = chain.iter().filter_map(|c| c.to_der().ok()).collect();
    let not_after = ders.first().map_or(0, |der| {
        x509_parser::parse_x509_certificate(der).map_or(0, |(_, c)| c.validity().not_after.timestamp())
    });
    Ok(SiteVariant {
        key_type,
        ctx: b.build(),
        staple: None,
        not_after,
        chain_bytes: ders.iter().map(Vec::len).sum(),
        client_auth: client_auth.map(|a| a.policy),
        delegation: None,
    })
}

/// Reads a file named by configuration field `field`.
pub(crate) fn read_file(field: &str, path: &Path) -> Result<Vec<u8>, TlsBuildError> {
    std::fs::read(path).map_err(|source| TlsBuildError::Read {
        field: field.into(),
        path: path.display().to_string(),
        source,
    })
}

fn parse_error(
    field: &str,
    path: &Path,
    what: &'static str,
) -> impl FnOnce(boring::error::ErrorStack) -> TlsBuildError {
    let (field, path) = (field.to_string(), path.display().to_string());
    move |source| TlsBuildError::Parse {
        field,
        path,
        what,
        source,
    }
}

/// Reads a PEM chain (leaf first).
pub fn load_chain(field: &str, path: &Path) -> Result<Vec<X509>, TlsBuildError> {
    let pem = read_file(field, path)?;
    let chain = X509::stack_from_pem(&pem).map_err(parse_error(field, path, "PEM certificate chain"))?;
    if chain.is_empty() {
        return Err(TlsBuildError::File {
            field: field.into(),
            path: path.display().to_string(),
            message: "no certificate in file".into(),
        });
    }
    Ok(chain)
}

/// Reads a PEM private key.
pub fn load_key(field: &str, path: &Path) -> Result<PKey<boring::pkey::Private>, TlsBuildError> {
    let pem = read_file(field, path)?;
    PKey::private_key_from_pem(&pem).map_err(parse_error(field, path, "PEM private key"))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn strict_order_flattens_groups() {
        assert_eq!(strict_cipher_list("[A|B|C]:[D|E]"), "A:B:C:D:E");
    }

    /// A write that blocked is retried with the same bytes from another address (hyper moves
    /// its write buffer meanwhile): the front's settings accept it.
    #[test]
    fn a_blocked_write_may_be_retried_from_a_moved_buffer() {
        use crate::test_tls::{self_signed, Handshake};
        let (cert, key) = self_signed();
        let mut b = base_builder(&TlsConfig::default()).unwrap();
        b.set_certificate(&cert).unwrap();
        b.set_private_key(&key).unwrap();
        let hs = Handshake::run(&b.build(), |_| {});
        let mut server = hs.server.expect("handshake");
        server.get_mut().write_budget = Some(1000);
        let data = vec![7u8; 16_384];
        let blocked = server.ssl_write(&data).unwrap_err();
        assert_eq!(blocked.code(), boring::ssl::ErrorCode::WANT_WRITE);
        server.get_mut().write_budget = None;
        let moved = data.clone();
        assert_eq!(server.ssl_write(&moved).unwrap(), 16_384);
    }

    #[test]
    fn alpn_prefers_server_order() {
        let ours = vec![b"h2".to_vec(), b"http/1.1".to_vec()];
        let client = b"\x08http/1.1\x02h2";
        assert_eq!(select_alpn(&ours, client), Some(&b"h2"[..]));
        assert_eq!(select_alpn(&ours, b"\x08http/1.1"), Some(&b"http/1.1"[..]));
        assert_eq!(select_alpn(&ours, b"\x03foo"), None);
        assert_eq!(select_alpn(&ours, b"\x09h2"), None, "truncated list");
    }
}
