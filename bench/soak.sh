#!/usr/bin/env bash
# Soak test: one `netchar server` on 127.0.0.1 and back-to-back tests against it for MINUTES
# (default 10), then: are the server's RSS, open fds and threads back where they started?
#
#   bash bench/soak.sh [MINUTES] [all|native|peers]
#
# MODE (default all):
#   native  the server as `netchar server -B 127.0.0.1 -p 0 --max-concurrent 4` and netchar's own
#           tests only, cycling through
#             tcp -t 1 | tcp -R -n 10M | udp -b 100M -t 1 | udp -R -b 50M -t 1 | rr -t 1 |
#             rr --udp -t 1 | crr -n 200
#           each with --json --busy-wait 5. Checked: exit 0, `error` null, exact accounting (TCP:
#           receiver bytes = sender bytes per stream, = -n when given; UDP: sent = received + lost
#           per stream; rr/crr: the responder received one request per transaction).
#   peers   the same server with every peer listener on as well (--iperf3, --iperf2, --netio,
#           --nc-test, --services, --netperf; free ports the script picks), cycling through the peer tests:
#             stock iperf3 -c -t 1 (-J): TCP, -R, -u -b 50M, -P 2
#             stock iperf -c -t 1 (2.x): TCP, -u -b 50M, -r and -d (dialing back to a free -L
#               port), -R, -u -b 50M -R
#             netchar --proto iperf3: tcp -t 1, tcp -R -P 2 -t 1, udp -b 50M -t 1 (and -R)
#             netchar --proto iperf2: tcp -t 1, tcp -R, tcp -d, udp -b 50M -t 1 (and -R)
#             netchar --proto echo: tcp, udp -b 50M, rr, rr --udp; discard: tcp, udp -b 50M;
#               chargen: tcp (all -t 1)
#             netchar suite netio --proto netio -b 32k --netio-interval 1 (TCP: 1 s up, then the
#               server's fixed 6 s down; netio's UDP test cannot run with client and server on
#               one host: both bind the port after the server's)
#             netchar --proto netperf: tcp, tcp -R, udp -b 50M, rr, rr --udp, crr (all -t 1)
#             netchar --proto nc-test: udp and udp -R --pattern 640x1024, tcp and tcp -R -l 1024
#               -n 1M, echo and echo --udp --pattern 640x1024, suite ecos --quick
#           Checked (bench/netchar_bench/soak.py): exit 0 and, netchar: `error` null in every
#           result, the protocol asked for, every stream record moved bytes, exact accounting
#           wherever both ends are in the result, echo's bytes back = bytes sent; iperf3: no error,
#           TCP up exact (netchar settles on the client's totals); iperf (exits 0 even when it
#           could not connect): a report line per stream, no failed/refused/WARNING line, UDP's
#           server report. A stock tool that is not installed is skipped, with a line saying so.
#   all     the server of `peers`, and the native cycle followed by the peer cycle, repeated.
#
# The server's RSS (VmRSS, and RssAnon), open fds and threads are sampled before the first test
# and then every 30 s, always between two tests; the last sample is taken after the last test,
# once fds and threads have settled (at most 5 s). The run is "flat" when the last RSS is at
# most 10% + 2 MiB above the first sample after the 30 s warm-up, and fds and threads are back
# to their values before the first test. Exits 1 if a test failed or the run is not flat, 2 on
# bad usage or when the server could not be started.
#
#   bash bench/soak.sh                    # 10 minutes, every listener (all)
#   bash bench/soak.sh 1 native           # 1 minute, netchar's own protocol only
#   NETCHAR=path/to/netchar bash bench/soak.sh 10   # that binary, no build
#   MALLOC_ARENA_MAX=2 bash bench/soak.sh 10        # the environment reaches the server too
#   SOAK_KINDS=iperf3 bash bench/soak.sh 2 peers    # only the tests whose line matches (a bash regex)
#
# Without NETCHAR it runs `cargo build --release` and uses target/release/netchar (or
# $CARGO_TARGET_DIR/release/netchar), copied away so a rebuild during the run changes nothing.
# Needs python3 (to read the results); iperf3 and iperf (2.x) for the stock-tool tests. Talks
# only to 127.0.0.1. The work directory (server log, the output of every failed test, and the
# server's /proc/PID/smaps at the last sample) is kept and named at the end.
set -euo pipefail

MINUTES="${1:-10}"
MODE="${2:-all}"
usage() { echo "usage: bench/soak.sh [MINUTES] [all|native|peers]  (MINUTES a positive integer, default 10; default all)" >&2; exit 2; }
[[ $MINUTES =~ ^[1-9][0-9]*$ ]] || usage
case $MODE in all|native|peers) ;; *) usage ;; esac
[ $# -le 2 ] || usage
SAMPLE_EVERY_S=30
WARMUP_S=30
CLIENT_TIMEOUT_S=60
ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
command -v python3 >/dev/null || { echo "soak.sh: needs python3 to read the results" >&2; exit 2; }

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

SERVER_ARGS=(-B 127.0.0.1 -p 0 --max-concurrent 4)
READY_LINES=1    # "listening on", and one line per peer listener
if [ "$MODE" != native ]; then
    # Ports P with P+1 free too: netio's UDP test is on P+1, and the nc_test and iperf2 -r/-d
    # clients bind a port of their own (the data port + 1, -L).
    read -r I3_PORT I2_PORT NETIO_PORT NCT_PORT NCT_DATA ECHO_PORT DISCARD_PORT CHARGEN_PORT I2_LISTEN NP_PORT \
        < <(bench_py soak ports 10) || { echo "soak.sh: no free ports" >&2; exit 2; }
    SERVER_ARGS+=(--iperf3 --iperf3-port "$I3_PORT" --iperf2 --iperf2-port "$I2_PORT"
        --netio --netio-port "$NETIO_PORT" --nc-test --nc-test-port "$NCT_PORT" --nc-test-data-port "$NCT_DATA"
        --services --echo-port "$ECHO_PORT" --discard-port "$DISCARD_PORT" --chargen-port "$CHARGEN_PORT"
        --netperf --netperf-port "$NP_PORT")
    READY_LINES=7
fi
"$NC" server "${SERVER_ARGS[@]}" 2>"$WORK/server.log" &
SERVER_PID=$!
PORT=
for _ in $(seq 50); do
    PORT=$(sed -n 's/.*listening on 127\.0\.0\.1:\([0-9][0-9]*\).*/\1/p' "$WORK/server.log" | head -1)
    up=$(grep -c -E 'listening on 127\.0\.0\.1:|^services: |^netio: |^answering ' "$WORK/server.log" || true)
    [ -n "$PORT" ] && [ "$up" -ge "$READY_LINES" ] && break
    kill -0 "$SERVER_PID" 2>/dev/null || break
    sleep 0.1
done
if [ -z "$PORT" ] || [ "$up" -lt "$READY_LINES" ] || ! kill -0 "$SERVER_PID" 2>/dev/null; then
    echo "soak.sh: the server did not start (netchar server ${SERVER_ARGS[*]}); its log:" >&2
    cat "$WORK/server.log" >&2
    exit 2
fi

# sample: append "elapsed_s rss_kib fds threads rss_anon_kib" of the server to SAMPLES.
SAMPLES=()
sample() {
    local rss anon threads fds
    rss=$(awk '/^VmRSS:/ {print $2}' "/proc/$SERVER_PID/status")
    anon=$(awk '/^RssAnon:/ {print $2}' "/proc/$SERVER_PID/status")
    threads=$(awk '/^Threads:/ {print $2}' "/proc/$SERVER_PID/status")
    fds=$(find "/proc/$SERVER_PID/fd" -mindepth 1 -maxdepth 1 | wc -l)
    SAMPLES+=("$SECONDS $rss $fds $threads $anon")
    printf '%5d s  tests %5d  failures %3d  RSS %6.1f MiB (anon %6.1f)  fds %3d  threads %3d\n' \
        "$SECONDS" "$TESTS" "${#FAILURES[@]}" "$(awk -v k="$rss" 'BEGIN {print k / 1024}')" \
        "$(awk -v k="$anon" 'BEGIN {print k / 1024}')" "$fds" "$threads"
}

# KINDS: "TOOL ARG...", run in turn. TOOL says how the test runs and is checked
# (bench/netchar_bench/soak.py): native = "$NC" KIND 127.0.0.1:PORT ARG... --json --busy-wait 5
# (soak check); netchar = "$NC" ARG... --json (soak peer-check); iperf3 = iperf3 ARG... -J
# (soak iperf3-check); iperf2 = iperf ARG..., stdout and stderr (soak iperf2-check).
NATIVE_KINDS=(
    "native tcp -t 1"
    "native tcp -R -n 10M"
    "native udp -b 100M -t 1"
    "native udp -R -b 50M -t 1"
    "native rr -t 1"
    "native rr --udp -t 1"
    "native crr -n 200"
)
PEER_KINDS=()
SKIPPED=()
if [ "$MODE" != native ]; then
    H=127.0.0.1
    if have iperf3; then
        PEER_KINDS+=(
            "iperf3 -c $H -p $I3_PORT -t 1"
            "iperf3 -c $H -p $I3_PORT -t 1 -R"
            "iperf3 -c $H -p $I3_PORT -t 1 -u -b 50M"
            "iperf3 -c $H -p $I3_PORT -t 1 -P 2"
        )
    else SKIPPED+=("stock iperf3 (not installed: apt-get install iperf3)"); fi
    if [[ $(iperf --version 2>&1 || true) == *"iperf version 2"* ]]; then
        PEER_KINDS+=(
            "iperf2 -c $H -p $I2_PORT -t 1"
            "iperf2 -c $H -p $I2_PORT -t 1 -u -b 50M"
            "iperf2 -c $H -p $I2_PORT -t 1 -r -L $I2_LISTEN"
            "iperf2 -c $H -p $I2_PORT -t 1 -d -L $I2_LISTEN"
            "iperf2 -c $H -p $I2_PORT -t 1 -R"
            "iperf2 -c $H -p $I2_PORT -t 1 -u -b 50M -R"
        )
    else SKIPPED+=("stock iperf 2.x (not installed: apt-get install iperf)"); fi
    PEER_KINDS+=(
        "netchar tcp $H:$I3_PORT --proto iperf3 -t 1"
        "netchar tcp $H:$I3_PORT --proto iperf3 -R -P 2 -t 1"
        "netchar udp $H:$I3_PORT --proto iperf3 -b 50M -t 1"
        "netchar udp $H:$I3_PORT --proto iperf3 -R -b 50M -t 1"
        "netchar tcp $H:$I2_PORT --proto iperf2 -t 1"
        "netchar tcp $H:$I2_PORT --proto iperf2 -R -t 1"
        "netchar tcp $H:$I2_PORT --proto iperf2 -d -t 1"
        "netchar udp $H:$I2_PORT --proto iperf2 -b 50M -t 1"
        "netchar udp $H:$I2_PORT --proto iperf2 -R -b 50M -t 1"
        "netchar tcp $H:$ECHO_PORT --proto echo -t 1"
        "netchar udp $H:$ECHO_PORT --proto echo -b 50M -t 1"
        "netchar rr $H:$ECHO_PORT --proto echo -t 1"
        "netchar rr $H:$ECHO_PORT --proto echo --udp -t 1"
        "netchar tcp $H:$DISCARD_PORT --proto discard -t 1"
        "netchar udp $H:$DISCARD_PORT --proto discard -b 50M -t 1"
        "netchar tcp $H:$CHARGEN_PORT --proto chargen -t 1"
        "netchar suite netio $H -p $NETIO_PORT --proto netio -b 32k --netio-interval 1"
        "netchar udp $H -p $NCT_PORT --nc-test-data-port $NCT_DATA --proto nc-test --pattern 640x1024"
        "netchar udp $H -p $NCT_PORT --nc-test-data-port $NCT_DATA --proto nc-test -R --pattern 640x1024"
        "netchar tcp $H -p $NCT_PORT --nc-test-data-port $NCT_DATA --proto nc-test -l 1024 -n 1M"
        "netchar tcp $H -p $NCT_PORT --nc-test-data-port $NCT_DATA --proto nc-test -R -l 1024 -n 1M"
        "netchar echo $H -p $NCT_PORT --nc-test-data-port $NCT_DATA --proto nc-test --pattern 640x1024"
        "netchar echo $H -p $NCT_PORT --nc-test-data-port $NCT_DATA --proto nc-test --udp --pattern 640x1024"
        "netchar suite ecos $H -p $NCT_PORT --nc-test-data-port $NCT_DATA --proto nc-test --quick"
        "netchar tcp $H:$NP_PORT --proto netperf -t 1"
        "netchar tcp $H:$NP_PORT --proto netperf -R -t 1"
        "netchar udp $H:$NP_PORT --proto netperf -b 50M -t 1"
        "netchar rr $H:$NP_PORT --proto netperf -t 1"
        "netchar rr $H:$NP_PORT --proto netperf --udp -t 1"
        "netchar crr $H:$NP_PORT --proto netperf -t 1"
    )
fi
case $MODE in
    native) KINDS=("${NATIVE_KINDS[@]}") ;;
    peers) KINDS=("${PEER_KINDS[@]}") ;;
    all) KINDS=("${NATIVE_KINDS[@]}" "${PEER_KINDS[@]}") ;;
esac
if [ -n "${SOAK_KINDS:-}" ]; then
    chosen=()
    for k in "${KINDS[@]}"; do [[ $k =~ $SOAK_KINDS ]] && chosen+=("$k"); done
    [ "${#chosen[@]}" -gt 0 ] || { echo "soak.sh: SOAK_KINDS='$SOAK_KINDS' matches no test of mode $MODE" >&2; exit 2; }
    KINDS=("${chosen[@]}")
fi
TESTS=0
FAILURES=()
MAX_TESTS=$((MINUTES * 60 * 100))   # a bound on the loop even if every test failed at once

# run_test SPEC: run one test of KINDS; sets status (its exit status) and verdict ("ok" or why not).
run_test() {
    local tool args checked=0
    read -r tool <<< "${1%% *}"
    read -ra args <<< "${1#* }"
    status=0
    case $tool in
        native)
            timeout "$CLIENT_TIMEOUT_S" "$NC" "${args[0]}" "127.0.0.1:$PORT" "${args[@]:1}" --json --busy-wait 5 \
                >"$WORK/test.out" 2>"$WORK/test.err" || status=$?
            verdict=$(bench_py soak check "$WORK/test.out" 2>&1) || checked=1 ;;
        netchar)
            timeout "$CLIENT_TIMEOUT_S" "$NC" "${args[@]}" --json >"$WORK/test.out" 2>"$WORK/test.err" || status=$?
            verdict=$(bench_py soak peer-check "$WORK/test.out" "${args[@]}" 2>&1) || checked=1 ;;
        iperf3)
            timeout "$CLIENT_TIMEOUT_S" iperf3 "${args[@]}" -J >"$WORK/test.out" 2>"$WORK/test.err" || status=$?
            verdict=$(bench_py soak iperf3-check "$WORK/test.out" 2>&1) || checked=1 ;;
        iperf2)
            : >"$WORK/test.err"
            timeout "$CLIENT_TIMEOUT_S" iperf "${args[@]}" >"$WORK/test.out" 2>&1 || status=$?
            verdict=$(bench_py soak iperf2-check "$WORK/test.out" "${args[@]}" 2>&1) || checked=1 ;;
    esac
    if [ "$status" -eq 124 ]; then verdict="timed out after $CLIENT_TIMEOUT_S s"
    elif [ "$status" -ne 0 ]; then verdict="$verdict; stderr: $(tail -1 "$WORK/test.err")"
    fi
    [ "$status" -eq 0 ] && [ "$checked" -eq 0 ]
}

echo "$VERSION soak ($MODE): $MINUTES min, server on 127.0.0.1:$PORT (pid $SERVER_PID): netchar server ${SERVER_ARGS[*]}; $(uname -r), $(nproc) CPUs, $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2 | sed 's/^ //'), $(date -u +%Y-%m-%d)"
malloc_env=$(env | grep -E '^(MALLOC_|GLIBC_TUNABLES=)' | sort | tr '\n' ' ' || true)
echo "cycle of ${#KINDS[@]} tests${SOAK_KINDS:+ (SOAK_KINDS=$SOAK_KINDS)}${malloc_env:+; allocator settings in the environment of the server: ${malloc_env% }}"
[ "${#SKIPPED[@]}" -eq 0 ] || printf 'skipped: %s\n' "${SKIPPED[@]}"
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
    if ! run_test "$spec"; then
        FAILURES+=("test $TESTS ($spec) at $SECONDS s: exit $status: $verdict")
        cp "$WORK/test.out" "$WORK/failed-$TESTS.out"
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
    cp "/proc/$SERVER_PID/smaps" "$WORK/smaps.last" 2>/dev/null || true
fi
logged=$(grep -c -E '(^| )test from ' "$WORK/server.log" || true)
logged_by=$(sed -n 's/^\(.*\) test from .*/\1/p; s/^test from .*/native/p' "$WORK/server.log" | sort | uniq -c |
    awk '{printf "%s%s %d", (NR > 1 ? ", " : ""), $2, $1}')
server_status=0
kill -TERM "$SERVER_PID" 2>/dev/null || true
wait "$SERVER_PID" 2>/dev/null || server_status=$?
SERVER_PID=

# bench_py soak summary: the figures and the verdict from SAMPLES (stdin: "elapsed_s rss_kib fds
# threads rss_anon_kib"; bench/netchar_bench/soak.py).
flat_failed=0
printf '%s\n' "${SAMPLES[@]}" | SOAK_TESTS=$TESTS SOAK_FAILURES=${#FAILURES[@]} SOAK_WARMUP=$WARMUP_S \
    SOAK_LOGGED=$logged SOAK_LOGGED_BY=$logged_by SOAK_SERVER_STATUS=$server_status bench_py soak summary || flat_failed=1

if [ "${#FAILURES[@]}" -gt 0 ]; then
    echo "failures:"
    printf '  %s\n' "${FAILURES[@]}"
fi
[ "$server_status" -eq 0 ] || echo "the server exited with status $server_status on SIGTERM (expected 0)"
echo "work directory (server log, failed tests, smaps.last): $WORK"
if [ "$flat_failed" = 1 ] || [ "${#FAILURES[@]}" -gt 0 ] || [ "$server_status" -ne 0 ]; then
    exit 1
fi
