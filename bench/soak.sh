#!/usr/bin/env bash
# Soak test: one `netchar server --max-concurrent 4` on 127.0.0.1 (a free port the kernel
# picks), and back-to-back client tests against it for MINUTES (default 10), cycling through
#   tcp -t 1 | tcp -R -n 10M | udp -b 100M -t 1 | udp -R -b 50M -t 1 | rr -t 1 | rr --udp -t 1 | crr -n 200
# each with --json --busy-wait 5. Every result is checked: exit status 0, `error` null, and exact
# accounting (TCP: receiver bytes = sender bytes per stream, = -n when given; UDP: sent = received
# + lost per stream; rr/crr: the responder received one request per transaction).
#
# The server's RSS (VmRSS), open fds and threads are sampled before the first test and then
# every 30 s, always between two tests; the last sample is taken after the last test, once fds
# and threads have settled (at most 5 s). The run is "flat" when the last RSS is at most 10% +
# 2 MiB above the first sample after the 30 s warm-up, and fds and threads are back to their
# values before the first test. Exits 1 if a test failed or the run is not flat, 2 on bad usage
# or when the server could not be started.
#
#   bash bench/soak.sh            # 10 minutes
#   bash bench/soak.sh 1          # 1 minute
#   NETCHAR=path/to/netchar bash bench/soak.sh 10   # that binary, no build
#
# Without NETCHAR it runs `cargo build --release` and uses target/release/netchar (or
# $CARGO_TARGET_DIR/release/netchar), copied away so a rebuild during the run changes nothing.
# Needs python3 (to read the JSON). Talks only to 127.0.0.1. The work directory (server log,
# the JSON and stderr of every failed test) is kept and named at the end.
set -euo pipefail

MINUTES="${1:-10}"
[[ $MINUTES =~ ^[1-9][0-9]*$ ]] || { echo "usage: bench/soak.sh [MINUTES]  (a positive integer, default 10)" >&2; exit 2; }
SAMPLE_EVERY_S=30
WARMUP_S=30
CLIENT_TIMEOUT_S=60
ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
command -v python3 >/dev/null || { echo "soak.sh: needs python3 to read the JSON results" >&2; exit 2; }

WORK=$(mktemp -d -t netchar-soak.XXXXXX)
BENCH=soak
NO_BUILD=0
# shellcheck source=bench/lib.sh
. "$ROOT/bench/lib.sh" || exit 2
build_netchar
VERSION="$("$NC" --version | head -1) ($NC_REV)"

SERVER_PID=
stop_server() {
    if [ -n "$SERVER_PID" ] && kill -0 "$SERVER_PID" 2>/dev/null; then
        kill -TERM "$SERVER_PID" 2>/dev/null || true
        wait "$SERVER_PID" 2>/dev/null || true
    fi
}
trap stop_server EXIT
trap 'exit 130' INT TERM

"$NC" server -B 127.0.0.1 -p 0 --max-concurrent 4 2>"$WORK/server.log" &
SERVER_PID=$!
PORT=
for _ in $(seq 50); do
    PORT=$(sed -n 's/.*listening on 127\.0\.0\.1:\([0-9][0-9]*\).*/\1/p' "$WORK/server.log" | head -1)
    [ -n "$PORT" ] && break
    kill -0 "$SERVER_PID" 2>/dev/null || break
    sleep 0.1
done
if [ -z "$PORT" ]; then
    echo "soak.sh: the server did not start; its log:" >&2
    cat "$WORK/server.log" >&2
    exit 2
fi

# bench_py soak check FILE: "ok", or the one reason the result is wrong (exit 1)
# (bench/netchar_bench/soak.py).

# sample: append "elapsed_s rss_kib fds threads" of the server to SAMPLES.
SAMPLES=()
sample() {
    local rss threads fds
    rss=$(awk '/^VmRSS:/ {print $2}' "/proc/$SERVER_PID/status")
    threads=$(awk '/^Threads:/ {print $2}' "/proc/$SERVER_PID/status")
    fds=$(find "/proc/$SERVER_PID/fd" -mindepth 1 -maxdepth 1 | wc -l)
    SAMPLES+=("$SECONDS $rss $fds $threads")
    printf '%5d s  tests %5d  failures %3d  RSS %6.1f MiB  fds %3d  threads %3d\n' \
        "$SECONDS" "$TESTS" "${#FAILURES[@]}" "$(awk -v k="$rss" 'BEGIN {print k / 1024}')" "$fds" "$threads"
}

KINDS=(
    "tcp -t 1"
    "tcp -R -n 10M"
    "udp -b 100M -t 1"
    "udp -R -b 50M -t 1"
    "rr -t 1"
    "rr --udp -t 1"
    "crr -n 200"
)
TESTS=0
FAILURES=()
MAX_TESTS=$((MINUTES * 60 * 100))   # a bound on the loop even if every test failed at once

echo "$VERSION soak: $MINUTES min, server on 127.0.0.1:$PORT (pid $SERVER_PID) --max-concurrent 4; $(uname -r), $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2 | sed 's/^ //'), $(date -u +%Y-%m-%d)"
SECONDS=0
sample
next_sample=$SAMPLE_EVERY_S
while [ "$SECONDS" -lt $((MINUTES * 60)) ] && [ "$TESTS" -lt "$MAX_TESTS" ]; do
    if ! kill -0 "$SERVER_PID" 2>/dev/null; then
        FAILURES+=("at $SECONDS s: the server exited; last lines of its log: $(tail -3 "$WORK/server.log" | tr '\n' '|')")
        break
    fi
    spec=${KINDS[$((TESTS % ${#KINDS[@]}))]}
    TESTS=$((TESTS + 1))
    read -ra args <<< "$spec"
    status=0
    timeout "$CLIENT_TIMEOUT_S" "$NC" "${args[0]}" "127.0.0.1:$PORT" "${args[@]:1}" --json --busy-wait 5 \
        >"$WORK/test.json" 2>"$WORK/test.err" || status=$?
    checked=0
    verdict=$(bench_py soak check "$WORK/test.json" 2>&1) || checked=1
    if [ "$status" -ne 0 ] || [ "$checked" -ne 0 ]; then
        if [ "$status" -eq 124 ]; then verdict="timed out after $CLIENT_TIMEOUT_S s"
        elif [ "$status" -ne 0 ]; then verdict="$verdict; stderr: $(tail -1 "$WORK/test.err")"
        fi
        FAILURES+=("test $TESTS ($spec) at $SECONDS s: exit $status: $verdict")
        cp "$WORK/test.json" "$WORK/failed-$TESTS.json"
        cp "$WORK/test.err" "$WORK/failed-$TESTS.err"
        echo "FAILED: ${FAILURES[-1]}"
    fi
    if [ "$SECONDS" -ge "$next_sample" ] && [ "$SECONDS" -lt $((MINUTES * 60)) ] && kill -0 "$SERVER_PID" 2>/dev/null; then
        sample
        next_sample=$((next_sample + SAMPLE_EVERY_S))
    fi
done

# The final sample: give the server up to 5 s to finish tearing down the last test.
first_fds=$(awk '{print $3}' <<< "${SAMPLES[0]}")
first_threads=$(awk '{print $4}' <<< "${SAMPLES[0]}")
if kill -0 "$SERVER_PID" 2>/dev/null; then
    for _ in $(seq 50); do
        [ "$(find "/proc/$SERVER_PID/fd" -mindepth 1 -maxdepth 1 | wc -l)" -eq "$first_fds" ] &&
            [ "$(awk '/^Threads:/ {print $2}' "/proc/$SERVER_PID/status")" -eq "$first_threads" ] && break
        sleep 0.1
    done
    sample
fi
logged=$(grep -c '^test from' "$WORK/server.log" || true)
server_status=0
kill -TERM "$SERVER_PID" 2>/dev/null || true
wait "$SERVER_PID" 2>/dev/null || server_status=$?
SERVER_PID=

# bench_py soak summary: the figures and the verdict from SAMPLES (stdin: "elapsed_s rss_kib fds
# threads"; bench/netchar_bench/soak.py).
flat_failed=0
printf '%s\n' "${SAMPLES[@]}" | SOAK_TESTS=$TESTS SOAK_FAILURES=${#FAILURES[@]} SOAK_WARMUP=$WARMUP_S \
    SOAK_LOGGED=$logged SOAK_SERVER_STATUS=$server_status bench_py soak summary || flat_failed=1

if [ "${#FAILURES[@]}" -gt 0 ]; then
    echo "failures:"
    printf '  %s\n' "${FAILURES[@]}"
fi
[ "$server_status" -eq 0 ] || echo "the server exited with status $server_status on SIGTERM (expected 0)"
echo "work directory (server log, failed tests): $WORK"
if [ "$flat_failed" = 1 ] || [ "${#FAILURES[@]}" -gt 0 ] || [ "$server_status" -ne 0 ]; then
    exit 1
fi
