#!/usr/bin/env bash
# `fairlane pg` beside PgBouncer (Debian's `pgbouncer`), both in transaction mode with the
# same pool size, in front of one PostgreSQL: `pgbench -S` (select only) and `pgbench -N`
# (simple update) through each and directly, alternating, ROUNDS times, in one run.
#
# The order within a round: for each mode, a CHECKPOINT, then direct pgbench, then the
# poolers, whose order rotates from round to round, so that each pooler runs second and
# last equally often, after the same runs. A run just after an `-N` run pays for that run's
# writes (the checkpointer, background writer and autovacuum take the CPU it needs), so
# no pooler may run there more often than the other: in docs/benchmarks.md's sitting 18, a
# pooler's `-S` run in that place used 5–15 % more PostgreSQL CPU a transaction and ran
# 4–10 % slower.
#
# Per run it records the TPS, the p50 latency (from pgbench's per-transaction log, sampled
# at LOG_RATE so that the logging itself costs pgbench little), and the CPU time per
# transaction (utime + stime from /proc, over the pgbench run) of the pooler (its
# user-space part beside it), of PostgreSQL (every backend, the exited ones included) and
# of pgbench, with the pooler's context switches (voluntary: its event loop found nothing
# to do and slept in epoll_wait; involuntary: preempted).
#
# The summary gives the medians by target, and, pairing fairlane pg's run with PgBouncer's
# of the same round: TPS over PgBouncer's by round, their median, and in how many rounds
# fairlane pg was at least as fast, and their geometric mean with a 95 % bootstrap interval
# (where the interval holds 1, the run cannot tell the two apart); the p50 difference by
# round and its median. On a 2-core machine the rounds scatter by several percent (the
# machine's CPU is what sets the TPS, and pgbench, the backends and the pooler share it):
# read the paired ratios, not one round.
#
# Each pooler runs in its own session, as a daemon would (`pgbouncer -d`, a systemd
# service): with the kernel's autogroup scheduling on (`/proc/sys/kernel/sched_autogroup_enabled`),
# a session is one scheduling group, and a pooler left in this script's session would
# share one group's CPU with pgbench's threads while every PostgreSQL backend (which calls
# setsid) has a group of its own.
#
#   ROUNDS=6 SECS=8 CLIENTS=16 POOL_SIZE=8 SCALE=10 ALGORITHM=sfq THREADS=1 LOG_RATE=0.1 \
#     ./scripts/bench-pg.sh
#
# fairlane pg is built with the `dist` profile (Cargo.toml: the release profile with fat LTO
# and one codegen unit; the first build takes about 6 minutes on 2 cores). PGO=1 builds and
# runs the profile-guided build instead (scripts/build-pgo.sh: the `dist` profile trained
# on fairlane pg under pgbench's TPC-B-like script, not the scripts measured here; about 13
# minutes more), as docs/pg.md's deployment builds it. FAIRLANE=<path> (absolute, or from
# the repository's root) runs another binary instead, without a build.
#
# NO_BUILD=1 skips the cargo build; TRACE=1 adds the hand-over trace (below, at the end);
# COUNT=1 counts each pooler's instructions per transaction instead (below, "COUNT=1"; with
# CACHE=1 its L1 instruction-cache misses too).
# BEFORE=<path of another `fairlane` binary> adds it as a fourth target, "before", with the
# same config (a before/after comparison in the same run; its ratios are paired too).
#
# THREADS is fairlane pg's `listen.threads` (1: one event loop, as PgBouncer).
#
# About 6 minutes with the defaults (2 modes × 3 targets × 6 rounds × 8 s, plus set-up).
# Runs as root: PostgreSQL and PgBouncer run as the `postgres` user.
set -euo pipefail
cd "$(dirname "$0")/.."
FAIRLANE_BENCH_DEPS=1 ./scripts/test-deps.sh
. scripts/pg-scratch.sh
if [ -n "${PGO:-}" ]; then
    BUILD=./scripts/build-pgo.sh DEFAULT=target/pgo/dist/fairlane
else
    BUILD="cargo build --profile dist --locked -p fairlane" DEFAULT=target/dist/fairlane
fi
[ -n "${NO_BUILD:-}" ] || [ -n "${FAIRLANE:-}" ] || $BUILD
FAIRLANE=${FAIRLANE:-$DEFAULT}
[ -x "$FAIRLANE" ] || { echo "bench-pg.sh: no fairlane binary at $FAIRLANE (build it: $BUILD)" >&2; exit 1; }
FAIRLANE=$(realpath "$FAIRLANE")
ROUNDS=${ROUNDS:-6} SECS=${SECS:-8} CLIENTS=${CLIENTS:-16} D=${POOL_SIZE:-8} SCALE=${SCALE:-10}
ALGORITHM=${ALGORITHM:-sfq} THREADS=${THREADS:-1} LOG_RATE=${LOG_RATE:-0.1}
scratch_dir fairlane-bench-pg
PGPORT=$(free_port) FLPORT=$(free_port) BOPORT=$(free_port)
scratch_pg "$W" "$PGPORT" "$SCALE"

bench_config "$W/pg.toml" "$FLPORT" "$PGPORT" "$THREADS" "$D" transaction "$ALGORITHM"
setsid "$FAIRLANE" pg --config "$W/pg.toml" 2>"$W/fairlane.log" &
FLPID=$!
PIDS+=($FLPID)
POOLERS="pgbouncer fairlane"
if [ -n "${BEFORE:-}" ]; then
    BFPORT=$(free_port)
    sed "s/127.0.0.1:$FLPORT/127.0.0.1:$BFPORT/" "$W/pg.toml" >"$W/before.toml"
    setsid "$BEFORE" pg --config "$W/before.toml" 2>"$W/before.log" &
    BFPID=$!
    PIDS+=($BFPID)
    POOLERS="$POOLERS before"
fi

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
setsid runuser -u postgres -- pgbouncer "$W/pgbouncer.ini" >/dev/null 2>&1 &
PIDS+=($!)
sleep 1

BOPID=$(cat "$W/pgbouncer.pid")
PMPID=$(head -1 "$W/data/postmaster.pid")

# COUNT=1: instead of the timed rounds, the user-space instructions each pooler executes per
# transaction, counted by callgrind (Debian's `valgrind`): deterministic to about ±2 % (how
# wake-ups batch varies), where TPS on a 2-core machine scatters by 5 % and more from run to
# run. Each pooler runs under callgrind twice, on a port of its own, with the same logins
# and warm-up (200 transactions a client), then one more pgbench run of 200 transactions a
# client in the first and COUNT_LONG (5,200 for -S, 1,200 for -N) in the second. The
# difference of the two totals over the difference in transactions is the count per
# transaction: start-up, logins and warm-up cancel. CACHE=1 adds callgrind's simulation of
# this machine's L1 caches (slower): the instruction-cache misses per transaction too, a
# measure of the code a transaction runs through that does not stay in L1i.
counted() { # target, mode, transactions a client in the last run → the run's totals (Ir I1mr)
    local port out pid
    port=$(free_port)
    out="$W/callgrind.$1.$2.$3"
    case $1 in
        pgbouncer)
            sed -e "s/^listen_port = .*/listen_port = $port/" -e "s#^pidfile = .*#pidfile = $W/count.pid#" \
                -e "s#^logfile = .*#logfile = $W/count.log#" "$W/pgbouncer.ini" >"$W/count.ini"
            chown postgres "$W/count.ini"
            rm -f "$W/count.pid"
            runuser -u postgres -- valgrind -q --tool=callgrind ${CACHE:+--cache-sim=yes} --callgrind-out-file="$out" pgbouncer "$W/count.ini" 2>>"$W/count.err" &
            until [ -s "$W/count.pid" ]; do sleep 0.2; done
            pid=$(cat "$W/count.pid") ;;
        *)
            # Under callgrind the 16 clients' SCRAM logins at once take longer than the
            # default 5 s that a server login may wait.
            sed -e "s/127.0.0.1:$FLPORT/127.0.0.1:$port/" -e 's/^\[server\]$/[server]\nconnect_timeout_ms = 60000/' \
                "$W/pg.toml" >"$W/count.toml"
            local bin=$FAIRLANE
            [ "$1" = before ] && bin=$BEFORE
            valgrind -q --tool=callgrind ${CACHE:+--cache-sim=yes} --callgrind-out-file="$out" "$bin" pg --config "$W/count.toml" 2>>"$W/count.err" &
            pid=$! ;;
    esac
    until pg_isready -q -h 127.0.0.1 -p "$port" 2>/dev/null; do sleep 0.3; done
    for t in 200 "$3"; do
        (cd "$W" && pgbench -n -M simple -h 127.0.0.1 -p "$port" -U bench -c "$CLIENTS" -j 2 -t "$t" "-$2" bench >"$W/out" 2>&1) \
            || { cat "$W/out" "$W/count.err" >&2; kill "$pid"; exit 1; }
    done
    kill -INT "$pid"
    for _ in $(seq 100); do kill -0 "$pid" 2>/dev/null || break; sleep 0.2; done
    awk '/^events:/ {for (i = 2; i <= NF; i++) if ($i == "I1mr") m = i}
         /^(summary|totals):/ {print $2, (m ? $m : 0); exit}' "$out"
}
if [ -n "${COUNT:-}" ]; then
    command -v valgrind >/dev/null || { echo "COUNT=1 needs valgrind (apt-get install valgrind)"; exit 1; }
    echo "| pgbench | pooler | user-space instructions / transaction |${CACHE:+ L1i misses / transaction |}"
    echo "|---|---|---|${CACHE:+---|}"
    for mode in S N; do
        long=${COUNT_LONG:-$([ $mode = S ] && echo 5200 || echo 1200)}
        for target in pgbouncer fairlane ${BEFORE:+before}; do
            short=$(counted "$target" "$mode" 200)
            full=$(counted "$target" "$mode" "$long")
            read -r a am <<<"$short"
            read -r b bm <<<"$full"
            n=$((CLIENTS * (long - 200)))
            echo "| -$mode | $target | $(python3 -c "print(round(($b - $a) / $n))") |${CACHE:+ $(python3 -c "print(round(($bm - $am) / $n, 1))") |}"
        done
    done
    exit 0
fi
declare -A PORT=([direct]=$PGPORT [pgbouncer]=$BOPORT [fairlane]=$FLPORT [before]=${BFPORT:-})
declare -A PID=([direct]="" [pgbouncer]=$BOPID [fairlane]=$FLPID [before]=${BFPID:-})
# CPU ticks (utime, stime) of a process, and its voluntary and involuntary context switches
# summed over its threads; zeros for "direct".
ticks() { if [ -n "$1" ]; then awk '{print $14, $15}' "/proc/$1/stat"; else echo 0 0; fi; }
switches() {
    if [ -n "$1" ]; then
        cat /proc/"$1"/task/*/status | awk '/^voluntary_ctxt/ {v += $2} /^nonvoluntary_ctxt/ {n += $2} END {print v, n}'
    else echo 0 0; fi
}
# PostgreSQL's CPU ticks so far: its live processes' own, and the postmaster's reaped
# children's (a backend that exited, as direct pgbench's do at the end of each run).
pg_ticks() {
    { awk '{print $16 + $17}' "/proc/$PMPID/stat"
      for p in "$PMPID" $(pgrep -P "$PMPID"); do awk '{print $14 + $15}' "/proc/$p/stat" 2>/dev/null || true; done
    } | awk '{t += $1} END {print t}'
}
# Wait (up to 5 s) until PostgreSQL has no more processes than before a run: direct
# pgbench's backends exit after it, and are counted once reaped.
settle() {
    for _ in $(seq 50); do [ "$(pgrep -c -P "$PMPID")" -le "$1" ] && return; sleep 0.1; done
}
HZ=$(getconf CLK_TCK)
RESULTS="$W/results.txt"
TIMEFORMAT='%U %S'
for round in $(seq 1 "$ROUNDS"); do
    # Each mode's block starts from a checkpoint, with direct pgbench, and then the poolers,
    # rotated from round to round so that each runs in each place as often (see the top).
    read -ra ring <<<"$POOLERS"
    k=$(((round - 1) % ${#ring[@]}))
    order="direct ${ring[*]:k} ${ring[*]:0:k}"
    for mode in S N; do
        scratch_super "$PGPORT" -c CHECKPOINT bench
        for target in $order; do
            prefix="$W/log.$target.$mode.$round"
            read -r u0 s0 < <(ticks "${PID[$target]}")
            read -r v0 n0 < <(switches "${PID[$target]}")
            c0=$(pgrep -c -P "$PMPID")
            g0=$(pg_ticks)
            { time (cd "$W" && pgbench -n -M simple -h 127.0.0.1 -p "${PORT[$target]}" -U bench -c "$CLIENTS" -j 2 \
                -T "$SECS" "-$mode" -l --sampling-rate="$LOG_RATE" --log-prefix="$prefix" bench >"$W/out" 2>&1) ; } 2>"$W/time" \
                || { cat "$W/out"; exit 1; }
            read -r u1 s1 < <(ticks "${PID[$target]}")
            read -r v1 n1 < <(switches "${PID[$target]}")
            settle "$c0"
            g1=$(pg_ticks)
            read -r bu bs <"$W/time"
            tps=$(sed -n 's/^tps = \([0-9.]*\).*/\1/p' "$W/out" | head -1)
            n=$(sed -n 's/^number of transactions actually processed: \([0-9]*\).*/\1/p' "$W/out")
            # Per transaction: the pooler's CPU µs, its user-space part, its voluntary and
            # involuntary switches; PostgreSQL's and pgbench's CPU µs.
            per=$(python3 -c "n = max($n, 1); t = 1e6 / $HZ / n; print(f'{($u1 + $s1 - $u0 - $s0) * t:.2f} {($u1 - $u0) * t:.2f} {($v1 - $v0) / n:.3f} {($n1 - $n0) / n:.3f} {($g1 - $g0) * t:.2f} {($bu + $bs) * 1e6 / n:.2f}')")
            p50=$(cat "$prefix".* | awk '{print $3}' | sort -n | awk '{a[NR]=$1} END {print a[int((NR+1)/2)]}')
            rm -f "$prefix".*
            echo "$target $mode $round $tps $p50 $per" | tee -a "$RESULTS"
        done
    done
done

python3 - "$RESULTS" "$D" "$CLIENTS" "$ALGORITHM" <<'EOT'
import random, statistics, sys
rows = [l.split() for l in open(sys.argv[1])]
med = statistics.median
def interval(xs):
    """A 95 % bootstrap interval of the geometric mean of `xs` (seeded: the same rounds give
    the same interval). Where it holds 1, the run cannot tell the two apart."""
    rng = random.Random(1)
    ms = sorted(statistics.geometric_mean(rng.choices(xs, k=len(xs))) for _ in range(2000))
    return ms[50], ms[1949]
print(f"\npool size {sys.argv[2]}, {sys.argv[3]} clients, fairlane pg scheduler {sys.argv[4]}; medians of the rounds")
print("| pgbench | target | TPS | p50 ms | added p50 ms | pooler CPU µs / transaction (user) | sleeps / transaction | preempted / transaction | PostgreSQL CPU µs / transaction | pgbench CPU µs / transaction |")
print("|---|---|---|---|---|---|---|---|---|---|")
for mode in "SN":
    col = lambda i, t: med([float(r[i]) for r in rows if r[0] == t and r[1] == mode])
    tps = {t: col(3, t) for t in ("direct", "pgbouncer", "fairlane", "before") if any(r[0] == t for r in rows)}
    p50 = {t: col(4, t) / 1000 for t in tps}
    cpu, user, vol, inv, pg, bench = ({t: col(i, t) for t in tps} for i in (5, 6, 7, 8, 9, 10))
    for t in tps:
        c = f"{cpu[t]:.1f} ({user[t]:.1f}) | {vol[t]:.2f} | {inv[t]:.2f}" if t != "direct" else " | |"
        print(f"| -{mode} | {t} | {tps[t]:.0f} | {p50[t]:.3f} | {p50[t] - p50['direct']:+.3f} | {c} | {pg[t]:.1f} | {bench[t]:.1f} |")
    print(f"| -{mode} | fairlane / pgbouncer | {tps['fairlane'] / tps['pgbouncer']:.2f}× | | added p50 {p50['fairlane'] - p50['direct']:+.3f} vs {p50['pgbouncer'] - p50['direct']:+.3f} ms | {cpu['fairlane'] / cpu['pgbouncer']:.2f}× | | | | |")
    for peer in (p for p in ("pgbouncer", "before") if p in tps):
        pairs = [(f, p) for f in rows for p in rows
                 if f[0] == "fairlane" and p[0] == peer and f[1] == p[1] == mode and f[2] == p[2]]
        ratio = [float(f[3]) / float(p[3]) for f, p in pairs]
        dp50 = [(float(f[4]) - float(p[4])) / 1000 for f, p in pairs]
        lo, hi = interval(ratio)
        print(f"| -{mode} | TPS ratio over {peer} by round | {', '.join(f'{x:.3f}' for x in ratio)} | median {med(ratio):.3f}×, ≥ 1 in {sum(x >= 1 for x in ratio)} of {len(ratio)}; geometric mean {statistics.geometric_mean(ratio):.3f}× (95 % interval {lo:.3f}–{hi:.3f}) | | | | | | |")
        print(f"| -{mode} | p50 − {peer}'s by round (ms) | {', '.join(f'{x:+.3f}' for x in dp50)} | median {med(dp50):+.3f}, ≤ 0 in {sum(x <= 0 for x in dp50)} of {len(dp50)} | | | | | | |")
EOT

# TRACE=1: the hand-over, traced. For each pooler, during a `pgbench -S` run, one second of its
# socket system calls (`perf record` on the syscall tracepoints; Debian's `linux-perf`): how
# long a server connection sits idle between the pooler reading a transaction's last answer
# and sending the next query on it, and the same when a query was already waiting (read from
# a client, not yet sent) at that answer. PgBouncer sends the first waiting client's query in
# the same callback that released the connection.
[ -n "${TRACE:-}" ] || exit 0
command -v perf >/dev/null || { echo "TRACE=1 needs perf (apt-get install linux-perf)"; exit 1; }
for target in pgbouncer fairlane; do
    pid=${PID[$target]}
    (cd "$W" && pgbench -n -M simple -h 127.0.0.1 -p "${PORT[$target]}" -U bench -c "$CLIENTS" -j 2 -T 4 -S bench >/dev/null 2>&1) &
    load=$!
    sleep 1.5
    # The pooler's server connections: its sockets whose peer is PostgreSQL's port.
    fds=$(ss -tnpH "( dport = :$PGPORT )" | grep "pid=$pid," | sed -E 's/.*fd=([0-9]+).*/\1/' | paste -sd,)
    perf record -q -p "$pid" -e syscalls:sys_enter_recvfrom,syscalls:sys_exit_recvfrom,syscalls:sys_enter_sendto \
        -o "$W/trace.data" -- sleep 1 >/dev/null 2>&1
    wait "$load"
    perf script -i "$W/trace.data" -F time,event,trace 2>/dev/null | python3 -c '
import statistics, sys
target, servers = sys.argv[1], {int(x) for x in sys.argv[2].split(",")}
fd, waiting, answered, gaps = None, 0, {}, {True: [], False: []}
for line in sys.stdin:
    f = line.split()
    t, event = float(f[0].rstrip(":")), f[1]
    if "enter_recvfrom" in event:
        fd = int(f[3].rstrip(","), 16)
    elif "exit_recvfrom" in event:
        n = int(f[2], 16)
        if fd is not None and 0 < n < 2**63:
            if fd in servers:
                answered[fd] = (t, waiting > 0)
            else:
                waiting += 1
        fd = None
    elif "enter_sendto" in event:
        out = int(f[3].rstrip(","), 16)
        if out in servers:
            waiting = max(waiting - 1, 0)
            if out in answered:
                t0, w = answered.pop(out)
                gaps[w].append((t - t0) * 1e6)
q = lambda xs, k: sorted(xs)[int(len(xs) * k)] if xs else 0
for name, xs in (("all", gaps[True] + gaps[False]), ("a query waiting", gaps[True])):
    print(f"{target:9} server idle after an answer, {name:15}: n {len(xs):6}  p25 {q(xs, .25):5.0f}  p50 {q(xs, .5):5.0f}  mean {statistics.mean(xs) if xs else 0:5.0f} µs")
' "$target" "$fds"
done
