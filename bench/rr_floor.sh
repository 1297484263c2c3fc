#!/usr/bin/env bash
# bench/rr_floor.sh — TCP request/response against its floor: bench/ref/pingpong.c (one byte
# each way with blocking send and recv, nothing else: no clock per transaction, no other
# thread) beside `netchar rr` and netperf's TCP_RR, the client on CPU C and the server on CPU S
# (across cores by default), in alternated rounds. The floor is what the kernel and the machine
# allow this method: a tool at the floor has no time of its own left to cut. Per round, each
# tool's transactions/s over the floor's in the same round; the medians and ranges of those.
#
#   NETPERF=PATH NETSERVER=PATH bash bench/rr_floor.sh       # 9 rounds of 3 s, CPUs 0 and 1
#   S=0 ROUNDS=5 bash bench/rr_floor.sh                      # both ends on CPU 0
# Knobs: NC (default target/release/netchar), DUR=3, ROUNDS=9, C=0, S=1, PORT_BASE=15460.
# Needs gcc, taskset, python3; netperf where found (lib.sh: find_peers), else netchar alone.
set -u -o pipefail
BENCH=rr_floor
BENCH_DIR=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
. "$BENCH_DIR/lib.sh" || exit 2
ROOT=$(cd "$BENCH_DIR/.." && pwd)
NC=${NC:-$ROOT/target/release/netchar}
DUR=${DUR:-3} ROUNDS=${ROUNDS:-9} C=${C:-0} S=${S:-1} PORT=${PORT_BASE:-15460}
need_posint DUR ROUNDS
find_peers
for t in gcc taskset python3; do have "$t" || { echo "rr_floor.sh: $t is required" >&2; exit 2; }; done
[ -x "$NC" ] || { echo "rr_floor.sh: no netchar at $NC (build it, or set NC=)" >&2; exit 2; }
WORK=$(mktemp -d -t netchar-rr-floor.XXXXXX)
gcc -O2 -pthread -o "$WORK/pingpong" "$BENCH_DIR/ref/pingpong.c" 2> "$WORK/build.err" \
  || { echo "rr_floor.sh: cannot build bench/ref/pingpong.c (see $WORK/build.err)" >&2; exit 1; }
TOOLS=(floor netchar); [ -n "$NETPERF" ] && TOOLS+=(netperf)

# run TOOL ROUND: one run; appends "round tool transactions/s" to results.
run() {
  local tool=$1 r=$2 n=$WORK/$1-$2 sp rate
  PORT=$((PORT + 1))
  case $tool in
    floor) taskset -c "$S" "$WORK/pingpong" server "$PORT" > "$n.srv" 2>&1 & sp=$! ;;
    netchar) taskset -c "$S" "$NC" server -B 127.0.0.1 -p "$PORT" --one-off > "$n.srv" 2>&1 & sp=$! ;;
    netperf) taskset -c "$S" "$NETSERVER" -D -f -L 127.0.0.1 -p "$PORT" > "$n.srv" 2>&1 & sp=$! ;;
  esac
  local i
  for ((i = 0; i < 100; i++)); do port_in_use tcp "$PORT" && break; sleep 0.05; done
  case $tool in
    floor) taskset -c "$C" "$WORK/pingpong" client "$PORT" "$DUR" > "$n.out" 2> "$n.err"
      rate=$(awk 'NF == 2 && $2 > 0 {printf "%.1f", $1 / $2}' "$n.out") ;;
    netchar) taskset -c "$C" "$NC" rr 127.0.0.1 -p "$PORT" -t "$DUR" -A "$C,$S" -i 0 --json > "$n.out" 2> "$n.err"
      rate=$(python3 -c 'import json,sys; print("%.1f" % json.load(open(sys.argv[1]))["summary"]["rr"]["transactions_per_second"])' "$n.out" 2>> "$n.err") ;;
    netperf) taskset -c "$C" "$NETPERF" -H 127.0.0.1 -p "$PORT" -t TCP_RR -l "$DUR" -P 0 -T "$C,$S" -- -r 1,1 -o THROUGHPUT > "$n.out" 2> "$n.err"
      rate=$(awk -F, '$1 ~ /^[0-9.]+$/ {v = $1} END {if (v != "") printf "%.1f", v}' "$n.out") ;;
  esac
  kill "$sp" 2>/dev/null; wait "$sp" 2>/dev/null
  [ -n "$rate" ] || { echo "rr_floor.sh: round $r, $tool gave no figure (see $n.err)" >&2; exit 1; }
  echo "$r $tool $rate" >> "$WORK/results"
}

echo "# rr_floor: bench/ref/pingpong.c (the floor), netchar $("$NC" --version 2>/dev/null | awk '{print $2}')${NETPERF:+, ${PEER_VER[netperf]}}; TCP, 1 byte each way, blocking; client CPU $C, server CPU $S; $ROUNDS rounds of ${DUR} s, alternated; Linux $(uname -r), $(nproc) CPUs; load average $(load_average)"
for ((r = 1; r <= ROUNDS; r++)); do
  rotate "$r" "${TOOLS[@]}"    # the tool that goes first changes every round
  for t in "${ORDER[@]}"; do run "$t" "$r"; done
done
python3 - "$WORK/results" <<'PY'
import collections, statistics, sys
rate = collections.defaultdict(dict)
for line in open(sys.argv[1]):
    r, tool, v = line.split()
    rate[int(r)][tool] = float(v)
tools = [t for t in ("floor", "netchar", "netperf") if any(t in x for x in rate.values())]
print("round " + " ".join("%12s" % t for t in tools))
for r in sorted(rate):
    print("%5d " % r + " ".join("%12.0f" % rate[r][t] for t in tools))
def ratios(a, b):
    v = [rate[r][a] / rate[r][b] for r in sorted(rate)]
    return "%.3f (%.3f-%.3f, %d/%d rounds >= 1)" % (statistics.median(v), min(v), max(v), sum(x >= 1 for x in v), len(v))
for t in tools[1:]:
    print("%-7s / floor, per round: %s" % (t, ratios(t, "floor")))
if "netperf" in tools:
    print("netchar / netperf, per round: %s" % ratios("netchar", "netperf"))
PY
