//! Altered handshake messages: a tap between client and server changes one record, and the
//! handshake must fail on the side that can tell, with the alert RFC 8446/5246 prescribe
//! reaching the other side (a received alert is reason `SSL_AD_REASON_OFFSET + alert`).

use crate::harness::{connect, material, Client, ClientOpts, Conn, Edit, Gateway, Outcome, Record};
use boring_sys::{
    SSL_AD_BAD_RECORD_MAC, SSL_AD_DECODE_ERROR, SSL_AD_DECRYPT_ERROR, SSL_R_BAD_SIGNATURE,
    SSL_R_CERTIFICATE_VERIFY_FAILED, SSL_R_CLIENTHELLO_PARSE_FAILED, SSL_R_DECRYPTION_FAILED_OR_BAD_RECORD_MAC,
};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;

const HANDSHAKE: u8 = 22;
const APPLICATION_DATA: u8 = 23;

/// An edit applied to the first record `pick` chooses, and a flag saying it happened.
fn first(pick: fn(&Record) -> bool, change: fn(&mut Vec<u8>)) -> (Edit, Arc<AtomicBool>) {
    let done = Arc::new(AtomicBool::new(false));
    let flag = done.clone();
    let edit: Edit = Box::new(move |record: &mut Record| {
        if !flag.load(Ordering::Relaxed) && pick(record) {
            change(&mut record.bytes);
            flag.store(true, Ordering::Relaxed);
        }
    });
    (edit, done)
}

async fn tampered(gw: &Gateway, opts: ClientOpts, to_server: Option<Edit>, to_client: Option<Edit>) -> Outcome {
    let conn = Conn {
        to_server,
        to_client,
        ..Conn::default()
    };
    connect(gw, &Client::new(opts), conn).await
}

fn is_client_hello(r: &Record) -> bool {
    r.index == 0 && r.content_type() == HANDSHAKE && r.bytes[5] == 1
}

/// Offset of a ClientHello record's extensions length (record header 5, handshake header 4).
fn extensions_length_at(record: &[u8]) -> usize {
    let session_id = 43;
    let suites = session_id + 1 + usize::from(record[session_id]);
    let compression = suites + 2 + usize::from(u16::from_be_bytes([record[suites], record[suites + 1]]));
    compression + 1 + usize::from(record[compression])
}

#[tokio::test]
async fn tls13_altered_client_finished_gets_bad_record_mac() {
    let gw = Gateway::new("");
    // The client's first encrypted record is its Finished; flip a bit of its AEAD tag.
    let (edit, done) = first(
        |r| r.content_type() == APPLICATION_DATA,
        |b| *b.last_mut().expect("record") ^= 1,
    );
    let out = tampered(&gw, ClientOpts::tls13(), Some(edit), None).await;
    assert!(done.load(Ordering::Relaxed), "the Finished record was altered");
    let server = out.server.expect_err("server refuses the Finished");
    assert!(
        server.has_reason(SSL_R_DECRYPTION_FAILED_OR_BAD_RECORD_MAC),
        "{server:?}"
    );
    let client = out.client.expect_err("client gets an alert");
    assert!(client.received_alert(SSL_AD_BAD_RECORD_MAC), "{client:?}");
}

#[tokio::test]
async fn tls13_altered_client_hello_breaks_the_key_schedule() {
    let gw = Gateway::new("");
    // One bit of the client random: the server derives its handshake keys from a transcript
    // the client never sent, so the client cannot decrypt the server's flight. Its
    // bad_record_mac alert goes out under its own handshake keys, which the server does not
    // have either: both sides end on a record they cannot authenticate.
    let (edit, done) = first(is_client_hello, |b| b[11 + 10] ^= 0x20);
    let out = tampered(&gw, ClientOpts::tls13(), Some(edit), None).await;
    assert!(done.load(Ordering::Relaxed));
    let client = out.client.expect_err("client cannot decrypt");
    assert!(
        client.has_reason(SSL_R_DECRYPTION_FAILED_OR_BAD_RECORD_MAC),
        "{client:?}"
    );
    let server = out.server.expect_err("server cannot read the client's encrypted alert");
    assert!(
        server.has_reason(SSL_R_DECRYPTION_FAILED_OR_BAD_RECORD_MAC),
        "{server:?}"
    );
    assert!(!server.received_alert(SSL_AD_BAD_RECORD_MAC), "{server:?}");
}

#[tokio::test]
async fn tls12_altered_client_random_fails_the_server_key_exchange_signature() {
    let gw = Gateway::new("");
    // The ServerKeyExchange signature covers the client random the server received.
    let (edit, done) = first(is_client_hello, |b| b[11 + 10] ^= 0x20);
    let out = tampered(&gw, ClientOpts::tls12(), Some(edit), None).await;
    assert!(done.load(Ordering::Relaxed));
    let client = out.client.expect_err("client refuses the signature");
    assert!(client.has_reason(SSL_R_BAD_SIGNATURE), "{client:?}");
    let server = out.server.expect_err("server gets an alert");
    assert!(server.received_alert(SSL_AD_DECRYPT_ERROR), "{server:?}");
}

#[tokio::test]
async fn malformed_client_hello_gets_decode_error() {
    let gw = Gateway::new("");
    for opts in [ClientOpts::tls12(), ClientOpts::tls13()] {
        // The extensions block claims one byte less than it holds.
        let (edit, done) = first(is_client_hello, |b| {
            let at = extensions_length_at(b);
            let len = u16::from_be_bytes([b[at], b[at + 1]]) - 1;
            b[at..at + 2].copy_from_slice(&len.to_be_bytes());
        });
        let out = tampered(&gw, opts, Some(edit), None).await;
        assert!(done.load(Ordering::Relaxed));
        let server = out.server.expect_err("server refuses the ClientHello");
        assert!(server.has_reason(SSL_R_CLIENTHELLO_PARSE_FAILED), "{server:?}");
        let client = out.client.expect_err("client gets an alert");
        assert!(client.received_alert(SSL_AD_DECODE_ERROR), "{client:?}");
    }
}

#[tokio::test]
async fn tls12_altered_server_certificate_gets_decrypt_error() {
    let gw = Gateway::new("");
    // TLS 1.2 sends the certificate in the clear: flip the last byte of the leaf's signature.
    let (edit, done) = first(
        |r| r.content_type() == HANDSHAKE && find(&r.bytes, &leaf_der()).is_some(),
        |b| {
            let leaf = leaf_der();
            let end = find(b, &leaf).expect("leaf in record") + leaf.len();
            b[end - 1] ^= 1;
        },
    );
    let out = tampered(&gw, ClientOpts::tls12(), None, Some(edit)).await;
    assert!(done.load(Ordering::Relaxed), "the certificate was altered");
    let client = out.client.expect_err("client refuses the certificate");
    assert!(client.has_reason(SSL_R_CERTIFICATE_VERIFY_FAILED), "{client:?}");
    let server = out.server.expect_err("server gets an alert");
    assert!(server.received_alert(SSL_AD_DECRYPT_ERROR), "{server:?}");
}

fn leaf_der() -> Vec<u8> {
    boring::x509::X509::from_pem(material().ecdsa_cert.as_bytes())
        .and_then(|c| c.to_der())
        .expect("leaf DER")
}

fn find(haystack: &[u8], needle: &[u8]) -> Option<usize> {
    haystack.windows(needle.len()).position(|w| w == needle)
}
