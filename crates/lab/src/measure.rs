//! Measurements through a [`Lab`] with real sockets: TCP round-trip time, bulk TCP goodput and
//! UDP loss. Used by the accuracy tests and `tlsgate lab calibrate`.

use crate::topology::{Lab, ADDR_B};
use anyhow::Context;
use std::io::{Read, Write};
use std::net::{SocketAddr, TcpListener, TcpStream, UdpSocket};
use std::time::{Duration, Instant};

/// Round-trip times (ms) of `samples` one-byte exchanges on one TCP connection (TCP_NODELAY,
/// after `warmup` unmeasured ones): the server echoes each byte, so each sample is one RTT plus
/// the two stacks' processing.
pub fn tcp_rtts(lab: &Lab, samples: usize, warmup: usize) -> anyhow::Result<Vec<f64>> {
    let listener = bind_in_b(lab)?;
    let addr = listener.local_addr()?;
    let server = lab.b.spawn(move || -> std::io::Result<()> {
        let (mut s, _) = listener.accept()?;
        s.set_nodelay(true)?;
        let mut b = [0u8; 1];
        while s.read(&mut b)? == 1 {
            s.write_all(&b)?;
        }
        Ok(())
    })?;
    let client = lab.a.spawn(move || -> anyhow::Result<Vec<f64>> {
        let mut s = TcpStream::connect_timeout(&addr, Duration::from_secs(10))?;
        s.set_nodelay(true)?;
        s.set_read_timeout(Some(Duration::from_secs(10)))?;
        let mut out = Vec::with_capacity(samples);
        let mut b = [7u8; 1];
        for i in 0..samples + warmup {
            let t = Instant::now();
            s.write_all(&b)?;
            s.read_exact(&mut b)?;
            if i >= warmup {
                out.push(t.elapsed().as_secs_f64() * 1e3);
            }
        }
        Ok(out)
    })?;
    let r = client.join().map_err(|_| anyhow::anyhow!("client panicked"))?;
    let _ = server.join();
    r
}

/// Bulk TCP goodput A→B in bit/s: A sends for `secs`; B measures the bytes received after the
/// first `skip` seconds (slow start) until the end.
pub fn tcp_goodput(lab: &Lab, secs: f64, skip: f64) -> anyhow::Result<f64> {
    let listener = bind_in_b(lab)?;
    let addr = listener.local_addr()?;
    let server = lab.b.spawn(move || -> std::io::Result<f64> {
        let (mut s, _) = listener.accept()?;
        let mut buf = vec![0u8; 1 << 16];
        let mut first: Option<Instant> = None;
        let mut mark: Option<(Instant, u64)> = None;
        let mut total = 0u64;
        let mut last = Instant::now();
        loop {
            let n = s.read(&mut buf)?;
            if n == 0 {
                break;
            }
            let now = Instant::now();
            let t0 = *first.get_or_insert(now);
            total += n as u64;
            last = now;
            if mark.is_none() && now.duration_since(t0).as_secs_f64() >= skip {
                mark = Some((now, total));
            }
        }
        let (t1, b1) = mark.unwrap_or((first.unwrap_or(last), 0));
        let dt = last.duration_since(t1).as_secs_f64();
        Ok(if dt > 0.0 { (total - b1) as f64 * 8.0 / dt } else { 0.0 })
    })?;
    let client = lab.a.spawn(move || -> std::io::Result<()> {
        let mut s = TcpStream::connect_timeout(&addr, Duration::from_secs(10))?;
        let buf = vec![0x5au8; 1 << 16];
        let t = Instant::now();
        while t.elapsed().as_secs_f64() < secs {
            s.write_all(&buf)?;
        }
        s.shutdown(std::net::Shutdown::Write)?;
        // Wait for the server to read everything (it closes after EOF).
        let _ = s.read(&mut [0u8; 1]);
        Ok(())
    })?;
    client.join().map_err(|_| anyhow::anyhow!("client panicked"))??;
    Ok(server.join().map_err(|_| anyhow::anyhow!("server panicked"))??)
}

/// Sends `n` UDP datagrams of `size` bytes A→B (paced: bursts of 10, 1 ms apart, so the receiving
/// socket never overflows on a busy machine) and returns
/// how many arrived.
pub fn udp_delivered(lab: &Lab, n: usize, size: usize) -> anyhow::Result<usize> {
    let sock = lab
        .b
        .spawn(|| UdpSocket::bind((ADDR_B, 0)))?
        .join()
        .map_err(|_| anyhow::anyhow!("bind panicked"))??;
    let addr = sock.local_addr()?;
    sock.set_read_timeout(Some(Duration::from_millis(500)))?;
    let rx = std::thread::spawn(move || {
        let mut buf = vec![0u8; 65536];
        let mut got = 0usize;
        while sock.recv(&mut buf).is_ok() {
            got += 1;
        }
        got
    });
    let tx = lab.a.spawn(move || -> std::io::Result<()> {
        let s = UdpSocket::bind("0.0.0.0:0")?;
        let buf = vec![1u8; size];
        for i in 0..n {
            s.send_to(&buf, addr)?;
            if i % 10 == 9 {
                std::thread::sleep(Duration::from_millis(1));
            }
        }
        Ok(())
    })?;
    tx.join().map_err(|_| anyhow::anyhow!("sender panicked"))??;
    rx.join().map_err(|_| anyhow::anyhow!("receiver panicked"))
}

/// Offers UDP datagrams of `size` bytes A→B at `bps` (IP bytes not counted) for `secs`, paced in
/// 1 ms slices, to a socket in B that drains them. Returns how many were sent. Used to fill the
/// rate limiter's queue without TCP's congestion control in the way.
pub fn udp_offer(lab: &Lab, bps: u64, secs: f64, size: usize) -> anyhow::Result<u64> {
    let sock = lab
        .b
        .spawn(|| UdpSocket::bind((ADDR_B, 0)))?
        .join()
        .map_err(|_| anyhow::anyhow!("bind panicked"))??;
    let addr = sock.local_addr()?;
    sock.set_read_timeout(Some(Duration::from_millis(500)))?;
    let rx = std::thread::spawn(move || {
        let mut buf = vec![0u8; 65536];
        while sock.recv(&mut buf).is_ok() {}
    });
    let tx = lab.a.spawn(move || -> std::io::Result<u64> {
        let s = UdpSocket::bind("0.0.0.0:0")?;
        let buf = vec![3u8; size];
        let per_sec = bps as f64 / 8.0 / size as f64;
        let start = Instant::now();
        let mut sent = 0u64;
        loop {
            let el = start.elapsed().as_secs_f64();
            if el >= secs {
                return Ok(sent);
            }
            while (sent as f64) < el * per_sec {
                s.send_to(&buf, addr)?;
                sent += 1;
            }
            std::thread::sleep(Duration::from_millis(1));
        }
    })?;
    let sent = tx.join().map_err(|_| anyhow::anyhow!("sender panicked"))??;
    rx.join().map_err(|_| anyhow::anyhow!("receiver panicked"))?;
    Ok(sent)
}

/// This host's timer noise right now: how late (seconds) a thread with 1 ns timer slack wakes
/// from `n` sleeps of 200 µs, as (median, p99). The forwarder's writers sleep the same way, so
/// tests derive their margins for the emulator's lateness from it.
pub fn wake_noise(n: usize) -> (f64, f64) {
    let h = std::thread::spawn(move || {
        let _ = nix::sys::prctl::set_timerslack(1);
        (0..n)
            .map(|_| {
                let t = Instant::now();
                std::thread::sleep(Duration::from_micros(200));
                (t.elapsed().as_secs_f64() - 200e-6).max(0.0)
            })
            .collect::<Vec<f64>>()
    });
    let v = h.join().unwrap_or_default();
    (median(&v), percentile(&v, 99.0))
}

fn bind_in_b(lab: &Lab) -> anyhow::Result<TcpListener> {
    lab.b
        .spawn(|| TcpListener::bind(SocketAddr::from((ADDR_B, 0))))?
        .join()
        .map_err(|_| anyhow::anyhow!("bind thread panicked"))?
        .context("bind in namespace B")
}

/// The median of a sample (sorted copy).
pub fn median(v: &[f64]) -> f64 {
    percentile(v, 50.0)
}

/// The `p`th percentile (nearest rank on a sorted copy; NaN for an empty sample).
pub fn percentile(v: &[f64], p: f64) -> f64 {
    if v.is_empty() {
        return f64::NAN;
    }
    let mut s = v.to_vec();
    s.sort_by(|a, b| a.total_cmp(b));
    let rank = ((p / 100.0) * s.len() as f64).ceil().max(1.0) as usize;
    s[rank.min(s.len()) - 1]
}
