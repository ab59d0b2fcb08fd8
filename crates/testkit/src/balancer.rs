//! A round-robin TCP balancer: each new connection goes to the next backend, as a layer-4 load
//! balancer spreading connections over a cluster would. Bytes are copied both ways untouched
//! (TLS passes through), one thread pair per connection; enough for tests and the cluster bench.

use std::io;
use std::net::{Shutdown, SocketAddr, TcpListener, TcpStream};
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::Arc;

/// A running balancer on 127.0.0.1.
pub struct RoundRobin {
    /// Its port.
    pub port: u16,
    stop: Arc<AtomicBool>,
}

impl RoundRobin {
    /// Listens on a free port and spreads connections over `backends` in turn.
    pub fn start(backends: Vec<SocketAddr>) -> Self {
        Self::start_slow(backends, std::time::Duration::ZERO)
    }

    /// Like [`RoundRobin::start`], but each connection waits `delay` before its backend is
    /// dialled: a slow network path (or a slow-starting server) to connect through.
    pub fn start_slow(backends: Vec<SocketAddr>, delay: std::time::Duration) -> Self {
        let listener = TcpListener::bind("127.0.0.1:0").expect("bind balancer");
        let port = listener.local_addr().expect("local addr").port();
        let stop = Arc::new(AtomicBool::new(false));
        let flag = stop.clone();
        std::thread::spawn(move || {
            let next = AtomicUsize::new(0);
            for client in listener.incoming() {
                if flag.load(Ordering::Relaxed) {
                    break;
                }
                let Ok(client) = client else { continue };
                let backend = backends[next.fetch_add(1, Ordering::Relaxed) % backends.len()];
                std::thread::spawn(move || {
                    std::thread::sleep(delay);
                    let _ = relay(client, backend);
                });
            }
        });
        Self { port, stop }
    }
}

fn relay(client: TcpStream, backend: SocketAddr) -> io::Result<()> {
    let server = TcpStream::connect(backend)?;
    client.set_nodelay(true)?;
    server.set_nodelay(true)?;
    let (mut c_read, mut s_write) = (client.try_clone()?, server.try_clone()?);
    let up = std::thread::spawn(move || {
        let _ = io::copy(&mut c_read, &mut s_write);
        let _ = s_write.shutdown(Shutdown::Write);
    });
    let (mut s_read, mut c_write) = (server, client);
    let _ = io::copy(&mut s_read, &mut c_write);
    let _ = c_write.shutdown(Shutdown::Write);
    let _ = up.join();
    Ok(())
}

impl Drop for RoundRobin {
    fn drop(&mut self) {
        self.stop.store(true, Ordering::Relaxed);
        // Wake the accept loop so it sees the flag.
        let _ = TcpStream::connect(("127.0.0.1", self.port));
    }
}
