#!/usr/bin/env bash
# Proxy memory per client connection (issue 19 target 3; docs/benchmarks.md "Issue 19: memory
# per connection"). For each case a fresh fairlane-proxy, then N connections held at once:
#   idle   — each sent one request, read the answer, and stays open (keep-alive);
#   queued — each sent one request that waits in the gate (depth 1, upstream 10 min delay).
# Prints the proxy's VmRSS and Private_Dirty before and at N, and the difference / N.
# Loopback only; ports 18100 (upstream), 18101/18102 (proxy/admin).
#   N=10000 scripts/bench-proxy-conns.sh [proxy binary]     (default target/release/fairlane-proxy)
#   NO_BUILD=1 skips the build; ROUNDS=k repeats each case k times (fresh proxy each time);
#   HOLD=s measures again after holding the connections s seconds more (default 15: past
#   jemalloc's 10 s decay of freed pages).
set -euo pipefail
cd "$(dirname "$0")/.."
N=${N:-10000}
ROUNDS=${ROUNDS:-1}
PROXY=${1:-target/release/fairlane-proxy}
if [ "${NO_BUILD:-0}" != 1 ]; then
  cargo build --release --locked -p fairlane-proxy --examples --bins 2>/dev/null
fi
T=target/release
W=$(mktemp -d)
pids=()
cleanup() {
  for p in "${pids[@]}"; do kill "$p" 2>/dev/null || true; done
  for p in "${pids[@]}"; do wait "$p" 2>/dev/null || true; done
  rm -rf "$W"
}
trap cleanup EXIT
ulimit -n "$(ulimit -Hn)"
if [ "$(ulimit -n)" -lt $((N + 1000)) ]; then
  echo "open-files limit $(ulimit -n) is below N + 1000; raise the hard limit" >&2
  exit 1
fi

$T/examples/upstream 127.0.0.1:18100 2>/dev/null & pids+=($!)
cat > "$W/proxy.toml" <<TOML
[listen]
addr = "127.0.0.1:18101"
admin = "127.0.0.1:18102"
[upstream]
addr = "127.0.0.1:18100"
timeout_ms = 3600000
[scheduler]
depth = 1
[limits]
max_queued = $((N + 1000))
max_queued_per_tenant = $((N + 1000))
queue_timeout_ms = 3600000
idle_timeout_ms = 3600000
header_timeout_ms = 3600000
[[tenant]]
name = "bench"
keys = ["kb"]
TOML

echo "== proxy memory per connection: $PROXY, N=$N; $(uptime | sed 's/.*load/load/')"
for round in $(seq "$ROUNDS"); do
  for mode in idle queued; do
    "$PROXY" --config "$W/proxy.toml" 2>"$W/proxy.log" & ppid=$!
    pids+=("$ppid")
    for _ in $(seq 100); do curl -sf http://127.0.0.1:18102/status >/dev/null && break; sleep 0.1; done
    # One request first, so one-time allocations (upstream pool, tenant state, the
    # runtime's worker buffers) are in the baseline rather than counted per connection.
    curl -sf -H 'Authorization: Bearer kb' http://127.0.0.1:18101/ >/dev/null
    path=/
    [ "$mode" = queued ] && path="/?delay_ms=600000"
    $T/examples/connmem 127.0.0.1:18101 "$ppid" "$N" "$mode" "$path" kb 127.0.0.1:18102 "${HOLD:-15}"
    kill "$ppid"; wait "$ppid" 2>/dev/null || true
  done
done
