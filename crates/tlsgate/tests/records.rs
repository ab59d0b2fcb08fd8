//! Dynamic TLS record sizing, observed on the wire: a relay between curl and the gateway parses
//! the TLS record headers the gateway sends. The relay's connection to the gateway advertises a
//! 1400-byte MSS (loopback's 65 KB MSS would make every record "one segment"). And at full size,
//! the records of a large response fill the segments they travel in (counted by the client's
//! socket).

mod common;

use std::io::{Read, Write};
use std::net::{TcpListener, TcpStream};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};
use tlsgate_testkit::Origin;

/// Each application-data record's length, with when the relay passed it on.
type Seen = Arc<Mutex<Vec<(Instant, usize)>>>;

/// Accepts one client, relays it to `target` with a small MSS, and records the length of every
/// application-data record (type 23) the target sends, with when it passed. With `stall`, a small
/// receive buffer, and a pause in reading of that long after every MiB (the target's writes block
/// meanwhile).
fn relay(target: u16, stall: Option<Duration>) -> (u16, Seen, std::thread::JoinHandle<()>) {
    let listener = TcpListener::bind("127.0.0.1:0").unwrap();
    let port = listener.local_addr().unwrap().port();
    let records = Arc::new(Mutex::new(Vec::new()));
    let seen = records.clone();
    let handle = std::thread::spawn(move || {
        let (mut client, _) = listener.accept().unwrap();
        let socket = socket2::Socket::new(socket2::Domain::IPV4, socket2::Type::STREAM, None).unwrap();
        socket.set_tcp_mss(1400).unwrap();
        if stall.is_some() {
            socket.set_recv_buffer_size(64 << 10).unwrap();
        }
        socket
            .connect(&std::net::SocketAddr::from(([127, 0, 0, 1], target)).into())
            .unwrap();
        let mut server: TcpStream = socket.into();
        let (mut c2, mut s2) = (client.try_clone().unwrap(), server.try_clone().unwrap());
        let up = std::thread::spawn(move || {
            let _ = std::io::copy(&mut c2, &mut s2);
            let _ = s2.shutdown(std::net::Shutdown::Write);
        });
        // Server -> client, parsing record headers on the way.
        let mut pending: Vec<u8> = Vec::new();
        let mut buf = [0u8; 65536];
        let mut relayed = 0usize;
        loop {
            if let Some(pause) = stall {
                if relayed >= 1 << 20 {
                    std::thread::sleep(pause);
                    relayed = 0;
                }
            }
            let n = match server.read(&mut buf) {
                Ok(0) | Err(_) => break,
                Ok(n) => n,
            };
            if client.write_all(&buf[..n]).is_err() {
                break;
            }
            relayed += n;
            pending.extend_from_slice(&buf[..n]);
            while pending.len() >= 5 {
                let len = u16::from_be_bytes([pending[3], pending[4]]) as usize;
                if pending.len() < 5 + len {
                    break;
                }
                if pending[0] == 23 {
                    seen.lock().unwrap().push((Instant::now(), len));
                }
                pending.drain(..5 + len);
            }
        }
        let _ = client.shutdown(std::net::Shutdown::Write);
        let _ = up.join();
    });
    (port, records, handle)
}

fn fetch_through_relay(f: &common::Fixture, bytes: usize) -> Vec<usize> {
    fetch_through(f, bytes, None)
}

fn fetch_through(f: &common::Fixture, bytes: usize, stall: Option<Duration>) -> Vec<usize> {
    fetch_n_through(f, bytes, stall, 1)
        .into_iter()
        .map(|(_, len)| len)
        .collect()
}

/// `n` fetches of `bytes` on one connection (curl `--rate 2/s`: half a second between them).
fn fetch_n_through(f: &common::Fixture, bytes: usize, stall: Option<Duration>, n: usize) -> Vec<(Instant, usize)> {
    let (port, records, handle) = relay(f.https, stall);
    let url = format!("https://localhost:{port}/big?n={bytes}");
    let ca = f.pki.ca_file();
    let mut args = vec![
        "-sS",
        "--tlsv1.2",
        "--tls-max",
        "1.2",
        "--http1.1",
        "--cacert",
        ca.to_str().unwrap(),
        "-w",
        "%{size_download} ",
        "--rate",
        "2/s",
    ];
    for _ in 0..n {
        args.extend(["-o", "/dev/null", url.as_str()]);
    }
    let out = tlsgate_testkit::run("curl", &args, b"", Duration::ZERO, Duration::from_secs(30));
    assert_eq!(
        out.stdout.trim(),
        vec![bytes.to_string(); n].join(" "),
        "{}\ngateway log:\n{}",
        out.all(),
        f.gw.log()
    );
    handle.join().unwrap();
    let r = records.lock().unwrap().clone();
    r
}

fn big_route(origin: &Origin) -> String {
    format!(
        "[[site.route]]\npath_prefix = \"/big\"\nupstream = \"o\"\n\n[[upstream]]\nname = \"o\"\nservers = [\"{}\"]\n",
        origin.addr()
    )
}

#[test]
fn records_start_at_one_segment_and_grow_to_full_size() {
    let origin = Origin::start("o");
    let f = common::start("", &big_route(&origin));
    let records = fetch_through_relay(&f, 4 << 20);
    assert!(records.len() > 10, "{records:?}");
    // TLS 1.2 GCM adds 24 bytes (nonce + tag) to each payload; one segment is at most 1400 bytes.
    let first = &records[..4];
    assert!(
        first.iter().all(|&len| len <= 1400),
        "first records must fit one segment: {first:?}"
    );
    let largest = *records.iter().max().unwrap();
    assert!(
        largest >= 16_384,
        "records must grow to full size, largest was {largest}: {:?}",
        &records[..records.len().min(60)]
    );
    assert!(
        f.gw.metric(
            "tlsgate_tls_record_writes_total",
            &["site=\"main\"", "phase=\"segment\""]
        ) >= 1.0
    );
    assert!(f.gw.metric("tlsgate_tls_record_writes_total", &["phase=\"full\""]) >= 1.0);
}

#[test]
fn fixed_size_records_when_dynamic_sizing_is_off() {
    let origin = Origin::start("o");
    let f = common::start(
        "[tls]\ndynamic_records = false\nmax_record_size = 4096\n",
        &big_route(&origin),
    );
    let records = fetch_through_relay(&f, 1 << 20);
    let largest = *records.iter().max().unwrap();
    assert!(
        largest <= 4096 + 24 && largest > 4000,
        "records capped at 4096 bytes of payload: {largest}"
    );
    assert!(
        records[..4].iter().any(|&len| len > 1400),
        "no one-segment ramp when off: {:?}",
        &records[..4]
    );
    assert!(f.gw.metric("tlsgate_tls_record_writes_total", &["phase=\"fixed\""]) >= 1.0);
}

/// A write that stays blocked longer than `dynamic_records_idle` (a client that stops reading,
/// a path losing packets) must finish with the record BoringSSL already sealed: the ramp may
/// restart only after it. Shrinking the size under the pending record made BoringSSL refuse the
/// retry (SSL_R_BAD_WRITE_RETRY) and the gateway cut the response short.
#[test]
fn a_write_blocked_longer_than_the_idle_time_finishes_whole() {
    let origin = Origin::start("o");
    let f = common::start("", &big_route(&origin));
    // Full-size records by the first stall; each stall (1.5 s) outlasts the 1 s idle time.
    let records = fetch_through(&f, 4 << 20, Some(Duration::from_millis(1500)));
    assert!(
        records.iter().any(|&len| len >= 16_384),
        "{:?}",
        &records[..records.len().min(60)]
    );
    assert!(!f.gw.log().contains("BAD_WRITE_RETRY"), "{}", f.gw.log());
}

/// A keep-alive connection idle for longer than `dynamic_records_idle` starts again with
/// one-segment records; short writes on a new connection take no sizing decision at all.
#[test]
fn records_ramp_again_after_an_idle_spell() {
    let origin = Origin::start("o");
    let f = common::start("[tls]\ndynamic_records_idle = \"200ms\"\n", &big_route(&origin));
    // Two 1 MiB responses half a second apart, on one connection (one relay, one accept).
    let records = fetch_n_through(&f, 1 << 20, None, 2);
    let lens: Vec<usize> = records.iter().map(|(_, len)| *len).collect();
    assert!(
        lens.iter().any(|&len| len >= 16_384),
        "the first response ramps to full size: {lens:?}"
    );
    // The second response: the records after the pause.
    let gap = records
        .windows(2)
        .position(|w| w[1].0 - w[0].0 >= Duration::from_millis(300))
        .unwrap_or_else(|| panic!("no pause between the responses: {lens:?}"));
    let second = &lens[gap + 1..];
    assert!(second.len() > 8, "{second:?}");
    assert!(
        second[..6].iter().all(|&len| len <= 1400),
        "after the idle spell the records must start at one segment again: {:?}",
        &second[..second.len().min(40)]
    );
    let handshakes = f.gw.metric("tlsgate_handshakes_total", &[]);
    assert_eq!(handshakes, 1.0, "both responses on one connection: {}", f.gw.metrics());
}

#[test]
fn a_large_response_leaves_in_full_segments_not_one_per_record() {
    use std::os::fd::AsFd as _;
    const BYTES: usize = 1 << 20;
    let origin = Origin::start("o");
    let f = common::start("", &big_route(&origin));
    let mut connector = boring::ssl::SslConnector::builder(boring::ssl::SslMethod::tls()).unwrap();
    connector.set_ca_file(f.pki.ca_file()).unwrap();
    let tcp = TcpStream::connect(("127.0.0.1", f.https)).unwrap();
    tcp.set_read_timeout(Some(Duration::from_secs(20))).unwrap();
    let mut tls = connector.build().connect("localhost", tcp).unwrap();
    write!(tls, "GET /big?n={BYTES} HTTP/1.1\r\nHost: localhost\r\n\r\n").unwrap();
    let mut got = Vec::new();
    let mut chunk = vec![0u8; 1 << 16];
    let body_at = loop {
        let n = tls.read(&mut chunk).expect("the response arrives");
        assert!(n > 0, "the connection ended after {} bytes", got.len());
        got.extend_from_slice(&chunk[..n]);
        if let Some(at) = got.windows(4).position(|w| w == b"\r\n\r\n") {
            if got.len() >= at + 4 + BYTES {
                break at + 4;
            }
        }
    };
    assert!(
        got.starts_with(b"HTTP/1.1 200"),
        "{:?}",
        String::from_utf8_lossy(&got[..body_at])
    );
    assert_eq!(got.len() - body_at, BYTES);
    let segments = tlsgate_tls::tcp_data_segs_in(tls.get_ref().as_fd()).unwrap();
    // At least 64 records of 16 KiB carried the body. One segment per record (each record sent
    // as it is sealed) would be at least as many segments; sent with `MSG_MORE` while the same
    // write continues, four records share loopback's 64 KiB segments.
    let records = (BYTES / 16_384) as u32;
    assert!(
        segments * 4 <= records * 3,
        "{segments} segments carried {records} records or more"
    );
}
