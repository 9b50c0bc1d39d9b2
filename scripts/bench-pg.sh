#!/usr/bin/env bash
# `fairlane pg` beside PgBouncer (Debian's `pgbouncer`), both in transaction mode with the
# same pool size, in front of one PostgreSQL: `pgbench -S` (select only) and `pgbench -N`
# (simple update) through each and directly, alternating, ROUNDS times, in one run. Prints
# each one's TPS and p50 latency (from pgbench's per-transaction logs), fairlane pg's TPS
# over PgBouncer's, the p50 each adds over going direct, and each pooler's CPU time per
# transaction (utime + stime of its process from /proc, over the pgbench run: the measure
# that a loaded machine disturbs least; its user-space part beside it) and its context
# switches per transaction (voluntary: the event loop found nothing to do and slept in
# epoll_wait; involuntary: preempted), summed over its threads.
#
#   ROUNDS=3 SECS=10 CLIENTS=16 POOL_SIZE=8 SCALE=10 ALGORITHM=sfq THREADS=1 ./scripts/bench-pg.sh
#
# THREADS is fairlane pg's `listen.threads` (1: one event loop, as PgBouncer).
# TRACE=1 adds the hand-over gap of each pooler (needs `perf`, Debian's linux-perf): during a
# 5 s `pgbench -S`, 2 s of its recvfrom/sendto calls are traced, and for each server
# connection the time from reading an answer to sending the next query on it is reported,
# split by whether a client's query was already waiting in the pooler (about 30 s more).
#
# About 4 minutes with the defaults (2 modes × 3 targets × 3 rounds × 10 s, plus set-up).
# Runs as root: PostgreSQL and PgBouncer run as the `postgres` user.
set -euo pipefail
cd "$(dirname "$0")/.."
FAIRLANE_BENCH_DEPS=1 ./scripts/test-deps.sh
cargo build --release --locked -p fairlane
ROUNDS=${ROUNDS:-3} SECS=${SECS:-10} CLIENTS=${CLIENTS:-16} D=${POOL_SIZE:-8} SCALE=${SCALE:-10}
ALGORITHM=${ALGORITHM:-sfq} THREADS=${THREADS:-1} TRACE=${TRACE:-0}
BIN=$(ls -d /usr/lib/postgresql/*/bin | sort -V | tail -1)
W=$(mktemp -d /tmp/fairlane-bench-pg.XXXXXX)
chown postgres "$W"
free_port() { python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])'; }
PGPORT=$(free_port) FLPORT=$(free_port) BOPORT=$(free_port)
PIDS=()
cleanup() {
    for p in "${PIDS[@]}"; do kill "$p" 2>/dev/null || true; done
    [ -f "$W/data/postmaster.pid" ] && kill -INT "$(head -1 "$W/data/postmaster.pid")" 2>/dev/null || true
    sleep 1
    rm -rf "$W"
}
trap cleanup EXIT
echo postgres-pw >"$W/pw" && chown postgres "$W/pw"
runuser -u postgres -- "$BIN/initdb" -N -A scram-sha-256 --pwfile "$W/pw" -U postgres -D "$W/data" >/dev/null
runuser -u postgres -- "$BIN/postgres" -D "$W/data" -p "$PGPORT" -k "$W" -c listen_addresses=127.0.0.1 \
    -c max_connections=100 -c shared_buffers=128MB -c synchronous_commit=off >"$W/pg.log" 2>&1 &
PIDS+=($!)
until "$BIN/pg_isready" -q -h 127.0.0.1 -p "$PGPORT"; do sleep 0.2; done
export PGPASSWORD=postgres-pw
psql -h 127.0.0.1 -p "$PGPORT" -U postgres -X -q -c "CREATE ROLE bench LOGIN PASSWORD 'bench-pw'" -c "CREATE DATABASE bench OWNER bench"
export PGPASSWORD=bench-pw
pgbench -h 127.0.0.1 -p "$PGPORT" -U bench -i -q -s "$SCALE" bench

cat >"$W/pg.toml" <<EOT
[listen]
addr = "127.0.0.1:$FLPORT"
admin = ""
threads = $THREADS
[server]
port = $PGPORT
[pool]
size = $D
mode = "transaction"
[scheduler]
algorithm = "$ALGORITHM"
[auth]
users = [{ user = "bench", password = "bench-pw" }]
EOT
./target/release/fairlane pg --config "$W/pg.toml" 2>"$W/fairlane.log" &
FLPID=$!
PIDS+=($FLPID)

echo '"bench" "bench-pw"' >"$W/userlist.txt"
cat >"$W/pgbouncer.ini" <<EOT
[databases]
bench = host=127.0.0.1 port=$PGPORT dbname=bench
[pgbouncer]
listen_addr = 127.0.0.1
listen_port = $BOPORT
unix_socket_dir =
auth_type = scram-sha-256
auth_file = $W/userlist.txt
pool_mode = transaction
default_pool_size = $D
max_client_conn = 1000
logfile = $W/pgbouncer.log
pidfile = $W/pgbouncer.pid
EOT
chown postgres "$W/userlist.txt" "$W/pgbouncer.ini"
runuser -u postgres -- pgbouncer "$W/pgbouncer.ini" >/dev/null 2>&1 &
PIDS+=($!)
sleep 1

BOPID=$(cat "$W/pgbouncer.pid")
declare -A PORT=([direct]=$PGPORT [pgbouncer]=$BOPORT [fairlane]=$FLPORT)
declare -A PID=([direct]="" [pgbouncer]=$BOPID [fairlane]=$FLPID)
# CPU ticks (utime, stime) of a process, and its voluntary and involuntary context switches
# summed over its threads; zeros for "direct".
ticks() { if [ -n "$1" ]; then awk '{print $14, $15}' "/proc/$1/stat"; else echo 0 0; fi; }
switches() {
    if [ -n "$1" ]; then
        cat /proc/"$1"/task/*/status | awk '/^voluntary_ctxt/ {v += $2} /^nonvoluntary_ctxt/ {n += $2} END {print v, n}'
    else echo 0 0; fi
}
HZ=$(getconf CLK_TCK)
RESULTS="$W/results.txt"
for round in $(seq 1 "$ROUNDS"); do
    # Alternate the order of the poolers from round to round.
    if [ $((round % 2)) = 1 ]; then order="direct pgbouncer fairlane"; else order="fairlane pgbouncer direct"; fi
    for mode in S N; do
        for target in $order; do
            prefix="$W/log.$target.$mode.$round"
            read -r u0 s0 < <(ticks "${PID[$target]}")
            read -r v0 n0 < <(switches "${PID[$target]}")
            out=$(cd "$W" && pgbench -n -M simple -h 127.0.0.1 -p "${PORT[$target]}" -U bench -c "$CLIENTS" -j 2 \
                -T "$SECS" "-$mode" -l --log-prefix="$prefix" bench 2>&1) || { echo "$out"; exit 1; }
            read -r u1 s1 < <(ticks "${PID[$target]}")
            read -r v1 n1 < <(switches "${PID[$target]}")
            tps=$(echo "$out" | sed -n 's/^tps = \([0-9.]*\).*/\1/p' | head -1)
            n=$(echo "$out" | sed -n 's/^number of transactions actually processed: \([0-9]*\).*/\1/p')
            # CPU µs, user-space CPU µs, voluntary and involuntary switches, per transaction.
            per=$(python3 -c "n = max($n, 1); print(f'{($u1 + $s1 - $u0 - $s0) / $HZ * 1e6 / n:.2f} {($u1 - $u0) / $HZ * 1e6 / n:.2f} {($v1 - $v0) / n:.3f} {($n1 - $n0) / n:.3f}')")
            p50=$(cat "$prefix".* | awk '{print $3}' | sort -n | awk '{a[NR]=$1} END {print a[int((NR+1)/2)]}')
            rm -f "$prefix".*
            echo "$target $mode $round $tps $p50 $per" | tee -a "$RESULTS"
        done
    done
done

python3 - "$RESULTS" "$D" "$CLIENTS" "$ALGORITHM" <<'EOT'
import statistics, sys
rows = [l.split() for l in open(sys.argv[1])]
med = lambda xs: statistics.median(xs)
print(f"\npool size {sys.argv[2]}, {sys.argv[3]} clients, fairlane pg scheduler {sys.argv[4]}; medians of the rounds")
print("| pgbench | target | TPS | p50 ms | added p50 ms | pooler CPU µs / transaction (user) | sleeps / transaction | preempted / transaction |")
print("|---|---|---|---|---|---|---|---|")
for mode in "SN":
    col = lambda i, t: med([float(r[i]) for r in rows if r[0] == t and r[1] == mode])
    tps = {t: col(3, t) for t in ("direct", "pgbouncer", "fairlane")}
    p50 = {t: col(4, t) / 1000 for t in tps}
    cpu, user, vol, inv = ({t: col(i, t) for t in tps} for i in (5, 6, 7, 8))
    for t in tps:
        c = f"{cpu[t]:.1f} ({user[t]:.1f}) | {vol[t]:.2f} | {inv[t]:.2f}" if t != "direct" else " | |"
        print(f"| -{mode} | {t} | {tps[t]:.0f} | {p50[t]:.3f} | {p50[t] - p50['direct']:+.3f} | {c} |")
    print(f"| -{mode} | fairlane / pgbouncer | {tps['fairlane'] / tps['pgbouncer']:.2f}× | | added p50 {p50['fairlane'] - p50['direct']:+.3f} vs {p50['pgbouncer'] - p50['direct']:+.3f} ms | {cpu['fairlane'] / cpu['pgbouncer']:.2f}× | | |")
    per = [float(f[3]) / float(p[3]) for f in rows for p in rows if f[0] == "fairlane" and p[0] == "pgbouncer" and f[1] == p[1] == mode and f[2] == p[2]]
    print(f"| -{mode} | TPS ratio by round | {', '.join(f'{x:.2f}' for x in per)} | | | | | |")
EOT

[ "$TRACE" = 1 ] || exit 0
command -v perf >/dev/null 2>&1 || { echo "TRACE=1: no perf (Debian package linux-perf); no hand-over trace"; exit 0; }
echo
echo "| pooler | server connection idle after an answer, a query waiting: n, p25 / p50 / mean µs | none waiting | all |"
echo "|---|---|---|---|"
for target in pgbouncer fairlane; do
    pgbench -n -M simple -h 127.0.0.1 -p "${PORT[$target]}" -U bench -c "$CLIENTS" -j 2 -T 5 -S bench >/dev/null 2>&1 &
    BENCH=$!
    sleep 1.5
    fds=$(ss -tnpH state established "( dport = :$PGPORT )" | grep "pid=${PID[$target]}," | sed -n 's/.*fd=\([0-9]*\).*/\1/p' | paste -sd,)
    perf record -q -o "$W/trace.data" -e syscalls:sys_enter_recvfrom,syscalls:sys_exit_recvfrom,syscalls:sys_enter_sendto \
        -p "${PID[$target]}" -- sleep 2 >/dev/null 2>&1
    wait "$BENCH"
    perf script -F time,event,trace -i "$W/trace.data" 2>/dev/null | python3 -c '
import sys, statistics
serv = set(int(x) for x in sys.argv[2].split(","))
cur, waiting, pend, gaps = None, 0, {}, {True: [], False: []}
for line in sys.stdin:
    p = line.split(); t = float(p[0].rstrip(":")); ev = p[1]
    if "sys_enter_recvfrom" in ev: cur = int(p[3].rstrip(","), 16)
    elif "sys_exit_recvfrom" in ev:
        if cur is not None and 0 < int(p[2], 16) < 2**63:
            if cur in serv: pend[cur] = (t, waiting)
            else: waiting += 1
        cur = None
    elif "sys_enter_sendto" in ev:
        fd = int(p[3].rstrip(","), 16)
        if fd in serv:
            waiting -= 1
            if fd in pend:
                t0, w = pend.pop(fd); gaps[w > 0].append((t - t0) * 1e6)
def f(xs):
    if not xs: return "none"
    xs = sorted(xs); return f"{len(xs)}, {xs[len(xs) // 4]:.0f} / {xs[len(xs) // 2]:.0f} / {statistics.mean(xs):.0f}"
print(f"| {sys.argv[1]} | {f(gaps[True])} | {f(gaps[False])} | {f(gaps[True] + gaps[False])} |")
' "$target" "$fds"
done
