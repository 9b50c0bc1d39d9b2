#!/usr/bin/env bash
# Programs the fairlane-proxy tests use beyond Rust: headless Chromium (the dashboard test)
# and Python 3 (an unmodified upstream, `python3 -m http.server`). nginx is for the
# benchmarks only. Idempotent: installs only what is missing (Debian/Ubuntu, as root).
set -euo pipefail
missing=()
command -v chromium >/dev/null 2>&1 || missing+=(chromium)
command -v python3 >/dev/null 2>&1 || missing+=(python3)
# `tam discover` tests: PostgreSQL (+ pgbench) and Redis (+ redis-benchmark) to discover;
# the proxy's `[cluster]` tests (crates/proxy/tests/cluster.rs) run a real redis-server;
# iproute2's `ss` for socket byte counts, util-linux's taskset/chrt/runuser for probes.
# (util-linux also gives prlimit: the proxy idle-flood test runs the binary under it.)
[ -x /usr/lib/postgresql/15/bin/pgbench ] || ls /usr/lib/postgresql/*/bin/pgbench >/dev/null 2>&1 || missing+=(postgresql)
command -v redis-server >/dev/null 2>&1 || [ -x /usr/bin/redis-server ] || missing+=(redis-server)
command -v redis-benchmark >/dev/null 2>&1 || missing+=(redis-tools)
command -v ss >/dev/null 2>&1 || [ -x /usr/bin/ss ] || missing+=(iproute2)
for p in taskset chrt runuser prlimit; do command -v $p >/dev/null 2>&1 || [ -x /usr/sbin/$p ] || { missing+=(util-linux); break; }; done
# make: building jemalloc (tikv-jemalloc-sys, fairlane-proxy's allocator; issue 19).
command -v make >/dev/null 2>&1 || missing+=(make)
if [ "${FAIRLANE_BENCH_DEPS:-0}" = 1 ]; then
    command -v nginx >/dev/null 2>&1 || [ -x /usr/sbin/nginx ] || missing+=(nginx)
    # scripts/bench-pg.sh: fairlane pg beside PgBouncer.
    command -v pgbouncer >/dev/null 2>&1 || [ -x /usr/sbin/pgbouncer ] || missing+=(pgbouncer)
fi
if [ ${#missing[@]} -gt 0 ]; then
    echo "test-deps: installing ${missing[*]}" >&2
    SUDO=""
    [ "$(id -u)" = 0 ] || SUDO="sudo"
    $SUDO apt-get update -qq
    DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
fi
