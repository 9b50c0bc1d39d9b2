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
    # Its COUNT=1: instructions per transaction, by callgrind.
    command -v valgrind >/dev/null 2>&1 || missing+=(valgrind)
    # scripts/bench-proxy.sh's HTTPS and gRPC rows: h2load; openssl makes their certificate.
    command -v h2load >/dev/null 2>&1 || missing+=(nghttp2-client)
    command -v openssl >/dev/null 2>&1 || missing+=(openssl)
fi
# The venv of the gRPC tests (below) needs Debian's python3-venv.
python3 -c 'import venv, ensurepip' >/dev/null 2>&1 || missing+=(python3-venv)
if [ ${#missing[@]} -gt 0 ]; then
    echo "test-deps: installing ${missing[*]}" >&2
    SUDO=""
    [ "$(id -u)" = 0 ] || SUDO="sudo"
    $SUDO apt-get update -qq
    DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
fi

# The proxy's gRPC, HTTP/2 and LLM tests (crates/proxy/tests/grpc.rs, tls.rs, llm.rs): Python grpcio and openai in a
# venv, and h2spec from the Go module proxy, both under target/test-deps (FAIRLANE_TEST_DEPS
# names another directory). Skipped when present.
deps="${FAIRLANE_TEST_DEPS:-$(cd "$(dirname "$0")/.." && pwd)/target/test-deps}"
mkdir -p "$deps"
if ! "$deps/venv/bin/python" -c 'import grpc' >/dev/null 2>&1; then
    echo "test-deps: installing grpcio into $deps/venv" >&2
    python3 -m venv "$deps/venv"
    "$deps/venv/bin/pip" install -q --disable-pip-version-check grpcio
fi
# The official `openai` client through the proxy (crates/proxy/tests/llm.rs), in the same venv.
if ! "$deps/venv/bin/python" -c 'import openai' >/dev/null 2>&1; then
    echo "test-deps: installing openai into $deps/venv" >&2
    "$deps/venv/bin/pip" install -q --disable-pip-version-check openai
fi
if [ ! -x "$deps/bin/h2spec" ]; then
    command -v go >/dev/null 2>&1 || [ -x /usr/local/go/bin/go ] || {
        SUDO=""; [ "$(id -u)" = 0 ] || SUDO="sudo"
        $SUDO apt-get update -qq
        DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq --no-install-recommends golang-go >/dev/null
    }
    GO="$(command -v go || echo /usr/local/go/bin/go)"
    echo "test-deps: installing h2spec into $deps/bin" >&2
    (cd "$deps" && GOBIN="$deps/bin" GOFLAGS=-mod=mod "$GO" install github.com/summerwind/h2spec/cmd/h2spec@latest)
fi
