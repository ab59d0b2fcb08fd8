//! The patched `h2` (third_party/h2, issue 18): a server connection asked to
//! `release_idle_memory` with no stream open gives back its codec's 16 KiB write buffer and
//! 8 KiB read buffer and its empty stream tables, and takes them again for the next frame and
//! stream. Measured in process with a counting allocator (live heap bytes, not RSS), over
//! in-memory streams to `h2` clients; and what follows a release (a header block larger than the
//! write buffer, a body in many frames, small requests, another release) still works, as does a
//! frame whose first bytes arrived before a pause.

use std::time::Duration;

use bytes::Bytes;
use tokio::io::{AsyncReadExt, AsyncWriteExt, DuplexStream};

#[global_allocator]
static ALLOCATOR: cap::Cap<std::alloc::System> = cap::Cap::new(std::alloc::System, usize::MAX);

/// The allocator's count is the process's: the tests run one at a time.
static ONE_AT_A_TIME: tokio::sync::Mutex<()> = tokio::sync::Mutex::const_new(());

/// Serves one connection: every request is answered 200 with a body of its own body's length
/// and its header `x-big`'s length, as text (`"<body> <header>"`). Each change of `release`
/// asks the connection to release its idle memory.
async fn serve(io: DuplexStream, mut release: tokio::sync::watch::Receiver<u32>) {
    let mut conn = h2::server::handshake(io).await.expect("server handshake");
    loop {
        tokio::select! {
            next = conn.accept() => {
                let Some(next) = next else { return };
                let (req, respond) = next.expect("request");
                tokio::spawn(answer(req, respond));
            }
            changed = release.changed() => {
                changed.expect("the test holds the sender");
                conn.release_idle_memory();
            }
        }
    }
}

async fn answer(req: http::Request<h2::RecvStream>, mut respond: h2::server::SendResponse<Bytes>) {
    let big = req.headers().get("x-big").map_or(0, |v| v.len());
    let req_fields = req.headers().get("x-fields").cloned();
    // Request fields `x-req-<i>` (a client's indexed fields, as a browser's) must arrive intact,
    // whatever the state of the HPACK table they were decoded with.
    let intact = req_fields_intact(req.headers());
    let mut body = req.into_body();
    let mut got = 0;
    while let Some(chunk) = body.data().await {
        let chunk = chunk.expect("request body");
        got += chunk.len();
        let _ = body.flow_control().release_capacity(chunk.len());
    }
    let mut resp = http::Response::builder().status(if intact { 200 } else { 500 });
    // `x-fields: n` asks for n response fields as an origin's (server, etag, ...) would be.
    for i in 0..fields_asked(req_fields) {
        resp = resp.header(format!("x-field-{i}"), field_value(i));
    }
    let resp = resp.body(()).unwrap();
    let mut send = respond.send_response(resp, false).expect("response head");
    send.send_data(Bytes::from(format!("{got} {big}")), true)
        .expect("response body");
}

/// The number of response fields an `x-fields` request header asks for.
fn fields_asked(header: Option<http::HeaderValue>) -> usize {
    header.and_then(|v| v.to_str().ok()?.parse().ok()).unwrap_or(0)
}

/// The value of response field `x-field-<i>`: as long as an ETag or a date.
fn field_value(i: usize) -> String {
    format!("\"{i:04}-5f2b1a9c-origin-value\"")
}

/// Whether every request field `x-req-<i>` holds `field_value(i)`.
fn req_fields_intact(headers: &http::HeaderMap) -> bool {
    (0..64).all(|i| {
        headers
            .get(format!("x-req-{i}"))
            .is_none_or(|v| v == field_value(i).as_str())
    })
}

/// A request carrying `n` fields `x-req-<i>` (indexed by `h2`'s encoder, as a browser's
/// `user-agent`, `accept`, ... are): 200 when the server decoded them all intact.
async fn ask_with_fields(send: &mut h2::client::SendRequest<Bytes>, n: usize) {
    let mut req = http::Request::builder().uri("http://localhost/");
    for i in 0..n {
        req = req.header(format!("x-req-{i}"), field_value(i));
    }
    let mut ready = send.clone().ready().await.expect("ready");
    let (resp, _) = ready.send_request(req.body(()).unwrap(), true).expect("send");
    let resp = resp.await.expect("response");
    assert_eq!(resp.status(), 200, "the server decoded the request's fields wrong");
    let mut body = resp.into_body();
    while let Some(chunk) = body.data().await {
        chunk.expect("response body");
    }
}

/// A request for `n` response fields; the fields of the response, checked.
async fn ask_fields(send: &mut h2::client::SendRequest<Bytes>, n: usize) {
    let req = http::Request::builder()
        .uri("http://localhost/")
        .header("x-fields", n)
        .body(())
        .unwrap();
    let mut ready = send.clone().ready().await.expect("ready");
    let (resp, _) = ready.send_request(req, true).expect("send");
    let resp = resp.await.expect("response");
    assert_eq!(resp.status(), 200);
    for i in 0..n {
        assert_eq!(resp.headers()[format!("x-field-{i}")], field_value(i), "field {i}");
    }
    let mut body = resp.into_body();
    while let Some(chunk) = body.data().await {
        chunk.expect("response body");
    }
}

/// A client connection to a new server task.
async fn connect(release: &tokio::sync::watch::Sender<u32>) -> h2::client::SendRequest<Bytes> {
    let (client, server) = tokio::io::duplex(64 * 1024);
    tokio::spawn(serve(server, release.subscribe()));
    let (send, conn) = h2::client::handshake(client).await.expect("client handshake");
    tokio::spawn(async move {
        let _ = conn.await;
    });
    send
}

/// One request (`big` bytes in header `x-big`, `body` bytes of body); the response's text.
async fn ask(send: &mut h2::client::SendRequest<Bytes>, big: usize, body: usize) -> String {
    let mut req = http::Request::builder().uri("http://localhost/");
    if big > 0 {
        req = req.header("x-big", "b".repeat(big));
    }
    let mut ready = send.clone().ready().await.expect("ready");
    let (resp, mut stream) = ready.send_request(req.body(()).unwrap(), body == 0).expect("send");
    if body > 0 {
        let mut left = body;
        while left > 0 {
            let n = left.min(10_000);
            stream.reserve_capacity(n);
            while stream.capacity() == 0 {
                std::future::poll_fn(|cx| stream.poll_capacity(cx))
                    .await
                    .expect("capacity")
                    .unwrap();
            }
            let n = n.min(stream.capacity());
            left -= n;
            stream.send_data(Bytes::from(vec![b'x'; n]), left == 0).expect("data");
        }
    }
    let resp = resp.await.expect("response");
    assert_eq!(resp.status(), 200);
    let mut body = resp.into_body();
    let mut text = Vec::new();
    while let Some(chunk) = body.data().await {
        let chunk = chunk.expect("response body");
        let _ = body.flow_control().release_capacity(chunk.len());
        text.extend_from_slice(&chunk);
    }
    String::from_utf8(text).unwrap()
}

/// Lets every task run until it waits.
async fn settle() {
    tokio::time::sleep(Duration::from_millis(50)).await;
}

/// A client writing raw frames to a new server task: the preface and an empty SETTINGS sent.
async fn raw_client(release: &tokio::sync::watch::Sender<u32>) -> DuplexStream {
    let (mut client, server) = tokio::io::duplex(64 * 1024);
    tokio::spawn(serve(server, release.subscribe()));
    client.write_all(b"PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n").await.unwrap();
    client.write_all(&[0, 0, 0, 4, 0, 0, 0, 0, 0]).await.unwrap();
    client
}

/// Reads frames until the response HEADERS on `stream`; its payload (the header block).
async fn response_block(client: &mut DuplexStream, stream: u8) -> Vec<u8> {
    let mut head = [0u8; 9];
    tokio::time::timeout(Duration::from_secs(5), async {
        loop {
            client.read_exact(&mut head).await.expect("a frame from the server");
            let len = u32::from_be_bytes([0, head[0], head[1], head[2]]) as usize;
            let mut payload = vec![0u8; len];
            client.read_exact(&mut payload).await.unwrap();
            if head[3] == 1 && head[5..9] == [0, 0, 0, stream] {
                return payload;
            }
        }
    })
    .await
    .expect("no response HEADERS")
}

/// Asks every server connection to release, and returns the live heap bytes this freed.
async fn release_all(release: &tokio::sync::watch::Sender<u32>) -> usize {
    settle().await;
    let before = ALLOCATOR.allocated();
    release.send_modify(|n| *n += 1);
    settle().await;
    before.saturating_sub(ALLOCATOR.allocated())
}

#[tokio::test(flavor = "current_thread")]
async fn an_idle_server_connection_releases_its_buffers_and_serves_again() {
    let _one = ONE_AT_A_TIME.lock().await;
    let (release, _) = tokio::sync::watch::channel(0u32);
    let n = 50;
    let mut conns = Vec::new();
    for _ in 0..n {
        let mut send = connect(&release).await;
        assert_eq!(ask(&mut send, 0, 0).await, "0 0");
        conns.push(send);
    }
    // Freed per server connection: the codec's two buffers (24 KiB) and the stream store's,
    // received and sent frame tables (3-4 KiB); nothing without the patch's release.
    let freed = release_all(&release).await as f64 / n as f64 / 1024.0;
    eprintln!("{freed:.1} KiB freed per idle server connection");
    assert!(freed >= 24.0, "{freed:.1} KiB freed per idle server connection");
    // Nothing is left to free a second time.
    let again = release_all(&release).await as f64 / n as f64 / 1024.0;
    assert!(again < 0.5, "{again:.1} KiB freed by a second release");

    // The buffers are taken again as needed: a header block larger than the write buffer
    // (sent in CONTINUATION frames), a body in many frames, small requests; then released again.
    for send in &mut conns {
        assert_eq!(ask(send, 40_000, 0).await, "0 40000");
        assert_eq!(ask(send, 0, 100_000).await, "100000 0");
        assert_eq!(ask(send, 0, 0).await, "0 0");
    }
    let freed = release_all(&release).await as f64 / n as f64 / 1024.0;
    // (The large request grew and moved the buffers; at least the write buffer goes again.)
    assert!(
        freed >= 16.0,
        "{freed:.1} KiB freed per connection by the second idle spell"
    );
    for send in &mut conns {
        assert_eq!(ask(send, 0, 0).await, "0 0");
    }
}

/// A release asked for while a stream is open frees nothing of that connection, and the stream
/// completes.
#[tokio::test(flavor = "current_thread")]
async fn a_release_with_a_stream_open_leaves_the_connection_as_it_is() {
    let _one = ONE_AT_A_TIME.lock().await;
    let (release, _) = tokio::sync::watch::channel(0u32);
    let mut send = connect(&release).await;
    assert_eq!(ask(&mut send, 0, 0).await, "0 0");
    // A request whose body is not finished keeps its stream open across the release.
    let mut ready = send.clone().ready().await.expect("ready");
    let req = http::Request::builder().uri("http://localhost/").body(()).unwrap();
    let (resp, mut stream) = ready.send_request(req, false).expect("send");
    stream.send_data(Bytes::from_static(b"abc"), false).expect("data");
    let freed = release_all(&release).await;
    assert!(freed < 1024, "{freed} bytes freed with a stream open");
    stream.send_data(Bytes::from_static(b"de"), true).expect("data");
    let mut body = resp.await.expect("response").into_body();
    let chunk = body.data().await.expect("body").expect("body chunk");
    assert_eq!(&chunk[..], b"5 0");
}

/// A frame whose first bytes arrive before a release (the read buffer holds them, so it is
/// kept) and whose rest arrives after it is read whole.
#[tokio::test(flavor = "current_thread")]
async fn a_frame_split_across_a_pause_is_read_whole() {
    let _one = ONE_AT_A_TIME.lock().await;
    let (release, _) = tokio::sync::watch::channel(0u32);
    let mut client = raw_client(&release).await;
    // HEADERS on stream 1, END_STREAM | END_HEADERS: GET, http, /, :authority localhost.
    let block = [&[0x82, 0x86, 0x84, 0x41, 9][..], b"localhost"].concat();
    let mut frame = vec![0, 0, block.len() as u8, 1, 0x05, 0, 0, 0, 1];
    frame.extend_from_slice(&block);
    client.write_all(&frame[..5]).await.unwrap();
    // A release with part of a frame read keeps the read buffer (and what is in it).
    release_all(&release).await;
    client.write_all(&frame[5..]).await.unwrap();
    let found = response_block(&mut client, 1).await;
    // ":status: 200" is HPACK static index 8.
    assert_eq!(found.first(), Some(&0x88), "{found:?}");
}

/// Marks when the buffer it owns is freed.
struct Owner(Vec<u8>, std::sync::Arc<std::sync::atomic::AtomicBool>);

impl AsRef<[u8]> for Owner {
    fn as_ref(&self) -> &[u8] {
        &self.0
    }
}

impl Drop for Owner {
    fn drop(&mut self) {
        self.1.store(true, std::sync::atomic::Ordering::SeqCst);
    }
}

/// A response header whose value is a view into a larger buffer (a proxy's origin read buffer)
/// goes into the server's HPACK dynamic table as a copy: once the response is sent, the buffer is
/// freed although the connection, and the table entry, stay.
#[tokio::test(flavor = "current_thread")]
async fn the_encoder_table_keeps_no_view_into_a_response_s_buffer() {
    let freed = std::sync::Arc::new(std::sync::atomic::AtomicBool::new(false));
    let mut buffer = b"server: origin/1.0\r\nx-origin: kept in the table\r\n".to_vec();
    buffer.resize(8192, b' ');
    let buffer = Bytes::from_owner(Owner(buffer, freed.clone()));
    let value = http::HeaderValue::from_maybe_shared(buffer.slice(30..47)).unwrap();
    assert_eq!(value, "kept in the table");
    drop(buffer);
    let (client, server) = tokio::io::duplex(64 * 1024);
    let serving = tokio::spawn(async move {
        let mut conn = h2::server::handshake(server).await.expect("server handshake");
        let (_req, mut respond) = conn.accept().await.expect("a request").expect("request");
        let resp = http::Response::builder().header("x-origin", value).body(()).unwrap();
        respond.send_response(resp, true).expect("response");
        // The connection stays open (its table with it) until the client goes.
        while let Some(next) = conn.accept().await {
            drop(next);
        }
    });
    let (mut send, conn) = h2::client::handshake(client).await.expect("client handshake");
    let driving = tokio::spawn(async move {
        let _ = conn.await;
    });
    let req = http::Request::builder().uri("http://localhost/").body(()).unwrap();
    let (resp, _) = send.send_request(req, true).expect("send");
    let resp = resp.await.expect("response");
    assert_eq!(resp.headers()["x-origin"], "kept in the table");
    drop(resp);
    settle().await;
    assert!(
        freed.load(std::sync::atomic::Ordering::SeqCst),
        "the server's HPACK table still holds a view into the response's buffer"
    );
    drop(send);
    driving.abort();
    serving.abort();
}

/// Two groups of 40 connections, each released once: the plain group asked with no fields once,
/// the indexed group asked with `fields` fields twice (so that a table holds them). What a release
/// freed per connection in each group, and the indexed group, kept for more requests.
struct Tables {
    n: usize,
    freed_plain: f64,
    freed_indexed: f64,
    indexed: tokio::sync::watch::Sender<u32>,
    indexed_conns: Vec<h2::client::SendRequest<Bytes>>,
    _plain_conns: Vec<h2::client::SendRequest<Bytes>>,
}

impl Tables {
    async fn fill(fields: usize, ask: impl AsyncFn(&mut h2::client::SendRequest<Bytes>, usize)) -> Self {
        let n = 40;
        let (plain, _) = tokio::sync::watch::channel(0u32);
        let (indexed, _) = tokio::sync::watch::channel(0u32);
        let mut plain_conns = Vec::new();
        let mut indexed_conns = Vec::new();
        for _ in 0..n {
            let mut send = connect(&plain).await;
            ask(&mut send, 0).await;
            plain_conns.push(send);
            let mut send = connect(&indexed).await;
            ask(&mut send, fields).await;
            ask(&mut send, fields).await;
            indexed_conns.push(send);
        }
        let freed_plain = release_all(&plain).await as f64 / n as f64;
        let freed_indexed = release_all(&indexed).await as f64 / n as f64;
        Tables {
            n,
            freed_plain,
            freed_indexed,
            indexed,
            indexed_conns,
            _plain_conns: plain_conns,
        }
    }

    /// Bytes per connection the indexed group's release freed beyond the plain group's.
    fn table(&self) -> f64 {
        self.freed_indexed - self.freed_plain
    }
}

/// A release also forgets the HPACK encoder's dynamic table (the response fields it indexed,
/// about an origin's worth here) and the header-block scratch buffer, and tells the client's
/// decoder so in the next header block (size updates to 0 and back): the responses after it,
/// literal and then indexed again, decode to the same fields.
#[tokio::test(flavor = "current_thread")]
async fn a_release_forgets_the_encoder_table_and_the_client_still_decodes() {
    let _one = ONE_AT_A_TIME.lock().await;
    let fields = 8;
    let mut t = Tables::fill(fields, async |send, k| ask_fields(send, k).await).await;
    let (freed_plain, freed_indexed, table) = (t.freed_plain, t.freed_indexed, t.table());
    let (indexed, indexed_conns) = (&t.indexed, &mut t.indexed_conns);
    eprintln!("{freed_plain:.0} / {freed_indexed:.0} bytes freed per connection: table {table:.0}");
    assert!(
        table >= 1024.0,
        "a release freed {table:.0} bytes more per connection whose table held {fields} fields"
    );
    for send in indexed_conns.iter_mut() {
        ask_fields(send, fields).await;
        ask_fields(send, fields).await;
        ask_fields(send, fields / 2).await;
    }
    // Released again, and again in the middle of indexed responses.
    release_all(indexed).await;
    for send in indexed_conns.iter_mut() {
        ask_fields(send, fields).await;
    }
    release_all(indexed).await;
    for send in indexed_conns.iter_mut() {
        ask_fields(send, fields).await;
        ask_fields(send, fields).await;
    }
}

/// The first header block after a release that forgot a table starts with the size updates
/// that empty the client's copy: to 0, then back to 4,096 (RFC 7541 §6.3), before `:status`.
#[tokio::test(flavor = "current_thread")]
async fn the_first_block_after_a_release_empties_the_client_s_table() {
    let _one = ONE_AT_A_TIME.lock().await;
    let (release, _) = tokio::sync::watch::channel(0u32);
    let mut client = raw_client(&release).await;
    // HEADERS, END_STREAM | END_HEADERS: GET, http, /, :authority localhost, x-fields: 3
    // (literals without indexing).
    let request = |stream: u8| {
        let block = [
            &[0x82, 0x86, 0x84, 0x01, 9][..],
            b"localhost",
            &[0x00, 8],
            b"x-fields",
            &[1],
            b"3",
        ]
        .concat();
        let mut frame = vec![0, 0, block.len() as u8, 1, 0x05, 0, 0, 0, stream];
        frame.extend_from_slice(&block);
        frame
    };
    client.write_all(&request(1)).await.unwrap();
    let first = response_block(&mut client, 1).await;
    assert_eq!(first.first(), Some(&0x88), "{first:?}");
    client.write_all(&request(3)).await.unwrap();
    let indexed = response_block(&mut client, 3).await;
    assert!(indexed.len() < first.len(), "the second response's fields are indexed");
    release_all(&release).await;
    client.write_all(&request(5)).await.unwrap();
    let after = response_block(&mut client, 5).await;
    assert_eq!(&after[..5], &[0x20, 0x3f, 0xe1, 0x1f, 0x88], "{after:?}");
    assert_eq!(after.len(), first.len() + 4, "the fields are sent as literals again");
}

/// HEADERS, END_STREAM | END_HEADERS, on `stream`: GET, http, /, :authority localhost, then
/// `x-req-0` as a literal with incremental indexing (`indexing` 0x40) or without (0x00), after
/// `prefix` (dynamic table size updates).
fn raw_request(stream: u8, prefix: &[u8], indexing: u8) -> Vec<u8> {
    let value = field_value(0);
    let block = [
        prefix,
        &[0x82, 0x86, 0x84, 0x01, 9][..],
        b"localhost",
        &[indexing, 7],
        b"x-req-0",
        &[value.len() as u8],
        value.as_bytes(),
    ]
    .concat();
    let mut frame = vec![0, 0, block.len() as u8, 1, 0x05, 0, 0, 0, stream];
    frame.extend_from_slice(&block);
    frame
}

/// The frames the server sends up to the end of the response on `stream` (status 200): the
/// SETTINGS among them, as (identifier, value) lists, each acknowledged as it is read.
async fn settings_until(client: &mut DuplexStream, stream: u8) -> Vec<Vec<(u16, u32)>> {
    let mut seen = Vec::new();
    let mut head = [0u8; 9];
    tokio::time::timeout(Duration::from_secs(5), async {
        loop {
            client.read_exact(&mut head).await.expect("a frame from the server");
            let len = u32::from_be_bytes([0, head[0], head[1], head[2]]) as usize;
            let mut payload = vec![0u8; len];
            client.read_exact(&mut payload).await.unwrap();
            if head[3] == 4 && head[4] & 1 == 0 {
                seen.push(
                    payload
                        .chunks(6)
                        .map(|s| {
                            (
                                u16::from_be_bytes([s[0], s[1]]),
                                u32::from_be_bytes([s[2], s[3], s[4], s[5]]),
                            )
                        })
                        .collect(),
                );
                client.write_all(&[0, 0, 0, 4, 1, 0, 0, 0, 0]).await.unwrap();
            }
            if head[5..9] == [0, 0, 0, stream] {
                if head[3] == 1 {
                    assert_eq!(payload[0], 0x88, "status 200: {payload:?}");
                }
                if head[4] & 1 == 1 {
                    return;
                }
            }
        }
    })
    .await
    .expect("no whole response");
    seen
}

/// A release also asks the client to empty the HPACK table its requests filled on the server
/// (SETTINGS_HEADER_TABLE_SIZE 0): the table goes when the client acknowledges, together with the
/// buffers that exchange took again, and the next request announces the table again. Requests
/// whose fields `h2`'s client encoder indexes decode intact before, between and after releases.
#[tokio::test(flavor = "current_thread")]
async fn a_release_empties_the_decoder_table_through_the_client() {
    let _one = ONE_AT_A_TIME.lock().await;
    let fields = 8;
    let mut t = Tables::fill(fields, async |send, k| ask_with_fields(send, k).await).await;
    let (n, freed_plain, freed_indexed, table) = (t.n, t.freed_plain, t.freed_indexed, t.table());
    let (indexed, indexed_conns) = (&t.indexed, &mut t.indexed_conns);
    eprintln!("{freed_plain:.0} / {freed_indexed:.0} bytes freed per connection: decoder table {table:.0}");
    assert!(
        table >= 1024.0,
        "a release freed {table:.0} bytes more per connection whose client indexed {fields} fields"
    );
    // The table is announced again with the next request, and indexing resumes.
    for send in indexed_conns.iter_mut() {
        ask_with_fields(send, fields).await;
        ask_with_fields(send, fields).await;
        ask_with_fields(send, fields / 2).await;
    }
    // Released again, twice, each time followed by indexed requests.
    for _ in 0..2 {
        let freed = release_all(indexed).await as f64 / n as f64;
        assert!(
            freed - freed_plain >= 1024.0,
            "a later release freed {freed:.0} bytes per connection"
        );
        for send in indexed_conns.iter_mut() {
            ask_with_fields(send, fields).await;
            ask_with_fields(send, fields).await;
        }
    }
}

/// The frames of that exchange, with a client that writes them by hand: after a release the
/// server sends SETTINGS_HEADER_TABLE_SIZE 0; a request whose block starts with the size update
/// to 0 (RFC 7541 §4.2) is answered, and the server announces 4,096 again right after it, so
/// the client may index again. A client whose blocks indexed nothing gets no SETTINGS at all.
#[tokio::test(flavor = "current_thread")]
async fn an_emptied_decoder_table_is_announced_again_with_the_next_request() {
    let _one = ONE_AT_A_TIME.lock().await;
    let (release, _) = tokio::sync::watch::channel(0u32);
    let request = raw_request;
    // A client that indexes nothing: no SETTINGS after a release.
    let mut quiet = raw_client(&release).await;
    quiet.write_all(&request(1, &[], 0x00)).await.unwrap();
    settings_until(&mut quiet, 1).await;
    // One that indexes `x-req-0`.
    let mut client = raw_client(&release).await;
    client.write_all(&request(1, &[], 0x40)).await.unwrap();
    settings_until(&mut client, 1).await;
    release_all(&release).await;
    quiet.write_all(&request(3, &[], 0x00)).await.unwrap();
    assert_eq!(settings_until(&mut quiet, 3).await, Vec::<Vec<(u16, u32)>>::new());
    // The server asks for the table to be emptied; the ACK is written as the SETTINGS is read.
    // Then a block that starts with the size update to 0 and refers to index 62 no more.
    let mut head = [0u8; 9];
    let mut payload = [0u8; 6];
    tokio::time::timeout(Duration::from_secs(5), client.read_exact(&mut head))
        .await
        .unwrap()
        .unwrap();
    assert_eq!(&head[..5], &[0, 0, 6, 4, 0], "a SETTINGS frame with one setting");
    client.read_exact(&mut payload).await.unwrap();
    assert_eq!(payload, [0, 1, 0, 0, 0, 0], "SETTINGS_HEADER_TABLE_SIZE 0");
    client.write_all(&[0, 0, 0, 4, 1, 0, 0, 0, 0]).await.unwrap();
    settle().await;
    client.write_all(&request(3, &[0x20], 0x00)).await.unwrap();
    // Announced again after that request: SETTINGS_HEADER_TABLE_SIZE 4,096.
    let announced = settings_until(&mut client, 3).await;
    assert_eq!(announced, vec![vec![(1, 4096)]]);
    // The client signals its table back and indexes again; the server decodes both uses.
    client.write_all(&request(5, &[0x3f, 0xe1, 0x1f], 0x40)).await.unwrap();
    settings_until(&mut client, 5).await;
    // Index 62: `x-req-0` as indexed by stream 5.
    let block = [&[0x82, 0x86, 0x84, 0x01, 9][..], b"localhost", &[0x80 | 62]].concat();
    let mut frame = vec![0, 0, block.len() as u8, 1, 0x05, 0, 0, 0, 7];
    frame.extend_from_slice(&block);
    client.write_all(&frame).await.unwrap();
    settings_until(&mut client, 7).await;
}

/// Control frames on a released connection take no buffer for long: the SETTINGS that asks a
/// client to empty the table (this client reads nothing while idle, so no ACK comes) and the
/// answer to a PING leave the write buffer released once written, and the frames read (the PING,
/// then the SETTINGS ACK) do not take the full read buffer again.
#[tokio::test(flavor = "current_thread")]
async fn control_frames_on_a_released_connection_take_no_buffer() {
    let _one = ONE_AT_A_TIME.lock().await;
    let n = 40;
    let (release, _) = tokio::sync::watch::channel(0u32);
    let mut clients = Vec::new();
    for _ in 0..n {
        let mut client = raw_client(&release).await;
        client.write_all(&raw_request(1, &[], 0x40)).await.unwrap();
        settings_until(&mut client, 1).await;
        clients.push(client);
    }
    // Each server connection writes its SETTINGS_HEADER_TABLE_SIZE 0 during the release.
    let freed = release_all(&release).await / n;
    assert!(
        freed >= 20_000,
        "a release freed {freed} bytes per connection: buffers taken again?"
    );
    // A PING each, answered; then the ACK of the SETTINGS: the connections stay released.
    settle().await;
    let before = ALLOCATOR.allocated();
    for client in &mut clients {
        client
            .write_all(&[0, 0, 8, 6, 0, 0, 0, 0, 0, 1, 2, 3, 4, 5, 6, 7, 8])
            .await
            .unwrap();
    }
    settle().await;
    for client in &mut clients {
        let mut frames = [0u8; 15 + 17];
        client.read_exact(&mut frames).await.unwrap();
        assert_eq!(&frames[..9], &[0, 0, 6, 4, 0, 0, 0, 0, 0], "the SETTINGS first");
        assert_eq!(&frames[15..24], &[0, 0, 8, 6, 1, 0, 0, 0, 0], "then the PING's ACK");
    }
    settle().await;
    let grown = ALLOCATOR.allocated().saturating_sub(before) / n;
    assert!(
        grown < 1024,
        "a PING answered on a released connection kept {grown} bytes"
    );
    for client in &mut clients {
        client.write_all(&[0, 0, 0, 4, 1, 0, 0, 0, 0]).await.unwrap();
    }
    settle().await;
    let grown = ALLOCATOR.allocated().saturating_sub(before) / n;
    assert!(
        grown < 1024,
        "a PING and a SETTINGS ACK on a released connection kept {grown} bytes"
    );
    // And the connections serve on: a request without the emptied entries, then indexing again.
    for client in &mut clients {
        client.write_all(&raw_request(3, &[0x20], 0x00)).await.unwrap();
        settings_until(client, 3).await;
    }
}
