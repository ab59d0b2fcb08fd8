//! ML-DSA certificates served for real (docs/PQ-CERTS.md): a site with an ECDSA certificate and
//! ML-DSA-44 and ML-DSA-65 chains. Clients that offer an ML-DSA scheme get the matching chain and
//! verify it against its ML-DSA root: `tlsgate probe` (BoringSSL) and pyOpenSSL on the OpenSSL 4
//! that `cryptography` >= 50 bundles (installed by scripts/deps.sh into its own venv). Clients
//! without ML-DSA (`openssl s_client` 3.0, `tlsgate probe` without `--mldsa`) still get ECDSA.
//! Keyless: a real `tlsgate keyserver` signs the ML-DSA handshakes.

mod common;
mod keyless_env;

use serde_json::Value;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::Duration;
use tlsgate_testkit::mldsa::MlDsaFiles;
use tlsgate_testkit::{free_port, GatewayProcess, TestPki};
use tlsgate_tls::mldsa::Level;
use tlsgate_tls::pki::KeyKind;

/// `tlsgate probe --json` against `https` with SNI localhost, verifying with `ca`.
fn probe(https: u16, ca: &Path, args: &[&str]) -> Value {
    let out = Command::new(common::binary())
        .args(["probe", "--json", "-n", "1", "--sni", "localhost", "--path", "/hello"])
        .args(["--cacert", ca.to_str().unwrap()])
        .args(args)
        .arg(format!("127.0.0.1:{https}"))
        .output()
        .expect("run tlsgate probe");
    let stdout = String::from_utf8_lossy(&out.stdout).into_owned();
    let report: Value = serde_json::from_str(&stdout)
        .unwrap_or_else(|e| panic!("not JSON ({e}): {stdout}\n{}", String::from_utf8_lossy(&out.stderr)));
    assert_eq!(
        out.status.code(),
        Some(0),
        "probe {args:?} failed: {}",
        report["connections"][0]["error"]
    );
    report["connections"][0].clone()
}

/// The interpreter of the venv scripts/deps.sh makes (cryptography >= 50, pyOpenSSL).
fn pq_python() -> PathBuf {
    let venv = std::env::var_os("TLSGATE_PQ_VENV")
        .map(PathBuf::from)
        .unwrap_or_else(|| {
            let data = std::env::var_os("XDG_DATA_HOME")
                .map(PathBuf::from)
                .unwrap_or_else(|| PathBuf::from(std::env::var_os("HOME").expect("HOME")).join(".local/share"));
            data.join("tlsgate/pq-venv")
        });
    let python = venv.join("bin/python");
    let ok = Command::new(&python)
        .args([
            "-c",
            "import OpenSSL, cryptography, sys; sys.exit(int(cryptography.__version__.split('.')[0]) < 50)",
        ])
        .status()
        .is_ok_and(|s| s.success());
    assert!(
        ok,
        "{} cannot import pyOpenSSL with cryptography >= 50: run scripts/test.sh (scripts/deps.sh, tlsgate_install_pq_python)",
        python.display()
    );
    python
}

/// pyOpenSSL client: TLS 1.3 to 127.0.0.1:PORT, SNI localhost, verifying against CAFILE,
/// offering SIGALGS (OpenSSL names; `default` for OpenSSL 4's own list); GETs /hello and prints
/// what it got as JSON.
const PY_CLIENT: &str = r#"
import json, socket, sys
from OpenSSL import SSL
from OpenSSL._util import lib
from cryptography.hazmat.backends.openssl import backend
from cryptography.hazmat.primitives.serialization import Encoding

port, cafile, sigalgs = int(sys.argv[1]), sys.argv[2], sys.argv[3]
ctx = SSL.Context(SSL.TLS_CLIENT_METHOD)
ctx.set_min_proto_version(SSL.TLS1_3_VERSION)
ctx.load_verify_locations(cafile)
ctx.set_verify(SSL.VERIFY_PEER, lambda conn, cert, err, depth, ok: ok)
if sigalgs != "default":
    assert lib.SSL_CTX_set1_sigalgs_list(ctx._context, sigalgs.encode()) == 1, "sigalgs"
sock = socket.create_connection(("127.0.0.1", port), timeout=10)
sock.setblocking(True)  # pyOpenSSL wants a blocking socket (the test's run() bounds the time)
conn = SSL.Connection(ctx, sock)
conn.set_tlsext_host_name(b"localhost")
conn.set_connect_state()
conn.do_handshake()
chain = conn.get_peer_cert_chain(as_cryptography=True)
conn.sendall(b"GET /hello HTTP/1.1\r\nHost: localhost\r\nConnection: close\r\n\r\n")
body = b""
while True:
    try:
        data = conn.recv(65536)
    except (SSL.ZeroReturnError, SSL.SysCallError):
        break
    if not data:
        break
    body += data
print(json.dumps({
    "openssl": backend.openssl_version_text(),
    "version": conn.get_protocol_version_name(),
    "leaf_key": type(chain[0].public_key()).__name__,
    "chain_der": [len(c.public_bytes(Encoding.DER)) for c in chain],
    "signature_oids": [c.signature_algorithm_oid.dotted_string for c in chain],
    "status": body.split(b"\r\n", 1)[0].decode(),
}))
"#;

fn py_client(python: &Path, https: u16, ca: &Path, sigalgs: &str) -> Value {
    let dir = tempfile::tempdir().unwrap();
    let script = dir.path().join("mldsa_client.py");
    std::fs::write(&script, PY_CLIENT).unwrap();
    let port = https.to_string();
    let out = tlsgate_testkit::run(
        python.to_str().unwrap(),
        &[script.to_str().unwrap(), &port, ca.to_str().unwrap(), sigalgs],
        b"",
        Duration::ZERO,
        Duration::from_secs(30),
    );
    assert_eq!(out.status, Some(0), "pyOpenSSL client failed: {}", out.all());
    serde_json::from_str(out.stdout.trim()).unwrap_or_else(|e| panic!("{e}: {}", out.all()))
}

/// A CA bundle with the test CA (ECDSA) and the ML-DSA roots.
fn bundle(pki: &TestPki, roots: &[&MlDsaFiles]) -> PathBuf {
    let mut text = std::fs::read_to_string(pki.ca_file()).unwrap();
    for r in roots {
        text.push_str(&std::fs::read_to_string(&r.root).unwrap());
    }
    pki.write("bundle.pem", &text)
}

fn check_output(config: &str) -> String {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("tlsgate.toml");
    std::fs::write(&path, config).unwrap();
    let out = Command::new(common::binary())
        .args(["check", "--config", path.to_str().unwrap()])
        .output()
        .expect("run tlsgate check");
    format!(
        "{}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    )
}

#[test]
fn mldsa_clients_get_the_mldsa_chain_and_the_others_ecdsa() {
    tlsgate_testkit::require("openssl");
    let python = pq_python();
    let pki = TestPki::new();
    let names = ["localhost", "127.0.0.1"];
    let (ec, ec_key) = pki.leaf("ecdsa", &names, KeyKind::EcdsaP256);
    let m44 = pki.mldsa_chain("mldsa44", &names, Level::MlDsa44);
    let m65 = pki.mldsa_chain("mldsa65", &names, Level::MlDsa65);
    let certs = [
        common::cert_block(&ec, &ec_key),
        common::cert_block(&m44.chain, &m44.key),
        common::cert_block(&m65.chain, &m65.key),
    ]
    .join("\n");
    let (https, admin) = (free_port(), free_port());
    let config = common::config_with_certs(&certs, https, admin, "", "");
    let gw = GatewayProcess::start(common::binary(), &config, admin, &[https]);

    // tlsgate's own BoringSSL client offering only ML-DSA-65 (and ECDSA): the ML-DSA-65 chain,
    // verified against its root (a wrong chain would fail --cacert).
    let c = probe(https, &m65.root, &["--sigalgs", "mldsa65:ecdsa_secp256r1_sha256"]);
    assert_eq!(c["cert_type"], "ML-DSA-65", "{c:#}");
    assert_eq!(c["sigalg"], "mldsa65", "{c:#}");
    assert_eq!(c["signature_bytes"], 3309, "{c:#}");
    assert_eq!(c["chain_certs"], 2, "{c:#}");
    let chain_bytes = c["chain_bytes"].as_u64().unwrap();
    assert!(
        chain_bytes > 2 * (1952 + 3309),
        "two ML-DSA-65 certificates: {chain_bytes}"
    );
    assert_eq!(c["http_status"], 200, "{c:#}");
    // --mldsa puts mldsa44:mldsa65:mldsa87 in front of --sigalgs: the site's first ML-DSA chain
    // (ML-DSA-44).
    let c = probe(https, &m44.root, &["--mldsa", "--sigalgs", "ecdsa_secp256r1_sha256"]);
    let kind = (c["cert_type"].as_str(), c["sigalg"].as_str());
    assert_eq!(kind, (Some("ML-DSA-44"), Some("mldsa44")), "{c:#}");
    assert_eq!(c["signature_bytes"], 2420, "{c:#}");
    // No flag: boring-sys's patched BoringSSL offers ML-DSA first by default (docs/PQ-CERTS.md).
    let all_roots = bundle(&pki, &[&m44, &m65]);
    let c = probe(https, &all_roots, &[]);
    assert_eq!(c["cert_type"], "ML-DSA-44", "{c:#}");
    // Without ML-DSA in the offer: ECDSA, verified against the ECDSA test CA.
    let c = probe(
        https,
        &pki.ca_file(),
        &["--sigalgs", "ecdsa_secp256r1_sha256:rsa_pss_rsae_sha256"],
    );
    let kind = (c["cert_type"].as_str(), c["sigalg"].as_str());
    assert_eq!(kind, (Some("ECDSA"), Some("ecdsa_secp256r1_sha256")), "{c:#}");
    // ML-DSA offered over TLS 1.2: ML-DSA is TLS 1.3 only, so ECDSA.
    let c = probe(https, &pki.ca_file(), &["--mldsa", "--tls", "1.2"]);
    assert_eq!(c["cert_type"], "ECDSA", "{c:#}");

    // An independent client: pyOpenSSL on OpenSSL 4 (cryptography >= 50), verifying against a
    // bundle of every root. Offering ML-DSA-65 first: the ML-DSA-65 chain.
    let py = py_client(&python, https, &all_roots, "mldsa65:ecdsa_secp256r1_sha256");
    assert!(py["openssl"].as_str().unwrap().starts_with("OpenSSL 4"), "{py}");
    assert_eq!(py["version"], "TLSv1.3", "{py}");
    assert_eq!(py["leaf_key"], "MLDSA65PublicKey", "{py}");
    assert_eq!(py["signature_oids"][0], "2.16.840.1.101.3.4.3.18", "{py}");
    assert_eq!(py["status"], "HTTP/1.1 200 OK", "{py}");
    // Its default list (OpenSSL 4 puts ML-DSA first): an ML-DSA chain too.
    let py = py_client(&python, https, &all_roots, "default");
    assert!(py["leaf_key"].as_str().unwrap().starts_with("MLDSA"), "{py}");
    // The same client offering ECDSA only: ECDSA.
    let py = py_client(&python, https, &all_roots, "ecdsa_secp256r1_sha256:rsa_pss_rsae_sha256");
    assert_eq!(py["leaf_key"], "ECPublicKey", "{py}");

    // openssl s_client 3.0 (Debian 12): no ML-DSA, gets the ECDSA chain and verifies it.
    let out = tlsgate_testkit::run(
        "openssl",
        &[
            "s_client",
            "-connect",
            &format!("127.0.0.1:{https}"),
            "-servername",
            "localhost",
            "-CAfile",
            pki.ca_file().to_str().unwrap(),
            "-verify_return_error",
            "-brief",
        ],
        b"",
        Duration::from_millis(300),
        Duration::from_secs(15),
    );
    let text = out.all();
    assert!(text.contains("Signature type: ECDSA"), "{text}");
    assert!(text.contains("Verification: OK"), "{text}");

    // The gateway's own account: handshakes by certificate type.
    let served = |cert: &str| gw.metric("tlsgate_handshakes_total", &[&format!("cert=\"{cert}\"")]);
    assert!(served("mldsa65") >= 2.0 && served("mldsa44") >= 1.0, "{}", gw.metrics());

    // `tlsgate check`: sizes of the ML-DSA chains.
    let report = check_output(&config);
    assert!(
        report.contains("ML-DSA-65: public key 1952 bytes, handshake signature 3309 bytes, certificate signatures 3309 + 3309 bytes"),
        "{report}"
    );
    assert!(report.contains("ML-DSA-44: public key 1312 bytes"), "{report}");
}

#[test]
fn a_key_server_signs_mldsa_handshakes() {
    let pki = TestPki::new();
    let names = ["localhost", "127.0.0.1"];
    let m65 = pki.mldsa_chain("mldsa65", &names, Level::MlDsa65);
    let files = keyless_env::keyserver_files(&pki);
    let ks = keyless_env::start_keyserver(&pki, &files, free_port(), &[&m65.key], "");
    let client = keyless_env::client_cert(&pki, "gateway-client", "gateway");
    let (ec, ec_key) = pki.leaf("ecdsa", &names, KeyKind::EcdsaP256);
    let certs = format!(
        "{}\n{}",
        common::cert_block(&ec, &ec_key),
        keyless_env::keyless_cert_block(&m65.chain, &[ks.addr()])
    );
    let (https, admin) = (free_port(), free_port());
    let top = keyless_env::keyless_section(&client, &pki.ca_file());
    let config = common::config_with_certs(&certs, https, admin, &top, "");
    let _gw = GatewayProcess::start(common::binary(), &config, admin, &[https]);
    let before = ks.ops();
    let c = probe(https, &m65.root, &["--mldsa"]);
    assert_eq!(
        (c["cert_type"].as_str(), c["sigalg"].as_str()),
        (Some("ML-DSA-65"), Some("mldsa65")),
        "{c:#}"
    );
    assert_eq!(c["http_status"], 200, "{c:#}");
    assert!(ks.ops() >= before + 1.0, "the key server made the signature");
}
