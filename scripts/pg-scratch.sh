# Sourced by scripts/bench-pg.sh and scripts/build-pgo.sh: a throwaway PostgreSQL for pgbench.
#
# scratch_dir NAME: sets W, a new directory /tmp/NAME.<random suffix> (mktemp), and PIDS, an array for the pids of
# the processes the caller starts. On exit those are killed, the PostgreSQL in W is stopped
# and W is removed.
# scratch_pg DIR PORT SCALE: initdb into DIR/data as the `postgres` user (scram-sha-256),
# start it on 127.0.0.1:PORT (its pid appended to PIDS), create the role and database
# `bench` (password `bench-pw`) and initialize pgbench's tables at SCALE. Leaves
# PGPASSWORD=bench-pw exported.
# scratch_super PORT PSQL-ARGS...: psql as that PostgreSQL's superuser.
# bench_config FILE LISTEN_PORT PG_PORT THREADS POOL_SIZE MODE ALGORITHM: write a fairlane pg
# config for that PostgreSQL's `bench` role (no admin listener).

scratch_dir() {
    W=$(mktemp -d "/tmp/$1.XXXXXX") # mktemp replaces the X's with a random suffix
    PIDS=()
    trap scratch_cleanup EXIT
}

scratch_super() {
    PGPASSWORD=postgres-pw psql -h 127.0.0.1 -p "$1" -U postgres -X -q "${@:2}"
}

scratch_cleanup() {
    for p in "${PIDS[@]}"; do kill "$p" 2>/dev/null || true; done
    [ -f "$W/data/postmaster.pid" ] && kill -INT "$(head -1 "$W/data/postmaster.pid")" 2>/dev/null || true
    sleep 1
    rm -rf "$W"
}

scratch_pg() {
    local w=$1 port=$2 scale=$3 bin
    bin=$(ls -d /usr/lib/postgresql/*/bin | sort -V | tail -1)
    chown postgres "$w"
    echo postgres-pw >"$w/pw" && chown postgres "$w/pw"
    runuser -u postgres -- "$bin/initdb" -N -A scram-sha-256 --pwfile "$w/pw" -U postgres -D "$w/data" >/dev/null
    setsid runuser -u postgres -- "$bin/postgres" -D "$w/data" -p "$port" -k "$w" -c listen_addresses=127.0.0.1 \
        -c max_connections=100 -c shared_buffers=128MB -c synchronous_commit=off >"$w/pg.log" 2>&1 &
    PIDS+=($!)
    until "$bin/pg_isready" -q -h 127.0.0.1 -p "$port"; do sleep 0.2; done
    scratch_super "$port" \
        -c "CREATE ROLE bench LOGIN PASSWORD 'bench-pw'" -c "CREATE DATABASE bench OWNER bench"
    export PGPASSWORD=bench-pw
    pgbench -h 127.0.0.1 -p "$port" -U bench -i -q -s "$scale" bench
}

bench_config() {
    cat >"$1" <<EOT
[listen]
addr = "127.0.0.1:$2"
admin = ""
threads = $4
[server]
port = $3
[pool]
size = $5
mode = "$6"
[scheduler]
algorithm = "$7"
[auth]
users = [{ user = "bench", password = "bench-pw" }]
EOT
}

free_port() { python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])'; }
