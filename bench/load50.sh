#!/usr/bin/env bash
# Load test: 50 tests at once against one `netchar server --max-concurrent 50
# --max-per-source 200` on 127.0.0.1 (a free port the kernel picks). Odd-numbered clients run
# `tcp -n (20M + i*1000)`, even-numbered ones `udp -b 20M -n (1472 * (1358 + i))` (about 2 MB:
# UDP sends whole 1472-byte datagrams, so a UDP -n is a multiple of 1472 to be exact), each
# with --json --busy-wait 20 and its own --title, so every test has byte and datagram counts
# of its own. All 50 wait at a start gate and are released together.
#
# Checked for every client: exit status 0, `error` null, its own title and -n in its result,
# exact accounting (TCP: the server read every byte the client wrote, per stream; UDP: sent =
# received + lost per stream), and its identity: the server-side receiver counted exactly this
# client's -n (UDP: this client's datagram count, received + lost, and, when nothing was lost,
# its bytes). Across clients: the server logged 50 tests and the byte counts in its log are
# exactly the clients' receiver figures. Prints one row per client; exits 1 on any failure,
# 2 on bad usage or when the server could not be started.
#
#   bash bench/load50.sh
#   NETCHAR=path/to/netchar bash bench/load50.sh    # that binary, no build
#
# Without NETCHAR it runs `cargo build --release` and uses target/release/netchar (or
# $CARGO_TARGET_DIR/release/netchar), copied away so a rebuild during the run changes nothing.
# Needs python3 (to read the JSON). Talks only to 127.0.0.1. The work directory (server log,
# every client's JSON and stderr) is kept and named at the end.
set -euo pipefail

[ $# -eq 0 ] || { echo "usage: bench/load50.sh  (no arguments; NETCHAR=path to use a built binary)" >&2; exit 2; }
CLIENTS=50
CLIENT_TIMEOUT_S=120
ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
command -v python3 >/dev/null || { echo "load50.sh: needs python3 to read the JSON results" >&2; exit 2; }

WORK=$(mktemp -d -t netchar-load50.XXXXXX)
BENCH=load50
NO_BUILD=0
# shellcheck source=bench/lib.sh
. "$ROOT/bench/lib.sh" || exit 2
build_netchar
VERSION="$("$NC" --version | head -1) ($NC_REV)"

SERVER_PID=
PIDS=()
# shellcheck disable=SC2317  # run by the EXIT trap
cleanup() {
    local p
    for p in "${PIDS[@]}"; do kill -TERM "$p" 2>/dev/null || true; done
    if [ -n "$SERVER_PID" ] && kill -0 "$SERVER_PID" 2>/dev/null; then
        kill -TERM "$SERVER_PID" 2>/dev/null || true
        wait "$SERVER_PID" 2>/dev/null || true
    fi
}
trap cleanup EXIT
trap 'exit 130' INT TERM

"$NC" server -B 127.0.0.1 -p 0 --max-concurrent 50 --max-per-source 200 2>"$WORK/server.log" &
SERVER_PID=$!
PORT=
for _ in $(seq 50); do
    PORT=$(sed -n 's/.*listening on 127\.0\.0\.1:\([0-9][0-9]*\).*/\1/p' "$WORK/server.log" | head -1)
    [ -n "$PORT" ] && break
    kill -0 "$SERVER_PID" 2>/dev/null || break
    sleep 0.1
done
if [ -z "$PORT" ]; then
    echo "load50.sh: the server did not start; its log:" >&2
    cat "$WORK/server.log" >&2
    exit 2
fi

# server_state: "rss_kib fds threads" of the server.
server_state() {
    echo "$(awk '/^VmRSS:/ {print $2}' "/proc/$SERVER_PID/status") $(find "/proc/$SERVER_PID/fd" -mindepth 1 -maxdepth 1 | wc -l) $(awk '/^Threads:/ {print $2}' "/proc/$SERVER_PID/status")"
}

echo "$VERSION load50: $CLIENTS tests at once against 127.0.0.1:$PORT (pid $SERVER_PID) --max-concurrent 50 --max-per-source 200; $(uname -r), $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2 | sed 's/^ //'), $(date -u +%Y-%m-%d)"
read -r rss_before fds_before threads_before <<< "$(server_state)"

# One manifest row per client: i kind title n; the checker reads it with the results.
: > "$WORK/manifest.tsv"
for i in $(seq "$CLIENTS"); do
    if [ $((i % 2)) -eq 1 ]; then
        kind=tcp; n=$((20000000 + i * 1000)); args=(tcp "127.0.0.1:$PORT" -n "$n")
    else
        kind=udp; n=$((1472 * (1358 + i))); args=(udp "127.0.0.1:$PORT" -b 20M -n "$n")
    fi
    title="load50-$i-$kind"
    printf '%s\t%s\t%s\t%s\n' "$i" "$kind" "$title" "$n" >> "$WORK/manifest.tsv"
    (
        touch "$WORK/ready.$i"
        for _ in $(seq 3000); do [ -e "$WORK/go" ] && break; sleep 0.01; done
        [ -e "$WORK/go" ] || exit 125
        exec timeout "$CLIENT_TIMEOUT_S" "$NC" "${args[@]}" --json --busy-wait 20 --title "$title" \
            >"$WORK/client.$i.json" 2>"$WORK/client.$i.err"
    ) &
    PIDS+=($!)
done
for _ in $(seq 3000); do
    [ "$(find "$WORK" -maxdepth 1 -name 'ready.*' | wc -l)" -eq "$CLIENTS" ] && break
    sleep 0.01
done
touch "$WORK/go"
started=$EPOCHREALTIME
SECONDS=0

# While they run: the server's peak RSS, fds and threads (every 0.2 s).
rss_max=$rss_before; fds_max=$fds_before; threads_max=$threads_before
while [ "$SECONDS" -lt $((CLIENT_TIMEOUT_S + 30)) ]; do
    alive=0
    for p in "${PIDS[@]}"; do kill -0 "$p" 2>/dev/null && alive=$((alive + 1)); done
    [ "$alive" -eq 0 ] && break
    if kill -0 "$SERVER_PID" 2>/dev/null; then
        read -r rss fds threads <<< "$(server_state)"
        [ "$rss" -gt "$rss_max" ] && rss_max=$rss
        [ "$fds" -gt "$fds_max" ] && fds_max=$fds
        [ "$threads" -gt "$threads_max" ] && threads_max=$threads
    fi
    sleep 0.2
done
elapsed=$(awk -v a="$started" -v b="$EPOCHREALTIME" 'BEGIN {printf "%.2f", b - a}')
: > "$WORK/status.tsv"
for i in $(seq "$CLIENTS"); do
    status=0
    wait "${PIDS[$((i - 1))]}" || status=$?
    printf '%s\t%s\n' "$i" "$status" >> "$WORK/status.tsv"
done
PIDS=()

# After: up to 5 s for the server to tear the last tests down, then its state and its exit.
rss_after='?'; fds_after='?'; threads_after='?'
if kill -0 "$SERVER_PID" 2>/dev/null; then
    for _ in $(seq 50); do
        read -r rss_after fds_after threads_after <<< "$(server_state)"
        [ "$fds_after" -eq "$fds_before" ] && [ "$threads_after" -eq "$threads_before" ] && break
        sleep 0.1
    done
fi
server_status=0
kill -TERM "$SERVER_PID" 2>/dev/null || true
wait "$SERVER_PID" 2>/dev/null || server_status=$?
SERVER_PID=


checks_failed=0
# Every client's result against its manifest row, and the server's log (bench/netchar_bench/load50.py).
bench_py load50 "$WORK" || checks_failed=1
mib() { if [ "$1" = '?' ]; then echo '?'; else awk -v k="$1" 'BEGIN {printf "%.1f MiB", k / 1024}'; fi; }
echo "elapsed          $elapsed s from the start gate until every client had exited (polled every 0.2 s)"
echo "server RSS       before $(mib "$rss_before"), max $(mib "$rss_max"), after $(mib "$rss_after")"
echo "server fds       before $fds_before, max $fds_max, after $fds_after"
echo "server threads   before $threads_before, max $threads_max, after $threads_after"
echo "server exit      status $server_status on SIGTERM"
echo "work directory (server log, every client's JSON and stderr): $WORK"
if [ "$fds_after" != "$fds_before" ] || [ "$threads_after" != "$threads_before" ]; then
    echo "the server did not return to its fds/threads before the test"
    checks_failed=1
fi
[ "$server_status" -eq 0 ] || checks_failed=1
exit "$checks_failed"
