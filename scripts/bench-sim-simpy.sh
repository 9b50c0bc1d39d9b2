#!/bin/sh
# The simulator against its peer (issue 14's speed target): the 2DFQ Fig. 8 model at n = 50
# under WFQ (experiments/bench/fig8-n50-wfq.toml: experiments/2dfq-fig8.toml without its
# sweep, WFQ only, every metric on, 60 simulated seconds, one job) against the SimPy model of
# /work/shared/anchors/simpy_fig8.py, alternating in one run: fairlane, SimPy, fairlane, …
#
#   ROUNDS=5 FAIRLANE=target/release/fairlane scripts/bench-sim-simpy.sh
#
# Prints per round each program's completed requests per second of wall time (each program's
# own timer around its simulation loop: `wall_seconds` of the JSON, SimPy's `env.run`) and its
# whole process's CPU time (user + sys from /usr/bin/time), then the ratios of the medians.
set -eu
cd "$(dirname "$0")/.."
ROUNDS=${ROUNDS:-5}
FAIRLANE=${FAIRLANE:-target/release/fairlane}
SPEC=${SPEC:-experiments/bench/fig8-n50-wfq.toml}
ANCHOR=${ANCHOR:-/work/shared/anchors/simpy_fig8.py}
PY=${PY:-python3}
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
uptime
i=1
while [ "$i" -le "$ROUNDS" ]; do
    /usr/bin/time -f '%U %S' -o "$tmp/ours-time-$i" "$FAIRLANE" simulate --jobs 1 --json "$SPEC" >"$tmp/ours-$i.json"
    /usr/bin/time -f '%U %S' -o "$tmp/simpy-time-$i" "$PY" "$ANCHOR" 60 50 >"$tmp/simpy-$i.txt"
    i=$((i + 1))
done
uptime
"$PY" - "$tmp" "$ROUNDS" <<'EOF'
import json, re, statistics, sys
tmp, rounds = sys.argv[1], int(sys.argv[2])
def cpu(path):
    u, s = open(path).read().split()[-2:]
    return float(u) + float(s)
def runs(doc):
    # `simulate --json` prints the runs of each spec; take every run object in it.
    if isinstance(doc, dict) and "tenants" in doc and "wall_seconds" in doc:
        yield doc
    elif isinstance(doc, dict):
        for v in doc.values():
            yield from runs(v)
    elif isinstance(doc, list):
        for v in doc:
            yield from runs(v)
rows = []
for i in range(1, rounds + 1):
    (run,) = list(runs(json.load(open(f"{tmp}/ours-{i}.json"))))
    tenants = run["tenants"]
    tenants = tenants.values() if isinstance(tenants, dict) else tenants
    done = sum(t["completed"] for t in tenants)
    ours_rate, ours_cpu = done / run["wall_seconds"], done / cpu(f"{tmp}/ours-time-{i}")
    m = re.search(r"(\d+) requests, \d+ events in ([\d.]+)s", open(f"{tmp}/simpy-{i}.txt").read())
    sdone, swall = int(m.group(1)), float(m.group(2))
    simpy_rate, simpy_cpu = sdone / swall, sdone / cpu(f"{tmp}/simpy-time-{i}")
    rows.append((ours_rate, simpy_rate, ours_cpu, simpy_cpu))
    print(f"round {i}: fairlane {ours_rate/1e6:.3f} M req/wall-s ({done} req, "
          f"{cpu(f'{tmp}/ours-time-{i}'):.3f} s CPU), SimPy {simpy_rate/1e6:.3f} M req/wall-s "
          f"({sdone} req, {cpu(f'{tmp}/simpy-time-{i}'):.3f} s CPU): "
          f"wall ratio {ours_rate/simpy_rate:.1f}x, CPU ratio {ours_cpu/simpy_cpu:.1f}x")
med = [statistics.median(c) for c in zip(*rows)]
print(f"median: fairlane {med[0]/1e6:.3f} M req/wall-s, SimPy {med[1]/1e6:.3f} M req/wall-s "
      f"-> {med[0]/med[1]:.1f}x (wall); per CPU-s {med[2]/1e6:.3f} M vs {med[3]/1e6:.3f} M "
      f"-> {med[2]/med[3]:.1f}x (CPU, whole processes)")
EOF
