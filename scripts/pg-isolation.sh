#!/usr/bin/env bash
# The tight isolation figures of `fairlane pg` on a real PostgreSQL (docs/benchmarks.md,
# "fairlane pg"): two reserved tenants (30 % and 20 % of 2 cores) and four bullies under
# LDF and FIFO, each share read from the backends' /proc CPU time (target: LDF within 3
# points); a light tenant's p99 under SFQ(D), 2DFQᴱ and FIFO (target: ≥ 5× better than
# FIFO). About 3 minutes with SECONDS_PER_RUN=30 (the default). Runs as root.
set -euo pipefail
cd "$(dirname "$0")/.."
./scripts/test-deps.sh
cargo build --release --locked -p fairlane-pg --example pg_experiments
./target/release/examples/pg_experiments isolation "${SECONDS_PER_RUN:-30}"
