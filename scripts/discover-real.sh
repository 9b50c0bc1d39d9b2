#!/usr/bin/env bash
# Runs `fairlane tam discover` on real servers and writes the committed models:
#   postgres  PostgreSQL (Debian package) in a temporary data directory, as user postgres,
#             on a free loopback port, driven by pgbench  -> models/postgresql-discovered.toml
#             (+ docs/img/postgresql-discovered.svg)
#   redis     redis-server with 3 io-threads, driven by redis-benchmark
#                                                       -> models/redis-discovered.toml
#   overhead  pgbench throughput with and without sampling (default interval), alternating
# Usage: scripts/discover-real.sh postgres|redis|overhead   (as root; FAIRLANE=path/to/fairlane)
# Everything started here is stopped here; temporary directories are removed.
set -euo pipefail
cd "$(dirname "$0")/.."
FAIRLANE=${FAIRLANE:-target/release/fairlane}
free_port() { python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])'; }

pg_start() { # sets PORT DIR PM BIN RUNUSER_PID
    BIN=$(ls -d /usr/lib/postgresql/*/bin | sort -V | tail -1)
    PORT=$(free_port)
    DIR=$(mktemp -d /tmp/fairlane-pg.XXXXXX)
    chown postgres:postgres "$DIR"
    runuser -u postgres -- "$BIN/initdb" -N -A trust -U postgres -D "$DIR/data" >/dev/null
    runuser -u postgres -- "$BIN/postgres" -D "$DIR/data" -p "$PORT" -k "$DIR" \
        -c listen_addresses=127.0.0.1 -c synchronous_commit=off -c autovacuum_naptime=1 \
        -c wal_writer_delay=10ms -c bgwriter_delay=10ms -c shared_buffers=32MB \
        -c autovacuum_vacuum_scale_factor=0.01 -c autovacuum_vacuum_cost_delay=10ms >"$DIR/log" 2>&1 &
    RUNUSER_PID=$!
    for _ in $(seq 600); do pg_isready -q -h 127.0.0.1 -p "$PORT" && break; sleep 0.1; done
    pg_isready -q -h 127.0.0.1 -p "$PORT" || { echo "PostgreSQL did not start; log:"; cat "$DIR/log"; exit 1; }
    PM=$(head -1 "$DIR/data/postmaster.pid")
    PG=(-h 127.0.0.1 -p "$PORT" -U postgres)
    pgbench "${PG[@]}" -i -q -s 10 postgres >/dev/null 2>&1
}
pg_stop() {
    kill -INT "$PM" 2>/dev/null || true
    wait "$RUNUSER_PID" 2>/dev/null || true
    rm -rf "$DIR"
}

case "${1:-}" in
postgres)
    pg_start
    trap pg_stop EXIT
    # Load: 2, 8, 4, 8, 2 clients for 5 s each, then 4 until told to stop; a checkpoint at 8 s.
    ( for c in 2 8 4 8 2; do pgbench "${PG[@]}" -n -c $c -T 5 postgres >/dev/null 2>&1; done
      while [ ! -e "$DIR/stop" ]; do pgbench "${PG[@]}" -n -c 4 -T 3 postgres >/dev/null 2>&1; done ) &
    LOAD=$!
    ( sleep 8; psql "${PG[@]}" -q -c CHECKPOINT postgres ) &
    CKPT=$!
    "$FAIRLANE" tam discover --pid "$PM" --duration 25 --annotate models/annotations/postgresql.toml \
        -o models/postgresql-discovered.toml
    touch "$DIR/stop"; wait "$LOAD" "$CKPT"
    "$FAIRLANE" tam check models/postgresql-discovered.toml || true
    mkdir -p docs/img
    "$FAIRLANE" tam draw models/postgresql-discovered.toml -o docs/img/postgresql-discovered.svg --highlight
    ;;
redis)
    PORT=$(free_port)
    DIR=$(mktemp -d /tmp/fairlane-redis.XXXXXX)
    redis-server --port "$PORT" --bind 127.0.0.1 --io-threads 3 --io-threads-do-reads yes \
        --save "" --appendonly yes --dir "$DIR" >"$DIR/log" 2>&1 &
    SERVER=$!
    trap 'kill $SERVER 2>/dev/null; wait $SERVER 2>/dev/null; rm -rf "$DIR"' EXIT
    for _ in $(seq 300); do redis-cli -p "$PORT" ping >/dev/null 2>&1 && break; sleep 0.1; done
    ( for c in 20 60 40; do timeout 5 redis-benchmark -p "$PORT" -c $c -n 100000000 -d 256 -t set,get -q >/dev/null 2>&1 || true; done
      while [ ! -e "$DIR/stop" ]; do timeout 3 redis-benchmark -p "$PORT" -c 40 -n 100000000 -d 256 -t set,get -q >/dev/null 2>&1 || true; done ) &
    LOAD=$!
    "$FAIRLANE" tam discover --pid "$SERVER" --duration 15 -o models/redis-discovered.toml
    touch "$DIR/stop"; wait "$LOAD"
    "$FAIRLANE" tam check models/redis-discovered.toml || true
    ;;
overhead)
    pg_start
    trap pg_stop EXIT
    ROUNDS=${ROUNDS:-5}; SECS=${SECS:-15}
    # LOAD=tpcb (default): pgbench's TPC-B-like transactions, 4 clients.
    # LOAD=select: select-only with prepared statements, 2 clients, 2 threads. It is CPU-bound
    # and steadier between runs, and it is the load the sampler's CPU cost hurts most.
    case "${LOAD:-tpcb}" in
    tpcb) BENCH=(-c 4) ;;
    select) BENCH=(-S -M prepared -c 2 -j 2) ;;
    *) echo "LOAD must be tpcb or select" >&2; exit 2 ;;
    esac
    tps() { pgbench "${PG[@]}" -n "${BENCH[@]}" -T "$SECS" postgres 2>/dev/null | sed -n 's/^tps = \([0-9.]*\).*/\1/p'; }
    with() {
        "$FAIRLANE" tam discover --pid "$PM" --duration "$SECS" --no-blocking -o "$DIR/m.toml" >/dev/null 2>&1 &
        local d=$!
        tps
        wait "$d" || true
    }
    tps >/dev/null # warm up
    echo "round tps_without tps_with"
    for r in $(seq "$ROUNDS"); do # alternate which goes first
        if [ $((r % 2)) = 1 ]; then a=$(tps); b=$(with); else b=$(with); a=$(tps); fi
        echo "$r $a $b" | tee -a "$DIR/rounds"
    done
    # Each round is a pair taken back to back, so the ratio cancels the slow drift of the
    # machine; the summary is the mean of the per-round log ratios with a 95 % interval.
    python3 - "$DIR/rounds" <<'PY'
import math, statistics, sys
rows = [l.split() for l in open(sys.argv[1]) if len(l.split()) == 3]
r = [math.log(float(b) / float(a)) for _, a, b in rows if float(a) > 0 and float(b) > 0]
if len(r) < 2:
    sys.exit("fewer than two complete rounds")
m, se = statistics.mean(r), statistics.stdev(r) / math.sqrt(len(r))
df, z = len(r) - 1, 1.959964  # Student t quantile (table, then the Cornish-Fisher expansion: within 0.5 % for df >= 5)
t = {1: 12.706, 2: 4.303, 3: 3.182, 4: 2.776}.get(df, z + (z**3 + z) / (4 * df) + (5 * z**5 + 16 * z**3 + 3 * z) / (96 * df**2))
lo, hi = math.exp(m - t * se), math.exp(m + t * se)
print(f"rounds {len(r)}  with/without: mean {math.exp(m):.4f}  95% CI [{lo:.4f}, {hi:.4f}]  "
      f"median {math.exp(statistics.median(r)):.4f}  throughput cost {100 * (1 - math.exp(m)):.2f}% "
      f"(at most {100 * (1 - lo):.2f}% at 95%)")
PY
    ;;
*)
    echo "usage: $0 postgres|redis|overhead" >&2; exit 2 ;;
esac
