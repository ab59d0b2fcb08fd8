//! The forwarder: moves IP packets between the two TUN devices, one reader and one writer thread
//! per direction. The reader asks the direction's [`Link`] what happens to each packet and puts
//! survivors in a time-ordered schedule; the writer sleeps until the earliest departure is due and
//! writes the packet to the other TUN device.
//!
//! An optional tap ([`Forwarder::start_capture`]) records every packet the writers deliver, at
//! the moment it is written to the receiving TUN device (after loss, queueing and delay: what the
//! receiver's kernel sees, and when). Each record also carries what the emulator decided for that
//! packet (the time it was to spend in the emulator) and how late the writer actually was, so
//! tests can check the emulator's own decisions and timing apart from the host's network stacks.
//! It costs one relaxed atomic load per packet while off.

use crate::link::{Link, LinkSpec, Verdict};
use nix::poll::{PollFd, PollFlags, PollTimeout};
use serde::Serialize;
use std::cmp::Reverse;
use std::collections::BinaryHeap;
use std::os::fd::AsFd;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Condvar, Mutex};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};
use tun_rs::SyncDevice;

/// Packet counters of one direction.
#[derive(Debug, Default)]
struct Counters {
    rx_packets: AtomicU64,
    rx_bytes: AtomicU64,
    tx_packets: AtomicU64,
    tx_bytes: AtomicU64,
    lost: AtomicU64,
    queue_drops: AtomicU64,
}

/// A snapshot of one direction's counters.
#[derive(Debug, Clone, Copy, Default, Serialize, PartialEq, Eq)]
pub struct DirStats {
    /// Packets read from the sending side.
    pub rx_packets: u64,
    /// Their bytes (IP packets).
    pub rx_bytes: u64,
    /// Packets delivered to the other side.
    pub tx_packets: u64,
    /// Their bytes.
    pub tx_bytes: u64,
    /// Dropped by the loss model.
    pub lost: u64,
    /// Dropped by the full queue.
    pub queue_drops: u64,
}

impl DirStats {
    /// The difference `self - before`.
    pub fn since(&self, before: &DirStats) -> DirStats {
        DirStats {
            rx_packets: self.rx_packets - before.rx_packets,
            rx_bytes: self.rx_bytes - before.rx_bytes,
            tx_packets: self.tx_packets - before.tx_packets,
            tx_bytes: self.tx_bytes - before.tx_bytes,
            lost: self.lost - before.lost,
            queue_drops: self.queue_drops - before.queue_drops,
        }
    }
}

/// The direction of a captured packet.
#[derive(Debug, Clone, Copy, Serialize, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum CapDir {
    /// Namespace A (client) → namespace B (server).
    AToB,
    /// Namespace B (server) → namespace A (client).
    BToA,
}

/// One delivered packet seen by the tap.
#[derive(Debug, Clone)]
pub struct CapturedPacket {
    /// Seconds since the capture started, taken right after the packet was written.
    pub t: f64,
    /// Direction.
    pub dir: CapDir,
    /// The packet's full length (IP bytes).
    pub len: usize,
    /// Its first bytes (at most the snapshot length): IP header, TCP header, payload.
    pub data: Vec<u8>,
    /// Seconds the emulator decided this packet spends inside it (queueing for the rate limit,
    /// delay and jitter), from the moment the reader took it off the sending TUN device.
    pub scheduled: f64,
    /// Seconds the writer delivered it after its scheduled departure (never negative): the
    /// emulator's own timing error on this host.
    pub late: f64,
}

/// What a capture recorded.
#[derive(Debug, Clone, Default)]
pub struct Capture {
    /// Delivered packets in delivery order (per direction; the two directions interleave by time).
    pub packets: Vec<CapturedPacket>,
    /// Packets not recorded because the memory cap was reached.
    pub dropped: u64,
}

/// The tap's state, shared by both writers.
struct Tap {
    on: AtomicBool,
    inner: Mutex<Option<TapInner>>,
}

struct TapInner {
    /// When the capture started, ns since the forwarder's epoch (the clock of every record).
    start_ns: u64,
    snaplen: usize,
    max_bytes: usize,
    bytes: usize,
    cap: Capture,
}

impl Tap {
    /// Records a packet read at `rx_ns`, scheduled for `at_ns` and written at `sent_ns` (ns since
    /// the forwarder's epoch).
    fn record(&self, dir: CapDir, data: &[u8], rx_ns: u64, at_ns: u64, sent_ns: u64) {
        let mut g = self.inner.lock().unwrap_or_else(|e| e.into_inner());
        let Some(t) = g.as_mut() else { return };
        let keep = data.len().min(t.snaplen);
        if t.bytes + keep > t.max_bytes {
            t.cap.dropped += 1;
            return;
        }
        t.bytes += keep;
        let p = CapturedPacket {
            t: sent_ns.saturating_sub(t.start_ns) as f64 / 1e9,
            dir,
            len: data.len(),
            data: data[..keep].to_vec(),
            scheduled: at_ns.saturating_sub(rx_ns) as f64 / 1e9,
            late: sent_ns.saturating_sub(at_ns) as f64 / 1e9,
        };
        t.cap.packets.push(p);
    }
}

struct Item {
    at_ns: u64,
    seq: u64,
    /// When the reader took the packet (ns since the forwarder's epoch).
    rx_ns: u64,
    data: Vec<u8>,
}

impl PartialEq for Item {
    fn eq(&self, o: &Self) -> bool {
        (self.at_ns, self.seq) == (o.at_ns, o.seq)
    }
}
impl Eq for Item {}
impl PartialOrd for Item {
    fn partial_cmp(&self, o: &Self) -> Option<std::cmp::Ordering> {
        Some(self.cmp(o))
    }
}
impl Ord for Item {
    fn cmp(&self, o: &Self) -> std::cmp::Ordering {
        (self.at_ns, self.seq).cmp(&(o.at_ns, o.seq))
    }
}

struct Direction {
    link: Mutex<Link>,
    queue: Mutex<BinaryHeap<Reverse<Item>>>,
    wake: Condvar,
    counters: Counters,
}

impl Direction {
    fn stats(&self) -> DirStats {
        let c = &self.counters;
        let g = |a: &AtomicU64| a.load(Ordering::Relaxed);
        DirStats {
            rx_packets: g(&c.rx_packets),
            rx_bytes: g(&c.rx_bytes),
            tx_packets: g(&c.tx_packets),
            tx_bytes: g(&c.tx_bytes),
            lost: g(&c.lost),
            queue_drops: g(&c.queue_drops),
        }
    }
}

/// The running forwarder; stops and joins its threads on drop.
pub struct Forwarder {
    epoch: Instant,
    stop: Arc<AtomicBool>,
    dirs: [Arc<Direction>; 2],
    tap: Arc<Tap>,
    threads: Vec<JoinHandle<()>>,
}

impl std::fmt::Debug for Forwarder {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Forwarder")
            .field("a_to_b", &self.dirs[0].stats())
            .field("b_to_a", &self.dirs[1].stats())
            .finish()
    }
}

impl Forwarder {
    /// Starts forwarding between `a` and `b` with these impairments.
    pub fn start(a: SyncDevice, b: SyncDevice, a_to_b: LinkSpec, b_to_a: LinkSpec, seed: u64) -> anyhow::Result<Self> {
        let stop = Arc::new(AtomicBool::new(false));
        let epoch = Instant::now();
        let mk = |spec, seed| {
            Arc::new(Direction {
                link: Mutex::new(Link::new(spec, seed)),
                queue: Mutex::new(BinaryHeap::new()),
                wake: Condvar::new(),
                counters: Counters::default(),
            })
        };
        let dirs = [mk(a_to_b, seed), mk(b_to_a, seed ^ 0x9e37_79b9_7f4a_7c15)];
        let (a, b) = (Arc::new(a), Arc::new(b));
        let tap = Arc::new(Tap {
            on: AtomicBool::new(false),
            inner: Mutex::new(None),
        });
        let mut threads = Vec::new();
        for (i, (from, to)) in [(a.clone(), b.clone()), (b, a)].into_iter().enumerate() {
            let (d, s) = (dirs[i].clone(), stop.clone());
            threads.push(
                std::thread::Builder::new()
                    .name(format!("lab-rx{i}"))
                    .spawn(move || reader(&from, &d, &s, epoch))?,
            );
            let (d, s, tp) = (dirs[i].clone(), stop.clone(), tap.clone());
            let cd = if i == 0 { CapDir::AToB } else { CapDir::BToA };
            threads.push(
                std::thread::Builder::new()
                    .name(format!("lab-tx{i}"))
                    .spawn(move || writer(&to, &d, &s, epoch, &tp, cd))?,
            );
        }
        Ok(Self {
            epoch,
            stop,
            dirs,
            tap,
            threads,
        })
    }

    /// Replaces the impairments of both directions.
    pub fn set_links(&self, a_to_b: LinkSpec, b_to_a: LinkSpec) {
        self.dirs[0]
            .link
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .set_spec(a_to_b);
        self.dirs[1]
            .link
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .set_spec(b_to_a);
    }

    /// Counters of (A→B, B→A).
    pub fn stats(&self) -> (DirStats, DirStats) {
        (self.dirs[0].stats(), self.dirs[1].stats())
    }

    /// Starts (or restarts, discarding what was recorded) the tap: every delivered packet's first
    /// `snaplen` bytes are kept until `max_bytes` of them are held; later packets are counted
    /// as dropped.
    pub fn start_capture(&self, snaplen: usize, max_bytes: usize) {
        *self.tap.inner.lock().unwrap_or_else(|e| e.into_inner()) = Some(TapInner {
            start_ns: self.epoch.elapsed().as_nanos() as u64,
            snaplen,
            max_bytes,
            bytes: 0,
            cap: Capture::default(),
        });
        self.tap.on.store(true, Ordering::Release);
    }

    /// Stops the tap and returns what it recorded (empty if it was not started).
    pub fn take_capture(&self) -> Capture {
        self.tap.on.store(false, Ordering::Release);
        self.tap
            .inner
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .take()
            .map(|t| t.cap)
            .unwrap_or_default()
    }
}

impl Drop for Forwarder {
    fn drop(&mut self) {
        self.stop.store(true, Ordering::Relaxed);
        for d in &self.dirs {
            d.wake.notify_all();
        }
        for t in self.threads.drain(..) {
            let _ = t.join();
        }
    }
}

fn reader(dev: &SyncDevice, dir: &Direction, stop: &AtomicBool, epoch: Instant) {
    let mut buf = vec![0u8; 65536];
    let mut seq = 0u64;
    while !stop.load(Ordering::Relaxed) {
        let mut fds = [PollFd::new(dev.as_fd(), PollFlags::POLLIN)];
        match nix::poll::poll(&mut fds, PollTimeout::from(100u8)) {
            Ok(0) => continue,
            Ok(_) => {}
            Err(nix::errno::Errno::EINTR) => continue,
            Err(_) => return,
        }
        let n = match dev.recv(&mut buf) {
            Ok(n) => n,
            Err(e) if e.kind() == std::io::ErrorKind::Interrupted || e.kind() == std::io::ErrorKind::WouldBlock => {
                continue
            }
            Err(_) => return,
        };
        let rx_ns = epoch.elapsed().as_nanos() as u64;
        let now = rx_ns as f64 / 1e9;
        let c = &dir.counters;
        c.rx_packets.fetch_add(1, Ordering::Relaxed);
        c.rx_bytes.fetch_add(n as u64, Ordering::Relaxed);
        let verdict = dir.link.lock().unwrap_or_else(|e| e.into_inner()).admit(now, n);
        match verdict {
            Verdict::Lost => {
                c.lost.fetch_add(1, Ordering::Relaxed);
            }
            Verdict::QueueDrop => {
                c.queue_drops.fetch_add(1, Ordering::Relaxed);
            }
            Verdict::Deliver(at) => {
                seq += 1;
                let item = Item {
                    at_ns: ((at * 1e9) as u64).max(rx_ns),
                    seq,
                    rx_ns,
                    data: buf[..n].to_vec(),
                };
                dir.queue.lock().unwrap_or_else(|e| e.into_inner()).push(Reverse(item));
                dir.wake.notify_one();
            }
        }
    }
}

fn writer(dev: &SyncDevice, dir: &Direction, stop: &AtomicBool, epoch: Instant, tap: &Tap, cd: CapDir) {
    // Wake on time: the default 50 µs timer slack would add up to that much to every delay.
    let _ = nix::sys::prctl::set_timerslack(1);
    let mut q = dir.queue.lock().unwrap_or_else(|e| e.into_inner());
    loop {
        if stop.load(Ordering::Relaxed) {
            return;
        }
        let now = epoch.elapsed().as_nanos() as u64;
        let wait = match q.peek() {
            None => Duration::from_millis(100),
            Some(Reverse(it)) if it.at_ns <= now => {
                let Some(Reverse(it)) = q.pop() else { continue };
                drop(q);
                if dev.send(&it.data).is_ok() {
                    dir.counters.tx_packets.fetch_add(1, Ordering::Relaxed);
                    dir.counters.tx_bytes.fetch_add(it.data.len() as u64, Ordering::Relaxed);
                    if tap.on.load(Ordering::Relaxed) {
                        let sent_ns = epoch.elapsed().as_nanos() as u64;
                        tap.record(cd, &it.data, it.rx_ns, it.at_ns, sent_ns);
                    }
                }
                q = dir.queue.lock().unwrap_or_else(|e| e.into_inner());
                continue;
            }
            Some(Reverse(it)) => Duration::from_nanos(it.at_ns - now),
        };
        q = dir.wake.wait_timeout(q, wait).unwrap_or_else(|e| e.into_inner()).0;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn tap(snaplen: usize, max_bytes: usize) -> Tap {
        Tap {
            on: AtomicBool::new(true),
            inner: Mutex::new(Some(TapInner {
                start_ns: 0,
                snaplen,
                max_bytes,
                bytes: 0,
                cap: Capture::default(),
            })),
        }
    }

    #[test]
    fn tap_truncates_to_snaplen_and_counts_drops_beyond_the_cap() {
        let t = tap(10, 25);
        t.record(CapDir::AToB, &[1; 4], 0, 10, 11);
        t.record(CapDir::BToA, &[2; 30], 0, 10, 12); // keeps 10 bytes (14 held)
        t.record(CapDir::AToB, &[3; 10], 0, 10, 13); // 24 held
        t.record(CapDir::AToB, &[4; 5], 0, 10, 14); // would be 29 > 25: dropped
        t.record(CapDir::BToA, &[5; 1], 2, 10, 15); // 25 held
        let cap = t.inner.lock().unwrap().take().unwrap().cap;
        assert_eq!(cap.dropped, 1);
        let got: Vec<_> = cap.packets.iter().map(|p| (p.dir, p.len, p.data.clone())).collect();
        assert_eq!(
            got,
            [
                (CapDir::AToB, 4, vec![1; 4]),
                (CapDir::BToA, 30, vec![2; 10]),
                (CapDir::AToB, 10, vec![3; 10]),
                (CapDir::BToA, 1, vec![5; 1]),
            ]
        );
        assert!(cap.packets.windows(2).all(|w| w[0].t <= w[1].t));
        // Times are on the forwarder's clock: scheduled = at - rx, late = sent - at.
        let last = cap.packets.last().unwrap();
        assert_eq!((last.t, last.scheduled, last.late), (15e-9, 8e-9, 5e-9));
    }

    #[test]
    fn stopped_tap_records_nothing() {
        let t = tap(10, 100);
        *t.inner.lock().unwrap() = None;
        t.record(CapDir::AToB, &[1; 4], 0, 0, 0);
        assert!(t.inner.lock().unwrap().is_none());
    }
}
