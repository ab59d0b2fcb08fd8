//! Why a directive is not carried over, for the directives the translation does not turn into
//! TOML: "not needed" where tlsgate already behaves that way, otherwise what tlsgate lacks.

/// The finding text for a directive the translation leaves out.
pub fn why_not(name: &str) -> &'static str {
    match name {
        // Process, files and modules.
        "user" => "not needed: run tlsgate as an unprivileged user with CAP_NET_BIND_SERVICE (docs/OPERATIONS.md)",
        "pid" => "not needed: tlsgate writes no pid file",
        "load_module" => "not needed: tlsgate has no modules",
        "worker_rlimit_nofile" | "worker_cpu_affinity" | "worker_priority" | "worker_shutdown_timeout"
        | "thread_pool" | "pcre_jit" | "daemon" | "master_process" | "env" | "lock_file" => {
            "not needed: tlsgate is one process with one worker thread per core ([server] workers)"
        }
        "events" => "not needed: tlsgate's event loop has no settings (limits: [server] max_connections)",
        "error_log" => "not translated: tlsgate logs to stderr ([log] level, format)",
        "access_log" | "log_format" | "open_log_file_cache" => {
            "not translated: tlsgate writes its own access-log format ([log] access_log_file)"
        }
        // Files and content.
        "root" | "alias" | "index" | "try_files" | "autoindex" | "types" | "default_type" | "charset"
        | "sendfile" | "sendfile_max_chunk" | "aio" | "directio" | "open_file_cache" | "open_file_cache_valid"
        | "open_file_cache_min_uses" | "open_file_cache_errors" | "expires" | "etag" | "types_hash_max_size"
        | "types_hash_bucket_size" | "output_buffers" | "postpone_output" | "ssi" | "sub_filter" => {
            "not translated: tlsgate serves no files (route to an origin instead)"
        }
        "tcp_nopush" | "tcp_nodelay" => "not needed: tlsgate sets TCP_NODELAY on every socket and sizes TLS records itself",
        "server_names_hash_bucket_size" | "server_names_hash_max_size" | "variables_hash_max_size"
        | "variables_hash_bucket_size" | "map_hash_bucket_size" | "map_hash_max_size" => "not needed: tlsgate has no hash tables to size",
        "server_tokens" => "not needed: tlsgate sends no version in its own responses",
        "gzip" | "gzip_vary" | "gzip_proxied" | "gzip_comp_level" | "gzip_buffers" | "gzip_http_version"
        | "gzip_types" | "gzip_min_length" | "gzip_disable" | "brotli" | "brotli_types" | "gzip_static" => {
            "not translated: tlsgate does not compress responses (the origin's compression passes through)"
        }
        "error_page" => "not translated: tlsgate answers its own errors with short plain-text pages",
        "client_max_body_size" => "not translated: tlsgate has no request-body size limit (bodies stream to the origin)",
        "client_body_buffer_size" | "client_body_temp_path" | "client_body_in_file_only" | "proxy_temp_path"
        | "fastcgi_temp_path" | "uwsgi_temp_path" | "scgi_temp_path" | "proxy_max_temp_file_size"
        | "proxy_temp_file_write_size" => "not needed: tlsgate streams bodies and writes nothing to disk",
        "client_body_timeout" => "not translated: tlsgate bounds a stalled request body with the upstream's header_timeout (408)",
        "large_client_header_buffers" | "client_header_buffer_size" => {
            "not translated: tlsgate's header limit is [server] max_request_header_bytes (default 32 KiB)"
        }
        "reset_timedout_connection" | "lingering_close" | "lingering_time" | "lingering_timeout" | "keepalive_requests"
        | "keepalive_time" | "keepalive_disable" | "multi_accept" | "use" | "accept_mutex" | "accept_mutex_delay"
        | "worker_connections" => "not needed: tlsgate manages client connections itself",
        // Variables and scripting.
        "map" | "geo" | "split_clients" | "set" | "perl_set" | "js_set" => "not translated: tlsgate has no variables",
        "if" => "not translated: tlsgate has no conditionals (routes match host and path prefix only)",
        "rewrite" | "rewrite_log" | "break" | "uninitialized_variable_warn" => {
            "not translated: tlsgate rewrites only a route's path prefix (rewrite_prefix)"
        }
        // Access control and limits.
        "allow" | "deny" | "auth_basic" | "auth_basic_user_file" | "auth_request" | "satisfy" => {
            "not translated: tlsgate has no access control by address or password"
        }
        "limit_req" | "limit_req_zone" | "limit_conn" | "limit_conn_zone" | "limit_rate" | "limit_rate_after"
        | "limit_req_status" | "limit_conn_status" | "limit_req_log_level" | "limit_conn_log_level" => {
            "not translated: tlsgate has no request-rate limits (its connection limits: [server] max_connections_per_source)"
        }
        "real_ip_header" | "set_real_ip_from" | "real_ip_recursive" => {
            "not translated: tlsgate trusts forwarding headers from [server] trusted_proxies, and PROXY protocol per listener"
        }
        // Other handlers.
        "fastcgi_pass" | "uwsgi_pass" | "scgi_pass" | "memcached_pass" | "fastcgi_param" | "fastcgi_index"
        | "fastcgi_split_path_info" | "uwsgi_param" | "scgi_param" => "not translated: tlsgate speaks HTTP (and gRPC) to origins only",
        "stream" => "not translated: tlsgate proxies HTTP only (no TCP/UDP stream proxying)",
        "mail" => "not translated: tlsgate proxies HTTP only (no mail proxying)",
        "http3" | "quic_retry" | "quic_gso" | "quic_host_key" | "http3_hq" => "not translated: tlsgate does not serve HTTP/3",
        // TLS without an equivalent.
        "ssl_dhparam" => "not needed: tlsgate offers no finite-field DHE suites (ECDHE only), so it needs no DH parameters",
        "ssl_stapling_verify" => "not needed: tlsgate always checks a stapled OCSP response (signature by the issuer, status, freshness)",
        "ssl_trusted_certificate" => "not needed: tlsgate checks OCSP responses against the issuer in the certificate chain",
        "resolver" | "resolver_timeout" => "not needed: tlsgate resolves names with the system resolver",
        "ssl_session_ticket_key" => {
            "not translated: tlsgate generates and rotates ticket keys itself ([tls.tickets]; across a cluster: [cluster] secret_files)"
        }
        "ssl_client_certificate" | "ssl_verify_client" | "ssl_verify_depth" | "ssl_crl" | "ssl_ocsp" | "ssl_ocsp_cache"
        | "ssl_ocsp_responder" => "not translated: tlsgate does not request client certificates",
        "ssl_password_file" => "not translated: tlsgate reads unencrypted private keys (or uses key servers: docs/KEYLESS.md)",
        "ssl_conf_command" => "not translated: tlsgate's TLS settings are the [tls] fields (BoringSSL's TLS 1.3 suites are fixed)",
        "ssl_reject_handshake" => "not translated: use [tls] unknown_sni = \"reject\" to refuse unknown server names",
        // Proxying details.
        "proxy_buffering" | "proxy_buffers" | "proxy_buffer_size" | "proxy_busy_buffers_size" | "proxy_request_buffering" => {
            "not needed: tlsgate streams bodies both ways without buffering them whole"
        }
        "proxy_redirect" => "not translated: tlsgate does not rewrite Location headers from origins",
        "proxy_cookie_domain" | "proxy_cookie_path" | "proxy_cookie_flags" => "not translated: tlsgate does not rewrite cookies",
        "proxy_cache" | "proxy_cache_path" | "proxy_cache_valid" | "proxy_cache_key" | "proxy_cache_bypass"
        | "proxy_no_cache" | "proxy_cache_use_stale" | "proxy_cache_lock" | "proxy_cache_methods" => "not translated: tlsgate does not cache responses",
        "proxy_next_upstream" | "proxy_next_upstream_tries" | "proxy_next_upstream_timeout" => {
            "not translated: tlsgate retries a bodyless request once on another server after a failed connect or TLS handshake"
        }
        "proxy_send_timeout" => "not translated: tlsgate bounds a stalled request body with the upstream's header_timeout",
        "proxy_intercept_errors" => "not translated: origin errors pass through unchanged",
        "proxy_pass_request_headers" | "proxy_pass_request_body" | "proxy_pass_header" | "proxy_ignore_headers"
        | "proxy_method" | "proxy_set_body" | "proxy_headers_hash_max_size" | "proxy_headers_hash_bucket_size" => {
            "not translated: tlsgate forwards requests and responses as they are, besides the route's header edits"
        }
        "proxy_ssl_verify" | "proxy_ssl_trusted_certificate" | "proxy_ssl_server_name" | "proxy_ssl_name"
        | "proxy_ssl_certificate" | "proxy_ssl_certificate_key" | "proxy_ssl_protocols" | "proxy_ssl_ciphers"
        | "proxy_ssl_session_reuse" | "proxy_ssl_verify_depth" => {
            "not translated: set the upstream's [upstream.tls] (tlsgate verifies origin certificates against the system CAs by default, sends SNI and resumes sessions)"
        }
        _ => "not translated: tlsgate has no equivalent",
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_reason_says_whether_it_matters() {
        for name in [
            "ssl_dhparam",
            "gzip",
            "if",
            "map",
            "whatever_new_directive",
            "client_max_body_size",
        ] {
            let why = why_not(name);
            assert!(
                why.starts_with("not needed") || why.starts_with("not translated"),
                "{name}: {why}"
            );
        }
    }
}
