#!/usr/bin/env bash
# bench/fuzz.sh [SECONDS_PER_TARGET] — libFuzzer on every target of fuzz/ (cargo-fuzz layout,
# outside the workspace) for SECONDS_PER_TARGET each (default 60), one target after another,
# then one table: target, executions, executions/s, corpus size, crashes.
#
# Exits 1 if a target crashed, hung (one input over 10 s) or ran out of memory (2 GiB); the
# input stays in fuzz/artifacts/TARGET/, with the fuzzer's log (panic message and stack) beside
# it as log-DATE.txt. Reproduce with `RUSTC_BOOTSTRAP=1 cargo fuzz run -O TARGET ARTIFACT` in
# fuzz/. Corpora grow in fuzz/corpus/TARGET/ from run to run (both directories are ignored).
#
# cargo-fuzz needs nightly-only rustc flags (sanitizer coverage, -Zsanitizer=address): on the
# stable toolchain RUSTC_BOOTSTRAP=1 makes rustc accept them. Needs g++ (libFuzzer is C++);
# installs cargo-fuzz from crates.io if it is missing.
#
#   bench/fuzz.sh                         60 s per target
#   bench/fuzz.sh 600                     10 minutes per target
#   TARGETS="hello frame" bench/fuzz.sh   only these targets
#   KEEP_GOING=1 bench/fuzz.sh            fuzz each target for its whole time even after a
#                                         crash (libFuzzer -fork=1 -ignore_crashes=1), keeping
#                                         every crashing input
#   CARGO_TARGET_DIR=DIR bench/fuzz.sh    build in DIR (default fuzz/target)
#   BENCH_SAVE=1 bench/fuzz.sh            also write bench/results/DATE-fuzz-MACHINE.txt
set -euo pipefail

BENCH_DIR=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
ROOT=$(dirname "$BENCH_DIR")
SECONDS_PER_TARGET=${1:-60}
KEEP_GOING=${KEEP_GOING:-0}
BENCH_SAVE=${BENCH_SAVE:-0}
[[ $SECONDS_PER_TARGET =~ ^[1-9][0-9]*$ ]] || { echo "fuzz.sh: SECONDS_PER_TARGET must be a positive integer (got '$SECONDS_PER_TARGET')" >&2; exit 2; }
command -v g++ >/dev/null || { echo "fuzz.sh: libFuzzer needs a C++ compiler: apt-get install g++" >&2; exit 2; }
export RUSTC_BOOTSTRAP=1
cd "$ROOT/fuzz"
TARGET_DIR=${CARGO_TARGET_DIR:-$ROOT/fuzz/target}
unset CARGO_TARGET_DIR

if ! cargo fuzz --version >/dev/null 2>&1; then
    echo "installing cargo-fuzz from crates.io ..." >&2
    cargo install cargo-fuzz --locked
fi
TARGETS=${TARGETS:-$(cargo fuzz list)}

echo "building the fuzz targets (cargo fuzz build -O, address sanitizer) in $TARGET_DIR ..." >&2
build_log=$(mktemp)
cargo fuzz build -O --target-dir "$TARGET_DIR" >"$build_log" 2>&1 || { cat "$build_log" >&2; exit 2; }
# Valid inputs to start from: libFuzzer seldom guesses a magic number or a whole TestSpec.
cargo run -q --release --example seeds --target-dir "$TARGET_DIR/seeds" -- corpus >"$build_log" 2>&1 ||
    { cat "$build_log" >&2; exit 2; }
rm -f "$build_log"

REPORT=$(mktemp)
trap 'rm -f "$REPORT"' EXIT
{
    echo "netchar fuzzing, $(date -u +%Y-%m-%d), kernel $(uname -r), $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2 | sed 's/^ //') ($(nproc) CPUs)"
    echo "bench/fuzz.sh $SECONDS_PER_TARGET: libFuzzer -O with the address sanitizer, ${SECONDS_PER_TARGET} s per target, one at a time$([ "$KEEP_GOING" = 1 ] && echo ', going on after crashes')"
    echo
    printf '%-18s %14s %10s %8s %8s\n' target executions 'exec/s' corpus crashes
} >"$REPORT"

failed=0
notes=()
for t in $TARGETS; do
    mkdir -p "corpus/$t" "artifacts/$t"
    echo "fuzzing $t for ${SECONDS_PER_TARGET} s ..." >&2
    log=$(mktemp)
    since=$(mktemp)
    flags=(-max_total_time="$SECONDS_PER_TARGET" -timeout=10 -rss_limit_mb=2048 -print_final_stats=1)
    if [ "$KEEP_GOING" = 1 ]; then
        flags+=(-fork=1 -ignore_crashes=1 -ignore_timeouts=1 -ignore_ooms=1)
    fi
    status=0
    cargo fuzz run -O --target-dir "$TARGET_DIR" "$t" "corpus/$t" -- "${flags[@]}" >"$log" 2>&1 || status=$?
    # Plain runs end with stat:: lines; fork mode (and a crash) only with "#N ... exec/s: R" lines.
    execs=$(sed -n 's/^stat::number_of_executed_units: *//p' "$log" | tail -1)
    rate=$(sed -n 's/^stat::average_exec_per_sec: *//p' "$log" | tail -1)
    [ -n "$execs" ] || execs=$(sed -n 's/^#\([0-9][0-9]*\).*/\1/p' "$log" | tail -1)
    [ -n "$rate" ] || rate=$(sed -n 's/^#.*exec\/s: \([0-9][0-9]*\).*/\1/p' "$log" | tail -1)
    corpus=$(find "corpus/$t" -type f | wc -l)
    crashes=$(find "artifacts/$t" -type f -newer "$since" \( -name 'crash-*' -o -name 'oom-*' -o -name 'timeout-*' -o -name 'leak-*' \) | wc -l)
    if [ "$crashes" -gt 0 ] || { [ "$status" -ne 0 ] && [ "$KEEP_GOING" != 1 ]; }; then
        failed=1
        kept="artifacts/$t/log-$(date -u +%Y%m%dT%H%M%SZ).txt"
        cp "$log" "$kept"
        notes+=("$t: exit $status, $crashes input(s) in fuzz/artifacts/$t/, log fuzz/$kept; first lines of the failure:")
        while IFS= read -r line; do notes+=("    $line"); done < <(
            grep -m1 -A4 -E 'panicked at|ERROR: (libFuzzer|AddressSanitizer)|SUMMARY' "$log" || tail -5 "$log")
    fi
    printf '%-18s %14s %10s %8s %8s\n' "$t" "${execs:-?}" "${rate:-?}" "$corpus" "$crashes" >>"$REPORT"
    rm -f "$log" "$since"
done

if [ "${#notes[@]}" -gt 0 ]; then
    { echo; printf '%s\n' "${notes[@]}"; } >>"$REPORT"
fi
cat "$REPORT"
if [ "$BENCH_SAVE" = 1 ]; then
    mkdir -p "$BENCH_DIR/results"
    # Named by date and machine (kernel, CPU count; the CPU model on the first line), like the
    # other benchmarks' saved reports.
    dest="$BENCH_DIR/results/$(date +%F)-fuzz-$(uname -r)-$(nproc)cpu"
    [ -e "$dest.txt" ] && dest="$dest-$(date +%H%M%S)"
    dest="$dest.txt"
    { echo "# $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2 | sed 's/^ //'), kernel $(uname -r)"
      cat "$REPORT"; } > "$dest" && echo "saved: $dest"
fi
exit "$failed"
