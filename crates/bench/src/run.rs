//! The load loop: `-t` threads, each with one single-threaded event loop running its share of
//! the `-c` connections as local tasks that record into the thread's own [`Stats`] (no locks and
//! no atomics on the hot path except the `-n` budget). `--rate` paces every sender on its own
//! fixed schedule ([`Pacer`]); HTTP/2 lives in [`h2`].

mod h2;
mod h3;
mod lean;

use crate::args::{Limit, Mode, Plan};
use crate::client::{forget_session, Client};
use crate::http::{parse_response, Parsed};
use crate::report::{ErrorKind, Stats, Summary};
use crate::tls_opts::tcp_connect;
use std::cell::RefCell;
use std::rc::Rc;
use std::sync::atomic::{AtomicI64, AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpStream;
use tokio::time::timeout;

type Tls = tokio_boring::SslStream<TcpStream>;

struct Shared {
    plan: Plan,
    client: Client,
    start: Instant,
    deadline: Option<Instant>,
    remaining: AtomicI64,
    /// Hold mode: connections that finished their first request (or failed).
    settled: AtomicUsize,
    /// Hold mode: of those, the ones that are open.
    open: AtomicUsize,
    /// Hold mode: becomes true once every connection has settled.
    ready: tokio::sync::watch::Sender<bool>,
    /// Counters for the progress line (only when one is shown).
    progress: Option<Arc<crate::progress::Counters>>,
}

/// A sender's fixed schedule under `--rate`: the k-th operation is due at
/// `start + phase + k * interval`, whatever happened to the previous ones (wrk2's model), so a
/// stalled server shows up as latency instead of as fewer requests.
pub(crate) struct Pacer {
    next: Instant,
    interval: Duration,
}

impl Pacer {
    /// Sender `index` of `senders`, sharing `rate` operations per second; `None` without a rate.
    fn new(sh: &Shared, index: usize, senders: usize) -> Option<Self> {
        let rate = sh.plan.rate?;
        let interval = Duration::from_secs_f64(senders as f64 / rate);
        // Spread the senders' phases over one interval so they do not fire together.
        let phase = interval.mul_f64(index as f64 / senders as f64);
        Some(Self {
            next: sh.start + phase,
            interval,
        })
    }

    /// Waits until the next operation is due; returns its intended start.
    async fn wait(&mut self) -> Instant {
        let due = self.next;
        self.next += self.interval;
        // tokio's timer fires on whole milliseconds, up to 1 ms late, which would add to every
        // latency measured from `due`: sleep to 1 ms before and yield the rest of the way.
        if let Some(early) = due.checked_sub(Duration::from_millis(1)) {
            tokio::time::sleep_until(early.into()).await;
        }
        while Instant::now() < due {
            tokio::task::yield_now().await;
        }
        due
    }
}

/// Waits for the pacer, if any; the intended start of the operation.
async fn pace(pacer: &mut Option<Pacer>) -> Option<Instant> {
    match pacer {
        Some(p) => Some(p.wait().await),
        None => None,
    }
}

impl Shared {
    /// Takes one operation from the budget; false when the run is over.
    fn claim(&self) -> bool {
        match self.plan.limit {
            Limit::Duration(_) => self.deadline.is_none_or(|d| Instant::now() < d),
            Limit::Count(_) => self.remaining.fetch_sub(1, Ordering::Relaxed) > 0,
            Limit::Hold(_) => true,
        }
    }

    fn over(&self) -> bool {
        match self.plan.limit {
            Limit::Duration(_) => self.deadline.is_some_and(|d| Instant::now() >= d),
            Limit::Count(_) => self.remaining.load(Ordering::Relaxed) <= 0,
            Limit::Hold(_) => false,
        }
    }
}

struct Conn {
    tls: Tls,
    buf: Vec<u8>,
}

/// Runs the plan and returns the merged summary.
pub fn run(plan: &Plan) -> anyhow::Result<Summary> {
    let client = Client::new(plan)?;
    let start = Instant::now();
    let deadline = match plan.limit {
        Limit::Duration(d) => Some(start + d),
        _ => None,
    };
    let remaining = match plan.limit {
        Limit::Count(n) => i64::try_from(n).unwrap_or(i64::MAX),
        _ => 0,
    };
    let progress = crate::progress::Progress::start(plan);
    let shared = Arc::new(Shared {
        plan: plan.clone(),
        client,
        start,
        deadline,
        remaining: AtomicI64::new(remaining),
        settled: AtomicUsize::new(0),
        open: AtomicUsize::new(0),
        ready: tokio::sync::watch::Sender::new(false),
        progress: progress.as_ref().map(|p| p.counters()),
    });
    let mut threads = Vec::with_capacity(plan.threads);
    let mut first = 0;
    for i in 0..plan.threads {
        let conns = plan.connections / plan.threads + usize::from(i < plan.connections % plan.threads);
        let sh = shared.clone();
        let range = first..first + conns;
        first += conns;
        threads.push(
            std::thread::Builder::new()
                .name(format!("bench-{i}"))
                .spawn(move || thread_main(sh, range))?,
        );
    }
    let mut total = Stats::default();
    for t in threads {
        let stats = t.join().map_err(|_| anyhow::anyhow!("a bench thread panicked"))??;
        total.merge(&stats);
    }
    drop(progress);
    Ok(Summary::new(plan, &total))
}

fn thread_main(shared: Arc<Shared>, conns: std::ops::Range<usize>) -> anyhow::Result<Stats> {
    forget_session();
    let rt = tokio::runtime::Builder::new_current_thread().enable_all().build()?;
    let local = tokio::task::LocalSet::new();
    let stats = Rc::new(RefCell::new(Stats::default()));
    let h3 = if shared.plan.h3 {
        Some(Rc::new(h3::H3Client::new(&shared)?))
    } else {
        None
    };
    let lean = if shared.plan.lean {
        Some(Rc::new(crate::lean::Lean::new(
            shared.plan.sni.as_deref(),
            &shared.plan.alpn_wire,
            shared.plan.delegated_credentials,
        )?))
    } else {
        None
    };
    local.block_on(&rt, async {
        let tasks: Vec<_> = conns
            .map(|i| {
                if let Some(lean) = &lean {
                    tokio::task::spawn_local(lean::connection(shared.clone(), stats.clone(), lean.clone(), i))
                } else if let Some(client) = &h3 {
                    tokio::task::spawn_local(h3::connection(shared.clone(), stats.clone(), client.clone()))
                } else if shared.plan.h2 && shared.plan.mode == Mode::NewConn {
                    tokio::task::spawn_local(h2::new_conn(shared.clone(), stats.clone(), i))
                } else if shared.plan.h2 {
                    tokio::task::spawn_local(h2::connection(shared.clone(), stats.clone(), i))
                } else {
                    tokio::task::spawn_local(connection(shared.clone(), stats.clone(), i))
                }
            })
            .collect();
        for t in tasks {
            let _ = t.await;
        }
    });
    let mut stats = stats.take();
    stats.elapsed = shared.start.elapsed();
    Ok(stats)
}

async fn connection(sh: Arc<Shared>, st: Rc<RefCell<Stats>>, index: usize) {
    let mut pacer = Pacer::new(&sh, index, sh.plan.connections);
    match sh.plan.mode {
        // Every connection is opened once, as wrk does, even when the others have used up a
        // small `-n` before it got to connect (so `-c N` means N handshakes); reconnects stop
        // when the run is over.
        Mode::KeepAlive => {
            for attempt in 0.. {
                if attempt > 0 && sh.over() {
                    return;
                }
                let Some(mut conn) = open(&sh, &st).await else {
                    // A failed connection attempt uses up one operation, so `-n` ends even when
                    // every attempt fails.
                    sh.claim();
                    continue;
                };
                loop {
                    let due = pace(&mut pacer).await;
                    if !sh.claim() {
                        return;
                    }
                    match request(&sh, &st, &mut conn, due).await {
                        Some(false) => {}
                        Some(true) | None => break,
                    }
                }
            }
        }
        Mode::NewConn => loop {
            let due = pace(&mut pacer).await;
            if !sh.claim() {
                return;
            }
            let started = due.unwrap_or_else(Instant::now);
            if let Some(mut conn) = open(&sh, &st).await {
                request(&sh, &st, &mut conn, Some(started)).await;
            }
        },
        Mode::HandshakeOnly => loop {
            pace(&mut pacer).await;
            if !sh.claim() {
                return;
            }
            let Some(mut conn) = open(&sh, &st).await else {
                continue;
            };
            // A TLS 1.3 server sends its tickets with (or after) the first response, so a
            // thread with nothing to resume yet reads one response on this connection.
            if sh.plan.resumption() && !sh.client.has_session() {
                request(&sh, &st, &mut conn, None).await;
            }
            let _ = timeout(sh.plan.opts.timeout, conn.tls.shutdown()).await;
        },
        Mode::Hold => hold(&sh, &st).await,
    }
}

async fn hold(sh: &Shared, st: &RefCell<Stats>) {
    let Limit::Hold(idle) = sh.plan.limit else {
        return;
    };
    let mut conn = match open(sh, st).await {
        Some(mut c) => match request(sh, st, &mut c, None).await {
            Some(false) => Some(c),
            _ => None,
        },
        None => None,
    };
    if conn.is_some() {
        sh.open.fetch_add(1, Ordering::Relaxed);
    }
    if sh.settled.fetch_add(1, Ordering::AcqRel) + 1 == sh.plan.connections {
        let open = sh.open.load(Ordering::Acquire);
        eprintln!(
            "bench: holding {open} connections ({} failed) for {}",
            sh.plan.connections - open,
            humantime::format_duration(idle)
        );
        sh.ready.send_replace(true);
    }
    let mut ready = sh.ready.subscribe();
    let _ = ready.wait_for(|r| *r).await;
    let Some(c) = conn.as_mut() else {
        return;
    };
    st.borrow_mut().held += 1;
    tokio::time::sleep(idle).await;
    // One more request shows the server kept the connection.
    request(sh, st, c, None).await;
}

/// TCP connect (with `TCP_NODELAY`), its time recorded; the socket and when it connected, or
/// `None` on failure (counted).
async fn connect_tcp(sh: &Shared, st: &RefCell<Stats>) -> Option<(TcpStream, Instant)> {
    let t0 = Instant::now();
    let tcp = match timeout(sh.plan.opts.timeout, tcp_connect(sh.plan.addr, sh.plan.opts.tfo)).await {
        Ok(Ok(tcp)) => tcp,
        Ok(Err(e)) => {
            st.borrow_mut().error_with(ErrorKind::Connect, &e);
            count_error(sh);
            // Do not spin on a refused port or exhausted ephemeral ports.
            tokio::time::sleep(Duration::from_millis(10)).await;
            return None;
        }
        Err(_) => {
            st.borrow_mut().error(ErrorKind::Timeout);
            count_error(sh);
            return None;
        }
    };
    let _ = tcp.set_nodelay(true);
    let t1 = Instant::now();
    st.borrow_mut().record_connect(t1 - t0);
    Some((tcp, t1))
}

/// TCP connect and TLS handshake, recorded; `None` on failure (counted).
async fn open(sh: &Shared, st: &RefCell<Stats>) -> Option<Conn> {
    let (tcp, t1) = connect_tcp(sh, st).await?;
    let (ssl, offered) = match sh.client.new_ssl() {
        Ok(x) => x,
        Err(e) => {
            st.borrow_mut().error_with(ErrorKind::Handshake, &e);
            count_error(sh);
            return None;
        }
    };
    let tls = match timeout(
        sh.plan.opts.timeout,
        tokio_boring::SslStreamBuilder::new(ssl, tcp).connect(),
    )
    .await
    {
        Ok(Ok(tls)) => tls,
        Ok(Err(e)) => {
            st.borrow_mut()
                .error_with(ErrorKind::Handshake, &sh.plan.opts.handshake_error(&e));
            count_error(sh);
            return None;
        }
        Err(_) => {
            st.borrow_mut().error(ErrorKind::Timeout);
            count_error(sh);
            return None;
        }
    };
    let took = t1.elapsed();
    let ssl = tls.ssl();
    let negotiated = (
        ssl.version_str(),
        ssl.current_cipher()
            .map_or("-", |c| c.standard_name().unwrap_or_else(|| c.name())),
        ssl.curve_name().unwrap_or("-"),
    );
    {
        let mut st = st.borrow_mut();
        st.record_handshake(took, offered, ssl.session_reused(), negotiated);
        if ssl.session_reused() {
            st.record_resumption(resumption_mechanism(ssl));
        } else if let Some(sigalg) = ssl.peer_signature_algorithm() {
            // Only a full handshake is signed (a resumed session still names the original
            // handshake's algorithm).
            st.record_sigalg(sigalg.name().unwrap_or("unknown"));
        }
    }
    if let Some(p) = &sh.progress {
        p.handshakes.fetch_add(1, Ordering::Relaxed);
    }
    if sh.plan.mode != Mode::HandshakeOnly {
        // The protocol spoken is fixed by --h2; a server that selected another one by ALPN
        // cannot be measured (an HTTP/1.1 request on an h2 connection would fail obscurely).
        let selected = tls.ssl().selected_alpn_protocol();
        let fits = if sh.plan.h2 {
            selected == Some(b"h2")
        } else {
            matches!(selected, None | Some(b"http/1.1"))
        };
        if !fits {
            let message = format!(
                "the server selected ALPN {}; the bench speaks {}",
                selected.map_or("none".into(), String::from_utf8_lossy),
                if sh.plan.h2 { "h2" } else { "http/1.1" }
            );
            st.borrow_mut().error_with(ErrorKind::Http, &message);
            count_error(sh);
            tokio::time::sleep(Duration::from_millis(10)).await;
            return None;
        }
    }
    Some(Conn {
        tls,
        buf: Vec::with_capacity(4096),
    })
}

/// How a resumed handshake resumed: TLS 1.3 is always a PSK from a ticket; TLS 1.2 used the
/// ticket when the (offered and resumed) session carries one, its session ID otherwise.
fn resumption_mechanism(ssl: &boring::ssl::SslRef) -> &'static str {
    if ssl.version2() == Some(boring::ssl::SslVersion::TLS1_3) {
        "tls13_psk"
    } else if ssl.session().is_some_and(tlsgate_tls::client_ffi::session_has_ticket) {
        "ticket"
    } else {
        "session_id"
    }
}

/// Counts an error for the progress line too.
fn count_error(sh: &Shared) {
    if let Some(p) = &sh.progress {
        p.errors.fetch_add(1, Ordering::Relaxed);
    }
}

/// One request and its response, recorded. `Some(close)` on success (`close`: the server
/// announced it closes), `None` on failure (counted; the connection is unusable).
async fn request(sh: &Shared, st: &RefCell<Stats>, conn: &mut Conn, started: Option<Instant>) -> Option<bool> {
    let t0 = started.unwrap_or_else(Instant::now);
    let mut first_byte = None;
    let exchange = async {
        let fail = |kind: ErrorKind| move |e: std::io::Error| (kind, e.to_string());
        conn.tls
            .write_all(&sh.plan.request)
            .await
            .map_err(fail(ErrorKind::Write))?;
        loop {
            if !conn.buf.is_empty() {
                match parse_response(&conn.buf, false) {
                    Ok(Parsed::Incomplete) => {}
                    Ok(Parsed::Interim { len }) => {
                        conn.buf.drain(..len);
                        continue;
                    }
                    Ok(Parsed::Done { len, status, close }) => {
                        conn.buf.drain(..len);
                        return Ok((status, len, close));
                    }
                    Err(e) => return Err((ErrorKind::Http, e.to_string())),
                }
            }
            if conn.buf.capacity() - conn.buf.len() < 1024 {
                conn.buf.reserve(16 * 1024);
            }
            match conn.tls.read_buf(&mut conn.buf).await {
                Ok(0) => {}
                Ok(_) => {
                    first_byte.get_or_insert_with(Instant::now);
                    continue;
                }
                Err(e) if e.kind() == std::io::ErrorKind::UnexpectedEof => {}
                Err(e) => return Err(fail(ErrorKind::Read)(e)),
            }
            // The server closed: only a close-delimited body is complete now.
            return match parse_response(&conn.buf, true) {
                Ok(Parsed::Done { len, status, .. }) => {
                    conn.buf.drain(..len);
                    Ok((status, len, true))
                }
                _ => Err((ErrorKind::Closed, "connection closed before a complete response".into())),
            };
        }
    };
    let mut close = false;
    let outcome = timeout(sh.plan.opts.timeout, exchange).await.map(|r| {
        r.map(|(status, len, closes)| {
            close = closes;
            Response {
                first_byte: first_byte.unwrap_or_else(Instant::now),
                status,
                len,
            }
        })
    });
    record_outcome(sh, st, t0, outcome).then_some(close)
}

/// A complete response: when its first byte arrived, its status and its size.
struct Response {
    first_byte: Instant,
    status: u16,
    len: usize,
}

/// Records how a request that started at `t0` ended (HTTP/1.1 or HTTP/2): its latencies, or the
/// error (counted for the progress line too). True when it got its response.
fn record_outcome(
    sh: &Shared,
    st: &RefCell<Stats>,
    t0: Instant,
    outcome: Result<Result<Response, (ErrorKind, String)>, tokio::time::error::Elapsed>,
) -> bool {
    match outcome {
        Ok(Ok(r)) => {
            let mut st = st.borrow_mut();
            st.record_ttfb(r.first_byte - t0);
            st.record_request(t0.elapsed(), r.status, r.len);
            if let Some(p) = &sh.progress {
                p.requests.fetch_add(1, Ordering::Relaxed);
            }
            true
        }
        Ok(Err((kind, message))) => {
            st.borrow_mut().error_with(kind, &message);
            count_error(sh);
            false
        }
        Err(_) => {
            st.borrow_mut().error(ErrorKind::Timeout);
            count_error(sh);
            false
        }
    }
}
