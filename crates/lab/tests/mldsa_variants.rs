//! ttlb-pq's real ML-DSA variants end to end (needs root and the release `tlsgate` binary next
//! to this test's directory, which `cargo test --release --workspace` builds; without it the
//! test fails and says so): one fast network, two
//! samples per cell. The ML-DSA sites serve their ML-DSA chain to the probe offering ML-DSA
//! (`--mldsa`), with the ML-DSA signature in the CertificateVerify; every other variant gets ECDSA.

use tlsgate_lab::exp::ttlb_pq;
use tlsgate_lab::exp::RunOpts;

#[test]
fn mldsa_variants_get_mldsa_chains_and_the_others_ecdsa() {
    let Some(exe) = std::env::current_exe()
        .ok()
        .and_then(|e| Some(e.parent()?.parent()?.join("tlsgate")))
        .filter(|p| p.exists())
    else {
        panic!("no release tlsgate binary next to the test: cargo build --release -p tlsgate first");
    };
    let out = std::env::temp_dir().join(tlsgate_lab::netns::unique_id());
    let opts = RunOpts {
        exe,
        out: out.clone(),
        quick: false,
        samples: Some(2),
        verbose: false,
        networks: vec!["35ms-1g".into()],
        sizes_kib: vec![0],
        quic_congestion_control: None,
    };
    let cells = ttlb_pq::run(&opts).unwrap();
    let json: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(out.join("ttlb-pq.json")).unwrap()).unwrap();
    let _ = std::fs::remove_dir_all(&out);
    let samples = json["samples"].as_array().unwrap();
    assert_eq!(samples.len(), 2 * 2 * 6, "initcwnd 10 and 20, six variants");
    for s in samples {
        assert_eq!(s["error"], "", "{s}");
        let chain = s["chain_bytes"].as_u64().unwrap();
        let (cert, sigalg, sig) = (
            s["cert_type"].as_str().unwrap(),
            s["sigalg"].as_str().unwrap(),
            s["signature_bytes"].as_u64().unwrap(),
        );
        match s["variant"].as_str().unwrap() {
            "pq-mldsa44" => {
                assert_eq!((cert, sigalg, sig), ("ML-DSA-44", "mldsa44", 2420), "{s}");
                assert!((7_000..9_000).contains(&chain), "{s}");
            }
            "pq-mldsa65" => {
                assert_eq!((cert, sigalg, sig), ("ML-DSA-65", "mldsa65", 3309), "{s}");
                assert!((10_000..12_000).contains(&chain), "{s}");
            }
            _ => assert_eq!(cert, "ECDSA", "{s}"),
        }
    }
    assert!(cells
        .iter()
        .any(|c| c.variant == "pq-mldsa65" && c.cert_type == "ML-DSA-65"));
}
