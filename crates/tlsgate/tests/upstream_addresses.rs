//! Issue 15: origin addresses are parsed once, strictly. `tlsgate check` and `tlsgate reload`
//! refuse every malformed `[[upstream]] servers` entry naming its field (they used to pass, and
//! the gateway then dropped the server silently and panicked on requests to the emptied group);
//! what is accepted (`[v6]:port`, `localhost:port`, `http://host:port`) really serves.

mod common;

use common::{upstream, upstream_route};
use std::io::{BufRead, BufReader, Write};
use std::net::{TcpListener, TcpStream};
use tlsgate_testkit::{Origin, Output, TestPki};

/// Writes `text` as `tlsgate.toml` in the PKI directory and runs `tlsgate check --ca` on it (the
/// test CA given, so that address findings are the only errors).
fn check(pki: &TestPki, text: &str) -> Output {
    let config = pki.write("tlsgate.toml", text);
    let ca = pki.ca_file();
    common::tlsgate(&[
        "check",
        "--config",
        config.to_str().unwrap(),
        "--ca",
        ca.to_str().unwrap(),
    ])
}

/// A configuration whose upstream `app` (route `/app/`) lists `servers`.
fn with_servers(pki: &TestPki, servers: &[&str]) -> String {
    let servers: Vec<String> = servers.iter().map(|s| s.to_string()).collect();
    let routes = [upstream_route(None, "/app/", "app"), upstream("app", &servers, "")].concat();
    common::config_text(pki, 8443, 9090, "", &routes)
}

/// The error lines of `check`'s output.
fn error_lines(out: &Output) -> Vec<&str> {
    out.stdout.lines().filter(|l| l.contains(": error: ")).collect()
}

#[test]
fn check_refuses_every_malformed_origin_naming_its_field() {
    let pki = TestPki::new();
    // (address, what the message says)
    let cases = [
        ("::1:80", "IPv6 addresses need brackets ([::1]:80)"),
        ("my host:8080", "host \"my host\" contains ' '"),
        ("a/b:80", "host \"a/b\" contains '/'"),
        ("https://h:p", "port \"p\" is not a number in 1..=65535"),
        ("127.0.0.1:24101:80", "has more than one ':'"),
        ("ftp://h:21", "scheme \"ftp\" is not supported"),
        ("http://h:80/app", "path \"/app\" is not allowed"),
        ("app", "has no port"),
        ("app:0", "port \"0\" is not a number in 1..=65535"),
    ];
    for (bad, why) in cases {
        let out = check(&pki, &with_servers(&pki, &["127.0.0.1:8080", bad]));
        assert_eq!(out.status, Some(1), "{bad:?} passed check:\n{}", out.all());
        let errors = error_lines(&out);
        let field = format!("error: upstream[0].servers[1]: {bad:?}: ");
        assert!(
            errors.iter().any(|l| l.contains(&field) && l.contains(why)),
            "{bad:?}: no line with {field:?} and {why:?}:\n{}",
            out.all()
        );
        assert_eq!(
            errors.len(),
            1,
            "{bad:?}: only the bad entry is refused:\n{}",
            out.all()
        );
        assert!(out.stdout.contains("1 error(s)"), "{}", out.all());
    }
}

#[test]
fn check_accepts_every_documented_origin_form() {
    let pki = TestPki::new();
    let good = [
        "127.0.0.1:8080",
        "[::1]:8080",
        "[2001:db8::5]:80",
        "localhost:8080",
        "app-1.internal:80",
        "http://app.internal",
        "http://[::1]:8081/",
    ];
    let out = check(&pki, &with_servers(&pki, &good));
    assert_eq!(out.status, Some(0), "{}", out.all());
    assert!(out.stdout.contains("0 error(s)"), "{}", out.all());
}

#[test]
fn check_refuses_bad_key_server_addresses_and_fixed_status() {
    let pki = TestPki::new();
    let mut text = common::config_text(
        &pki,
        8443,
        9090,
        "",
        "\n[[site.route]]\npath_prefix = \"/teapot\"\nfixed_response = { status = 999 }\n",
    );
    // The RSA certificate's key moves to key servers, one written wrongly.
    let rsa_key = format!("key = {}", tlsgate_testkit::toml_path(&pki.path("rsa.key")));
    assert!(text.contains(&rsa_key), "{text}");
    text = text.replace(&rsa_key, "key_servers = [\"[::1]:2407\", \"::1:2407\"]");
    let ca = tlsgate_testkit::toml_path(&pki.ca_file());
    let chain = tlsgate_testkit::toml_path(&pki.path("ecdsa.pem"));
    let key = tlsgate_testkit::toml_path(&pki.path("ecdsa.key"));
    text = format!(
        "[keyless]\nclient_certificate = {chain}\nclient_key = {key}\nserver_ca = {ca}\n\
         [[keyless.pool]]\nname = \"main\"\nservers = [\"ks 1:2407\"]\n\n{text}"
    );
    let out = check(&pki, &text);
    assert_eq!(out.status, Some(1), "{}", out.all());
    for line in [
        "error: site[0].certificate[1].key_servers[1]: \"::1:2407\": IPv6 addresses need brackets ([::1]:2407)",
        "error: keyless.pool[0].servers[0]: \"ks 1:2407\": host \"ks 1\" contains ' '",
        "error: site[0].route[1].fixed_response.status: 999 is not a final HTTP status",
    ] {
        assert!(out.stdout.contains(line), "no {line:?}:\n{}", out.all());
    }
    assert!(!out.stdout.contains("key_servers[0]"), "{}", out.all());
}

#[test]
fn reload_refuses_a_malformed_origin_and_the_old_config_keeps_serving() {
    let origin = Origin::start("kept");
    let routes = [
        upstream_route(None, "/app/", "app"),
        upstream("app", &[origin.addr()], ""),
    ]
    .concat();
    let f = common::start("", &routes);
    assert!(f.curl(&[], "/app/x").stdout.contains("origin=kept"));

    let bad = [
        upstream_route(None, "/app/", "app"),
        upstream("app", &["::1:80".to_string()], ""),
    ]
    .concat();
    f.write_config(&f.config_again("", &bad));
    let config = f.gw.config.to_str().unwrap().to_string();
    let out = common::tlsgate(&["reload", "--config", &config]);
    assert_ne!(out.status, Some(0), "{}", out.all());
    assert!(out.stderr.contains("reload refused"), "{}", out.all());
    assert!(
        out.stderr
            .contains("upstream[0].servers[0]: \"::1:80\": IPv6 addresses need brackets ([::1]:80)"),
        "{}",
        out.all()
    );
    let out = f.curl(&["-w", "\nstatus=%{http_code}\n"], "/app/y");
    assert!(
        out.stdout.contains("origin=kept") && out.stdout.contains("status=200"),
        "{}",
        out.all()
    );
    assert!(!f.gw.log().contains("panicked"), "{}", f.gw.log());
}

/// A tiny HTTP/1.1 origin on `[::1]` (the testkit's listens on 127.0.0.1 only): answers every
/// request with `origin=v6` and the request line's path, keeping the connection open.
fn start_v6_origin() -> Option<u16> {
    let listener = match TcpListener::bind("[::1]:0") {
        Ok(l) => l,
        Err(e) => {
            eprintln!("no IPv6 loopback here ({e}): the [::1] origin is not tested");
            return None;
        }
    };
    let port = listener.local_addr().ok()?.port();
    std::thread::spawn(move || {
        for conn in listener.incoming().flatten() {
            std::thread::spawn(move || serve_v6(conn));
        }
    });
    Some(port)
}

fn serve_v6(conn: TcpStream) {
    let Ok(mut out) = conn.try_clone() else { return };
    let mut reader = BufReader::new(conn);
    loop {
        let mut request_line = String::new();
        if reader.read_line(&mut request_line).unwrap_or(0) == 0 {
            return;
        }
        // GET requests without bodies: skip the headers up to the blank line.
        loop {
            let mut line = String::new();
            if reader.read_line(&mut line).unwrap_or(0) == 0 {
                return;
            }
            if line == "\r\n" || line == "\n" {
                break;
            }
        }
        let path = request_line.split_whitespace().nth(1).unwrap_or("?");
        let body = format!("origin=v6\npath={path}\n");
        let response = format!(
            "HTTP/1.1 200 OK\r\ncontent-type: text/plain\r\ncontent-length: {}\r\nx-origin: v6\r\n\r\n{body}",
            body.len()
        );
        if out.write_all(response.as_bytes()).is_err() {
            return;
        }
    }
}

#[test]
fn serves_through_bracketed_ipv6_localhost_and_url_origins() {
    let v6 = start_v6_origin();
    let named = Origin::start("named");
    let url = Origin::start("url");
    let mut routes = vec![
        upstream_route(None, "/name/", "name"),
        upstream_route(None, "/url/", "url"),
        upstream("name", &[format!("localhost:{}", named.port)], ""),
        upstream("url", &[format!("http://LocalHost:{}/", url.port)], ""),
    ];
    if let Some(port) = v6 {
        routes.insert(0, upstream_route(None, "/v6/", "v6"));
        routes.push(upstream("v6", &[format!("[::1]:{port}")], ""));
    }
    let f = common::start("", &routes.concat());

    for (path, origin) in [("/name/a", "named"), ("/url/b", "url"), ("/v6/c", "v6")] {
        if origin == "v6" && v6.is_none() {
            continue;
        }
        for _ in 0..2 {
            let out = f.curl(&["-w", "\nstatus=%{http_code}\n"], path);
            assert!(out.stdout.contains("status=200"), "{path}: {}", out.all());
            assert!(
                out.stdout.contains(&format!("origin={origin}\n")),
                "{path}: {}",
                out.all()
            );
            assert!(out.stdout.contains(&format!("path={path}")), "{path}: {}", out.all());
        }
    }
    assert_eq!(named.count(), 2);
    assert_eq!(url.count(), 2);
    let errors = f.gw.metric("tlsgate_upstream_errors_total", &[]);
    assert_eq!(errors, 0.0, "{}", f.gw.metrics());
    assert!(!f.gw.log().contains("origin address refused"), "{}", f.gw.log());
}
