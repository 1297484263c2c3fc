#!/usr/bin/env bash
# bench/rr_pair.sh — netchar's and a peer's request/response at the same time, on the same CPUs
# (the peer: netperf, or sockperf with PEER=sockperf).
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
# Knobs: NC (default target/release/netchar, built if missing), PEER=netperf (or sockperf),
# DUR=10, ROUNDS=5, CPU=0 (the clients), SERVER_CPU (the servers; default CPU), PROTOS="tcp udp",
# LEN=1 (request and response bytes, both tools; sockperf's smallest message is 14 B, so
# PEER=sockperf needs LEN >= 14), JFLAG ("" or -j), NODELAY (0, or 1: netperf -- -D, TCP_NODELAY
# at both ends, which netchar's rr always sets and netperf's TCP_RR does not unless asked),
# PORT_BASE=15420 (and the two ports after it: netserver's control port and its data port).
# The transactions in the window are the replies the kernel counted for each client: TCP from
# the client sockets' bytes_received (ss), UDP from nftables counters on the datagrams each
# server sends (so UDP needs nft and root); the t/s columns are the window's. A tool's rate over
# its whole test would count the moments it ran alone (one tool's test starts or ends a little
# before the other's, and alone a transaction costs less).
# With PEER=sockperf: sockperf pp and sr block in recvfrom as netchar and netperf do, and
# sockperf times every message, as netchar does.  Its client waits about 2 s before its first
# message and sorts its samples after the last, so it runs 5 s longer than netchar and netchar
# starts once its messages flow; the window is netchar's middle, when both run.
# The last lines give each protocol's mean cost over the rounds with its 95% confidence interval
# (Student's t), the figure that says whether netchar does more work per transaction.
# Cross core, each CPU runs one end of both tools, so neither CPU idles between the two halves of
# a transaction as it does when a tool runs alone: the figure is the work per transaction, not
# the round-trip time (newest.sh measures that, one tool at a time).
# Needs netperf and netserver (by path: Debian has no package), or sockperf (Debian's or by
# SOCKPERF=PATH), ss, nft (as root, for UDP), taskset, python3.
set -u -o pipefail
BENCH=rr_pair
BENCH_DIR=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
. "$BENCH_DIR/lib.sh" || exit 2
ROOT=$(cd "$BENCH_DIR/.." && pwd)
NC=${NC:-$ROOT/target/release/netchar}
PEER=${PEER:-netperf} DUR=${DUR:-10} ROUNDS=${ROUNDS:-5} CPU=${CPU:-0} SERVER_CPU=${SERVER_CPU:-$CPU} LEN=${LEN:-1} PROTOS=${PROTOS:-"tcp udp"} JFLAG=${JFLAG:-} NODELAY=${NODELAY:-0} P=${PORT_BASE:-15420}
need_posint DUR ROUNDS LEN
need_pair_dur
need_uint CPU SERVER_CPU P
case $JFLAG in "" | -j) ;; *) echo "rr_pair.sh: JFLAG is empty or -j (got '$JFLAG')" >&2; exit 2 ;; esac
case $NODELAY in 0 | 1) ;; *) echo "rr_pair.sh: NODELAY is 0 or 1 (got '$NODELAY')" >&2; exit 2 ;; esac
case $PEER in
  netperf) ;;
  sockperf) [ "$LEN" -ge 14 ] || { echo "rr_pair.sh: PEER=sockperf needs LEN=14 or more (sockperf's smallest message)" >&2; exit 2; }
            [ -z "$JFLAG" ] && [ "$NODELAY" = 0 ] || { echo "rr_pair.sh: JFLAG and NODELAY are netperf's (PEER=netperf)" >&2; exit 2; } ;;
  *) echo "rr_pair.sh: PEER is netperf or sockperf (got '$PEER')" >&2; exit 2 ;;
esac
find_peers
if [ "$PEER" = netperf ]; then
  [ -n "$NETPERF" ] && [ -n "$NETSERVER" ] || { echo "rr_pair.sh: needs NETPERF=PATH NETSERVER=PATH (netperf 2.7 built from its source)" >&2; exit 2; }
else
  [ -n "$SOCKPERF" ] || { echo "rr_pair.sh: needs sockperf (apt-get install sockperf, or SOCKPERF=PATH)" >&2; exit 2; }
fi
for t in taskset python3; do have "$t" || { echo "rr_pair.sh: $t is required" >&2; exit 2; }; done
if [ ! -x "$NC" ]; then
  (cd "$ROOT" && cargo build --release -q -p netchar) || { echo "rr_pair.sh: cannot build netchar" >&2; exit 1; }
fi
WORK=$(mktemp -d -t netchar-rr-pair.XXXXXX)
PIDS=()
trap 'pair_stop "${PIDS[@]}"' EXIT

# The ports each tool's data goes to: netchar's tests use its server's port; netperf's data
# connection goes to a port of its own (test-specific -P), sockperf's to its server's port.
ncport=$P npport=$((P + 1)) npdata=$((P + 2))
[ "$PEER" = sockperf ] && npdata=$npport
# One netchar server for every round; the peer's: one netserver (it serves both protocols),
# or a sockperf sr per protocol on the same port (TCP and UDP). The window reads their threads
# while the tests run.
run_pid "$WORK/ncs.pid" taskset -c "$SERVER_CPU" "$NC" server -B 127.0.0.1 -p "$ncport" > "$WORK/ncs.log" 2>&1 &
NCS=$(pid_of "$WORK/ncs.pid")
PIDS=("$NCS")
declare -A PSRV=()
if [ "$PEER" = netperf ]; then
  run_pid "$WORK/nps.pid" taskset -c "$SERVER_CPU" "$NETSERVER" -D -f -L 127.0.0.1 -p "$npport" > "$WORK/nps.log" 2>&1 &
  PSRV[tcp]=$(pid_of "$WORK/nps.pid"); PSRV[udp]=${PSRV[tcp]}
  PIDS+=("${PSRV[tcp]}")
  pair_listening rr_pair.sh "$ncport" "$WORK/ncs.log" "$npport" "$WORK/nps.log"
else
  run_pid "$WORK/spt.pid" taskset -c "$SERVER_CPU" "$SOCKPERF" sr --tcp -i 127.0.0.1 -p "$npport" > "$WORK/spt.log" 2>&1 &
  run_pid "$WORK/spu.pid" taskset -c "$SERVER_CPU" "$SOCKPERF" sr -i 127.0.0.1 -p "$npport" > "$WORK/spu.log" 2>&1 &
  PSRV[tcp]=$(pid_of "$WORK/spt.pid") PSRV[udp]=$(pid_of "$WORK/spu.pid")
  PIDS+=("${PSRV[tcp]}" "${PSRV[udp]}")
  pair_listening rr_pair.sh "$ncport" "$WORK/ncs.log" "$npport" "$WORK/spt.log"
  for ((i = 0; i < 100; i++)); do port_in_use udp "$npport" && break; sleep 0.05; done
  port_in_use udp "$npport" || { echo "rr_pair.sh: sockperf sr is not on UDP port $npport: $(head -c 300 "$WORK/spu.log")" >&2; exit 1; }
fi
# The replies each client received, counted by the kernel: TCP from each client socket's
# bytes_received (ss), UDP from nftables counters on datagrams leaving each server's data port
# (every tool answers from the port its client sent to).
if [[ " $PROTOS " == *" udp "* ]]; then
  have nft && [ "$(id -u)" = 0 ] || { echo "rr_pair.sh: UDP rounds count the replies with nft (as root); or PROTOS=tcp" >&2; exit 2; }
  NFT_TABLE=rr_pair_$$
  nft -f - <<NFT || { echo "rr_pair.sh: cannot add the nftables counters" >&2; exit 1; }
table inet $NFT_TABLE {
  counter nc {
  }
  counter peer {
  }
  chain out {
    type filter hook output priority 0; policy accept;
    udp sport $ncport counter name nc
    udp sport $npdata counter name peer
  }
}
NFT
  trap 'pair_stop "${PIDS[@]}"; nft delete table inet "$NFT_TABLE" 2>/dev/null' EXIT
  trap 'exit 130' INT; trap 'exit 143' TERM   # so that the EXIT trap removes the table
fi
# replies PROTO: "netchar peer", the replies each tool's client received so far.
replies() {
  if [ "$1" = tcp ]; then
    local p n=()
    for p in "$ncport" "$npdata"; do
      n+=("$(ss -tinH "dport = :$p" | grep -o 'bytes_received:[0-9]*' | awk -F: -v l="$LEN" '{b += $2} END {printf "%d", b / l}')")
    done
    echo "${n[*]}"
  else
    nft list table inet "$NFT_TABLE" | awk '/counter (nc|peer) \{/ {c = $2} /^[[:space:]]*packets / && c {for (i = 1; i <= NF; i++) if ($i == "packets") v[c] = $(i + 1); c = ""} END {print v["nc"], v["peer"]}'
  fi
}
place="all four processes on CPU $CPU"
[ "$SERVER_CPU" != "$CPU" ] && place="the clients on CPU $CPU, the servers on CPU $SERVER_CPU"
echo "# rr_pair: netchar $("$NC" --version 2>/dev/null | awk '{print $2}') and ${PEER_VER[$PEER]}${JFLAG:+ with -j}$([ "$NODELAY" = 1 ] && echo ' with TCP_NODELAY (-- -D)') at the same time, $LEN-byte requests and responses, $place; $ROUNDS rounds of ${DUR} s; Linux $(uname -r), $(nproc) CPUs; load average $(load_average)"
printf '%-5s %5s %12s %12s %8s %14s %14s %8s %8s %8s\n' proto round "netchar t/s" "$PEER t/s" ratio "netchar us/t" "$PEER us/t" cost client server
# flowing PID BEFORE_NS: waits (up to 10 s) until the process PID used 2 ms of CPU more than
# BEFORE_NS: a server whose client's messages flow.
flowing() {
  local i
  for ((i = 0; i < 500; i++)); do [ $(($(cpu_ns "$1") - $2)) -gt 2000000 ] && return 0; sleep 0.02; done
  return 1
}
for proto in $PROTOS; do
  for ((r = 1; r <= ROUNDS; r++)); do
    d=$WORK/$proto.$r
    u=(); [ "$proto" = udp ] && u=(--udp)
    nc_cmd=(taskset -c "$CPU" "$NC" rr 127.0.0.1 -p "$ncport" -t "$DUR" -A "$CPU,$SERVER_CPU" -l "$LEN" -i 0 "${u[@]}" --json)
    if [ "$PEER" = netperf ]; then
      nt=TCP_RR; [ "$proto" = udp ] && nt=UDP_RR
      j=(); [ -n "$JFLAG" ] && j=("$JFLAG")
      nd=(); [ "$NODELAY" = 1 ] && [ "$proto" = tcp ] && nd=(-D)
      run_pid "$d.ncc.pid" "${nc_cmd[@]}" > "$d.nc.json" 2> "$d.nc.err" & jobs_=($!)
      run_pid "$d.npc.pid" taskset -c "$CPU" "$NETPERF" -H 127.0.0.1 -p "$npport" -t "$nt" -l "$DUR" -P 0 -T "$CPU,$SERVER_CPU" "${j[@]}" -- -r "$LEN,$LEN" -P ",$npdata" "${nd[@]}" -o THROUGHPUT,ELAPSED_TIME > "$d.np.txt" 2> "$d.np.err" & jobs_+=($!)
      ncc=$(pid_of "$d.ncc.pid") npc=$(pid_of "$d.npc.pid")
      # The window: from 1 s in (both set up) to 1 s before the end, the same for both tools.
      sleep 1
      read -r nc0 np0 < <(replies "$proto")
      read -r ncc_ns ncs_ns npc_ns nps_ns wall < <(pair_window_at "$((DUR - 2))" "$ncc" "$NCS" "$npc" "${PSRV[$proto]}")
      read -r nc1 np1 < <(replies "$proto")
      wait "${jobs_[@]}"
      # netserver -f serves the next test in its one process; netchar's server stays up.
    else
      # sockperf pp waits about 2 s before its first message and sorts its samples after the
      # last: it runs 5 s longer than netchar, netchar starts once its messages flow, and the
      # window (netchar's middle) has both running.
      sp=(--tcp); [ "$proto" = udp ] && sp=()
      sps0=$(cpu_ns "${PSRV[$proto]}")
      run_pid "$d.npc.pid" taskset -c "$CPU" "$SOCKPERF" pp -i 127.0.0.1 "${sp[@]}" -p "$npport" -t "$((DUR + 5))" -m "$LEN" --full-rtt > "$d.np.txt" 2>&1 & npj=$!
      npc=$(pid_of "$d.npc.pid")
      flowing "${PSRV[$proto]}" "$sps0" || echo "$proto $r: sockperf's messages did not flow within 10 s" >&2
      sleep 0.5
      run_pid "$d.ncc.pid" "${nc_cmd[@]}" > "$d.nc.json" 2> "$d.nc.err" & jobs_=($!)
      ncc=$(pid_of "$d.ncc.pid")
      sleep 1
      read -r nc0 np0 < <(replies "$proto")
      read -r ncc_ns ncs_ns npc_ns nps_ns wall < <(pair_window_at "$((DUR - 2))" "$ncc" "$NCS" "$npc" "${PSRV[$proto]}")
      read -r nc1 np1 < <(replies "$proto")
      wait "${jobs_[@]}"
      kill -INT "$npc" 2>/dev/null; wait "$npj"
    fi
    echo "$((nc1 - nc0)) $((np1 - np0))" > "$d.replies"
    python3 - "$d" "$proto" "$r" "$ncc_ns" "$ncs_ns" "$npc_ns" "$nps_ns" "$wall" "$PEER" <<'PY' || FAILED=1
import json, sys
d, proto, r = sys.argv[1:4]
ncc_ns, ncs_ns, npc_ns, nps_ns, wall_ns = map(int, sys.argv[4:9])
peer = sys.argv[9]
try:
    own = json.load(open(d + '.nc.json'))['summary']['rr']['transactions_per_second']
    if peer == 'netperf':
        rows = [l.strip().split(',') for l in open(d + '.np.txt') if l.strip() and l.strip()[0].isdigit()]
        peer_own = float(rows[-1][0])
    nc_tx, np_tx = map(int, open(d + '.replies').read().split())
    if not (nc_tx > 0 and np_tx > 0):
        raise ValueError('no replies counted in the window (netchar %d, %s %d)' % (nc_tx, peer, np_tx))
    nc, np = nc_tx / (wall_ns / 1e9), np_tx / (wall_ns / 1e9)
    # A check on the count: over the middle of its run, a tool's rate by the kernel's count
    # and by its own report agree (netchar's always: it shares the CPUs for all of its run;
    # netperf's too; sockperf's whole run includes seconds alone, so it has no such check).
    checks = [('netchar', nc, own)] + ([(peer, np, peer_own)] if peer == 'netperf' else [])
    for tool, window, whole in checks:
        if abs(window / whole - 1) > 0.05:
            print('%-5s %5s  note: %s made %.0f transactions/s in the window (the kernel\'s count), %.0f over its run (its report): the machine\'s speed moved, or a count is off' % (proto, r, tool, window, whole))
except Exception as e:  # one line saying which tool gave no figure
    print('%-5s %5s  no figure: %s (see %s.*)' % (proto, r, e, d))
    sys.exit(1)
# The window's CPU over the replies the kernel counted in the same window.
ncc_us, ncs_us = ncc_ns / 1e3 / nc_tx, ncs_ns / 1e3 / nc_tx
npc_us, nps_us = npc_ns / 1e3 / np_tx, nps_ns / 1e3 / np_tx
nc_us, np_us = ncc_us + ncs_us, npc_us + nps_us
print('%-5s %5s %12.0f %12.0f %8.3f %14.3f %14.3f %8.3f %8.3f %8.3f' % (proto, r, nc, np, nc / np, nc_us, np_us, nc_us / np_us, ncc_us / npc_us, ncs_us / nps_us))
with open(d.rsplit('/', 1)[0] + '/costs', 'a') as f:
    f.write('%s %.6f\n' % (proto, nc_us / np_us))
PY
  done
done
[ -s "$WORK/costs" ] && bench_py pair_summary "$WORK/costs"
echo "(ratio: netchar's transactions/s over $PEER's; us/t: CPU microseconds per transaction, client and server together; cost: netchar's us/t over $PEER's, below 1 when netchar does less work per transaction; client, server: the same for each end alone; the last lines: each protocol's mean cost with its 95% confidence interval over the rounds)"
echo "raw outputs: \$TMPDIR/$(basename "$WORK")"
exit "${FAILED:-0}"
