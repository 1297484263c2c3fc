#!/usr/bin/env bash
# bench/threads_pair.sh — what being multi-threaded costs a TCP request/response on one CPU.
#
# netperf and sockperf are single-threaded; netchar's client and server have a control thread
# and a collector beside each data worker. This runs bench/ref/pingpong.c, a minimal one-byte
# ping-pong, twice at the same time on one CPU (as rr_pair.sh runs netchar beside netperf):
# one pair single-threaded, the other with one more, waiting, thread in each process. Each
# pair's CPU time over the same window (/proc/PID/task/*/schedstat, every thread) over its
# transactions gives CPU microseconds per transaction; "cost" is the multi-threaded pair's over
# the single-threaded pair's. Two comparisons:
#   libc     both pairs call libc's send()/recv(); the multi-threaded processes share one
#            descriptor table between their threads (any program's default);
#   direct   both pairs call send and receive by syscall(2) and the multi-threaded processes
#            give the calling thread a table of its own (unshare(CLONE_FILES)): what netchar's
#            rr workers do (crates/sys/src/direct.rs, dataplane/mod.rs).
#
#   bash bench/threads_pair.sh                # both comparisons, 5 rounds of 8 s each
#   MODES=direct ROUNDS=3 bash bench/threads_pair.sh
# Knobs: DUR=8, ROUNDS=5, CPU=0, MODES="libc direct", PORT_BASE=15440. Needs gcc, taskset, python3.
set -u -o pipefail
BENCH=threads_pair
BENCH_DIR=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
. "$BENCH_DIR/lib.sh" || exit 2
DUR=${DUR:-8} ROUNDS=${ROUNDS:-5} CPU=${CPU:-0} MODES=${MODES:-"libc direct"} P=${PORT_BASE:-15440}
need_posint DUR ROUNDS
need_uint CPU P
need_pair_dur
for mode in $MODES; do
  case $mode in libc | direct) ;; *) echo "threads_pair.sh: MODES are libc and direct (got '$mode')" >&2; exit 2 ;; esac
done
for t in gcc taskset python3; do have "$t" || { echo "threads_pair.sh: $t is required" >&2; exit 2; }; done
WORK=$(mktemp -d -t netchar-threads-pair.XXXXXX)
PIDS=()
trap 'pair_stop "${PIDS[@]}"' EXIT
gcc -O2 -pthread -o "$WORK/pingpong" "$BENCH_DIR/ref/pingpong.c" 2> "$WORK/build.err" \
  || { echo "threads_pair.sh: cannot build bench/ref/pingpong.c (see $WORK/build.err)" >&2; exit 1; }
PP=$WORK/pingpong

echo "# threads_pair: bench/ref/pingpong.c, a single-threaded and a multi-threaded pair at the same time, all four processes on CPU $CPU; $ROUNDS rounds of ${DUR} s; Linux $(uname -r), $(nproc) CPUs; load average $(load_average)"
printf '%-7s %5s %12s %12s %14s %14s %8s\n' mode round "single t/s" "threads t/s" "single us/t" "threads us/t" cost
FAILED=0
for mode in $MODES; do
  case $mode in
    libc) single=() multi=(-t) ;;
    direct) single=(-d) multi=(-t -d -u) ;;
  esac
  for ((r = 1; r <= ROUNDS; r++)); do
    d=$WORK/$mode.$r p1=$((P + 2 * r)) p2=$((P + 2 * r + 1))
    run_pid "$d.s1.pid" taskset -c "$CPU" "$PP" server "$p1" "${single[@]}" 2> "$d.s1.err" &
    run_pid "$d.s2.pid" taskset -c "$CPU" "$PP" server "$p2" "${multi[@]}" 2> "$d.s2.err" &
    s1=$(pid_of "$d.s1.pid") s2=$(pid_of "$d.s2.pid")
    PIDS=("$s1" "$s2")
    pair_listening threads_pair.sh "$p1" "$d.s1.err" "$p2" "$d.s2.err"
    run_pid "$d.c1.pid" taskset -c "$CPU" "$PP" client "$p1" "$DUR" "${single[@]}" > "$d.c1.out" 2> "$d.c1.err" & j1=$!
    run_pid "$d.c2.pid" taskset -c "$CPU" "$PP" client "$p2" "$DUR" "${multi[@]}" > "$d.c2.out" 2> "$d.c2.err" & j2=$!
    c1=$(pid_of "$d.c1.pid") c2=$(pid_of "$d.c2.pid")
    read -r ns1 ns2 wall < <(pair_window "$DUR" "$c1 $s1" "$c2 $s2")
    wait "$j1" "$j2"
    python3 - "$d" "$mode" "$r" "$ns1" "$ns2" "$wall" <<'PY' || FAILED=1
import sys
d, mode, r, ns1, ns2, wall = sys.argv[1], sys.argv[2], sys.argv[3], *map(int, sys.argv[4:7])
try:
    n1, t1 = open(d + '.c1.out').read().split()
    n2, t2 = open(d + '.c2.out').read().split()
except ValueError:
    print('%-7s %5s  no figure (see %s.*)' % (mode, r, d))
    sys.exit(1)
r1, r2, w = int(n1) / float(t1), int(n2) / float(t2), wall / 1e9
u1, u2 = ns1 / 1e3 / (r1 * w), ns2 / 1e3 / (r2 * w)
print('%-7s %5s %12.0f %12.0f %14.3f %14.3f %8.3f' % (mode, r, r1, r2, u1, u2, u2 / u1))
PY
  done
done
echo "(us/t: CPU microseconds per transaction, client and server together; cost: the multi-threaded pair's us/t over the single-threaded pair's)"
echo "raw outputs: \$TMPDIR/$(basename "$WORK")"
exit "$FAILED"
