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

CHECK_PY=$(cat <<'EOF'
import json, os, re, sys
from collections import defaultdict

work = sys.argv[1]
status = dict(l.split() for l in open(f"{work}/status.tsv"))
rows, failures, server_rx = [], [], []
for line in open(f"{work}/manifest.tsv"):
    i, kind, title, n = line.rstrip("\n").split("\t")
    n = int(n)
    problems = []
    row = dict(i=i, kind=kind, n=n, tx="-", rx="-", lost="-", conc="-", rate="-")
    if status[i] != "0":
        err = open(f"{work}/client.{i}.err").read().strip().splitlines()
        problems.append(f"exit {status[i]}" + (f": {err[-1]}" if err else ""))
    try:
        doc = json.load(open(f"{work}/client.{i}.json"))
    except Exception as e:
        doc = None
        problems.append(f"no JSON result ({e})")
    if doc is not None and doc.get("error") is not None:
        problems.append(f"error: {doc['error']}")
    if doc is not None and "test" in doc:
        test = doc["test"]
        if test.get("title") != title:
            problems.append(f"title {test.get('title')!r}, expected {title!r}")
        if test["kind"] != kind or test["end"].get("bytes") != n:
            problems.append(f"ran {test['kind']} {test['end']}, asked for {kind} -n {n}")
        up = doc["summary"].get("up")
        ends = defaultdict(dict)
        for s in doc["streams"]:
            ends[s["id"]][s["role"]] = s
        for sid, e in sorted(ends.items()):
            if set(e) != {"sender", "receiver"} or e["receiver"]["measured_by"] != "server":
                problems.append(f"stream {sid}: records {sorted(e)}")
                continue
            if kind == "tcp" and e["sender"]["bytes"] != e["receiver"]["bytes"]:
                problems.append(f"stream {sid}: wrote {e['sender']['bytes']}, server read {e['receiver']['bytes']}")
            if kind == "udp":
                sent, got = e["sender"]["udp_sent"]["packets"], e["receiver"]["udp_received"]
                if sent != got["packets"] + got["lost"]:
                    problems.append(f"stream {sid}: sent {sent} != received {got['packets']} + lost {got['lost']}")
        if up is None:
            problems.append("no up summary")
        else:
            tx, rx = up["sender"]["total_bytes"], up["receiver"]["total_bytes"]
            row.update(tx=tx, rx=rx, conc=test.get("concurrent_tests", "?"),
                       rate=f"{up['receiver']['bits_per_second'] / 1e6:.1f}")
            server_rx.append(rx)
            if tx != n:
                problems.append(f"sent {tx} bytes, its -n is {n}")
            if kind == "tcp":
                row["lost"] = ""
                if rx != n or not up["bytes_match"]:
                    problems.append(f"server read {rx} bytes, this client's -n is {n}")
            else:
                got = up["receiver"]
                row["lost"] = got["lost"]
                want_packets = n // 1472
                if up["sender"]["packets"] != want_packets or got["packets"] + got["lost"] != want_packets:
                    problems.append(f"datagrams: sent {up['sender']['packets']}, server received {got['packets']} + lost {got['lost']}, this client's -n is {want_packets} datagrams")
                if rx != 1472 * got["packets"] or (got["lost"] == 0 and rx != n):
                    problems.append(f"server read {rx} bytes in {got['packets']} datagrams, this client's -n is {n}")
                if not up["packets_accounted"]:
                    problems.append("packets_accounted is false")
    row["ok"] = "ok" if not problems else "FAIL"
    rows.append(row)
    failures += [f"client {i} ({title}): {p}" for p in problems]

logged = [int(m.group(1)) for m in re.finditer(r"^test from .*: received (\d+) bytes", open(f"{work}/server.log").read(), re.M)]
if len(logged) != len(rows):
    failures.append(f"the server logged {len(logged)} tests, {len(rows)} clients ran")
elif sorted(logged) != sorted(server_rx):
    failures.append("the byte counts in the server's log are not the clients' receiver figures")

print(f"{'i':>3} {'kind':4} {'-n bytes':>10} {'sent':>10} {'server read':>11} {'lost':>5} {'at once':>7} {'Mbit/s':>8}  result")
for r in rows:
    print(f"{r['i']:>3} {r['kind']:4} {r['n']:>10} {r['tx']:>10} {r['rx']:>11} {r['lost']:>5} {r['conc']:>7} {r['rate']:>8}  {r['ok']}")
ok = sum(r["ok"] == "ok" for r in rows)
conc = [r["conc"] for r in rows if isinstance(r["conc"], int)]
udp_lost = sum(r["lost"] for r in rows if isinstance(r["lost"], int))
print()
print(f"clients ok       {ok} of {len(rows)}; server logged {len(logged)} tests, their byte counts {'match' if sorted(logged) == sorted(server_rx) else 'DO NOT match'} the clients' results")
print(f"at once          up to {max(conc) if conc else '?'} tests on the server (concurrent_tests in the results)")
print(f"UDP lost         {udp_lost} datagrams in all (each counted: sent = received + lost)")
if failures:
    print("failures:")
    for f in failures:
        print(f"  {f}")
    sys.exit(1)
EOF
)

checks_failed=0
python3 -c "$CHECK_PY" "$WORK" || checks_failed=1
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
