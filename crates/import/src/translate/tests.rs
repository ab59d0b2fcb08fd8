//! Whole translations of in-memory configurations: the TOML parses and validates as a tlsgate
//! configuration (certificate files aside), and the findings are the expected ones.

use crate::nginx::MemSource;
use crate::{import_nginx, ImportError, Translation};
use std::path::Path;
use tlsgate_config::Severity;

fn import(files: &[(&str, &str)]) -> Result<Translation, ImportError> {
    let src = MemSource::new(files.iter().map(|(p, t)| (format!("/etc/nginx/{p}"), t.to_string())));
    import_nginx(&src, &Path::new("/etc/nginx").join(files[0].0), Path::new("/etc/nginx"))
}

/// The translation's TOML as a tlsgate configuration; panics on any validation error other than
/// missing certificate files.
fn config(t: &Translation) -> tlsgate_config::Config {
    let c = tlsgate_config::parse(&t.toml).unwrap_or_else(|e| panic!("{e}\n{}", t.toml));
    let errors: Vec<String> = tlsgate_config::validate::validate(&c)
        .into_iter()
        .filter(|i| i.severity == Severity::Error && !i.message.contains("no such file"))
        .map(|i| i.to_string())
        .collect();
    assert!(errors.is_empty(), "{errors:#?}\n{}", t.toml);
    c
}

fn findings(t: &Translation) -> Vec<String> {
    t.findings
        .iter()
        .map(|f| format!("{}: {}", f.place.trim_start_matches("/etc/nginx/"), f.directive))
        .collect()
}

const PROXY: &str = r#"
upstream app {
    least_conn;
    server 10.0.0.1:8080 weight=2;
    server 10.0.0.2:8080 max_fails=3 fail_timeout=20s;
    server 10.0.0.3:8080 backup;
    keepalive 16;
}
server {
    listen 80;
    server_name example.com;
    return 301 https://$host$request_uri;
}
server {
    listen 443 ssl http2 default_server;
    listen [::]:443 ssl http2;
    server_name example.com .example.org;
    ssl_certificate certs/ec.pem;
    ssl_certificate_key certs/ec.key;
    ssl_certificate /etc/ssl/rsa.pem;
    ssl_certificate_key /etc/ssl/rsa.key;
    ssl_protocols TLSv1 TLSv1.2 TLSv1.3;
    ssl_ciphers HIGH:!aNULL:!MD5;
    ssl_prefer_server_ciphers on;
    ssl_session_cache shared:SSL:1m;
    add_header Strict-Transport-Security "max-age=31536000; includeSubDomains; preload" always;
    add_header X-Frame-Options DENY;
    proxy_set_header X-Real-IP $remote_addr;
    proxy_set_header X-Env "prod";
    location / {
        proxy_pass http://app;
        proxy_read_timeout 90s;
    }
    location /api/ {
        proxy_pass http://127.0.0.1:9000/v2/;
        proxy_set_header X-Debug "";
    }
    location = /health { return 200 "ok"; }
    location ~ \.php$ { fastcgi_pass unix:/run/php.sock; }
    location /static/ { root /srv; }
}
"#;

#[test]
fn reverse_proxy_translates_and_validates() {
    let t = import(&[("site.conf", PROXY)]).unwrap();
    let c = config(&t);
    assert_eq!(c.listeners.len(), 3);
    assert_eq!(c.listeners[2].kind, tlsgate_config::ListenerKind::Redirect);
    let site = &c.sites[0];
    assert_eq!(site.server_names, ["example.com", "example.org", "*.example.org"]);
    assert!(site.default);
    assert_eq!(site.certificates.len(), 2);
    assert_eq!(site.certificates[0].chain, Path::new("/etc/nginx/certs/ec.pem"));
    let hsts = site.hsts.as_ref().unwrap();
    assert!(hsts.include_subdomains && hsts.preload);
    assert_eq!(hsts.max_age.get().as_secs(), 31_536_000);
    assert_eq!(site.routes.len(), 3);
    let api = &site.routes[1];
    assert_eq!(api.path_prefix, "/api/");
    assert_eq!(api.rewrite_prefix.as_deref(), Some("/v2/"));
    assert_eq!(api.upstream.as_deref(), Some("127.0.0.1:9000"));
    assert_eq!(api.request_headers.remove, ["X-Debug"]);
    // The server's proxy_set_header is replaced by the location's (nginx inheritance).
    assert!(api.request_headers.set.is_empty());
    assert_eq!(
        site.routes[0].request_headers.set.get("X-Env").map(String::as_str),
        Some("prod")
    );
    assert_eq!(
        site.routes[0]
            .response_headers
            .set
            .get("X-Frame-Options")
            .map(String::as_str),
        Some("DENY")
    );
    assert_eq!(site.routes[2].fixed_response.as_ref().unwrap().body, "ok");
    let app = &c.upstreams[0];
    assert_eq!(app.servers, ["10.0.0.1:8080", "10.0.0.2:8080"]);
    assert_eq!(app.balance, tlsgate_config::Balance::LeastConn);
    assert_eq!(app.max_idle_per_server, 16);
    assert_eq!(app.header_timeout.get().as_secs(), 90);
    assert_eq!(app.fail_timeout.get().as_secs(), 20);
    assert!(c.tls.strict_cipher_order);
    assert_eq!(c.tls.session_cache.size, 4000);
    assert_eq!(
        findings(&t),
        [
            "site.conf:4: server",
            "site.conf:5: server",
            "site.conf:6: server",
            "site.conf:22: ssl_protocols",
            "site.conf:28: proxy_set_header",
            "site.conf:31: proxy_pass",
            "site.conf:35: proxy_pass",
            "site.conf:38: location",
            "site.conf:39: location",
            "site.conf:40: location",
        ]
    );
    let why = |line: &str| t.findings.iter().find(|f| f.place.ends_with(line)).unwrap().why.clone();
    assert!(why(":22").contains("TLSv1 dropped"));
    assert!(why(":28").contains("X-Real-IP"));
    assert!(why(":38").contains("prefix"));
    assert!(why(":39").contains("regular expression"));
    assert!(why(":40").contains("root"));
    assert!(why(":4").contains("weight=2 ignored"));
    assert!(why(":6").contains("backup"));
}

#[test]
fn standalone_server_without_routes_gets_a_placeholder() {
    let t = import(&[(
        "a.conf",
        "server { listen 443 ssl; server_name _; ssl_certificate a.pem; ssl_certificate_key a.key; ssl_dhparam dh.pem; }",
    )])
    .unwrap();
    let c = config(&t);
    assert_eq!(c.sites[0].server_names, ["default.invalid"]);
    assert_eq!(c.sites[0].routes[0].fixed_response.as_ref().unwrap().status, 404);
    assert_eq!(c.tls.alpn, ["http/1.1"]);
    let whys: Vec<&str> = t.findings.iter().map(|f| f.why.as_str()).collect();
    assert!(whys.iter().any(|w| w.contains("placeholder")), "{whys:?}");
    assert!(whys.iter().any(|w| w.starts_with("not needed")), "{whys:?}");
}

#[test]
fn differing_tls_settings_are_listed() {
    let t = import(&[(
        "a.conf",
        "http { ssl_protocols TLSv1.2 TLSv1.3;\n\
         server { listen 443 ssl; server_name a.test; ssl_certificate a.pem; ssl_certificate_key a.key; location / { return 204; } }\n\
         server { listen 8443 ssl; server_name b.test; ssl_protocols TLSv1.3; ssl_certificate b.pem; ssl_certificate_key b.key; location / { return 204; } } }",
    )])
    .unwrap();
    let c = config(&t);
    assert_eq!(c.listeners.len(), 2);
    let f = findings(&t);
    assert_eq!(
        f,
        ["a.conf:2: listen", "a.conf:3: listen", "a.conf:3: ssl_protocols"],
        "{:#?}",
        t.findings
    );
}

#[test]
fn certbot_redirect_server() {
    let t = import(&[(
        "a.conf",
        "server {\n if ($host = www.a.test) { return 301 https://$host$request_uri; }\n if ($host = a.test) { return 301 https://$host$request_uri; }\n listen 80;\n server_name a.test www.a.test;\n return 404;\n}\n\
         server { listen 443 ssl; server_name a.test; ssl_certificate a.pem; ssl_certificate_key a.key; location / { proxy_pass http://127.0.0.1:8080; } }",
    )])
    .unwrap();
    let c = config(&t);
    assert_eq!(c.listeners[1].kind, tlsgate_config::ListenerKind::Redirect);
    assert_eq!(findings(&t), ["a.conf:6: return", "a.conf:8: proxy_pass"]);
    assert!(
        t.findings[1].why.contains("Host: 127.0.0.1:8080"),
        "{:?}",
        t.findings[1]
    );
}

#[test]
fn no_tls_server_is_an_error_and_syntax_errors_have_a_place() {
    let e = import(&[("a.conf", "server { listen 80; }")]).unwrap_err();
    assert!(matches!(e, ImportError::NoTlsServer));
    let e = import(&[("a.conf", "server {\n  listen 443 ssl\n}\n")]).unwrap_err();
    assert_eq!(e.to_string(), "/etc/nginx/a.conf:3:1: unexpected \"}\"");
    assert!(e.is_syntax());
}

#[test]
fn hostile_input_never_panics() {
    let cases = [
        "server { listen 443 ssl; ssl_certificate; ssl_certificate_key; location; location = ; return; }",
        "server { listen; listen 443 ssl backlog=x fastopen=99999999; server_name ~^(.*)$ \"\" *.; }",
        "upstream { server; server unix:; keepalive x; } server { listen 443 ssl; ssl_certificate a; ssl_certificate_key b; location / { proxy_pass http://; } }",
        "server { listen 443 ssl; ssl_certificate a; ssl_certificate_key b; add_header Strict-Transport-Security \"max-age=x; y\"; ssl_session_cache shared:; ssl_ciphers '!'; ssl_ecdh_curve ::; }",
        "server { listen 443 ssl; ssl_certificate a; ssl_certificate_key b; location / { return 99999999999; } location /x { proxy_pass https://[::1; } }",
    ];
    for text in cases {
        if let Ok(t) = import(&[("a.conf", text)]) {
            let _ = tlsgate_config::parse(&t.toml).unwrap_or_else(|e| panic!("{text}: {e}\n{}", t.toml));
        }
    }
}
