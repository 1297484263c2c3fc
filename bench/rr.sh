#!/usr/bin/env bash
# bench/rr.sh — side-by-side loopback request/response latency of netchar, sockperf and netperf.
#
# Every tool runs with its client pinned to CPU CLIENT_CPU and its server to the placement's
# server CPU (taskset for every process, plus each tool's own pinning option: netchar -A C,S,
# netperf -T C,S), in two placements:
#   same core  (client 0, server 0): both ends on one CPU, no cross-CPU wakeup;
#   cross core (client 0, server 1): every message wakes the other vCPU (~35 µs each way on a
#                                    VM whose idle vCPUs halt), so this is a wakeup benchmark.
# One transaction in flight, TCP and UDP.  Rows per protocol and placement:
#   netchar            1-byte request and response (netchar's default)
#   netchar -l 14      14-byte messages, like-for-like with sockperf (its minimum is 14 bytes)
#   netchar --busy-poll  (cross core only) spinning non-blocking receives on both ends
#   sockperf           pp --full-rtt, 14-byte messages (sockperf cannot go below 14)
#   netperf            TCP_RR / UDP_RR -r 1,1, only when NETPERF/NETSERVER (or NETPERF_BIN) name a build
# Within a round the tools run back to back (starting tool rotated each round) so they see the
# same machine state; every figure is the median over rounds of that column.
#
# Knobs (environment):
#   DUR=3            seconds per run
#   ROUNDS=3         rounds (median over these)
#   PORT_BASE=15320  ports PORT_BASE..PORT_BASE+7 on 127.0.0.1 (TCP, and UDP for the UDP servers)
#   NETPERF= NETSERVER=  netperf's programs (not packaged by Debian 12; NETPERF_BIN=DIR also works);
#                    SOCKPERF=PATH another sockperf (lib.sh: find_peers); unset = PATH
#   SERVER_CPU_CROSS=1  the cross-core placement's server CPU (client and same-core server: CLIENT_CPU)
#   CLIENT_CPU=0
#   BENCH_SAVE=0     1 = also write the report to bench/results/<date>-rr-<machine>.txt
#   NO_BUILD=0       1 = skip `cargo build` (use the binary already in target/release)
#   IDLE_WAIT=0      seconds to wait, before each round, for the machine to drop below 15% busy
#   BUSY_RETRY=25    re-measure a run once when other processes took more than this % of the
#                    machine during it (0 = never); the attempt with less other work is kept
# Exit status: 0 when every run completed (PASS/MISS lines are informational), 1 when the build
# failed, a client failed/timed out/printed no usable result, or a server died; 2 for bad
# settings (a knob's value, a port in use, python3/taskset/sockperf missing).
set -u -o pipefail
BENCH=rr
BENCH_DIR=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
. "$BENCH_DIR/lib.sh" || exit 2           # shared helpers (build, servers, accounting, retries)

DUR=${DUR:-3}
ROUNDS=${ROUNDS:-3}
PORT_BASE=${PORT_BASE:-15320}
BENCH_SAVE=${BENCH_SAVE:-0}
NO_BUILD=${NO_BUILD:-0}
IDLE_WAIT=${IDLE_WAIT:-0}
BUSY_RETRY=${BUSY_RETRY:-25}
CLIENT_CPU=${CLIENT_CPU:-0}
SERVER_CPU_CROSS=${SERVER_CPU_CROSS:-1}
H=127.0.0.1                       # loopback only: every server binds here, every client targets it

need_uint IDLE_WAIT BUSY_RETRY CLIENT_CPU SERVER_CPU_CROSS
need_posint DUR ROUNDS PORT_BASE
[ "$CLIENT_CPU" != "$SERVER_CPU_CROSS" ] || { echo "rr.sh: CLIENT_CPU and SERVER_CPU_CROSS must differ" >&2; exit 2; }
NCPU=$(nproc)
for v in CLIENT_CPU SERVER_CPU_CROSS; do
  [ "${!v}" -lt "$NCPU" ] || { echo "rr.sh: $v=${!v} but this machine has $NCPU CPUs" >&2; exit 2; }
done

bench_init                        # WORK (raw outputs of every run), RES, NOTES, FAILED=0
CLIENT_TO=$((DUR + 20))           # watchdog per client run (connect + DUR + teardown, generous)

# ------------------------------------------------------------------ tools present?
have python3 || { echo "rr.sh: python3 is required (JSON/summary parsing and the report)" >&2; exit 2; }
have taskset || { echo "rr.sh: taskset (util-linux) is required: every run is pinned" >&2; exit 2; }
have ss || echo "note: ss (iproute2) not found; waiting a fixed 1 s for peer servers to listen"
PEERS=()
find_peers                        # SOCKPERF, NETPERF, NETSERVER (lib.sh: the environment, else PATH)
if [ -n "$SOCKPERF" ]; then PEERS+=(sockperf)
else echo "sockperf not found: skipping it (install with: sudo apt-get install sockperf, or set SOCKPERF=PATH)"; fi
if [ -n "$NETPERF" ]; then PEERS+=(netperf)
else echo "netperf: not available (set NETPERF=PATH NETSERVER=PATH, or NETPERF_BIN=DIR)"; fi
[ ${#PEERS[@]} -gt 0 ] || echo "rr.sh: no peer tool found: netchar alone (no ratios)"

# ------------------------------------------------------------------ build netchar
build_netchar                     # sets NC (a private copy of the binary) and NC_REV

# ------------------------------------------------------------------ placements, ports, servers
PLACEMENTS=(same cross)
declare -A SCPU=([same]=$CLIENT_CPU [cross]=$SERVER_CPU_CROSS)
C=$CLIENT_CPU
# One server per tool, protocol (sockperf) and placement, each pinned to that placement's
# server CPU for its whole life.  Servers: name -> port, and -> protocol to check for listening.
declare -A SPORT=(
  [nc.same]=$PORT_BASE              [nc.cross]=$((PORT_BASE + 1))
  [sp.udp.same]=$((PORT_BASE + 2))  [sp.udp.cross]=$((PORT_BASE + 3))
  [sp.tcp.same]=$((PORT_BASE + 4))  [sp.tcp.cross]=$((PORT_BASE + 5))
  [np.same]=$((PORT_BASE + 6))      [np.cross]=$((PORT_BASE + 7)))
SERVERS=(nc.same nc.cross)
[ -n "$SOCKPERF" ] && SERVERS+=(sp.udp.same sp.udp.cross sp.tcp.same sp.tcp.cross)
[ -n "$NETPERF" ] && SERVERS+=(np.same np.cross)

if have ss; then
  for p in $(seq "$PORT_BASE" $((PORT_BASE + 7))); do
    if port_in_use tcp "$p" || port_in_use udp "$p"; then
      echo "rr.sh: port $p is already in use (TCP or UDP); pick free ports with PORT_BASE=..." >&2
      exit 2
    fi
  done
fi

# Budget: every run may be retried once, and each round or retry may wait IDLE_WAIT.
SERVER_TO=$(( ROUNDS * 2 * 18 * (DUR + 6 + IDLE_WAIT) + 600 ))
server_cmd() { # NAME -> sets CMD and READY (see start_server in lib.sh)
  local n=$1 pl=${1##*.} p=${SPORT[$1]}
  READY=(tcp "$p")
  case $n in
    nc.*)     CMD=("$NC" server -B "$H" -p "$p"); READY=(log) ;;
    sp.udp.*) CMD=("$SOCKPERF" sr -i "$H" -p "$p"); READY=(udp "$p") ;;
    sp.tcp.*) CMD=("$SOCKPERF" sr --tcp -i "$H" -p "$p") ;;
    # -D: stay in the foreground (so `timeout` and the trap own it); it forks a child per test,
    # which inherits this pinning (and -T re-pins it to the same CPU).
    np.*)     CMD=("$NETSERVER" -D -L "$H" -p "$p") ;;
  esac
  CMD=(taskset -c "${SCPU[$pl]}" "${CMD[@]}")
}
server_who() { echo "server $1"; }       # messages say "server sp.udp.cross"
stop_servers_on_exit

# ------------------------------------------------------------------ result parser
# bench_py peers rr TOOL FILE PROTO LEN CCPU SCPU BUSYPOLL DUR
#   -> "tps mean_us p50_us p99_us p999_us|- note..."
# (bench/netchar_bench/peers.py; notes are space-separated tokens; exit status 1 = no usable result)

# ------------------------------------------------------------------ one run
# run_one ROUND PROTO PLACEMENT VARIANT: runs one client and sets ROW (a results.tsv line:
# "round proto placement variant status tps mean p50 p99 p999 other% notes") and OTHER
# (CPU time of the whole machine during the run that neither the client nor the server was
# charged for, in % of all CPUs: other processes, ksoftirqd).
run_one() {
  local r=$1 proto=$2 pl=$3 v=$4 S=${SCPU[$3]}
  local base="$WORK/r$r.$proto.$pl.$v${ATTEMPT:-}" srv tool len=1 bp=0 line s0 s1 m0 m1 args=()
  case $v in
    nc|nc14|ncbp) srv=nc.$pl; tool=netchar ;;
    sockperf)     srv=sp.$proto.$pl; tool=sockperf; len=14 ;;
    netperf)      srv=np.$pl; tool=netperf ;;
  esac
  [ "$v" = nc14 ] && len=14
  [ "$v" = ncbp ] && bp=1
  restart_if_dead "$srv" "round $r $proto $pl $v" ||
    { ROW=$(printf '%s\t%s\t%s\t%s\tFAIL\t\t\t\t\t\t\tserver down' "$r" "$proto" "$pl" "$v"); OTHER=0; return; }
  case $v in
    nc|nc14|ncbp)
      args=(taskset -c "$C" "$NC" rr "$H" -p "${SPORT[$srv]}" -t "$DUR" -A "$C,$S" -i 0 --json)
      [ "$proto" = udp ] && args+=(--udp)
      [ "$v" = nc14 ] && args+=(-l 14)
      [ "$v" = ncbp ] && args+=(--busy-poll) ;;
    sockperf)
      args=(taskset -c "$C" "$SOCKPERF" pp -i "$H" -p "${SPORT[$srv]}" -t "$DUR" -m 14 --full-rtt)
      [ "$proto" = tcp ] && args+=(--tcp) ;;
    netperf)
      local test=TCP_RR; [ "$proto" = udp ] && test=UDP_RR
      args=(taskset -c "$C" "$NETPERF" -H "$H" -p "${SPORT[$srv]}" -t "$test" -l "$DUR" -P 0 -T "$C,$S"
            -- -r 1,1 -o THROUGHPUT,MEAN_LATENCY,P50_LATENCY,P99_LATENCY) ;;
  esac
  echo "${args[*]}" > "$base.cmd"
  # The server's CPU includes its reaped children: netserver forks one per test.
  m0=$(cpu_ticks); s0=$(proc_cpu "${SPID[$srv]}" children)
  timed "$base.out" "$base.err" "${args[@]}"
  sleep 0.2                                # let netserver reap its per-test child
  s1=$(proc_cpu "${SPID[$srv]}" children); m1=$(cpu_ticks)
  local other
  other=$(awk -v m0="$m0" -v m1="$m1" -v a="$s0" -v b="$s1" -v c="$CLIENT_SECS" -v hz="$CLK_TCK" 'BEGIN {
    split(m0, x, " "); split(m1, y, " "); tot = (y[2] - x[2]) / hz
    acct = (b == "NaN" || a == "NaN") ? c : b - a + c
    o = (tot > 0) ? 100 * ((y[1] - x[1]) / hz - acct) / tot : 0
    printf "%.1f", (o < 0) ? 0 : o}')
  # sockperf prints its summary on stdout, some versions partly on stderr: parse both.
  local src=$base.out
  [ "$tool" = sockperf ] && { cat "$base.out" "$base.err" > "$base.all"; src=$base.all; }
  note_client_failure "round $r $proto $pl $v" "$base.err"
  if line=$(bench_py peers rr "$tool" "$src" "$proto" "$len" "$C" "$S" "$bp" "$DUR" 2>> "$base.err") && [ "$RC" -eq 0 ]; then
    read -r tps mean p50 p99 p999 rest <<< "$line"
    ROW=$(printf '%s\t%s\t%s\t%s\tok\t%s\t%s\t%s\t%s\t%s\t%s\t%s' "$r" "$proto" "$pl" "$v" "$tps" "$mean" "$p50" "$p99" "$p999" "$other" "${rest:-}")
    # netchar's own description of where it ran, printed in the report
    [ "$tool" = netchar ] && bench_py peers placement "$base.out" > "$base.placement" 2>/dev/null
  else
    [ "$RC" -eq 0 ] && note_unusable "round $r $proto $pl $v" "$base.err"
    ROW=$(printf '%s\t%s\t%s\t%s\tFAIL\t\t\t\t\t\t%s\t' "$r" "$proto" "$pl" "$v" "$other")
  fi
  OTHER=$other
  sleep 0.3   # let the previous test's sockets drain before the next one
}

# ------------------------------------------------------------------ main
# Variants per placement: --busy-poll only cross core (spinning on the server's own core
# would starve it when both ends share one CPU).
variants() { # PLACEMENT -> VARS
  VARS=(nc nc14)
  [ "$1" = cross ] && VARS+=(ncbp)
  local p; for p in "${PEERS[@]}"; do VARS+=("$p"); done
}

for n in "${SERVERS[@]}"; do start_server "$n" || { FAILED=1; exit 1; }; done

VERS=$(netchar_version)
[ -n "$SOCKPERF" ] && VERS="$VERS, ${PEER_VER[sockperf]}"
[ -n "$NETPERF" ] && VERS="$VERS, ${PEER_VER[netperf]}"
nruns=0; for pl in "${PLACEMENTS[@]}"; do variants "$pl"; nruns=$((nruns + 2 * ${#VARS[@]})); done
echo "rr.sh: $nruns runs x $ROUNDS rounds of ${DUR}s on $H, client CPU $C, server CPU $C (same) / $SERVER_CPU_CROSS (cross) (~$(( nruns * ROUNDS * (DUR + 1) ))s); logs in $WORK"

T0=$(date +%s)
for ((r = 1; r <= ROUNDS; r++)); do
  start_round "$r" "noisy"          # waits for quiet if IDLE_WAIT is set
  for proto in tcp udp; do
    for pl in "${PLACEMENTS[@]}"; do
      variants "$pl"
      rotate "$r" "${VARS[@]}"      # the variant that goes first changes every round
      for v in "${ORDER[@]}"; do
        [ -t 2 ] && printf '\r  round %d/%d  %s %-5s %-8s   ' "$r" "$ROUNDS" "$proto" "$pl" "$v" >&2
        # A run during which other work took more than BUSY_RETRY % is measured again; the
        # quieter attempt is kept if it was ok.
        measure quieter run_one "$r" "$proto" "$pl" "$v"
        [ "$RETRIED" = 1 ] && note "re-measured round $r $proto $pl $v: other work took ${FIRST_OTHER}% of the machine (retry: ${OTHER}%; kept the $KEPT)"
      done
    done
  done
done
[ -t 2 ] && printf '\r%60s\r' '' >&2
note_dead_servers "${SERVERS[@]}"
# netchar's placement strings as printed in its JSON (one per protocol/placement/variant)
for f in "$WORK"/r*.placement; do
  [ -e "$f" ] || continue
  b=$(basename "$f" .placement); b=${b#r*.}; b=${b%.retry}
  printf '%s\t%s\n' "$b" "$(cat "$f")"
done | sort -u > "$WORK/placements.tsv"

# ------------------------------------------------------------------ report
REPORT=$WORK/report.txt
bench_py rr_report "$RES" "$NOTES" "$DUR" "$ROUNDS" "$VERS" "$(( $(date +%s) - T0 ))" "$(uname -r)" "$NCPU" \
  "${PEERS[*]:-}" "$C" "$SERVER_CPU_CROSS" "$WORK/placements.tsv" > "$REPORT"

finish                            # print, save if BENCH_SAVE=1, exit with FAILED
