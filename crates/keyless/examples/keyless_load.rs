//! Load generator for a key server, through the gateway's own key-server client (the same pool,
//! connections, pipelining and retry code a gateway uses): keeps `--inflight` signatures
//! outstanding for `--secs` and prints signatures/s and latency percentiles as one JSON line.
//!
//! ```text
//! cargo build --release -p tlsgate-keyless --example keyless_load
//! target/release/examples/keyless_load --server 127.0.0.1:2407 --cert site.pem \
//!     --client-cert gw.pem --client-key gw.key --server-ca ca.pem \
//!     --alg ecdsa_secp256r1_sha256 --inflight 64 --secs 5
//! ```
//!
//! Used by `scripts/keyless-bench.sh` (docs/BENCHMARKS.md, keyless section).

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};
use tlsgate_keyless::client::Client;

struct Args {
    server: String,
    cert: String,
    client_cert: String,
    client_key: String,
    server_ca: String,
    alg: String,
    inflight: usize,
    connections: usize,
    secs: f64,
}

fn parse() -> Args {
    let mut a = Args {
        server: String::new(),
        cert: String::new(),
        client_cert: String::new(),
        client_key: String::new(),
        server_ca: String::new(),
        alg: "ecdsa_secp256r1_sha256".into(),
        inflight: 64,
        connections: 2,
        secs: 5.0,
    };
    let mut it = std::env::args().skip(1);
    while let Some(flag) = it.next() {
        let value = it.next().unwrap_or_else(|| panic!("{flag} needs a value"));
        match flag.as_str() {
            "--server" => a.server = value,
            "--cert" => a.cert = value,
            "--client-cert" => a.client_cert = value,
            "--client-key" => a.client_key = value,
            "--server-ca" => a.server_ca = value,
            "--alg" => a.alg = value,
            "--inflight" => a.inflight = value.parse().expect("--inflight N"),
            "--connections" => a.connections = value.parse().expect("--connections N"),
            "--secs" => a.secs = value.parse().expect("--secs S"),
            other => panic!("unknown flag {other}"),
        }
    }
    a
}

fn main() {
    let a = parse();
    let code = match a.alg.as_str() {
        "ecdsa_secp256r1_sha256" => 0x0403,
        "rsa_pss_rsae_sha256" => 0x0804,
        "rsa_pkcs1_sha256" => 0x0401,
        other => panic!("unsupported --alg {other}"),
    };
    let pem = std::fs::read(&a.cert).expect("read --cert");
    let cert = boring::x509::X509::from_pem(&pem).expect("PEM certificate");
    let public = cert.public_key().expect("public key");
    let key_id = tlsgate_keyless::keystore::key_id(&public).expect("key id");
    let toml = format!(
        "client_certificate = {:?}\nclient_key = {:?}\nserver_ca = {:?}\nconnections_per_server = {}\nrequest_timeout = \"5s\"\nretries = 0\n",
        a.client_cert, a.client_key, a.server_ca, a.connections
    );
    let config: tlsgate_config::KeylessConfig = toml::from_str(&toml).expect("keyless settings");
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .expect("runtime");
    let client = Client::start(&config, "load", std::slice::from_ref(&a.server)).expect("client");
    // What a gateway sends (key servers sign nothing else): a TLS 1.3 CertificateVerify input
    // (64 spaces, the server context string, a SHA-256 transcript hash), or for PKCS#1 (TLS 1.2
    // only) a ServerKeyExchange input (two randoms, x25519 ServerECDHParams).
    let payload = if code == 0x0401 {
        let mut p = vec![0x5a_u8; 64];
        p.extend_from_slice(&[3, 0, 29, 32]);
        p.extend_from_slice(&[0x5a; 32]);
        p
    } else {
        let mut p = vec![0x20_u8; 64];
        p.extend_from_slice(b"TLS 1.3, server CertificateVerify\0");
        p.extend_from_slice(&[0x5a; 32]);
        p
    };
    rt.block_on(async {
        let deadline = Instant::now() + Duration::from_secs(10);
        while client.members().first().is_none_or(|m| m.connections == 0) {
            assert!(Instant::now() < deadline, "no connection to {}", a.server);
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
        let stop = Arc::new(AtomicBool::new(false));
        let started = Instant::now();
        let mut tasks = Vec::new();
        for _ in 0..a.inflight {
            let (client, stop, payload) = (client.clone(), stop.clone(), payload.clone());
            tasks.push(tokio::spawn(async move {
                let mut lat = hdrhistogram::Histogram::<u64>::new(3).expect("histogram");
                let mut errors = 0_u64;
                while !stop.load(Ordering::Relaxed) {
                    let t = Instant::now();
                    match client.clone().sign(key_id, code, payload.clone()).await {
                        Ok(_) => {
                            let _ = lat.record(t.elapsed().as_micros() as u64);
                        }
                        Err(_) => errors += 1,
                    }
                }
                (lat, errors)
            }));
        }
        tokio::time::sleep(Duration::from_secs_f64(a.secs)).await;
        stop.store(true, Ordering::Relaxed);
        let mut all = hdrhistogram::Histogram::<u64>::new(3).expect("histogram");
        let mut errors = 0;
        for t in tasks {
            let (h, e) = t.await.expect("task");
            all.add(h).expect("same bounds");
            errors += e;
        }
        let secs = started.elapsed().as_secs_f64();
        println!(
            "{{\"alg\":\"{}\",\"inflight\":{},\"signatures\":{},\"errors\":{},\"secs\":{:.3},\"per_sec\":{:.0},\"p50_us\":{},\"p99_us\":{}}}",
            a.alg,
            a.inflight,
            all.len(),
            errors,
            secs,
            all.len() as f64 / secs,
            all.value_at_quantile(0.5),
            all.value_at_quantile(0.99)
        );
    });
}
