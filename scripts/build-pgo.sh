#!/usr/bin/env bash
# A profile-guided build of `fairlane` for deployment: the `dist` profile (Cargo.toml: the
# release profile with fat LTO and one codegen unit), optimized by LLVM with a profile of
# fairlane pg at work. Writes target/pgo/dist/fairlane.
#
#   ./scripts/build-pgo.sh
#
# 1. llvm-profdata of rustc's own LLVM (rustup's `llvm-tools` component, added if missing;
#    another LLVM's cannot read the profiles).
# 2. An instrumented build (`-Cprofile-generate`) into target/pgo-generate.
# 3. Training, against a throwaway PostgreSQL (initdb into a temp dir as the `postgres` user,
#    on a loopback port; `pgbench -i -s 10`): the instrumented fairlane pg in front of it,
#    pool 8, 16 clients, under pgbench's built-in TPC-B-like script (five statements a
#    transaction; not the `-S` and `-N` scripts that scripts/bench-pg.sh measures with),
#    simple protocol 20 s and extended 8 s with `sfq` in transaction mode, then 5 s with `ldf`
#    and 5 s in session mode. Each run's profile is written when fairlane pg exits on SIGINT.
# 4. The build with the merged profile (`-Cprofile-use`) into target/pgo.
#
# About 13 minutes on 2 cores (two full builds of the dependencies). Runs as root:
# PostgreSQL runs as the `postgres` user. Needs PostgreSQL's server and pgbench (Debian's
# `postgresql`; scripts/test-deps.sh installs it).
set -euo pipefail
cd "$(dirname "$0")/.."
. scripts/pg-scratch.sh
HOST=$(rustc -vV | sed -n 's/^host: //p')
PROFDATA="$(rustc --print sysroot)/lib/rustlib/$HOST/bin/llvm-profdata"
if [ ! -x "$PROFDATA" ]; then
    rustup component add llvm-tools >&2 || true
    [ -x "$PROFDATA" ] || { echo "build-pgo.sh: no llvm-profdata at $PROFDATA (rustup component add llvm-tools)" >&2; exit 1; }
fi
ls /usr/lib/postgresql/*/bin/pgbench >/dev/null 2>&1 \
    || { echo "build-pgo.sh: needs PostgreSQL and pgbench (./scripts/test-deps.sh installs them)" >&2; exit 1; }

scratch_dir fairlane-pgo

echo "build-pgo.sh: 1/3 the instrumented build (target/pgo-generate)" >&2
RUSTFLAGS="-Cprofile-generate=$W/build-profiles" CARGO_TARGET_DIR=target/pgo-generate \
    cargo build --profile dist --locked -p fairlane

echo "build-pgo.sh: 2/3 training under pgbench's TPC-B-like script" >&2
PGPORT=$(free_port) FLPORT=$(free_port)
scratch_pg "$W" "$PGPORT" 10
mkdir "$W/train"
train() { # algorithm, mode, then pgbench's -M and -T, in pairs
    local alg=$1 mode=$2 pid
    shift 2
    bench_config "$W/train.toml" "$FLPORT" "$PGPORT" 1 8 "$mode" "$alg"
    LLVM_PROFILE_FILE="$W/train/fairlane-%p.profraw" target/pgo-generate/dist/fairlane pg --config "$W/train.toml" 2>"$W/train.log" &
    pid=$!
    PIDS+=($pid)
    until pg_isready -q -h 127.0.0.1 -p "$FLPORT" 2>/dev/null; do sleep 0.3; done
    while [ $# -gt 0 ]; do
        pgbench -n -M "$1" -h 127.0.0.1 -p "$FLPORT" -U bench -c 16 -j 2 -T "$2" bench >"$W/out" 2>&1 \
            || { cat "$W/out" "$W/train.log" >&2; kill "$pid"; exit 1; }
        echo "  $alg, $mode mode, -M $1: $(sed -n 's/^tps = \([0-9.]*\).*/\1/p' "$W/out") TPS" >&2
        shift 2
    done
    kill -INT "$pid"
    wait "$pid" || { cat "$W/train.log" >&2; exit 1; }
}
train sfq transaction simple 20 extended 8
train ldf transaction simple 5
train sfq session simple 5
"$PROFDATA" merge -o "$W/fairlane.profdata" "$W"/train/*.profraw

echo "build-pgo.sh: 3/3 the build with the profile (target/pgo)" >&2
# The profile's path is new each time, so cargo rebuilds whatever the profile changed.
RUSTFLAGS="-Cprofile-use=$W/fairlane.profdata" CARGO_TARGET_DIR=target/pgo \
    cargo build --profile dist --locked -p fairlane
cp "$W/fairlane.profdata" target/pgo/fairlane.profdata
echo "build-pgo.sh: built target/pgo/dist/fairlane" >&2
