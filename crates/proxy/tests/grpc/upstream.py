"""A gRPC server (grpcio) the proxy's gRPC tests run behind fairlane-proxy.

Service `fl.Echo`, messages as raw bytes (no generated stubs: grpcio passes bytes through
when no serializer is given). Prints `port N` once listening on 127.0.0.1, then serves
until stdin closes.

  Unary         echoes `echo:<request>`; initial metadata `x-up-saw` = the call's `x-meta`;
                trailing metadata `x-trail` = `t:<x-meta>`; a request `fail` ends with
                NOT_FOUND "no such thing" (trailing metadata kept).
  ServerStream  the request is a count n; sends `m0`, `m1`, …, waiting before each next
                message until the client has called Release for the one before (control
                channel, not through the proxy), or sends `stalled` after 15 s.
  ClientStream  answers the requests joined with `+`; trailing metadata `x-count`.
  Bidi          answers each request with `pong:<request>` as it comes.
  Hold          waits until Open is called, then answers `held`; counted by Count.
  Release, Open, Count: control calls, made straight to this server.
"""
import sys
import threading
from concurrent import futures

import grpc

lock = threading.Condition()
state = {"released": 0, "open": False, "held": 0}


def md(context, key):
    return dict(context.invocation_metadata()).get(key, "")


def unary(request, context):
    meta = md(context, "x-meta")
    context.send_initial_metadata((("x-up-saw", meta),))
    context.set_trailing_metadata((("x-trail", "t:" + meta),))
    if request == b"fail":
        context.abort(grpc.StatusCode.NOT_FOUND, "no such thing")
    return b"echo:" + request


def server_stream(request, context):
    for i in range(int(request)):
        with lock:
            if not lock.wait_for(lambda: state["released"] >= i, timeout=15):
                yield b"stalled"
                return
        yield b"m%d" % i


def client_stream(requests, context):
    got = [r for r in requests]
    context.set_trailing_metadata((("x-count", str(len(got))),))
    return b"+".join(got)


def bidi(requests, context):
    for r in requests:
        yield b"pong:" + r


def hold(request, context):
    with lock:
        state["held"] += 1
        lock.notify_all()
        lock.wait_for(lambda: state["open"], timeout=30)
    return b"held"


def release(request, context):
    with lock:
        state["released"] += 1
        lock.notify_all()
    return b""


def open_(request, context):
    with lock:
        state["open"] = True
        lock.notify_all()
    return b""


def count(request, context):
    with lock:
        return str(state["held"]).encode()


def main():
    handlers = {
        "Unary": grpc.unary_unary_rpc_method_handler(unary),
        "ServerStream": grpc.unary_stream_rpc_method_handler(server_stream),
        "ClientStream": grpc.stream_unary_rpc_method_handler(client_stream),
        "Bidi": grpc.stream_stream_rpc_method_handler(bidi),
        "Hold": grpc.unary_unary_rpc_method_handler(hold),
        "Release": grpc.unary_unary_rpc_method_handler(release),
        "Open": grpc.unary_unary_rpc_method_handler(open_),
        "Count": grpc.unary_unary_rpc_method_handler(count),
    }
    server = grpc.server(futures.ThreadPoolExecutor(max_workers=16))
    server.add_generic_rpc_handlers((grpc.method_handlers_generic_handler("fl.Echo", handlers),))
    port = server.add_insecure_port("127.0.0.1:0")
    server.start()
    print("port", port, flush=True)
    sys.stdin.read()
    server.stop(0)


if __name__ == "__main__":
    main()
