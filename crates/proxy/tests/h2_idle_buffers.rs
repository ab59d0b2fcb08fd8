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
    let mut body = req.into_body();
    let mut got = 0;
    while let Some(chunk) = body.data().await {
        let chunk = chunk.expect("request body");
        got += chunk.len();
        let _ = body.flow_control().release_capacity(chunk.len());
    }
    let mut resp = http::Response::builder().status(200);
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

/// A release also forgets the HPACK encoder's dynamic table (the response fields it indexed,
/// about an origin's worth here) and the header-block scratch buffer, and tells the client's
/// decoder so in the next header block (size updates to 0 and back): the responses after it,
/// literal and then indexed again, decode to the same fields.
#[tokio::test(flavor = "current_thread")]
async fn a_release_forgets_the_encoder_table_and_the_client_still_decodes() {
    let _one = ONE_AT_A_TIME.lock().await;
    let n = 40;
    let fields = 8;
    let (plain, _) = tokio::sync::watch::channel(0u32);
    let (indexed, _) = tokio::sync::watch::channel(0u32);
    let mut plain_conns = Vec::new();
    let mut indexed_conns = Vec::new();
    for _ in 0..n {
        let mut send = connect(&plain).await;
        ask_fields(&mut send, 0).await;
        plain_conns.push(send);
        let mut send = connect(&indexed).await;
        ask_fields(&mut send, fields).await;
        ask_fields(&mut send, fields).await;
        indexed_conns.push(send);
    }
    let freed_plain = release_all(&plain).await as f64 / n as f64;
    let freed_indexed = release_all(&indexed).await as f64 / n as f64;
    let table = freed_indexed - freed_plain;
    eprintln!("{freed_plain:.0} / {freed_indexed:.0} bytes freed per connection: table {table:.0}");
    assert!(
        table >= 1024.0,
        "a release freed {table:.0} bytes more per connection whose table held {fields} fields"
    );
    for send in &mut indexed_conns {
        ask_fields(send, fields).await;
        ask_fields(send, fields).await;
        ask_fields(send, fields / 2).await;
    }
    // Released again, and again in the middle of indexed responses.
    release_all(&indexed).await;
    for send in &mut indexed_conns {
        ask_fields(send, fields).await;
    }
    release_all(&indexed).await;
    for send in &mut indexed_conns {
        ask_fields(send, fields).await;
        ask_fields(send, fields).await;
    }
    drop(plain_conns);
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
