//! Any bytes as an nginx configuration: the tokenizer, the parser, include expansion (against an
//! in-memory file set) and the translation to tlsgate TOML must return a result or an error,
//! never panic; a produced TOML text must parse as a tlsgate configuration.
#![no_main]

use libfuzzer_sys::fuzz_target;
use std::path::Path;
use tlsgate_import::nginx::MemSource;

fuzz_target!(|data: &[u8]| {
    let text = String::from_utf8_lossy(data).into_owned();
    let source = MemSource::new([
        ("/etc/nginx/nginx.conf", text.clone()),
        ("/etc/nginx/snippets/ssl.conf", "ssl_protocols TLSv1.2 TLSv1.3;\nssl_session_cache shared:S:1m;\n".to_string()),
        ("/etc/nginx/conf.d/a.conf", text),
    ]);
    if let Ok(t) = tlsgate_import::import_nginx(&source, Path::new("/etc/nginx/nginx.conf"), Path::new("/etc/nginx")) {
        if let Err(e) = tlsgate_config::parse(&t.toml) {
            panic!("translation is not valid TOML for tlsgate: {e}\n{}", t.toml);
        }
    }
});
