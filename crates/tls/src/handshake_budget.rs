//! The full-handshake budget: how many full TLS handshakes (each costs a private-key signature,
//! worth many plain requests) one client source may start per second (`[server.handshake_budget]`).
//!
//! A source is the client's address cut to `ipv4_prefix` / `ipv6_prefix` bits (the client a
//! PROXY protocol header names, when the listener reads one). Each source has a token bucket for
//! full handshakes and, optionally, one for resumed handshakes (cheaper, separately limited); the
//! buckets live in a fixed-size sharded table (`table`).
//!
//! Two hooks, both before the gateway signs anything:
//!
//! 1. **ClientHello** (the certificate-selection hook, [`HelloCheck::admit`]): a hello that
//!    offers nothing our server could resume is charged to the full bucket and, over budget,
//!    refused there: the select-certificate callback fails, BoringSSL sends a `handshake_failure`
//!    alert, and no key share is computed. A hello that offers a resumption is charged to the
//!    resumed bucket (when one is set); with `over_budget = "close"` it is also refused while the
//!    source's full bucket is empty.
//! 2. **Signature** (the private-key hook, [`may_sign`]): only a full handshake signs. A
//!    connection admitted as a resumption that signs after all (an unknown or expired ticket, a
//!    session of another site, a cipher suite the session cannot use) is charged to the full
//!    bucket now and, over budget, refused before the signature (the private-key operation
//!    fails and the connection is closed, without an alert; its key exchange is already done).
//!
//! So every signature is charged to the full bucket, whatever the hello claimed: the
//! classification at the hello only decides how early a refusal comes. It reads (`tlsgate-wire`
//! `resumption`): TLS 1.3 (when the server allows it and the client offers it) — the first PSK
//! identity, resumable when its first 16 bytes name a ticket key in our ring (cheap; the ticket
//! is not decrypted); TLS 1.2 — a non-empty session-ticket extension, likewise by key name, else
//! a non-empty session ID when the session cache is on (not looked up: the cache may be remote).
//! A hello wrongly taken for a resumption (a forged ticket with a real key name, a random TLS 1.2
//! session ID) costs one resumed token and is charged as full at the signature; the cost of that
//! path is the key exchange, never a signature.

mod table;

use arc_swap::ArcSwapOption;
use boring::ex_data::Index;
use boring::ssl::{ClientHello, ExtensionType, Ssl, SslRef};
use std::net::IpAddr;
use std::sync::atomic::{AtomicU8, Ordering};
use std::sync::{Arc, LazyLock};
use std::time::Duration;
use table::{Rate, Table};
use tlsgate_config::{HandshakeBudgetConfig, OverBudget, TlsConfig, TlsVersion};
use tlsgate_error::log_limit::LogLimit;
use tlsgate_wire::resumption::{offer, HelloParts, ResumptionOffer};

/// The budget of one process: the policy of the current configuration (None = no budget) over
/// a table that outlives reloads.
#[derive(Debug, Default)]
pub struct HandshakeBudget {
    current: ArcSwapOption<Policy>,
}

/// The limits of one configuration and the table they apply to.
#[derive(Debug)]
struct Policy {
    full: Rate,
    resumed: Option<Rate>,
    mode: OverBudget,
    ipv4_prefix: u8,
    ipv6_prefix: u8,
    /// `tracked_sources` as configured (the table rounds it up).
    tracked: usize,
    table: Arc<Table>,
}

impl Policy {
    fn new(c: &HandshakeBudgetConfig, table: Arc<Table>) -> Self {
        Self {
            full: Rate::new(c.full_per_second, c.full_burst),
            resumed: (c.resumed_per_second > 0.0).then(|| Rate::new(c.resumed_per_second, c.resumed_burst)),
            mode: c.over_budget,
            ipv4_prefix: c.ipv4_prefix.min(32),
            ipv6_prefix: c.ipv6_prefix.min(128),
            tracked: c.tracked_sources,
            table,
        }
    }

    /// Whole seconds one full-handshake token takes to refill (at least 1): a `Retry-After`.
    fn seconds_per_full_token(&self) -> u32 {
        let secs = self.full.interval_nanos().div_ceil(1_000_000_000);
        u32::try_from(secs.max(1)).unwrap_or(u32::MAX)
    }

    /// The source `client` belongs to: its address cut to the prefix, IPv4 (and IPv4-mapped
    /// IPv6) kept apart from IPv6 by the `::ffff:0:0/96` form.
    fn source(&self, client: IpAddr) -> u128 {
        match client.to_canonical() {
            IpAddr::V4(v4) => {
                let bits = u32::from(v4) & u32::MAX.checked_shl(32 - u32::from(self.ipv4_prefix)).unwrap_or(0);
                (0xffff_u128 << 32) | u128::from(bits)
            }
            IpAddr::V6(v6) => u128::from(v6) & u128::MAX.checked_shl(128 - u32::from(self.ipv6_prefix)).unwrap_or(0),
        }
    }

    /// `client`'s source as a network, for log lines (`192.0.2.0/24`).
    fn network(&self, client: IpAddr) -> String {
        let source = self.source(client);
        match client.to_canonical() {
            IpAddr::V4(_) => format!("{}/{}", std::net::Ipv4Addr::from(source as u32), self.ipv4_prefix),
            IpAddr::V6(_) => format!("{}/{}", std::net::Ipv6Addr::from(source), self.ipv6_prefix),
        }
    }
}

impl HandshakeBudget {
    /// The budget of a configuration's `[server.handshake_budget]` (None: no budget).
    pub fn new(config: Option<&HandshakeBudgetConfig>) -> Self {
        let budget = Self::default();
        budget.reconfigure(config);
        budget
    }

    /// Applies a reloaded configuration: new limits apply to the buckets as they are (a source
    /// in debt stays in debt); a new `tracked_sources` starts a new, empty table.
    pub fn reconfigure(&self, config: Option<&HandshakeBudgetConfig>) {
        let old = self.current.load_full();
        let policy = config.map(|c| {
            let table = match &old {
                Some(p) if p.tracked == c.tracked_sources => p.table.clone(),
                _ => Arc::new(Table::new(c.tracked_sources)),
            };
            Arc::new(Policy::new(c, table))
        });
        self.current.store(policy);
    }

    /// Whether a budget is configured.
    pub fn enabled(&self) -> bool {
        self.current.load().is_some()
    }

    /// Sources whose debt was forgiven because the table had no room (a flood from many
    /// addresses, or `tracked_sources` too small).
    pub fn evictions(&self) -> u64 {
        self.current.load().as_ref().map_or(0, |p| p.table.evictions())
    }

    /// Puts a new server connection from `client` under the budget (nothing when there is none):
    /// call before its handshake starts.
    pub fn attach(&self, ssl: &mut SslRef, client: IpAddr) {
        let Some(policy) = self.current.load_full() else { return };
        let source = policy.source(client);
        ssl.set_ex_data(
            *ADMISSION,
            Admission {
                policy,
                source,
                client,
                state: AtomicU8::new(UNDECIDED),
            },
        );
    }
}

/// What the budget decided for one connection.
struct Admission {
    policy: Arc<Policy>,
    source: u128,
    client: IpAddr,
    state: AtomicU8,
}

const UNDECIDED: u8 = 0;
/// Charged to the full bucket: may sign.
const CHARGED_FULL: u8 = 1;
/// Admitted as a resumption: charged to the full bucket only if it signs after all.
const CHARGED_RESUMED: u8 = 2;
const REFUSED_FULL_HELLO: u8 = 3;
const REFUSED_RESUMED_HELLO: u8 = 4;
const REFUSED_FULL_SIGNATURE: u8 = 5;
/// Admitted as a resumption while the source's full bucket was empty, under `resume_then_429`:
/// its requests are answered 429.
const CHARGED_RESUMED_OVER: u8 = 6;

static ADMISSION: LazyLock<Index<Ssl, Admission>> =
    LazyLock::new(|| Ssl::new_ex_index().expect("BoringSSL ex_data index"));

/// Refusal log lines: at most one a second, with the count of those left out.
static REFUSALS_LOGGED: LogLimit = LogLimit::new(Duration::from_secs(1));

/// Why and where a handshake was refused.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Refusal {
    /// True when the resumed-handshake budget refused it, false for the full-handshake budget.
    pub resumed_budget: bool,
    /// True when refused at the signature (it offered a resumption but was going to sign).
    pub at_signature: bool,
}

impl Refusal {
    /// The `reason` label: `full_handshake_budget` or `resumed_handshake_budget`.
    pub fn reason(self) -> &'static str {
        if self.resumed_budget {
            "resumed_handshake_budget"
        } else {
            "full_handshake_budget"
        }
    }

    /// The `stage` label: `client_hello` or `signature`.
    pub fn stage(self) -> &'static str {
        if self.at_signature {
            "signature"
        } else {
            "client_hello"
        }
    }
}

/// The budget's refusal of this connection's handshake, if it refused it.
pub fn refusal(ssl: &SslRef) -> Option<Refusal> {
    refusal_of(ssl.ex_data(*ADMISSION)?.state.load(Ordering::Relaxed))
}

/// Whether the budget refused this connection's handshake.
pub fn refused(ssl: &SslRef) -> bool {
    refusal(ssl).is_some()
}

/// For a connection that resumed while its source was over its full budget under
/// `over_budget = "resume_then_429"`: the `Retry-After` its requests are answered with (whole
/// seconds until the source's full bucket has a token again, at least 1). None otherwise.
pub fn answer_429(ssl: &SslRef) -> Option<u32> {
    let admission = ssl.ex_data(*ADMISSION)?;
    if admission.state.load(Ordering::Relaxed) != CHARGED_RESUMED_OVER {
        return None;
    }
    Some(admission.policy.seconds_per_full_token())
}

/// Records a decision and logs a refusal (rate-limited); true when the handshake goes on.
fn settle(admission: &Admission, state: u8) -> bool {
    admission.state.store(state, Ordering::Relaxed);
    let Some(refusal) = refusal_of(state) else { return true };
    if let Some(left_out) = REFUSALS_LOGGED.allow() {
        tracing::warn!(
            source = %admission.policy.network(admission.client),
            client = %admission.client,
            reason = refusal.reason(),
            stage = refusal.stage(),
            left_out,
            "TLS handshake refused: the source is over its handshake budget (at most one line a second; \
             left_out = refusals not logged since the last line)"
        );
    }
    false
}

fn refusal_of(state: u8) -> Option<Refusal> {
    match state {
        REFUSED_FULL_HELLO => Some(Refusal {
            resumed_budget: false,
            at_signature: false,
        }),
        REFUSED_RESUMED_HELLO => Some(Refusal {
            resumed_budget: true,
            at_signature: false,
        }),
        REFUSED_FULL_SIGNATURE => Some(Refusal {
            resumed_budget: false,
            at_signature: true,
        }),
        _ => None,
    }
}

/// Tells whether a ticket's 16-byte key name is one of the server's ticket keys (given by the
/// caller, so that this module does not depend on the ticket-key ring).
pub(crate) type KeyNameCheck = Arc<dyn Fn(&[u8]) -> bool + Send + Sync>;

/// The ClientHello side of the budget, made once per configuration generation (it knows which
/// resumptions the server can do).
pub(crate) struct HelloCheck {
    /// The server negotiates TLS 1.3 with clients that offer it.
    tls13: bool,
    /// Whether a 16-byte key name is one of the current ticket keys' (tickets on only).
    tickets: Option<KeyNameCheck>,
    /// The session-ID cache is on.
    session_ids: bool,
}

impl HelloCheck {
    pub(crate) fn new(tls: &TlsConfig, tickets: KeyNameCheck) -> Self {
        Self {
            tls13: tls.max_version == TlsVersion::V1_3,
            tickets: tls.tickets.enabled.then_some(tickets),
            session_ids: tls.session_cache.enabled,
        }
    }

    /// Whether `hello` offers a resumption this server could grant.
    fn may_resume(&self, hello: &ClientHello<'_>) -> bool {
        let parts = HelloParts {
            body: hello.as_bytes(),
            supported_versions: hello.get_extension(ExtensionType::SUPPORTED_VERSIONS),
            pre_shared_key: hello.get_extension(ExtensionType::PRE_SHARED_KEY),
            session_ticket: hello.get_extension(ExtensionType::SESSION_TICKET),
        };
        match offer(parts, self.tls13) {
            ResumptionOffer::None => false,
            ResumptionOffer::Tls13Psk(ticket) | ResumptionOffer::Tls12Ticket(ticket) => {
                let (Some(ours), Some(name)) = (&self.tickets, ticket.get(..16)) else {
                    return false;
                };
                ours(name)
            }
            ResumptionOffer::Tls12SessionId(_) => self.session_ids,
        }
    }

    /// Charges `hello`'s connection to its source's budget (nothing for a connection not under
    /// one); false when it is to be refused (fail certificate selection). At most once per
    /// connection: a second call answers the first decision.
    pub(crate) fn admit(&self, hello: &ClientHello<'_>) -> bool {
        let Some(admission) = hello.ssl().ex_data(*ADMISSION) else {
            return true;
        };
        match admission.state.load(Ordering::Relaxed) {
            UNDECIDED => {}
            state => return refusal_of(state).is_none(),
        }
        let resumable = self.may_resume(hello);
        let p = &*admission.policy;
        let now = p.table.now();
        let state = p.table.with(admission.source, now, |b| {
            if !resumable {
                return if b.take_full(p.full, now) {
                    CHARGED_FULL
                } else {
                    REFUSED_FULL_HELLO
                };
            }
            let over = !b.has_full(p.full, now);
            if over && p.mode == OverBudget::Close {
                return REFUSED_FULL_HELLO;
            }
            match p.resumed {
                Some(rate) if !b.take_resumed(rate, now) => REFUSED_RESUMED_HELLO,
                _ if over && p.mode == OverBudget::ResumeThen429 => CHARGED_RESUMED_OVER,
                _ => CHARGED_RESUMED,
            }
        });
        settle(admission, state)
    }
}

/// Whether this connection may spend a signature (the private-key hook asks first): always,
/// unless it is under a budget, was admitted without a full-handshake token (as a resumption),
/// and its source's full bucket is empty.
pub(crate) fn may_sign(ssl: &SslRef) -> bool {
    let Some(admission) = ssl.ex_data(*ADMISSION) else {
        return true;
    };
    match admission.state.load(Ordering::Relaxed) {
        CHARGED_FULL => return true,
        UNDECIDED | CHARGED_RESUMED | CHARGED_RESUMED_OVER => {}
        _ => return false,
    }
    let p = &*admission.policy;
    let now = p.table.now();
    let state = p.table.with(admission.source, now, |b| {
        if b.take_full(p.full, now) {
            CHARGED_FULL
        } else {
            REFUSED_FULL_SIGNATURE
        }
    });
    settle(admission, state)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn policy(ipv4_prefix: u8, ipv6_prefix: u8) -> Policy {
        let config = HandshakeBudgetConfig {
            ipv4_prefix,
            ipv6_prefix,
            ..HandshakeBudgetConfig::default()
        };
        Policy::new(&config, Arc::new(Table::new(1024)))
    }

    #[test]
    fn sources_are_prefixes_and_ipv4_stays_apart_from_ipv6() {
        let wide = policy(24, 48);
        let s = |ip: &str| wide.source(ip.parse().unwrap());
        assert_eq!(s("192.0.2.1"), s("192.0.2.254"));
        assert_ne!(s("192.0.2.1"), s("192.0.3.1"));
        assert_eq!(s("::ffff:192.0.2.7"), s("192.0.2.1"));
        assert_eq!(s("2001:db8:1:2::1"), s("2001:db8:1:ffff::9"));
        assert_ne!(s("2001:db8:1::1"), s("2001:db8:2::1"));
        assert_ne!(s("0.0.0.0"), s("::"));
        assert_eq!(wide.network("192.0.2.77".parse().unwrap()), "192.0.2.0/24");
        assert_eq!(wide.network("2001:db8:1:2::1".parse().unwrap()), "2001:db8:1::/48");
        // The defaults: each IPv4 address, each IPv6 /64; the extremes of the ranges.
        let defaults = policy(32, 64);
        let s = |ip: &str| defaults.source(ip.parse().unwrap());
        assert_ne!(s("192.0.2.1"), s("192.0.2.2"));
        assert_eq!(s("2001:db8:1:2::1"), s("2001:db8:1:2:ffff::9"));
        assert_ne!(s("2001:db8:1:2::1"), s("2001:db8:1:3::1"));
        assert_eq!(
            defaults.network("2001:db8:1:2::1".parse().unwrap()),
            "2001:db8:1:2::/64"
        );
        let all = policy(1, 128);
        assert_eq!(all.network("192.0.2.1".parse().unwrap()), "128.0.0.0/1");
        assert_eq!(all.network("2001:db8::7".parse().unwrap()), "2001:db8::7/128");
    }

    #[test]
    fn refusal_labels() {
        let labels = |resumed_budget, at_signature| {
            let r = Refusal {
                resumed_budget,
                at_signature,
            };
            (r.reason(), r.stage())
        };
        assert_eq!(labels(false, false), ("full_handshake_budget", "client_hello"));
        assert_eq!(labels(true, false), ("resumed_handshake_budget", "client_hello"));
        assert_eq!(labels(false, true), ("full_handshake_budget", "signature"));
        assert_eq!(refusal_of(CHARGED_FULL), None);
        assert_eq!(refusal_of(CHARGED_RESUMED), None);
    }
}
