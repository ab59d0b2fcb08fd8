//! Certificate files replaced on disk are served without a reload once the new chain verifies
//! against its key (`tls.certificate_poll`); a key that does not match leaves the running
//! certificate serving, with the refusal in the log and the metrics.

mod common;

use std::path::Path;
use std::time::{Duration, Instant};
use tlsgate_testkit::{free_port, require, GatewayProcess, TestPki};
use tlsgate_tls::pki::KeyKind;

/// The leaf certificate the gateway serves (PEM).
fn served_leaf(https: u16) -> String {
    common::served_leaf(https, "localhost")
}

/// The first certificate of a PEM chain file.
fn leaf_of(path: &Path) -> String {
    let pem = std::fs::read_to_string(path).unwrap();
    let end = pem.find("-----END CERTIFICATE-----").unwrap() + "-----END CERTIFICATE-----".len();
    format!("{}\n", &pem[..end])
}

fn wait_served(https: u16, leaf: &str, gw: &GatewayProcess) {
    let deadline = Instant::now() + Duration::from_secs(10);
    while served_leaf(https) != leaf {
        assert!(
            Instant::now() < deadline,
            "the new certificate is not served\n{}",
            gw.log()
        );
        std::thread::sleep(Duration::from_millis(100));
    }
}

#[test]
fn replaced_certificate_files_are_served_without_a_reload_and_a_mismatched_key_is_refused() {
    require("openssl");
    let pki = TestPki::new();
    let (chain, key) = pki.leaf("site", &["localhost"], KeyKind::EcdsaP256);
    let (https, admin) = (free_port(), free_port());
    let text = common::config_with_certs(
        &common::cert_block(&chain, &key),
        https,
        admin,
        "[tls]\ncertificate_poll = \"200ms\"\n",
        "",
    );
    let gw = GatewayProcess::start(common::binary(), &text, admin, &[https]);
    assert_eq!(served_leaf(https), leaf_of(&chain));

    // A renewed certificate written over the files (key first, as most tools do).
    let (next_chain, next_key) = pki.leaf("next", &["localhost"], KeyKind::EcdsaP256);
    std::fs::copy(&next_key, &key).unwrap();
    std::fs::copy(&next_chain, &chain).unwrap();
    wait_served(https, &leaf_of(&next_chain), &gw);
    assert!(gw.metric("tlsgate_certificate_reloads_total", &["result=\"ok\""]) >= 1.0);
    assert_eq!(
        gw.metric("tlsgate_config_reloads_total", &[]),
        0.0,
        "no reload was asked for"
    );

    // A key that is not the certificate's: refused, the running certificate keeps serving.
    // (A poll between the two copies above may have refused the half-written pair: count from here.)
    let errors = || gw.metric("tlsgate_certificate_reloads_total", &["result=\"error\""]);
    let before = errors();
    let (_, other_key) = pki.leaf("other", &["localhost"], KeyKind::EcdsaP256);
    // Put in place whole (a copy beside it, then a rename, as deployment tools do): a poll
    // during a plain copy could read a half-written key and refuse it for that reason instead.
    let staged = key.with_extension("key.new");
    std::fs::copy(&other_key, &staged).unwrap();
    std::fs::rename(&staged, &key).unwrap();
    let deadline = Instant::now() + Duration::from_secs(10);
    while errors() < before + 1.0 {
        assert!(Instant::now() < deadline, "the mismatch was not noticed\n{}", gw.log());
        std::thread::sleep(Duration::from_millis(100));
    }
    assert!(gw.log().contains("does not match"), "{}", gw.log());
    std::thread::sleep(Duration::from_millis(600));
    assert_eq!(errors(), before + 1.0, "the same refused files are not tried again");
    assert_eq!(
        served_leaf(https),
        leaf_of(&next_chain),
        "still serving the last good certificate"
    );

    // The matching pair again: served.
    let (third_chain, third_key) = pki.leaf("third", &["localhost"], KeyKind::EcdsaP256);
    std::fs::copy(&third_key, &key).unwrap();
    std::fs::copy(&third_chain, &chain).unwrap();
    wait_served(https, &leaf_of(&third_chain), &gw);
}
