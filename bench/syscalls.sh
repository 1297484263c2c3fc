#!/usr/bin/env bash
# bench/syscalls.sh — load-independent cost counts: system calls per request/response
# transaction (netchar rr vs sockperf ping-pong and, at full speed under perf stat, netperf
# TCP_RR/UDP_RR too; TCP and UDP, one CPU) and per GB of a single
# TCP stream (netchar vs iperf3), counted with `strace -c -f` on both ends.  The absolute rates
# under strace mean nothing; calls per transaction and per GB do not depend on machine load.
#
#   bash bench/syscalls.sh                 # the netchar in target/release (built if missing)
#   NC=/path/to/netchar bash bench/syscalls.sh
#   DUR=2 PORT_BASE=15340 bash bench/syscalls.sh
#   NETPERF=PATH NETSERVER=PATH bash bench/syscalls.sh   # with netperf's columns (lib.sh: find_peers)
# Needs strace, taskset, python3; sockperf, netperf and iperf3 are optional (skipped with a message).
set -u -o pipefail
BENCH=syscalls
. "$(dirname "${BASH_SOURCE[0]}")/lib.sh" || exit 2
find_peers                  # NETPERF/NETSERVER from the environment (Debian 12 has no netperf)
DUR=${DUR:-2}
PORT_BASE=${PORT_BASE:-15340}
H=127.0.0.1
ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
NC=${NC:-$ROOT/target/release/netchar}
if [ ! -x "$NC" ]; then
  (cd "$ROOT" && cargo build --release -q -p netchar) || { echo "syscalls.sh: build failed" >&2; exit 1; }
fi
for t in strace taskset python3; do
  command -v "$t" >/dev/null || { echo "syscalls.sh: $t is required" >&2; exit 2; }
done
WORK=$(mktemp -d -t netchar-syscalls.XXXXXX)

# per UNIT COUNT FILE -> the calls of FILE divided by COUNT, the five commonest.
per() { python3 - "$1" "$2" "$3" <<'PY'
import sys
unit, count, path = sys.argv[1], float(sys.argv[2]), sys.argv[3]
rows = {}
for line in open(path):
    f = line.split()
    if len(f) >= 5 and f[0][0].isdigit() and f[-1] != "total":
        try:
            rows[f[-1]] = int(f[3])
        except ValueError:
            pass
total = sum(rows.values())
top = sorted(rows.items(), key=lambda kv: -kv[1])[:6]
print("%8.2f calls per %s (%s)" % (total / count, unit, ", ".join("%s %.2f" % (k, v / count) for k, v in top)))
PY
}

# Servers run in their own session: sockperf signals its whole process group when it stops.
server_pid=""
# Stops the traced server itself (strace's child), so strace writes its summary and exits.
stop_server() {
  [ -n "$server_pid" ] || return 0
  local child
  child=$(pgrep -P "$server_pid" | head -1)
  kill "${child:-$server_pid}" 2>/dev/null
  wait "$server_pid" 2>/dev/null
  server_pid=""
}
trap stop_server EXIT

echo "# netchar: $("$NC" --version 2>/dev/null | head -1); Linux $(uname -r); $DUR s per run under strace"
echo "## request/response, 1 transaction in flight, client and server on CPU 0"
for proto in tcp udp; do
  P=$PORT_BASE
  setsid taskset -c 0 strace -c -f -o "$WORK/nc-srv-$proto.txt" "$NC" server -B $H -p $P --one-off > "$WORK/nc-srv-$proto.log" 2>&1 &
  server_pid=$!
  sleep 1.5
  udp=(); [ $proto = udp ] && udp=(--udp)
  taskset -c 0 strace -c -f -o "$WORK/nc-cli-$proto.txt" "$NC" rr $H -p $P -t "$DUR" -A 0,0 -i 0 "${udp[@]}" --json > "$WORK/nc-cli-$proto.json" 2> "$WORK/nc-cli-$proto.err"
  n=$(python3 -c 'import json,sys; d=json.load(open(sys.argv[1])); print(sum((s.get("rr") or {}).get("transactions",0) for s in d["streams"]))' "$WORK/nc-cli-$proto.json")
  sleep 0.5; stop_server
  echo "netchar rr $proto: $n transactions"
  echo "  client $(per transaction "$n" "$WORK/nc-cli-$proto.txt")"
  echo "  server $(per transaction "$n" "$WORK/nc-srv-$proto.txt")"
  if command -v sockperf >/dev/null; then
    sp=(); [ $proto = tcp ] && sp=(--tcp)
    setsid taskset -c 0 strace -c -f -o "$WORK/sp-srv-$proto.txt" sockperf server -i $H -p $((P + 1)) "${sp[@]}" > "$WORK/sp-srv-$proto.log" 2>&1 &
    server_pid=$!
    sleep 1.5
    taskset -c 0 strace -c -f -o "$WORK/sp-cli-$proto.txt" sockperf ping-pong -i $H -p $((P + 1)) "${sp[@]}" -t "$DUR" --full-rtt > "$WORK/sp-cli-$proto.log" 2>&1
    # Every message of the run, warm-up included: strace counted those calls too.
    n=$(sed -n 's/.*\[Total Run\].*SentMessages=\([0-9]*\).*/\1/p' "$WORK/sp-cli-$proto.log" | tail -1)
    sleep 0.5; stop_server
    echo "sockperf ping-pong $proto: ${n:-?} messages"
    [ -n "$n" ] && echo "  client $(per transaction "$n" "$WORK/sp-cli-$proto.txt")"
    [ -n "$n" ] && echo "  server $(per transaction "$n" "$WORK/sp-srv-$proto.txt")"
  else
    echo "sockperf not installed: skipped"
  fi
done

# ---------------------------------------------------------------- per transaction, perf stat
# The same pairs at full speed under `perf stat` (software events and tracepoints, no PMU
# needed): system calls, context switches, kernel timers armed and, with a uprobe on libc's
# clock_gettime, clock reads, per transaction, side by side.  sockperf reads the TSC inline
# (rdtsc), so its clock reads do not show here.
PROBE_ADDED=""
perf_table() {
  command -v perf >/dev/null || { echo "perf not installed: no per-transaction table"; return; }
  perf stat -e raw_syscalls:sys_enter,timer:timer_start true >/dev/null 2>&1 ||
    { echo "perf cannot count tracepoints here (needs root or perf_event_paranoid <= -1): no per-transaction table"; return; }
  local ev=task-clock,raw_syscalls:sys_enter,context-switches,timer:timer_start libc
  libc=$(ldd "$NC" | awk '/libc\.so/ {print $3; exit}')
  # (perf list into a variable: under pipefail, grep -q closing the pipe early fails it)
  local have
  have=$(perf list 2>/dev/null)
  if [[ $have == *probe_libc:clock_gettime* ]]; then
    ev=$ev,probe_libc:clock_gettime
  elif [ -n "$libc" ] && perf probe -q -x "$libc" -a clock_gettime >/dev/null 2>&1; then
    PROBE_ADDED=probe_libc:clock_gettime; ev=$ev,probe_libc:clock_gettime
  else
    echo "(no uprobe on libc's clock_gettime: clock reads not counted)"
  fi
  local proto P=$((PORT_BASE + 4)) spid pp n udp sp
  for proto in tcp udp; do
    udp=(); [ $proto = udp ] && udp=(--udp)
    setsid taskset -c 0 "$NC" server -B $H -p $P --one-off > "$WORK/pc-nc-srv-$proto.log" 2>&1 &
    spid=$!; sleep 1.5
    perf stat -x, -e "$ev" -p "$spid" -o "$WORK/pc-nc-srv-$proto.csv" & pp=$!
    perf stat -x, -e "$ev" -o "$WORK/pc-nc-cli-$proto.csv" taskset -c 0 "$NC" rr $H -p $P -t "$DUR" -A 0,0 -i 0 "${udp[@]}" --json > "$WORK/pc-nc-$proto.json" 2>> "$WORK/pc-nc-$proto.err"
    kill -INT $pp; wait $pp 2>/dev/null; kill "$spid" 2>/dev/null; wait "$spid" 2>/dev/null
    n=$(python3 -c 'import json,sys; d=json.load(open(sys.argv[1])); print(sum((s.get("rr") or {}).get("transactions",0) for s in d["streams"]))' "$WORK/pc-nc-$proto.json" 2>/dev/null)
    echo "${n:-0}" > "$WORK/pc-nc-$proto.n"
    if command -v sockperf >/dev/null; then
      sp=(); [ $proto = tcp ] && sp=(--tcp)
      setsid taskset -c 0 sockperf server -i $H -p $((P + 1)) "${sp[@]}" > "$WORK/pc-sp-srv-$proto.log" 2>&1 &
      spid=$!; sleep 1.5
      perf stat -x, -e "$ev" -p "$spid" -o "$WORK/pc-sp-srv-$proto.csv" & pp=$!
      perf stat -x, -e "$ev" -o "$WORK/pc-sp-cli-$proto.csv" taskset -c 0 sockperf ping-pong -i $H -p $((P + 1)) "${sp[@]}" -t "$DUR" --full-rtt > "$WORK/pc-sp-$proto.log" 2>&1
      kill -INT $pp; wait $pp 2>/dev/null; kill "$spid" 2>/dev/null; wait "$spid" 2>/dev/null
      sed -n 's/.*\[Total Run\].*SentMessages=\([0-9]*\).*/\1/p' "$WORK/pc-sp-$proto.log" | tail -1 > "$WORK/pc-sp-$proto.n"
    fi
    if [ -n "$NETPERF" ]; then
      # -f: netserver runs the test itself instead of a forked child, so perf stat -p sees it.
      setsid taskset -c 0 "$NETSERVER" -D -f -L $H -p $((P + 20)) > "$WORK/pc-np-srv-$proto.log" 2>&1 &
      spid=$!; sleep 1.5
      perf stat -x, -e "$ev" -p "$spid" -o "$WORK/pc-np-srv-$proto.csv" & pp=$!
      local nt=TCP_RR; [ $proto = udp ] && nt=UDP_RR
      perf stat -x, -e "$ev" -o "$WORK/pc-np-cli-$proto.csv" taskset -c 0 "$NETPERF" -H $H -p $((P + 20)) -t $nt -l "$DUR" -P 0 -T 0,0 -- -r 1,1 -o THROUGHPUT,ELAPSED_TIME > "$WORK/pc-np-$proto.log" 2>&1
      kill -INT $pp; wait $pp 2>/dev/null; kill "$spid" 2>/dev/null; wait "$spid" 2>/dev/null
      awk -F, '$1 ~ /^[0-9.]+$/ {printf "%d\n", $1 * $2}' "$WORK/pc-np-$proto.log" | tail -1 > "$WORK/pc-np-$proto.n"
    fi
    P=$((P + 2))
  done
  python3 - "$WORK" <<'PY'
import os, sys
work = sys.argv[1]
names = [("task-clock", "CPU µs (task-clock)"), ("raw_syscalls:sys_enter", "system calls"), ("context-switches", "context switches"),
         ("timer:timer_start", "kernel timers armed"), ("probe_libc:clock_gettime", "clock reads (libc)")]
def counts(path):
    d = {}
    try:
        for line in open(path):
            f = line.strip().split(",")
            if len(f) >= 3 and f[0] and f[0][0].isdigit():
                # task-clock is in ms: per transaction it is printed in µs
                d[f[2]] = float(f[0]) * (1000.0 if f[2] == "task-clock" else 1.0)
    except OSError:
        pass
    return d
def txns(tool, proto):
    try:
        return float(open(os.path.join(work, "pc-%s-%s.n" % (tool, proto))).read().strip() or 0)
    except OSError:
        return 0.0
for proto in ("tcp", "udp"):
    cols = []
    for tool in ("nc", "sp", "np"):
        n = txns(tool, proto)
        for end in ("cli", "srv"):
            cols.append((n, counts(os.path.join(work, "pc-%s-%s-%s.csv" % (tool, end, proto)))))
    print("%s rr, per transaction (%d netchar, %d sockperf, %d netperf)" % (proto.upper(), cols[0][0], cols[2][0], cols[4][0]))
    print("  %-24s %15s %7s | %15s %7s | %15s %7s" % ("", "netchar client", "server", "sockperf client", "server", "netperf client", "server"))
    for key, label in names:
        if not any(key in c for _, c in cols):
            continue
        cells = ["%7.3f" % (c[key] / n) if n and key in c else "      -" for n, c in cols]
        print("  %-24s %15s %7s | %15s %7s | %15s %7s" % (label, *cells))
PY
  echo "  (sockperf keeps time with inline rdtsc: its clock reads are not libc calls; netperf built"
  echo "   without --enable-histogram reads no clock per transaction)"
}
echo "## request/response at full speed, per transaction (perf stat), client and server on CPU 0"
perf_table
[ -n "$PROBE_ADDED" ] && perf probe -q -d "$PROBE_ADDED" >/dev/null 2>&1

echo "## TCP, 1 stream up, default block"
P=$((PORT_BASE + 2))
setsid strace -c -f -o "$WORK/nc-srv-tcp1.txt" "$NC" server -B $H -p $P --one-off > "$WORK/nc-srv-tcp1.log" 2>&1 &
server_pid=$!
sleep 1.5
strace -c -f -o "$WORK/nc-cli-tcp1.txt" "$NC" tcp $H -p $P -t "$DUR" -i 1 --json > "$WORK/nc-cli-tcp1.json" 2> "$WORK/nc-cli-tcp1.err"
sleep 0.5; stop_server
gb=$(python3 -c 'import json,sys; d=json.load(open(sys.argv[1])); print(d["summary"]["up"]["receiver"]["total_bytes"]/1e9)' "$WORK/nc-cli-tcp1.json")
echo "netchar tcp -i 1: $gb GB"
echo "  sender   $(per GB "$gb" "$WORK/nc-cli-tcp1.txt")"
echo "  receiver $(per GB "$gb" "$WORK/nc-srv-tcp1.txt")"
if command -v iperf3 >/dev/null; then
  setsid strace -c -f -o "$WORK/i3-srv-tcp1.txt" iperf3 -s -B $H -p $((P + 1)) -1 > "$WORK/i3-srv.log" 2>&1 &
  server_pid=$!
  sleep 1.5
  strace -c -f -o "$WORK/i3-cli-tcp1.txt" iperf3 -c $H -p $((P + 1)) -t "$DUR" -J > "$WORK/i3-cli-tcp1.json" 2>&1
  sleep 0.5; stop_server
  gb=$(python3 -c 'import json,sys; d=json.load(open(sys.argv[1])); print(d["end"]["sum_received"]["bytes"]/1e9)' "$WORK/i3-cli-tcp1.json")
  echo "iperf3: $gb GB"
  echo "  sender   $(per GB "$gb" "$WORK/i3-cli-tcp1.txt")"
  echo "  receiver $(per GB "$gb" "$WORK/i3-srv-tcp1.txt")"
fi
echo "raw strace summaries in $WORK"
