//! In-memory TLS for unit tests: BoringSSL connections joined by byte queues and driven step by
//! step on the test's thread, so tests see BoringSSL's real errors and callbacks without sockets.

use boring::asn1::Asn1Time;
use boring::bn::BigNum;
use boring::ec::{EcGroup, EcKey};
use boring::hash::MessageDigest;
use boring::nid::Nid;
use boring::pkey::{PKey, Private};
use boring::ssl::{
    HandshakeError, MidHandshakeSslStream, Ssl, SslContext, SslContextBuilder, SslMethod, SslRef, SslStream,
};
use boring::x509::{X509Builder, X509NameBuilder, X509};
use std::collections::VecDeque;
use std::io::{self, Read, Write};
use std::sync::{Arc, LazyLock, Mutex};

/// One direction of the connection: bytes in flight, and whether the writer has closed.
#[derive(Debug, Clone, Default)]
struct Queue(Arc<Mutex<(VecDeque<u8>, bool)>>);

/// One end of an in-memory connection.
#[derive(Debug)]
pub(crate) struct End {
    rx: Queue,
    tx: Queue,
    /// Every read fails with this kind (a transport error).
    read_error: Option<io::ErrorKind>,
    /// Bytes writes may still take before they would block (a full socket); None: no limit.
    pub write_budget: Option<usize>,
}

impl End {
    /// Two connected ends.
    fn pair() -> (End, End) {
        let (a, b) = (Queue::default(), Queue::default());
        let one = End {
            rx: a.clone(),
            tx: b.clone(),
            read_error: None,
            write_budget: None,
        };
        let two = End {
            rx: b,
            tx: a,
            read_error: None,
            write_budget: None,
        };
        (one, two)
    }

    /// An end whose peer sent `bytes` and closed.
    fn fed(bytes: &[u8]) -> End {
        let rx = Queue::default();
        *rx.0.lock().unwrap() = (bytes.iter().copied().collect(), true);
        End {
            rx,
            tx: Queue::default(),
            read_error: None,
            write_budget: None,
        }
    }

    /// Closes the sending direction: the peer reads EOF once it has read what was sent.
    fn close(&self) {
        self.tx.0.lock().unwrap().1 = true;
    }
}

impl Read for End {
    fn read(&mut self, buf: &mut [u8]) -> io::Result<usize> {
        if let Some(kind) = self.read_error {
            return Err(io::Error::from(kind));
        }
        let mut rx = self.rx.0.lock().unwrap();
        if rx.0.is_empty() {
            return if rx.1 {
                Ok(0)
            } else {
                Err(io::ErrorKind::WouldBlock.into())
            };
        }
        let n = buf.len().min(rx.0.len());
        for (slot, byte) in buf.iter_mut().zip(rx.0.drain(..n)) {
            *slot = byte;
        }
        Ok(n)
    }
}

impl Write for End {
    fn write(&mut self, buf: &[u8]) -> io::Result<usize> {
        let n = match &mut self.write_budget {
            Some(0) => return Err(io::ErrorKind::WouldBlock.into()),
            Some(left) => {
                let n = buf.len().min(*left);
                *left -= n;
                n
            }
            None => buf.len(),
        };
        self.tx.0.lock().unwrap().0.extend(&buf[..n]);
        Ok(n)
    }

    fn flush(&mut self) -> io::Result<()> {
        Ok(())
    }
}

/// A self-signed ECDSA P-256 certificate for `localhost`, and its key (made once per test run).
pub(crate) fn self_signed() -> (X509, PKey<Private>) {
    static PAIR: LazyLock<(X509, PKey<Private>)> = LazyLock::new(|| {
        let group = EcGroup::from_curve_name(Nid::X9_62_PRIME256V1).unwrap();
        let key = PKey::from_ec_key(EcKey::generate(&group).unwrap()).unwrap();
        let mut name = X509NameBuilder::new().unwrap();
        name.append_entry_by_text("CN", "localhost").unwrap();
        let name = name.build();
        let mut b = X509Builder::new().unwrap();
        b.set_version(2).unwrap();
        b.set_serial_number(&BigNum::from_u32(1).unwrap().to_asn1_integer().unwrap())
            .unwrap();
        b.set_subject_name(&name).unwrap();
        b.set_issuer_name(&name).unwrap();
        b.set_pubkey(&key).unwrap();
        b.set_not_before(&Asn1Time::days_from_now(0).unwrap()).unwrap();
        b.set_not_after(&Asn1Time::days_from_now(1).unwrap()).unwrap();
        b.sign(&key, MessageDigest::sha256()).unwrap();
        (b.build(), key)
    });
    PAIR.clone()
}

/// A server context with [`self_signed`]'s certificate, then `configure`d.
pub(crate) fn server_ctx(configure: impl FnOnce(&mut SslContextBuilder)) -> SslContext {
    let (cert, key) = self_signed();
    let mut b = SslContextBuilder::new(SslMethod::tls()).unwrap();
    b.set_certificate(&cert).unwrap();
    b.set_private_key(&key).unwrap();
    configure(&mut b);
    b.build()
}

/// A client context that verifies nothing unless `configure` says so.
pub(crate) fn client_ctx(configure: impl FnOnce(&mut SslContextBuilder)) -> SslContext {
    let mut b = SslContextBuilder::new(SslMethod::tls()).unwrap();
    configure(&mut b);
    b.build()
}

/// How one side's handshake ended: done, or failed (the failed stream holds the error).
pub(crate) type Side = Result<SslStream<End>, MidHandshakeSslStream<End>>;

/// One handshake between a client and a server connection, run to its end.
pub(crate) struct Handshake {
    pub client: Side,
    pub server: Side,
}

enum Step {
    Waiting(MidHandshakeSslStream<End>),
    Ended(Side),
}

fn step(state: Step) -> Step {
    let Step::Waiting(mid) = state else { return state };
    match mid.handshake() {
        Ok(done) => Step::Ended(Ok(done)),
        Err(HandshakeError::WouldBlock(mid)) => Step::Waiting(mid),
        Err(HandshakeError::Failure(mid)) => {
            mid.get_ref().close();
            Step::Ended(Err(mid))
        }
        Err(HandshakeError::SetupFailure(e)) => panic!("TLS setup failed: {e}"),
    }
}

fn ended(state: Step) -> Side {
    match state {
        Step::Ended(side) => side,
        Step::Waiting(_) => panic!("the handshake stalled"),
    }
}

impl Handshake {
    /// A handshake between a server connection of `server` and a client `configure`d.
    pub(crate) fn run(server: &SslContext, configure: impl FnOnce(&mut SslContextBuilder)) -> Self {
        let client = Ssl::new(&client_ctx(configure)).unwrap();
        Self::between(client, Ssl::new(server).unwrap())
    }

    /// A handshake between two prepared connections.
    pub(crate) fn between(client: Ssl, server: Ssl) -> Self {
        let (c, s) = End::pair();
        let mut client = Step::Waiting(client.setup_connect(c));
        let mut server = Step::Waiting(server.setup_accept(s));
        for _ in 0..100 {
            client = step(client);
            server = step(server);
            if matches!((&client, &server), (Step::Ended(_), Step::Ended(_))) {
                break;
            }
        }
        Self {
            client: ended(client),
            server: ended(server),
        }
    }

    /// A client of `client` offering `session` (if any) to a server connection of `server`,
    /// `prepare`d first (e.g. with the handshake-info record the tickets and session cache mark).
    pub(crate) fn resuming(
        server: &SslContext,
        client: &SslContext,
        session: Option<&boring::ssl::SslSession>,
        prepare: impl FnOnce(&mut Ssl),
    ) -> Self {
        let mut c = Ssl::new(client).unwrap();
        if let Some(session) = session {
            crate::ffi::set_client_session(&mut c, session).unwrap();
        }
        let mut s = Ssl::new(server).unwrap();
        prepare(&mut s);
        Self::between(c, s)
    }

    /// A server connection of `ctx` reading `bytes` from a client that then closes.
    pub(crate) fn server_only(ctx: &SslContext, bytes: &[u8]) -> Side {
        Self::server_only_with(ctx, bytes, |_| {})
    }

    /// [`Self::server_only`], with the connection `prepare`d first.
    pub(crate) fn server_only_with(ctx: &SslContext, bytes: &[u8], prepare: impl FnOnce(&mut SslRef)) -> Side {
        let mut ssl = Ssl::new(ctx).unwrap();
        prepare(&mut ssl);
        ended(step(Step::Waiting(ssl.setup_accept(End::fed(bytes)))))
    }

    /// A server connection of `ctx` whose transport fails every read with `kind`.
    pub(crate) fn server_read_error(ctx: &SslContext, kind: io::ErrorKind) -> Side {
        let mut end = End::fed(b"");
        end.read_error = Some(kind);
        ended(step(Step::Waiting(Ssl::new(ctx).unwrap().setup_accept(end))))
    }

    /// The server's error, when its handshake failed.
    pub(crate) fn server_error(&self) -> Option<&boring::ssl::Error> {
        self.server.as_ref().err().map(MidHandshakeSslStream::error)
    }

    /// The client's error, when its handshake failed.
    pub(crate) fn client_error(&self) -> Option<&boring::ssl::Error> {
        self.client.as_ref().err().map(MidHandshakeSslStream::error)
    }
}

/// The connection of a side whose handshake succeeded (panics with its error otherwise).
pub(crate) fn established(side: &Side) -> &SslRef {
    match side {
        Ok(stream) => stream.ssl(),
        Err(mid) => panic!("the handshake failed: {}", mid.error()),
    }
}
