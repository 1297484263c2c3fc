#!/usr/bin/env bash
# bench/adapters.sh — is a peer-protocol adapter ever the bottleneck?  Loopback TCP, side by
# side in one run, each case ROUNDS times with the two runs of a round back to back (which runs
# first alternates by round), the verdict on the median of the rounds' ratios:
#
#   client role: against one `iperf3 -s`, `iperf3 -c` vs `netchar tcp --proto iperf3`.  Both
#                figures are the iperf3 server's own count (iperf3's sum_received; netchar's
#                far-end receiver figure is that same report).
#   server role: one `iperf3 -c` against `iperf3 -s` vs against `netchar server --iperf3`.
#                Both figures are the iperf3 client's receiver line (sum_received).
#
# Each at 1 stream and -P 4.  Target (issue 9): the adapter at >= 0.95x the peer's own tool.
# iperf2 rows are added by the iperf2 adapter where it exists (`--proto iperf2`).
#
# Knobs: DUR=3 (seconds per run), ROUNDS=3, PORT_BASE=15400, NO_BUILD=0, NETCHAR=PATH (a
# prebuilt binary), PIN=0 (1: every client on CPU CLIENT_CPU=0 and every server on
# SERVER_CPU=1, so a run does not depend on where the scheduler put four threads on two CPUs;
# unpinned, single runs spread by 17-40% on a 2-CPU machine), BENCH_SAVE=0 (1: also write
# bench/results/<date>-adapters-<machine>.txt; a second save that day adds the time).
# Exit status: 0 when every run produced a figure (PASS/MISS are informational), 1 otherwise.
set -u -o pipefail
BENCH=adapters
BENCH_DIR=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
. "$BENCH_DIR/lib.sh" || exit 2

DUR=${DUR:-3}
ROUNDS=${ROUNDS:-3}
PORT_BASE=${PORT_BASE:-15400}
NO_BUILD=${NO_BUILD:-0}
BENCH_SAVE=${BENCH_SAVE:-0}
PIN=${PIN:-0}
CLIENT_CPU=${CLIENT_CPU:-0}
SERVER_CPU=${SERVER_CPU:-1}
need_posint DUR ROUNDS PORT_BASE
need_uint PIN CLIENT_CPU SERVER_CPU
have python3 || { echo "adapters.sh: python3 is needed for the JSON" >&2; exit 2; }
find_peers                        # IPERF3= (the newest build), else Debian's iperf3
[ -n "$IPERF3" ] || { echo "adapters.sh: iperf3 not found (sudo apt-get install iperf3, or set IPERF3=PATH): nothing to compare"; exit 0; }

bench_init
build_netchar
H=127.0.0.1
P_IPERF3=$PORT_BASE                 # iperf3 -s
P_NATIVE=$((PORT_BASE + 1))         # netchar server (native port)
P_NC_IPERF3=$((PORT_BASE + 2))      # netchar server --iperf3
PIDS=()
trap 'for p in "${PIDS[@]}"; do kill "$p" 2>/dev/null; done' EXIT
CLIENT=() SERVER=() PLACEMENT="unpinned"
if [ "$PIN" = 1 ]; then
  have taskset || { echo "adapters.sh: PIN=1 needs taskset (util-linux)" >&2; exit 2; }
  CLIENT=(taskset -c "$CLIENT_CPU") SERVER=(taskset -c "$SERVER_CPU")
  PLACEMENT="clients on CPU $CLIENT_CPU, servers on CPU $SERVER_CPU"
fi

"${SERVER[@]}" "$IPERF3" -s -B $H -p $P_IPERF3 >/dev/null 2>&1 & PIDS+=($!)
"${SERVER[@]}" "$NC" server -B $H -p $P_NATIVE --iperf3 --iperf3-port $P_NC_IPERF3 2>/dev/null & PIDS+=($!)
sleep 1

# receiver bit/s from a JSON file: iperf3 -J (end.sum_received) or netchar --json (summary.up).
bps() {
  bench_py peers bps "$1"
}

# run CASE TOOL ARGS...: one run, its figure appended to $RES as "CASE TOOL BPS".
run() {
  local case=$1 tool=$2; shift 2
  local out=$WORK/$case-$tool-$RANDOM.json
  timeout $((DUR + 30)) "${CLIENT[@]}" "$@" > "$out" 2>>"$WORK/stderr.txt"
  local v; v=$(bps "$out")
  [ "$v" = nan ] && { FAILED=1; note "$case $tool: no figure ($*)"; }
  echo "$case $tool $v" >> "$RES"
}

HEADER="bench/adapters.sh DUR=$DUR ROUNDS=$ROUNDS PIN=$PIN ($PLACEMENT); $(netchar_version); ${PEER_VER[iperf3]}"
echo "$HEADER"
# A case's two runs: the peer tool's, then netchar's; in even rounds netchar's first, so neither
# always runs second (on the previous run's leftovers: TIME_WAIT sockets, warm caches).
pair() { # ROUND CASE PEER-RUN... -- NETCHAR-RUN...
  local r=$1 case=$2 peer=() ours=(); shift 2
  while [ "$1" != -- ]; do peer+=("$1"); shift; done; shift; ours=("$@")
  if [ $((r % 2)) = 1 ]; then
    run "$case" iperf3 "${peer[@]}"; run "$case" netchar "${ours[@]}"
  else
    run "$case" netchar "${ours[@]}"; run "$case" iperf3 "${peer[@]}"
  fi
}
for r in $(seq "$ROUNDS"); do
  for P in 1 4; do
    pair "$r" "client-P$P" "$IPERF3" -c $H -p $P_IPERF3 -t "$DUR" -P $P -J \
      -- "$NC" tcp $H -p $P_IPERF3 --proto iperf3 -t "$DUR" -P $P --json -i 0
    pair "$r" "server-P$P" "$IPERF3" -c $H -p $P_IPERF3 -t "$DUR" -P $P -J \
      -- "$IPERF3" -c $H -p $P_NC_IPERF3 -t "$DUR" -P $P -J
  done
  echo "round $r of $ROUNDS done"
done

REPORT=$WORK/report.txt
{ echo "# $HEADER"
  bench_py adapter_report adapters "$RES"
  [ -s "$NOTES" ] && { echo; echo "notes:"; cat "$NOTES"; }; } > "$REPORT"
finish
