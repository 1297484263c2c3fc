#!/usr/bin/env bash
# bench/rr_pair.sh — netchar's and netperf's request/response at the same time, on the same CPUs.
#
# The rounds of newest.sh run the tools one after the other, and on a shared VM the machine's
# speed moves between two runs by more than the tools differ (10-60% between rounds). Here both
# pairs (client and server of each tool) run together for DUR seconds, the two clients pinned to
# CPU and the two servers to SERVER_CPU (the same CPU by default): each pair has one runnable
# thread at a time, so the scheduler splits the CPUs between the two tools, and whatever the
# machine does in those seconds it does to both. Each tool's CPU time is read from the scheduler
# (/proc/PID/task/*/schedstat, every thread of its client and server) over the same window, so
# the figure that compares is CPU microseconds per transaction: the work each does per
# transaction, measured side by side; the report gives each end's share too.
#
#   NETPERF=PATH NETSERVER=PATH bash bench/rr_pair.sh         # TCP and UDP, 5 rounds of 10 s
#   JFLAG=-j NETPERF=... NETSERVER=... bash bench/rr_pair.sh  # netperf timing every transaction
#   NODELAY=1 PROTOS=tcp NETPERF=... bash bench/rr_pair.sh     # netperf's TCP with TCP_NODELAY, as netchar's
#   SERVER_CPU=1 NETPERF=... NETSERVER=... bash bench/rr_pair.sh  # cross core: the servers on CPU 1
# Knobs: NC (default target/release/netchar, built if missing), DUR=10, ROUNDS=5, CPU=0 (the
# clients), SERVER_CPU (the servers; default CPU), PROTOS="tcp udp", LEN=1 (request and response
# bytes, both tools), JFLAG ("" or -j), NODELAY (0, or 1: netperf -- -D, TCP_NODELAY at both
# ends, which netchar's rr always sets and netperf's TCP_RR does not unless asked), PORT_BASE=15420.
# Cross core, each CPU runs one end of both tools, so neither CPU idles between the two halves of
# a transaction as it does when a tool runs alone: the figure is the work per transaction, not
# the round-trip time (newest.sh measures that, one tool at a time).
# Needs netperf and netserver (by path: Debian has no package), taskset, python3.
set -u -o pipefail
BENCH=rr_pair
BENCH_DIR=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
. "$BENCH_DIR/lib.sh" || exit 2
ROOT=$(cd "$BENCH_DIR/.." && pwd)
NC=${NC:-$ROOT/target/release/netchar}
DUR=${DUR:-10} ROUNDS=${ROUNDS:-5} CPU=${CPU:-0} SERVER_CPU=${SERVER_CPU:-$CPU} LEN=${LEN:-1} PROTOS=${PROTOS:-"tcp udp"} JFLAG=${JFLAG:-} NODELAY=${NODELAY:-0} P=${PORT_BASE:-15420}
need_posint DUR ROUNDS LEN
need_pair_dur
need_uint CPU SERVER_CPU P
case $JFLAG in "" | -j) ;; *) echo "rr_pair.sh: JFLAG is empty or -j (got '$JFLAG')" >&2; exit 2 ;; esac
case $NODELAY in 0 | 1) ;; *) echo "rr_pair.sh: NODELAY is 0 or 1 (got '$NODELAY')" >&2; exit 2 ;; esac
find_peers
[ -n "$NETPERF" ] && [ -n "$NETSERVER" ] || { echo "rr_pair.sh: needs NETPERF=PATH NETSERVER=PATH (netperf 2.7 built from its source)" >&2; exit 2; }
for t in taskset python3; do have "$t" || { echo "rr_pair.sh: $t is required" >&2; exit 2; }; done
if [ ! -x "$NC" ]; then
  (cd "$ROOT" && cargo build --release -q -p netchar) || { echo "rr_pair.sh: cannot build netchar" >&2; exit 1; }
fi
WORK=$(mktemp -d -t netchar-rr-pair.XXXXXX)
PIDS=()
trap 'pair_stop "${PIDS[@]}"' EXIT

ncport=$P npport=$((P + 1))
run_pid "$WORK/ncs.pid" taskset -c "$SERVER_CPU" "$NC" server -B 127.0.0.1 -p "$ncport" > "$WORK/ncs.log" 2>&1 &
run_pid "$WORK/nps.pid" taskset -c "$SERVER_CPU" "$NETSERVER" -D -f -L 127.0.0.1 -p "$npport" > "$WORK/nps.log" 2>&1 &
NCS=$(pid_of "$WORK/ncs.pid") NPS=$(pid_of "$WORK/nps.pid")
PIDS=("$NCS" "$NPS")
pair_listening rr_pair.sh "$ncport" "$WORK/ncs.log" "$npport" "$WORK/nps.log"
place="all four processes on CPU $CPU"
[ "$SERVER_CPU" != "$CPU" ] && place="the clients on CPU $CPU, the servers on CPU $SERVER_CPU"
echo "# rr_pair: netchar $("$NC" --version 2>/dev/null | awk '{print $2}') and ${PEER_VER[netperf]}${JFLAG:+ with -j}$([ "$NODELAY" = 1 ] && echo ' with TCP_NODELAY (-- -D)') at the same time, $LEN-byte requests and responses, $place; $ROUNDS rounds of ${DUR} s; Linux $(uname -r), $(nproc) CPUs; load average $(load_average)"
printf '%-5s %5s %12s %12s %8s %14s %14s %8s %8s %8s\n' proto round "netchar t/s" "netperf t/s" ratio "netchar us/t" "netperf us/t" cost client server
for proto in $PROTOS; do
  for ((r = 1; r <= ROUNDS; r++)); do
    d=$WORK/$proto.$r
    u=(); [ "$proto" = udp ] && u=(--udp)
    nt=TCP_RR; [ "$proto" = udp ] && nt=UDP_RR
    j=(); [ -n "$JFLAG" ] && j=("$JFLAG")
    nd=(); [ "$NODELAY" = 1 ] && [ "$proto" = tcp ] && nd=(-D)
    run_pid "$d.ncc.pid" taskset -c "$CPU" "$NC" rr 127.0.0.1 -p "$ncport" -t "$DUR" -A "$CPU,$SERVER_CPU" -l "$LEN" -i 0 "${u[@]}" --json > "$d.nc.json" 2> "$d.nc.err" & jobs_=($!)
    run_pid "$d.npc.pid" taskset -c "$CPU" "$NETPERF" -H 127.0.0.1 -p "$npport" -t "$nt" -l "$DUR" -P 0 -T "$CPU,$SERVER_CPU" "${j[@]}" -- -r "$LEN,$LEN" "${nd[@]}" -o THROUGHPUT,ELAPSED_TIME > "$d.np.txt" 2> "$d.np.err" & jobs_+=($!)
    ncc=$(pid_of "$d.ncc.pid") npc=$(pid_of "$d.npc.pid")
    # The window: from 1 s in (both set up) to 1 s before the end, the same for both tools.
    read -r ncc_ns ncs_ns npc_ns nps_ns wall < <(pair_window "$DUR" "$ncc" "$NCS" "$npc" "$NPS")
    wait "${jobs_[@]}"
    # netserver -f serves the next test in its one process; netchar's server stays up.
    python3 - "$d" "$proto" "$r" "$ncc_ns" "$ncs_ns" "$npc_ns" "$nps_ns" "$wall" <<'PY' || FAILED=1
import json, sys
d, proto, r = sys.argv[1:4]
ncc_ns, ncs_ns, npc_ns, nps_ns, wall_ns = map(int, sys.argv[4:9])
try:
    nc = json.load(open(d + '.nc.json'))['summary']['rr']['transactions_per_second']
    rows = [l.strip().split(',') for l in open(d + '.np.txt') if l.strip() and l.strip()[0].isdigit()]
    np = float(rows[-1][0])
except Exception as e:  # one line saying which tool gave no figure
    print('%-5s %5s  no figure: %s (see %s.*)' % (proto, r, e, d))
    sys.exit(1)
# The CPU each tool got over the window, per transaction at its own rate (the rates are the
# tools' whole-test figures; the window is the middle of the same test).
secs = wall_ns / 1e9
ncc_us, ncs_us = ncc_ns / 1e3 / (nc * secs), ncs_ns / 1e3 / (nc * secs)
npc_us, nps_us = npc_ns / 1e3 / (np * secs), nps_ns / 1e3 / (np * secs)
nc_us, np_us = ncc_us + ncs_us, npc_us + nps_us
print('%-5s %5s %12.0f %12.0f %8.3f %14.3f %14.3f %8.3f %8.3f %8.3f' % (proto, r, nc, np, nc / np, nc_us, np_us, nc_us / np_us, ncc_us / npc_us, ncs_us / nps_us))
PY
  done
done
echo "(ratio: netchar's transactions/s over netperf's; us/t: CPU microseconds per transaction, client and server together; cost: netchar's us/t over netperf's, below 1 when netchar does less work per transaction; client, server: the same for each end alone)"
echo "raw outputs: \$TMPDIR/$(basename "$WORK")"
exit "${FAILED:-0}"
