"""WebSocket client for tests/websocket.rs (Debian python3-websockets 10.x, /usr/bin/python3).

Usage: client.py URL CA_FILE < plan.json. Connects to URL (wss://, verified against CA_FILE,
ALPN http/1.1, no compression, no keep-alive pings), then runs the plan, a JSON list of steps,
printing one JSON line per event:
  connect                -> {"op": "open", "headers": [[name, value], ...]} (the 101's headers)
                            or {"op": "refused", "status": N} or {"op": "error", "error": TEXT}
                            (and the plan is not run)
  {"op": "send", "text": T} / {"op": "send", "hex": H}   -> {"op": "send"}
  {"op": "recv", "timeout": S}  -> {"op": "recv", "kind": "text", "text": T}
                                   | {"kind": "binary", "hex": H} | {"kind": "timeout"}
                                   | {"kind": "closed", "code": C, "reason": R}
  {"op": "close", "code": C}    -> {"op": "close", "code": C, "reason": R, "seconds": S}
      (the close handshake and the end of the TCP connection; "code" is what the peer sent)
  {"op": "wait_closed", "timeout": S} -> {"op": "wait_closed", "closed": B, "code": C, "seconds": S}
  {"op": "chatter", "every": S, "for": S} -> {"op": "chatter", "sent": N, "echoed": N,
      "open": B, "seconds": S}  (sends "tick N" every S seconds, reading each echo)
"""
import asyncio
import json
import ssl
import sys
import time

import websockets


def out(event):
    print(json.dumps(event), flush=True)


def message(msg):
    if isinstance(msg, str):
        return {"kind": "text", "text": msg}
    return {"kind": "binary", "hex": msg.hex()}


async def step(ws, s):
    op = s["op"]
    started = time.monotonic()
    if op == "send":
        await ws.send(s["text"] if "text" in s else bytes.fromhex(s["hex"]))
        return {"op": "send"}
    if op == "recv":
        try:
            msg = await asyncio.wait_for(ws.recv(), s.get("timeout", 10))
        except asyncio.TimeoutError:
            return {"op": "recv", "kind": "timeout"}
        except websockets.ConnectionClosed as e:
            return {"op": "recv", "kind": "closed", "code": e.code, "reason": e.reason}
        return {"op": "recv", **message(msg)}
    if op == "close":
        await ws.close(s.get("code", 1000), "client says bye")
        return {"op": "close", "code": ws.close_code, "reason": ws.close_reason,
                "seconds": time.monotonic() - started}
    if op == "wait_closed":
        try:
            await asyncio.wait_for(ws.wait_closed(), s["timeout"])
            closed = True
        except asyncio.TimeoutError:
            closed = False
        return {"op": "wait_closed", "closed": closed, "code": ws.close_code,
                "seconds": time.monotonic() - started}
    if op == "chatter":
        sent = echoed = 0
        while time.monotonic() - started < s["for"]:
            text = f"tick {sent}"
            try:
                await ws.send(text)
                sent += 1
                if await asyncio.wait_for(ws.recv(), 5) == text:
                    echoed += 1
            except (websockets.ConnectionClosed, asyncio.TimeoutError):
                break
            await asyncio.sleep(s["every"])
        return {"op": "chatter", "sent": sent, "echoed": echoed, "open": ws.open,
                "seconds": time.monotonic() - started}
    raise ValueError(f"unknown step {op}")


async def main(url, ca, plan):
    ctx = ssl.create_default_context(cafile=ca)
    ctx.set_alpn_protocols(["http/1.1"])
    try:
        ws = await websockets.connect(
            url, ssl=ctx, server_hostname="localhost", max_size=None, compression=None,
            ping_interval=None, close_timeout=5, open_timeout=10,
        )
    except websockets.InvalidStatusCode as e:
        out({"op": "refused", "status": e.status_code})
        return
    except Exception as e:  # what the client saw, for the test to report
        out({"op": "error", "error": f"{type(e).__name__}: {e}"})
        return
    out({"op": "open", "headers": [[k, v] for k, v in ws.response_headers.raw_items()]})
    for s in plan:
        out(await step(ws, s))
    if ws.open:
        await ws.close()


asyncio.run(main(sys.argv[1], sys.argv[2], json.load(sys.stdin)))
