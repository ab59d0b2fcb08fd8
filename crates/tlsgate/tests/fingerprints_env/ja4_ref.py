"""An independent JA4 (FoxIO) computation for the end-to-end tests: reads one ClientHello as the
client sent it (TLS records, hex on stdin) and prints its JA4, written from the specification
(https://github.com/FoxIO-LLC/ja4/blob/main/technical_details/JA4.md) with Python's hashlib,
sharing nothing with the gateway's Rust code (tlsgate-wire ja4.rs, BoringSSL's SHA-256).
With --raw it prints JA4_r instead."""
import hashlib
import struct
import sys


def grease(v):
    return (v & 0x0F0F) == 0x0A0A and (v >> 8) == (v & 0xFF)


def handshake_bytes(records):
    """Concatenates the handshake records' payloads (a hello may span several records)."""
    out, i = b"", 0
    while i + 5 <= len(records):
        ctype, _ver, length = records[i], records[i + 1:i + 3], struct.unpack(">H", records[i + 3:i + 5])[0]
        if ctype == 22:
            out += records[i + 5:i + 5 + length]
        i += 5 + length
    return out


def parse_hello(hs):
    assert hs[0] == 1, "not a ClientHello"
    length = int.from_bytes(hs[1:4], "big")
    body = hs[4:4 + length]
    assert len(body) == length, "truncated ClientHello"
    p = 0
    legacy = struct.unpack(">H", body[p:p + 2])[0]
    p += 2 + 32
    p += 1 + body[p]
    n = struct.unpack(">H", body[p:p + 2])[0]
    ciphers = [struct.unpack(">H", body[p + 2 + k:p + 4 + k])[0] for k in range(0, n, 2)]
    p += 2 + n
    p += 1 + body[p]
    exts = []
    if p < len(body):
        n = struct.unpack(">H", body[p:p + 2])[0]
        p += 2
        end = p + n
        while p < end:
            t, l = struct.unpack(">HH", body[p:p + 4])
            exts.append((t, body[p + 4:p + 4 + l]))
            p += 4 + l
    return legacy, ciphers, exts


def ja4(records, raw=False):
    legacy, ciphers, exts = parse_hello(handshake_bytes(records))
    ciphers = [c for c in ciphers if not grease(c)]
    exts = [(t, d) for t, d in exts if not grease(t)]
    types = [t for t, _ in exts]
    data = dict(exts)
    version = legacy
    if 0x002B in data:
        d = data[0x002B]
        vs = [struct.unpack(">H", d[1 + k:3 + k])[0] for k in range(0, d[0], 2)]
        vs = [v for v in vs if not grease(v)]
        if vs:
            version = max(vs)
    vname = {0x0304: "13", 0x0303: "12", 0x0302: "11", 0x0301: "10", 0x0300: "s3", 0x0002: "s2",
             0xFEFF: "d1", 0xFEFD: "d2", 0xFEFC: "d3"}.get(version, "00")
    sni = "d" if 0x0000 in data else "i"
    alpn = "00"
    if 0x0010 in data and len(data[0x0010]) > 3:
        d = data[0x0010]
        first = d[3:3 + d[2]]
        if first:
            if chr(first[0]).isalnum() and chr(first[-1]).isalnum() and first[0] < 128 and first[-1] < 128:
                alpn = chr(first[0]) + chr(first[-1])
            else:
                h = first.hex()
                alpn = h[0] + h[-1]
    a = "t%s%s%02d%02d%s" % (vname, sni, min(len(ciphers), 99), min(len(types), 99), alpn)
    sigs = []
    if 0x000D in data:
        d = data[0x000D]
        n = struct.unpack(">H", d[0:2])[0]
        sigs = [struct.unpack(">H", d[2 + k:4 + k])[0] for k in range(0, n, 2)]
        sigs = [s for s in sigs if not grease(s)]
    b_text = ",".join("%04x" % c for c in sorted(ciphers))
    e_sorted = sorted(t for t in types if t not in (0x0000, 0x0010))
    c_text = ",".join("%04x" % t for t in e_sorted)
    if sigs:
        c_text += "_" + ",".join("%04x" % s for s in sigs)
    if raw:
        return "%s_%s_%s" % (a, b_text, c_text)
    b = hashlib.sha256(b_text.encode()).hexdigest()[:12] if ciphers else "000000000000"
    c = hashlib.sha256(c_text.encode()).hexdigest()[:12] if e_sorted else "000000000000"
    return "%s_%s_%s" % (a, b, c)


if __name__ == "__main__":
    records = bytes.fromhex(sys.stdin.read().strip())
    print(ja4(records, raw="--raw" in sys.argv))
