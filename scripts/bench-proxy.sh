#!/usr/bin/env bash
# fairlane-proxy against nginx proxy_pass, same upstream, same run (docs/benchmarks.md).
# Needs nginx: FAIRLANE_BENCH_DEPS=1 scripts/test-deps.sh. Loopback only; ports 18000-18096.
# Env: SECS (per round, default 10), ROUNDS (alternating rounds, default 2), CONNS (64), RATE
# (open loop, 2000), THROUGHPUT_ONLY=1 (skip the 10k-connection and [cluster] parts),
# LATENCY_ONLY=1 (skip the closed-loop rounds), PROFILE=1 (after the open-loop rounds, where
# nginx's and the proxy's time per request goes: scheduler counters and, when perf can trace,
# user and system-call time; see scripts/latency-spans.py), TLS_ONLY=1 (only the HTTPS rows:
# HTTP/1.1 with keep-alive over TLS 1.3, one certificate made here for both, against nginx
# `ssl`), GRPC_ONLY=1 (only the gRPC rows: unary calls over h2c through the proxy against nginx
# `grpc_pass`, to the test kit's gRPC echo server). Both run with h2load (nghttp2-client);
# a full run runs them after the HTTP/1.1 latency rows. Their open-loop rounds: LAT_ROUNDS
# (default ROUNDS, at least 6) of LAT_SECS (default 5) s each, every other one in reverse
# order, with the proxy-minus-nginx p50 of each round printed. The HTTP/1.1 rows' load generator
# (crates/proxy/examples/loadgen) runs on LOADGEN_THREADS single-threaded runtimes (default 1).
set -euo pipefail
cd "$(dirname "$0")/.."
SECS=${SECS:-10}
CONNS=${CONNS:-64}
ROUNDS=${ROUNDS:-2}
# The open-loop (latency) rounds of the HTTPS and gRPC rows: more and shorter than the
# closed-loop ones, since their p50s vary more between rounds than within one.
LAT_ROUNDS=${LAT_ROUNDS:-$((ROUNDS > 6 ? ROUNDS : 6))}
LAT_SECS=${LAT_SECS:-5}
. scripts/bench-proxy-lib.sh
bench_init --examples --bins

$T/examples/upstream 127.0.0.1:18000 & pids+=($!)
# The HTTPS and gRPC rows: one certificate (ECDSA P-256, TLS 1.3) for nginx and the proxy, and
# a gRPC unary echo server over h2c.
openssl req -x509 -newkey ec -pkeyopt ec_paramgen_curve:prime256v1 -nodes -days 2 \
  -subj /CN=localhost -addext "subjectAltName=IP:127.0.0.1,DNS:localhost" \
  -keyout "$W/key.pem" -out "$W/cert.pem" 2>/dev/null
$T/examples/grpc_upstream 127.0.0.1:18001 2>/dev/null & pids+=($!)

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
    bench_spawn $T/fairlane-proxy --config "$W/cluster$c.toml" 2>"$W/cluster$c.log"
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
# Context switches on the whole machine (/proc/stat): per request, they tell a round in which
# the programs took turns on the CPUs request by request (2–3 a request) from one in which each
# worked through batches (under 1).
switches() { awk '/^ctxt/ {print $2}' /proc/stat; }
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
  upstream grpcbackend { server 127.0.0.1:18001; keepalive 128; keepalive_requests 100000000; }
  server {
    listen 127.0.0.1:18002 ssl;
    ssl_certificate $W/cert.pem;
    ssl_certificate_key $W/key.pem;
    ssl_protocols TLSv1.3;
    location / {
      proxy_pass http://backend;
      proxy_http_version 1.1;
      proxy_set_header Connection "";
    }
  }
  server {
    listen 127.0.0.1:18003 http2;
    location / { grpc_pass grpc://grpcbackend; }
  }
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

bench_proxy_conf 127.0.0.1:18080 127.0.0.1:18091 127.0.0.1:18000 > "$W/proxy.toml"
bench_spawn $T/fairlane-proxy --config "$W/proxy.toml" 2>"$W/proxy.log"
proxy_pid=$!
# The same proxy on hyper's HTTP/1 server path (`listen.http1 = "hyper"`; issue 19).
sed -e 's/18080/18094/; s/18091/18095/' -e '/^admin/a http1 = "hyper"' "$W/proxy.toml" > "$W/proxy-hyper.toml"
bench_spawn $T/fairlane-proxy --config "$W/proxy-hyper.toml" 2>"$W/proxy-hyper.log"
hyper_pid=$!
# The proxy's HTTPS listener (same certificate as nginx's), and a proxy of gRPC calls (h2c
# from the client, h2c to the gRPC upstream).
sed -e 's/18080/18005/; s/18091/18006/' "$W/proxy.toml" > "$W/proxy-tls.toml"
printf '[listen.tls]\naddr = "127.0.0.1:18004"\ncert = "%s"\nkey = "%s"\n' "$W/cert.pem" "$W/key.pem" >> "$W/proxy-tls.toml"
bench_spawn $T/fairlane-proxy --config "$W/proxy-tls.toml" 2>"$W/proxy-tls.log"
tls_pid=$!
sed -e 's/18080/18007/; s/18091/18008/; s/18000/18001/' -e '/^admin/a http2 = true' \
  -e '/^addr = "127.0.0.1:18001"/a protocol = "h2c"' "$W/proxy.toml" > "$W/proxy-grpc.toml"
bench_spawn $T/fairlane-proxy --config "$W/proxy-grpc.toml" 2>"$W/proxy-grpc.log"
grpc_pid=$!
# A bare hyper forwarder (no fairlane logic): the HTTP stack's own cost (issue 19).
bench_spawn $T/examples/bare_forward 127.0.0.1:18092 127.0.0.1:18000
bare_pid=$!
# A raw HTTP/1.1 forwarder (httparse on tokio sockets, no hyper, no fairlane logic; issue 19).
bench_spawn $T/examples/raw_forward 127.0.0.1:18093 127.0.0.1:18000
raw_pid=$!
# The floor under any forwarder on this machine: a C byte relay (scripts/floor.c; one upstream
# connection per client connection, one recv and one send each way, no parsing), if a C
# compiler is there.
floor_pid=""
if cc -O2 -o "$W/floor-relay" scripts/floor.c 2>/dev/null; then
  "$W/floor-relay" 18096 18000 2 & pids+=($!)
  floor_main=$!
fi
sleep 1
[ -z "${floor_main:-}" ] || floor_pid=$(pgrep -P "$floor_main" | tr '\n' ' ')

# HTTPS and gRPC rows, with h2load: closed loop (req/s), then open loop at RATE (p50 from
# h2load's per-request log), alternating the proxy and nginx, reverse order every other round.
printf '\x00\x00\x00\x00\x05hello' > "$W/grpc-msg.bin"
H2_TLS=(--h1 -H "authorization: Bearer kb")
H2_GRPC=(-H "authorization: Bearer kb" -H "content-type: application/grpc" -H "te: trailers" -d "$W/grpc-msg.bin")
h2closed() { # name url pids h2load-args...
  local name=$1 url=$2 pids=$3 out t0 t1; shift 3
  t0=$(ticks "$pids")
  out=$(h2load -D "$SECS" --warm-up-time=1 "$@" "$url" 2>&1)
  t1=$(ticks "$pids")
  local v n; v=$(echo "$out" | sed -n 's/^finished in [^,]*, \([0-9.]*\) req\/s.*/\1/p')
  n=$(echo "$out" | sed -n 's/^requests: .* \([0-9]*\) succeeded.*/\1/p')
  printf '%-16s %s req/s; %s\n' "$name:" "$v" "$(echo "$out" | grep -E '^requests:' | sed 's/^requests: //')"
  echo "${v:-0}" >> "$W/$name"
  # Server CPU (user + system) over the run, warm-up included, per request answered.
  echo "$((t1 - t0)) ${n:-0}" >> "$W/$name.cpu"
}
cpu_us() { awk -v hz="$(getconf CLK_TCK)" '{t += $1; n += $2} END {printf "%.1f", n ? t / hz / n * 1e6 : 0}' "$W/$1.cpu"; }
h2open() { # name url h2load-args...
  local name=$1 url=$2 c=8; shift 2
  : > "$W/h2.log"
  h2load -D "$LAT_SECS" -c $c --rps $(( ${RATE:-2000} / c )) --log-file="$W/h2.log" "$@" "$url" > "$W/h2.out" 2>&1
  local p; p=$(awk -F'\t' '{print $3}' "$W/h2.log" | sort -n | awk '{v[NR]=$1} END{if (NR) print v[int((NR+1)/2)]; else print 0}')
  printf '%-16s p50 %s us over %s requests; %s\n' "$name:" "$p" "$(wc -l < "$W/h2.log")" "$(grep -E '^requests:' "$W/h2.out" | sed 's/^requests: //')"
  echo "$p" >> "$W/$name"
}
h2rows() { # label direct-url nginx-url proxy-url proxy-admin-port proxy-pid h2load-args...
  local label=$1 d=$2 n=$3 p=$4 admin=$5 ppid=$6; shift 6
  echo "== $label: closed loop ($*), ${SECS} s each, ${ROUNDS:-2} rounds alternating; $(uptime | sed 's/.*load/load/')"
  : > "$W/$label-direct"; : > "$W/$label-nginx"; : > "$W/$label-proxy"
  : > "$W/$label-direct.cpu"; : > "$W/$label-nginx.cpu"; : > "$W/$label-proxy.cpu"
  for round in $(seq "${ROUNDS:-2}"); do
    h2closed "$label-direct" "$d" "" "$@"
    if [ $((round % 2)) = 1 ]; then h2closed "$label-nginx" "$n" "$nginx_pids" "$@"; h2closed "$label-proxy" "$p" "$ppid" "$@"
    else h2closed "$label-proxy" "$p" "$ppid" "$@"; h2closed "$label-nginx" "$n" "$nginx_pids" "$@"; fi
  done
  local nm pm; nm=$(median < "$W/$label-nginx"); pm=$(median < "$W/$label-proxy")
  echo "$label medians (req/s): direct $(median < "$W/$label-direct"), nginx $nm, fairlane-proxy $pm; fairlane/nginx $(awk "BEGIN{printf \"%.3f\", $pm / $nm}")"
  echo "$label server CPU per request (us): nginx $(cpu_us "$label-nginx"), fairlane-proxy $(cpu_us "$label-proxy"); fairlane/nginx $(awk "BEGIN{printf \"%.3f\", $(cpu_us "$label-proxy") / $(cpu_us "$label-nginx")}")"
  echo "== $label: open loop ${RATE:-2000} req/s (8 clients), ${LAT_SECS} s, ${LAT_ROUNDS} rounds, every other one in reverse order"
  : > "$W/$label-direct"; : > "$W/$label-nginx"; : > "$W/$label-proxy"
  local args=("$@")
  # The open loop: one stream at a time per connection (the closed loop's -c/-m dropped).
  local i keep=()
  for ((i = 0; i < ${#args[@]}; i++)); do
    case "${args[$i]}" in -c|-m) i=$((i + 1));; *) keep+=("${args[$i]}");; esac
  done
  # direct, nginx, proxy; then proxy, nginx, direct: no program always follows the same one.
  for round in $(seq "$LAT_ROUNDS"); do
    if [ $((round % 2)) = 1 ]; then
      h2open "$label-direct" "$d" "${keep[@]}"; h2open "$label-nginx" "$n" "${keep[@]}"; h2open "$label-proxy" "$p" "${keep[@]}"
    else
      h2open "$label-proxy" "$p" "${keep[@]}"; h2open "$label-nginx" "$n" "${keep[@]}"; h2open "$label-direct" "$d" "${keep[@]}"
    fi
  done
  bench_pairs "$W/$label-proxy" "$W/$label-nginx" "$label: proxy p50 minus nginx p50"
  local dm; dm=$(median < "$W/$label-direct")
  echo "$label median p50 (us) and added over direct: direct $dm, nginx $(median < "$W/$label-nginx") (+$(( $(median < "$W/$label-nginx") - dm ))), fairlane-proxy $(median < "$W/$label-proxy") (+$(( $(median < "$W/$label-proxy") - dm )))"
  echo "$label: the proxy's refusals (all tenants): $(curl -s "http://127.0.0.1:$admin/status" | python3 -c 'import json,sys; s=json.load(sys.stdin); print(sum(sum(t["rejected"].values()) for t in s["tenants"]), "rejected of", sum(t["received"] for t in s["tenants"]), "received")')"
}
tls_grpc_rows() {
  # TLS_ONLY=1 GRPC_ONLY=1: both.
  if [ "${GRPC_ONLY:-0}" != 1 ] || [ "${TLS_ONLY:-0}" = 1 ]; then
    h2rows https http://127.0.0.1:18000/ https://127.0.0.1:18002/ https://127.0.0.1:18004/ 18006 "$tls_pid" \
      -c "$CONNS" -m 1 "${H2_TLS[@]}"
  fi
  if [ "${TLS_ONLY:-0}" != 1 ] || [ "${GRPC_ONLY:-0}" = 1 ]; then
    h2rows grpc http://127.0.0.1:18001/fl.Echo/Unary http://127.0.0.1:18003/fl.Echo/Unary \
      http://127.0.0.1:18007/fl.Echo/Unary 18008 "$grpc_pid" -c 8 -m 8 "${H2_GRPC[@]}"
  fi
}
p50() { sed -n 's/.* p50 \([0-9.]*\) ms.*/\1/p' | awk '{printf "%.0f\n", $1 * 1000}'; }
nginx_pids=$(pgrep -P "$(cat "$W/nginx.pid")" | tr '\n' ' ')
declare -A cpu=() reqs=()
if [ "${TLS_ONLY:-0}" = 1 ] || [ "${GRPC_ONLY:-0}" = 1 ]; then tls_grpc_rows; exit 0; fi
row() { # name port key pids
  local t0 t1 l v c0 c1
  t0=$(ticks "$4"); c0=$(switches)
  l=$(lg closed "127.0.0.1:$2" / "$CONNS" "$SECS" $3)
  t1=$(ticks "$4"); c1=$(switches)
  v=$(echo "$l" | okps)
  printf '%-16s %s; machine %s switches/request\n' "$1:" "$l" "$(awk "BEGIN{printf \"%.2f\", ($c1 - $c0) / ($v * $SECS + 1)}")"
  echo "$v" >> "$W/$1"
  cpu[$1]=$(( ${cpu[$1]:-0} + t1 - t0 )); reqs[$1]=$(awk "BEGIN{print ${reqs[$1]:-0} + $v * $SECS}")
}
if [ "${LATENCY_ONLY:-0}" != 1 ]; then
echo "== throughput: closed loop, $CONNS connections, ${SECS} s each, ${ROUNDS} rounds alternating; $(uptime | sed 's/.*load/load/')"
: > "$W/direct"; : > "$W/nginx"; : > "$W/bare"; : > "$W/raw"; : > "$W/proxy"; : > "$W/hyper"; : > "$W/floor"
for round in $(seq "$ROUNDS"); do
  row direct 18000 "" ""
  row nginx 18090 kb "$nginx_pids"
  row bare 18092 kb "$bare_pid"
  row raw 18093 kb "$raw_pid"
  if [ -n "$floor_pid" ]; then row floor 18096 kb "$floor_pid"; fi
  row proxy 18080 kb "$proxy_pid"
  row hyper 18094 kb "$hyper_pid"
done
n=$(median < "$W/nginx")
us() { awk "BEGIN{printf \"%.1f\", ${cpu[$1]} / $(getconf CLK_TCK) / ${reqs[$1]} * 1e6}"; }
echo "medians (req/s): direct $(median < "$W/direct"), nginx $n, bare hyper $(median < "$W/bare"), raw $(median < "$W/raw"), fairlane-proxy $(median < "$W/proxy"), fairlane-proxy on hyper $(median < "$W/hyper"); raw/nginx $(awk "BEGIN{printf \"%.3f\", $(median < "$W/raw") / $n}"), fairlane/nginx $(awk "BEGIN{printf \"%.3f\", $(median < "$W/proxy") / $n}"), bare/nginx $(awk "BEGIN{printf \"%.3f\", $(median < "$W/bare") / $n}"), fairlane-on-hyper/nginx $(awk "BEGIN{printf \"%.3f\", $(median < "$W/hyper") / $n}")"
echo "server CPU per request (us): nginx $(us nginx), bare hyper $(us bare), raw $(us raw), fairlane-proxy $(us proxy), fairlane-proxy on hyper $(us hyper); fairlane/nginx $(awk "BEGIN{printf \"%.3f\", $(us proxy) / $(us nginx)}"); $(uptime | sed 's/.*load/load/')"
if [ -n "$floor_pid" ]; then
  echo "floor (C byte relay): $(median < "$W/floor") req/s, floor/nginx $(awk "BEGIN{printf \"%.3f\", $(median < "$W/floor") / $n}"), server CPU $(us floor) us per request"
fi
fi
echo "== latency at moderate load: open loop ${RATE:-2000} req/s, ${SECS} s, ${ROUNDS} rounds alternating"
: > "$W/direct"; : > "$W/nginx"; : > "$W/bare"; : > "$W/raw"; : > "$W/proxy"; : > "$W/hyper"
# One open-loop row: name, port, key. Every other round runs the rows in reverse order, so no
# program always follows the same one (the p50s of back-to-back runs are not independent).
orow() {
  local l; l=$(lg open "127.0.0.1:$2" / "${RATE:-2000}" "$SECS" ${3:-})
  printf '%-16s %s\n' "$1:" "$l"; echo "$l" | p50 >> "$W/$1"
}
rows=("direct 18000" "nginx 18090 kb" "bare 18092 kb" "raw 18093 kb" "proxy 18080 kb" "hyper 18094 kb")
for round in $(seq "$ROUNDS"); do
  if [ $((round % 2)) = 1 ]; then order=(0 1 2 3 4 5); else order=(5 4 3 2 1 0); fi
  for k in "${order[@]}"; do orow ${rows[$k]}; done
done
bench_pairs "$W/proxy" "$W/nginx" "proxy p50 minus nginx p50"
d=$(median < "$W/direct")
echo "median p50 (us) and added over direct: direct $d, nginx $(median < "$W/nginx") (+$(( $(median < "$W/nginx") - d ))), bare hyper $(median < "$W/bare") (+$(( $(median < "$W/bare") - d ))), raw $(median < "$W/raw") (+$(( $(median < "$W/raw") - d ))), fairlane-proxy $(median < "$W/proxy") (+$(( $(median < "$W/proxy") - d ))), proxy on hyper $(median < "$W/hyper") (+$(( $(median < "$W/hyper") - d )))"
if [ "${PROFILE:-0}" = 1 ]; then
  # Where each server's time per request goes at this rate. From the kernel's own per-thread
  # counters (/proc/<pid>/task/*/schedstat: time on a CPU, time runnable but waiting for one,
  # time slices), no tracing: alternating nginx and the proxy, reverse order every other round.
  snap() { local p; for p in $1; do cat /proc/"$p"/task/*/schedstat; done | awk '{a += $1; b += $2; c += $3} END {print a, b, c}'; }
  echo "== where the time goes at ${RATE:-2000} req/s: the servers' threads per request (schedstat), ${ROUNDS} rounds"
  srow() { # name port pids
    local a b l n
    a=$(snap "$3"); l=$(lg open "127.0.0.1:$2" / "${RATE:-2000}" "$SECS" kb); b=$(snap "$3")
    n=$(echo "$l" | sed -n 's/.*answered \([0-9]*\).*/\1/p')
    echo "$1: p50 $(echo "$l" | p50) us; $(echo "$a $b $n" | awk '{printf "on a CPU %.1f us, runnable but waiting %.1f us, time slices %.2f per request", ($4 - $1) / $7 / 1e3, ($5 - $2) / $7 / 1e3, ($6 - $3) / $7}')"
  }
  for round in $(seq "$ROUNDS"); do
    if [ $((round % 2)) = 1 ]; then srow nginx 18090 "$nginx_pids"; srow fairlane-proxy 18080 "$proxy_pid"
    else srow fairlane-proxy 18080 "$proxy_pid"; srow nginx 18090 "$nginx_pids"; fi
  done
  # User time and time in system calls per request, from a 1 s trace of each server's system
  # calls and switches (needs perf and the right to trace: root, or perf_event_paranoid <= 1).
  if command -v perf >/dev/null && perf record -q -e raw_syscalls:sys_enter -o "$W/probe.data" -- true >/dev/null 2>&1; then
    echo "== user and system-call time per request (perf trace of 1 s at ${RATE:-2000} req/s; tracing adds a few us per call to both)"
    ng="nginx 18090 $(echo "$nginx_pids" | tr ' ' ',' | sed 's/,$//')" px="fairlane-proxy 18080 $proxy_pid"
    for round in $(seq "$ROUNDS"); do for s in "$ng" "$px"; do
      [ $((round % 2)) = 1 ] || { [ "$s" = "$ng" ] && s=$px || s=$ng; }
      set -- $s
      lg open "127.0.0.1:$2" / "${RATE:-2000}" 4 kb > /dev/null & lgp=$!
      sleep 1.5
      perf record -q -e raw_syscalls:sys_enter -e raw_syscalls:sys_exit -e sched:sched_switch -p "$3" -o "$W/$1.data" -- sleep 1 >/dev/null 2>&1
      wait $lgp
      # A failed recording is reported by latency-spans.py and does not end the run.
      perf script -i "$W/$1.data" 2>/dev/null | python3 scripts/latency-spans.py "$1" "${RATE:-2000}" || true
    done; done
  else
    echo "(perf cannot trace system calls here: the user/system-call split is skipped)"
  fi
fi
[ "${THROUGHPUT_ONLY:-0}" = 1 ] || [ "${LATENCY_ONLY:-0}" = 1 ] && exit 0
tls_grpc_rows
echo "== 10,000 concurrent client connections, ${SECS} s"
lg closed 127.0.0.1:18080 / 10000 "$SECS" kb > "$W/10k.txt" &
lgpid=$!
sleep $(( SECS / 2 + 5 ))
curl -s http://127.0.0.1:18091/status | python3 -c 'import json,sys; s=json.load(sys.stdin); print("proxy status mid-run: connections", s["connections"], "queued", s["queued"], "in flight", s["in_flight"])'
echo "proxy RSS mid-run: $(grep VmRSS /proc/$proxy_pid/status)"
wait $lgpid
echo "fairlane-proxy:  $(cat "$W/10k.txt")"
cluster_bench
