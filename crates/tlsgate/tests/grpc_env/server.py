"""gRPC origin for crates/tlsgate/tests/grpc.rs: plaintext HTTP/2 (h2c), raw-bytes messages.

Usage: server.py PORT. Service test.Echo:
  Unary         echoes the request; trailing metadata x-served-by: grpc-origin
  ServerStream  request "S1,S2,..." (sizes): one reply per size, reply i = pattern(i, Si)
  ClientStream  the concatenation of every request message
  Bidi          echoes each request message as it arrives
  Fail          INVALID_ARGUMENT "bad thing" with trailing metadata x-fail-reason: testing and
                x-fail-detail-bin: 00 01 fe ff; request "trailers-only" sends no initial metadata
                first, anything else sends initial metadata x-initial: sent
  Slow          request "MS": sleeps MS milliseconds (waking when cancelled), answers "slow done"
  SlowLog       JSON list of what each Slow call saw: remaining deadline, whether it was cancelled
"""
import json
import sys
import threading
import time
from concurrent import futures

import grpc

SLOW_LOG = []
SLOW_LOCK = threading.Lock()


def pattern(i, size):
    return bytes((i * 31 + j) % 251 for j in range(size))


def unary(request, context):
    context.set_trailing_metadata((("x-served-by", "grpc-origin"),))
    return request


def server_stream(request, context):
    sizes = [int(s) for s in request.decode().split(",") if s]
    for i, size in enumerate(sizes):
        yield pattern(i, size)


def client_stream(request_iterator, context):
    return b"".join(request_iterator)


def bidi(request_iterator, context):
    for message in request_iterator:
        yield message


def fail(request, context):
    if request != b"trailers-only":
        context.send_initial_metadata((("x-initial", "sent"),))
    context.set_trailing_metadata(
        (("x-fail-reason", "testing"), ("x-fail-detail-bin", b"\x00\x01\xfe\xff"))
    )
    context.abort(grpc.StatusCode.INVALID_ARGUMENT, "bad thing")


def slow(request, context):
    ms = int(request.decode() or "0")
    remaining = context.time_remaining()
    done = threading.Event()
    context.add_callback(done.set)
    cancelled = done.wait(ms / 1000.0)
    with SLOW_LOCK:
        SLOW_LOG.append({"remaining": remaining, "cancelled": cancelled})
    return b"slow done"


def slow_log(request, context):
    with SLOW_LOCK:
        return json.dumps(SLOW_LOG).encode()


def main():
    port = int(sys.argv[1])
    handlers = {
        "Unary": grpc.unary_unary_rpc_method_handler(unary),
        "ServerStream": grpc.unary_stream_rpc_method_handler(server_stream),
        "ClientStream": grpc.stream_unary_rpc_method_handler(client_stream),
        "Bidi": grpc.stream_stream_rpc_method_handler(bidi),
        "Fail": grpc.unary_unary_rpc_method_handler(fail),
        "Slow": grpc.unary_unary_rpc_method_handler(slow),
        "SlowLog": grpc.unary_unary_rpc_method_handler(slow_log),
    }
    server = grpc.server(
        futures.ThreadPoolExecutor(max_workers=16),
        handlers=(grpc.method_handlers_generic_handler("test.Echo", handlers),),
    )
    server.add_insecure_port("127.0.0.1:%d" % port)
    server.start()
    print("listening on %d" % port, flush=True)
    server.wait_for_termination()


if __name__ == "__main__":
    main()
