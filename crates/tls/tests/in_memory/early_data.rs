//! 0-RTT: a resumed TLS 1.3 client's early data is accepted once; the same ticket's early data
//! again (a replay) is refused, as it is after a reload that turns 0-RTT off or changes the ALPN
//! the server picks. Every refusal still resumes, and the client's data arrives after the
//! handshake.

use crate::harness::{connect, Client, ClientOpts, Conn, Gateway};
use boring::ssl::SslSession;
use std::sync::atomic::Ordering;
use tlsgate_tls::{client_ffi, Resumption};

const EARLY_ON: &str = "[tls.tickets]\nearly_data = true";

async fn ticket(gw: &Gateway, client: &Client) -> SslSession {
    connect(gw, client, Conn::default()).await.ok();
    client.last_session().expect("a ticket")
}

fn early(session: &SslSession) -> Conn {
    Conn {
        session: Some(session.clone()),
        early_data: true,
        ..Conn::default()
    }
}

#[tokio::test]
async fn early_data_is_accepted_once_per_ticket() {
    let gw = Gateway::new(EARLY_ON);
    let client = Client::new(ClientOpts::tls13());
    let session = ticket(&gw, &client).await;
    assert!(client_ffi::session_early_data_capable(&session));

    let (c, s) = connect(&gw, &client, early(&session)).await.ok();
    assert!(c.early_sent, "the client sent its data as 0-RTT");
    assert!(c.early_accepted && !c.early_rejected);
    assert!(s.info.early_data, "the gateway reports 0-RTT");
    assert_eq!(s.info.resumption, Resumption::Tls13Psk);
    assert_eq!(s.early_reason, "accepted");
    let stats = &gw.sessions.early_data.stats;
    assert_eq!(stats.claimed.load(Ordering::Relaxed), 1);
    let fresh = client.last_session().expect("new ticket");

    // The same ticket's early data again: what an attacker replaying it would send.
    let (c, s) = connect(&gw, &client, early(&session)).await.ok();
    assert!(c.early_sent && c.early_rejected && !c.early_accepted, "{c:?}");
    assert!(c.resumed, "refusing 0-RTT does not refuse the resumption");
    assert!(!s.info.early_data);
    assert_eq!(s.early_reason, "disabled", "switched off for this connection");
    assert_eq!(stats.refused_replay.load(Ordering::Relaxed), 1);

    // A ticket not used for 0-RTT yet carries early data again.
    let (c, s) = connect(&gw, &client, early(&fresh)).await.ok();
    assert!(c.early_accepted, "{c:?}");
    assert!(s.info.early_data);
    assert_eq!(stats.claimed.load(Ordering::Relaxed), 2);
}

/// Pins current behaviour: BoringSSL copies a connection's 0-RTT switch into the tickets it
/// issues on it, so the tickets of a connection whose 0-RTT the gateway refused (a replay) do
/// not allow 0-RTT; the client's next resumption runs without it, and its tickets allow it again.
#[tokio::test]
async fn tickets_issued_after_a_refused_0rtt_do_not_allow_it() {
    let gw = Gateway::new(EARLY_ON);
    let client = Client::new(ClientOpts::tls13());
    let session = ticket(&gw, &client).await;
    connect(&gw, &client, early(&session)).await.ok();
    let (c, _) = connect(&gw, &client, early(&session)).await.ok();
    assert!(c.early_rejected);
    let after_refusal = client.last_session().expect("new ticket");
    assert!(!client_ffi::session_early_data_capable(&after_refusal));
    let (c, _) = connect(&gw, &client, early(&after_refusal)).await.ok();
    assert!(c.resumed && !c.early_sent);
    let next = client.last_session().expect("new ticket");
    assert!(client_ffi::session_early_data_capable(&next));
    let (c, _) = connect(&gw, &client, early(&next)).await.ok();
    assert!(c.early_accepted);
}

#[tokio::test]
async fn early_data_is_refused_after_a_reload_that_turns_it_off() {
    let mut gw = Gateway::new(EARLY_ON);
    let client = Client::new(ClientOpts::tls13());
    let session = ticket(&gw, &client).await;
    gw.reload("");
    let (c, s) = connect(&gw, &client, early(&session)).await.ok();
    assert!(c.early_sent && c.early_rejected && !c.early_accepted, "{c:?}");
    assert!(c.resumed);
    assert!(!s.info.early_data);
    assert_eq!(s.early_reason, "disabled");
}

#[tokio::test]
async fn early_data_is_refused_when_the_alpn_changes() {
    let mut gw = Gateway::new(EARLY_ON);
    let client = Client::new(ClientOpts::tls13());
    let (c, _) = connect(&gw, &client, Conn::default()).await.ok();
    assert_eq!(c.alpn.as_deref(), Some(&b"h2"[..]), "the ticket remembers h2");
    let session = client.last_session().expect("a ticket");
    gw.reload(&format!("alpn = [\"http/1.1\", \"h2\"]\n{EARLY_ON}"));
    let (c, s) = connect(&gw, &client, early(&session)).await.ok();
    assert!(c.early_sent && c.early_rejected, "{c:?}");
    assert!(c.resumed);
    assert_eq!(c.alpn.as_deref(), Some(&b"http/1.1"[..]));
    assert_eq!(s.early_reason, "alpn_mismatch");
}

#[tokio::test]
async fn tickets_from_a_gateway_without_0rtt_do_not_allow_it() {
    let gw = Gateway::new("");
    let client = Client::new(ClientOpts::tls13());
    let session = ticket(&gw, &client).await;
    assert!(!client_ffi::session_early_data_capable(&session));
    let (c, s) = connect(&gw, &client, early(&session)).await.ok();
    assert!(!c.early_sent, "nothing sent early on such a ticket");
    assert!(c.resumed);
    assert!(!s.info.early_data);
}
