//! A UDP relay that plays a NAT rebinding: the client talks to the relay's one address; the
//! relay talks to the server from a fresh source port whenever [`Relay::rebind`] is called (as a
//! NAT whose mapping expired does), and still passes back what the server sends to any of its
//! former ports. The server sees one connection's packets arrive from ever new addresses.
//! [`Relay::start_delayed`] also delays what the client sends by a fixed time (a path with that
//! much one-way delay) and records when each of the server's datagrams arrived.
//! [`Relay::drop_every`] makes it lose every n-th datagram each way (a lossy path, deterministic).
#![allow(dead_code)]

use std::collections::HashMap;
use std::net::{SocketAddr, UdpSocket};
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::{mpsc, Arc, Mutex};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

struct Shared {
    stop: AtomicBool,
    client: Mutex<Option<SocketAddr>>,
    upstream: Mutex<Arc<UdpSocket>>,
    /// Datagrams relayed to the server, by the relay's source port.
    relayed: Mutex<HashMap<u16, usize>>,
    /// Datagrams the server sent back, by the relay's port they reached.
    answered: Mutex<HashMap<u16, usize>>,
    /// When each of the server's datagrams arrived.
    arrivals: Mutex<Vec<Instant>>,
    /// Lose every n-th datagram each way (0: none).
    drop_every: AtomicUsize,
    /// Datagrams seen each way (to the server, from the server), and how many were lost.
    seen_up: AtomicUsize,
    seen_down: AtomicUsize,
    dropped: AtomicUsize,
}

impl Shared {
    /// Whether the datagram that `seen` counts now is to be lost.
    fn lose(&self, seen: &AtomicUsize) -> bool {
        let n = self.drop_every.load(Ordering::Relaxed);
        let k = seen.fetch_add(1, Ordering::Relaxed) + 1;
        let lost = n > 0 && k.is_multiple_of(n);
        if lost {
            self.dropped.fetch_add(1, Ordering::Relaxed);
        }
        lost
    }
}

/// The relay; stops its threads when dropped.
pub struct Relay {
    front: Arc<UdpSocket>,
    shared: Arc<Shared>,
    threads: Mutex<Vec<JoinHandle<()>>>,
}

fn socket() -> UdpSocket {
    let s = UdpSocket::bind("127.0.0.1:0").unwrap();
    s.set_read_timeout(Some(Duration::from_millis(50))).unwrap();
    s
}

impl Relay {
    /// Relays between a new local address (`addr()`) and `server`.
    pub fn start(server: SocketAddr) -> Self {
        Self::start_delayed(server, Duration::ZERO)
    }

    /// Relays between a new local address (`addr()`) and `server`, passing what the client
    /// sends on `delay` after it arrived (in order).
    pub fn start_delayed(server: SocketAddr, delay: Duration) -> Self {
        let front = Arc::new(socket());
        let shared = Arc::new(Shared {
            stop: AtomicBool::new(false),
            client: Mutex::new(None),
            upstream: Mutex::new(Arc::new(socket())),
            relayed: Mutex::new(HashMap::new()),
            answered: Mutex::new(HashMap::new()),
            arrivals: Mutex::new(Vec::new()),
            drop_every: AtomicUsize::new(0),
            seen_up: AtomicUsize::new(0),
            seen_down: AtomicUsize::new(0),
            dropped: AtomicUsize::new(0),
        });
        let relay = Self {
            front: front.clone(),
            shared: shared.clone(),
            threads: Mutex::new(Vec::new()),
        };
        // The delay line: datagrams with the time they are due, sent in arrival order.
        let (line, due) = mpsc::channel::<(Instant, Vec<u8>)>();
        let sender = shared.clone();
        relay.threads.lock().unwrap().push(std::thread::spawn(move || {
            while let Ok((at, datagram)) = due.recv() {
                std::thread::sleep(at.saturating_duration_since(Instant::now()));
                let up = sender.upstream.lock().unwrap().clone();
                if up.send_to(&datagram, server).is_ok() {
                    let port = up.local_addr().unwrap().port();
                    *sender.relayed.lock().unwrap().entry(port).or_default() += 1;
                }
            }
        }));
        relay.threads.lock().unwrap().push(std::thread::spawn(move || {
            let mut buf = vec![0u8; 65_536];
            while !shared.stop.load(Ordering::Relaxed) {
                if let Ok((n, from)) = front.recv_from(&mut buf) {
                    *shared.client.lock().unwrap() = Some(from);
                    if !shared.lose(&shared.seen_up) {
                        let _ = line.send((Instant::now() + delay, buf[..n].to_vec()));
                    }
                }
            }
        }));
        let first = relay.shared.upstream.lock().unwrap().clone();
        relay.back(first);
        relay
    }

    /// Passes what the server sends to `up` back to the client.
    fn back(&self, up: Arc<UdpSocket>) {
        let (shared, front) = (self.shared.clone(), self.front.clone());
        let port = up.local_addr().unwrap().port();
        self.threads.lock().unwrap().push(std::thread::spawn(move || {
            let mut buf = vec![0u8; 65_536];
            while !shared.stop.load(Ordering::Relaxed) {
                if let Ok((n, _)) = up.recv_from(&mut buf) {
                    if shared.lose(&shared.seen_down) {
                        continue;
                    }
                    shared.arrivals.lock().unwrap().push(Instant::now());
                    *shared.answered.lock().unwrap().entry(port).or_default() += 1;
                    if let Some(client) = *shared.client.lock().unwrap() {
                        let _ = front.send_to(&buf[..n], client);
                    }
                }
            }
        }));
    }

    /// The address clients should use.
    pub fn addr(&self) -> SocketAddr {
        self.front.local_addr().unwrap()
    }

    /// From now on, the server is reached from a fresh source port.
    pub fn rebind(&self) {
        let up = Arc::new(socket());
        *self.shared.upstream.lock().unwrap() = up.clone();
        self.back(up);
    }

    /// From now on, loses every `n`-th datagram each way (0: none).
    pub fn drop_every(&self, n: usize) {
        self.shared.drop_every.store(n, Ordering::Relaxed);
    }

    /// Datagrams lost so far (both ways).
    pub fn dropped(&self) -> usize {
        self.shared.dropped.load(Ordering::Relaxed)
    }

    /// How many of the relay's source ports the server answered.
    pub fn ports_answered(&self) -> usize {
        self.shared.answered.lock().unwrap().len()
    }

    /// When each of the server's datagrams arrived, in order.
    pub fn arrivals(&self) -> Vec<Instant> {
        self.shared.arrivals.lock().unwrap().clone()
    }

    /// Datagrams relayed each way, by the relay's port: (to the server, from the server).
    pub fn counts(&self) -> (HashMap<u16, usize>, HashMap<u16, usize>) {
        (
            self.shared.relayed.lock().unwrap().clone(),
            self.shared.answered.lock().unwrap().clone(),
        )
    }
}

impl Drop for Relay {
    fn drop(&mut self) {
        self.shared.stop.store(true, Ordering::Relaxed);
        for t in self.threads.lock().unwrap().drain(..) {
            let _ = t.join();
        }
    }
}

/// A relay that plays a NAT in front of clients that change their own port: each client address
/// gets its own source port towards the server (as a NAT maps each inside address), and what the
/// server sends to that port goes back to that client address. [`Nat::cut`] makes a client
/// address's path lose everything both ways (a path that died), so a client that notices it
/// may move to another port of its own.
pub struct Nat {
    front: Arc<UdpSocket>,
    shared: Arc<NatShared>,
    threads: Arc<Mutex<Vec<JoinHandle<()>>>>,
}

#[derive(Default)]
struct NatShared {
    stop: AtomicBool,
    /// Each client address's socket towards the server, in order of first datagram.
    mapped: Mutex<Vec<(SocketAddr, Arc<UdpSocket>)>>,
    /// Client addresses whose path is cut.
    cut: Mutex<Vec<SocketAddr>>,
    /// Datagrams the server sent back, by the client address they were for.
    answered: Mutex<HashMap<SocketAddr, usize>>,
}

impl Nat {
    /// Relays between a new local address (`addr()`) and `server`.
    pub fn start(server: SocketAddr) -> Self {
        let front = Arc::new(socket());
        let shared = Arc::new(NatShared::default());
        let threads = Arc::new(Mutex::new(Vec::new()));
        let (f, s, t) = (front.clone(), shared.clone(), threads.clone());
        threads.lock().unwrap().push(std::thread::spawn(move || {
            let mut buf = vec![0u8; 65_536];
            while !s.stop.load(Ordering::Relaxed) {
                let Ok((n, from)) = f.recv_from(&mut buf) else { continue };
                if s.cut.lock().unwrap().contains(&from) {
                    continue;
                }
                let known = s
                    .mapped
                    .lock()
                    .unwrap()
                    .iter()
                    .find(|(a, _)| *a == from)
                    .map(|(_, u)| u.clone());
                let up = known.unwrap_or_else(|| {
                    let up = Arc::new(socket());
                    s.mapped.lock().unwrap().push((from, up.clone()));
                    let (f2, s2, up2) = (f.clone(), s.clone(), up.clone());
                    t.lock().unwrap().push(std::thread::spawn(move || {
                        let mut buf = vec![0u8; 65_536];
                        while !s2.stop.load(Ordering::Relaxed) {
                            let Ok((n, _)) = up2.recv_from(&mut buf) else { continue };
                            if s2.cut.lock().unwrap().contains(&from) {
                                continue;
                            }
                            *s2.answered.lock().unwrap().entry(from).or_default() += 1;
                            let _ = f2.send_to(&buf[..n], from);
                        }
                    }));
                    up
                });
                let _ = up.send_to(&buf[..n], server);
            }
        }));
        Self { front, shared, threads }
    }

    /// The address clients should use.
    pub fn addr(&self) -> SocketAddr {
        self.front.local_addr().unwrap()
    }

    /// The client addresses seen, in order.
    pub fn clients(&self) -> Vec<SocketAddr> {
        self.shared.mapped.lock().unwrap().iter().map(|(a, _)| *a).collect()
    }

    /// From now on, nothing passes to or from client address `addr`.
    pub fn cut(&self, addr: SocketAddr) {
        self.shared.cut.lock().unwrap().push(addr);
    }

    /// How many datagrams the server sent to each client address.
    pub fn answered(&self) -> HashMap<SocketAddr, usize> {
        self.shared.answered.lock().unwrap().clone()
    }
}

impl Drop for Nat {
    fn drop(&mut self) {
        self.shared.stop.store(true, Ordering::Relaxed);
        // The threads started for later clients are pushed while the front thread runs: join
        // until none is left.
        loop {
            let next = self.threads.lock().unwrap().pop();
            match next {
                Some(t) => {
                    let _ = t.join();
                }
                None => break,
            }
        }
    }
}
