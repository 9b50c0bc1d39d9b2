#!/usr/bin/env bash
# Every test of the project, from a fresh machine: the README's test command.
set -euo pipefail
cd "$(dirname "$0")/.."
./scripts/test-deps.sh # chromium, python3 for the fairlane-proxy tests
cargo test --workspace --release --locked 2>&1
