//! Behaviour 5: `tlsgate check` lints a configuration and its certificate chains; every finding
//! names the configuration file, the field and (for certificates) the PEM file at fault.

mod common;

use std::path::{Path, PathBuf};
use std::time::{Duration, SystemTime};
use tlsgate_testkit::{Output, TestPki};
use tlsgate_tls::pki::{CertSpec, Certified, KeyKind};

const NAMES: &[&str] = &["localhost", "127.0.0.1"];

/// Writes `text` as `tlsgate.toml` in the PKI directory and runs `tlsgate check` on it.
fn check(pki: &TestPki, text: &str, ca: Option<&Path>) -> (Output, PathBuf) {
    let config = pki.write("tlsgate.toml", text);
    let mut args = vec!["check", "--config", config.to_str().unwrap()];
    if let Some(ca) = ca {
        args.extend(["--ca", ca.to_str().unwrap()]);
    }
    (common::tlsgate(&args), config)
}

/// A configuration whose only site has one certificate (`chain`, `key`).
fn one_cert(chain: &Path, key: &Path, top: &str, routes: &str) -> String {
    common::config_with_certs(&common::cert_block(chain, key), 8443, 9090, top, routes)
}

/// The first line of `out` that contains every one of `needles`.
fn line_with<'a>(out: &'a Output, needles: &[&str]) -> Option<&'a str> {
    out.stdout.lines().find(|l| needles.iter().all(|n| l.contains(n)))
}

/// Asserts a finding line with all of `needles` exists; returns it.
#[track_caller]
fn finding<'a>(out: &'a Output, needles: &[&str]) -> &'a str {
    line_with(out, needles).unwrap_or_else(|| panic!("no line with {needles:?}:\n{}", out.all()))
}

fn s(p: &Path) -> &str {
    p.to_str().unwrap()
}

/// An intermediate CA issued by the test root.
fn intermediate(pki: &TestPki, name: &str) -> Certified {
    Certified::issue(&CertSpec::ca(name, KeyKind::EcdsaP256, 365), Some(&pki.ca)).expect("intermediate")
}

fn leaf_of(issuer: &Certified) -> Certified {
    Certified::issue(&CertSpec::leaf(NAMES, KeyKind::EcdsaP256, 365), Some(issuer)).expect("leaf")
}

#[test]
fn a_good_config_passes_and_the_private_ca_must_be_given() {
    let pki = TestPki::new();
    let text = common::config_text(&pki, 8443, 9090, "", "");
    let ca = pki.ca_file();
    let (out, _) = check(&pki, &text, Some(&ca));
    assert_eq!(out.status, Some(0), "{}", out.all());
    assert!(out.stdout.contains("0 error(s), 0 warning(s)"), "{}", out.all());
    // Without --ca the test CA is unknown: the chain looks incomplete.
    let (out, config) = check(&pki, &text, None);
    assert_eq!(out.status, Some(1), "{}", out.all());
    finding(
        &out,
        &[
            s(&config),
            "error: site[0].certificate[0].chain",
            "missing intermediate",
            "ecdsa.pem",
        ],
    );
    finding(
        &out,
        &[
            s(&config),
            "error: site[0].certificate[1].chain",
            "missing intermediate",
            "rsa.pem",
        ],
    );
}

#[test]
fn a_key_that_does_not_match_the_certificate_is_an_error() {
    let pki = TestPki::new();
    let (chain, _) = pki.leaf("one", NAMES, KeyKind::EcdsaP256);
    let (_, other_key) = pki.leaf("two", NAMES, KeyKind::EcdsaP256);
    let (out, config) = check(&pki, &one_cert(&chain, &other_key, "", ""), Some(&pki.ca_file()));
    assert_eq!(out.status, Some(1), "{}", out.all());
    finding(
        &out,
        &[
            s(&config),
            "error: site[0].certificate[0].key",
            s(&other_key),
            "does not match",
            s(&chain),
        ],
    );
}

#[test]
fn intermediate_before_leaf_is_out_of_order() {
    let pki = TestPki::new();
    let inter = intermediate(&pki, "tlsgate test intermediate");
    let leaf = leaf_of(&inter);
    let (chain, key) = pki.write_pair(
        "swapped",
        &format!("{}{}", inter.cert_pem, leaf.cert_pem),
        &leaf.key_pem,
    );
    let (out, config) = check(&pki, &one_cert(&chain, &key, "", ""), Some(&pki.ca_file()));
    assert_eq!(out.status, Some(1), "{}", out.all());
    finding(
        &out,
        &[
            s(&config),
            "error: site[0].certificate[0].chain",
            "out of order",
            s(&chain),
        ],
    );
}

#[test]
fn intermediates_in_the_wrong_order_are_out_of_order() {
    // root -> first -> second -> leaf, sent as [leaf, first, second].
    let pki = TestPki::new();
    let first = intermediate(&pki, "tlsgate first intermediate");
    let second = Certified::issue(
        &CertSpec::ca("tlsgate second intermediate", KeyKind::EcdsaP256, 365),
        Some(&first),
    )
    .expect("second intermediate");
    let leaf = leaf_of(&second);
    let (chain, key) = pki.write_pair(
        "misordered",
        &format!("{}{}{}", leaf.cert_pem, first.cert_pem, second.cert_pem),
        &leaf.key_pem,
    );
    let (out, config) = check(&pki, &one_cert(&chain, &key, "", ""), Some(&pki.ca_file()));
    assert_eq!(out.status, Some(1), "{}", out.all());
    finding(
        &out,
        &[
            s(&config),
            "error: site[0].certificate[0].chain",
            "out of order",
            s(&chain),
        ],
    );
    // In the right order the same certificates pass.
    let (chain, key) = pki.write_pair(
        "ordered",
        &format!("{}{}{}", leaf.cert_pem, second.cert_pem, first.cert_pem),
        &leaf.key_pem,
    );
    let (out, _) = check(&pki, &one_cert(&chain, &key, "", ""), Some(&pki.ca_file()));
    assert_eq!(out.status, Some(0), "{}", out.all());
}

#[test]
fn a_missing_intermediate_is_an_error() {
    let pki = TestPki::new();
    let inter = intermediate(&pki, "tlsgate test intermediate");
    let leaf = leaf_of(&inter);
    let (chain, key) = pki.write_pair("leaf-only", &leaf.cert_pem, &leaf.key_pem);
    let (out, config) = check(&pki, &one_cert(&chain, &key, "", ""), Some(&pki.ca_file()));
    assert_eq!(out.status, Some(1), "{}", out.all());
    finding(
        &out,
        &[
            s(&config),
            "error: site[0].certificate[0].chain",
            "missing intermediate",
            "tlsgate test intermediate",
            s(&chain),
        ],
    );
    // With the intermediate the chain is complete.
    let (chain, key) = pki.write_pair("full", &format!("{}{}", leaf.cert_pem, inter.cert_pem), &leaf.key_pem);
    let (out, _) = check(&pki, &one_cert(&chain, &key, "", ""), Some(&pki.ca_file()));
    assert_eq!(out.status, Some(0), "{}", out.all());
    assert!(out.stdout.contains("0 error(s), 0 warning(s)"), "{}", out.all());
}

#[test]
fn an_included_root_is_a_warning_only() {
    let pki = TestPki::new();
    let inter = intermediate(&pki, "tlsgate test intermediate");
    let leaf = leaf_of(&inter);
    let (chain, key) = pki.write_pair(
        "with-root",
        &format!("{}{}{}", leaf.cert_pem, inter.cert_pem, pki.ca.cert_pem),
        &leaf.key_pem,
    );
    let (out, config) = check(&pki, &one_cert(&chain, &key, "", ""), Some(&pki.ca_file()));
    assert_eq!(out.status, Some(0), "{}", out.all());
    finding(
        &out,
        &[
            s(&config),
            "warning: site[0].certificate[0].chain",
            "included needlessly",
            "tlsgate test CA",
            s(&chain),
        ],
    );
    assert!(out.stdout.contains("0 error(s), 1 warning(s)"), "{}", out.all());
}

#[test]
fn an_expired_certificate_is_an_error() {
    let pki = TestPki::new();
    let now = SystemTime::now();
    let spec = CertSpec {
        not_before: now - Duration::from_secs(30 * 86_400),
        not_after: now - Duration::from_secs(86_400),
        ..CertSpec::leaf(NAMES, KeyKind::EcdsaP256, 1)
    };
    let (chain, key) = pki.leaf_with("expired", &spec);
    let (out, config) = check(&pki, &one_cert(&chain, &key, "", ""), Some(&pki.ca_file()));
    assert_eq!(out.status, Some(1), "{}", out.all());
    finding(
        &out,
        &[s(&config), "error: site[0].certificate[0].chain", "expired", s(&chain)],
    );
}

#[test]
fn a_certificate_expiring_soon_is_a_warning() {
    let pki = TestPki::new();
    let (chain, key) = pki.leaf_with("soon", &CertSpec::leaf(NAMES, KeyKind::EcdsaP256, 10));
    let (out, config) = check(&pki, &one_cert(&chain, &key, "", ""), Some(&pki.ca_file()));
    assert_eq!(out.status, Some(0), "{}", out.all());
    let line = finding(
        &out,
        &[
            s(&config),
            "warning: site[0].certificate[0].chain",
            "expires in",
            s(&chain),
        ],
    );
    assert!(
        line.contains("expires in 9 days") || line.contains("expires in 10 days"),
        "{line}"
    );
    assert!(out.stdout.contains("0 error(s), 1 warning(s)"), "{}", out.all());
}

#[test]
fn a_weak_key_is_an_error() {
    let pki = TestPki::new();
    let (chain, key) = pki.leaf("weak", NAMES, KeyKind::Rsa(1024));
    let (out, config) = check(&pki, &one_cert(&chain, &key, "", ""), Some(&pki.ca_file()));
    assert_eq!(out.status, Some(1), "{}", out.all());
    finding(
        &out,
        &[
            s(&config),
            "error: site[0].certificate[0].chain",
            "weak 1024-bit key",
            s(&chain),
        ],
    );
}

#[test]
fn bad_toml_and_unknown_fields_are_errors_naming_the_problem() {
    let pki = TestPki::new();
    let (out, config) = check(&pki, "[server\nworkers = 2\n", None);
    assert_eq!(out.status, Some(1), "{}", out.all());
    finding(&out, &[s(&config), "error", "line 1"]);

    let text = common::config_text(&pki, 8443, 9090, "", "").replace("workers = 2", "workerz = 2");
    let (out, config) = check(&pki, &text, Some(&pki.ca_file()));
    assert_eq!(out.status, Some(1), "{}", out.all());
    assert!(
        out.stdout.starts_with(&format!("{}: error", config.display())),
        "{}",
        out.all()
    );
    assert!(out.stdout.contains("unknown field `workerz`"), "{}", out.all());
}

#[test]
fn a_route_to_an_unknown_upstream_is_an_error() {
    let pki = TestPki::new();
    let routes = common::upstream_route(None, "/api/", "nope");
    let text = common::config_text(&pki, 8443, 9090, "", &routes);
    let (out, config) = check(&pki, &text, Some(&pki.ca_file()));
    assert_eq!(out.status, Some(1), "{}", out.all());
    finding(&out, &[s(&config), "error: site[0].route[1].upstream", "\"nope\""]);
}

#[test]
fn rsa_key_exchange_ciphers_are_errors() {
    let pki = TestPki::new();
    let top = "[tls]\nciphers_tls12 = \"ECDHE-ECDSA-AES128-GCM-SHA256:AES128-GCM-SHA256\"\n";
    let text = common::config_text(&pki, 8443, 9090, top, "");
    let (out, config) = check(&pki, &text, Some(&pki.ca_file()));
    assert_eq!(out.status, Some(1), "{}", out.all());
    let line = finding(
        &out,
        &[
            s(&config),
            "error: tls.ciphers_tls12",
            "AES128-GCM-SHA256",
            "RSA key exchange",
        ],
    );
    assert!(!line.contains("ECDHE-ECDSA"), "only the bad suite is named: {line}");
    assert!(out.stdout.contains("1 error(s)"), "{}", out.all());
}

/// The `info:` line of the flight-size report for `field`, parsed: (chain bytes as sent, first flight).
fn flight_line<'a>(out: &'a Output, field: &str) -> &'a str {
    finding(out, &["info: ", field, "bytes as sent", "first flight"])
}

#[test]
fn the_flight_size_is_reported_and_a_first_flight_over_initcwnd_warns() {
    let pki = TestPki::new();
    // A small chain: leaf + intermediate, well inside 10 x 1460 bytes.
    let inter = intermediate(&pki, "tlsgate test intermediate");
    let leaf = leaf_of(&inter);
    let (chain, key) = pki.write_pair("small", &format!("{}{}", leaf.cert_pem, inter.cert_pem), &leaf.key_pem);
    let (out, _) = check(&pki, &one_cert(&chain, &key, "", ""), Some(&pki.ca_file()));
    assert_eq!(out.status, Some(0), "{}", out.all());
    let line = flight_line(&out, "site[0].certificate[0].chain");
    assert!(line.contains("2 certificate(s)"), "{line}");
    assert!(line.contains("of 14600 (initcwnd 10 x MSS 1460)"), "{line}");
    assert!(
        line.contains("brotli") && line.contains("zlib"),
        "compression sizes: {line}"
    );
    // The reported size is the DER sum plus TLS framing: more than the DER, by a few dozen bytes.
    let der: usize = [&leaf.cert_pem, &inter.cert_pem].iter().map(|p| der_len(p)).sum();
    let as_sent: usize = number_before(line, " bytes as sent");
    assert!(
        as_sent > der && as_sent < der + 64,
        "as sent {as_sent}, DER {der}: {line}"
    );
    assert!(out.stdout.contains("0 error(s), 0 warning(s)"), "{}", out.all());

    // A leaf with 600 long names is ~20 KB: over the initial window, a warning (not an error).
    let names: Vec<String> = (0..600)
        .map(|i| format!("host-{i:04}.a-rather-long-subdomain.example.com"))
        .collect();
    let mut all: Vec<&str> = NAMES.to_vec();
    all.extend(names.iter().map(String::as_str));
    let big = Certified::issue(&CertSpec::leaf(&all, KeyKind::EcdsaP256, 365), Some(&pki.ca)).expect("big leaf");
    let (chain, key) = pki.write_pair("big", &big.cert_pem, &big.key_pem);
    let (out, config) = check(&pki, &one_cert(&chain, &key, "", ""), Some(&pki.ca_file()));
    assert_eq!(out.status, Some(0), "{}", out.all());
    let warning = finding(
        &out,
        &[
            s(&config),
            "warning: site[0].certificate[0].chain",
            s(&chain),
            "more than initcwnd 10 x MSS 1460 = 14600",
        ],
    );
    // The names compress very well: with brotli the flight fits again.
    assert!(
        warning.contains("with brotli: clients offering certificate compression fit"),
        "{warning}"
    );
    let line = flight_line(&out, "site[0].certificate[0].chain");
    let as_sent = number_before(line, " bytes as sent");
    assert!(as_sent > 14_600, "{line}");

    // With compression off, the report says so.
    let (out, _) = check(
        &pki,
        &one_cert(&chain, &key, "[tls]\ncert_compression = false\n", ""),
        Some(&pki.ca_file()),
    );
    let line = flight_line(&out, "site[0].certificate[0].chain");
    assert!(line.contains("certificate compression off"), "{line}");
    finding(&out, &["warning: site[0].certificate[0].chain", "more than initcwnd"]);
}

/// DER length of a one-certificate PEM.
fn der_len(pem: &str) -> usize {
    let b64: String = pem.lines().filter(|l| !l.starts_with("-----")).collect();
    let pad = b64.bytes().rev().take_while(|&c| c == b'=').count();
    b64.len() / 4 * 3 - pad
}

/// The integer right before `suffix` in `line`.
fn number_before(line: &str, suffix: &str) -> usize {
    let head = &line[..line.find(suffix).unwrap_or_else(|| panic!("no {suffix:?} in {line}"))];
    let digits: String = head.chars().rev().take_while(char::is_ascii_digit).collect();
    digits.chars().rev().collect::<String>().parse().unwrap()
}
