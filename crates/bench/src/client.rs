//! The TLS client: one BoringSSL context for the whole run, and a per-thread "last session" slot
//! for resumption.
//!
//! Resumption follows wrk's switches: with both on, the last session this thread received is
//! offered again (the server picks ticket or session ID); `--no-ticket` sends no ticket extension
//! and never resumes TLS 1.3 (whose resumption is ticket-only); `--no-session-id` offers only
//! sessions that carry a ticket. Whether a handshake resumed is read from the client's TLS stack
//! (`SSL_session_reused`), never assumed.

use crate::args::Plan;
use crate::tls_opts::TlsOpts;
use anyhow::Context;
use boring::ssl::{Ssl, SslConnector, SslRef, SslSession, SslSessionCacheMode, SslSessionRef, SslVersion};
use std::cell::RefCell;

thread_local! {
    /// The newest resumable session this thread received (each bench thread runs one event loop,
    /// and BoringSSL calls the new-session callback on the thread driving the connection).
    static LAST_SESSION: RefCell<Option<SslSession>> = const { RefCell::new(None) };
}

/// Builds connections for a plan.
pub struct Client {
    connector: SslConnector,
    opts: TlsOpts,
    sni: Option<String>,
    host: String,
    resumption: bool,
}

impl Client {
    /// Builds the TLS context from the plan's options.
    pub fn new(plan: &Plan) -> anyhow::Result<Self> {
        let mut b = plan.opts.connector(&plan.alpn_wire)?;
        if plan.resumption() {
            b.set_session_cache_mode(SslSessionCacheMode::CLIENT);
            let (tickets, session_id) = (plan.tickets, plan.session_id);
            b.set_new_session_callback(move |_ssl: &mut SslRef, session: SslSession| {
                if acceptable(&session, tickets, session_id) {
                    LAST_SESSION.with(|slot| *slot.borrow_mut() = Some(session));
                }
            });
        }
        Ok(Self {
            connector: b.build(),
            opts: plan.opts.clone(),
            sni: plan.sni.clone(),
            host: plan.host.clone(),
            resumption: plan.resumption(),
        })
    }

    /// A connection object ready for the handshake; `true` when a session is offered in it.
    pub fn new_ssl(&self) -> anyhow::Result<(Ssl, bool)> {
        let mut ssl = self.opts.ssl(&self.connector, self.sni.as_deref(), &self.host)?;
        let mut offered = false;
        if self.resumption {
            LAST_SESSION.with(|slot| -> anyhow::Result<()> {
                if let Some(session) = slot.borrow().as_ref() {
                    offer_session(&mut ssl, session)?;
                    offered = true;
                }
                Ok(())
            })?;
        }
        Ok((ssl, offered))
    }

    /// Whether this thread holds a session to offer.
    pub fn has_session(&self) -> bool {
        LAST_SESSION.with(|slot| slot.borrow().is_some())
    }
}

/// Forgets this thread's session (a new run on a reused thread starts cold).
pub fn forget_session() {
    LAST_SESSION.with(|slot| *slot.borrow_mut() = None);
}

fn acceptable(session: &SslSessionRef, tickets: bool, session_id: bool) -> bool {
    if session.protocol_version() == SslVersion::TLS1_3 {
        return tickets;
    }
    if session_id {
        return true;
    }
    tickets && session.to_der().is_ok_and(|der| der_has_ticket(&der))
}

fn offer_session(ssl: &mut SslRef, session: &SslSessionRef) -> anyhow::Result<()> {
    // Every session in LAST_SESSION came from this client's only SSL_CTX (`Client::connector`).
    tlsgate_tls::set_client_session(ssl, session).context("SSL_set_session")
}

/// Whether a DER-encoded `SSL_SESSION` (BoringSSL's ASN.1 form) carries a session ticket: the
/// `ticket [10] OCTET STRING` field of the outer SEQUENCE is present and not empty.
pub fn der_has_ticket(der: &[u8]) -> bool {
    const TICKET_TAG: u32 = 10;
    let Some((
        Tag {
            class: 0,
            constructed: true,
            number: 16,
        },
        body,
        _,
    )) = tlv(der)
    else {
        return false;
    };
    let mut rest = body;
    while let Some((tag, value, next)) = tlv(rest) {
        if tag.class == 2 && tag.number == TICKET_TAG {
            return tlv(value).is_some_and(|(inner, v, _)| inner.number == 4 && !v.is_empty());
        }
        rest = next;
    }
    false
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
struct Tag {
    class: u8,
    constructed: bool,
    number: u32,
}

/// One DER element: (tag, contents, rest).
fn tlv(input: &[u8]) -> Option<(Tag, &[u8], &[u8])> {
    let (&first, mut rest) = input.split_first()?;
    let mut number = u32::from(first & 0x1f);
    if number == 0x1f {
        number = 0;
        loop {
            let (&b, r) = rest.split_first()?;
            rest = r;
            number = number.checked_mul(128)? | u32::from(b & 0x7f);
            if b & 0x80 == 0 {
                break;
            }
        }
    }
    let (&len0, r) = rest.split_first()?;
    rest = r;
    let len = if len0 < 0x80 {
        usize::from(len0)
    } else {
        let n = usize::from(len0 & 0x7f);
        if n == 0 || n > 4 || rest.len() < n {
            return None;
        }
        let len = rest[..n].iter().fold(0usize, |acc, &b| (acc << 8) | usize::from(b));
        rest = &rest[n..];
        len
    };
    if rest.len() < len {
        return None;
    }
    let tag = Tag {
        class: first >> 6,
        constructed: first & 0x20 != 0,
        number,
    };
    Some((tag, &rest[..len], &rest[len..]))
}

#[cfg(test)]
mod tests {
    use super::*;
    use boring::pkey::PKey;
    use boring::ssl::{SslAcceptor, SslMethod, SslOptions};
    use boring::x509::X509;
    use clap::Parser;
    use tlsgate_tls::pki::{CertSpec, Certified, KeyKind};

    #[derive(clap::Parser)]
    struct Cli {
        #[command(flatten)]
        args: crate::BenchArgs,
    }

    /// A TLS 1.2 server in a thread that completes `n` handshakes; tickets on or off.
    fn server(tickets: bool, n: usize) -> (u16, std::thread::JoinHandle<()>) {
        let leaf = Certified::issue(&CertSpec::leaf(&["localhost"], KeyKind::EcdsaP256, 30), None).unwrap();
        let mut b = SslAcceptor::mozilla_intermediate_v5(SslMethod::tls()).unwrap();
        b.set_certificate(&X509::from_pem(leaf.cert_pem.as_bytes()).unwrap())
            .unwrap();
        b.set_private_key(&PKey::private_key_from_pem(leaf.key_pem.as_bytes()).unwrap())
            .unwrap();
        b.set_session_id_context(b"bench-test").unwrap();
        if !tickets {
            b.set_options(SslOptions::NO_TICKET);
        }
        let acceptor = b.build();
        let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        let port = listener.local_addr().unwrap().port();
        let handle = std::thread::spawn(move || {
            for _ in 0..n {
                let (tcp, _) = listener.accept().unwrap();
                let _ = acceptor.accept(tcp);
            }
        });
        (port, handle)
    }

    /// Two handshakes with the bench's client; whether each offered a session and resumed.
    fn two_handshakes(server_tickets: bool, client_args: &[&str]) -> Vec<(bool, bool)> {
        let (port, handle) = server(server_tickets, 2);
        let url = format!("https://127.0.0.1:{port}/");
        let mut argv = vec!["bench", "--tls", "1.2"];
        argv.extend_from_slice(client_args);
        argv.push(&url);
        let plan = Cli::try_parse_from(argv).unwrap().args.plan().unwrap();
        let client = Client::new(&plan).unwrap();
        forget_session();
        let mut out = Vec::new();
        for _ in 0..2 {
            let (ssl, offered) = client.new_ssl().unwrap();
            let tcp = std::net::TcpStream::connect(("127.0.0.1", port)).unwrap();
            let stream = ssl.connect(tcp).unwrap();
            out.push((offered, stream.ssl().session_reused()));
        }
        handle.join().unwrap();
        out
    }

    #[test]
    fn resumption_switches_against_a_real_server() {
        // Tickets issued: resumed by default and with --no-session-id; never with both off.
        assert_eq!(two_handshakes(true, &[]), [(false, false), (true, true)]);
        assert_eq!(
            two_handshakes(true, &["--no-session-id"]),
            [(false, false), (true, true)]
        );
        assert_eq!(
            two_handshakes(true, &["--no-session-id", "--no-ticket"]),
            [(false, false), (false, false)]
        );
        // Session IDs only: resumed unless --no-session-id (the session carries no ticket).
        assert_eq!(two_handshakes(false, &[]), [(false, false), (true, true)]);
        assert_eq!(
            two_handshakes(false, &["--no-session-id"]),
            [(false, false), (false, false)]
        );
        assert_eq!(two_handshakes(true, &["--no-ticket"]), [(false, false), (true, true)]);
    }

    #[test]
    fn finds_the_ticket_field() {
        // SEQUENCE { INTEGER 1, [9] { INTEGER 300 }, [10] { OCTET STRING "tkt" } }
        let with = [
            0x30, 0x10, 0x02, 0x01, 0x01, 0xa9, 0x04, 0x02, 0x02, 0x01, 0x2c, 0xaa, 0x05, 0x04, 0x03, b't', b'k', b't',
        ];
        assert!(der_has_ticket(&with));
        // Same without the ticket, and with an empty one.
        let without = [0x30, 0x09, 0x02, 0x01, 0x01, 0xa9, 0x04, 0x02, 0x02, 0x01, 0x2c];
        assert!(!der_has_ticket(&without));
        let empty = [0x30, 0x07, 0x02, 0x01, 0x01, 0xaa, 0x02, 0x04, 0x00];
        assert!(!der_has_ticket(&empty));
        // A high tag number before the ticket ([40] { NULL }) and a long-form length.
        let mut long = vec![
            0x30, 0x81, 0x00, 0xbf, 0x28, 0x02, 0x05, 0x00, 0xaa, 0x81, 0x82, 0x04, 0x81, 0x7f,
        ];
        long.extend(std::iter::repeat_n(7u8, 0x7f));
        long[2] = (long.len() - 3) as u8;
        assert!(der_has_ticket(&long));
        // Truncated or not a SEQUENCE.
        assert!(!der_has_ticket(&with[..with.len() - 1]));
        assert!(!der_has_ticket(&[0x04, 0x00]));
        assert!(!der_has_ticket(&[]));
    }
}
