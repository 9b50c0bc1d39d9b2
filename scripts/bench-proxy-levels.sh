#!/usr/bin/env bash
# Priority levels in the proxy (issue 36): a high-level tenant's p99 under a 20× flood of the
# catch-all level, against its p99 alone, in one run, rounds alternating alone / flooded.
# Target: flooded p99 ≤ 1.2× alone.
#
#   scripts/bench-proxy-levels.sh            (about 1 minute: 3 rounds of 8 s + 11 s)
#
# Setup (loopback): the testkit's delay server; the proxy with D = 8 and the three levels of
# crates/proxy/tests/testdata/levels.toml — exempt (/healthz), "high" (shares 1, lends 25 %:
# 4 nominal seats, 3 it never lends) and the catch-all (shares 1, lends 50 %, queue_limit
# 200) —, 100 ms requests, so capacity is 80 req/s. The api tenant (flow schema → high)
# sends 20 req/s open loop (2 seats on average); the flood tenant (catch-all) sends
# 1,600 req/s open loop (20× capacity; beyond its queue it gets 429s).
#
# Env: NO_BUILD=1 (use target/release as it is), ROUNDS (default 3), SECS (default 8),
# RATE (api req/s, default 20), FLOOD (default 1600), DELAY_MS (default 100).
# Ports 18110-18112.
set -euo pipefail
cd "$(dirname "$0")/.."
ROUNDS=${ROUNDS:-3}
SECS=${SECS:-8}
RATE=${RATE:-20}
FLOOD=${FLOOD:-1600}
DELAY_MS=${DELAY_MS:-100}
. scripts/bench-proxy-lib.sh
bench_init --bins --examples

$T/examples/upstream 127.0.0.1:18110 & pids+=($!)
# The levels, flow schemas and tenants are the proxy's test fixture.
{ cat <<TOML
[listen]
addr = "127.0.0.1:18111"
admin = "127.0.0.1:18112"
[upstream]
addr = "127.0.0.1:18110"
[scheduler]
algorithm = "sfq"
depth = 8
[limits]
max_queued = 50000
max_queued_per_tenant = 50000
queue_timeout_ms = 60000
[levels]
adjust_period_ms = 1000
TOML
  cat crates/proxy/tests/testdata/levels.toml; } > "$W/levels.toml"
$T/fairlane-proxy --config "$W/levels.toml" 2>"$W/proxy.log" & pids+=($!)
sleep 1

# One line per level from /debug/priority_levels.
SUMMARY='
import json, sys
for l in json.load(sys.stdin):
    print("%s: current %s lent %s borrowed %s queued %s;" % (l["name"], l["current_cl"], l["lent"], l["borrowed"], l["queued"]), end=" ")
'
p99() { sed -n 's/.* p99 \([0-9.]*\) ms.*/\1/p'; }
API="/api?delay_ms=$DELAY_MS"
echo "== api at $RATE req/s on the high level, alone and under a $FLOOD req/s catch-all flood;" \
     "D = 8, ${DELAY_MS} ms requests, ${SECS} s per round; $(uptime | sed 's/.*load/load/')"
ratios=()
for r in $(seq "$ROUNDS"); do
  alone=$($T/examples/loadgen open 127.0.0.1:18111 "$API" "$RATE" "$SECS" ka)
  $T/examples/loadgen open 127.0.0.1:18111 "/flood?delay_ms=$DELAY_MS" "$FLOOD" "$((SECS + 3))" kf > "$W/flood" &
  fp=$!
  sleep 1.5
  flooded=$($T/examples/loadgen open 127.0.0.1:18111 "$API" "$RATE" "$SECS" ka)
  levels=$(curl -s http://127.0.0.1:18112/debug/priority_levels || echo '?')
  wait "$fp"
  a=$(echo "$alone" | p99); f=$(echo "$flooded" | p99)
  ratio=$(awk "BEGIN{printf \"%.3f\", $f / $a}")
  ratios+=("$ratio")
  echo "round $r: api p99 alone $a ms, flooded $f ms, ratio $ratio"
  echo "  alone:   $alone"
  echo "  flooded: $flooded"
  echo "  flood:   $(cat "$W/flood")"
  echo "  levels:  $(echo "$levels" | python3 -c "$SUMMARY" 2>/dev/null || echo "$levels")"
done
echo "median flooded/alone p99 ratio: $(printf '%s\n' "${ratios[@]}" | median 3) (target ≤ 1.2)"
uptime
