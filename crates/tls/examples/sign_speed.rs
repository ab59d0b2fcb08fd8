//! Single-core speed of the private-key and key-exchange operations a TLS handshake costs the
//! server, with BoringSSL (what tlsgate uses: `LocalKey::sign_now`, i.e. `boring::sign::Signer`),
//! plus the "crypto ceiling" of a full TLS 1.3 handshake (one ECDSA P-256 signature + one X25519
//! key generation and derivation). Earlier versions also measured aws-lc-rs (docs/BENCHMARKS.md
//! keeps those figures); tlsgate no longer links it.
//!
//! ```text
//! cargo run --release -p tlsgate-tls --example sign_speed            # 1 s per measurement
//! SIGN_SPEED_SECS=3 taskset -c 1 target/release/examples/sign_speed  # steadier
//! ```
//!
//! Rates are per CPU-second of the measuring thread (from `/proc/thread-self/schedstat`), so
//! other work on the same core lowers the noise rather than the figures.
//!
//! ```text
//! ```

use boring::derive::Deriver;
use boring::ec::{EcGroup, EcKey};
use boring::nid::Nid;
use boring::pkey::{Id, PKey};
use boring::rsa::Rsa;
use boring::ssl::SslSignatureAlgorithm as Alg;
use std::hint::black_box;
use std::time::{Duration, Instant};
use tlsgate_tls::keys::LocalKey;

/// CPU time this thread has run (from `/proc/thread-self/schedstat`, nanosecond resolution), so
/// that other processes sharing the core do not count; wall time where that file is missing.
fn thread_cpu() -> Duration {
    static START: std::sync::OnceLock<Instant> = std::sync::OnceLock::new();
    std::fs::read_to_string("/proc/thread-self/schedstat")
        .ok()
        .and_then(|s| s.split_whitespace().next()?.parse::<u64>().ok())
        .map(Duration::from_nanos)
        .unwrap_or_else(|| START.get_or_init(Instant::now).elapsed())
}

/// Runs `op` repeatedly for about `secs` of this thread's CPU time and returns operations per
/// CPU-second.
fn rate(secs: f64, mut op: impl FnMut()) -> f64 {
    for _ in 0..20 {
        op();
    }
    let budget = Duration::from_secs_f64(secs);
    let start = thread_cpu();
    let mut n = 0u64;
    let mut batch = 8u64;
    loop {
        for _ in 0..batch {
            op();
        }
        n += batch;
        let used = thread_cpu().saturating_sub(start);
        if used >= budget {
            return n as f64 / used.as_secs_f64();
        }
        batch = (batch * 2).min(256);
    }
}

struct Row {
    name: &'static str,
    boring: f64,
}

fn main() {
    let secs: f64 = std::env::var("SIGN_SPEED_SECS")
        .ok()
        .and_then(|s| s.parse().ok())
        .unwrap_or(1.0);
    // The signed content of a TLS 1.3 CertificateVerify: 64 spaces, context string, 0, hash.
    let mut message = vec![b' '; 64];
    message.extend_from_slice(b"TLS 1.3, server CertificateVerify\0");
    message.extend_from_slice(&[0x5a; 32]);

    let ec =
        PKey::from_ec_key(EcKey::generate(&EcGroup::from_curve_name(Nid::X9_62_PRIME256V1).unwrap()).unwrap()).unwrap();
    let rsa = PKey::from_rsa(Rsa::generate(2048).unwrap()).unwrap();
    let ec_local = LocalKey::new(ec.clone());
    let rsa_local = LocalKey::new(rsa);

    let mut rows = Vec::new();
    let boring_sign = |key: &LocalKey, alg: Alg| {
        rate(secs, || {
            black_box(key.sign_now(alg, black_box(&message)).unwrap());
        })
    };

    rows.push(Row {
        name: "ECDSA P-256 SHA-256 sign",
        boring: boring_sign(&ec_local, Alg::ECDSA_SECP256R1_SHA256),
    });
    rows.push(Row {
        name: "RSA-2048 PSS SHA-256 sign",
        boring: boring_sign(&rsa_local, Alg::RSA_PSS_RSAE_SHA256),
    });
    rows.push(Row {
        name: "RSA-2048 PKCS#1 SHA-256 sign",
        boring: boring_sign(&rsa_local, Alg::RSA_PKCS1_SHA256),
    });

    // X25519: the server's share of an ECDHE key exchange (new key pair, then the shared secret).
    let peer = PKey::generate(Id::X25519).unwrap();
    let x25519_boring = rate(secs, || {
        let mine = PKey::generate(Id::X25519).unwrap();
        let mut d = Deriver::new(&mine).unwrap();
        d.set_peer(&peer).unwrap();
        black_box(d.derive_to_vec().unwrap());
        let mut public = [0u8; 32];
        black_box(mine.raw_public_key(&mut public).unwrap());
    });
    rows.push(Row {
        name: "X25519 keygen + derive",
        boring: x25519_boring,
    });

    // What a TLS client pays on top (for reading bench results): verifying the ECDSA signature.
    let ec_sig = ec_local.sign_now(Alg::ECDSA_SECP256R1_SHA256, &message).unwrap();
    let ec_verify = rate(secs, || {
        let mut v = boring::sign::Verifier::new(boring::hash::MessageDigest::sha256(), &ec).unwrap();
        v.update(black_box(&message)).unwrap();
        assert!(v.verify(&ec_sig).unwrap());
    });
    rows.push(Row {
        name: "ECDSA P-256 verify (client side)",
        boring: ec_verify,
    });

    println!("One thread, {secs} CPU-seconds per measurement (operations per CPU-second; higher is better)\n");
    println!("| operation | BoringSSL |");
    println!("|---|---:|");
    for r in &rows {
        println!("| {} | {:.0} |", r.name, r.boring);
    }
    let ecdsa = rows[0].boring;
    let ceiling = 1.0 / (1.0 / ecdsa + 1.0 / x25519_boring);
    println!(
        "\nCrypto ceiling of a full TLS 1.3 handshake (ECDSA P-256 sign + X25519, BoringSSL): {ceiling:.0} handshakes/s per core"
    );
    let rsa_ceiling = 1.0 / (1.0 / rows[1].boring + 1.0 / x25519_boring);
    println!("Same with an RSA-2048 (PSS) certificate: {rsa_ceiling:.0} handshakes/s per core");
}
