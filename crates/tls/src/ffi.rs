//! The one module of tlsgate that calls BoringSSL directly or uses `unsafe` APIs of the `boring`
//! crate. Everything here is a thin, documented wrapper; each `unsafe` block says why it is sound.
//!
//! What lives here: what the safe `boring` API does not wrap (ticket and session-ID lifetimes,
//! the number of TLS 1.3 tickets, record size), the `boring` setters that are `unsafe` because
//! their callbacks must uphold BoringSSL invariants (ticket-key callback, session lookup callback),
//! and the one socket option the record sizer reads (`TCP_INFO`).

use crate::session_cache::SessionCache;
use crate::tickets::TicketKeyRing;
use boring::ssl::{SslContextBuilder, SslRef, SslSession, TicketKeyCallbackResult};
use foreign_types::ForeignTypeRef;
use std::sync::Arc;

/// Sets how long sessions (TLS 1.2 session IDs and tickets, TLS 1.3 tickets) stay resumable.
pub fn set_session_lifetime(builder: &mut SslContextBuilder, secs: u32) {
    // SAFETY: `builder.as_ptr()` is a valid SSL_CTX owned by `builder` for the whole call; both
    // functions only store an integer in it.
    unsafe {
        boring_sys::SSL_CTX_set_timeout(builder.as_ptr(), secs);
        boring_sys::SSL_CTX_set_session_psk_dhe_timeout(builder.as_ptr(), secs);
    }
}

/// Sets how many TLS 1.3 NewSessionTicket messages the server sends after a handshake (0 = none).
pub fn set_num_tickets(builder: &mut SslContextBuilder, n: usize) {
    // SAFETY: valid SSL_CTX owned by `builder`; the call stores an integer (BoringSSL caps it at 16).
    unsafe {
        boring_sys::SSL_CTX_set_num_tickets(builder.as_ptr(), n);
    }
}

/// Sets the largest TLS record this connection sends (512..=16384 bytes).
pub fn set_max_send_fragment(ssl: &mut SslRef, bytes: usize) -> bool {
    let bytes = bytes.clamp(512, 16384);
    // SAFETY: `ssl.as_ptr()` is a live SSL borrowed mutably for the call; the function only
    // updates an integer field and is allowed at any point of the connection.
    unsafe { boring_sys::SSL_set_max_send_fragment(ssl.as_ptr(), bytes) == 1 }
}

/// Congestion window and sender MSS of a TCP socket, from `TCP_INFO` (Linux).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct TcpWindow {
    /// Congestion window, in segments.
    pub cwnd: u32,
    /// Sender maximum segment size, in bytes.
    pub mss: u32,
}

/// Reads the congestion window of a connected TCP socket; None if the kernel does not say.
pub fn tcp_window(fd: std::os::fd::BorrowedFd<'_>) -> Option<TcpWindow> {
    use std::os::fd::AsRawFd;
    let mut info = std::mem::MaybeUninit::<libc::tcp_info>::zeroed();
    let mut len = std::mem::size_of::<libc::tcp_info>() as libc::socklen_t;
    // SAFETY: `fd` is a live socket borrowed for the call; `info` is a zeroed, writable
    // `tcp_info` of `len` bytes, and the kernel writes at most `len` bytes and updates `len`.
    let rc = unsafe {
        libc::getsockopt(
            fd.as_raw_fd(),
            libc::IPPROTO_TCP,
            libc::TCP_INFO,
            info.as_mut_ptr().cast(),
            &mut len,
        )
    };
    if rc != 0 || (len as usize) < std::mem::size_of::<libc::tcp_info>() / 2 {
        return None;
    }
    // SAFETY: zero-initialised and (partly) filled by the kernel; every field is a plain integer.
    let info = unsafe { info.assume_init() };
    (info.tcpi_snd_mss > 0 && info.tcpi_snd_cwnd > 0).then_some(TcpWindow {
        cwnd: info.tcpi_snd_cwnd,
        mss: info.tcpi_snd_mss,
    })
}

/// Offers a saved session on a client connection (resumption by session ID, ticket or TLS 1.3 PSK).
///
/// The session must come from a context built like `ssl`'s (tlsgate's clients and servers only
/// ever use BoringSSL's default X.509 method), which is the condition `boring` cannot check.
pub fn set_client_session(
    ssl: &mut SslRef,
    session: &boring::ssl::SslSessionRef,
) -> Result<(), boring::error::ErrorStack> {
    // SAFETY: SSL_set_session only takes a reference on `session`. `boring` marks it unsafe because
    // a session made under a context with a different certificate representation (X509 vs
    // CRYPTO_BUFFER-only) would confuse certificate handling later; every context in tlsgate is
    // created with `SslMethod::tls()`/`tls_client()` and the X.509 representation, so the session
    // and `ssl` always agree.
    unsafe { ssl.set_session(session) }
}

/// Installs `ring` as the session-ticket encryption callback (TLS 1.2 tickets and TLS 1.3 PSKs).
///
/// Encryption uses the ring's current key; decryption accepts any key still in the ring and asks
/// for a fresh ticket when the key used is no longer current.
pub fn install_ticket_keys(builder: &mut SslContextBuilder, ring: Arc<TicketKeyRing>) {
    let callback =
        move |ssl: &SslRef,
              name: &mut [u8; 16],
              iv: &mut [u8; boring_sys::EVP_MAX_IV_LENGTH as usize],
              cipher: &mut boring::symm::CipherCtxRef,
              hmac: &mut boring::hmac::HmacCtxRef,
              encrypt: bool| { ring.ticket_callback(ssl, name, iv, cipher, hmac, encrypt) };
    // SAFETY: the callback initialises the cipher and HMAC contexts with a key, the IV and the key
    // name as `SSL_CTX_set_tlsext_ticket_key_cb` requires on every path that returns Success or
    // DecryptSuccessRenew (see `TicketKeyRing::ticket_callback`), and returns Noop/Error otherwise.
    unsafe { builder.set_ticket_key_callback(callback) };
}

/// Installs `cache` as the server-side TLS 1.2 session-ID store, looked up through BoringSSL's
/// asynchronous session callback (the cluster store of a later issue plugs in here).
pub fn install_session_cache(builder: &mut SslContextBuilder, cache: Arc<SessionCache>) {
    let store = cache.clone();
    builder.set_new_session_callback(move |ssl, session| store.insert(ssl, session));
    // SAFETY: every session returned is decoded from DER by `SslSession::from_der`, so it is a fresh
    // object not tied to any other SSL_CTX, which is the contract of the async get-session callback.
    unsafe {
        tokio_boring::SslContextBuilderExt::set_async_get_session_callback(builder, move |ssl, id| {
            cache.lookup(ssl, id).map(|der| {
                let fut: boring::ssl::BoxGetSessionFuture = Box::pin(async move {
                    let finish: boring::ssl::BoxGetSessionFinish =
                        Box::new(move |_ssl: &mut SslRef, _id: &[u8]| SslSession::from_der(&der).ok());
                    Some(finish)
                });
                fut
            })
        });
    }
}

/// What a ticket callback returns when no key matches: fall back to a full handshake.
pub const TICKET_UNKNOWN: TicketKeyCallbackResult = TicketKeyCallbackResult::Noop;

/// The intermediates a context sends after its leaf (empty when there are none, where
/// `SslContextRef::extra_chain_certs` would panic on BoringSSL's NULL stack).
pub fn extra_chain_certs(ctx: &boring::ssl::SslContextRef) -> Vec<boring::x509::X509> {
    let mut chain: *mut boring_sys::stack_st_X509 = std::ptr::null_mut();
    // SAFETY: `ctx` is a live SSL_CTX borrowed for the call; BoringSSL stores in `chain` a pointer
    // to a stack the context owns (or NULL), which stays valid while `ctx` is borrowed and
    // unmodified; the certificates are up-referenced (`to_owned`) before the borrow ends.
    unsafe {
        if boring_sys::SSL_CTX_get_extra_chain_certs(ctx.as_ptr(), &mut chain) != 1 || chain.is_null() {
            return Vec::new();
        }
        boring::stack::StackRef::<boring::x509::X509>::from_ptr(chain)
            .iter()
            .map(|c| c.to_owned())
            .collect()
    }
}
