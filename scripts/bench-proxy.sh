#!/usr/bin/env bash
# fairlane-proxy against nginx proxy_pass, same upstream, same run (docs/benchmarks.md).
# Needs nginx: FAIRLANE_BENCH_DEPS=1 scripts/test-deps.sh. Loopback only; ports 18000-18092.
set -euo pipefail
cd "$(dirname "$0")/.."
SECS=${SECS:-10}
CONNS=${CONNS:-64}
cargo build --release --locked -p fairlane-proxy --examples --bins 2>/dev/null
T=target/release
W=$(mktemp -d)
pids=()
cleanup() { for p in "${pids[@]}"; do kill "$p" 2>/dev/null || true; done; nginx -c "$W/nginx.conf" -s stop 2>/dev/null || true; }
trap cleanup EXIT
ulimit -n "$(ulimit -Hn)"

$T/examples/upstream 127.0.0.1:18000 & pids+=($!)

cat > "$W/nginx.conf" <<NGINX
worker_processes 2;
worker_rlimit_nofile 30000;
pid $W/nginx.pid;
error_log $W/nginx-error.log;
events { worker_connections 20000; }
http {
  access_log off;
  keepalive_requests 100000000;
  upstream backend { server 127.0.0.1:18000; keepalive 128; }
  server {
    listen 127.0.0.1:18090;
    location / {
      proxy_pass http://backend;
      proxy_http_version 1.1;
      proxy_set_header Connection "";
    }
  }
}
NGINX
nginx -c "$W/nginx.conf"

cat > "$W/proxy.toml" <<TOML
[listen]
addr = "127.0.0.1:18080"
admin = "127.0.0.1:18091"
[upstream]
addr = "127.0.0.1:18000"
[scheduler]
algorithm = "${ALGO:-sfq}"
depth = ${DEPTH:-64}
[limits]
max_queued = 20000
max_queued_per_tenant = 20000
[[tenant]]
name = "bench"
keys = ["kb"]
TOML
$T/fairlane-proxy --config "$W/proxy.toml" 2>"$W/proxy.log" & pids+=($!)
sleep 1

lg() { $T/examples/loadgen "$@"; }
echo "== throughput: closed loop, $CONNS connections, ${SECS} s each, A/B/A/B"
for round in 1 2; do
  echo "upstream direct: $(lg closed 127.0.0.1:18000 / "$CONNS" "$SECS")"
  echo "nginx:           $(lg closed 127.0.0.1:18090 / "$CONNS" "$SECS" kb)"
  echo "fairlane-proxy:  $(lg closed 127.0.0.1:18080 / "$CONNS" "$SECS" kb)"
done
echo "== latency at moderate load: open loop ${RATE:-2000} req/s, ${SECS} s"
echo "upstream direct: $(lg open 127.0.0.1:18000 / "${RATE:-2000}" "$SECS")"
echo "nginx:           $(lg open 127.0.0.1:18090 / "${RATE:-2000}" "$SECS" kb)"
echo "fairlane-proxy:  $(lg open 127.0.0.1:18080 / "${RATE:-2000}" "$SECS" kb)"
echo "== 10,000 concurrent client connections, ${SECS} s"
lg closed 127.0.0.1:18080 / 10000 "$SECS" kb > "$W/10k.txt" &
lgpid=$!
sleep $(( SECS / 2 + 5 ))
curl -s http://127.0.0.1:18091/status | python3 -c 'import json,sys; s=json.load(sys.stdin); print("proxy status mid-run: connections", s["connections"], "queued", s["queued"], "in flight", s["in_flight"])'
echo "proxy RSS mid-run: $(grep VmRSS /proc/${pids[1]}/status)"
wait $lgpid
echo "fairlane-proxy:  $(cat "$W/10k.txt")"
