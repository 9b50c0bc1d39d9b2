# Shared by scripts/bench-proxy.sh, bench-proxy-ab.sh, bench-proxy-raw.sh and
# bench-proxy-levels.sh (sourced, from the repository's root): the set-up and clean-up, the
# benchmarks' proxy config, and the small numeric helpers.

# bench_init [cargo build flags...]: build the proxy's targets (unless NO_BUILD is set), then
# T (the binaries), W (a scratch directory, removed at exit), pids (killed at exit, with the
# nginx of $W/nginx.conf if one was started) and the open-files limit raised to the hard one.
bench_init() {
  [ -n "${NO_BUILD:-}" ] || cargo build --release --locked -p fairlane-proxy "$@" 2>/dev/null
  T=target/release
  W=$(mktemp -d)
  pids=()
  trap bench_cleanup EXIT
  ulimit -n "$(ulimit -Hn)"
}

bench_cleanup() {
  local p
  for p in "${pids[@]}"; do kill "$p" 2>/dev/null || true; done
  if [ -f "$W/nginx.conf" ]; then nginx -c "$W/nginx.conf" -s stop 2>/dev/null || true; fi
  rm -rf "$W"
}

# bench_spawn CMD...: start a server under test in the background in a session of its own,
# as nginx is (it daemonizes): with the kernel's autogroup scheduling
# (/proc/sys/kernel/sched_autogroup_enabled), a server left in the benchmark's session shares
# one group's CPU share with the load generator and the upstream and is preempted when it
# wakes them (measured: 0.2–0.4 involuntary switches per request at 2,000 req/s, against
# 0.00–0.05 in a session of its own, as nginx's 0.00–0.02). Its pid is added to pids and left
# in $!.
bench_spawn() { setsid "$@" & pids+=($!); }

# bench_proxy_conf ADDR ADMIN UPSTREAM [EXTRA_LISTEN_LINES]: the benchmarks' proxy config on
# stdout: ALGO (default sfq), D = DEPTH (default 64), one tenant "bench" with key "kb", queue
# caps no run reaches.
bench_proxy_conf() {
  cat <<TOML
[listen]
addr = "$1"
admin = "$2"
${4:-}
[upstream]
addr = "$3"
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
}

# CPU time (user + system, clock ticks) the processes PIDS (space-separated) have used: steadier
# than req/s when other programs share the machine.
ticks() { local t=0 p; for p in $1; do t=$((t + $(awk '{print $14 + $15}' "/proc/$p/stat"))); done; echo "$t"; }
# The median of the numbers on stdin, one a line (rounded to an integer; `median 3`: 3 decimals).
median() { sort -g | awk -v d="${1:-0}" '{v[NR]=$1} END{m=(NR%2)?v[(NR+1)/2]:(v[NR/2]+v[NR/2+1])/2; printf "%.*f", d, m}'; }
# loadgen's answered requests per second, from its line on stdin.
okps() { sed -n 's/.* ok\/s \([0-9.]*\).*/\1/p'; }
# bench_pairs A_FILE B_FILE LABEL: the per-round differences A − B of two files of per-round
# figures (µs), how often A was lower, and their median: the pairs, not only the medians.
bench_pairs() {
  paste -d' ' "$1" "$2" | awk -v l="$3" '{d = $1 - $2; s = s " " (d > 0 ? "+" : "") d; if (d < 0) lo++; else if (d > 0) hi++; else eq++}
    END {printf "%s per round (us):%s; lower in %d, equal in %d, higher in %d\n", l, s, lo, eq, hi}'
  echo "median of those differences (us): $(paste -d' ' "$1" "$2" | awk '{print $1 - $2}' | median)"
}
