//! Full and resumed handshakes: TLS 1.2 by session ID and by ticket, TLS 1.3 by PSK; resumption
//! across a configuration reload; no resumption where the configuration turns it off.

use crate::harness::{connect, Client, ClientOpts, Conn, Gateway};
use boring::ssl::SslVersion;
use std::sync::atomic::Ordering;
use tlsgate_tls::Resumption;

fn offer(client: &Client) -> Conn {
    Conn {
        session: Some(client.last_session().expect("the server issued a session")),
        ..Conn::default()
    }
}

#[tokio::test]
async fn tls12_resumes_by_session_id() {
    let gw = Gateway::new("");
    let client = Client::new(ClientOpts {
        no_ticket: true,
        ..ClientOpts::tls12()
    });
    let (c, s) = connect(&gw, &client, Conn::default()).await.ok();
    assert_eq!(c.version, Some(SslVersion::TLS1_2));
    assert!(!c.resumed);
    assert_eq!(s.info.resumption, Resumption::Full);
    assert_eq!(gw.sessions.cache.len(), 1, "the session went to the gateway's cache");

    let (c, s) = connect(&gw, &client, offer(&client)).await.ok();
    assert!(c.resumed, "client sees a resumption");
    assert_eq!(s.info.resumption, Resumption::SessionId);
    assert_eq!(gw.sessions.cache.stats.hits.load(Ordering::Relaxed), 1);
    assert_eq!(
        gw.sessions.tickets.stats.encrypted.load(Ordering::Relaxed),
        0,
        "no ticket issued"
    );
}

#[tokio::test]
async fn tls12_resumes_by_ticket() {
    let gw = Gateway::new("");
    let client = Client::new(ClientOpts::tls12());
    let (c, s) = connect(&gw, &client, Conn::default()).await.ok();
    assert!(!c.resumed);
    assert_eq!(s.info.resumption, Resumption::Full);
    assert_eq!(gw.sessions.tickets.stats.encrypted.load(Ordering::Relaxed), 1);

    let (c, s) = connect(&gw, &client, offer(&client)).await.ok();
    assert!(c.resumed);
    assert_eq!(s.info.resumption, Resumption::Ticket);
    assert_eq!(gw.sessions.tickets.stats.decrypted_current.load(Ordering::Relaxed), 1);
}

#[tokio::test]
async fn tls13_resumes_by_psk() {
    let gw = Gateway::new("");
    let client = Client::new(ClientOpts::tls13());
    let (c, s) = connect(&gw, &client, Conn::default()).await.ok();
    assert_eq!(c.version, Some(SslVersion::TLS1_3));
    assert_eq!(s.info.resumption, Resumption::Full);
    assert_eq!(client.session_count(), 2, "two NewSessionTickets per handshake");

    let (c, s) = connect(&gw, &client, offer(&client)).await.ok();
    assert!(c.resumed);
    assert_eq!(s.info.resumption, Resumption::Tls13Psk);
}

#[tokio::test]
async fn sessions_survive_a_reload() {
    let mut gw = Gateway::new("");
    let id_client = Client::new(ClientOpts {
        no_ticket: true,
        ..ClientOpts::tls12()
    });
    let psk_client = Client::new(ClientOpts::tls13());
    connect(&gw, &id_client, Conn::default()).await.ok();
    connect(&gw, &psk_client, Conn::default()).await.ok();
    gw.reload("alpn = [\"http/1.1\", \"h2\"]");

    let (c, s) = connect(&gw, &id_client, offer(&id_client)).await.ok();
    assert!(c.resumed);
    assert_eq!(s.info.resumption, Resumption::SessionId);
    let (c, s) = connect(&gw, &psk_client, offer(&psk_client)).await.ok();
    assert!(c.resumed);
    assert_eq!(s.info.resumption, Resumption::Tls13Psk);
    assert_eq!(
        c.alpn.as_deref(),
        Some(&b"http/1.1"[..]),
        "the new generation's ALPN order"
    );
}

#[tokio::test]
async fn a_disabled_session_cache_means_full_handshakes() {
    let gw = Gateway::new("[tls.session_cache]\nenabled = false");
    let client = Client::new(ClientOpts {
        no_ticket: true,
        ..ClientOpts::tls12()
    });
    connect(&gw, &client, Conn::default()).await.ok();
    let conn = Conn {
        session: client.last_session(),
        ..Conn::default()
    };
    let (c, s) = connect(&gw, &client, conn).await.ok();
    assert!(!c.resumed);
    assert_eq!(s.info.resumption, Resumption::Full);
    assert!(gw.sessions.cache.is_empty());
}

#[tokio::test]
async fn disabled_tickets_mean_no_tls13_resumption() {
    let gw = Gateway::new("[tls.tickets]\nenabled = false");
    let client = Client::new(ClientOpts::tls13());
    connect(&gw, &client, Conn::default()).await.ok();
    assert_eq!(client.session_count(), 0, "no NewSessionTicket sent");
    let client12 = Client::new(ClientOpts::tls12());
    connect(&gw, &client12, Conn::default()).await.ok();
    let (c, s) = connect(&gw, &client12, offer(&client12)).await.ok();
    assert!(c.resumed, "TLS 1.2 still resumes, by session ID");
    assert_eq!(s.info.resumption, Resumption::SessionId);
}
