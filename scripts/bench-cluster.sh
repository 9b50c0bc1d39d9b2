#!/usr/bin/env bash
# [cluster] figures (docs/benchmarks.md, "[cluster]: light tenants, a Redis restart, the
# coordination cost (issue 35)"). Three parts, each printing what it measured:
#  1. tight figures (crates/proxy/tests/cluster_light.rs `tight_figures`): a light weighted
#     tenant's p99 through two instances against one proxy on the same load (target ≤ 1.5×),
#     the backlogged tenants' shares before and after a Redis kill + restart (±5 %), the
#     upstream's own high-water mark of requests outstanding (≤ D), answers other than 200 (0);
#  2. the allocation over random placements (crates/proxy/tests/cluster_sim.rs `survey`): the
#     distribution of the worst backlogged tenant's error against weighted water-filling;
#  3. the coordination cost: one proxy alone against one with [cluster], alternating, with the
#     ratio of median req/s (target ≥ 0.97; scripts/bench-proxy.sh's CLUSTER_ONLY part).
# Needs redis-server (scripts/test-deps.sh). Env: CLUSTER_SECS (the light tenant's window,
# default 30), SURVEY (placements, 1500), SECS and CLUSTER_ROUNDS (the cost part: 8 s, 5
# rounds each way). About 4 minutes after the build.
set -euo pipefail
cd "$(dirname "$0")/.."
command -v redis-server >/dev/null 2>&1 || { echo "bench-cluster: redis-server missing (scripts/test-deps.sh)" >&2; exit 1; }
[ -n "${NO_BUILD:-}" ] || cargo build --release --locked -p fairlane-proxy --examples --bins 2>/dev/null

echo "== 1. tight figures ($(uptime | sed 's/.*load/load/'))"
CLUSTER_SECS=${CLUSTER_SECS:-30} cargo test --release --locked -q -p fairlane-proxy --test cluster_light \
  -- --ignored tight_figures --nocapture 2>&1 | grep -E "^(L p99|targets)"

echo "== 2. the allocation over ${SURVEY:-1500} random placements ($(uptime | sed 's/.*load/load/'))"
SURVEY=${SURVEY:-1500} cargo test --release --locked -q -p fairlane-proxy --test cluster_sim \
  -- --ignored survey --nocapture 2>&1 | grep -E "^(n |0\.)"

echo "== 3. coordination cost"
out=$(NO_BUILD=1 CLUSTER_ONLY=1 SECS=${SECS:-8} CLUSTER_ROUNDS=${CLUSTER_ROUNDS:-5} scripts/bench-proxy.sh)
echo "$out"
echo "$out" | python3 -c '
import re, statistics, sys
rate = {"alone": [], "cluster": []}
for line in sys.stdin:
    m = re.match(r"(alone|cluster):\s.*ok/s (\d+)", line)
    if m:
        rate[m.group(1)].append(int(m.group(2)))
a, c = statistics.median(rate["alone"]), statistics.median(rate["cluster"])
verdict = "met" if c / a >= 0.97 else "NOT met"
print(f"median req/s alone {a:.0f}, cluster {c:.0f}: ratio {c / a:.3f} (target >= 0.97: {verdict})")
'
