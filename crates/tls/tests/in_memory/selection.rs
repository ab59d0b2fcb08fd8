//! Certificate selection: the ECDSA certificate for clients that can verify it, the RSA one
//! for the others, judged from the ClientHello's signature algorithms (TLS 1.3) or cipher
//! suites and signature algorithms (TLS 1.2).

use crate::harness::{connect, Client, ClientOpts, Conn, Gateway, Site};
use boring::pkey::Id;
use boring::ssl::SslVersion;
use tlsgate_tls::KeyType;

/// Connects with `opts` and returns (client's peer key, server's reported type, version).
async fn served(gw: &Gateway, opts: ClientOpts) -> (Id, KeyType, SslVersion) {
    let (c, s) = connect(gw, &Client::new(opts), Conn::default()).await.ok();
    assert_eq!(s.site, Some(0), "the one site");
    (
        c.peer_key.expect("a certificate"),
        s.info.cert_type,
        c.version.expect("version"),
    )
}

#[tokio::test]
async fn tls13_picks_by_signature_algorithms() {
    let gw = Gateway::new("");
    let (peer, kind, v) = served(&gw, ClientOpts::tls13()).await;
    assert_eq!((peer, kind, v), (Id::EC, KeyType::EcdsaP256, SslVersion::TLS1_3));
    let rsa_only = ClientOpts {
        sigalgs: Some("RSA-PSS+SHA256:RSA-PSS+SHA384"),
        ..ClientOpts::tls13()
    };
    let (peer, kind, _) = served(&gw, rsa_only).await;
    assert_eq!((peer, kind), (Id::RSA, KeyType::Rsa));
}

#[tokio::test]
async fn tls12_picks_by_cipher_suites() {
    let gw = Gateway::new("");
    let ecdsa_suites = ClientOpts {
        ciphers: Some("ECDHE-ECDSA-AES128-GCM-SHA256"),
        ..ClientOpts::tls12()
    };
    let (peer, kind, v) = served(&gw, ecdsa_suites).await;
    assert_eq!((peer, kind, v), (Id::EC, KeyType::EcdsaP256, SslVersion::TLS1_2));
    let rsa_suites = ClientOpts {
        ciphers: Some("ECDHE-RSA-AES128-GCM-SHA256:ECDHE-RSA-CHACHA20-POLY1305"),
        ..ClientOpts::tls12()
    };
    let (peer, kind, _) = served(&gw, rsa_suites).await;
    assert_eq!((peer, kind), (Id::RSA, KeyType::Rsa));
}

#[tokio::test]
async fn tls12_picks_by_signature_algorithms() {
    let gw = Gateway::new("");
    let (peer, _, _) = served(&gw, ClientOpts::tls12()).await;
    assert_eq!(peer, Id::EC, "both suites offered, ECDSA preferred");
    let rsa_sigalgs = ClientOpts {
        sigalgs: Some("RSA+SHA256:RSA-PSS+SHA256"),
        ..ClientOpts::tls12()
    };
    let (peer, kind, _) = served(&gw, rsa_sigalgs).await;
    assert_eq!((peer, kind), (Id::RSA, KeyType::Rsa));
}

#[tokio::test]
async fn a_single_certificate_is_served_to_everyone_who_can_use_it() {
    let rsa_site = Site {
        ecdsa: false,
        ..Site::default()
    };
    let gw = Gateway::with_site("", rsa_site);
    let (peer, kind, _) = served(&gw, ClientOpts::tls13()).await;
    assert_eq!(
        (peer, kind),
        (Id::RSA, KeyType::Rsa),
        "ECDSA-capable clients verify RSA too"
    );
}

#[tokio::test]
async fn a_client_that_cannot_verify_the_only_certificate_gets_handshake_failure() {
    let ecdsa_site = Site {
        rsa: false,
        ..Site::default()
    };
    let gw = Gateway::with_site("", ecdsa_site);
    let rsa_only = ClientOpts {
        sigalgs: Some("RSA-PSS+SHA256"),
        ..ClientOpts::tls13()
    };
    let out = connect(&gw, &Client::new(rsa_only), Conn::default()).await;
    let client = out.client.expect_err("no certificate the client can verify");
    assert!(
        client.received_alert(boring_sys::SSL_AD_HANDSHAKE_FAILURE),
        "{client:?}"
    );
    let server = out.server.expect_err("server refuses");
    assert!(
        server.has_reason(boring_sys::SSL_R_NO_COMMON_SIGNATURE_ALGORITHMS),
        "{server:?}"
    );
}

/// An established connection keeps what the handshake established, not how it was configured:
/// BoringSSL frees the configuration copied for the handshake (certificate selection, ciphers,
/// verification settings) once it is done, TLS 1.3 and 1.2, full and resumed (issue 18).
#[tokio::test]
async fn the_handshake_configuration_is_freed_once_the_handshake_is_done() {
    let gw = Gateway::new("");
    for opts in [ClientOpts::tls13(), ClientOpts::tls12()] {
        let client = Client::new(opts);
        let (c, s) = connect(&gw, &client, Conn::default()).await.ok();
        assert!(!c.resumed);
        assert!(!s.config_kept, "full handshake, {:?}: configuration kept", c.version);
        let again = Conn {
            session: Some(client.last_session().expect("a session")),
            ..Conn::default()
        };
        let (c, s) = connect(&gw, &client, again).await.ok();
        assert!(c.resumed, "{:?}: resumed", c.version);
        assert!(!s.config_kept, "resumed handshake, {:?}: configuration kept", c.version);
    }
}
