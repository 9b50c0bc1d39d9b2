#!/usr/bin/env bash
# The main job, from a fresh machine: reproduce the headline results into report/index.html.
set -euo pipefail
cd "$(dirname "$0")/.."
cargo run --release --locked -p fairlane -- reproduce --all --quick --out "${1:-report}"
