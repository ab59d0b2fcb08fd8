//! Issue 22, part 3: "connection closed before a complete response" on a lossy link. A gateway
//! with its default `handshake_timeout` (10 s, counted from the accept) gives up on a handshake
//! whose last flight (the client's Finished) arrives later than that, and closes the connection;
//! the client, whose side of the handshake is complete and whose request is sent, then reads an
//! EOF. At 10 % loss per direction that happens when retransmission timeouts back off (3, 6,
//! 12 s after a retransmitted SYN-ACK). Here it is made deterministic with a long delay instead:
//! 5.2 s each way puts the client's Finished 2 × 5.2 = 10.4 s after the accept.
//!
//! Asserted: under the gateway's default the probe fails with exactly that error and the packet
//! tap shows the server's FIN before any response byte; with the lab's setting
//! (`LAB_HANDSHAKE_TIMEOUT_S`, used by every experiment) the same exchange completes.
//!
//! Needs root and the release `tlsgate` binary next to this test's directory
//! (`cargo build --release -p tlsgate` first); without the binary the test fails and says so.

use std::path::{Path, PathBuf};
use tlsgate_lab::client::{probe, ProbeOpts};
use tlsgate_lab::conn_trace::traces;
use tlsgate_lab::gateway::{Gateway, GatewaySpec, Site, LAB_HANDSHAKE_TIMEOUT_S};
use tlsgate_lab::pki::Ca;
use tlsgate_lab::{Lab, LabOptions, LinkSpec};

const ONE_WAY_MS: f64 = 5_200.0;
const BODY: usize = 2048;

/// `target/release/tlsgate` for a test binary in `target/release/deps`.
fn tlsgate_exe() -> Option<PathBuf> {
    let exe = std::env::current_exe().ok()?;
    let p = exe.parent()?.parent()?.join("tlsgate");
    p.exists().then_some(p)
}

/// One probe through a lab with the long delay, against a gateway with `timeout`; returns the
/// probe's error (if any) and the server's FIN offset and in-order bytes from the tap.
fn exchange(exe: &Path, timeout: Option<u64>) -> (Option<String>, Option<u64>, u64) {
    let work = std::env::temp_dir().join(tlsgate_lab::netns::unique_id());
    std::fs::create_dir_all(&work).unwrap();
    let ca = Ca::new().unwrap();
    std::fs::write(work.join("ca.pem"), &ca.pem).unwrap();
    let c = ca.chain(&work, "slow", &["slow.lab"], 0).unwrap();
    let lab = Lab::with_options(LinkSpec::default(), LinkSpec::default(), &LabOptions::default()).unwrap();
    let spec = GatewaySpec {
        port: 443,
        admin_port: 9090,
        dynamic_records: true,
        early_data: false,
        tcp_fastopen: 0,
        sites: vec![Site {
            name: "slow".into(),
            chain: c.chain,
            key: c.key,
            ocsp_file: None,
            extra: vec![],
        }],
        bodies: vec![BODY],
        handshake_timeout_s: timeout,
        http3: false,
        quic_congestion_control: None,
    };
    let gw = Gateway::start(exe, &lab.b, &work, "gw", &spec).unwrap();
    lab.set_symmetric(LinkSpec::delay(ONE_WAY_MS)).unwrap();
    lab.start_capture();
    let po = ProbeOpts {
        sni: "slow.lab".into(),
        path: format!("/n/{BODY}/"),
        groups: Some("X25519".into()),
        connections: 1,
        no_ticket: true,
        cacert: Some(work.join("ca.pem")),
        ..ProbeOpts::default()
    };
    let s = probe(exe, &lab.a, gw.addr, &po).unwrap();
    let cap = lab.take_capture();
    let t = traces(&cap.packets);
    drop(gw);
    let _ = std::fs::remove_dir_all(&work);
    let conn = t.first().cloned().unwrap_or_default();
    (
        s.first().and_then(|s| s.error.clone()),
        conn.down.fin_offset,
        conn.down.bytes_in_order,
    )
}

#[test]
fn a_handshake_slower_than_the_gateways_timeout_is_cut_and_the_lab_allows_it() {
    let Some(exe) = tlsgate_exe() else {
        panic!("no release tlsgate binary next to the test: cargo build --release -p tlsgate first");
    };
    // Both exchanges side by side (two labs): ~40 s in all.
    let e2 = exe.clone();
    let default = std::thread::spawn(move || exchange(&e2, None));
    let lab = exchange(&exe, Some(LAB_HANDSHAKE_TIMEOUT_S));
    let default = default.join().unwrap();
    let (err, fin_offset, down) = default.clone();
    assert_eq!(
        err.as_deref(),
        Some("connection closed before a complete response"),
        "gateway default: {default:?}"
    );
    // The server's FIN came after its handshake flight only: no response record.
    let fin = fin_offset.expect("the server's FIN is in the capture");
    assert!(fin == down && fin < 8_000, "FIN at {fin}, {down} bytes in order");
    assert_eq!(lab.0, None, "lab setting: {lab:?}");
    assert!(lab.2 > BODY as u64, "the response crossed: {lab:?}");
}
