#!/usr/bin/env python3
"""Idle TLS keep-alive connections for scripts/idle-memory.sh, from a client that is not tlsgate's.

Opens N TLS connections (Python's `ssl`, i.e. OpenSSL), sends one request on each over HTTP/1.1
or HTTP/2 (ALPN; HTTP/2 written by hand: preface, SETTINGS, one HEADERS frame), reads the whole
response, and then leaves every connection idle. Protocol on stdin/stdout, for the script:

    -> "ready N"              all N answered once; the connections are idle now
    <- "check"                one more request on every connection (proves the server kept them)
    -> "checked OK FAILED"    and the client exits, closing everything
    <- "close" / EOF          exit at once

Only the Python standard library is used.
"""

import argparse
import asyncio
import ssl
import struct
import sys

PREFACE = b"PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n"
DATA, HEADERS, SETTINGS, PING, GOAWAY, WINDOW_UPDATE = 0x0, 0x1, 0x4, 0x6, 0x7, 0x8
END_STREAM, END_HEADERS, ACK = 0x1, 0x4, 0x1


def frame(kind, flags, stream, payload=b""):
    return struct.pack(">I", len(payload))[1:] + bytes([kind, flags]) + struct.pack(">I", stream) + payload


def skip_size_updates(block):
    """The header block after its leading dynamic table size updates."""
    i = 0
    while i < len(block) and block[i] & 0xE0 == 0x20:
        first = block[i]
        i += 1
        if first & 0x1F == 0x1F:
            while i < len(block) and block[i] & 0x80:
                i += 1
            i += 1
    return block[i:]


def hpack_get(path, authority):
    """A GET request's header block: static-table :method GET, :scheme https; :path and
    :authority as literals without indexing (name from the static table, no Huffman)."""

    def literal(index, value):
        v = value.encode()
        assert len(v) < 127
        return bytes([index, len(v)]) + v  # 0000xxxx: literal without indexing, 4-bit index

    block = b"\x82\x87"  # :method GET, :scheme https
    block += b"\x84" if path == "/" else literal(4, path)
    block += literal(1, authority)
    return block


# A browser's request fields (Chrome 131 on Linux), sent as literals with incremental indexing
# (RFC 7541 §6.2.1) as browsers do: they fill the server's HPACK decoder table (about 1.1 KB of
# entry sizes). Names from the static table where it has them (its index), else new names (0).
BROWSER_FIELDS = [
    (58, "user-agent", "Mozilla/5.0 (X11; Linux x86_64) AppleWebKit/537.36 (KHTML, like Gecko) Chrome/131.0.0.0 Safari/537.36"),
    (19, "accept", "text/html,application/xhtml+xml,application/xml;q=0.9,image/avif,image/webp,*/*;q=0.8"),
    (17, "accept-language", "en-GB,en-US;q=0.9,en;q=0.8,de;q=0.7"),
    (16, "accept-encoding", "gzip, deflate, br, zstd"),
    (0, "sec-ch-ua", '"Google Chrome";v="131", "Chromium";v="131", "Not_A Brand";v="24"'),
    (0, "sec-ch-ua-mobile", "?0"),
    (0, "sec-ch-ua-platform", '"Linux"'),
    (0, "upgrade-insecure-requests", "1"),
    (0, "sec-fetch-site", "none"),
    (0, "sec-fetch-mode", "navigate"),
    (0, "sec-fetch-user", "?1"),
    (0, "sec-fetch-dest", "document"),
    (0, "priority", "u=0, i"),
]


def hpack_int(value, prefix_bits, first):
    """An HPACK integer (RFC 7541 §5.1) with `first`'s high bits before the prefix."""
    limit = (1 << prefix_bits) - 1
    if value < limit:
        return bytes([first | value])
    out = [first | limit]
    value -= limit
    while value >= 128:
        out.append(value % 128 + 128)
        value //= 128
    out.append(value)
    return bytes(out)


def browser_fields():
    """BROWSER_FIELDS as literals with incremental indexing (no Huffman)."""
    out = b""
    for index, name, value in BROWSER_FIELDS:
        out += hpack_int(index, 6, 0x40)
        if index == 0:
            out += hpack_int(len(name), 7, 0) + name.encode()
        out += hpack_int(len(value), 7, 0) + value.encode()
    return out


class Conn:
    def __init__(self, reader, writer, proto, indexed=False):
        self.r, self.w, self.proto = reader, writer, proto
        self.stream = 1
        self.indexed = indexed
        # SETTINGS_HEADER_TABLE_SIZE values received since the last header block: the next
        # block signals the smallest, then the last (RFC 7541 §4.2). This client never refers
        # to its own entries, so it keeps no table.
        self.table_sizes = []
        # HTTP/2: the streams waiting for their response, and the task reading frames.
        self.pending = {}
        self.reader = None

    async def request(self, path, authority):
        if self.proto == "h2":
            return await self._h2(path, authority)
        return await self._h1(path, authority)

    async def _h1(self, path, authority):
        self.w.write(f"GET {path} HTTP/1.1\r\nHost: {authority}\r\nUser-Agent: idle-memory\r\n\r\n".encode())
        await self.w.drain()
        head = await self.r.readuntil(b"\r\n\r\n")
        lines = head.decode("latin-1").split("\r\n")
        status = int(lines[0].split()[1])
        length = None
        chunked = False
        for line in lines[1:]:
            name, _, value = line.partition(":")
            if name.strip().lower() == "content-length":
                length = int(value.strip())
            if name.strip().lower() == "transfer-encoding" and "chunked" in value.lower():
                chunked = True
        if chunked:
            while True:
                size = int((await self.r.readuntil(b"\r\n")).split(b";")[0], 16)
                await self.r.readexactly(size + 2)
                if size == 0:
                    break
        elif length:
            await self.r.readexactly(length)
        return status

    async def _h2(self, path, authority):
        out = b""
        if self.stream == 1:
            out += PREFACE + frame(SETTINGS, 0, 0)
            # Frames are read all the time, also while the connection is idle, as a browser's
            # network stack reads them: a server's SETTINGS or PING is answered at once.
            self.reader = asyncio.ensure_future(self._read_frames())
        sid = self.stream
        self.stream += 2
        block = hpack_get(path, authority)
        if self.indexed:
            sizes, self.table_sizes = self.table_sizes, []
            updates = [min(sizes), sizes[-1]] if sizes else []
            if len(updates) == 2 and updates[0] == updates[1]:
                updates = updates[:1]
            block = b"".join(hpack_int(v, 5, 0x20) for v in updates) + block + browser_fields()
        out += frame(HEADERS, END_STREAM | END_HEADERS, sid, block)
        done = asyncio.get_running_loop().create_future()
        self.pending[sid] = done
        self.w.write(out)
        await self.w.drain()
        return await done

    async def _read_frames(self):
        """Reads the server's frames until the connection ends: answers SETTINGS and PING, notes
        table sizes, and completes each request with its status at its END_STREAM."""
        status = {}
        try:
            while True:
                head = await self.r.readexactly(9)
                length = int.from_bytes(head[:3], "big")
                kind, flags = head[3], head[4]
                stream = int.from_bytes(head[5:9], "big") & 0x7FFFFFFF
                payload = await self.r.readexactly(length)
                if kind == SETTINGS and not flags & ACK:
                    for i in range(0, len(payload), 6):
                        ident, value = struct.unpack(">HI", payload[i : i + 6])
                        if ident == 1:  # SETTINGS_HEADER_TABLE_SIZE
                            self.table_sizes.append(value)
                    self.w.write(frame(SETTINGS, ACK, 0))
                elif kind == PING and not flags & ACK:
                    self.w.write(frame(PING, ACK, 0, payload))
                elif kind == GOAWAY:
                    raise ConnectionError("GOAWAY")
                elif stream in self.pending and kind == HEADERS:
                    # Servers send :status 200 as the static table's entry 8 (0x88), after any
                    # dynamic table size updates (RFC 7541 §6.3: 001xxxxx, then 1xxxxxxx bytes
                    # while the integer continues), which tlsgate sends after an idle spell.
                    if stream not in status:
                        block = skip_size_updates(payload)
                        status[stream] = 200 if block[:1] == b"\x88" else 0
                elif stream in self.pending and kind == DATA and length:
                    # Give the window back, as a client would.
                    self.w.write(frame(WINDOW_UPDATE, 0, 0, struct.pack(">I", length)))
                if stream in self.pending and kind in (HEADERS, DATA) and flags & END_STREAM:
                    self.pending.pop(stream).set_result(status.pop(stream, None))
        except Exception as e:  # noqa: BLE001 (the requests waiting get it)
            for done in self.pending.values():
                if not done.done():
                    done.set_exception(ConnectionError(repr(e)))
            self.pending.clear()


async def open_one(args, ctx, sem, conns, errors):
    async with sem:
        try:
            reader, writer = await asyncio.open_connection(
                args.host, args.port, ssl=ctx, server_hostname=args.sni, limit=1 << 16
            )
            got = writer.get_extra_info("ssl_object").selected_alpn_protocol()
            want = "h2" if args.proto == "h2" else "http/1.1"
            if got != want:
                raise ConnectionError(f"ALPN {got!r}, wanted {want!r}")
            c = Conn(reader, writer, args.proto, args.browser_fields)
            status = await c.request(args.path, args.sni)
            if status != 200:
                raise ConnectionError(f"status {status}")
            conns.append(c)
        except Exception as e:  # noqa: BLE001 (counted and reported)
            errors.append(repr(e))


async def check_one(args, c):
    try:
        return await asyncio.wait_for(c.request(args.path, args.sni), 20) == 200
    except Exception:  # noqa: BLE001
        return False


async def main():
    p = argparse.ArgumentParser()
    p.add_argument("--host", default="127.0.0.1")
    p.add_argument("--port", type=int, required=True)
    p.add_argument("--sni", default="localhost")
    p.add_argument("--ca", required=True)
    p.add_argument("--proto", choices=["h1", "h2"], default="h1")
    p.add_argument("--path", default="/")
    p.add_argument("-n", type=int, default=2000)
    p.add_argument("--concurrency", type=int, default=32)
    p.add_argument("--browser-fields", action="store_true", help="HTTP/2: send a browser's request fields, indexed")
    args = p.parse_args()

    ctx = ssl.create_default_context(cafile=args.ca)
    ctx.minimum_version = ssl.TLSVersion.TLSv1_3
    ctx.set_alpn_protocols(["h2" if args.proto == "h2" else "http/1.1"])
    sem = asyncio.Semaphore(args.concurrency)
    conns, errors = [], []
    await asyncio.gather(*(open_one(args, ctx, sem, conns, errors) for _ in range(args.n)))
    if errors:
        print(f"errors {len(errors)} first: {errors[0]}", file=sys.stderr, flush=True)
    print(f"ready {len(conns)}", flush=True)
    loop = asyncio.get_running_loop()
    line = await loop.run_in_executor(None, sys.stdin.readline)
    if line.strip() == "check":
        ok = sum(await asyncio.gather(*(check_one(args, c) for c in conns)))
        print(f"checked {ok} {len(conns) - ok}", flush=True)
    for c in conns:
        c.w.transport.abort()


if __name__ == "__main__":
    asyncio.run(main())
