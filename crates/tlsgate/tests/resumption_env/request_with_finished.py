"""A TLS 1.3 client (Python's ssl, i.e. OpenSSL) that sends its Finished and its request in one
write, as browsers and most HTTP clients that have a request waiting do, and reports what the
server's first segment after the handshake held. Each connection offers the newest session.

usage: request_with_finished.py PORT CA_FILE CONNECTIONS
prints one line per connection:
  reused=0|1 answer_in_first_read=0|1 answer=0|1 ticket=0|1
"""
import socket
import ssl
import sys

PORT, CA, N = int(sys.argv[1]), sys.argv[2], int(sys.argv[3])
REQUEST = b"GET /hello HTTP/1.1\r\nHost: localhost\r\nConnection: close\r\n\r\n"
ANSWER = b"Hello, world!"

ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_CLIENT)
ctx.load_verify_locations(CA)
ctx.minimum_version = ssl.TLSVersion.TLSv1_3


def drain(obj):
    """Application bytes decrypted from what the memory BIO holds (tickets are taken in passing)."""
    got = b""
    try:
        while True:
            chunk = obj.read(65536)
            if not chunk:
                break
            got += chunk
    except (ssl.SSLWantReadError, ssl.SSLZeroReturnError):
        pass
    return got


def connection(session):
    sock = socket.create_connection(("127.0.0.1", PORT), timeout=10)
    sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
    incoming, outgoing = ssl.MemoryBIO(), ssl.MemoryBIO()
    obj = ctx.wrap_bio(incoming, outgoing, server_hostname="localhost", session=session)
    while True:
        try:
            obj.do_handshake()
            break
        except ssl.SSLWantReadError:
            if outgoing.pending:
                sock.sendall(outgoing.read())
            data = sock.recv(65536)
            if not data:
                sys.exit("the server closed during the handshake")
            incoming.write(data)
    # The Finished waits in `outgoing`; the request joins it and both leave in one write.
    obj.write(REQUEST)
    sock.sendall(outgoing.read())
    incoming.write(sock.recv(65536))
    first = drain(obj)
    got = first
    while True:
        data = sock.recv(65536)
        if not data:
            break
        incoming.write(data)
        got += drain(obj)
    sock.close()
    session = obj.session
    ticket = session is not None and session.has_ticket
    print(
        f"reused={int(obj.session_reused)} answer_in_first_read={int(ANSWER in first)} "
        f"answer={int(ANSWER in got)} ticket={int(ticket)}",
        flush=True,
    )
    return session


session = None
for _ in range(N):
    session = connection(session)
