#!/usr/bin/env bash
# bench/stream_profile.sh — where a TCP stream test's CPU time goes, netchar beside iperf3 (and
# iperf2): the client on CPU C, the server on CPU S, `perf record -e cpu-clock -C C,S` over each
# tool's run and `perf stat` of the scheduler's events on the same CPUs. Per tool: the rate, each
# CPU's share spent in the tool's own processes, in other processes and idle, and per GB moved
# the CPU time by symbol (kernel functions, user-space code) of the tool's processes, with
# context switches and migrations per GB; the largest differences from netchar first.
# Counts per GB, not rates: they compare runs the machine ran at different speeds. cpu-clock
# samples on a timer, so it works on a VM without a PMU; a halted CPU takes no samples, so a
# CPU's idle time is the test's duration less its samples.
#
#   IPERF3=PATH bash bench/stream_profile.sh                # -P 4, 3 rounds of 3 s, alternated
#   P=1 TOOLS="netchar iperf3 iperf2" ROUNDS=5 bash bench/stream_profile.sh
# Knobs: NC (default target/release/netchar), P=4 (streams), DUR=3, ROUNDS=3 (runs per tool;
# figures summed over them), TOOLS="netchar iperf3", C=0, S=1, FREQ=4000 (samples/s a CPU),
# TOP=30 (rows), PORT_BASE=15420. Needs perf, taskset, python3 and the peers (lib.sh).
set -u -o pipefail
BENCH=stream_profile
. "$(dirname "${BASH_SOURCE[0]}")/lib.sh" || exit 2
ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
NC=${NC:-$ROOT/target/release/netchar}
P=${P:-4} DUR=${DUR:-3} ROUNDS=${ROUNDS:-3} TOOLS=${TOOLS:-"netchar iperf3"} C=${C:-0} S=${S:-1}
FREQ=${FREQ:-4000} TOP=${TOP:-30} PORT=${PORT_BASE:-15420}
need_posint P DUR ROUNDS FREQ TOP
find_peers
for t in perf taskset python3; do have "$t" || { echo "stream_profile.sh: $t is required" >&2; exit 2; }; done
[ -x "$NC" ] || { echo "stream_profile.sh: no netchar at $NC (build it, or set NC=)" >&2; exit 2; }
for t in $TOOLS; do
  case $t in
    netchar) ;;
    iperf3) [ -n "$IPERF3" ] || { echo "stream_profile.sh: iperf3 not found (set IPERF3=)" >&2; exit 2; } ;;
    iperf2) [ -n "$IPERF2" ] || { echo "stream_profile.sh: iperf2 not found (set IPERF2=)" >&2; exit 2; } ;;
    *) echo "stream_profile.sh: TOOLS takes netchar, iperf3 and iperf2, not $t" >&2; exit 2 ;;
  esac
done
WORK=$(mktemp -d -t netchar-stream-profile.XXXXXX)

# run TOOL BASE: one run under perf; writes BASE.data (samples), BASE.stat (scheduler events)
# and BASE.bytes (bytes received).
run() {
  local tool=$1 n=$WORK/$2 sp cp
  PORT=$((PORT + 1))
  case $tool in
    netchar) taskset -c "$S" "$NC" server -B 127.0.0.1 -p "$PORT" --one-off > "$n.srv" 2>&1 & sp=$! ;;
    iperf3) taskset -c "$S" "$IPERF3" -s -B 127.0.0.1 -p "$PORT" -1 > "$n.srv" 2>&1 & sp=$! ;;
    iperf2) taskset -c "$S" "$IPERF2" -s -B 127.0.0.1 -p "$PORT" -y C > "$n.srv" 2>&1 & sp=$! ;;
  esac
  local i
  for ((i = 0; i < 100; i++)); do port_in_use tcp "$PORT" && break; sleep 0.05; done
  local client
  case $tool in
    netchar) client=("$NC" tcp 127.0.0.1 -p "$PORT" -t "$DUR" -P "$P" -A "$C,$S" -i 0 --json) ;;
    iperf3) client=("$IPERF3" -c 127.0.0.1 -p "$PORT" -t "$DUR" -P "$P" -J) ;;
    iperf2) client=("$IPERF2" -c 127.0.0.1 -p "$PORT" -t "$DUR" -P "$P" -y C) ;;
  esac
  perf stat -a -C "$C,$S" -A -x, -e context-switches,cpu-migrations -o "$n.stat" -- \
    perf record -q -e cpu-clock -F "$FREQ" -C "$C,$S" -o "$n.data" -- \
    sh -c 'echo $$ > "$0"; exec "$@"' "$n.cpid" taskset -c "$C" "${client[@]}" > "$n.out" 2> "$n.err" & cp=$!
  wait "$cp"; local rc=$?
  [ "$rc" = 0 ] || { kill "$sp" 2>/dev/null; echo "stream_profile.sh: $tool's client failed: $(head -c 300 "$n.err")" >&2; exit 1; }
  case $tool in
    netchar) wait "$sp"
      python3 -c 'import json,sys; print(json.load(open(sys.argv[1]))["summary"]["up"]["receiver"]["bytes"])' "$n.out" > "$n.bytes" ;;
    iperf3) wait "$sp"
      python3 -c 'import json,sys; print(json.load(open(sys.argv[1]))["end"]["sum_received"]["bytes"])' "$n.out" > "$n.bytes" ;;
    iperf2) sleep 0.5; kill "$sp" 2>/dev/null; wait "$sp" 2>/dev/null
      # A line per stream (field 6 its id; a sum line, if any, has id -1); bytes are field 8.
      awk -F, '$6 > 0 {b += $8} END {print b + 0}' "$n.srv" > "$n.bytes" ;;
  esac
  # The tool's own processes, whose threads' samples are its (taskset and sh exec the tools).
  echo "$sp $(cat "$n.cpid")" > "$n.pids"
  [ -s "$n.bytes" ] || { echo "stream_profile.sh: $tool's run gave no byte count (see $n.err, $n.srv)" >&2; exit 1; }
}

versions="netchar $("$NC" --version 2>/dev/null | awk '{print $2}')"
for t in $TOOLS; do [ "$t" = netchar ] || versions+=", ${PEER_VER[$t]:-$t}"; done
echo "# stream_profile: $versions; Linux $(uname -r); TCP -P $P, client CPU $C, server CPU $S; ${DUR} s x $ROUNDS per tool, alternated; load average $(load_average)"
read -r -a tools <<< "$TOOLS"
for ((r = 1; r <= ROUNDS; r++)); do
  rotate "$r" "${tools[@]}"    # the tool that goes first changes every round
  for t in "${ORDER[@]}"; do run "$t" "$t-$r"; done
done
python3 - "$WORK" "$ROUNDS" "$FREQ" "$TOP" "$DUR" "$C" "$S" "$(basename "$NC")" $TOOLS <<'PY'
import collections, subprocess, sys
work, rounds, hz, top, dur, cpu_c, cpu_s, ncbin = sys.argv[1], int(sys.argv[2]), float(sys.argv[3]), int(sys.argv[4]), float(sys.argv[5]), sys.argv[6], sys.argv[7], sys.argv[8]
tools = sys.argv[9:]
def profile(tool):
    """Bytes moved, samples by (CPU, symbol) of the tool's processes, samples by CPU of
    everything else, and scheduler events over the tool's rounds."""
    moved, own, other, events = 0, collections.Counter(), collections.Counter(), collections.Counter()
    for r in range(1, rounds + 1):
        base = "%s/%s-%d" % (work, tool, r)
        moved += int(float(open(base + ".bytes").read().split()[0]))
        pids = set(open(base + ".pids").read().split())
        # perf's pid column is "thread:name"; `perf script` maps each thread to its process.
        threads = subprocess.run(["perf", "script", "-i", base + ".data", "-F", "pid,tid"], capture_output=True, text=True).stdout
        tids = {f[1] for f in (l.replace("/", " ").split() for l in threads.splitlines()) if len(f) == 2 and f[0] in pids}
        out = subprocess.run(["perf", "report", "-i", base + ".data", "--sort", "cpu,pid,dso,sym", "-n", "-q",
                              "--percent-limit", "0", "-F", "sample,cpu,pid,dso,sym"], capture_output=True, text=True).stdout
        for line in out.splitlines():
            f = line.split(None, 4)
            if len(f) < 5 or not f[0].isdigit():
                continue
            s, cpu, pid, dso, sym = int(f[0]), f[1].lstrip("0") or "0", f[2], f[3], f[4]
            sym = sym.replace("[k] ", "").replace("[.] ", "").strip()
            tid, name = pid.split(":", 1)
            if tid not in tids:
                other[(cpu, "idle" if pid.startswith("0:") else name.split("/")[0])] += s
                continue
            if dso != "[kernel.kallsyms]":
                sym = "user " + (dso + " " + sym if dso.startswith(("libc", "ld-linux", "[vdso")) else "(own code)")
            own[(cpu, sym)] += s
        for line in open(base + ".stat"):
            f = line.strip().split(",")
            if len(f) > 3 and f[1].replace(".", "").isdigit():
                events[(f[0].replace("CPU", ""), f[3])] += float(f[1])
    return moved, own, other, events
data = {t: profile(t) for t in tools}
for t in tools:
    if not data[t][0]:
        sys.exit("stream_profile.sh: %s moved no bytes (see %s)" % (t, work))
ms_per_gb = lambda samples, moved: samples / hz * 1e3 / (moved / 1e9)
print("\nrate and each CPU's busy time over the test's duration (its samples; the rest idle)")
for t in tools:
    moved, own, other, events = data[t]
    line = "  %-8s %6.2f Gbit/s" % (t, moved * 8 / (dur * rounds) / 1e9)
    for cpu, role in ((cpu_c, "client"), (cpu_s, "server")):
        o = sum(v for (c, _), v in own.items() if c == cpu)
        rest = sum(v for (c, k), v in other.items() if c == cpu and k != "idle")
        whole = hz * dur * rounds
        line += "  | CPU %s (%s): tool %4.1f%%, other %4.1f%%, idle %4.1f%%" % (
            cpu, role, 100 * o / whole, 100 * rest / whole, max(0.0, 100 * (1 - (o + rest) / whole)))
    print(line)
    busiest = sorted(((v, c, k) for (c, k), v in other.items() if k != "idle"), reverse=True)[:4]
    print("           other processes: " + ", ".join("CPU %s %s %.2f s" % (c, k, v / hz) for v, c, k in busiest))
print("\nper GB received: the tool's CPU ms on each CPU, context switches and migrations")
for t in tools:
    moved, own, other, events = data[t]
    cells = []
    for cpu, role in ((cpu_c, "client"), (cpu_s, "server")):
        o = sum(v for (c, _), v in own.items() if c == cpu)
        cells.append("%s %6.1f ms, %7.0f switches, %5.0f migrations" % (role, ms_per_gb(o, moved),
                     events[(cpu, "context-switches")] / (moved / 1e9), events[(cpu, "cpu-migrations")] / (moved / 1e9)))
    print("  %-8s %s" % (t, " | ".join(cells)))
base = tools[0]
for other_tool in tools[1:]:
    a, b = data[base], data[other_tool]
    print("\nCPU ms per GB by symbol, %s against %s (the largest differences first)" % (base, other_tool))
    print("  %-6s %-52s %8s %8s %8s" % ("CPU", "symbol", base, other_tool, "diff"))
    keys = set(a[1]) | set(b[1])
    for k in sorted(keys, key=lambda k: -abs(ms_per_gb(a[1][k], a[0]) - ms_per_gb(b[1][k], b[0])))[:top]:
        x, y = ms_per_gb(a[1][k], a[0]), ms_per_gb(b[1][k], b[0])
        print("  %-6s %-52s %8.2f %8.2f %+8.2f" % (k[0], k[1][:52], x, y, x - y))
PY
echo "perf data in $WORK"
