#!/usr/bin/env bash
# Issue 19, an own HTTP/1.1 path: nginx, fairlane-proxy, the bare hyper forwarder and the raw
# HTTP/1.1 forwarder (crates/proxy/examples/raw_forward.rs) in its modes, closed loop, alternating
# in one run; req/s and server CPU per request (docs/benchmarks.md, "Issue 19: an own HTTP/1.1
# path"). Needs nginx (FAIRLANE_BENCH_DEPS=1 scripts/test-deps.sh). Loopback ports 18110-18119.
# Env: SECS (per round, 5), ROUNDS (3), CONNS (64), NO_BUILD=1 (use target/release as is).
set -euo pipefail
cd "$(dirname "$0")/.."
SECS=${SECS:-5}; ROUNDS=${ROUNDS:-3}; CONNS=${CONNS:-64}
. scripts/bench-proxy-lib.sh
bench_init --examples --bins
cat > "$W/nginx.conf" <<NGINX
worker_processes 2;
pid $W/nginx.pid;
error_log $W/nginx-error.log;
events { worker_connections 4000; }
http { access_log off; keepalive_requests 100000000;
  upstream backend { server 127.0.0.1:18110; keepalive 128; }
  server { listen 127.0.0.1:18111; location / { proxy_pass http://backend; proxy_http_version 1.1; proxy_set_header Connection ""; } } }
NGINX
ALGO=sfq DEPTH=64 bench_proxy_conf 127.0.0.1:18112 127.0.0.1:18119 127.0.0.1:18110 > "$W/proxy.toml"
$T/examples/upstream 127.0.0.1:18110 >/dev/null & pids+=($!)
nginx -c "$W/nginx.conf"
declare -A pid=() port=()
start() { bench_spawn "${@:3}"; pid[$1]=$!; port[$1]=$2; }
start proxy 18112 $T/fairlane-proxy --config "$W/proxy.toml"
start bare 18113 $T/examples/bare_forward 127.0.0.1:18113 127.0.0.1:18110
start raw 18114 $T/examples/raw_forward 127.0.0.1:18114 127.0.0.1:18110
start raw+gate 18115 $T/examples/raw_forward 127.0.0.1:18115 127.0.0.1:18110 gate
start rawpc 18116 $T/examples/raw_forward 127.0.0.1:18116 127.0.0.1:18110 percore
start rawpc+gate 18117 $T/examples/raw_forward 127.0.0.1:18117 127.0.0.1:18110 percore gate
sleep 1
pid[nginx]=$(pgrep -P "$(cat "$W/nginx.pid")" | tr '\n' ' '); port[nginx]=18111
names="nginx proxy bare raw raw+gate rawpc rawpc+gate"
declare -A cpu=() reqs=() all=()
echo "== closed loop, $CONNS connections, $SECS s each, $ROUNDS rounds alternating; $(uptime | sed 's/.*load/load/')"
for r in $(seq "$ROUNDS"); do
  for k in $names; do
    t0=$(ticks "${pid[$k]}")
    l=$($T/examples/loadgen closed "127.0.0.1:${port[$k]}" / "$CONNS" "$SECS" kb)
    t1=$(ticks "${pid[$k]}")
    v=$(echo "$l" | okps)
    printf '%-11s %s\n' "$k" "$l"
    cpu[$k]=$(( ${cpu[$k]:-0} + t1 - t0 )); reqs[$k]=$(awk "BEGIN{print ${reqs[$k]:-0} + $v * $SECS}")
    all[$k]="${all[$k]:-} $v"
  done
done
n=$(awk "BEGIN{print ${reqs[nginx]} / ($SECS * $ROUNDS)}")
nc=$(awk "BEGIN{print ${cpu[nginx]} / ${reqs[nginx]}}")
for k in $names; do
  awk "BEGIN{r = ${reqs[$k]} / ($SECS * $ROUNDS); c = ${cpu[$k]} / ${reqs[$k]};
    printf \"%-11s %6.0f req/s (%.2fx nginx), %5.1f us CPU per request (%.2fx nginx)\n\", \"$k\", r, r / $n, c / $(getconf CLK_TCK) * 1e6, c / $nc}"
done
echo "== $(uptime | sed 's/.*load/load/')"
