#!/usr/bin/env bash
# Throughput of two fairlane-proxy binaries (say main's and a branch's) in one run, rounds
# alternating A/B, same upstream, same load generator: the "within 5 % of before" check of
# issue 16. The load is scripts/bench-proxy.sh's proxy round (closed loop, 64 keep-alive
# connections, SFQ, D = 64, one tenant); nginx is not needed.
#
#   scripts/bench-proxy-ab.sh BASE_BINARY NEW_BINARY
#   (e.g. build main in a worktree: git worktree add /tmp/base main &&
#    (cd /tmp/base && cargo build --release -p fairlane-proxy --bins) and pass
#    /tmp/base/target/release/fairlane-proxy target/release/fairlane-proxy)
#
# Env: NO_BUILD=1 (use target/release/examples as they are), ROUNDS (default 4 per binary), SECS (default 10), CONNS (default 64),
# A_LISTEN / B_LISTEN (extra `[listen]` lines for A's / B's config, e.g. B_LISTEN='workers = "shared"' to compare
# two settings of one binary: scripts/bench-proxy-ab.sh target/release/fairlane-proxy target/release/fairlane-proxy).
# Loopback only; ports 18100-18104.
set -euo pipefail
cd "$(dirname "$0")/.."
A=${1:?base proxy binary}
B=${2:?new proxy binary}
ROUNDS=${ROUNDS:-4}
SECS=${SECS:-10}
CONNS=${CONNS:-64}
. scripts/bench-proxy-lib.sh
bench_init --examples

$T/examples/upstream 127.0.0.1:18100 & pids+=($!)
ALGO=sfq DEPTH=64 bench_proxy_conf 127.0.0.1:18101 127.0.0.1:18102 127.0.0.1:18100 "${A_LISTEN:-}" > "$W/a.toml"
ALGO=sfq DEPTH=64 bench_proxy_conf 127.0.0.1:18103 127.0.0.1:18104 127.0.0.1:18100 "${B_LISTEN:-}" > "$W/b.toml"
bench_spawn "$A" --config "$W/a.toml" 2>"$W/a.log"; pa=$!
bench_spawn "$B" --config "$W/b.toml" 2>"$W/b.log"; pb=$!
sleep 1

tck=$(getconf CLK_TCK)
cpa=0; cpb=0; na=0; nb=0
sa=0; sb=0; ratios=()
echo "== closed loop, $CONNS connections, ${SECS} s per round, A = $A, B = $B; $(uptime | sed 's/.*load/load/')"
for r in $(seq "$ROUNDS"); do
  t0=$(ticks $pa)
  a=$($T/examples/loadgen closed 127.0.0.1:18101 / "$CONNS" "$SECS" kb | okps)
  t1=$(ticks $pa); t2=$(ticks $pb)
  b=$($T/examples/loadgen closed 127.0.0.1:18103 / "$CONNS" "$SECS" kb | okps)
  t3=$(ticks $pb)
  cpa=$((cpa + t1 - t0)); cpb=$((cpb + t3 - t2))
  na=$(awk "BEGIN{print $na + $a * $SECS}"); nb=$(awk "BEGIN{print $nb + $b * $SECS}")
  echo "round $r: A $a req/s, B $b req/s, B/A $(awk "BEGIN{printf \"%.3f\", $b / $a}")"
  ratios+=("$(awk "BEGIN{print $b / $a}")")
  sa=$(awk "BEGIN{print $sa + $a}"); sb=$(awk "BEGIN{print $sb + $b}")
done
awk "BEGIN{printf \"mean: A %.0f req/s, B %.0f req/s, B/A %.3f\n\", $sa / $ROUNDS, $sb / $ROUNDS, $sb / $sa}"
awk "BEGIN{printf \"proxy CPU per request: A %.1f us, B %.1f us, B/A %.3f\n\", $cpa / $tck / $na * 1e6, $cpb / $tck / $nb * 1e6, ($cpb / $nb) / ($cpa / $na)}"
echo "median of the per-round B/A ratios: $(printf '%s\n' "${ratios[@]}" | median 3)"
uptime
# Latency at moderate load (bench-proxy.sh's open-loop round), A/B alternating; OPEN_RATE=0 skips it.
if [ "${OPEN_RATE:-2000}" != 0 ]; then
  p50() { sed -n 's/.* p50 \([0-9.]*\) ms.*/\1/p'; }
  : > "$W/oa"; : > "$W/ob"
  echo "== open loop, ${OPEN_RATE:-2000} req/s, ${SECS} s per round"
  for r in $(seq "$ROUNDS"); do
    a=$($T/examples/loadgen open 127.0.0.1:18101 / "${OPEN_RATE:-2000}" "$SECS" kb); echo "$a" | p50 >> "$W/oa"
    b=$($T/examples/loadgen open 127.0.0.1:18103 / "${OPEN_RATE:-2000}" "$SECS" kb); echo "$b" | p50 >> "$W/ob"
    echo "round $r: A p50 $(tail -1 "$W/oa") ms, B p50 $(tail -1 "$W/ob") ms"
  done
  echo "median p50: A $(awk '{print $1 * 1000}' "$W/oa" | median) us, B $(awk '{print $1 * 1000}' "$W/ob" | median) us"
  uptime
fi
# How the proxies spread their connections over worker runtimes (listen.workers), from their
# exit logs.
kill -TERM "$pa" "$pb" 2>/dev/null || true
wait "$pa" "$pb" 2>/dev/null || true
grep -h "per worker runtime" "$W/a.log" | sed 's/^/A: /' || true
grep -h "per worker runtime" "$W/b.log" | sed 's/^/B: /' || true
