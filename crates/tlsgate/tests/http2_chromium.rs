//! HTTP/2 across an idle release with headless Chromium (Debian's `chromium`): a browser's own
//! HTTP/2 stack and HPACK encoder (which index its request fields), which tlsgate did not write,
//! driven over the DevTools protocol (`tests/console_cdp/`), reporting what it received in its
//! net log (`--log-net-log`).
//!
//! An idle HTTP/2 connection asks the client to empty the HPACK table the client's requests
//! filled on the gateway (SETTINGS_HEADER_TABLE_SIZE 0; third_party/README.md, h2's seventh
//! change) and announces the table again with the next request. Chromium must keep its one
//! connection through that: the page's next requests after the pause are answered on the same
//! HTTP/2 session, and its net log shows the table size it was told: 4,096, 0, 4,096.

mod common;
mod console_cdp;

use console_cdp::Browser;
use std::time::Duration;
use tlsgate_testkit::require;

#[test]
fn chromium_keeps_its_http2_connection_while_the_gateway_empties_and_refills_its_table() {
    require("chromium");
    let f = common::start_edited("", "", |t| t.replace("workers = 2\n", "workers = 1\n"));
    let dir = tempfile::tempdir().unwrap();
    let netlog = dir.path().join("netlog.json");
    let mut b = Browser::start_with(&[
        console_cdp::spki_flag(&f.pki),
        // Chromium tries ::1 first for localhost; the gateway listens on 127.0.0.1.
        "--host-resolver-rules=MAP localhost 127.0.0.1".to_string(),
        "--disable-background-networking".to_string(),
        format!("--log-net-log={}", netlog.display()),
    ]);
    let origin = format!("https://localhost:{}", f.https);
    let r = b.navigate_result(&format!("{origin}/hello"));
    assert!(r.get("errorText").is_none(), "navigation failed: {r}");
    let protocol = b.eval("performance.getEntriesByType('navigation')[0].nextHopProtocol");
    assert_eq!(protocol, "h2", "the page did not load over HTTP/2");
    // Idle: released 1-2 s after the last request, the SETTINGS sent and acknowledged.
    std::thread::sleep(Duration::from_secs(4));
    // Three requests from the page: the first after the emptying, the next two after the table
    // was announced again (Chromium indexes its fields again, then refers to them).
    let fetched = b.eval(
        "(async () => {
            const out = [];
            for (let i = 0; i < 3; i++) {
                const r = await fetch('/hello?' + i, {cache: 'no-store'});
                out.push(r.status + ' ' + (await r.text()));
                await new Promise(ok => setTimeout(ok, 200));
            }
            return out.join('|');
        })()",
    );
    assert_eq!(
        fetched, "200 Hello, world!|200 Hello, world!|200 Hello, world!",
        "requests after the idle release"
    );
    let table_sizes: Vec<u64> = console_cdp::netlog_events(&netlog, "HTTP2_SESSION_RECV_SETTING")
        .iter()
        .filter(|p| p["id"].as_str().is_some_and(|id| id.contains("HEADER_TABLE_SIZE")))
        .filter_map(|p| p["value"].as_u64())
        .collect();
    let sessions = console_cdp::netlog_events(&netlog, "HTTP2_SESSION_INITIALIZED").len();
    assert_eq!(
        table_sizes,
        [4096, 0, 4096],
        "SETTINGS_HEADER_TABLE_SIZE as Chromium received them"
    );
    assert_eq!(
        sessions, 1,
        "Chromium opened {sessions} HTTP/2 sessions: the connection was not kept"
    );
}
