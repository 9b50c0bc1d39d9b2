#!/usr/bin/env bash
# Runs the `tam discover` ground-truth test N times under heavy CPU contention, without
# taking more than QUOTA_US per 100 ms from the rest of the machine: the runs and HOGS
# `yes` processes (nice 0, like the test) share one cpu cgroup (v1, as root).
# usage: crates/tam/scripts/ground-truth-under-load.sh [N] [HOGS] [QUOTA_US] [BIN...]
# BIN: test binaries to alternate (default: the release build's discover_ground_truth).
# Prints the failure count per binary; keeps failing outputs in $OUT (default /tmp/gt-load).
set -euo pipefail
N=${1:-10}; HOGS=${2:-3}; QUOTA=${3:-50000}; shift $(( $# < 3 ? $# : 3 ))
BINS=("$@")
if [ ${#BINS[@]} -eq 0 ]; then
    cargo test --release -p fairlane-tam --test discover_ground_truth --no-run 2>/dev/null
    BINS=("$(ls -t target/release/deps/discover_ground_truth-* | grep -v '\.d$' | head -1)")
fi
OUT=${OUT:-/tmp/gt-load}; mkdir -p "$OUT"
CG=/sys/fs/cgroup/cpu/gt-load-$$
mkdir "$CG"
echo 100000 > "$CG/cpu.cfs_period_us"; echo "$QUOTA" > "$CG/cpu.cfs_quota_us"
hogs=()
cleanup() {
    for p in "${hogs[@]}"; do kill "$p" 2>/dev/null || true; done
    wait 2>/dev/null || true
    echo $$ > /sys/fs/cgroup/cpu/cgroup.procs; rmdir "$CG" 2>/dev/null || true
}
trap cleanup EXIT
echo $$ > "$CG/cgroup.procs"
for _ in $(seq 1 "$HOGS"); do yes > /dev/null & hogs+=($!); done
declare -A fails
for i in $(seq 1 "$N"); do
    for b in "${BINS[@]}"; do
        out="$OUT/$(basename "$b")-$i.out"
        if "$b" > "$out" 2>&1; then rm "$out"; else
            fails[$b]=$(( ${fails[$b]:-0} + 1 )); echo "FAILED $b run $i: $(grep -a -m1 -A1 panicked "$out" | tail -1 | cut -c1-80)"
        fi
    done
    echo "round $i/$N done; $(uptime)"
done
for b in "${BINS[@]}"; do echo "$b: ${fails[$b]:-0} / $N failed"; done
