"""`fairlane.Scheduler` drives the core seam; the 2DFQ worked example (Fig. 6b)."""

import pytest

import fairlane


class Exec:
    """Workers of rate 1 pulling from a scheduler; completions at time t are handled in
    worker order before idle workers ask, in worker order (crates/core/tests/support)."""

    def __init__(self, sched):
        self.s, self.now = sched, 0.0
        self.running = [None] * sched.workers
        self.log = []

    def submit(self, tenant, label, cost):
        self.s.enqueue(tenant, 0, label, cost=cost, now=self.now)

    def run(self, until):
        while True:
            for w, r in enumerate(self.running):
                if r is None:
                    d = self.s.dequeue(w, self.now)
                    if isinstance(d, fairlane.Dispatch):
                        self.running[w] = (d.ticket, d.payload, self.now, self.now + d.cost, d.cost)
            ends = [r[3] for r in self.running if r is not None]
            if not ends or min(ends) > until:
                return
            self.now = min(ends)
            for w, r in enumerate(self.running):
                if r is not None and r[3] == self.now:
                    self.s.complete(r[0], r[4], self.now)
                    self.log.append((w, r[1], r[2], r[3]))
                    self.running[w] = None

    def grid(self, until):
        rows = [["."] * until for _ in self.running]
        live = [(w, r[1], r[2], r[3]) for w, r in enumerate(self.running) if r]
        for w, label, start, end in self.log + live:
            for c in range(int(start), min(int(end), until)):
                rows[w][c] = label
        return "\n".join(f"W{w}: " + " ".join(r) for w, r in enumerate(rows))


def fig5(preset, tenants=(0, 1, 2, 3)):
    s = fairlane.Scheduler(preset, workers=2, gps_capacity=2.0)
    e = Exec(s)
    a, b, c, d = tenants
    for i in range(1, 21):
        e.submit(a, f"a{i}", 1.0)
        e.submit(b, f"b{i}", 1.0)
    for i in range(1, 6):
        e.submit(c, f"c{i}", 4.0)
        e.submit(d, f"d{i}", 4.0)
    e.run(12.0)
    return e


FIG6B = (
    "W0: a1 c1 c1 c1 c1 d1 d1 d1 d1 c2 c2 c2\n"
    "W1: b1 a2 b2 a3 b3 a4 b4 a5 b5 a6 b6 a7"
)


def test_fig6b_2dfq_schedule():
    e = fig5("2dfq")
    assert e.grid(12) == FIG6B
    for w, label, start, _ in e.log:
        if start >= 1.0:
            assert (w == 1) == (label[0] in "ab"), f"{label} ran on W{w}"


def test_fig6b_with_string_tenants():
    # Names get ids in order of first use, so A < B < C < D as in the paper.
    assert fig5("2dfq", ("A", "B", "C", "D")).grid(12) == FIG6B


def test_fig5c_wfq_blocks_both_workers():
    assert fig5("wfq").grid(12) == (
        "W0: a1 a2 a3 a4 c1 c1 c1 c1 a5 a6 a7 a8\n"
        "W1: b1 b2 b3 b4 d1 d1 d1 d1 b5 b6 b7 b8"
    )


def test_seam_calls_and_names():
    s = fairlane.Scheduler("2dfqe", workers=2)
    assert s.name == "2dfqe" and s.workers == 2
    k = s.enqueue("alice", "get", {"id": 1}, now=0.0)
    k2 = s.enqueue(7, 3, "seven", now=0.0)
    assert s.queued == 2
    assert s.tenant("alice")["queued"] == 1 and s.tenant("nobody") is None
    assert s.cancel(k2, 0.0) == "seven"
    d = s.dequeue(0, 0.0)
    assert (d.ticket, d.tenant, d.cls, d.payload, d.cost) == (k, "alice", "get", {"id": 1}, None)
    assert d.charged > 0 and s.running == 1
    s.progress(d.ticket, 0.5, 0.5)
    s.complete(d.ticket, 2.0, 1.0)
    assert s.dequeue(1, 1.0) is None
    s.set_weight("alice", 3.0, 1.0)
    assert s.tenant("alice")["weight"] == 3.0
    s.remove_tenant("alice")
    assert s.tenant("alice") is None


def test_errors_are_value_errors():
    with pytest.raises(ValueError, match="unknown scheduler"):
        fairlane.Scheduler("nope")
    s = fairlane.Scheduler("wfq", workers=1)
    with pytest.raises(ValueError, match="unknown ticket"):
        s.complete(12345, 1.0)
    with pytest.raises(ValueError):
        s.enqueue(1, 0, None, cost=-1.0)
    with pytest.raises(ValueError):
        s.dequeue(5)
    with pytest.raises(TypeError):
        s.enqueue(1.5)
    k = s.enqueue(1, cost=1.0)
    d = s.dequeue(0)
    s.complete(d.ticket, 1.0)
    with pytest.raises(ValueError):
        s.complete(k, 1.0)  # a ticket is never reused
