//! Any text must parse to a config or an error, and a parsed config must validate without panicking.
#![no_main]

use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    if let Ok(text) = std::str::from_utf8(data) {
        if let Ok(config) = tlsgate_config::parse(text) {
            let _ = tlsgate_config::validate::validate(&config);
        }
    }
});
