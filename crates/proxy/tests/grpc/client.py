"""A gRPC client (grpcio) calling tests/grpc/upstream.py through fairlane-proxy.

  client.py calls PROXY UPSTREAM      unary, server-, client- and bidi-streaming calls
  client.py queue-full PROXY UPSTREAM ADMIN
                                      with D = 1 and a queue of 1: the third call is
                                      RESOURCE_EXHAUSTED; a queued call whose deadline
                                      passes is DEADLINE_EXCEEDED and never reaches the
                                      upstream

PROXY is the proxy's h2c address, UPSTREAM the server's own (for control calls that must
not wait in the proxy), ADMIN the proxy's admin address. Prints `ok <case>` per case; any
failed check raises (exit status 1).
"""
import json
import sys
import time
import urllib.request

import grpc

STEP = 20  # seconds any one call may take on a loaded machine


def call(channel, kind, method):
    return getattr(channel, kind)("/fl.Echo/" + method)


def control(upstream, method):
    return call(upstream, "unary_unary", method)(b"", timeout=STEP)


def calls(proxy, upstream):
    body, c = call(proxy, "unary_unary", "Unary").with_call(
        b"hello", metadata=(("x-meta", "m1"),), timeout=STEP
    )
    assert body == b"echo:hello", body
    assert dict(c.initial_metadata()).get("x-up-saw") == "m1", c.initial_metadata()
    assert dict(c.trailing_metadata()).get("x-trail") == "t:m1", c.trailing_metadata()
    assert c.code() == grpc.StatusCode.OK, c.code()
    print("ok unary", flush=True)

    try:
        call(proxy, "unary_unary", "Unary")(b"fail", metadata=(("x-meta", "m2"),), timeout=STEP)
        raise AssertionError("the failing call succeeded")
    except grpc.RpcError as e:
        assert e.code() == grpc.StatusCode.NOT_FOUND, e.code()
        assert e.details() == "no such thing", e.details()
        assert dict(e.trailing_metadata()).get("x-trail") == "t:m2", e.trailing_metadata()
    print("ok status", flush=True)

    # Each message must arrive before the server is let to send the next one.
    stream = call(proxy, "unary_stream", "ServerStream")(b"3", timeout=STEP * 3)
    got = []
    for m in stream:
        got.append(m)
        control(upstream, "Release")
    assert got == [b"m0", b"m1", b"m2"], got
    assert stream.code() == grpc.StatusCode.OK
    print("ok server-stream", flush=True)

    body, c = call(proxy, "stream_unary", "ClientStream").with_call(
        iter([b"a", b"bb", b"ccc"]), timeout=STEP
    )
    assert body == b"a+bb+ccc", body
    assert dict(c.trailing_metadata()).get("x-count") == "3", c.trailing_metadata()
    print("ok client-stream", flush=True)

    # Ping-pong: each request is sent only once the answer to the one before came back, so
    # both directions are open at once through the proxy.
    import queue

    outbox = queue.Queue()

    def requests():
        while True:
            m = outbox.get()
            if m is None:
                return
            yield m

    outbox.put(b"p0")
    replies = call(proxy, "stream_stream", "Bidi")(requests(), timeout=STEP)
    seen = []
    for r in replies:
        seen.append(r)
        outbox.put(b"p%d" % len(seen) if len(seen) < 3 else None)
    assert seen == [b"pong:p0", b"pong:p1", b"pong:p2"], seen
    print("ok bidi", flush=True)


def queued(admin):
    with urllib.request.urlopen("http://%s/status" % admin, timeout=STEP) as r:
        status = json.load(r)
    return sum(t["queued"] for t in status["tenants"])


def wait_until(what, f):
    deadline = time.time() + STEP
    while not f():
        if time.time() > deadline:
            raise AssertionError("timed out waiting for " + what)
        time.sleep(0.02)


def queue_full(proxy, upstream, admin):
    hold = call(proxy, "unary_unary", "Hold")
    first = hold.future(b"1", timeout=STEP * 2)
    wait_until("the upstream to hold the first call", lambda: control(upstream, "Count") == b"1")
    # A call that waits in the queue past its deadline: DEADLINE_EXCEEDED.
    try:
        hold(b"late", timeout=0.5)
        raise AssertionError("the late call succeeded")
    except grpc.RpcError as e:
        assert e.code() == grpc.StatusCode.DEADLINE_EXCEEDED, e.code()
    print("ok deadline", flush=True)
    second = hold.future(b"2", timeout=STEP * 2)
    wait_until("the second call to queue", lambda: queued(admin) == 1)
    try:
        hold(b"3", timeout=STEP)
        raise AssertionError("the third call was not refused")
    except grpc.RpcError as e:
        assert e.code() == grpc.StatusCode.RESOURCE_EXHAUSTED, (e.code(), e.details())
    print("ok resource-exhausted", flush=True)
    control(upstream, "Open")
    assert first.result() == b"held"
    assert second.result() == b"held"
    # The upstream saw the first and second calls only: not the late one, nor the third.
    assert control(upstream, "Count") == b"2", control(upstream, "Count")
    print("ok upstream-count", flush=True)


def main():
    mode, proxy, upstream = sys.argv[1], sys.argv[2], sys.argv[3]
    with grpc.insecure_channel(proxy) as p, grpc.insecure_channel(upstream) as u:
        if mode == "calls":
            calls(p, u)
        elif mode == "queue-full":
            queue_full(p, u, sys.argv[4])
        else:
            raise SystemExit("unknown mode " + mode)


if __name__ == "__main__":
    main()
