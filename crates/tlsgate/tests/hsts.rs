//! HSTS: the configured Strict-Transport-Security header on every HTTPS response of a site.

mod common;

fn header(out: &str, name: &str) -> Option<String> {
    out.lines().find_map(|l| {
        l.split_once(':')
            .filter(|(k, _)| k.eq_ignore_ascii_case(name))
            .map(|(_, v)| v.trim().to_string())
    })
}

#[test]
fn hsts_header_is_sent_when_configured() {
    let f = common::start("", "[site.hsts]\nmax_age = \"1h\"\ninclude_subdomains = true\n");
    for proto in ["--http1.1", "--http2"] {
        let out = f.curl(&[proto, "-D", "-", "-o", "/dev/null"], "/hello");
        assert_eq!(
            header(&out.stdout, "strict-transport-security").as_deref(),
            Some("max-age=3600; includeSubDomains"),
            "{proto}: {}",
            out.all()
        );
    }
    // Also on error responses (no route here).
    let out = f.curl(&["-D", "-", "-o", "/dev/null"], "/nothing-routes-here");
    assert!(
        out.stdout.starts_with("HTTP/2 404") || out.stdout.starts_with("HTTP/1.1 404"),
        "{}",
        out.all()
    );
    assert!(
        header(&out.stdout, "strict-transport-security").is_some(),
        "{}",
        out.all()
    );
}

#[test]
fn no_hsts_header_without_configuration() {
    let f = common::start("", "");
    let out = f.curl(&["-D", "-", "-o", "/dev/null"], "/hello");
    assert!(out.stdout.contains(" 200"), "{}", out.all());
    assert!(
        header(&out.stdout, "strict-transport-security").is_none(),
        "{}",
        out.all()
    );
}
