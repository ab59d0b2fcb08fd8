//! The settings a reload cannot apply, and how to say which of them a re-read file changed.
//!
//! A reload installs a new configuration generation (sites, certificates, routes, upstreams,
//! TLS settings, limits, ...), but what was set up once at start stays: the listening sockets
//! (bound before the workers started), the admin listener, the worker threads, the cluster store
//! and its secrets, the control-plane client, the log subscriber (level, format). Those changes are reported to
//! the caller of `POST /reload` / `tlsgate reload` (and logged), never silently dropped.

use std::fmt::Debug;
use tlsgate_config::{Config, ListenerConfig};

/// What in `new` (the re-read file) differs from `running` (the configuration the process
/// started with) among the settings that take a restart; one phrase per change, in file order.
pub fn not_applied(running: &Config, new: &Config) -> Vec<String> {
    let mut changes = Vec::new();
    for old in &running.listeners {
        match new.listeners.iter().find(|l| l.listen == old.listen) {
            None => changes.push(format!("[[listener]] {} removed (still listening)", old.listen)),
            Some(l) => {
                let fields = listener_fields(old, l);
                if !fields.is_empty() {
                    changes.push(format!(
                        "[[listener]] {} changed {} (the running socket keeps the old settings)",
                        old.listen,
                        fields.join(", ")
                    ));
                }
            }
        }
    }
    for l in &new.listeners {
        if !running.listeners.iter().any(|old| old.listen == l.listen) {
            changes.push(format!("[[listener]] {} added (not listening)", l.listen));
        }
    }
    if running.admin.listen != new.admin.listen {
        let show = |a: Option<std::net::SocketAddr>| a.map_or_else(|| "off".to_string(), |a| a.to_string());
        changes.push(format!(
            "admin.listen {} -> {} (the admin listener stays on {})",
            show(running.admin.listen),
            show(new.admin.listen),
            show(running.admin.listen)
        ));
    }
    if running.admin.allowed_hosts != new.admin.allowed_hosts {
        changes.push(format!(
            "admin.allowed_hosts {:?} -> {:?} (the admin listener keeps the names it started with)",
            running.admin.allowed_hosts, new.admin.allowed_hosts
        ));
    }
    if running.server.workers != new.server.workers {
        changes.push(format!(
            "server.workers {} -> {} (the worker threads are kept)",
            running.server.workers, new.server.workers
        ));
    }
    if running.server.upgrade_socket != new.server.upgrade_socket {
        let (old, new) = (&running.server.upgrade_socket, &new.server.upgrade_socket);
        let show = |p: &Option<std::path::PathBuf>| {
            p.as_ref()
                .map_or_else(|| "off".to_string(), |p| p.display().to_string())
        };
        let still = match old {
            Some(p) => format!(
                "upgrades are still taken on {} until the next restart or upgrade",
                p.display()
            ),
            None => "upgrades stay off until the next restart".to_string(),
        };
        changes.push(format!(
            "server.upgrade_socket {} -> {} ({still})",
            show(old),
            show(new)
        ));
    }
    let (old_udp, new_udp) = (running.quic_addresses(), new.quic_addresses());
    if old_udp != new_udp {
        changes.push(format!(
            "[http3] QUIC addresses {old_udp:?} -> {new_udp:?} (the UDP sockets stay as they were bound)"
        ));
    }
    if differs(&running.cluster, &new.cluster) {
        changes.push("[cluster] (secrets, session store) changed".into());
    }
    if differs(&running.control, &new.control) {
        changes.push("[control] (control-plane store, node) changed".into());
    }
    // The subscriber is installed once; `access_log` (read per request) does apply.
    if running.log.level != new.log.level || running.log.format != new.log.format {
        changes.push("[log] level or format changed".into());
    }
    changes
}

fn differs<T: Debug>(a: &T, b: &T) -> bool {
    format!("{a:?}") != format!("{b:?}")
}

/// The names of the settings of one listening address that differ.
fn listener_fields(a: &ListenerConfig, b: &ListenerConfig) -> Vec<&'static str> {
    let mut fields = Vec::new();
    if a.kind != b.kind {
        fields.push("kind");
    }
    if a.backlog != b.backlog {
        fields.push("backlog");
    }
    if a.tfo_queue() != b.tfo_queue() {
        fields.push("tcp_fastopen");
    }
    // The accept loops hold their listener's settings from the start, redirects included.
    if a.https_port != b.https_port {
        fields.push("https_port");
    }
    if a.redirect_status != b.redirect_status {
        fields.push("redirect_status");
    }
    if a.proxy_protocol != b.proxy_protocol {
        fields.push("proxy_protocol");
    }
    if a.proxy_protocol_from != b.proxy_protocol_from {
        fields.push("proxy_protocol_from");
    }
    if fields.is_empty() && differs(a, b) {
        fields.push("settings");
    }
    fields
}

#[cfg(test)]
mod tests {
    use super::not_applied;

    fn config(extra: &str) -> tlsgate_config::Config {
        tlsgate_config::parse(&format!(
            "{extra}\n[[listener]]\nlisten = \"127.0.0.1:8443\"\n\n[[listener]]\nlisten = \"127.0.0.1:8080\"\nkind = \"redirect\"\n"
        ))
        .unwrap()
    }

    #[test]
    fn the_same_file_changes_nothing() {
        assert!(not_applied(&config(""), &config("")).is_empty());
    }

    #[test]
    fn proxy_protocol_changes_are_named() {
        let mut new = config("");
        new.listeners[0].proxy_protocol = true;
        new.listeners[0].proxy_protocol_from = vec!["10.0.0.0/8".parse().unwrap()];
        assert_eq!(
            not_applied(&config(""), &new),
            ["[[listener]] 127.0.0.1:8443 changed proxy_protocol, proxy_protocol_from (the running socket keeps the old settings)"]
        );
    }

    #[test]
    fn each_restart_only_change_is_named() {
        let running = config("");
        let mut new =
            config("[server]\nworkers = 7\nupgrade_socket = \"/run/u.sock\"\n[admin]\nlisten = \"127.0.0.1:9999\"\nallowed_hosts = [\"gw1.internal\"]\n");
        new.listeners[0].listen = "127.0.0.1:9443".parse().unwrap();
        new.listeners[1].redirect_status = 308;
        let changes = not_applied(&running, &new);
        assert_eq!(
            changes,
            [
                "[[listener]] 127.0.0.1:8443 removed (still listening)",
                "[[listener]] 127.0.0.1:8080 changed redirect_status (the running socket keeps the old settings)",
                "[[listener]] 127.0.0.1:9443 added (not listening)",
                "admin.listen 127.0.0.1:9090 -> 127.0.0.1:9999 (the admin listener stays on 127.0.0.1:9090)",
                "admin.allowed_hosts [] -> [\"gw1.internal\"] (the admin listener keeps the names it started with)",
                "server.workers 0 -> 7 (the worker threads are kept)",
                "server.upgrade_socket off -> /run/u.sock (upgrades stay off until the next restart)",
            ],
            "{changes:#?}"
        );
    }
}
