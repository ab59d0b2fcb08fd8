//! Issue 2: several sites on one listener, each with its own certificates, picked by SNI (exact
//! names and `*.` wildcards); no SNI and unknown SNI get the default site (or a handshake failure
//! with `unknown_sni = "reject"`); ECDSA or RSA by what the client can verify.

mod common;

use common::{extra_site, served_subject, session_lines, Fixture};
use tlsgate_tls::pki::KeyKind;

const BOTH: &[KeyKind] = &[KeyKind::EcdsaP256, KeyKind::Rsa(2048)];

/// The default site `main` (localhost) plus `a` (a.test), `b` (b.test), both with ECDSA and RSA,
/// and `w` (*.w.test, ECDSA only).
fn sites(top: &str) -> Fixture {
    common::start_with(top, |pki| {
        [
            extra_site(pki, "a", &["a.test"], BOTH),
            extra_site(pki, "b", &["b.test"], BOTH),
            extra_site(pki, "w", &["*.w.test"], &[KeyKind::EcdsaP256]),
        ]
        .concat()
    })
}

/// Handshake with `-servername NAME` (or no SNI for None) plus `args`; returns the subject served,
/// asserting that the handshake completed and the chain verified.
fn subject_for(f: &Fixture, sni: Option<&str>, args: &[&str]) -> String {
    let mut all = match sni {
        Some(name) => vec!["-servername", name],
        None => vec!["-noservername"],
    };
    all.extend_from_slice(args);
    let out = f.s_client(&all, "");
    assert_eq!(session_lines(&out.stdout).len(), 1, "{sni:?}: {}", out.all());
    assert!(
        out.stdout.contains("Verify return code: 0 (ok)"),
        "{sni:?}: {}",
        out.all()
    );
    served_subject(&out.stdout)
}

fn cn(subject: &str) -> &str {
    subject
        .split(',')
        .find_map(|p| p.trim().strip_prefix("CN = "))
        .unwrap_or("")
}

#[test]
fn each_server_name_gets_its_own_sites_certificate() {
    let f = sites("");
    assert_eq!(cn(&subject_for(&f, Some("a.test"), &[])), "a.test");
    assert_eq!(cn(&subject_for(&f, Some("b.test"), &[])), "b.test");
    assert_eq!(cn(&subject_for(&f, Some("localhost"), &[])), "localhost");
    // Names are case-insensitive.
    assert_eq!(cn(&subject_for(&f, Some("B.Test"), &[])), "b.test");
    // Wildcard: one label below w.test.
    assert_eq!(cn(&subject_for(&f, Some("x.w.test"), &[])), "*.w.test");
    assert_eq!(cn(&subject_for(&f, Some("other.w.test"), &["-tls1_2"])), "*.w.test");
    // The same over TLS 1.2.
    assert_eq!(cn(&subject_for(&f, Some("a.test"), &["-tls1_2"])), "a.test");

    // Real clients verify the name and reach the site's routes.
    for (host, body) in [
        ("a.test", "site a"),
        ("b.test", "site b"),
        ("x.w.test", "site w"),
        ("localhost", "Hello, world!"),
    ] {
        let out = f.curl_host(host, &[], "/hello");
        assert_eq!(out.stdout, body, "{host}: {}", out.all());
    }
    for site in ["a", "b", "w", "main"] {
        assert_eq!(
            f.gw.metric(
                "tlsgate_requests_total",
                &[&format!("site=\"{site}\""), "status=\"200\""]
            ),
            1.0,
            "{site}: {}",
            f.gw.metrics()
        );
    }
}

#[test]
fn no_sni_and_unknown_sni_get_the_default_site() {
    let f = sites("");
    assert_eq!(cn(&subject_for(&f, None, &[])), "localhost");
    assert_eq!(cn(&subject_for(&f, None, &["-tls1_2"])), "localhost");
    assert_eq!(cn(&subject_for(&f, Some("nope.test"), &[])), "localhost");
    // A wildcard covers exactly one label: neither the parent nor two labels below match.
    assert_eq!(cn(&subject_for(&f, Some("w.test"), &[])), "localhost");
    assert_eq!(cn(&subject_for(&f, Some("y.x.w.test"), &[])), "localhost");
    // A name that only ends like a known one.
    assert_eq!(cn(&subject_for(&f, Some("xa.test"), &[])), "localhost");
    assert_eq!(
        f.gw.metric("tlsgate_handshakes_total", &["outcome=\"full\""]),
        6.0,
        "{}",
        f.gw.metrics()
    );
    assert_eq!(
        f.gw.metric("tlsgate_handshake_failures_total", &["reason=\"unknown_sni\""]),
        0.0
    );
}

#[test]
fn unknown_sni_reject_fails_the_handshake_and_known_names_still_work() {
    let f = sites("[tls]\nunknown_sni = \"reject\"\n");
    for name in ["nope.test", "w.test", "y.x.w.test"] {
        let out = f.s_client(&["-servername", name], "");
        assert!(session_lines(&out.stdout).is_empty(), "{name}: {}", out.all());
        assert!(
            !out.stdout.contains("subject="),
            "{name}: no certificate may be sent:\n{}",
            out.all()
        );
        assert!(out.all().contains("alert"), "{name}: {}", out.all());
    }
    let out = f.s_client(&["-tls1_2", "-servername", "nope.test"], "");
    assert!(session_lines(&out.stdout).is_empty(), "{}", out.all());
    assert_eq!(
        f.gw.metric("tlsgate_handshake_failures_total", &["reason=\"unknown_sni\""]),
        4.0,
        "{}",
        f.gw.metrics()
    );
    // Known names, wildcard names and clients without SNI are served as before.
    assert_eq!(cn(&subject_for(&f, Some("a.test"), &[])), "a.test");
    assert_eq!(cn(&subject_for(&f, Some("x.w.test"), &[])), "*.w.test");
    assert_eq!(cn(&subject_for(&f, None, &[])), "localhost");
    let out = f.curl_host("b.test", &[], "/");
    assert_eq!(out.stdout, "site b", "{}", out.all());
    // curl with an unknown name (resolved locally) fails its handshake.
    let out = f.curl_host("nope.test", &[], "/");
    assert!(out.status != Some(0) && out.stdout.is_empty(), "{}", out.all());
}

#[test]
fn unknown_sni_reject_sends_unrecognized_name() {
    let f = sites("[tls]\nunknown_sni = \"reject\"\n");
    for args in [&[][..], &["-tls1_2"][..]] {
        let mut all = vec!["-servername", "nope.test"];
        all.extend_from_slice(args);
        let out = f.s_client(&all, "");
        assert!(session_lines(&out.stdout).is_empty(), "{}", out.all());
        assert!(
            out.all().contains("alert unrecognized name") || out.all().contains("SSL alert number 112"),
            "TlsConfig::unknown_sni documents an unrecognized_name alert for `reject`:\n{}",
            out.all()
        );
    }
}

/// What key the server proved possession of, from s_client's report.
fn key_of(f: &Fixture, sni: &str, args: &[&str]) -> (String, String) {
    let mut all = vec!["-servername", sni];
    all.extend_from_slice(args);
    let out = f.s_client(&all, "");
    assert_eq!(session_lines(&out.stdout).len(), 1, "{args:?}: {}", out.all());
    let field = |prefix: &str| {
        out.stdout
            .lines()
            .find_map(|l| l.strip_prefix(prefix))
            .unwrap_or_else(|| panic!("{args:?}: no {prefix:?} in\n{}", out.all()))
            .trim()
            .to_string()
    };
    let sig = field("Peer signature type:");
    let bits = field("Server public key is");
    assert_eq!(cn(&served_subject(&out.stdout)), sni, "{}", out.all());
    (sig, bits)
}

#[test]
fn ecdsa_for_clients_that_verify_it_rsa_for_the_others() {
    let f = sites("");
    let mut ecdsa = 0.0;
    let mut rsa = 0.0;
    for sni in ["localhost", "a.test"] {
        // Default TLS 1.3 and TLS 1.2 clients can verify ECDSA: they get it.
        for args in [&[][..], &["-tls1_2"][..]] {
            let (sig, bits) = key_of(&f, sni, args);
            assert_eq!((sig.as_str(), bits.as_str()), ("ECDSA", "256 bit"), "{sni} {args:?}");
            ecdsa += 1.0;
        }
        // A TLS 1.3 client that only verifies RSA-PSS gets the RSA certificate.
        let (sig, bits) = key_of(&f, sni, &["-sigalgs", "RSA-PSS+SHA256"]);
        assert_eq!((sig.as_str(), bits.as_str()), ("RSA-PSS", "2048 bit"), "{sni}");
        // A TLS 1.2 client offering only an ECDHE-RSA suite gets the RSA certificate.
        let (sig, bits) = key_of(&f, sni, &["-tls1_2", "-cipher", "ECDHE-RSA-AES128-GCM-SHA256"]);
        assert!(sig.starts_with("RSA"), "{sni}: {sig}");
        assert_eq!(bits, "2048 bit", "{sni}");
        // A TLS 1.2 client with ECDSA suites but only RSA signature algorithms gets RSA too.
        let (sig, bits) = key_of(&f, sni, &["-tls1_2", "-sigalgs", "RSA+SHA256:RSA-PSS+SHA256"]);
        assert!(sig.starts_with("RSA"), "{sni}: {sig}");
        assert_eq!(bits, "2048 bit", "{sni}");
        rsa += 3.0;
    }
    assert_eq!(
        f.gw.metric("tlsgate_handshakes_total", &["cert=\"ecdsa_p256\""]),
        ecdsa,
        "{}",
        f.gw.metrics()
    );
    assert_eq!(
        f.gw.metric("tlsgate_handshakes_total", &["cert=\"rsa\""]),
        rsa,
        "{}",
        f.gw.metrics()
    );
    // Both TLS 1.2 RSA handshakes of each site: the client naming that suite, and the one with
    // OpenSSL's own order, which lists AES-256-GCM first but gets AES-128-GCM by the server's.
    assert_eq!(
        f.gw.metric(
            "tlsgate_handshakes_total",
            &["cert=\"rsa\"", "cipher=\"TLS_ECDHE_RSA_WITH_AES_128_GCM_SHA256\""]
        ),
        4.0,
        "{}",
        f.gw.metrics()
    );
}
