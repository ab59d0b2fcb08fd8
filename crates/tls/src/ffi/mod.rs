//! The one module of tlsgate that calls BoringSSL directly or uses `unsafe` APIs of the `boring`
//! crate. Everything here is a thin, documented wrapper; each `unsafe` block says why it is sound.
//!
//! What lives here: what the safe `boring` API does not wrap (ticket and session-ID lifetimes,
//! the number of TLS 1.3 tickets, record size), the `boring` setters that are `unsafe` because
//! their callbacks must uphold BoringSSL invariants (ticket-key callback, session lookup callback),
//! the socket options socket2 lacks (`TCP_INFO` for the record sizer, TCP Fast Open accounting
//! and the segment counts tests read, the listeners' `TCP_FASTOPEN`), the strict TLS 1.3 cipher
//! order, and the calls into the allocator: the process's global allocator over mimalloc
//! (`alloc`), and `mi_collect` (a quiet worker's freed memory back to the OS).
//!
//! It imports nothing from the rest of the crate: where a callback needs a decision (which ticket
//! key, which cached session), it asks a trait defined here ([`TicketKeys`], [`SessionStore`]),
//! which the policy modules above (`tickets`, `session_cache`) implement.

use boring::hash::MessageDigest;
use boring::hmac::HmacCtxRef;
use boring::ssl::{SslContextBuilder, SslRef, SslSession, TicketKeyCallbackResult};
use boring::symm::{Cipher, CipherCtxRef};
use foreign_types::ForeignTypeRef;
use std::future::Future;
use std::pin::Pin;
use std::sync::Arc;

mod alloc;
pub use alloc::Allocator;

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

/// Lets BoringSSL free what was configured for the handshake (the certificate and key
/// selection copied from the site's context, the cipher and verification settings: about 1.2 KB)
/// once the handshake is done, instead of keeping it for the connection's life (issue 18). What
/// the handshake established (cipher, version, session, peer certificate, ALPN, server name) is
/// not configuration and stays; a server never renegotiates, and tlsgate never calls
/// `SSL_clear`, the two things shedding rules out.
pub fn shed_handshake_config(ssl: &mut SslRef) {
    // SAFETY: `ssl.as_ptr()` is a live SSL borrowed mutably for the call; the function only sets
    // a flag that the handshake reads when it finishes.
    unsafe { boring_sys::SSL_set_shed_handshake_config(ssl.as_ptr(), 1) }
}

/// Whether `ssl` still holds its handshake configuration: BoringSSL's `SSL_get_ciphers` (a query
/// of configuration) answers NULL once it has been shed ([`shed_handshake_config`]).
pub fn handshake_config_kept(ssl: &SslRef) -> bool {
    // SAFETY: `ssl.as_ptr()` is a live SSL for the call; the function reads a pointer field and
    // returns it without transferring ownership; only its nullness is used.
    unsafe { !boring_sys::SSL_get_ciphers(ssl.as_ptr()).is_null() }
}

/// Takes what BoringSSL has queued to send but not written, as sealed TLS records, for the
/// caller to write to the socket itself, right now: after a TLS 1.3 handshake, the server's
/// NewSessionTicket messages. BoringSSL (ssl/tls13_server.cc, `do_send_new_session_ticket`)
/// leaves them in the pending flight and writes them with the next `SSL_write`, so a server that
/// does not answer at once (HTTP/1.1 before a request) holds them back; its advice is a
/// zero-byte `SSL_write`, which the `boring` crate short-circuits and which, through
/// `tokio-boring`, could only run with the task's waker installed in the stream's BIO (private
/// to that crate). So the write goes to a memory BIO swapped in for the call: `SSL_write(ssl, "",
/// 0)` flushes the pending flight (ssl/s3_pkt.cc, `do_tls_write`) and writes no application
/// data. Empty when nothing is queued (TLS 1.2: the ticket went with the handshake), and while the
/// handshake is not finished (0-RTT accepted: BoringSSL sent its tickets half-RTT, with the
/// server Finished), where a write could run the handshake and read from the real BIO.
pub fn take_pending_flight(ssl: &mut SslRef) -> Result<Vec<u8>, boring::error::ErrorStack> {
    static EMPTY: [u8; 1] = [0];
    let ssl = ssl.as_ptr();
    // SAFETY: `ssl` is a live SSL, borrowed mutably for the whole function (no other code can use
    // it meanwhile). `SSL_in_init` only reads state. The transport BIO gets one more reference
    // before `SSL_set0_wbio` drops the SSL's own, so it stays alive while swapped out, and the
    // second `SSL_set0_wbio` hands that reference back (and frees the memory BIO). With the
    // handshake finished, `SSL_write` cannot run the handshake, so it touches only the write BIO,
    // the memory BIO, which accepts every write; a zero length makes it write no application
    // data, and `EMPTY` is a valid pointer for it. `BIO_mem_contents` points into the memory BIO,
    // which is copied before it is freed.
    unsafe {
        if boring_sys::SSL_in_init(ssl) != 0 {
            return Ok(Vec::new());
        }
        let transport = boring_sys::SSL_get_wbio(ssl);
        if transport.is_null() {
            return Ok(Vec::new());
        }
        let memory = boring_sys::BIO_new(boring_sys::BIO_s_mem());
        if memory.is_null() {
            return Err(boring::error::ErrorStack::get());
        }
        boring_sys::BIO_up_ref(transport);
        boring_sys::SSL_set0_wbio(ssl, memory);
        boring_sys::ERR_clear_error();
        let rc = boring_sys::SSL_write(ssl, EMPTY.as_ptr().cast(), 0);
        let failed = rc < 0 || boring_sys::ERR_peek_error() != 0;
        let (mut data, mut len) = (std::ptr::null::<u8>(), 0usize);
        let records = if boring_sys::BIO_mem_contents(memory, &mut data, &mut len) == 1 && len > 0 {
            std::slice::from_raw_parts(data, len).to_vec()
        } else {
            Vec::new()
        };
        boring_sys::SSL_set0_wbio(ssl, transport);
        if failed {
            return Err(boring::error::ErrorStack::get());
        }
        Ok(records)
    }
}

/// Congestion window and sender MSS of a TCP socket, from `TCP_INFO` (Linux).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct TcpWindow {
    /// Congestion window, in segments.
    pub cwnd: u32,
    /// Sender maximum segment size, in bytes.
    pub mss: u32,
}

/// `TCP_INFO` of a TCP socket and how many of its bytes the kernel filled; None on error.
fn tcp_info(fd: std::os::fd::BorrowedFd<'_>) -> Option<(libc::tcp_info, usize)> {
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
    // SAFETY: zero-initialised and (partly) filled by the kernel; every field is a plain integer,
    // so the unfilled tail stays a valid zero.
    (rc == 0).then(|| (unsafe { info.assume_init() }, len as usize))
}

/// Reads the congestion window of a connected TCP socket; None if the kernel does not say.
pub fn tcp_window(fd: std::os::fd::BorrowedFd<'_>) -> Option<TcpWindow> {
    let (info, len) = tcp_info(fd)?;
    if len < std::mem::size_of::<libc::tcp_info>() / 2 {
        return None;
    }
    (info.tcpi_snd_mss > 0 && info.tcpi_snd_cwnd > 0).then_some(TcpWindow {
        cwnd: info.tcpi_snd_cwnd,
        mss: info.tcpi_snd_mss,
    })
}

/// Enables server-side TCP Fast Open on a listening socket with a queue of `qlen` pending TFO
/// connections (Linux `TCP_FASTOPEN`; 0 turns it off). socket2 has no setter for it.
pub fn set_tcp_fastopen(fd: std::os::fd::BorrowedFd<'_>, qlen: u32) -> std::io::Result<()> {
    use std::os::fd::AsRawFd;
    let qlen = libc::c_int::try_from(qlen).unwrap_or(libc::c_int::MAX);
    // SAFETY: `fd` is a live socket borrowed for the call; the option value is a readable c_int
    // of exactly the length passed, which the kernel only reads.
    let rc = unsafe {
        libc::setsockopt(
            fd.as_raw_fd(),
            libc::IPPROTO_TCP,
            libc::TCP_FASTOPEN,
            (&qlen as *const libc::c_int).cast(),
            std::mem::size_of::<libc::c_int>() as libc::socklen_t,
        )
    };
    if rc == 0 {
        Ok(())
    } else {
        Err(std::io::Error::last_os_error())
    }
}

/// Whether an accepted connection's SYN carried data the kernel accepted with a valid Fast Open
/// cookie (`TCP_INFO` `tcpi_options & TCPI_OPT_SYN_DATA`, Linux); false when the kernel does not say.
pub fn tcp_syn_data_accepted(fd: std::os::fd::BorrowedFd<'_>) -> bool {
    /// `TCPI_OPT_SYN_DATA` from linux/tcp.h (not exported by the libc crate).
    const TCPI_OPT_SYN_DATA: u8 = 32;
    // `tcpi_options` is byte 5: it lies within any fill of 8 bytes or more.
    tcp_info(fd).is_some_and(|(info, len)| len >= 8 && info.tcpi_options & TCPI_OPT_SYN_DATA != 0)
}

/// Segments with data a TCP socket has received (`TCP_INFO` `tcpi_data_segs_in`, Linux 4.6+);
/// None when the kernel does not say. For tests and diagnostics of how writes were segmented.
pub fn tcp_data_segs_in(fd: std::os::fd::BorrowedFd<'_>) -> Option<u32> {
    const END: usize = std::mem::offset_of!(libc::tcp_info, tcpi_data_segs_in) + std::mem::size_of::<u32>();
    tcp_info(fd).and_then(|(info, len)| (len >= END).then_some(info.tcpi_data_segs_in))
}

/// Makes the server's TLS 1.3 cipher order strict: AES-128-GCM, AES-256-GCM, then
/// ChaCha20-Poly1305, whatever the client prefers (BoringSSL's default puts all three in one
/// equal-preference group on machines with AES instructions, so the client's order decides).
pub fn set_strict_tls13_cipher_order(builder: &mut SslContextBuilder) -> Result<(), boring::error::ErrorStack> {
    const ORDER: [u16; 3] = [
        boring_sys::SSL_CIPHER_AES_128_GCM_SHA256 as u16,
        boring_sys::SSL_CIPHER_AES_256_GCM_SHA384 as u16,
        boring_sys::SSL_CIPHER_CHACHA20_POLY1305_SHA256 as u16,
    ];
    // SAFETY: `builder.as_ptr()` is a valid SSL_CTX owned by `builder`; `ORDER` is a readable array
    // of the length passed, copied by BoringSSL; a null `flags` pointer means no equal-preference
    // groups, which the function documents as allowed.
    let ok = unsafe {
        boring_sys::SSL_CTX_set1_tls13_ciphers(builder.as_ptr(), ORDER.as_ptr(), std::ptr::null(), ORDER.len())
    };
    if ok == 1 {
        Ok(())
    } else {
        Err(boring::error::ErrorStack::get())
    }
}

/// Serves ChaCha20-Poly1305 first on one connection (a client that lists it first:
/// `tlsgate_wire::client_hello::prefers_chacha20`), ahead of the context's AES-first order:
/// TLS 1.3 ChaCha20, AES-128-GCM, AES-256-GCM; TLS 1.2 `tls12`, a strict list with the ChaCha20
/// suites first (built once per configuration). Called from certificate selection, before
/// BoringSSL chooses the suite.
pub fn prefer_chacha20(ssl: &mut SslRef, tls12: &std::ffi::CStr) -> Result<(), boring::error::ErrorStack> {
    const ORDER: [u16; 3] = [
        boring_sys::SSL_CIPHER_CHACHA20_POLY1305_SHA256 as u16,
        boring_sys::SSL_CIPHER_AES_128_GCM_SHA256 as u16,
        boring_sys::SSL_CIPHER_AES_256_GCM_SHA384 as u16,
    ];
    // SAFETY: `ssl.as_ptr()` is a valid SSL that `ssl` borrows mutably for the call; `ORDER` is a
    // readable array of the length passed (copied by BoringSSL) and a null `flags` means no
    // equal-preference groups; `tls12` is a NUL-terminated string BoringSSL only reads.
    let ok = unsafe {
        boring_sys::SSL_set1_tls13_ciphers(ssl.as_ptr(), ORDER.as_ptr(), std::ptr::null(), ORDER.len()) == 1
            && boring_sys::SSL_set_strict_cipher_list(ssl.as_ptr(), tls12.as_ptr()) == 1
    };
    if ok {
        Ok(())
    } else {
        Err(boring::error::ErrorStack::get())
    }
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

// --- Session resumption. The policy (which key, which session, what to count) lives in
// `tickets` and `session_cache`; this module only owns the BoringSSL contract of each callback.

/// One session-ticket key (BoringSSL's classic ticket format: AES-128-CBC and HMAC-SHA256).
#[derive(Clone, Copy)]
pub struct TicketKeyMaterial {
    /// Key name sent in the clear in each ticket, to find the key again.
    pub name: [u8; 16],
    /// AES-128-CBC key.
    pub aes: [u8; 16],
    /// HMAC-SHA256 key.
    pub hmac: [u8; 32],
}

impl std::fmt::Debug for TicketKeyMaterial {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        // Never print key material.
        f.debug_struct("TicketKeyMaterial").finish_non_exhaustive()
    }
}

/// What the ticket-key policy answers for a ticket a client presents.
#[derive(Debug)]
pub enum TicketDecryption {
    /// No key of that name: fall back to a full handshake.
    Unknown,
    /// The current key: resume.
    Current(TicketKeyMaterial),
    /// A retired key still accepted: resume and issue a fresh ticket under the current key.
    Retired(TicketKeyMaterial),
}

/// The ticket-key policy behind BoringSSL's ticket callback (`tickets::TicketKeyRing`).
pub trait TicketKeys: Send + Sync + 'static {
    /// The key that encrypts a new ticket on `ssl`; None issues no ticket (BoringSSL then skips
    /// that NewSessionTicket).
    fn encrypting_key(&self, ssl: &SslRef) -> Option<TicketKeyMaterial>;
    /// The key named `name` in a ticket presented on `ssl`.
    fn decrypting_key(&self, ssl: &SslRef, name: &[u8; 16]) -> TicketDecryption;
}

/// Installs `keys` as the session-ticket encryption callback (TLS 1.2 tickets and TLS 1.3 PSKs).
pub fn install_ticket_keys<T: TicketKeys>(builder: &mut SslContextBuilder, keys: Arc<T>) {
    let callback =
        move |ssl: &SslRef,
              name: &mut [u8; 16],
              iv: &mut [u8; boring_sys::EVP_MAX_IV_LENGTH as usize],
              cipher: &mut CipherCtxRef,
              hmac: &mut HmacCtxRef,
              encrypt: bool| { ticket_callback(&*keys, ssl, name, iv, cipher, hmac, encrypt) };
    // SAFETY: `ticket_callback` initialises the cipher and HMAC contexts with a key, the IV and
    // the key name, as `SSL_CTX_set_tlsext_ticket_key_cb` requires, on every path that returns
    // Success or DecryptSuccessRenew, and returns Noop or Error on every other path.
    unsafe { builder.set_ticket_key_callback(callback) };
}

/// The body of the ticket callback: asks the policy for a key and sets up the contexts with it.
fn ticket_callback(
    keys: &dyn TicketKeys,
    ssl: &SslRef,
    name: &mut [u8; 16],
    iv: &mut [u8; boring_sys::EVP_MAX_IV_LENGTH as usize],
    cipher: &mut CipherCtxRef,
    hmac: &mut HmacCtxRef,
    encrypt: bool,
) -> TicketKeyCallbackResult {
    if encrypt {
        let Some(key) = keys.encrypting_key(ssl) else {
            return TicketKeyCallbackResult::Noop;
        };
        *name = key.name;
        *iv = [0; boring_sys::EVP_MAX_IV_LENGTH as usize];
        if boring::rand::rand_bytes(&mut iv[..16]).is_err() {
            return TicketKeyCallbackResult::Error;
        }
        if cipher.init_encrypt(&Cipher::aes_128_cbc(), &key.aes, iv).is_err()
            || hmac.init(&key.hmac, &MessageDigest::sha256()).is_err()
        {
            return TicketKeyCallbackResult::Error;
        }
        return TicketKeyCallbackResult::Success;
    }
    let (key, success) = match keys.decrypting_key(ssl, name) {
        TicketDecryption::Unknown => return TicketKeyCallbackResult::Noop,
        TicketDecryption::Current(key) => (key, TicketKeyCallbackResult::Success),
        TicketDecryption::Retired(key) => (key, TicketKeyCallbackResult::DecryptSuccessRenew),
    };
    if hmac.init(&key.hmac, &MessageDigest::sha256()).is_err()
        || cipher.init_decrypt(&Cipher::aes_128_cbc(), &key.aes, iv).is_err()
    {
        return TicketKeyCallbackResult::Error;
    }
    success
}

/// A session lookup in flight: resolves to the session's DER, or None (miss, timeout, error).
pub type PendingSession = Pin<Box<dyn Future<Output = Option<Vec<u8>>> + Send>>;

/// Where a session-ID lookup goes on.
pub enum SessionLookup {
    /// Found at once: the session's DER.
    Found(Vec<u8>),
    /// Asked elsewhere; the handshake waits for the answer.
    Pending(PendingSession),
}

/// The server-side session-ID store behind BoringSSL's external-cache callbacks
/// (`session_cache::SessionCache`).
pub trait SessionStore: Send + Sync + 'static {
    /// Keeps a session BoringSSL has just created.
    fn insert(&self, ssl: &mut SslRef, session: SslSession);
    /// Starts looking up session `id` for `ssl`; None when there is nothing to find.
    fn lookup(self: Arc<Self>, ssl: &SslRef, id: &[u8]) -> Option<SessionLookup>;
    /// A pending lookup's session is being resumed on `ssl`.
    fn pending_resumed(&self, ssl: &SslRef);
}

/// Installs `store` as the server-side TLS 1.2 session-ID store, looked up through BoringSSL's
/// asynchronous session callback: a session found at once resumes at once; a pending lookup
/// makes the handshake wait (bounded by the store's own timeout) for its answer.
pub fn install_session_cache<T: SessionStore>(builder: &mut SslContextBuilder, store: Arc<T>) {
    let inserting = store.clone();
    builder.set_new_session_callback(move |ssl, session| inserting.insert(ssl, session));
    let callback = move |ssl: &mut SslRef, id: &[u8]| {
        let fut: boring::ssl::BoxGetSessionFuture = match store.clone().lookup(ssl, id)? {
            SessionLookup::Found(der) => Box::pin(async move {
                let finish: boring::ssl::BoxGetSessionFinish =
                    Box::new(move |_ssl: &mut SslRef, _id: &[u8]| SslSession::from_der(&der).ok());
                Some(finish)
            }),
            SessionLookup::Pending(fetch) => {
                let store = store.clone();
                Box::pin(async move {
                    let der = fetch.await?;
                    let finish: boring::ssl::BoxGetSessionFinish = Box::new(move |ssl: &mut SslRef, _id: &[u8]| {
                        let session = SslSession::from_der(&der).ok()?;
                        store.pending_resumed(ssl);
                        Some(session)
                    });
                    Some(finish)
                })
            }
        };
        Some(fut)
    };
    // SAFETY: every session the callback returns is decoded from DER by `SslSession::from_der`,
    // so it is a fresh object not tied to any other SSL_CTX, which is the contract of the async
    // get-session callback.
    unsafe { tokio_boring::SslContextBuilderExt::set_async_get_session_callback(builder, callback) };
}

/// Turns 0-RTT on or off for every connection of a context (a connection may still be refused
/// individually with [`set_early_data_enabled`]).
pub fn set_ctx_early_data_enabled(builder: &mut SslContextBuilder, enabled: bool) {
    // SAFETY: valid SSL_CTX owned by `builder`; the call stores a flag.
    unsafe { boring_sys::SSL_CTX_set_early_data_enabled(builder.as_ptr(), i32::from(enabled)) }
}

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

// --- Encrypted ClientHello (`ech`): what the `boring` crate's ECH API leaves out.

/// Serialises an ECHConfig (draft-ietf-tls-esni, version 0xfe0d) for `key` (an X25519 HPKE key):
/// BoringSSL's `SSL_marshal_ech_config`, which writes the key's public half, the HKDF-SHA256 +
/// AES-128-GCM / AES-256-GCM / ChaCha20-Poly1305 suites, `max_name_len` and `public_name`.
/// `public_name` must hold no NUL byte (it is refused otherwise).
pub fn marshal_ech_config(
    config_id: u8,
    key: &boring::hpke::HpkeKey,
    public_name: &str,
    max_name_len: usize,
) -> Result<Vec<u8>, boring::error::ErrorStack> {
    use foreign_types::ForeignType;
    let name = std::ffi::CString::new(public_name).map_err(|_| boring::error::ErrorStack::get())?;
    let mut out: *mut u8 = std::ptr::null_mut();
    let mut len: usize = 0;
    // SAFETY: `key` is a live, initialised EVP_HPKE_KEY borrowed for the call (only read);
    // `name` is a NUL-terminated string that outlives the call; `out`/`len` are valid places for
    // BoringSSL to store a buffer it allocates. On success the buffer holds `len` bytes, which are
    // copied before it is released with `OPENSSL_free` (as ssl.h asks); on failure nothing was
    // allocated.
    unsafe {
        if boring_sys::SSL_marshal_ech_config(&mut out, &mut len, config_id, key.as_ptr(), name.as_ptr(), max_name_len)
            != 1
            || out.is_null()
        {
            return Err(boring::error::ErrorStack::get());
        }
        let bytes = std::slice::from_raw_parts(out, len).to_vec();
        boring_sys::OPENSSL_free(out.cast());
        Ok(bytes)
    }
}

// --- Client side: TLS 1.3 early data (0-RTT) and TCP Fast Open, for `tlsgate probe` and
// `tlsgate bench` (the `boring` crate has no safe wrappers for these).

/// `SSL_ERROR_EARLY_DATA_REJECTED`: the code an I/O call on a client connection returns when the
/// server refused its 0-RTT data (the data must be sent again after [`reset_early_data_reject`]).
pub const ERROR_EARLY_DATA_REJECTED: i32 = boring_sys::SSL_ERROR_EARLY_DATA_REJECTED;

/// Lets a client connection send 0-RTT data when it offers an early-data capable session.
pub fn set_early_data_enabled(ssl: &mut SslRef, enabled: bool) {
    // SAFETY: `ssl` is a live SSL borrowed mutably for the call; the function stores a flag.
    unsafe { boring_sys::SSL_set_early_data_enabled(ssl.as_ptr(), i32::from(enabled)) }
}

/// Whether the connection is still in the early-data state (handshake not confirmed yet).
pub fn in_early_data(ssl: &SslRef) -> bool {
    // SAFETY: `ssl` is a live SSL borrowed for the call; the function only reads its state.
    unsafe { boring_sys::SSL_in_early_data(ssl.as_ptr()) == 1 }
}

/// Whether the server accepted the 0-RTT data (meaningful once the handshake has completed).
pub fn early_data_accepted(ssl: &SslRef) -> bool {
    // SAFETY: `ssl` is a live SSL borrowed for the call; the function only reads its state.
    unsafe { boring_sys::SSL_early_data_accepted(ssl.as_ptr()) == 1 }
}

/// Why 0-RTT was or was not used on this connection, as BoringSSL names it (`accepted`,
/// `disabled`, `no_session_offered`, `peer_declined`, `session_not_resumed`, ...).
pub fn early_data_reason(ssl: &SslRef) -> String {
    // SAFETY: `ssl` is a live SSL borrowed for the call. `SSL_early_data_reason_string` returns a
    // pointer to a static NUL-terminated string, or NULL for an unknown value.
    unsafe {
        let reason = boring_sys::SSL_get_early_data_reason(ssl.as_ptr());
        let text = boring_sys::SSL_early_data_reason_string(reason);
        if text.is_null() {
            return "unknown".into();
        }
        std::ffi::CStr::from_ptr(text).to_string_lossy().into_owned()
    }
}

/// After [`ERROR_EARLY_DATA_REJECTED`]: resets the connection so the handshake continues without
/// early data (the caller sends its data again).
pub fn reset_early_data_reject(ssl: &mut SslRef) {
    // SAFETY: `ssl` is a live SSL borrowed mutably; BoringSSL requires (and the caller's contract
    // states) that the last I/O call failed with SSL_ERROR_EARLY_DATA_REJECTED; otherwise it aborts,
    // so callers only reach this after seeing that code.
    unsafe { boring_sys::SSL_reset_early_data_reject(ssl.as_ptr()) }
}

/// Whether a session may be used to send 0-RTT data.
pub fn session_early_data_capable(session: &boring::ssl::SslSessionRef) -> bool {
    // SAFETY: `session` is a live SSL_SESSION borrowed for the call; the function only reads it.
    unsafe { boring_sys::SSL_SESSION_early_data_capable(session.as_ptr()) == 1 }
}

/// Whether a session carries a ticket (TLS 1.2 ticket or TLS 1.3 PSK identity).
pub fn session_has_ticket(session: &boring::ssl::SslSessionRef) -> bool {
    // SAFETY: `session` is a live SSL_SESSION borrowed for the call; the function only reads it.
    unsafe { boring_sys::SSL_SESSION_has_ticket(session.as_ptr()) == 1 }
}

/// Client TCP Fast Open (Linux `TCP_FASTOPEN_CONNECT`, 30): set on a socket before `connect`,
/// the kernel sends the first data in the SYN when it holds a TFO cookie for the server.
pub fn set_tcp_fastopen_connect(fd: std::os::fd::BorrowedFd<'_>) -> std::io::Result<()> {
    use std::os::fd::AsRawFd;
    const TCP_FASTOPEN_CONNECT: libc::c_int = 30;
    let on: libc::c_int = 1;
    // SAFETY: `fd` is a live socket borrowed for the call; the option value is a readable c_int of
    // the length passed.
    let rc = unsafe {
        libc::setsockopt(
            fd.as_raw_fd(),
            libc::IPPROTO_TCP,
            TCP_FASTOPEN_CONNECT,
            (&on as *const libc::c_int).cast(),
            std::mem::size_of::<libc::c_int>() as libc::socklen_t,
        )
    };
    if rc == 0 {
        Ok(())
    } else {
        Err(std::io::Error::last_os_error())
    }
}

/// The "no pre-hash" digest (a null `EVP_MD`), for `X509Builder::sign` with a key whose
/// algorithm signs the whole message (ML-DSA, Ed25519): BoringSSL's `X509_sign` passes it to
/// `EVP_DigestSignInit`, which takes NULL for those keys (crypto/x509/algorithm.cc picks the
/// ML-DSA signature OID from the key). Crate-private: only `pki` signs certificates with it.
pub(crate) fn no_digest() -> MessageDigest {
    // SAFETY: `MessageDigest` only carries the pointer; `X509_sign` / `EVP_DigestSignInit`
    // accept NULL. Nothing else receives this value (it is never asked for its size or type).
    unsafe { MessageDigest::from_ptr(std::ptr::null()) }
}

// --- Delegated credentials (`delegation`): the `boring` crate wraps `SslCredential` but not
// the delegated kind.

/// A delegated credential (RFC 9345) ready to be added to connections: the DelegatedCredential
/// structure `dc` (signed by the certificate's key), the certificate chain `chain` (DER, leaf
/// first) and the credential's own private key `key`.
pub fn delegated_credential(
    chain: &[Vec<u8>],
    dc: &[u8],
    key: &boring::pkey::PKeyRef<boring::pkey::Private>,
) -> Result<boring::ssl::SslCredential, boring::error::ErrorStack> {
    use foreign_types::ForeignType;
    /// Frees the CRYPTO_BUFFERs made for the call (BoringSSL up-references what it keeps).
    struct Buffers(Vec<*mut boring_sys::CRYPTO_BUFFER>);
    impl Drop for Buffers {
        fn drop(&mut self) {
            for b in &self.0 {
                // SAFETY: each pointer came from CRYPTO_BUFFER_new, is non-null and is freed once.
                unsafe { boring_sys::CRYPTO_BUFFER_free(*b) };
            }
        }
    }
    let buffer =
        |bytes: &[u8], owned: &mut Buffers| -> Result<*mut boring_sys::CRYPTO_BUFFER, boring::error::ErrorStack> {
            // SAFETY: `bytes` is valid for `len` bytes during the call; BoringSSL copies them. A NULL
            // pool is allowed.
            let b = unsafe { boring_sys::CRYPTO_BUFFER_new(bytes.as_ptr(), bytes.len(), std::ptr::null_mut()) };
            if b.is_null() {
                return Err(boring::error::ErrorStack::get());
            }
            owned.0.push(b);
            Ok(b)
        };
    let mut owned = Buffers(Vec::with_capacity(chain.len() + 1));
    let mut certs = Vec::with_capacity(chain.len());
    for der in chain {
        certs.push(buffer(der, &mut owned)?);
    }
    let dc_buffer = buffer(dc, &mut owned)?;
    let check = |ok: std::os::raw::c_int| {
        if ok == 1 {
            Ok(())
        } else {
            Err(boring::error::ErrorStack::get())
        }
    };
    // SAFETY: SSL_CREDENTIAL_new_delegated returns a new credential we own (or NULL, checked),
    // handed to `SslCredential`, which frees it on drop.
    let cred = unsafe {
        let p = boring_sys::SSL_CREDENTIAL_new_delegated();
        if p.is_null() {
            return Err(boring::error::ErrorStack::get());
        }
        boring::ssl::SslCredential::from_ptr(p)
    };
    // SAFETY: `cred` is a live credential not yet shared with any connection; `certs` holds
    // `certs.len()` valid buffers and `dc_buffer` one, all alive until `owned` drops (BoringSSL
    // takes its own references); `key` is a live EVP_PKEY, up-referenced by BoringSSL.
    unsafe {
        check(boring_sys::SSL_CREDENTIAL_set1_cert_chain(
            cred.as_ptr(),
            certs.as_ptr(),
            certs.len(),
        ))?;
        check(boring_sys::SSL_CREDENTIAL_set1_delegated_credential(
            cred.as_ptr(),
            dc_buffer,
        ))?;
        check(boring_sys::SSL_CREDENTIAL_set1_private_key(cred.as_ptr(), key.as_ptr()))?;
    }
    Ok(cred)
}

/// What to do when a connection's handshake completes (while BoringSSL still knows which
/// credential it used): [`on_handshake_done`] installs `T::done` for one connection.
pub trait HandshakeDone {
    /// Called once, when the handshake of `ssl` completes.
    fn done(ssl: &SslRef);
}

/// Calls `T::done` when this connection's handshake completes (BoringSSL's info callback,
/// `SSL_CB_HANDSHAKE_DONE`; the connection's own, so the contexts stay untouched).
pub fn on_handshake_done<T: HandshakeDone>(ssl: &mut SslRef) {
    unsafe extern "C" fn trampoline<T: HandshakeDone>(
        ssl: *const boring_sys::SSL,
        kind: std::os::raw::c_int,
        _value: std::os::raw::c_int,
    ) {
        if kind & boring_sys::SSL_CB_HANDSHAKE_DONE as std::os::raw::c_int != 0 {
            // SAFETY: BoringSSL calls the info callback with the live SSL it belongs to, for the
            // duration of the call; only a shared reference is made from it.
            let ssl = unsafe { SslRef::from_ptr(ssl.cast_mut()) };
            T::done(ssl);
        }
    }
    // SAFETY: `ssl` is a live SSL owned by the caller; the callback is a plain function that
    // only reads the SSL it is given.
    unsafe { boring_sys::SSL_set_info_callback(ssl.as_ptr(), Some(trampoline::<T>)) };
}

/// Whether `cred` is the credential the current handshake of `ssl` selected (only meaningful
/// during the handshake, e.g. from [`HandshakeDone::done`]).
pub fn selected_credential_is(ssl: &SslRef, cred: &boring::ssl::SslCredentialRef) -> bool {
    // SAFETY: `ssl` is live for the call; BoringSSL returns a pointer it owns (or NULL), which is
    // only compared, never dereferenced.
    let selected = unsafe { boring_sys::SSL_get0_selected_credential(ssl.as_ptr()) };
    !selected.is_null() && std::ptr::eq(selected, cred.as_ptr())
}

/// Hands the memory the calling thread's allocator heap has had free for longer than mimalloc's
/// purge delay back to the operating system, and frees the heap's pages that became wholly free
/// (`mi_collect(false)`). mimalloc does this by itself only when the thread allocates or frees a
/// page again, so a worker that went quiet keeps what its closed and idle connections freed
/// resident until the next burst. Cheap (a walk over the thread's non-full pages); a no-op for
/// memory another allocator manages (a build without mimalloc as the process's allocator).
pub fn release_free_memory() {
    // SAFETY: `mi_collect` takes no pointers and works on the calling thread's own heap and the
    // process's arenas under mimalloc's own locking; `false` asks for the normal, non-forcing
    // collection, which is what the allocator runs itself on its allocation paths.
    unsafe { libmimalloc_sys::mi_collect(false) }
}
