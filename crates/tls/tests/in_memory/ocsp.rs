//! OCSP stapling: a configured, good response is stapled for clients that ask (TLS 1.2 and
//! 1.3), not for clients that do not ask, not for a certificate without one, not when stale,
//! not after the responder says the certificate is revoked, and not on a resumed handshake.

use crate::harness::{connect, material, Client, ClientOpts, Conn, Gateway, Site};
use std::time::SystemTime;

fn stapled_site(der: &'static [u8]) -> Site {
    Site {
        ecdsa_staple: Some(der),
        ..Site::default()
    }
}

fn asking() -> Conn {
    Conn {
        status_request: true,
        ..Conn::default()
    }
}

#[tokio::test]
async fn a_good_staple_goes_to_clients_that_ask() {
    let good = &material().staple_good;
    let gw = Gateway::with_site("", stapled_site(good));
    assert_eq!(gw.service.staple_slots().len(), 1, "the ECDSA certificate has a slot");
    for opts in [ClientOpts::tls12(), ClientOpts::tls13()] {
        let client = Client::new(opts);
        let (c, s) = connect(&gw, &client, asking()).await.ok();
        assert_eq!(c.ocsp.as_ref(), Some(good), "{:?}: stapled", c.version);
        assert!(s.info.stapled);
        let (c, s) = connect(&gw, &client, Conn::default()).await.ok();
        assert_eq!(c.ocsp, None, "{:?}: not asked, not stapled", c.version);
        assert!(!s.info.stapled);
    }
    assert_eq!(
        gw.service.staple_slots()[0].take_stapled(),
        2,
        "two stapled handshakes counted"
    );
}

#[tokio::test]
async fn no_staple_without_one_configured() {
    let gw = Gateway::new("");
    assert!(gw.service.staple_slots().is_empty());
    let (c, s) = connect(&gw, &Client::new(ClientOpts::tls13()), asking()).await.ok();
    assert_eq!(c.ocsp, None);
    assert!(!s.info.stapled);
    // The RSA certificate of a site whose ECDSA one is stapled.
    let gw = Gateway::with_site("", stapled_site(&material().staple_good));
    let rsa_client = Client::new(ClientOpts {
        sigalgs: Some("RSA-PSS+SHA256"),
        ..ClientOpts::tls13()
    });
    let (c, s) = connect(&gw, &rsa_client, asking()).await.ok();
    assert_eq!(c.peer_key, Some(boring::pkey::Id::RSA));
    assert_eq!(c.ocsp, None, "the RSA certificate has no staple");
    assert!(!s.info.stapled);
}

#[tokio::test]
async fn a_stale_staple_is_not_sent() {
    let gw = Gateway::with_site("", stapled_site(&material().staple_stale));
    let slots = gw.service.staple_slots();
    assert_eq!(slots.len(), 1);
    assert!(slots[0].current().is_none(), "the stale file was refused at load");
    let (c, s) = connect(&gw, &Client::new(ClientOpts::tls13()), asking()).await.ok();
    assert_eq!(c.ocsp, None);
    assert!(!s.info.stapled);
}

#[tokio::test]
async fn a_revocation_removes_the_staple_at_once() {
    let gw = Gateway::with_site("", stapled_site(&material().staple_good));
    let client = Client::new(ClientOpts::tls13());
    let (c, _) = connect(&gw, &client, asking()).await.ok();
    assert!(c.ocsp.is_some());
    let slot = &gw.service.staple_slots()[0];
    assert!(slot.accept(&material().staple_revoked, SystemTime::now()).is_err());
    let (c, s) = connect(&gw, &client, asking()).await.ok();
    assert_eq!(c.ocsp, None, "no staple once revoked");
    assert!(!s.info.stapled);
}

#[tokio::test]
async fn a_resumed_handshake_sends_no_staple() {
    let gw = Gateway::with_site("", stapled_site(&material().staple_good));
    let client = Client::new(ClientOpts::tls13());
    connect(&gw, &client, asking()).await.ok();
    let conn = Conn {
        session: client.last_session(),
        ..asking()
    };
    let (c, s) = connect(&gw, &client, conn).await.ok();
    assert!(c.resumed);
    assert!(!s.info.stapled, "no certificate, so no staple");
}
