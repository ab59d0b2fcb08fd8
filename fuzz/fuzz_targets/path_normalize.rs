//! Path normalisation must never panic on untrusted paths, and its output must be a fixed point
//! that starts with `/` and has no dot segments or doubled slashes left.
#![no_main]

use libfuzzer_sys::fuzz_target;
use tlsgate_wire::path::normalize;

fuzz_target!(|data: &[u8]| {
    let Ok(text) = std::str::from_utf8(data) else { return };
    if let Ok(out) = normalize(text) {
        assert!(out.starts_with('/'));
        assert!(!out.contains("//"), "{text:?} -> {out:?}");
        assert!(!out.contains("/./") && !out.contains("/../"), "{text:?} -> {out:?}");
        assert!(matches!(normalize(&out), Ok(std::borrow::Cow::Borrowed(_))), "{text:?} -> {out:?}");
    }
});
