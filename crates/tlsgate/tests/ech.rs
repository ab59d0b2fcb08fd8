//! Issue 21, part 1: Encrypted ClientHello across a cluster, keys derived per epoch from the
//! cluster secret. Real `tlsgate serve` nodes; the client is Go's crypto/tls (tests/go/echclient,
//! built here with `go build`), plus `tlsgate probe --ech-config` and raw ClientHello bytes.
//! Sites: `public.example` (the ECH public name, its own certificate) and `secret.example` (the
//! inner name the client hides).

mod common;

use common::{binary, config_with_certs, existing_site_certs, extra_site, site_certs, tlsgate, wait_until};
use serde_json::Value;
use std::io::{Read, Write};
use std::path::{Path, PathBuf};
use std::sync::OnceLock;
use std::time::{Duration, SystemTime, UNIX_EPOCH};
use tlsgate_testkit::{free_port, toml_path, GatewayProcess, TestPki};
use tlsgate_tls::pki::KeyKind;

const INNER: &str = "secret.example";
const PUBLIC: &str = "public.example";

/// The Go client, built once per test binary into a temporary directory.
fn echclient() -> &'static Path {
    static BUILT: OnceLock<tlsgate_testkit::go::GoProgram> = OnceLock::new();
    &BUILT
        .get_or_init(|| {
            // Go >= 1.23 (its ECH client).
            let src = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/go/echclient");
            tlsgate_testkit::go::build(&src, "echclient")
        })
        .path
}

/// Certificates and secrets shared by the nodes of a test.
struct Cluster {
    pki: TestPki,
    sites: String,
}

struct Node {
    https: u16,
    gw: GatewayProcess,
}

impl Cluster {
    fn new() -> Self {
        let pki = TestPki::new();
        let _ = site_certs(&pki);
        let mut sites = extra_site(&pki, "public", &[PUBLIC], &[KeyKind::EcdsaP256]);
        sites.push_str(&extra_site(&pki, "secret", &[INNER], &[KeyKind::EcdsaP256]));
        Self { pki, sites }
    }

    fn secret(&self, byte: u8) -> PathBuf {
        self.pki.write(
            &format!("cluster-{byte:02x}.key"),
            &format!("{}\n", format!("{byte:02x}").repeat(32)),
        )
    }

    /// A node whose cluster secret is `secret`, with `ech` lines added to `[ech]`.
    fn node(&self, secret: &Path, ech: &str) -> Node {
        let (https, admin) = (free_port(), free_port());
        let top = format!(
            "[cluster]\nsecret_files = [{}]\n\n[ech]\npublic_name = \"{PUBLIC}\"\n{ech}\n",
            toml_path(secret)
        );
        let text = config_with_certs(&existing_site_certs(&self.pki), https, admin, &top, &self.sites);
        let gw = GatewayProcess::start(binary(), &text, admin, &[https]);
        Node { https, gw }
    }

    /// The Go client against `node`, offering `config` (base64) for the inner name.
    fn go(&self, node: &Node, config: &str, retry: bool) -> Value {
        let ca = self.pki.ca_file();
        let addr = format!("127.0.0.1:{}", node.https);
        let mut args = vec![
            "-addr",
            &addr,
            "-sni",
            INNER,
            "-config",
            config,
            "-ca",
            ca.to_str().unwrap(),
        ];
        if retry {
            args.push("-retry");
        }
        let out = tlsgate_testkit::run(
            echclient().to_str().unwrap(),
            &args,
            b"",
            Duration::ZERO,
            Duration::from_secs(20),
        );
        serde_json::from_str(out.stdout.trim()).unwrap_or_else(|e| panic!("echclient ({e}): {}", out.all()))
    }
}

/// `tlsgate ech --json` for a node's configuration (at `at`, Unix seconds, if given).
fn ech_cmd(node: &Node, at: Option<u64>) -> Value {
    let config = node.gw.config.to_str().unwrap().to_string();
    let at = at.map(|s| s.to_string());
    let mut args = vec!["ech", "--json", "--config", &config];
    if let Some(at) = &at {
        args.extend(["--at", at]);
    }
    let out = tlsgate(&args);
    assert_eq!(out.status, Some(0), "{}", out.all());
    serde_json::from_str(&out.stdout).unwrap_or_else(|e| panic!("not JSON ({e}): {}", out.all()))
}

fn list(report: &Value, which: &str) -> String {
    report[which]["ech_config_list"].as_str().unwrap().to_string()
}

fn ech_count(node: &Node, outcome: &str) -> f64 {
    node.gw
        .metric("tlsgate_ech_handshakes_total", &[&format!("outcome=\"{outcome}\"")])
}

fn now() -> u64 {
    SystemTime::now().duration_since(UNIX_EPOCH).unwrap().as_secs()
}

/// Asserts the Go client reached the inner site with ECH accepted.
fn assert_inner(v: &Value, what: &str) {
    assert_eq!(v["accepted"], true, "{what}: {v}");
    assert_eq!(v["served_names"], serde_json::json!([INNER]), "{what}: {v}");
    assert_eq!(v["body"], "site secret", "{what}: {v}");
}

#[test]
fn config_from_one_node_is_accepted_by_another_and_refused_by_another_cluster() {
    let c = Cluster::new();
    let secret = c.secret(0x5a);
    let (a, b) = (c.node(&secret, ""), c.node(&secret, ""));
    let other = c.node(&c.secret(0x6b), "");

    // What node A's configuration publishes...
    let report = ech_cmd(&a, None);
    assert_eq!(report["public_name"], PUBLIC);
    assert_eq!(
        report["next"]["epoch"].as_u64(),
        Some(report["current"]["epoch"].as_u64().unwrap() + 1)
    );
    assert_eq!(report["current"]["current_until"], report["next"]["current_from"]);
    let current = list(&report, "current");
    // ...is accepted by node B, which serves the inner name, and so is the next epoch's config
    // (a DNS job may publish it ahead of the switch).
    assert_inner(&c.go(&b, &current, false), "A's config on B");
    assert_inner(&c.go(&b, &list(&report, "next"), false), "next epoch on B");
    assert!(ech_count(&b, "accepted") >= 2.0, "{}", b.gw.metrics());
    let log = b.gw.log();
    assert!(
        log.contains("ech=true") || log.contains("\"ech\":true"),
        "access log records ECH:\n{log}"
    );

    // tlsgate probe offers it too, and reports acceptance and the name served.
    let ca = c.pki.ca_file();
    let out = tlsgate(&[
        "probe",
        "--json",
        "-n",
        "1",
        "--cacert",
        ca.to_str().unwrap(),
        "--connect-to",
        &format!("127.0.0.1:{}", a.https),
        "--ech-config",
        &current,
        "--expect-ech",
        &format!("{INNER}:{}", a.https),
    ]);
    assert_eq!(out.status, Some(0), "{}", out.all());
    let probe: Value = serde_json::from_str(&out.stdout).unwrap();
    let conn = &probe["connections"][0];
    assert_eq!(conn["ech"]["accepted"], true, "{probe}");
    assert_eq!(conn["ech"]["served_name"], INNER, "{probe}");
    assert_eq!(conn["http_status"], 200, "{probe}");

    // A node of another cluster cannot decrypt it: rejected, answered with its own config as
    // retry config (authenticated by the public name's certificate), which then works there.
    let refused = c.go(&other, &current, false);
    assert_eq!(refused["rejected"], true, "{refused}");
    assert_eq!(refused["accepted"], false, "{refused}");
    let theirs = list(&ech_cmd(&other, None), "current");
    assert_eq!(refused["retry_configs"], theirs.as_str(), "{refused}");
    assert_ne!(theirs, current, "another secret derives other keys");
    assert_inner(&c.go(&other, &current, true), "retry on the other cluster");
    assert!(ech_count(&other, "rejected") >= 2.0, "{}", other.gw.metrics());
    // The probe reports the rejection and the retry configs.
    let out = tlsgate(&[
        "probe",
        "--json",
        "-n",
        "1",
        "--cacert",
        ca.to_str().unwrap(),
        "--connect-to",
        &format!("127.0.0.1:{}", other.https),
        "--ech-config",
        &current,
        &format!("{INNER}:{}", other.https),
    ]);
    assert_ne!(out.status, Some(0), "{}", out.all());
    let probe: Value = serde_json::from_str(&out.stdout).unwrap();
    assert_eq!(
        probe["connections"][0]["ech"]["retry_configs"],
        theirs.as_str(),
        "{probe}"
    );
}

#[test]
fn stale_configs_get_retry_configs_that_work() {
    let c = Cluster::new();
    let node = c.node(&c.secret(0x5a), "");
    let rotation = 3600;
    // Retried once if an epoch boundary falls between the two commands.
    let (current, previous, stale) = loop {
        let t = now();
        let current = ech_cmd(&node, Some(t));
        let previous = ech_cmd(&node, Some(t - rotation));
        let stale = ech_cmd(&node, Some(t - 2 * rotation));
        if ech_cmd(&node, None)["current"]["epoch"] == current["current"]["epoch"] {
            break (
                list(&current, "current"),
                list(&previous, "current"),
                list(&stale, "current"),
            );
        }
    };
    // The previous epoch's config is still accepted (a DNS answer up to one rotation old).
    assert_inner(&c.go(&node, &previous, false), "previous epoch");
    // Two epochs back: rejected with the current config as retry config, which works.
    let v = c.go(&node, &stale, false);
    assert_eq!(
        (v["rejected"].as_bool(), v["accepted"].as_bool()),
        (Some(true), Some(false)),
        "{v}"
    );
    assert_eq!(v["retry_configs"], current.as_str(), "{v}");
    let v = c.go(&node, &stale, true);
    assert_eq!(v["retried"], true, "{v}");
    assert_inner(&v, "after retry");
    assert!(ech_count(&node, "grease_or_stale") >= 2.0, "{}", node.gw.metrics());
}

#[test]
fn keys_rotate_on_the_live_context_and_the_hook_gets_each_new_config() {
    let c = Cluster::new();
    let script = c.pki.write(
        "hook.sh",
        "printf '%s %s\\n' \"$TLSGATE_ECH_EPOCH\" \"$1\" >> \"$0.out\"\n",
    );
    let script = script.to_str().unwrap().to_string();
    let rotation = 2;
    let hook = format!("rotation = \"{rotation}s\"\nhook = [\"sh\", \"{script}\"]\n");
    let node = c.node(&c.secret(0x5a), &hook);
    let epoch_now = || node.gw.metric("tlsgate_ech_epoch", &[]) as u64;
    let start = epoch_now();
    assert!(start > 0, "{}", node.gw.metrics());
    // At the next epoch the hook gets the new epoch's config, as `tlsgate ech` computes it.
    let record = PathBuf::from(format!("{script}.out"));
    assert!(
        wait_until(Duration::from_secs(10), || std::fs::read_to_string(&record)
            .is_ok_and(|t| !t.is_empty())),
        "hook never ran:\n{}",
        node.gw.log()
    );
    let text = std::fs::read_to_string(&record).unwrap();
    let (epoch, value) = text.lines().next().unwrap().split_once(' ').unwrap();
    let epoch: u64 = epoch.parse().unwrap();
    assert!(epoch > start, "{text} after epoch {start}");
    assert_eq!(
        value,
        list(&ech_cmd(&node, Some(epoch * rotation)), "current"),
        "{text}"
    );
    // No reload: two epochs past its start (where the keys installed at start no longer reach),
    // the node accepts its current config. Tried a few times: a slow machine may cross another
    // boundary between reading the epoch and connecting.
    assert!(
        wait_until(Duration::from_secs(10), || epoch_now() >= start + 2),
        "{}",
        node.gw.metrics()
    );
    let accepted = (0..5).any(|_| {
        let config = list(&ech_cmd(&node, Some(epoch_now() * rotation)), "current");
        let v = c.go(&node, &config, false);
        v["accepted"] == true && v["body"] == "site secret"
    });
    assert!(accepted, "{}", node.gw.log());
    assert!(
        node.gw.metric("tlsgate_ech_key_rotations_total", &[]) >= 2.0,
        "{}",
        node.gw.metrics()
    );
}

/// A TLS 1.3 ClientHello record for `sni` carrying `ech` as its encrypted_client_hello body.
fn client_hello(sni: &str, ech: &[u8]) -> Vec<u8> {
    fn ext(out: &mut Vec<u8>, kind: u16, body: &[u8]) {
        out.extend_from_slice(&kind.to_be_bytes());
        out.extend_from_slice(&(body.len() as u16).to_be_bytes());
        out.extend_from_slice(body);
    }
    let mut exts = Vec::new();
    let name = sni.as_bytes();
    let mut sn = Vec::new();
    sn.extend_from_slice(&((name.len() + 3) as u16).to_be_bytes());
    sn.push(0);
    sn.extend_from_slice(&(name.len() as u16).to_be_bytes());
    sn.extend_from_slice(name);
    ext(&mut exts, 0, &sn);
    ext(&mut exts, 43, &[2, 3, 4]); // supported_versions: TLS 1.3
    ext(&mut exts, 10, &[0, 2, 0, 29]); // supported_groups: x25519
    ext(&mut exts, 13, &[0, 2, 4, 3]); // signature_algorithms: ecdsa_secp256r1_sha256
    let mut share = vec![0, 36, 0, 29, 0, 32];
    share.extend_from_slice(&[9u8; 32]);
    ext(&mut exts, 51, &share); // key_share
    ext(&mut exts, 0xfe0d, ech);
    let mut body = vec![3, 3];
    body.extend_from_slice(&[7u8; 32]); // random
    body.push(0); // session id
    body.extend_from_slice(&[0, 2, 0x13, 0x01]); // TLS_AES_128_GCM_SHA256
    body.extend_from_slice(&[1, 0]); // null compression
    body.extend_from_slice(&(exts.len() as u16).to_be_bytes());
    body.extend_from_slice(&exts);
    let mut hs = vec![1];
    hs.extend_from_slice(&(body.len() as u32).to_be_bytes()[1..]);
    hs.extend_from_slice(&body);
    let mut record = vec![22, 3, 1];
    record.extend_from_slice(&(hs.len() as u16).to_be_bytes());
    record.extend_from_slice(&hs);
    record
}

/// Sends `bytes` and returns the first 7 bytes the gateway answers (a record header and more).
fn exchange(node: &Node, bytes: &[u8]) -> Vec<u8> {
    let mut s = std::net::TcpStream::connect(("127.0.0.1", node.https)).unwrap();
    s.set_read_timeout(Some(Duration::from_secs(5))).unwrap();
    s.write_all(bytes).unwrap();
    let mut buf = [0u8; 7];
    let mut got = 0;
    while got < buf.len() {
        match s.read(&mut buf[got..]) {
            Ok(0) | Err(_) => break,
            Ok(n) => got += n,
        }
    }
    buf[..got].to_vec()
}

#[test]
fn malformed_ech_extensions_fail_only_their_own_handshake() {
    let c = Cluster::new();
    let node = c.node(&c.secret(0x5a), "");
    let current = list(&ech_cmd(&node, None), "current");
    // Truncated, trailing bytes, empty, of an unknown type: a decode_error alert (50) each.
    let mut well_formed = vec![0, 0, 1, 0, 1, 42, 0, 32];
    well_formed.extend_from_slice(&[5u8; 32]);
    well_formed.extend_from_slice(&[0, 16]);
    well_formed.extend_from_slice(&[6u8; 16]);
    let mut trailing = well_formed.clone();
    trailing.push(0);
    for bad in [&well_formed[..9], &trailing[..], &[][..], &[7u8][..]] {
        let answer = exchange(&node, &client_hello(PUBLIC, bad));
        assert_eq!(answer.first(), Some(&21), "an alert record for {bad:?}: {answer:?}");
        assert_eq!(answer.get(6), Some(&50), "decode_error for {bad:?}: {answer:?}");
    }
    // A well-formed offer for a config this node does not hold (GREASE-like), and one with an
    // empty payload: the handshake goes on with the outer hello (a ServerHello comes back); the
    // offers are counted as grease_or_stale.
    for odd in [&well_formed[..], &[0, 0, 1, 0, 1, 42, 0, 0, 0, 0][..]] {
        let answer = exchange(&node, &client_hello(PUBLIC, odd));
        assert_eq!(answer.first(), Some(&22), "a handshake record for {odd:?}: {answer:?}");
    }
    assert!(
        wait_until(Duration::from_secs(5), || ech_count(&node, "grease_or_stale") >= 1.0),
        "{}",
        node.gw.metrics()
    );
    // Everyone else is still served.
    assert_inner(&c.go(&node, &current, false), "after the malformed hellos");
}
