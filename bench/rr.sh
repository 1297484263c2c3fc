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
#   netperf            TCP_RR / UDP_RR -r 1,1, only when NETPERF_BIN points at a netperf build
# Within a round the tools run back to back (starting tool rotated each round) so they see the
# same machine state; every figure is the median over rounds of that column.
#
# Knobs (environment):
#   DUR=3            seconds per run
#   ROUNDS=3         rounds (median over these)
#   PORT_BASE=15320  ports PORT_BASE..PORT_BASE+7 on 127.0.0.1 (TCP, and UDP for the UDP servers)
#   NETPERF_BIN=     directory holding netperf and netserver (not packaged by Debian); unset = skip
#   SERVER_CPU_CROSS=1  the cross-core placement's server CPU (client and same-core server: CLIENT_CPU)
#   CLIENT_CPU=0
#   BENCH_SAVE=0     1 = also write the report to bench/results/rr-<date>.txt
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
if have sockperf; then PEERS+=(sockperf)
else echo "sockperf not found: skipping it (install with: sudo apt-get install sockperf)"; fi
NETPERF="" NETSERVER=""
if [ -n "${NETPERF_BIN:-}" ] && [ -x "$NETPERF_BIN/netperf" ] && [ -x "$NETPERF_BIN/netserver" ]; then
  NETPERF=$NETPERF_BIN/netperf; NETSERVER=$NETPERF_BIN/netserver; PEERS+=(netperf)
elif [ -n "${NETPERF_BIN:-}" ]; then
  echo "netperf: not available (no executable netperf and netserver in NETPERF_BIN=$NETPERF_BIN)"
else
  echo "netperf: not available (set NETPERF_BIN)"
fi
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
have sockperf && SERVERS+=(sp.udp.same sp.udp.cross sp.tcp.same sp.tcp.cross)
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
    sp.udp.*) CMD=(sockperf sr -i "$H" -p "$p"); READY=(udp "$p") ;;
    sp.tcp.*) CMD=(sockperf sr --tcp -i "$H" -p "$p") ;;
    # -D: stay in the foreground (so `timeout` and the trap own it); it forks a child per test,
    # which inherits this pinning (and -T re-pins it to the same CPU).
    np.*)     CMD=("$NETSERVER" -D -L "$H" -p "$p") ;;
  esac
  CMD=(taskset -c "${SCPU[$pl]}" "${CMD[@]}")
}
server_who() { echo "server $1"; }       # messages say "server sp.udp.cross"
stop_servers_on_exit

# ------------------------------------------------------------------ result parser
# parse.py TOOL FILE PROTO LEN CCPU SCPU BUSYPOLL DUR
#   -> "tps mean_us p50_us p99_us p999_us|- note..."  (notes: space-separated tokens;
#   exit status 1 = no usable result)
cat > "$WORK/parse.py" <<'EOF'
import json, re, sys
tool, path, proto, length, ccpu, scpu, busy, dur = sys.argv[1:9]
length, ccpu, scpu, dur = int(length), int(ccpu), int(scpu), float(dur)
notes = []
def out(tps, mean, p50, p99, p999):
    f = lambda x: "-" if x is None else "%.3f" % x
    print("%.1f %s %s %s %s %s" % (tps, f(mean), f(p50), f(p99), f(p999), " ".join(notes)))

if tool == "netchar":
    d = json.load(open(path))
    if d.get("error"):
        notes.append(("error=%r" % d["error"]).replace(" ", "_"))
    summ = d.get("summary") or {}
    s = summ.get("rr")
    if not s or not s.get("latency_us"):
        sys.exit("no summary.rr in netchar JSON (error=%r)" % d.get("error"))
    lat = s["latency_us"]
    tps, mean = s["transactions_per_second"], lat["mean"]
    # Percentiles must be ordered, the mean inside [min, max].
    keys = [k for k in ("min", "p50", "p90", "p99", "p999", "max") if lat.get(k) is not None]
    vals = [lat[k] for k in keys]
    if any(a > b for a, b in zip(vals, vals[1:])):
        notes.append("percentiles-out-of-order(" + ",".join("%s=%g" % kv for kv in zip(keys, vals)) + ")")
    if lat.get("min") is not None and not (lat["min"] <= mean <= lat["max"]):
        notes.append("mean-outside-min..max(%g)" % mean)
    # One transaction in flight: back-to-back transactions fill the interval, so
    # tps * mean ~= 1 (a bit below: time between transactions is not in any latency).
    # Above 1 is impossible with one in flight; well below 1 means unmeasured gaps.
    fill = tps * mean / 1e6
    if fill > 1.01 or fill < 0.90:
        notes.append("tps*mean=%.3f(expect~0.95-1.0)" % fill)
    if s.get("transactions") and tps > 0 and abs(s["transactions"] / tps - dur) > 0.05 * dur:
        notes.append("transactions/tps=%.3fs(expected~%g)" % (s["transactions"] / tps, dur))
    if s.get("lost"):
        notes.append("lost=%d" % s["lost"])
    if s.get("late"):
        notes.append("late=%d" % s["late"])
    # The test record must say what was asked for.
    t = d.get("test") or {}
    rr = t.get("rr") or {}
    want = {"udp": proto == "udp", "request_bytes": length, "response_bytes": length,
            "inflight": 1, "busy_poll": busy == "1"}
    for k, v in want.items():
        if k in rr and rr[k] != v:
            notes.append("test.rr.%s=%r(asked:%r)" % (k, rr[k], v))
    if t.get("client_cpu") != ccpu or t.get("server_cpu") != scpu:
        notes.append("pinning-recorded-as-client=%s,server=%s" % (t.get("client_cpu"), t.get("server_cpu")))
    pl = summ.get("placement")
    if not pl:
        notes.append("no-summary.placement")
    elif not re.search(r"\bCPU %d\b" % ccpu, pl) or not re.search(r"\bCPU %d\b" % scpu, pl):
        notes.append(("placement=%r" % pl).replace(" ", "_"))
    # The sender stream counts request bytes: transactions x request size.
    for st in d.get("streams") or []:
        if st.get("role") == "sender" and st.get("bytes") is not None and s.get("transactions"):
            if st["bytes"] != s["transactions"] * length:
                notes.append("sender-bytes=%d!=transactions*%d=%d" % (st["bytes"], length, s["transactions"] * length))
    out(tps, mean, lat.get("p50"), lat.get("p99"), lat.get("p999"))

elif tool == "sockperf":
    txt = re.sub(r"\x1b\[[0-9;]*m", "", open(path, errors="replace").read())
    # Figures over sockperf's "valid duration" (after its 400 ms warm-up): transactions/s =
    # replies received in that window / its length.  Every reply completes one round trip.
    m = re.search(r"\[Valid Duration\] RunTime=([\d.]+) sec; SentMessages=(\d+); ReceivedMessages=(\d+)", txt)
    a = re.search(r"avg-rtt=([\d.]+)", txt)
    if not m or not a:
        sys.exit("no sockperf summary")
    secs, recv = float(m.group(1)), int(m.group(3))
    p = lambda q: (lambda r: float(r.group(1)) if r else None)(re.search(r"percentile %s = *([\d.]+)" % q, txt))
    avg = float(a.group(1))
    tps = recv / secs if secs > 0 else 0.0
    for what in ("dropped", "duplicated", "out-of-order"):
        r = re.search(r"# %s messages = (\d+)" % what, txt)
        if r and int(r.group(1)):
            notes.append("%s=%s" % (what, r.group(1)))
    if avg > 0 and abs(tps * avg / 1e6 - 1) > 0.05:
        notes.append("count-rate-vs-1e6/avg=%.3f" % (tps * avg / 1e6))
    out(tps, avg, p("50.000"), p("99.000"), p("99.900"))

elif tool == "netperf":
    # -P 0 -o THROUGHPUT,MEAN_LATENCY,P50_LATENCY,P99_LATENCY: one CSV line of values.
    row = None
    for line in open(path, errors="replace"):
        f = line.strip().split(",")
        try:
            v = [float(x) for x in f[:4]]
        except ValueError:
            continue
        if len(v) == 4:
            row = v
    if not row:
        sys.exit("no netperf -o line")
    out(row[0], row[1], row[2], row[3], None)
EOF

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
      args=(taskset -c "$C" sockperf pp -i "$H" -p "${SPORT[$srv]}" -t "$DUR" -m 14 --full-rtt)
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
  if line=$(python3 "$WORK/parse.py" "$tool" "$src" "$proto" "$len" "$C" "$S" "$bp" "$DUR" 2>> "$base.err") && [ "$RC" -eq 0 ]; then
    read -r tps mean p50 p99 p999 rest <<< "$line"
    ROW=$(printf '%s\t%s\t%s\t%s\tok\t%s\t%s\t%s\t%s\t%s\t%s\t%s' "$r" "$proto" "$pl" "$v" "$tps" "$mean" "$p50" "$p99" "$p999" "$other" "${rest:-}")
    # netchar's own description of where it ran, printed in the report
    [ "$tool" = netchar ] && python3 -c 'import json,sys; print((json.load(open(sys.argv[1])).get("summary") or {}).get("placement"))' \
      "$base.out" > "$base.placement" 2>/dev/null
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
have sockperf && VERS="$VERS, sockperf $(sockperf --version 2>&1 | sed 's/\x1b\[[0-9;]*m//g' | awk '/version/ {print $3; exit}')"
[ -n "$NETPERF" ] && VERS="$VERS, netperf $("$NETPERF" -V 2>&1 | awk '/[Vv]ersion/ {print $NF; exit}')"
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
python3 - "$RES" "$NOTES" "$DUR" "$ROUNDS" "$VERS" "$(( $(date +%s) - T0 ))" "$(uname -r)" "$NCPU" \
  "${PEERS[*]:-}" "$C" "$SERVER_CPU_CROSS" "$WORK/placements.tsv" > "$REPORT" <<'EOF'
import collections, statistics, sys
res, notes_path, dur, rounds, vers, wall, kernel, ncpu, peers, ccpu, xcpu, plpath = sys.argv[1:13]
peers = peers.split()
PL = [("same", "same core (%s,%s)" % (ccpu, ccpu)), ("cross", "cross core (%s,%s)" % (ccpu, xcpu))]
VAR = [("nc", "netchar", "1 B"), ("nc14", "netchar -l 14", "14 B"), ("ncbp", "netchar --busy-poll", "1 B"),
       ("sockperf", "sockperf pp", "14 B"), ("netperf", "netperf *_RR", "1 B")]
VLABEL = {v: (l, b) for v, l, b in VAR}
NCV = ("nc", "nc14", "ncbp")

# results.tsv: round proto placement variant status tps mean p50 p99 p999 other% notes
runs = collections.defaultdict(list)
for line in open(res):
    f = line.rstrip("\n").split("\t")
    f += [""] * (12 - len(f))
    runs[(f[1], f[2], f[3])].append(f)

def num(x):
    return None if x in ("", "-") else float(x)

def col(ok, i):
    v = [num(f[i]) for f in ok if num(f[i]) is not None]
    if not v:
        return None, None, v
    m = statistics.median(v)
    return m, (100 * (max(v) - min(v)) / m if m else 0.0), v

def stats(key):
    all_ = runs.get(key, [])
    ok = [f for f in all_ if f[4] == "ok"]
    if not ok:
        return None
    s = dict(n=len(ok), total=len(all_), other=[num(f[10]) for f in ok if num(f[10]) is not None],
             notes=[f[11] for f in ok if f[11]])
    for name, i in (("tps", 5), ("mean", 6), ("p50", 7), ("p99", 8), ("p999", 9)):
        s[name], s[name + "_spread"], s[name + "_all"] = col(ok, i)
    return s

S = {k: stats(k) for k in runs}

def best_peer(proto, pl, only=None):
    c = [(S[(proto, pl, p)]["tps"], p) for p in peers if (only is None or p in only)
         and S.get((proto, pl, p)) and S[(proto, pl, p)]["tps"]]
    return max(c)[1] if c else None

def fx(x, f="%.2f"):
    return "-" if x is None else f % x

print(f"# netchar loopback request/response benchmark: median of {rounds} rounds x {dur}s, 127.0.0.1, 1 transaction in flight")
print(f"# {vers}; Linux {kernel}, {ncpu} CPUs; wall {wall}s")
print("# trans/s: netchar .summary.rr.transactions_per_second; sockperf replies received in its valid window"
      " (after 400 ms warm-up) / that window; netperf THROUGHPUT")
print("# latency = full round trip in µs (sockperf --full-rtt); each column is the median over rounds;"
      " spread = (max-min)/median of the rounds")
print("# x-peer = netchar / best peer in the same protocol and placement (by trans/s; the 14 B row against"
      " sockperf, the 14 B peer); for p99 lower is better")
print()
hdr = (f"{'proto':<5} {'placement':<16} {'tool':<20} {'msg':>4} {'trans/s':>9} {'sprd':>6} {'mean':>7} "
       f"{'p50':>7} {'p99':>8} {'sprd':>6} {'p99.9':>8} {'sprd':>6}  {'x-peer trans/s':<22} {'x p99':>6}")
print(hdr)
print("-" * len(hdr))
for proto in ("tcp", "udp"):
    for pl, pll in PL:
        for v, lab, size in VAR:
            key = (proto, pl, v)
            if key not in runs:
                continue
            s = S[key]
            head = f"{proto.upper():<5} {pll:<16} {lab:<20} {size:>4} "
            if s is None:
                print(head + f"{'FAIL':>9}")
                continue
            row = head + (f"{s['tps']:9.0f} {fx(s['tps_spread'], '%.1f%%'):>6} {fx(s['mean']):>7} {fx(s['p50']):>7} "
                          f"{fx(s['p99']):>8} {fx(s['p99_spread'], '%.0f%%'):>6} {fx(s['p999']):>8} "
                          f"{fx(s['p999_spread'], '%.0f%%'):>6}")
            if v in NCV:
                bp = best_peer(proto, pl, ["sockperf"] if v == "nc14" else None)
                if bp:
                    b = S[(proto, pl, bp)]
                    row += f"  {s['tps'] / b['tps']:5.2f}x {bp:<15}"
                    row += f" {fx(s['p99'] / b['p99'] if s['p99'] and b['p99'] else None, '%5.2fx'):>6}"
            if s["n"] < s["total"]:
                row += f"  [{s['n']}/{s['total']} ok]"
            print(row.rstrip())
    print()

# netchar's own placement strings
try:
    pls = [l.rstrip("\n").split("\t", 1) for l in open(plpath) if l.strip()]
except OSError:
    pls = []
if pls:
    print("Placement reported by netchar (.summary.placement):")
    seen = collections.defaultdict(set)
    for k, p in pls:
        proto, pl, v = k.split(".")
        seen[(pl, p)].add(f"{proto}/{v}")
    for (pl, p), who in sorted(seen.items()):
        print(f"  {dict(PL)[pl]:<17} \"{p}\"  ({', '.join(sorted(who))})")
    print()

# ---- notes
out = []
for key, s in sorted(S.items()):
    if not s:
        continue
    proto, pl, v = key
    lab = f"{proto.upper()} {dict(PL)[pl]} {VLABEL[v][0]}"
    if s["tps_spread"] and s["tps_spread"] > 5:
        out.append(f"trans/s spread {s['tps_spread']:.1f}% > 5%: {lab} (rounds: "
                   + ", ".join(f"{x:.0f}" for x in s["tps_all"]) + ")")
    if v in NCV and s["tps"] and s["mean"]:
        fill = s["tps"] * s["mean"] / 1e6
        if not 0.90 <= fill <= 1.01:
            out.append(f"{lab}: median trans/s x mean latency = {fill:.3f}; with 1 in flight it should be ~0.95-1.0")
    cnt = collections.Counter(n for ns in s["notes"] for n in ns.split())
    if cnt:
        out.append(f"{lab}: " + ", ".join(f"{k} (x{n})" if n > 1 else k for k, n in cnt.items()))
busy = [statistics.median(s["other"]) for s in S.values() if s and s["other"]]
if busy and max(busy) > 15:
    out.append(f"other processes used up to {max(busy):.0f}% of the machine during the runs:"
               " latency figures are unreliable; rerun on an idle machine (IDLE_WAIT=120 waits for one)")
out += [l.rstrip() for l in open(notes_path) if l.strip()]
if out:
    print("Notes:")
    for l in out:
        print("  * " + l)
    print()

# ---- targets (informational)
print("Targets (informational; perf.md goals 5 and 6):")
def line(ok, text):
    print(f"  {'n/a ' if ok is None else 'PASS' if ok else 'MISS'}  {text}")
for proto in ("tcp", "udp"):
    for pl, pll in PL:
        s, bp = S.get((proto, pl, "nc")), best_peer(proto, pl)
        lab = f"{proto.upper()} {pll}, blocking, 1 B"
        if not s or not bp:
            line(None, f"{lab}: >= 1.05x best peer trans/s, p99 no worse: not measured")
            continue
        b = S[(proto, pl, bp)]
        r = s["tps"] / b["tps"]
        p99ok = s["p99"] is not None and b["p99"] is not None and s["p99"] <= b["p99"]
        line(r >= 1.05 and p99ok, f"{lab}: >= 1.05x best peer trans/s with p99 no worse: {r:.2f}x {bp}"
             f" ({s['tps']:.0f} vs {b['tps']:.0f}/s), p99 {fx(s['p99'])} vs {fx(b['p99'])} µs")
        if pl == "cross":
            line(r >= 0.95, f"{lab}: parity >= 0.95x best peer (goal 6): {r:.2f}x")
for proto in ("tcp", "udp"):
    s, bp = S.get((proto, "cross", "ncbp")), best_peer(proto, "cross")
    lab = f"{proto.upper()} {dict(PL)['cross']}, --busy-poll"
    if not s or not bp:
        line(None, f"{lab}: >= 10x the blocking peers: not measured")
        continue
    r = s["tps"] / S[(proto, "cross", bp)]["tps"]
    line(r >= 10, f"{lab}: >= 10x the best blocking peer: {r:.1f}x {bp} ({s['tps']:.0f} vs {S[(proto, 'cross', bp)]['tps']:.0f}/s)")
EOF

finish                            # print, save if BENCH_SAVE=1, exit with FAILED
