#!/usr/bin/env bash
# fairlane-proxy against nginx proxy_pass, same upstream, same run (docs/benchmarks.md).
# Needs nginx: FAIRLANE_BENCH_DEPS=1 scripts/test-deps.sh. Loopback only; ports 18000-18095.
# Env: SECS (per round, default 10), ROUNDS (alternating rounds, default 2), CONNS (64), RATE
# (open loop, 2000), THROUGHPUT_ONLY=1 (skip the 10k-connection and [cluster] parts).
set -euo pipefail
cd "$(dirname "$0")/.."
SECS=${SECS:-10}
CONNS=${CONNS:-64}
[ -n "${NO_BUILD:-}" ] || cargo build --release --locked -p fairlane-proxy --examples --bins 2>/dev/null
T=target/release
W=$(mktemp -d)
pids=()
cleanup() { for p in "${pids[@]}"; do kill "$p" 2>/dev/null || true; done; nginx -c "$W/nginx.conf" -s stop 2>/dev/null || true; }
trap cleanup EXIT
ulimit -n "$(ulimit -Hn)"

$T/examples/upstream 127.0.0.1:18000 & pids+=($!)

# [cluster] coordination cost: one proxy alone vs one with [cluster] (a local redis-server,
# sync every 100 ms), same upstream, alternating A/B/A/B/A/B. CLUSTER_ONLY=1 runs just this
# (no nginx needed). Ports 18081/18085 (proxies), 18084 (redis), admin 18086/18087.
cluster_bench() {
  redis-server --port 18084 --bind 127.0.0.1 --save "" --appendonly no --dir "$W" >"$W/redis.log" 2>&1 & pids+=($!)
  for _ in $(seq 100); do redis-cli -p 18084 ping >/dev/null 2>&1 && break; sleep 0.1; done
  for c in 0 1; do
    { printf '[listen]\naddr = "127.0.0.1:1808%s"\nadmin = "127.0.0.1:1808%s"\n' "$((c * 4 + 1))" "$((c + 6))"
      printf '[upstream]\naddr = "127.0.0.1:18000"\n[scheduler]\ndepth = %s\n' "${DEPTH:-64}"
      printf '[limits]\nmax_queued = 20000\nmax_queued_per_tenant = 20000\n[[tenant]]\nname = "bench"\nkeys = ["kb"]\n'
      if [ "$c" = 1 ]; then printf '[cluster]\nredis = "redis://127.0.0.1:18084/"\ninstance = "bench"\ndepth = %s\n' "${DEPTH:-64}"; fi
    } > "$W/cluster$c.toml"
    $T/fairlane-proxy --config "$W/cluster$c.toml" 2>"$W/cluster$c.log" & pids+=($!)
    cpids[$c]=$!
  done
  sleep 1
  echo "== [cluster] cost: closed loop, $CONNS connections, ${SECS} s each, alone/cluster x${CLUSTER_ROUNDS:-3}; $(uptime | sed 's/.*load/load/')"
  for round in $(seq "${CLUSTER_ROUNDS:-3}"); do
    echo "alone:   $(lg closed 127.0.0.1:18081 / "$CONNS" "$SECS" kb)"
    echo "cluster: $(lg closed 127.0.0.1:18085 / "$CONNS" "$SECS" kb)"
  done
  # CPU per answered request, from /proc (less sensitive to other load than req/s).
  for c in 0 1; do
    ticks=$(awk '{print $14 + $15}' "/proc/${cpids[$c]}/stat")
    done_n=$(curl -s "http://127.0.0.1:1808$((c + 6))/status" | python3 -c 'import json,sys; print(sum(t["completed"] for t in json.load(sys.stdin)["tenants"]))')
    echo "$([ "$c" = 0 ] && echo alone || echo cluster) CPU: $(python3 -c "print(f'{$ticks / $(getconf CLK_TCK) * 1e6 / $done_n:.1f} us per request ($done_n requests)')")"
  done
  echo "cluster sync: $(curl -s http://127.0.0.1:18087/status | python3 -c 'import json,sys; c=json.load(sys.stdin)["cluster"]; print("syncs", c["syncs"], "failures", c["sync_failures"], "seats", c["seats"], "fallback", c["fallback"])')"
}
lg() { $T/examples/loadgen "$@"; }
if [ "${CLUSTER_ONLY:-0}" = 1 ]; then cluster_bench; exit 0; fi

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
proxy_pid=$!
# The same proxy on hyper's HTTP/1 server path (`listen.http1 = "hyper"`; issue 19).
sed -e 's/18080/18094/; s/18091/18095/' -e '/^admin/a http1 = "hyper"' "$W/proxy.toml" > "$W/proxy-hyper.toml"
$T/fairlane-proxy --config "$W/proxy-hyper.toml" 2>"$W/proxy-hyper.log" & pids+=($!)
hyper_pid=$!
# A bare hyper forwarder (no fairlane logic): the HTTP stack's own cost (issue 19).
$T/examples/bare_forward 127.0.0.1:18092 127.0.0.1:18000 & pids+=($!)
bare_pid=$!
# A raw HTTP/1.1 forwarder (httparse on tokio sockets, no hyper, no fairlane logic; issue 19).
$T/examples/raw_forward 127.0.0.1:18093 127.0.0.1:18000 & pids+=($!)
raw_pid=$!
sleep 1

lg() { $T/examples/loadgen "$@"; }
okps() { sed -n 's/.* ok\/s \([0-9.]*\).*/\1/p'; }
p50() { sed -n 's/.* p50 \([0-9.]*\) ms.*/\1/p' | awk '{printf "%.0f\n", $1 * 1000}'; }
median() { sort -g | awk '{v[NR]=$1} END{m=(NR%2)?v[(NR+1)/2]:(v[NR/2]+v[NR/2+1])/2; printf "%.0f", m}'; }
ROUNDS=${ROUNDS:-2}
# CPU time (user + system) the server processes used per answered request: steadier than
# req/s when other programs share the machine. The upstream's own CPU is not counted.
ticks() { local t=0 p; for p in $1; do t=$((t + $(awk '{print $14 + $15}' "/proc/$p/stat"))); done; echo "$t"; }
nginx_pids=$(pgrep -P "$(cat "$W/nginx.pid")" | tr '\n' ' ')
declare -A cpu=() reqs=()
row() { # name port key pids
  local t0 t1 l v
  t0=$(ticks "$4")
  l=$(lg closed "127.0.0.1:$2" / "$CONNS" "$SECS" $3)
  t1=$(ticks "$4")
  v=$(echo "$l" | okps)
  printf '%-16s %s\n' "$1:" "$l"
  echo "$v" >> "$W/$1"
  cpu[$1]=$(( ${cpu[$1]:-0} + t1 - t0 )); reqs[$1]=$(awk "BEGIN{print ${reqs[$1]:-0} + $v * $SECS}")
}
echo "== throughput: closed loop, $CONNS connections, ${SECS} s each, ${ROUNDS} rounds alternating; $(uptime | sed 's/.*load/load/')"
: > "$W/direct"; : > "$W/nginx"; : > "$W/bare"; : > "$W/raw"; : > "$W/proxy"; : > "$W/hyper"
for round in $(seq "$ROUNDS"); do
  row direct 18000 "" ""
  row nginx 18090 kb "$nginx_pids"
  row bare 18092 kb "$bare_pid"
  row raw 18093 kb "$raw_pid"
  row proxy 18080 kb "$proxy_pid"
  row hyper 18094 kb "$hyper_pid"
done
n=$(median < "$W/nginx")
us() { awk "BEGIN{printf \"%.1f\", ${cpu[$1]} / $(getconf CLK_TCK) / ${reqs[$1]} * 1e6}"; }
echo "medians (req/s): direct $(median < "$W/direct"), nginx $n, bare hyper $(median < "$W/bare"), raw $(median < "$W/raw"), fairlane-proxy $(median < "$W/proxy"), fairlane-proxy on hyper $(median < "$W/hyper"); raw/nginx $(awk "BEGIN{printf \"%.3f\", $(median < "$W/raw") / $n}"), fairlane/nginx $(awk "BEGIN{printf \"%.3f\", $(median < "$W/proxy") / $n}"), bare/nginx $(awk "BEGIN{printf \"%.3f\", $(median < "$W/bare") / $n}"), fairlane-on-hyper/nginx $(awk "BEGIN{printf \"%.3f\", $(median < "$W/hyper") / $n}")"
echo "server CPU per request (us): nginx $(us nginx), bare hyper $(us bare), raw $(us raw), fairlane-proxy $(us proxy), fairlane-proxy on hyper $(us hyper); fairlane/nginx $(awk "BEGIN{printf \"%.3f\", $(us proxy) / $(us nginx)}"); $(uptime | sed 's/.*load/load/')"
echo "== latency at moderate load: open loop ${RATE:-2000} req/s, ${SECS} s, ${ROUNDS} rounds alternating"
: > "$W/direct"; : > "$W/nginx"; : > "$W/bare"; : > "$W/raw"; : > "$W/proxy"; : > "$W/hyper"
for round in $(seq "$ROUNDS"); do
  l=$(lg open 127.0.0.1:18000 / "${RATE:-2000}" "$SECS"); echo "upstream direct: $l"; echo "$l" | p50 >> "$W/direct"
  l=$(lg open 127.0.0.1:18090 / "${RATE:-2000}" "$SECS" kb); echo "nginx:           $l"; echo "$l" | p50 >> "$W/nginx"
  l=$(lg open 127.0.0.1:18092 / "${RATE:-2000}" "$SECS" kb); echo "bare hyper:      $l"; echo "$l" | p50 >> "$W/bare"
  l=$(lg open 127.0.0.1:18093 / "${RATE:-2000}" "$SECS" kb); echo "raw:             $l"; echo "$l" | p50 >> "$W/raw"
  l=$(lg open 127.0.0.1:18080 / "${RATE:-2000}" "$SECS" kb); echo "fairlane-proxy:  $l"; echo "$l" | p50 >> "$W/proxy"
  l=$(lg open 127.0.0.1:18094 / "${RATE:-2000}" "$SECS" kb); echo "proxy on hyper:  $l"; echo "$l" | p50 >> "$W/hyper"
done
d=$(median < "$W/direct")
echo "median p50 (us) and added over direct: direct $d, nginx $(median < "$W/nginx") (+$(( $(median < "$W/nginx") - d ))), bare hyper $(median < "$W/bare") (+$(( $(median < "$W/bare") - d ))), raw $(median < "$W/raw") (+$(( $(median < "$W/raw") - d ))), fairlane-proxy $(median < "$W/proxy") (+$(( $(median < "$W/proxy") - d ))), proxy on hyper $(median < "$W/hyper") (+$(( $(median < "$W/hyper") - d )))"
[ "${THROUGHPUT_ONLY:-0}" = 1 ] && exit 0
echo "== 10,000 concurrent client connections, ${SECS} s"
lg closed 127.0.0.1:18080 / 10000 "$SECS" kb > "$W/10k.txt" &
lgpid=$!
sleep $(( SECS / 2 + 5 ))
curl -s http://127.0.0.1:18091/status | python3 -c 'import json,sys; s=json.load(sys.stdin); print("proxy status mid-run: connections", s["connections"], "queued", s["queued"], "in flight", s["in_flight"])'
echo "proxy RSS mid-run: $(grep VmRSS /proc/$proxy_pid/status)"
wait $lgpid
echo "fairlane-proxy:  $(cat "$W/10k.txt")"
cluster_bench
