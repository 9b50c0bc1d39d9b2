#!/bin/sh
# `fairlane tam check` and `fairlane tam draw --highlight` on a chain of N stages (default
# 100,000): stage i hands every request to stage i + 1 and uses the CPU, all on one host.
# With OLD set, the old binary runs after the new one in every round (alternating).
#
#   N=100000 ROUNDS=2 FAIRLANE=target/release/fairlane [OLD=/path/to/old/fairlane] \
#     scripts/bench-tam-large.sh
#
# Prints per run the wall time, user CPU time and peak resident memory (/usr/bin/time).
# About 10 s for the new binary at N = 100,000; a binary that resolves stage names by
# scanning (before the change) took minutes.
set -eu
cd "$(dirname "$0")/.."
N=${N:-100000}
ROUNDS=${ROUNDS:-2}
FAIRLANE=${FAIRLANE:-target/release/fairlane}
OLD=${OLD:-}
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
python3 - "$N" "$tmp/chain.toml" <<'EOF'
import sys
n, path = int(sys.argv[1]), sys.argv[2]
with open(path, "w") as f:
    f.write('format = 1\n[model]\nname = "chain"\n')
    for i in range(n):
        f.write(f'\n[[stage]]\nname = "s{i}"\nscheduling = "pluggable"\nresources = {{ cpu = true }}\n')
        if i + 1 < n:
            f.write(f'downstream = ["s{i + 1}"]\n')
EOF
uptime
i=1
while [ "$i" -le "$ROUNDS" ]; do
    for bin in "$FAIRLANE" $OLD; do
        # `check` exits 1 when it finds problems (this chain has hidden contention).
        /usr/bin/time -f "round $i $bin check: %e s wall, %U s user, %M KB" \
            "$bin" tam check "$tmp/chain.toml" >/dev/null || true
        /usr/bin/time -f "round $i $bin draw: %e s wall, %U s user, %M KB" \
            "$bin" tam draw --highlight "$tmp/chain.toml" -o "$tmp/chain.svg" >/dev/null
    done
    i=$((i + 1))
done
uptime
