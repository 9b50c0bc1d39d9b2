#!/usr/bin/env bash
# A/B of two fairlane-proxy binaries (e.g. main's and a branch's release builds): same
# upstream, same loadgen, ABBA order in one run; prints ok/s and the proxy's CPU µs per
# request (user + system from /proc, far less sensitive to a loaded machine than ok/s).
#   scripts/ab-proxy.sh /path/to/A/fairlane-proxy /path/to/B/fairlane-proxy
# Needs `cargo build --release -p fairlane-proxy --examples` (loadgen, upstream) here.
# Loopback only; ports 18100, 18180-18181, 18191-18192.
set -euo pipefail
cd "$(dirname "$0")/.."
A=${1:?usage: scripts/ab-proxy.sh A-binary B-binary}
B=${2:?usage: scripts/ab-proxy.sh A-binary B-binary}
T=${T:-target/release/examples}
SECS=${SECS:-8}; CONNS=${CONNS:-64}; ROUNDS=${ROUNDS:-3}
W=$(mktemp -d)
pids=()
cleanup() { for p in "${pids[@]}"; do kill "$p" 2>/dev/null || true; done; }
trap cleanup EXIT
ulimit -n "$(ulimit -Hn)"
$T/upstream 127.0.0.1:18100 & pids+=($!)
for side in A:18180:18191 B:18181:18192; do
  IFS=: read -r name port admin <<<"$side"
  cat > "$W/$name.toml" <<TOML
[listen]
addr = "127.0.0.1:$port"
admin = "127.0.0.1:$admin"
[upstream]
addr = "127.0.0.1:18100"
[scheduler]
algorithm = "sfq"
depth = 64
[limits]
max_queued = 20000
max_queued_per_tenant = 20000
[[tenant]]
name = "bench"
keys = ["kb"]
TOML
done
$A --config "$W/A.toml" 2>"$W/A.log" & PA=$!; pids+=($PA)
$B --config "$W/B.toml" 2>"$W/B.log" & PB=$!; pids+=($PB)
sleep 1
# CPU seconds (user + system) of a process, from /proc: less load-sensitive than ok/s.
cpu() { awk -v hz="$(getconf CLK_TCK)" '{printf "%.3f", ($14 + $15) / hz}' "/proc/$1/stat"; }
run() { # name port pid
  local c0 out c1 n
  c0=$(cpu "$3"); out=$($T/loadgen closed 127.0.0.1:"$2" / "$CONNS" "$SECS" kb); c1=$(cpu "$3")
  n=$(sed -E 's/.*answered ([0-9]+).*/\1/' <<<"$out")
  echo "$1 $(sed -E 's/ p50.*//' <<<"$out") | proxy CPU µs/request $(awk -v a="$c0" -v b="$c1" -v n="$n" 'BEGIN{printf "%.1f", (b-a)*1e6/n}')"
}
a() { run "A:" 18180 "$PA"; }
b() { run "B:" 18181 "$PB"; }
for r in $(seq "$ROUNDS"); do
  if [ $((r % 2)) = 1 ]; then a; b; else b; a; fi   # ABBA: drift cancels
done
uptime
