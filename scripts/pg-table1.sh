#!/usr/bin/env bash
# seeds/003 Table 1's shape on a real PostgreSQL behind `fairlane pg`: tenant T8's CPU
# utilization (ResCPU 25 %) as 0, 2, 4, 6, 8 bullies are added, under LDF, DRR, EDF and no
# reservations, beside the paper's numbers. Writes docs/pg-table1.md (or $1).
# Runs as root (PostgreSQL is started as the `postgres` user, as the tests do); about
# 5 minutes with SECONDS_PER_CELL=10 (the default). docs/pg.md explains the scaling.
set -euo pipefail
cd "$(dirname "$0")/.."
./scripts/test-deps.sh
OUT="${1:-docs/pg-table1.md}"
cargo build --release --locked -p fairlane-pg --example pg_experiments
./target/release/examples/pg_experiments table1 "${SECONDS_PER_CELL:-10}" "$OUT"
