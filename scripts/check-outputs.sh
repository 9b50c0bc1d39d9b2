#!/bin/sh
# Every output of two `fairlane` binaries, compared byte for byte with the timing fields aside:
# `fairlane simulate SPEC --json --out DIR` for every spec under experiments/ and models/ (its
# JSON, exit status, error text, CSV files and HTML page), and `fairlane reproduce --all
# --quick`'s claims and report page; `fairlane tam what-if --simulate --json` on a few models.
#
#   scripts/check-outputs.sh BASE NEW          compare (each a binary or a recorded directory)
#   scripts/check-outputs.sh record BIN DIR    record BIN's outputs into DIR
#
# A binary is recorded into a temporary directory first, so `scripts/check-outputs.sh
# old/fairlane target/release/fairlane` does everything in one go (about 15 minutes on two
# idle cores, most of it the two `reproduce --all --quick` runs); recording the old binary
# once and comparing its directory against new binaries halves that. JOBS (default 2) is
# passed as --jobs. Timing fields (`wall_seconds`, `events_per_second`, `visits_per_second`)
# are replaced by `T` before comparing. Exit status 0 when everything matches, 1 otherwise.
#
# One change is intended and undone in NEW's outputs before comparing (STRICT=1 keeps it):
# a TAM on-demand stage, which has no queue, is reported with scheduler `none` where older
# binaries said `fifo` (JSON `"scheduler":"none"`, the stages CSV's second column, the HTML
# stage table's cell). No other scheduler is called `none`.
set -eu
cd "$(dirname "$0")/.."
JOBS=${JOBS:-2}

# Replace the values of the JSON timing fields by T.
untime() {
    sed -E 's/"(wall_seconds|events_per_second|visits_per_second)":(-?[0-9.eE+-]+|null)/"\1":T/g'
}

# `tam what-if --simulate --json` on a model file with a [simulation], a spec naming a model,
# and a model without one (the default workload).
record_whatif() {
    bin=$1
    dir=$2
    mkdir -p "$dir/what-if"
    n=0
    while IFS='|' read -r spec change; do
        n=$((n + 1))
        status=0
        "$bin" tam what-if "$spec" -c "$change" --simulate --json \
            >"$dir/what-if/$n.stdout" 2>"$dir/what-if/$n.stderr" || status=$?
        echo "$status" >"$dir/what-if/$n.status"
    done <<'CASES'
experiments/tam-fig8a.toml|set I/O.scheduling = pluggable
experiments/tam-fig9a.toml|split Req Handle
experiments/tam-fig13b-orig.toml|split RPC Handle
models/hbase.toml|combine RPC Read + RPC Respond as RPC Read/Respond
CASES
    echo "recorded $n what-if runs" >&2
}

record() {
    bin=$1
    dir=$2
    record_whatif "$bin" "$dir"
    mkdir -p "$dir/simulate"
    for spec in experiments/*.toml experiments/*/*.toml models/*.toml; do
        name=$(echo "$spec" | tr / _)
        out="$dir/simulate/$name"
        mkdir -p "$out"
        status=0
        "$bin" simulate "$spec" --json --jobs "$JOBS" --out "$out/report" \
            >"$out/stdout.raw" 2>"$out/stderr" || status=$?
        untime <"$out/stdout.raw" >"$out/stdout"
        rm -f "$out/stdout.raw"
        echo "$status" >"$out/status"
        echo "recorded $spec (status $status)" >&2
    done
    status=0
    "$bin" reproduce --all --quick --jobs "$JOBS" --out "$dir/reproduce" \
        >"$dir/reproduce.stdout.raw" 2>/dev/null || status=$?
    # The last line names the report's directory, which differs between recordings.
    grep -v '^wrote ' "$dir/reproduce.stdout.raw" >"$dir/reproduce.stdout" || true
    rm -f "$dir/reproduce.stdout.raw"
    echo "$status" >"$dir/reproduce.status"
    echo "recorded reproduce --all --quick (status $status)" >&2
}

# A directory of recorded outputs: the argument itself, or a fresh recording of the binary.
recorded() {
    if [ -d "$1" ]; then
        echo "$1"
    else
        d=$(mktemp -d)
        record "$1" "$d"
        echo "$d"
    fi
}

if [ "${1:-}" = record-what-if ]; then
    record_whatif "$2" "$3"
    exit 0
fi
if [ "${1:-}" = record ]; then
    [ $# -eq 3 ] || { echo "usage: $0 record BIN DIR" >&2; exit 2; }
    record "$2" "$3"
    exit 0
fi
[ $# -eq 2 ] || { echo "usage: $0 BASE NEW | $0 record BIN DIR" >&2; exit 2; }
base=$(recorded "$1")
new=$(recorded "$2")
if [ "${STRICT:-0}" != 1 ]; then
    undone=$(mktemp -d)
    cp -r "$new/." "$undone"
    find "$undone" -type f \( -name stdout -o -name '*.stdout' \) -exec \
        sed -i -E 's/"scheduler":"none"/"scheduler":"fifo"/g' {} +
    find "$undone" -type f -name '*-stages.csv' -exec sed -i -E 's/^([^,]*),none,/\1,fifo,/' {} +
    find "$undone" -type f -name index.html -exec sed -i 's|<td>none</td>|<td>fifo</td>|g' {} +
    new=$undone
fi
if diff -r "$base" "$new" >/dev/null; then
    echo "identical: $(find "$base" -type f | wc -l) files (timing fields aside)"
    exit 0
fi
echo "outputs differ (timing fields aside):"
diff -rq "$base" "$new" || true
exit 1
