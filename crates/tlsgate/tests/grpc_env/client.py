"""gRPC client for crates/tlsgate/tests/grpc.rs: TLS to the gateway, raw-bytes messages.

Usage: client.py HOST:PORT CA_FILE < plan.json. The plan is a JSON list of calls, made in order
on one channel (one HTTP/2 connection): {"method": "/test.Echo/Unary", "kind": "unary" |
"server_stream" | "client_stream" | "bidi", "msgs": [hex, ...], "timeout": seconds or null}.
A bidi call sends its next message only after the previous one's echo has come back. Prints one
JSON line per call: method, code (name), code_num, details, msgs (hex), initial and trailing
metadata ([[key, value]], binary values as "hex:..."), seconds taken.
"""
import json
import queue
import sys
import time

import grpc


def meta(pairs):
    out = []
    for key, value in pairs or ():
        if isinstance(value, bytes):
            value = "hex:" + value.hex()
        out.append([key, value])
    return out


def lockstep(msgs, echoed):
    for i, msg in enumerate(msgs):
        yield msg
        if i + 1 < len(msgs) and not echoed.get(timeout=30):
            return


def make_call(channel, step):
    kind, method, timeout = step["kind"], step["method"], step.get("timeout")
    msgs = [bytes.fromhex(m) for m in step.get("msgs", [])]
    received = []
    call = None
    try:
        if kind == "unary":
            response, call = channel.unary_unary(method).with_call(msgs[0], timeout=timeout)
            received.append(response)
        elif kind == "server_stream":
            call = channel.unary_stream(method)(msgs[0], timeout=timeout)
            for response in call:
                received.append(response)
        elif kind == "client_stream":
            response, call = channel.stream_unary(method).with_call(iter(msgs), timeout=timeout)
            received.append(response)
        elif kind == "bidi":
            echoed = queue.Queue()
            call = channel.stream_stream(method)(lockstep(msgs, echoed), timeout=timeout)
            try:
                for response in call:
                    received.append(response)
                    echoed.put(True)
            finally:
                echoed.put(False)
        else:
            raise ValueError("unknown kind " + kind)
    except grpc.RpcError as error:
        call = error
    return {
        "code": call.code().name,
        "code_num": call.code().value[0],
        "details": call.details() or "",
        "msgs": [m.hex() for m in received],
        "initial": meta(call.initial_metadata()),
        "trailing": meta(call.trailing_metadata()),
    }


def main():
    target, ca_file = sys.argv[1], sys.argv[2]
    plan = json.load(sys.stdin)
    with open(ca_file, "rb") as f:
        credentials = grpc.ssl_channel_credentials(root_certificates=f.read())
    options = [("grpc.ssl_target_name_override", "localhost"), ("grpc.enable_retries", 0)]
    with grpc.secure_channel(target, credentials, options=options) as channel:
        for step in plan:
            started = time.monotonic()
            result = make_call(channel, step)
            result["method"] = step["method"]
            result["seconds"] = round(time.monotonic() - started, 3)
            print(json.dumps(result), flush=True)


if __name__ == "__main__":
    main()
