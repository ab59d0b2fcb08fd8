//! The QUIC sockets' datapath: batched sends (UDP GSO), coalesced receives (UDP GRO), and the
//! reuseport program that steers each packet to the worker owning its connection ID.
//!
//! - **GSO** (`UDP_SEGMENT`): a connection's packets to one peer go to the kernel as one buffer of
//!   equal-size segments (the last may be shorter) in one `sendmsg`, at most [`MAX_SEGMENTS`] and
//!   [`MAX_BATCH`] bytes; the kernel (or the NIC) cuts it into datagrams. Where the kernel or the
//!   route refuses (`EIO`, `EINVAL`), the socket falls back to one datagram per call for good.
//! - **GRO** (`UDP_GRO`): the kernel may hand over several datagrams of one flow as one buffer with
//!   their segment size in a control message; [`recv`] reports it and the endpoint splits them.
//! - **Steering** (`SO_ATTACH_REUSEPORT_CBPF`): a classic BPF program run by the kernel on every
//!   datagram reaching the SO_REUSEPORT group picks the socket by the first byte of the
//!   destination connection ID, the byte that names the owning worker in every ID the gateway
//!   issues (`cid`): a client whose address changed (NAT rebinding, migration) still reaches its
//!   worker, with no forwarding between workers. A value out of range (a client-chosen ID of an
//!   Initial, a foreign ID) makes the kernel fall back to its address hash. A group with more
//!   sockets than workers (taken over from an old process with more) gets [`within_program`]
//!   before its surplus sockets are closed: every index modulo the workers, so none reaches them.
//!
//! Safe code throughout: `nix` wraps the system calls.

use nix::libc;
use nix::sys::socket::{
    recvmsg, sendmsg, setsockopt, sockopt, ControlMessage, ControlMessageOwned, MsgFlags, SockaddrStorage,
};
use std::io::{self, IoSlice, IoSliceMut};
use std::net::{SocketAddr, SocketAddrV4, SocketAddrV6};
use std::os::fd::{AsFd, AsRawFd};
use std::sync::atomic::{AtomicBool, Ordering};
use tokio::io::Interest;

/// Segments in one GSO send at most (the kernel's `UDP_MAX_SEGMENTS` is 64 or more).
pub const MAX_SEGMENTS: usize = 64;
/// Bytes in one GSO send at most (one UDP datagram's payload limit, headers left room).
pub const MAX_BATCH: usize = 65_000;
/// Offset of a long header's destination connection ID length (after the first byte and the
/// 4-byte version), RFC 9000 §17.2.
const LONG_DCID_LEN_AT: u32 = 5;

/// One worker's QUIC socket and what its kernel path can do.
pub struct QuicSocket {
    io: tokio::net::UdpSocket,
    gso: AtomicBool,
    gro: bool,
}

/// A datagram (or a GRO train of them) read from the socket.
#[derive(Debug, Clone, Copy)]
pub struct Received {
    /// Bytes in the buffer.
    pub len: usize,
    /// The sender.
    pub from: SocketAddr,
    /// Size of each datagram in the buffer (the last may be shorter); `len` when not coalesced.
    pub segment: usize,
}

impl QuicSocket {
    /// Registers `socket` with the runtime, asking the kernel for GRO and probing GSO.
    pub fn new(socket: std::net::UdpSocket) -> io::Result<Self> {
        let gro = setsockopt(&socket, sockopt::UdpGroSegment, &true).is_ok();
        let gso = nix::sys::socket::getsockopt(&socket, sockopt::UdpGsoSegment).is_ok();
        Ok(Self {
            io: tokio::net::UdpSocket::from_std(socket)?,
            gso: AtomicBool::new(gso),
            gro,
        })
    }

    /// The local address.
    pub fn local_addr(&self) -> io::Result<SocketAddr> {
        self.io.local_addr()
    }

    /// Whether sends may be batched (GSO).
    pub fn gso(&self) -> bool {
        self.gso.load(Ordering::Relaxed)
    }

    /// Whether the kernel was asked to coalesce receives (GRO).
    pub fn gro(&self) -> bool {
        self.gro
    }

    /// Sends one datagram if the socket can take it now (answers without state: resets, Retry).
    pub fn try_send_to(&self, buf: &[u8], to: SocketAddr) -> io::Result<usize> {
        self.io.try_send_to(buf, to)
    }

    /// Receives a datagram, or a GRO train of equal-size datagrams from one sender.
    #[allow(clippy::ptr_arg)] // nix's recvmsg takes the control buffer as a Vec (`cmsg_space!`)
    pub async fn recv(&self, buf: &mut [u8], cmsg: &mut Vec<u8>) -> io::Result<Received> {
        let fd = self.io.as_raw_fd();
        self.io
            .async_io(Interest::READABLE, || {
                let mut iov = [IoSliceMut::new(buf)];
                let msg = recvmsg::<SockaddrStorage>(fd, &mut iov, Some(cmsg), MsgFlags::MSG_DONTWAIT)
                    .map_err(io::Error::from)?;
                let from = msg
                    .address
                    .as_ref()
                    .and_then(socket_addr)
                    .ok_or_else(|| io::Error::other("datagram without a sender address"))?;
                let mut segment = msg.bytes;
                if let Ok(cmsgs) = msg.cmsgs() {
                    for c in cmsgs {
                        if let ControlMessageOwned::UdpGroSegments(size) = c {
                            segment = usize::try_from(size).unwrap_or(msg.bytes).clamp(1, msg.bytes.max(1));
                        }
                    }
                }
                Ok(Received {
                    len: msg.bytes,
                    from,
                    segment,
                })
            })
            .await
    }

    /// Sends what the socket takes now of `buf`, datagrams of `segment` bytes to `to` (the last
    /// may be shorter): one `sendmsg` with GSO, or one call per datagram where GSO is off or
    /// the kernel refuses it (then off for good). Returns the bytes taken (a whole number of
    /// datagrams; fewer than `buf.len()` when the socket's buffer is full) and the calls made.
    pub fn try_send(&self, buf: &[u8], segment: usize, to: SocketAddr) -> io::Result<(usize, usize)> {
        let segment = segment.max(1);
        if buf.len() > segment && self.gso() {
            match self.try_send_gso(buf, segment, to) {
                Ok(()) => return Ok((buf.len(), 1)),
                Err(e) if e.kind() == io::ErrorKind::WouldBlock => return Ok((0, 0)),
                Err(e) if matches!(e.raw_os_error(), Some(libc::EIO | libc::EINVAL | libc::EOPNOTSUPP)) => {
                    tracing::warn!(error = %e, %to, "UDP GSO refused by the kernel; sending one datagram per call");
                    self.gso.store(false, Ordering::Relaxed);
                }
                Err(e) => return Err(e),
            }
        }
        let (mut taken, mut calls) = (0, 0);
        for chunk in buf.chunks(segment) {
            match self.io.try_send_to(chunk, to) {
                Ok(_) => {
                    taken += chunk.len();
                    calls += 1;
                }
                Err(e) if e.kind() == io::ErrorKind::WouldBlock => break,
                Err(e) => return Err(e),
            }
        }
        Ok((taken, calls))
    }

    /// [`Self::try_send`] until all of `buf` is sent, waiting for room. Returns the calls made.
    pub async fn send(&self, mut buf: &[u8], segment: usize, to: SocketAddr) -> io::Result<usize> {
        let mut calls = 0;
        loop {
            let (taken, made) = self.try_send(buf, segment, to)?;
            calls += made;
            buf = &buf[taken..];
            if buf.is_empty() {
                return Ok(calls);
            }
            self.io.writable().await?;
        }
    }

    fn try_send_gso(&self, buf: &[u8], segment: usize, to: SocketAddr) -> io::Result<()> {
        let fd = self.io.as_raw_fd();
        let addr = SockaddrStorage::from(to);
        let size = u16::try_from(segment).map_err(|_| io::Error::from_raw_os_error(libc::EINVAL))?;
        self.io.try_io(Interest::WRITABLE, || {
            let iov = [IoSlice::new(buf)];
            let cmsg = [ControlMessage::UdpGsoSegments(&size)];
            sendmsg(fd, &iov, &cmsg, MsgFlags::MSG_DONTWAIT, Some(&addr))
                .map(|_| ())
                .map_err(io::Error::from)
        })
    }
}

fn socket_addr(a: &SockaddrStorage) -> Option<SocketAddr> {
    if let Some(v4) = a.as_sockaddr_in() {
        return Some(SocketAddr::V4(SocketAddrV4::from(*v4)));
    }
    a.as_sockaddr_in6().map(|v6| SocketAddr::V6(SocketAddrV6::from(*v6)))
}

/// The steering program: returns the socket index named by the destination connection ID's
/// first byte. Short header: the ID starts at byte 1 (its length is the gateway's own, 16).
/// Long header: the ID's length is byte 5 and the ID starts at byte 6; an ID of another length
/// (a client's choice) returns an index out of range, so the kernel hashes the address as it
/// would without a program. A datagram too short for a load ends the program with 0 (the first
/// worker, which drops it as garbage).
pub fn steering_program(cid_len: u8) -> Vec<libc::sock_filter> {
    const LD_B_ABS: u16 = (libc::BPF_LD | libc::BPF_B | libc::BPF_ABS) as u16;
    const JSET_K: u16 = (libc::BPF_JMP | libc::BPF_JSET | libc::BPF_K) as u16;
    const JEQ_K: u16 = (libc::BPF_JMP | libc::BPF_JEQ | libc::BPF_K) as u16;
    const RET_A: u16 = (libc::BPF_RET | libc::BPF_A) as u16;
    const RET_K: u16 = (libc::BPF_RET | libc::BPF_K) as u16;
    let op = |code: u16, k: u32, jt: u8, jf: u8| libc::sock_filter { code, jt, jf, k };
    vec![
        // 0: A = first byte
        op(LD_B_ABS, 0, 0, 0),
        // 1: long header? -> 2, else -> 6
        op(JSET_K, 0x80, 0, 4),
        // 2: A = DCID length
        op(LD_B_ABS, LONG_DCID_LEN_AT, 0, 0),
        // 3: the gateway's length? -> 4, else -> 8 (hash)
        op(JEQ_K, u32::from(cid_len), 0, 4),
        // 4: A = first byte of the long header's DCID
        op(LD_B_ABS, LONG_DCID_LEN_AT + 1, 0, 0),
        // 5: return A
        op(RET_A, 0, 0, 0),
        // 6: A = first byte of the short header's DCID
        op(LD_B_ABS, 1, 0, 0),
        // 7: return A
        op(RET_A, 0, 0, 0),
        // 8: out of range: the kernel hashes
        op(RET_K, u32::MAX, 0, 0),
    ]
}

/// The steering program of a group whose sockets from index `workers` on are about to close
/// (`surplus`): the owner byte as in [`steering_program`] (a long header's first ID byte
/// whatever the ID's length, a client's random one included), taken modulo `workers`, so the
/// kernel neither names nor hashes to a socket beyond them. A worker's own IDs (below
/// `workers`) keep their socket.
pub fn within_program(workers: u32) -> Vec<libc::sock_filter> {
    const LD_B_ABS: u16 = (libc::BPF_LD | libc::BPF_B | libc::BPF_ABS) as u16;
    const JSET_K: u16 = (libc::BPF_JMP | libc::BPF_JSET | libc::BPF_K) as u16;
    const JA: u16 = (libc::BPF_JMP | libc::BPF_JA) as u16;
    const MOD_K: u16 = (libc::BPF_ALU | libc::BPF_MOD | libc::BPF_K) as u16;
    const RET_A: u16 = (libc::BPF_RET | libc::BPF_A) as u16;
    let op = |code: u16, k: u32, jt: u8, jf: u8| libc::sock_filter { code, jt, jf, k };
    vec![
        // 0: A = first byte
        op(LD_B_ABS, 0, 0, 0),
        // 1: long header? -> 2, else -> 4
        op(JSET_K, 0x80, 0, 2),
        // 2: A = first byte of the long header's DCID
        op(LD_B_ABS, LONG_DCID_LEN_AT + 1, 0, 0),
        // 3: -> 5
        op(JA, 1, 0, 0),
        // 4: A = first byte of the short header's DCID
        op(LD_B_ABS, 1, 0, 0),
        // 5: A %= workers
        op(MOD_K, workers.max(1), 0, 0),
        // 6: return A
        op(RET_A, 0, 0, 0),
    ]
}

/// Attaches [`steering_program`] to the SO_REUSEPORT group of `member` (any bound socket of it).
pub fn steer_by_connection_id(member: &impl AsFd, cid_len: u8) -> io::Result<()> {
    attach(member, steering_program(cid_len))
}

/// Attaches [`within_program`] to the SO_REUSEPORT group of `member`: from now on no datagram
/// reaches a socket at index `workers` or beyond.
pub fn steer_within(member: &impl AsFd, workers: u32) -> io::Result<()> {
    attach(member, within_program(workers))
}

fn attach(member: &impl AsFd, mut program: Vec<libc::sock_filter>) -> io::Result<()> {
    let fprog = libc::sock_fprog {
        len: u16::try_from(program.len()).expect("a short program"),
        filter: program.as_mut_ptr(),
    };
    setsockopt(member, sockopt::AttachReusePortCbpf, &fprog).map_err(io::Error::from)
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::time::Duration;

    /// Evaluates `program` over `packet` the way the kernel's classic BPF interpreter does for the
    /// instructions [`steering_program`] uses (loads past the end return 0).
    fn run_program(program: &[libc::sock_filter], packet: &[u8]) -> u32 {
        let mut a: u32 = 0;
        let mut pc = 0usize;
        while let Some(i) = program.get(pc) {
            let class = u32::from(i.code) & 0x07;
            match class {
                c if c == libc::BPF_LD => match packet.get(i.k as usize) {
                    Some(b) => a = u32::from(*b),
                    None => return 0,
                },
                c if c == libc::BPF_JMP => {
                    let taken = match u32::from(i.code) & 0xf0 {
                        op if op == libc::BPF_JA => {
                            pc += i.k as usize + 1;
                            continue;
                        }
                        op if op == libc::BPF_JSET => a & i.k != 0,
                        op if op == libc::BPF_JEQ => a == i.k,
                        _ => return 0,
                    };
                    pc += usize::from(if taken { i.jt } else { i.jf });
                }
                c if c == libc::BPF_ALU => match u32::from(i.code) & 0xf0 {
                    op if op == libc::BPF_MOD && i.k != 0 => a %= i.k,
                    _ => return 0,
                },
                c if c == libc::BPF_RET => {
                    return if u32::from(i.code) & 0x18 == libc::BPF_A {
                        a
                    } else {
                        i.k
                    };
                }
                _ => return 0,
            }
            pc += 1;
        }
        0
    }

    fn short(first: u8) -> Vec<u8> {
        let mut p = vec![0x40u8, first];
        p.extend_from_slice(&[7u8; 40]);
        p
    }

    fn long(dcid_len: u8, first: u8) -> Vec<u8> {
        let mut p = vec![0xc0u8, 0, 0, 0, 1, dcid_len, first];
        p.extend_from_slice(&[9u8; 1200]);
        p
    }

    #[test]
    fn the_program_reads_the_owner_byte_of_both_header_forms() {
        let prog = steering_program(16);
        assert_eq!(run_program(&prog, &short(3)), 3);
        assert_eq!(run_program(&prog, &short(0)), 0);
        assert_eq!(run_program(&prog, &long(16, 2)), 2);
        assert_eq!(run_program(&prog, &long(8, 2)), u32::MAX, "a client's ID length: hash");
        assert_eq!(run_program(&prog, &long(20, 1)), u32::MAX);
        assert_eq!(run_program(&prog, &[0x40]), 0, "too short: the first socket");
        assert_eq!(run_program(&prog, &[]), 0);
    }

    #[test]
    fn the_within_program_never_names_a_socket_beyond_the_workers() {
        let prog = within_program(2);
        assert_eq!(run_program(&prog, &short(1)), 1, "a worker's own ID keeps its socket");
        assert_eq!(run_program(&prog, &long(16, 0)), 0);
        assert_eq!(
            run_program(&prog, &short(2)),
            0,
            "an old process's third worker: modulo"
        );
        assert_eq!(run_program(&prog, &long(16, 5)), 1);
        assert_eq!(
            run_program(&prog, &long(8, 201)),
            1,
            "a client's ID: its first byte, modulo"
        );
        for byte in 0..=255u8 {
            assert!(run_program(&prog, &short(byte)) < 2);
            assert!(run_program(&prog, &long(8, byte)) < 2);
        }
        assert_eq!(run_program(&within_program(1), &long(8, 77)), 0);
        assert_eq!(run_program(&prog, &[0x40]), 0, "too short: the first socket");
    }

    /// With [`within_program`] attached, the kernel delivers nothing to the group's sockets
    /// beyond the workers, whatever the ID and the source port, and the workers' own IDs still
    /// reach their sockets.
    #[test]
    fn the_kernel_sends_nothing_to_a_socket_beyond_the_workers_with_the_within_program() {
        let group = crate::downstream::quic::socket::bind_workers("127.0.0.1:0".parse().unwrap(), 3).unwrap();
        let addr = group[0].local_addr().unwrap();
        steer_within(&group[0], 2).unwrap();
        for s in &group {
            s.set_nonblocking(true).unwrap();
        }
        let mut sent = 0;
        for round in 0..8u8 {
            let client = std::net::UdpSocket::bind("127.0.0.1:0").unwrap();
            for byte in [0u8, 1, 2, 3, 200, round] {
                client.send_to(&short(byte), addr).unwrap();
                client.send_to(&long(8, byte), addr).unwrap();
                client.send_to(&long(16, byte), addr).unwrap();
                sent += 3;
            }
        }
        std::thread::sleep(Duration::from_millis(100));
        let mut got = [0usize; 3];
        let mut buf = [0u8; 2048];
        for (i, s) in group.iter().enumerate() {
            while let Ok((n, _)) = s.recv_from(&mut buf) {
                if i < 2 && buf[0] == 0x40 && buf[1] < 2 {
                    assert_eq!(usize::from(buf[1]), i, "worker {}'s ID reached socket {i}", buf[1]);
                }
                assert!(n == 42 || n == 1207, "{n}");
                got[i] += 1;
            }
        }
        assert_eq!(got[2], 0, "the surplus socket got datagrams: {got:?}");
        assert_eq!(got[0] + got[1], sent, "{got:?}");
    }

    fn runtime() -> tokio::runtime::Runtime {
        tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
            .unwrap()
    }

    /// The kernel runs the program on the UDP payload and delivers each datagram to the socket
    /// its first connection-ID byte names, whatever port it came from.
    #[test]
    fn the_kernel_steers_each_datagram_to_the_socket_its_connection_id_names() {
        let group = crate::downstream::quic::socket::bind_workers("127.0.0.1:0".parse().unwrap(), 4).unwrap();
        let addr = group[0].local_addr().unwrap();
        steer_by_connection_id(&group[0], 16).unwrap();
        for s in &group {
            s.set_nonblocking(false).unwrap();
            s.set_read_timeout(Some(Duration::from_secs(2))).unwrap();
        }
        // From many source ports (as after NAT rebindings): the hash alone would scatter them.
        for round in 0..6u8 {
            let client = std::net::UdpSocket::bind("127.0.0.1:0").unwrap();
            for worker in 0..4u8 {
                client.send_to(&short(worker), addr).unwrap();
                client.send_to(&long(16, worker), addr).unwrap();
                let mut buf = [0u8; 2048];
                for _ in 0..2 {
                    let (n, _) = group[usize::from(worker)]
                        .recv_from(&mut buf)
                        .unwrap_or_else(|e| panic!("round {round}: worker {worker}'s socket got nothing: {e}"));
                    assert!(n == 42 || n == 1207, "{n}");
                }
            }
        }
        // IDs out of range fall back to the hash: delivered somewhere, exactly once.
        let client = std::net::UdpSocket::bind("127.0.0.1:0").unwrap();
        client.send_to(&long(8, 200), addr).unwrap();
        client.send_to(&short(200), addr).unwrap();
        let mut got = 0;
        for s in &group {
            s.set_nonblocking(true).unwrap();
        }
        std::thread::sleep(Duration::from_millis(100));
        let mut buf = [0u8; 2048];
        for s in &group {
            while s.recv_from(&mut buf).is_ok() {
                got += 1;
            }
        }
        assert_eq!(got, 2);
    }

    /// A GSO batch leaves as separate datagrams of the segment size; a receiver with GRO may get
    /// them back coalesced and is told the segment size.
    #[test]
    fn gso_sends_segments_and_gro_reports_their_size() {
        runtime().block_on(async {
            let rx = QuicSocket::new(
                crate::downstream::quic::socket::bind_workers("127.0.0.1:0".parse().unwrap(), 1)
                    .unwrap()
                    .remove(0),
            )
            .unwrap();
            let plain = std::net::UdpSocket::bind("127.0.0.1:0").unwrap();
            plain.set_read_timeout(Some(Duration::from_secs(2))).unwrap();
            let tx_std = std::net::UdpSocket::bind("127.0.0.1:0").unwrap();
            tx_std.set_nonblocking(true).unwrap();
            let tx = QuicSocket::new(tx_std).unwrap();
            assert!(tx.gso(), "this kernel has UDP GSO");
            assert!(rx.gro(), "this kernel has UDP GRO");
            let mut batch = Vec::new();
            for i in 0..10u8 {
                batch.extend_from_slice(&[i; 1200]);
            }
            batch.extend_from_slice(&[10u8; 500]);
            // To a socket without GRO: eleven datagrams, one call.
            let calls = tx.send(&batch, 1200, plain.local_addr().unwrap()).await.unwrap();
            assert_eq!(calls, 1);
            let mut buf = [0u8; 65_536];
            for i in 0..11u8 {
                let (n, _) = plain.recv_from(&mut buf).unwrap();
                assert_eq!(n, if i == 10 { 500 } else { 1200 });
                assert!(buf[..n].iter().all(|b| *b == i));
            }
            // To the GRO socket: the same bytes, in segments of the reported size.
            tx.send(&batch, 1200, rx.local_addr().unwrap()).await.unwrap();
            let mut cmsg = nix::cmsg_space!(i32);
            let mut seen = Vec::new();
            while seen.len() < batch.len() {
                let got = tokio::time::timeout(Duration::from_secs(2), rx.recv(&mut buf, &mut cmsg))
                    .await
                    .expect("the batch arrives")
                    .unwrap();
                assert!(got.segment == 1200 || got.len == 500, "{got:?}");
                seen.extend_from_slice(&buf[..got.len]);
            }
            assert_eq!(seen, batch);
        });
    }
}
