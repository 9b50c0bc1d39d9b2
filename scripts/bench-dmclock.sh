#!/usr/bin/env bash
# fairlane-core vs Ceph dmclock on dmclock's own workload (issue 19, target 1).
#
# Builds the peer harness (shared/anchors/dmclock_cycle.cc, Ceph's PullPriorityQueue with
# weight-only clients) and fairlane's matching bench (crates/core/benches/dmclock.rs), then
# alternates them ROUNDS times, client count by client count, and prints a table of median
# ns per cycle (complete + enqueue + dequeue; dmclock: pull + add) and the ratio
# dmclock / fairlane (> 1: fairlane is faster).
#
# Needs: a checkout of github.com/ceph/dmclock (commit d9204e25 is the one measured) and
# Debian's libboost-dev (boost/variant.hpp). This script installs nothing.
#
# Environment:
#   DMC     dmclock checkout                      (default: ../dmclock, then /work/dmclock)
#   ANCHOR  the harness source        (default: the first shared/anchors/dmclock_cycle.cc of
#           ../shared, ../../shared, /work/shared)
#   ROUNDS  alternations                          (default: 3)
#   SIZES   client counts                         (default: "10 100 1000 10000")
#   ALGS    fairlane presets                      (default: "wfq sfq 2dfq"; sfq = SFQ(D), D = 1)
#   OUT     where the peer binary and raw lines go (default: target/bench-dmclock)
#
# Example: ROUNDS=15 DMC=~/src/dmclock scripts/bench-dmclock.sh
#
# Use 15 rounds or more on a shared VM: the project's machine has phases, seconds long, in
# which both programs run about 2x slower (dmclock 115 <-> 229 ns, fairlane WFQ 41 <-> 77 ns
# at 10 clients, pinned or not; docs/benchmarks.md, sitting 6). With 5 rounds one program
# can land in the slow phase more often than the other and the ratio of medians halves.
set -euo pipefail
cd "$(dirname "$0")/.."

ROUNDS=${ROUNDS:-3}
SIZES=${SIZES:-"10 100 1000 10000"}
ALGS=${ALGS:-"wfq sfq 2dfq"}
OUT=${OUT:-target/bench-dmclock}
if [[ -z "${ANCHOR:-}" ]]; then
  for a in ../shared/anchors ../../shared/anchors /work/shared/anchors; do
    if [[ -f $a/dmclock_cycle.cc ]]; then ANCHOR=$a/dmclock_cycle.cc; break; fi
  done
fi
if [[ -z "${DMC:-}" ]]; then
  for d in ../dmclock /work/dmclock; do
    if [[ -f $d/src/dmclock_server.h ]]; then DMC=$d; break; fi
  done
fi

die() { echo "bench-dmclock: $*" >&2; exit 1; }
[[ -n "${DMC:-}" && -f $DMC/src/dmclock_server.h ]] ||
  die "set DMC to a checkout of github.com/ceph/dmclock (no src/dmclock_server.h in '${DMC:-}')"
[[ -n "${ANCHOR:-}" && -f $ANCHOR ]] ||
  die "set ANCHOR to shared/anchors/dmclock_cycle.cc (not found: '${ANCHOR:-}')"
echo '#include <boost/variant.hpp>' | g++ -std=c++17 -x c++ -fsyntax-only - 2>/dev/null ||
  die "boost headers missing: apt-get install libboost-dev"

mkdir -p "$OUT"
PEER=$OUT/dmclock_cycle
g++ -O2 -DNDEBUG -std=c++17 -pthread -I"$DMC/src" -I"$DMC/support/src" \
  "$ANCHOR" "$DMC/src/dmclock_util.cc" "$DMC/support/src/run_every.cc" -o "$PEER"
OURS=$(cargo bench -p fairlane-core --bench dmclock --no-run 2>&1 |
  sed -n 's/.*Executable benches\/dmclock.rs (\(.*\))/\1/p' | tail -1)
[[ -x $OURS ]] || die "could not build crates/core/benches/dmclock.rs"

RAW=$OUT/raw.txt
: >"$RAW"
echo "# $(date -u +%FT%TZ) $(uptime | sed 's/.*load/load/')" | tee -a "$RAW"
for r in $(seq 1 "$ROUNDS"); do
  for n in $SIZES; do
    "$PEER" "$n" | tee -a "$RAW"
    # shellcheck disable=SC2086 # ALGS is a list
    "$OURS" $ALGS "$n" | tee -a "$RAW"
  done
done
echo "# $(date -u +%FT%TZ) $(uptime | sed 's/.*load/load/')" | tee -a "$RAW"

# Median over rounds of each program's per-run median, and the best (smallest) batch of all
# rounds: load only ever adds time, so on a busy machine the best is the steadier figure.
# Ratios are dmclock / fairlane (> 1: fairlane is faster).
echo
echo "| algorithm | clients | dmclock ns | fairlane ns | ratio | dmclock best | fairlane best | ratio of best |"
echo "|---|---:|---:|---:|---:|---:|---:|---:|"
awk -v algs="$ALGS" -v sizes="$SIZES" '
  function med(key,   n, i, j, t, a) {
    n = split(vals[key], a, " ")
    for (i = 2; i <= n; i++) for (j = i; j > 1 && a[j-1] + 0 > a[j] + 0; j--) { t = a[j]; a[j] = a[j-1]; a[j-1] = t }
    return n % 2 ? a[(n + 1) / 2] : (a[n / 2] + a[n / 2 + 1]) / 2
  }
  /^(dmclock|fairlane-)/ {
    split($2, c, "="); split($3, m, "="); split($4, b, "=")
    k = $1 " " c[2]
    vals[k] = vals[k] " " m[2]
    if (!(k in best) || b[2] + 0 < best[k]) best[k] = b[2] + 0
  }
  END {
    na = split(algs, A, " "); ns = split(sizes, S, " ")
    for (i = 1; i <= na; i++) for (j = 1; j <= ns; j++) {
      kd = "dmclock " S[j]; kf = "fairlane-" A[i] " " S[j]
      d = med(kd); f = med(kf)
      printf "| %s | %s | %.0f | %.0f | %.2f× | %.0f | %.0f | %.2f× |\n", A[i], S[j], d, f, d / f, best[kd], best[kf], best[kd] / best[kf]
    }
  }' "$RAW"
