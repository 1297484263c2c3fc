#!/usr/bin/env bash
# bench/builds_pair.sh — two builds of netchar side by side: the CPU each spends on the same work.
#
# For a change that moves a figure by a percent or two (a build setting, a hot loop), rounds run
# one after the other on this VM differ by more than that. As rr_pair.sh does for netchar and
# netperf, both builds run at the same time on the same CPUs, each against a server of its own
# build, and each one's CPU time is read from the scheduler (/proc/PID/task/*/schedstat, every
# thread of its client and server) over the same window, 1 s in to 1 s before the end. Divided
# by the work done in it, the figure that compares is CPU per unit of work, and "cost" is the
# second build's over the first's (below 1: the second does the same work for less).
#
#   NC1=old/netchar NC2=new/netchar bash bench/builds_pair.sh      # all cases, 4 rounds each
#   CASES="rr.tcp rr.udp" NC1=... NC2=... bash bench/builds_pair.sh
# Cases: rr.tcp, rr.udp (one-byte transactions, all four processes on CPU 0: CPU µs per
# transaction); tcp (one stream, -A 0,1: CPU ns per KB received); udp64 (64 B datagrams at full
# rate, -A 0,1: CPU ns per datagram received).
# Knobs: NC1, NC2 (required), L1, L2 (what the report calls them; default their paths),
# CASES="rr.tcp rr.udp tcp udp64", DUR=10, ROUNDS=4, PORT_BASE=15460. Needs taskset, python3.
set -u -o pipefail
BENCH=builds_pair
BENCH_DIR=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
. "$BENCH_DIR/lib.sh" || exit 2
NC1=${NC1:-} NC2=${NC2:-} L1=${L1:-${NC1:-}} L2=${L2:-${NC2:-}} CASES=${CASES:-"rr.tcp rr.udp tcp udp64"}
DUR=${DUR:-10} ROUNDS=${ROUNDS:-4} P=${PORT_BASE:-15460}
need_posint DUR ROUNDS
need_uint P
need_pair_dur
for b in "$NC1" "$NC2"; do
  [ -n "$b" ] && [ -x "$b" ] || { echo "builds_pair.sh: NC1 and NC2 are the two netchar binaries to compare (got '$b')" >&2; exit 2; }
done
for c in $CASES; do
  case $c in rr.tcp | rr.udp | tcp | udp64) ;; *) echo "builds_pair.sh: cases are rr.tcp rr.udp tcp udp64 (got '$c')" >&2; exit 2 ;; esac
done
for t in taskset python3; do have "$t" || { echo "builds_pair.sh: $t is required" >&2; exit 2; }; done
WORK=$(mktemp -d -t netchar-builds-pair.XXXXXX)
PIDS=()
trap 'pair_stop "${PIDS[@]}"' EXIT

run_pid "$WORK/s1.pid" "$NC1" server -B 127.0.0.1 -p "$P" > "$WORK/s1.log" 2>&1 &
run_pid "$WORK/s2.pid" "$NC2" server -B 127.0.0.1 -p "$((P + 1))" > "$WORK/s2.log" 2>&1 &
S1=$(pid_of "$WORK/s1.pid") S2=$(pid_of "$WORK/s2.pid")
PIDS=("$S1" "$S2")
pair_listening builds_pair.sh "$P" "$WORK/s1.log" "$((P + 1))" "$WORK/s2.log"
echo "# builds_pair: 1 = $L1, 2 = $L2, at the same time; $ROUNDS rounds of ${DUR} s; Linux $(uname -r), $(nproc) CPUs; load average $(load_average)"
printf '%-7s %5s %12s %12s %12s %12s %8s\n' case round "1 rate" "2 rate" "1 CPU/unit" "2 CPU/unit" cost
FAILED=0
for c in $CASES; do
  case $c in
    # The servers run where the scheduler puts them; -A places each test's two ends.
    rr.tcp) args=(rr -A 0,0 -i 0) pin=(taskset -c 0) ;;
    rr.udp) args=(rr --udp -A 0,0 -i 0) pin=(taskset -c 0) ;;
    tcp) args=(tcp -A 0,1) pin=() ;;
    udp64) args=(udp -l 64 -b 0 -A 0,1) pin=() ;;
  esac
  for ((r = 1; r <= ROUNDS; r++)); do
    d=$WORK/$c.$r
    run_pid "$d.c1.pid" "${pin[@]}" "$NC1" "${args[@]}" 127.0.0.1 -p "$P" -t "$DUR" --json > "$d.1.json" 2> "$d.1.err" & j1=$!
    run_pid "$d.c2.pid" "${pin[@]}" "$NC2" "${args[@]}" 127.0.0.1 -p "$((P + 1))" -t "$DUR" --json > "$d.2.json" 2> "$d.2.err" & j2=$!
    c1=$(pid_of "$d.c1.pid") c2=$(pid_of "$d.c2.pid")
    read -r ns1 ns2 wall < <(pair_window "$DUR" "$c1 $S1" "$c2 $S2")
    wait "$j1" "$j2"
    python3 - "$d" "$c" "$r" "$ns1" "$ns2" "$wall" <<'PY' || FAILED=1
import json, sys
d, case, r, ns1, ns2, wall = sys.argv[1], sys.argv[2], sys.argv[3], *map(int, sys.argv[4:7])
# The work per second from each test's own report (whole test; the window is its middle), and
# the CPU per unit of it: µs per transaction, ns per KB, ns per datagram.
def rate(n):
    s = json.load(open('%s.%d.json' % (d, n)))['summary']
    if case.startswith('rr.'):
        return s['rr']['transactions_per_second'], 1e-3
    if case == 'tcp':
        return s['up']['receiver']['bits_per_second'] / 8 / 1000, 1.0
    return s['up']['receiver']['packets_per_second'], 1.0
try:
    (r1, k), (r2, _) = rate(1), rate(2)
except Exception as e:  # one line saying which run gave no figure
    print('%-7s %5s  no figure: %s (see %s.*)' % (case, r, e, d))
    sys.exit(1)
w = wall / 1e9
u1, u2 = ns1 * k / (r1 * w), ns2 * k / (r2 * w)
print('%-7s %5s %12.0f %12.0f %12.3f %12.3f %8.3f' % (case, r, r1, r2, u1, u2, u2 / u1))
PY
  done
done
echo "(rate: transactions/s, KB/s or datagrams/s received; CPU/unit: µs per transaction, ns per KB, ns per datagram, client and server together; cost: 2's CPU/unit over 1's)"
echo "raw outputs: \$TMPDIR/$(basename "$WORK")"
exit "$FAILED"
