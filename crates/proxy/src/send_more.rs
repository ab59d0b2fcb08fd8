//! Sending on TCP with `MSG_MORE`: the bytes join the socket's queue, but a partial segment is
//! kept back until the next send (or an acknowledgement of earlier data) instead of leaving at
//! once. Full segments still go. The downstream side sends a connection's last bytes this way
//! so that the close's FIN rides on their segment; the upstream side sends a request body whose
//! length says more follows, so that a 100 KiB upload leaves in full segments, not one per
//! 16 KiB frame (HAProxy does the same with its `CO_SFL_MSG_MORE`).

use std::io::{self, IoSlice};
use std::os::fd::AsRawFd as _;
use std::task::{Context, Poll};
use tokio::net::TcpStream;

/// Sends some of `bufs` on `tcp` with `MSG_MORE` (and `MSG_NOSIGNAL`): how many bytes went.
pub fn poll_send_more(tcp: &TcpStream, cx: &mut Context<'_>, bufs: &[IoSlice<'_>]) -> Poll<io::Result<usize>> {
    use nix::sys::socket::{sendmsg, MsgFlags, SockaddrStorage};
    let flags = MsgFlags::from_bits_retain(nix::libc::MSG_MORE) | MsgFlags::MSG_NOSIGNAL;
    loop {
        std::task::ready!(tcp.poll_write_ready(cx))?;
        let sent = tcp.try_io(tokio::io::Interest::WRITABLE, || {
            sendmsg::<SockaddrStorage>(tcp.as_raw_fd(), bufs, &[], flags, None).map_err(io::Error::from)
        });
        match sent {
            Err(e) if e.kind() == io::ErrorKind::WouldBlock => continue,
            other => return Poll::Ready(other),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use tokio::io::AsyncReadExt as _;

    #[tokio::test]
    async fn what_is_sent_with_more_arrives_whole_once_a_plain_send_follows() {
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let addr = listener.local_addr().unwrap();
        let (client, accepted) = tokio::join!(TcpStream::connect(addr), listener.accept());
        let (client, (mut server, _)) = (client.unwrap(), accepted.unwrap());
        let parts = [IoSlice::new(b"hel"), IoSlice::new(b"lo ")];
        let sent = std::future::poll_fn(|cx| poll_send_more(&client, cx, &parts))
            .await
            .unwrap();
        assert_eq!(sent, 6);
        client.try_write(b"world").unwrap();
        let mut got = vec![0; 11];
        server.read_exact(&mut got).await.unwrap();
        assert_eq!(got, b"hello world");
    }
}
