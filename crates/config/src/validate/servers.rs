//! Addresses of remote servers in the configuration, all read by [`crate::address`]: origins
//! (`[[upstream]] servers`), key servers (`key_servers`, `[[keyless.pool]] servers`) and memcached
//! servers (`[cluster] servers`). Each refusal names the entry: `upstream[0].servers[2]`.

use crate::address::OriginAddr;
use crate::issue::Issue;

/// `[[upstream]] servers`: `host:port`, `[v6]:port`, `http://` or `https://` URLs.
pub(super) fn check_origins(at: &str, servers: &[String], issues: &mut Vec<Issue>) {
    for (k, server) in servers.iter().enumerate() {
        if let Err(e) = OriginAddr::parse(server) {
            issues.push(Issue::error(format!("{at}[{k}]"), format!("{server:?}: {e}")));
        }
    }
}

/// Servers written as `host:port` or `[v6]:port` only (key servers, memcached servers).
pub(super) fn check_host_ports(at: &str, servers: &[String], issues: &mut Vec<Issue>) {
    for (k, server) in servers.iter().enumerate() {
        if let Err(e) = OriginAddr::parse_host_port(server) {
            issues.push(Issue::error(format!("{at}[{k}]"), format!("{server:?}: {e}")));
        }
    }
}

#[cfg(test)]
mod tests {
    use crate::validate::{validate, Severity};

    const BASE: &str = r#"
[[listener]]
listen = "127.0.0.1:8443"

[[site]]
name = "a"
server_names = ["localhost"]
[[site.certificate]]
chain = "/dev/null"
key = "/dev/null"
[[site.route]]
upstream = "app"
"#;

    /// Error lines (`field: message`) of a configuration with one upstream holding `servers`.
    fn upstream_errors(servers: &[&str]) -> Vec<String> {
        let text = format!("{BASE}\n[[upstream]]\nname = \"app\"\nservers = {servers:?}\n");
        let config = crate::parse(&text).expect("parses");
        validate(&config)
            .into_iter()
            .filter(|i| i.severity == Severity::Error && i.field.starts_with("upstream"))
            .map(|i| format!("{}: {}", i.field, i.message))
            .collect()
    }

    #[test]
    fn every_accepted_origin_form_passes() {
        let errs = upstream_errors(&[
            "10.0.0.1:80",
            "[::1]:8080",
            "localhost:8080",
            "app.internal:1",
            "http://app.internal",
            "http://[::1]:81/",
        ]);
        assert!(errs.is_empty(), "{errs:#?}");
    }

    #[test]
    fn bad_origins_are_named_by_field_and_index() {
        let errs = upstream_errors(&[
            "10.0.0.1:80",
            "my host:8080",
            "::1:80",
            "a/b:80",
            "https://h:p",
            "127.0.0.1:24101:80",
            "ftp://h:21",
            "http://h/app",
        ]);
        let want = [
            "upstream[0].servers[1]: \"my host:8080\": host \"my host\" contains ' '",
            "upstream[0].servers[2]: \"::1:80\": IPv6 addresses need brackets ([::1]:80)",
            "upstream[0].servers[3]: \"a/b:80\": host \"a/b\" contains '/'",
            "upstream[0].servers[4]: \"https://h:p\": port \"p\" is not a number in 1..=65535",
            "upstream[0].servers[5]: \"127.0.0.1:24101:80\": has more than one ':'",
            "upstream[0].servers[6]: \"ftp://h:21\": scheme \"ftp\" is not supported",
            "upstream[0].servers[7]: \"http://h/app\": path \"/app\" is not allowed",
        ];
        for w in want {
            assert!(errs.iter().any(|e| e.starts_with(w)), "missing {w:?} in {errs:#?}");
        }
        assert_eq!(errs.len(), want.len(), "{errs:#?}");
    }

    #[test]
    fn https_origins_are_accepted_and_their_tls_settings_checked() {
        assert!(upstream_errors(&["https://app.internal", "http://b:8080"]).is_empty());
        let lines = |extra: &str, servers: &[&str]| -> Vec<String> {
            let text = format!("{BASE}\n[[upstream]]\nname = \"app\"\nservers = {servers:?}\n{extra}");
            let config = crate::parse(&text).expect("parses");
            validate(&config)
                .into_iter()
                .filter(|i| i.field.starts_with("upstream"))
                .map(|i| format!("{}: {}", i.field, i.message))
                .collect()
        };
        let errs = lines("protocol = \"auto\"\n", &["https://a", "b:80"]);
        assert!(
            errs.iter()
                .any(|e| e.starts_with("upstream[0].protocol: \"auto\" picks the HTTP version by ALPN")),
            "{errs:#?}"
        );
        assert!(lines("protocol = \"auto\"\n", &["https://a"]).is_empty());
        assert!(
            lines("protocol = \"http2\"\n", &["b:80"]).is_empty(),
            "h2c by prior knowledge"
        );
        let errs = lines(
            "[upstream.tls]\nclient_certificate = \"/c.pem\"\nserver_name = \"a b\"\ngroups = [\"X448\"]\nverify = false\n",
            &["https://a"],
        );
        for want in [
            "upstream[0].tls: client_certificate and client_key go together",
            "upstream[0].tls.server_name: \"a b\"",
            "upstream[0].tls.groups[0]: unknown group \"X448\"",
            "upstream[0].tls.verify: origin certificates are not verified",
        ] {
            assert!(
                errs.iter().any(|e| e.starts_with(want)),
                "missing {want:?} in {errs:#?}"
            );
        }
        let errs = lines("[upstream.tls]\nverify = false\n", &["b:80"]);
        assert!(
            errs.iter()
                .any(|e| e.starts_with("upstream[0].tls: no server of this group is https://")),
            "{errs:#?}"
        );
    }

    #[test]
    fn key_servers_and_memcached_servers_are_host_port_only() {
        let text = BASE.replace(
            "key = \"/dev/null\"",
            "key_servers = [\"ks1:2407\", \"::1:2407\", \"http://ks2:2407\"]",
        ) + r#"
[[upstream]]
name = "app"
servers = ["a:1"]

[keyless]
client_certificate = "/dev/null"
client_key = "/dev/null"
server_ca = "/dev/null"
[[keyless.pool]]
name = "main"
servers = ["[::1]:2407", "ks 3:2407"]

[cluster]
secret_files = ["/dev/null"]
store = "memcached"
servers = ["[::1]:11211", "mc:11211:1"]
"#;
        let config = crate::parse(&text).expect("parses");
        let errs: Vec<String> = validate(&config).into_iter().map(|i| i.to_string()).collect();
        for w in [
            "site[0].certificate[0].key_servers[1]: \"::1:2407\": IPv6 addresses need brackets ([::1]:2407)",
            "site[0].certificate[0].key_servers[2]: \"http://ks2:2407\": a URL is not accepted here",
            "keyless.pool[0].servers[1]: \"ks 3:2407\": host \"ks 3\" contains ' '",
            "cluster.servers[1]: \"mc:11211:1\": has more than one ':'",
        ] {
            assert!(errs.iter().any(|e| e.contains(w)), "missing {w:?} in {errs:#?}");
        }
        for fine in ["key_servers[0]", "keyless.pool[0].servers[0]", "cluster.servers[0]"] {
            assert!(!errs.iter().any(|e| e.contains(fine)), "{fine} refused: {errs:#?}");
        }
    }
}
