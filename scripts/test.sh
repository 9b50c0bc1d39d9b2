#!/usr/bin/env bash
# Every test of the project, from a fresh machine: the README's test command.
set -euo pipefail
cd "$(dirname "$0")/.."
./scripts/test-deps.sh # chromium, python3 for the fairlane-proxy tests
# --all-features: the feature-gated tests too (fairlane-runtime's `metrics` export).
cargo test --workspace --all-features --release --locked 2>&1
