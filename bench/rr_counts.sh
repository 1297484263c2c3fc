#!/usr/bin/env bash
# bench/rr_counts.sh — what each thread of a request/response run does per transaction, netchar
# beside netperf and netperf -j (which times each transaction, as netchar does), both ends on one CPU: system calls by kind, context switches (blocked or
# preempted), kernel timers armed (by function) and libc clock_gettime calls, from tracepoints
# and a uprobe recorded with `perf record -C CPU`, only the two processes of the run counted.
# Counts, not rates: they do not depend on how busy the machine is (a VM without a PMU has no
# instruction counters; rr_profile.sh gives the CPU time by symbol).
# The runs take place in a network namespace of their own, so its SNMP counters (nstat) before
# and after each run count that run's packets alone: segments, pure ACKs, datagrams per
# transaction, what the kernel was asked to carry.
#
#   NETPERF=PATH NETSERVER=PATH bash bench/rr_counts.sh       # TCP and UDP, 3 s each
#   NC=path/to/netchar PROTOS=udp bash bench/rr_counts.sh
# Knobs: NC (default target/release/netchar), DUR=3, PROTOS="tcp udp", CPU=0, PORT_BASE=15380.
# Needs perf (root: tracepoints and a uprobe on libc's clock_gettime), ip and nstat (iproute2),
# taskset, python3.
set -u -o pipefail
BENCH=rr_counts
. "$(dirname "${BASH_SOURCE[0]}")/lib.sh" || exit 2
ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
NC=${NC:-$ROOT/target/release/netchar}
DUR=${DUR:-3} PROTOS=${PROTOS:-"tcp udp"} CPU=${CPU:-0} P=${PORT_BASE:-15380}
find_peers
for t in perf ip nstat taskset python3; do have "$t" || { echo "rr_counts.sh: $t is required" >&2; exit 2; }; done
[ -x "$NC" ] || { echo "rr_counts.sh: no netchar at $NC (build it, or set NC=)" >&2; exit 2; }
libc=$(ldd "$NC" | awk '/libc\.so/ {print $3; exit}')
added=""
# (perf list into a variable: under pipefail, grep -q closing the pipe early fails it)
events=$(perf list 2>/dev/null)
# Clock reads: clock_gettime (netchar's Instant::now) and gettimeofday (netperf -j's timing).
for fn in clock_gettime gettimeofday; do
  if [[ $events != *probe_libc:$fn* ]]; then
    perf probe -q -x "$libc" -a $fn >/dev/null 2>&1 && added="$added probe_libc:$fn"
  fi
done
# glibc's gettimeofday is an IFUNC bound to the vDSO, so its calls never pass the libc symbol:
# netperf -j's reads are counted at its two timing functions (one gettimeofday each).
if [ -n "$NETPERF" ]; then
  for fn in HIST_timestamp_start HIST_timestamp_stop_add; do
    if [[ $events != *probe_netperf:$fn* ]]; then
      perf probe -q -x "$NETPERF" -a $fn >/dev/null 2>&1 && added="$added probe_netperf:$fn"
    fi
  done
fi
ev=raw_syscalls:sys_enter,sched:sched_switch,timer:timer_start,timer:hrtimer_start
events=$(perf list 2>/dev/null)
for fn in probe_libc:clock_gettime probe_libc:gettimeofday probe_netperf:HIST_timestamp_start probe_netperf:HIST_timestamp_stop_add; do
  [[ $events == *$fn* ]] && ev=$ev,$fn
done
WORK=$(mktemp -d -t netchar-rr-counts.XXXXXX)
# The namespace: loopback, and a veth pair with an address only so that netperf's getaddrinfo
# (AI_ADDRCONFIG) accepts 127.0.0.1 there; no test traffic crosses it.
NS=netchar-rr-counts-$$
# (set before the namespace is made: an exit on its failure still removes the probes added above)
trap 'for p in $added; do perf probe -q -d "$p" >/dev/null 2>&1; done; ip netns del "$NS" 2>/dev/null' EXIT
ip netns add "$NS" || { echo "rr_counts.sh: cannot make a network namespace (root is needed)" >&2; exit 2; }
X=(ip netns exec "$NS")
"${X[@]}" ip link set lo up \
  && "${X[@]}" ip link add nc-rrc0 type veth peer name nc-rrc1 \
  && "${X[@]}" ip addr add 192.0.2.1/24 dev nc-rrc0 \
  && "${X[@]}" ip link set nc-rrc0 up && "${X[@]}" ip link set nc-rrc1 up \
  || { echo "rr_counts.sh: cannot set up the namespace's links" >&2; exit 2; }
# snmp FILE: the namespace's SNMP counters (name value), absolute, without touching nstat's history.
snmp() { "${X[@]}" nstat -asz 2>/dev/null | awk '!/^#/ {print $1, $2}' > "$1"; }

# run TOOL PROTO: one run under perf record; writes DIR/{srvpid,clipid,n,script.txt}.
run() {
  local tool=$1 proto=$2 d=$WORK/$1-$2 sp
  mkdir -p "$d"
  if [ "$tool" = netchar ]; then
    run_pid "$d/srvpid" "${X[@]}" taskset -c "$CPU" "$NC" server -B 127.0.0.1 -p "$P" --one-off > "$d/srv.log" 2>&1 & sp=$!
    sleep 1
    local u=(); [ "$proto" = udp ] && u=(--udp)
    snmp "$d/snmp.before"
    perf record -q -m 16M -e "$ev" -C "$CPU" -o "$d/perf.data" -- \
      "${X[@]}" sh -c 'echo $$ > "$0"; exec "$@"' "$d/clipid" taskset -c "$CPU" "$NC" rr 127.0.0.1 -p "$P" -t "$DUR" -A "$CPU,$CPU" -i 0 "${u[@]}" --json > "$d/out.json" 2> "$d/err"
    wait $sp
    snmp "$d/snmp.after"
    python3 -c 'import json,sys; print(json.load(open(sys.argv[1]))["summary"]["rr"]["transactions"])' "$d/out.json" > "$d/n"
  else
    [ -n "$NETPERF" ] || return 0
    run_pid "$d/srvpid" "${X[@]}" taskset -c "$CPU" "$NETSERVER" -D -f -L 127.0.0.1 -p "$P" > "$d/srv.log" 2>&1 & sp=$!
    sleep 1
    local nt=TCP_RR; [ "$proto" = udp ] && nt=UDP_RR
    # netperf-j: netperf -j, which times every transaction (for its percentiles) as netchar does.
    local j=(); [ "$tool" = netperf-j ] && j=(-j)
    snmp "$d/snmp.before"
    perf record -q -m 16M -e "$ev" -C "$CPU" -o "$d/perf.data" -- \
      "${X[@]}" sh -c 'echo $$ > "$0"; exec "$@"' "$d/clipid" taskset -c "$CPU" "$NETPERF" -H 127.0.0.1 -p "$P" -t "$nt" -l "$DUR" -P 0 -T "$CPU,$CPU" "${j[@]}" -- -r 1,1 -o THROUGHPUT,ELAPSED_TIME > "$d/out.txt" 2> "$d/err"
    # ($sp is the shell that wrote the pid file; netserver is the process it exec'd into.)
    snmp "$d/snmp.after"
    kill "$(cat "$d/srvpid")" 2>/dev/null; wait "$sp" 2>/dev/null
    awk -F, '$1 ~ /^[0-9.]+$/ {printf "%d\n", $1 * $2}' "$d/out.txt" | tail -1 > "$d/n"
  fi
  perf report -i "$d/perf.data" --stats 2>/dev/null | grep -i lost > "$d/lost"
  perf script -i "$d/perf.data" -F pid,tid,comm,event,trace > "$d/script.txt" 2>/dev/null
  P=$((P + 1))
}

echo "# rr_counts: netchar $("$NC" --version 2>/dev/null | awk '{print $2}') beside ${PEER_VER[netperf]:-no netperf}; Linux $(uname -r); both ends on CPU $CPU; ${DUR} s each; load average $(load_average)"
for proto in $PROTOS; do
  run netchar "$proto"; run netperf "$proto"; run netperf-j "$proto"
  for tool in netchar netperf netperf-j; do
    [ -s "$WORK/$tool-$proto/n" ] || continue
    python3 - "$WORK/$tool-$proto" "$tool $proto" <<'PY'
import collections, re, sys
d, label = sys.argv[1], sys.argv[2]
NR = {0: 'read', 1: 'write', 3: 'close', 7: 'poll', 35: 'nanosleep', 44: 'sendto', 45: 'recvfrom', 46: 'sendmsg',
      47: 'recvmsg', 54: 'setsockopt', 202: 'futex', 228: 'clock_gettime', 230: 'clock_nanosleep', 232: 'epoll_wait',
      270: 'pselect6', 271: 'ppoll', 281: 'epoll_pwait'}
n = float(open(d + '/n').read().strip() or 0)
want = {open(d + '/srvpid').read().strip(), open(d + '/clipid').read().strip()}
thr, names = collections.defaultdict(collections.Counter), {}
for line in open(d + '/script.txt'):
    m = re.match(r'\s*(\S.*?)\s+(\d+)/(\d+)\s+(\S+):\s*(.*)', line)
    if not m or m.group(2) not in want:
        continue
    comm, pid, tid, ev, rest = m.groups()
    names[(pid, tid)] = comm
    c = thr[(pid, tid)]
    if ev == 'raw_syscalls:sys_enter':
        c['syscalls'] += 1
        nr = int(rest.split()[1])
        c['syscall ' + NR.get(nr, 'nr %d' % nr)] += 1
    elif ev == 'sched:sched_switch':
        c['context switches'] += 1
        st = re.search(r'prev_state=(\S+)', rest).group(1)
        c['  of which ' + ('preempted' if st.startswith('R') else 'blocked')] += 1
    elif ev in ('timer:timer_start', 'timer:hrtimer_start'):
        c['timers armed'] += 1
        c['timer ' + re.search(r'function=(\S+)', rest).group(1)] += 1
    elif ev.startswith('probe_libc:'):
        c['clock reads (libc %s)' % ev.split(':')[1]] += 1
    elif ev.startswith('probe_netperf:'):
        c['clock reads (netperf %s)' % ev.split(':')[1]] += 1
print('%s: %d transactions; per transaction, by process (server first) and by thread' % (label, n))
for pid in [open(d + '/srvpid').read().strip(), open(d + '/clipid').read().strip()]:
    tot = collections.Counter()
    for (p, t), c in sorted(thr.items()):
        if p == pid:
            tot.update(c)
            busy = {k: v / n for k, v in c.items() if v / n >= 0.0005}
            if busy:
                print('    thread %-18s %s' % (names[(p, t)], '  '.join('%s %.4f' % kv for kv in sorted(busy.items(), key=lambda kv: -kv[1]))))
    print('  %s, all threads: %s' % ('server' if pid == open(d + '/srvpid').read().strip() else 'client',
          '  '.join('%s %.4f' % (k, v / n) for k, v in sorted(tot.items(), key=lambda kv: -kv[1]) if v / n >= 0.0005)))
# Packets: the namespace carried this run alone (its control connection's few segments included).
snmp = [dict(l.split() for l in open(d + f)) for f in ('/snmp.before', '/snmp.after')]
wire = ['IpOutRequests', 'TcpOutSegs', 'TcpRetransSegs', 'TcpExtTCPPureAcks', 'TcpExtDelayedACKs',
        'TcpExtTCPHPHits', 'UdpOutDatagrams', 'UdpInErrors', 'IpExtOutOctets']
print('  packets, both ends: ' + '  '.join('%s %.4f' % (k, (int(snmp[1].get(k, 0)) - int(snmp[0].get(k, 0))) / n) for k in wire))
PY
  done
done
echo "perf data in $WORK"
