#!/usr/bin/env bash
# Runs every fuzz target (fuzz/fuzz_targets/) with libFuzzer for SECONDS each (default 60)
# and prints, per target: executions, executions per second, corpus size, crashes.
# Exits non-zero if any target crashed; the crashing input stays in fuzz/artifacts/TARGET/.
#
# cargo-fuzz wants nightly flags; RUSTC_BOOTSTRAP=1 lets the stable toolchain accept them.
# Needs a C++ compiler for libFuzzer (g++). Installs cargo-fuzz from crates.io if missing.
#
#   bash bench/fuzz.sh            # 60 s per target
#   bash bench/fuzz.sh 600        # 10 minutes per target
#   TARGETS="hello frame" bash bench/fuzz.sh 30
set -euo pipefail
cd "$(dirname "$0")/../fuzz"

SECONDS_PER_TARGET="${1:-60}"
export RUSTC_BOOTSTRAP=1
command -v cargo-fuzz >/dev/null || cargo install cargo-fuzz --locked
TARGETS="${TARGETS:-$(cargo fuzz list)}"

echo "netchar fuzzing: ${SECONDS_PER_TARGET} s per target, $(uname -r), $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2 | sed 's/^ //'), $(date -u +%Y-%m-%d)"
cargo fuzz build -O >/dev/null 2>&1 || cargo fuzz build -O

failed=0
rows=()
for t in $TARGETS; do
    mkdir -p "corpus/$t" "artifacts/$t"
    log="$(mktemp)"
    status=0
    cargo fuzz run -O "$t" "corpus/$t" -- -max_total_time="$SECONDS_PER_TARGET" -rss_limit_mb=1024 -print_final_stats=1 >"$log" 2>&1 || status=$?
    execs=$(grep -Eo 'stat::number_of_executed_units: *[0-9]+' "$log" | grep -Eo '[0-9]+$' | tail -1 || true)
    rate=$(grep -Eo 'stat::average_exec_per_sec: *[0-9]+' "$log" | grep -Eo '[0-9]+$' | tail -1 || true)
    corpus=$(find "corpus/$t" -type f | wc -l)
    crashes=$(find "artifacts/$t" -type f \( -name 'crash-*' -o -name 'oom-*' -o -name 'timeout-*' -o -name 'leak-*' \) | wc -l)
    if [ "$status" -ne 0 ] || [ "$crashes" -gt 0 ]; then
        failed=1
        echo "== $t failed (exit $status); last lines of its log:"
        tail -30 "$log"
    fi
    rows+=("$(printf '%-18s %14s %12s %8s %8s' "$t" "${execs:-?}" "${rate:-?}" "$corpus" "$crashes")")
    rm -f "$log"
done

printf '%-18s %14s %12s %8s %8s\n' target executions 'exec/s' corpus crashes
printf '%s\n' "${rows[@]}"
exit "$failed"
