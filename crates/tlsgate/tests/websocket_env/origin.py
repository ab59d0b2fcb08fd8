"""WebSocket origin for tests/websocket.rs (Debian python3-websockets 10.x, /usr/bin/python3).

Usage: origin.py PORT. Plain HTTP/1.1 on 127.0.0.1:PORT. By path:
  /plain...       200, JSON {"path", "headers": [[name, value], ...]} of the request (no upgrade)
  /ws/refuse...   403 to the handshake        /ws/bad...  400 to the handshake
  /ws/greet...    sends "greeting 0".."greeting 2" on connect, then echoes
  /ws/headers...  sends the handshake's request headers as JSON text on connect, then echoes
  /ws/...         echoes every message as it came (text as text, binary as binary); the text
                  "close-me" makes it close with code 4001, reason "server says bye"
Prints "open PATH" and "closed PATH CODE" lines for every WebSocket connection.
"""
import asyncio
import http
import json
import sys

import websockets


def header_list(headers):
    return [[k, v] for k, v in headers.raw_items()]


async def process_request(path, headers):
    if path.startswith("/plain"):
        body = json.dumps({"path": path, "headers": header_list(headers)}).encode()
        return http.HTTPStatus.OK, [("Content-Type", "application/json")], body
    if path.startswith("/ws/refuse"):
        return http.HTTPStatus.FORBIDDEN, [("X-Origin", "refused")], b"origin refuses this upgrade\n"
    if path.startswith("/ws/bad"):
        return http.HTTPStatus.BAD_REQUEST, [("X-Origin", "bad")], b"origin finds this upgrade bad\n"
    return None


async def handler(ws):
    path = ws.path
    print(f"open {path}", flush=True)
    try:
        if path.startswith("/ws/greet"):
            for i in range(3):
                await ws.send(f"greeting {i}")
        if path.startswith("/ws/headers"):
            await ws.send(json.dumps(header_list(ws.request_headers)))
        async for msg in ws:
            if msg == "close-me":
                await ws.close(4001, "server says bye")
                break
            await ws.send(msg)
    except websockets.ConnectionClosed:
        pass
    finally:
        await ws.wait_closed()
        print(f"closed {path} {ws.close_code}", flush=True)


async def main(port):
    async with websockets.serve(
        handler,
        "127.0.0.1",
        port,
        process_request=process_request,
        max_size=None,
        compression=None,
        ping_interval=None,
    ):
        print(f"listening {port}", flush=True)
        await asyncio.Future()


asyncio.run(main(int(sys.argv[1])))
