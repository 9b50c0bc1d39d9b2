#!/usr/bin/env bash
# Every test of the project, from a fresh machine: the README's test command.
set -euo pipefail
cd "$(dirname "$0")/.."
./scripts/test-deps.sh # chromium, python3 for the fairlane-proxy tests
# --all-features: the feature-gated tests too (fairlane-runtime's `metrics` export).
cargo test --workspace --all-features --release --locked 2>&1

# The Python package (python/, PyO3 + maturin): build the wheel, install it with its test
# dependencies into a venv under target/, and run its tests (docs/python.md).
PYVENV=target/pyvenv
if [ ! -x "$PYVENV/bin/python" ]; then
    if ! python3 -m venv "$PYVENV"; then
        # Debian's python3 keeps venv in a separate package.
        rm -rf "$PYVENV"
        SUDO=""
        [ "$(id -u)" = 0 ] || SUDO="sudo"
        $SUDO apt-get update -qq
        DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq --no-install-recommends python3-venv >/dev/null
        python3 -m venv "$PYVENV"
    fi
fi
"$PYVENV/bin/pip" install -q --disable-pip-version-check "maturin>=1.5,<2" pytest pandas matplotlib \
    "dask[distributed]" nbclient nbformat ipykernel psutil
rm -rf target/py/wheels
(cd python && CARGO_TARGET_DIR=../target/py "../$PYVENV/bin/maturin" build --release --locked \
    -i "../$PYVENV/bin/python" -o ../target/py/wheels)
"$PYVENV/bin/pip" install -q --disable-pip-version-check --force-reinstall --no-deps target/py/wheels/fairlane-*.whl
cargo build --release --locked -p fairlane 2>&1
FAIRLANE_BIN="$PWD/target/release/fairlane" "$PYVENV/bin/pytest" -q -p no:cacheprovider python/tests 2>&1
