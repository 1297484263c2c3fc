#!/usr/bin/env bash
# bench/rr_profile.sh — where a request/response transaction's CPU time goes, netchar beside
# netperf: both ends on one CPU (or the server on SERVER_CPU), `perf record -e cpu-clock` on
# those CPUs during each tool's run, and
# per transaction the CPU time of the two processes' threads by symbol (kernel functions, each
# user-space library's functions), largest differences first.  cpu-clock samples on a timer, so
# it works on a VM without a PMU; the samples of other processes on that CPU (a shared machine)
# are left out: only threads with samples in the tool's own binary count.
#
#   NETPERF=PATH NETSERVER=PATH bash bench/rr_profile.sh            # TCP and UDP, 3 s each
#   NC=path/to/netchar PROTOS=tcp ROUNDS=3 bash bench/rr_profile.sh  # another build, TCP only, 3 runs each
#   SERVER_CPU=1 PROTOS=tcp bash bench/rr_profile.sh                  # cross core: each CPU's idle time too
# Knobs: NC (default target/release/netchar), DUR=3, ROUNDS=1 (runs per tool, alternated;
# figures summed over them), PROTOS="tcp udp", CPU=0, SERVER_CPU=CPU, PORT_BASE=15360, FREQ=20000 (samples/s),
# TOP=25 (rows).  Needs perf, taskset, python3 and netperf (lib.sh: find_peers).
set -u -o pipefail
BENCH=rr_profile
. "$(dirname "${BASH_SOURCE[0]}")/lib.sh" || exit 2
ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
NC=${NC:-$ROOT/target/release/netchar}
DUR=${DUR:-3} ROUNDS=${ROUNDS:-1} PROTOS=${PROTOS:-"tcp udp"} CPU=${CPU:-0}
PORT_BASE=${PORT_BASE:-15360} FREQ=${FREQ:-20000} TOP=${TOP:-25} S=${SERVER_CPU:-$CPU}
CPUS=$CPU; [ "$S" != "$CPU" ] && CPUS=$CPU,$S
find_peers
for t in perf taskset python3; do have "$t" || { echo "rr_profile.sh: $t is required" >&2; exit 2; }; done
[ -x "$NC" ] || { echo "rr_profile.sh: no netchar at $NC (build it, or set NC=)" >&2; exit 2; }
[ -n "$NETPERF" ] || { echo "rr_profile.sh: netperf not found (set NETPERF= and NETSERVER=)" >&2; exit 2; }
WORK=$(mktemp -d -t netchar-rr-profile.XXXXXX)
P=$PORT_BASE

# run TOOL PROTO N: one run under perf record; writes N.data and N.n (transactions).
run() {
  local tool=$1 proto=$2 n=$WORK/$3 sp cp
  if [ "$tool" = netchar ]; then
    taskset -c "$S" "$NC" server -B 127.0.0.1 -p "$P" --one-off > "$n.srv.log" 2>&1 & sp=$!
    sleep 1
    local u=(); [ "$proto" = udp ] && u=(--udp)
    perf record -q -e cpu-clock -F "$FREQ" -C "$CPUS" -o "$n.data" -- \
      taskset -c "$CPU" "$NC" rr 127.0.0.1 -p "$P" -t "$DUR" -A "$CPU,$S" -i 0 "${u[@]}" --json > "$n.json" 2> "$n.err" & cp=$!
    wait $cp; wait $sp
    python3 -c 'import json,sys; print(json.load(open(sys.argv[1]))["summary"]["rr"]["transactions"])' "$n.json" > "$n.n"
  else
    taskset -c "$S" "$NETSERVER" -D -f -L 127.0.0.1 -p "$P" > "$n.srv.log" 2>&1 & sp=$!
    sleep 1
    local nt=TCP_RR; [ "$proto" = udp ] && nt=UDP_RR
    perf record -q -e cpu-clock -F "$FREQ" -C "$CPUS" -o "$n.data" -- \
      taskset -c "$CPU" "$NETPERF" -H 127.0.0.1 -p "$P" -t "$nt" -l "$DUR" -P 0 -T "$CPU,$S" -- -r 1,1 -o THROUGHPUT,ELAPSED_TIME > "$n.out" 2> "$n.err"
    kill -INT "$sp" 2>/dev/null; wait "$sp" 2>/dev/null
    awk -F, '$1 ~ /^[0-9.]+$/ {printf "%d\n", $1 * $2}' "$n.out" | tail -1 > "$n.n"
  fi
  P=$((P + 1))
}

echo "# rr_profile: netchar $("$NC" --version 2>/dev/null | awk '{print $2}') beside ${PEER_VER[netperf]}; Linux $(uname -r); client on CPU $CPU, server on CPU $S; ${DUR} s x $ROUNDS per tool; load average $(load_average)"
for proto in $PROTOS; do
  for ((r = 1; r <= ROUNDS; r++)); do
    if [ $((r % 2)) = 1 ]; then run netchar "$proto" "nc-$proto-$r"; run netperf "$proto" "np-$proto-$r"
    else run netperf "$proto" "np-$proto-$r"; run netchar "$proto" "nc-$proto-$r"; fi
  done
  python3 - "$WORK" "$proto" "$ROUNDS" "$FREQ" "$TOP" "$(basename "$NC")" "$DUR" <<'PY'
import collections, subprocess, sys
work, proto, rounds, hz, top, ncbin, dur = sys.argv[1], sys.argv[2], int(sys.argv[3]), float(sys.argv[4]), int(sys.argv[5]), sys.argv[6], float(sys.argv[7])
def tool(prefix, binaries):
    """Samples by symbol of the tool's own processes (those with samples in its binaries)."""
    n, d = 0.0, collections.Counter()
    for r in range(1, rounds + 1):
        base = "%s/%s-%s-%d" % (work, prefix, proto, r)
        n += float(open(base + ".n").read().strip() or 0)
        # Each CPU's idle time: cross core, a transaction waits on a wake-up, and the time a CPU
        # sleeps in it is part of the transaction's. A halted vCPU takes no cpu-clock samples,
        # so idle is the run's duration less the CPU's samples of any process but the idle task.
        per_cpu = subprocess.run(["perf", "report", "-i", base + ".data", "--sort", "cpu,pid", "-n", "-q",
                                  "--percent-limit", "0", "-F", "sample,cpu,pid"], capture_output=True, text=True).stdout
        busy_cpu = collections.Counter()
        for line in per_cpu.splitlines():
            f = line.split(None, 2)
            if len(f) == 3 and f[0].isdigit() and not f[2].startswith("0:"):
                busy_cpu[int(f[1])] += int(f[0])
        for c in busy_cpu:
            d["idle on CPU %d" % c] += max(0.0, dur * hz - busy_cpu[c])
        out = subprocess.run(["perf", "report", "-i", base + ".data", "--sort", "pid,dso,sym", "-n", "-q",
                              "--percent-limit", "0", "-F", "sample,pid,dso,sym"], capture_output=True, text=True).stdout
        rows, pids = [], set()
        for line in out.splitlines():
            f = line.split(None, 3)
            if len(f) < 4 or not f[0].isdigit():
                continue
            rows.append((int(f[0]), f[1], f[2], f[3]))
            if f[2] in binaries:
                pids.add(f[1])
        for s, pid, dso, sym in rows:
            if pid not in pids:
                continue
            sym = sym.replace("[k] ", "").replace("[.] ", "").strip()
            if dso != "[kernel.kallsyms]":
                sym = "user " + ("(own code)" if dso in binaries else dso + " " + sym)
            d[sym] += s
    return n, d
na, a = tool("nc", {ncbin})
nb, b = tool("np", {"netperf", "netserver"})
us = lambda s, n: s / n / hz * 1e6 if n else 0.0
busy = lambda d: sum(v for k, v in d.items() if not k.startswith("idle on CPU"))
print("%s rr, CPU us per transaction (the threads of both ends that ran their own code): netchar %.3f (%d transactions), netperf %.3f (%d)"
      % (proto.upper(), us(busy(a), na), na, us(busy(b), nb), nb))
print("  %-58s %8s %8s %8s" % ("symbol", "netchar", "netperf", "diff"))
for k in sorted(set(a) | set(b), key=lambda k: -abs(us(a[k], na) - us(b[k], nb)))[:top]:
    print("  %-58s %8.3f %8.3f %+8.3f" % (k[:58], us(a[k], na), us(b[k], nb), us(a[k], na) - us(b[k], nb)))
PY
done
echo "perf data in $WORK"
