//! An HTTP/1.1 origin whose answers a test writes itself, byte for byte: for what a real
//! server would not send on demand (interim responses, connection-specific fields, odd
//! spellings). Each connection is kept alive and read one bodiless request head at a time.

use std::io::{Read, Write};
use std::net::{TcpListener, TcpStream};

/// Starts an origin on a free loopback port that calls `answer(path, stream)` for every request
/// head it reads (bodiless requests: GET, HEAD); `answer` writes the response (or several, such
/// as interim responses before the final one). An error from it closes the connection. Returns
/// the origin's address.
pub fn scripted_origin<F>(answer: F) -> String
where
    F: Fn(&str, &mut TcpStream) -> std::io::Result<()> + Clone + Send + 'static,
{
    let listener = TcpListener::bind("127.0.0.1:0").unwrap();
    let addr = listener.local_addr().unwrap().to_string();
    std::thread::spawn(move || {
        for tcp in listener.incoming() {
            let Ok(mut tcp) = tcp else { return };
            let answer = answer.clone();
            std::thread::spawn(move || {
                let mut buf = Vec::new();
                let mut chunk = [0u8; 4096];
                loop {
                    while let Some(end) = buf.windows(4).position(|w| w == b"\r\n\r\n") {
                        let head = String::from_utf8_lossy(&buf[..end]).into_owned();
                        buf.drain(..end + 4);
                        let path = head.split(' ').nth(1).unwrap_or("?");
                        if answer(path, &mut tcp).is_err() {
                            return;
                        }
                    }
                    match tcp.read(&mut chunk) {
                        Ok(0) | Err(_) => return,
                        Ok(k) => buf.extend_from_slice(&chunk[..k]),
                    }
                }
            });
        }
    });
    addr
}

/// `answer` for [`scripted_origin`] that writes `response(path)` whole.
pub fn write_all(tcp: &mut TcpStream, response: &str) -> std::io::Result<()> {
    tcp.write_all(response.as_bytes())
}
