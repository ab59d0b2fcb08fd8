//! A UDP relay that plays a NAT rebinding: the client talks to the relay's one address; the
//! relay talks to the server from a fresh source port whenever [`Relay::rebind`] is called (as a
//! NAT whose mapping expired does), and still passes back what the server sends to any of its
//! former ports. The server sees one connection's packets arrive from ever new addresses.
#![allow(dead_code)]

use std::collections::HashMap;
use std::net::{SocketAddr, UdpSocket};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::thread::JoinHandle;
use std::time::Duration;

struct Shared {
    stop: AtomicBool,
    client: Mutex<Option<SocketAddr>>,
    upstream: Mutex<Arc<UdpSocket>>,
    /// Datagrams relayed to the server, by the relay's source port.
    relayed: Mutex<HashMap<u16, usize>>,
    /// Datagrams the server sent back, by the relay's port they reached.
    answered: Mutex<HashMap<u16, usize>>,
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
        let front = Arc::new(socket());
        let shared = Arc::new(Shared {
            stop: AtomicBool::new(false),
            client: Mutex::new(None),
            upstream: Mutex::new(Arc::new(socket())),
            relayed: Mutex::new(HashMap::new()),
            answered: Mutex::new(HashMap::new()),
        });
        let relay = Self {
            front: front.clone(),
            shared: shared.clone(),
            threads: Mutex::new(Vec::new()),
        };
        relay.threads.lock().unwrap().push(std::thread::spawn(move || {
            let mut buf = vec![0u8; 65_536];
            while !shared.stop.load(Ordering::Relaxed) {
                if let Ok((n, from)) = front.recv_from(&mut buf) {
                    *shared.client.lock().unwrap() = Some(from);
                    let up = shared.upstream.lock().unwrap().clone();
                    if up.send_to(&buf[..n], server).is_ok() {
                        let port = up.local_addr().unwrap().port();
                        *shared.relayed.lock().unwrap().entry(port).or_default() += 1;
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

    /// How many of the relay's source ports the server answered.
    pub fn ports_answered(&self) -> usize {
        self.shared.answered.lock().unwrap().len()
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
