//! Ticket keys: after a rotation, tickets under the retired key still resume (and are renewed
//! under the new key) until the key's lifetime has passed; then they are refused and the client
//! gets a full handshake. Cluster-derived keys let one node resume another's tickets.

use crate::harness::{connect, Client, ClientOpts, Conn, Gateway};
use boring::ssl::SslSession;
use std::sync::atomic::Ordering;
use std::sync::Arc;
use std::time::Duration;
use tlsgate_tls::secret::ClusterSecret;
use tlsgate_tls::Resumption;

fn offer(session: &SslSession) -> Conn {
    Conn {
        session: Some(session.clone()),
        ..Conn::default()
    }
}

/// A full handshake; returns the session it left the client.
async fn first_session(gw: &Gateway, client: &Client) -> SslSession {
    let (c, _) = connect(gw, client, Conn::default()).await.ok();
    assert!(!c.resumed);
    client.last_session().expect("a ticket")
}

#[tokio::test]
async fn rotated_keys_decrypt_until_their_lifetime_then_tickets_are_refused() {
    let gw = Gateway::new("[tls.tickets]\nlifetime = \"1s\"");
    let ring = &gw.sessions.tickets;
    let (c12, c13) = (Client::new(ClientOpts::tls12()), Client::new(ClientOpts::tls13()));
    let old12 = first_session(&gw, &c12).await;
    let old13 = first_session(&gw, &c13).await;
    let first_key = ring.key_names()[0];

    ring.rotate();
    assert_eq!(ring.key_names().len(), 2, "the retired key stays in the ring");
    assert_ne!(ring.key_names()[0], first_key, "a new key encrypts");

    let (c, s) = connect(&gw, &c12, offer(&old12)).await.ok();
    assert!(c.resumed, "TLS 1.2 ticket under the retired key still resumes");
    assert_eq!(s.info.resumption, Resumption::Ticket);
    let renewed12 = c12.last_session().expect("renewed ticket");
    let (c, s) = connect(&gw, &c13, offer(&old13)).await.ok();
    assert!(c.resumed, "TLS 1.3 ticket under the retired key still resumes");
    assert_eq!(s.info.resumption, Resumption::Tls13Psk);
    let renewed13 = c13.last_session().expect("new ticket");
    assert_eq!(ring.stats.decrypted_renew.load(Ordering::Relaxed), 2, "both renewed");

    // The key was retired with a 1 s lifetime: once that has passed, the purge erases it.
    tokio::time::sleep(Duration::from_millis(1100)).await;
    ring.purge();
    assert_eq!(ring.key_names().len(), 1, "only the current key is left");
    assert!(!ring.key_names().contains(&first_key));

    let unknown = ring.stats.unknown_key.load(Ordering::Relaxed);
    let (c, s) = connect(&gw, &c12, offer(&old12)).await.ok();
    assert!(!c.resumed, "TLS 1.2 ticket under the erased key is refused");
    assert_eq!(s.info.resumption, Resumption::Full);
    let (c, s) = connect(&gw, &c13, offer(&old13)).await.ok();
    assert!(!c.resumed, "TLS 1.3 ticket under the erased key is refused");
    assert_eq!(s.info.resumption, Resumption::Full);
    assert_eq!(ring.stats.unknown_key.load(Ordering::Relaxed), unknown + 2);

    // The tickets renewed under the current key still resume.
    let (c, _) = connect(&gw, &c12, offer(&renewed12)).await.ok();
    assert!(c.resumed, "renewed TLS 1.2 ticket resumes");
    let (c, _) = connect(&gw, &c13, offer(&renewed13)).await.ok();
    assert!(c.resumed, "renewed TLS 1.3 ticket resumes");
}

#[tokio::test]
async fn a_purge_keeps_keys_younger_than_the_lifetime() {
    let gw = Gateway::new("");
    let client = Client::new(ClientOpts::tls13());
    let old = first_session(&gw, &client).await;
    gw.sessions.tickets.rotate();
    gw.sessions.tickets.rotate();
    gw.sessions.tickets.purge();
    assert_eq!(gw.sessions.tickets.key_names().len(), 3);
    let (c, _) = connect(&gw, &client, offer(&old)).await.ok();
    assert!(c.resumed, "two rotations within the 2 h lifetime: still accepted");
}

fn secret(byte: u8) -> Arc<ClusterSecret> {
    Arc::new(ClusterSecret::from_material(&[byte; 32], "in-memory test").expect("secret"))
}

#[tokio::test]
async fn cluster_nodes_resume_each_others_tickets() {
    let hour = Duration::from_secs(3600);
    let (a, b, other) = (Gateway::new(""), Gateway::new(""), Gateway::new(""));
    a.sessions.tickets.use_cluster_secrets(vec![secret(1)], hour);
    b.sessions.tickets.use_cluster_secrets(vec![secret(1)], hour);
    other.sessions.tickets.use_cluster_secrets(vec![secret(2)], hour);
    for opts in [ClientOpts::tls12(), ClientOpts::tls13()] {
        let client = Client::new(opts);
        let ticket = first_session(&a, &client).await;
        let (c, _) = connect(&b, &client, offer(&ticket)).await.ok();
        assert!(c.resumed, "node b decrypts node a's ticket");
        let (c, _) = connect(&other, &client, offer(&ticket)).await.ok();
        assert!(!c.resumed, "a node with another secret cannot");
    }
    // During a root-secret rotation the new secret encrypts and the old one still decrypts.
    let rotating = Gateway::new("");
    rotating
        .sessions
        .tickets
        .use_cluster_secrets(vec![secret(3), secret(1)], hour);
    let client = Client::new(ClientOpts::tls13());
    let ticket = first_session(&a, &client).await;
    let (c, _) = connect(&rotating, &client, offer(&ticket)).await.ok();
    assert!(c.resumed, "the previous secret's tickets still resume");
    let fresh = first_session(&rotating, &client).await;
    let (c, _) = connect(&a, &client, offer(&fresh)).await.ok();
    assert!(!c.resumed, "a node that lacks the new secret cannot read its tickets");
}
