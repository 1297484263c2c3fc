#!/usr/bin/env bash
# bench/iperf2.sh — is the iperf2 adapter ever the bottleneck?  Loopback TCP, side by side in
# one run, each case ROUNDS times with the two runs of a round back to back (which runs first
# alternates by round), the verdict on the median of the rounds' ratios:
#
#   client role: against one `iperf -s -y C`, `iperf -c` vs `netchar tcp --proto iperf2`.  Both
#                figures are the iperf server's own CSV lines (bytes of the run's connections
#                over the run's interval).
#   server role: one `iperf -c -y C` against `iperf -s` vs against `netchar server --iperf2`.
#                Both figures are the iperf client's own CSV lines.
#
# Each at 1 stream and -P 4.  Target (issue 9): the adapter at >= 0.95x the peer's own tool.
#
# Knobs: DUR=3 (seconds per run), ROUNDS=3, PORT_BASE=15500, NO_BUILD=0, NETCHAR=PATH (a
# prebuilt binary).  Exit status: 0 when every run produced a figure, 1 otherwise.
set -u -o pipefail
BENCH=iperf2
BENCH_DIR=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
. "$BENCH_DIR/lib.sh" || exit 2

DUR=${DUR:-3}
ROUNDS=${ROUNDS:-3}
PORT_BASE=${PORT_BASE:-15500}
NO_BUILD=${NO_BUILD:-0}
need_posint DUR ROUNDS PORT_BASE
have python3 || { echo "iperf2.sh: python3 is needed" >&2; exit 2; }
have iperf || { echo "iperf2.sh: iperf (2.x) not found (sudo apt-get install iperf): nothing to compare"; exit 0; }

bench_init
build_netchar
H=127.0.0.1
P_IPERF=$PORT_BASE                  # iperf -s
P_NATIVE=$((PORT_BASE + 1))         # netchar server (native port)
P_NC_IPERF2=$((PORT_BASE + 2))      # netchar server --iperf2
SRV_CSV=$WORK/iperf-s.csv
PIDS=()
trap 'for p in "${PIDS[@]}"; do kill "$p" 2>/dev/null; done; rm -rf "$WORK"' EXIT

iperf -s -B $H -p $P_IPERF -y C > "$SRV_CSV" 2>/dev/null & PIDS+=($!)
"$NC" server -B $H -p $P_NATIVE --iperf2 --iperf2-port $P_NC_IPERF2 2>/dev/null & PIDS+=($!)
sleep 1

# bit/s of CSV lines: the sum of their bytes over the longest interval (field 7 "a-b").
csv_bps() { bench_py peers csv-bps; }

# run CASE TOOL ARGS...: one run, its figure appended to $RES as "CASE TOOL BPS".
run() {
  local case=$1 tool=$2 source=$3; shift 3
  local before; before=$(wc -l < "$SRV_CSV")
  local out=$WORK/$case-$tool-$RANDOM.txt
  timeout $((DUR + 30)) "$@" > "$out" 2>>"$WORK/stderr.txt"
  sleep 0.5
  local v
  if [ "$source" = server ]; then
    v=$(tail -n +"$((before + 1))" "$SRV_CSV" | csv_bps)
  else
    v=$(csv_bps < "$out")
  fi
  [ "$v" = nan ] && { FAILED=1; note "$case $tool: no figure ($*)"; }
  echo "$case $tool $v" >> "$RES"
}

echo "iperf2: DUR=$DUR ROUNDS=$ROUNDS, $(netchar_version), $(iperf -v 2>&1 | head -1)"
# A case's two runs back to back, iperf's first in odd rounds and netchar's first in even ones
# (the report pairs each round's two figures).
pair() { # ROUND CASE SOURCE PEER-RUN... -- NETCHAR-RUN...
  local r=$1 case=$2 source=$3 peer=() ours=(); shift 3
  while [ "$1" != -- ]; do peer+=("$1"); shift; done; shift; ours=("$@")
  if [ $((r % 2)) = 1 ]; then
    run "$case" iperf "$source" "${peer[@]}"; run "$case" netchar "$source" "${ours[@]}"
  else
    run "$case" netchar "$source" "${ours[@]}"; run "$case" iperf "$source" "${peer[@]}"
  fi
}
for r in $(seq "$ROUNDS"); do
  for P in 1 4; do
    pair "$r" "client-P$P" server iperf -c $H -p $P_IPERF -t "$DUR" -P $P -y C \
      -- "$NC" tcp $H -p $P_IPERF --proto iperf2 -t "$DUR" -P $P --json -i 0
    pair "$r" "server-P$P" client iperf -c $H -p $P_IPERF -t "$DUR" -P $P -y C \
      -- iperf -c $H -p $P_NC_IPERF2 -t "$DUR" -P $P -y C
  done
  echo "round $r of $ROUNDS done"
done

bench_py adapter_report iperf2 "$RES"
[ -s "$NOTES" ] && { echo; echo "notes:"; cat "$NOTES"; }
exit "$FAILED"
