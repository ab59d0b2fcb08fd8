//! An HTTP/1.1 origin server on a real loopback socket, run on its own thread, for proxy tests.
//!
//! Paths: `/slow?ms=N` waits before the header; `/stream?chunks=N&ms=M` sends N chunks M ms apart;
//! `/bytes?n=N` (or `/big?n=N`) sends N bytes; `/upload` counts the request body (`received=N`); anything else
//! echoes the request (`origin=NAME`, method, path, then each header as `name: value`).
//! Every response carries `x-origin: NAME`.

use bytes::Bytes;
use http_body_util::{combinators::BoxBody, BodyExt, Full, StreamBody};
use hyper::body::{Frame, Incoming};
use hyper::{Request, Response};
use std::convert::Infallible;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::Duration;

type OriginBody = BoxBody<Bytes, Infallible>;

/// A running origin; stopped on drop.
pub struct Origin {
    /// Its port on 127.0.0.1.
    pub port: u16,
    /// Requests answered so far.
    pub requests: Arc<AtomicUsize>,
    stop: Option<tokio::sync::oneshot::Sender<()>>,
    thread: Option<std::thread::JoinHandle<()>>,
}

impl Origin {
    /// Starts an origin called `name` on a free port.
    pub fn start(name: &str) -> Self {
        let listener = std::net::TcpListener::bind("127.0.0.1:0").expect("bind origin");
        listener.set_nonblocking(true).expect("nonblocking");
        let port = listener.local_addr().expect("addr").port();
        let requests = Arc::new(AtomicUsize::new(0));
        let (stop, mut stopped) = tokio::sync::oneshot::channel::<()>();
        let name: Arc<str> = Arc::from(name);
        let counter = requests.clone();
        let thread = std::thread::spawn(move || {
            let rt = tokio::runtime::Builder::new_current_thread()
                .enable_all()
                .build()
                .expect("runtime");
            rt.block_on(async move {
                let listener = tokio::net::TcpListener::from_std(listener).expect("tokio listener");
                loop {
                    tokio::select! {
                        _ = &mut stopped => return,
                        accepted = listener.accept() => {
                            let Ok((tcp, _)) = accepted else { continue };
                            let name = name.clone();
                            let counter = counter.clone();
                            tokio::spawn(async move {
                                let svc = hyper::service::service_fn(move |req| {
                                    counter.fetch_add(1, Ordering::Relaxed);
                                    respond(name.clone(), req)
                                });
                                let _ = hyper::server::conn::http1::Builder::new()
                                    .serve_connection(hyper_util::rt::TokioIo::new(tcp), svc)
                                    .await;
                            });
                        }
                    }
                }
            });
        });
        Self {
            port,
            requests,
            stop: Some(stop),
            thread: Some(thread),
        }
    }

    /// `127.0.0.1:PORT`.
    pub fn addr(&self) -> String {
        format!("127.0.0.1:{}", self.port)
    }

    /// Requests answered so far.
    pub fn count(&self) -> usize {
        self.requests.load(Ordering::Relaxed)
    }
}

impl Drop for Origin {
    fn drop(&mut self) {
        if let Some(stop) = self.stop.take() {
            let _ = stop.send(());
        }
        if let Some(t) = self.thread.take() {
            let _ = t.join();
        }
    }
}

fn query(req: &Request<Incoming>, key: &str) -> Option<u64> {
    req.uri()
        .query()?
        .split('&')
        .find_map(|kv| kv.strip_prefix(key)?.strip_prefix('=')?.parse().ok())
}

fn full(text: impl Into<Bytes>) -> OriginBody {
    Full::new(text.into()).boxed()
}

async fn respond(name: Arc<str>, req: Request<Incoming>) -> Result<Response<OriginBody>, Infallible> {
    let path = req.uri().path().to_string();
    let body: OriginBody = match path.as_str() {
        "/slow" => {
            tokio::time::sleep(Duration::from_millis(query(&req, "ms").unwrap_or(1000))).await;
            full("slow done\n")
        }
        "/stream" => {
            let chunks = query(&req, "chunks").unwrap_or(3);
            let gap = Duration::from_millis(query(&req, "ms").unwrap_or(100));
            let (tx, rx) = tokio::sync::mpsc::channel::<Result<Frame<Bytes>, Infallible>>(1);
            tokio::spawn(async move {
                for i in 0..chunks {
                    if tx
                        .send(Ok(Frame::data(Bytes::from(format!("chunk {i}\n")))))
                        .await
                        .is_err()
                    {
                        return;
                    }
                    tokio::time::sleep(gap).await;
                }
            });
            StreamBody::new(tokio_stream_from(rx)).boxed()
        }
        "/bytes" | "/big" => full(vec![b'x'; query(&req, "n").unwrap_or(1024) as usize]),
        "/upload" => {
            let mut body = req.into_body();
            let mut n = 0usize;
            while let Some(frame) = body.frame().await {
                if let Ok(data) = frame.map(|f| f.into_data()) {
                    n += data.map_or(0, |d| d.len());
                }
            }
            full(format!("received={n}\n"))
        }
        _ => {
            let mut text = format!("origin={name}\nmethod={}\npath={}\n", req.method(), req.uri());
            for (k, v) in req.headers() {
                text.push_str(&format!("{k}: {}\n", v.to_str().unwrap_or("?")));
            }
            full(text)
        }
    };
    Ok(Response::builder()
        .header("x-origin", &*name)
        .body(body)
        .expect("valid response"))
}

/// Adapts an mpsc receiver into a `Stream`.
fn tokio_stream_from<T>(mut rx: tokio::sync::mpsc::Receiver<T>) -> impl futures_util::Stream<Item = T> {
    futures_util::stream::poll_fn(move |cx| rx.poll_recv(cx))
}
