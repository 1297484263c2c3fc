#!/usr/bin/env bash
# bench/tcp.sh — side-by-side loopback TCP throughput of netchar, iperf3 and iperf2.
#
# Cases: 1 stream up, -P 2, -P 4, reverse (-R, 1 stream), and netchar --zerocopy (1 stream,
# compared with the peers' plain 1-stream figures).  Every case runs ROUNDS times per tool;
# within a round the tools run back to back (starting tool rotated each round) so that they
# see the same machine state, and the median over rounds is reported.
#
# Figures: receiver Gbit/s (10^9 bit/s), spread of the rounds = (max-min)/median, and CPU
# seconds per GB received (GB = 10^9 bytes) of client + server together.  CPU comes from each
# tool's own report where it has one (netchar JSON, iperf3 -J) and from process accounting for
# iperf2; process accounting is also taken for every tool as a cross-check.
#
# Knobs (environment):
#   DUR=3          seconds per run
#   ROUNDS=3       rounds (median over these)
#   PORT_BASE=15300  netchar uses PORT_BASE, iperf3 PORT_BASE+1, iperf2 PORT_BASE+2 (all on 127.0.0.1)
#   BENCH_SAVE=0   1 = also write the report to bench/results/tcp-<date>.txt
#   NO_BUILD=0     1 = skip `cargo build` (use the binary already in target/release)
#   IDLE_WAIT=0    seconds to wait, before each round, for the machine to drop below 15% busy
#                  (other builds/tests on a 2-core box distort loopback figures badly)
#   BUSY_RETRY=25  re-measure a run once when other processes took more than this % of the
#                  machine during it (0 = never); each re-measurement is listed in the notes
# Exit status: 0 when every run completed (PASS/MISS lines are informational), 1 when the build
# failed, a client failed/timed out/printed no usable result, or a server died; 2 for bad
# settings (a knob's value, a port in use, python3 missing).
set -u -o pipefail
BENCH=tcp
BENCH_DIR=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
. "$BENCH_DIR/lib.sh" || exit 2           # shared helpers (build, servers, accounting, retries)

DUR=${DUR:-3}
ROUNDS=${ROUNDS:-3}
PORT_BASE=${PORT_BASE:-15300}
BENCH_SAVE=${BENCH_SAVE:-0}
NO_BUILD=${NO_BUILD:-0}
IDLE_WAIT=${IDLE_WAIT:-0}
BUSY_RETRY=${BUSY_RETRY:-25}
H=127.0.0.1                       # loopback only: every server binds here, every client targets it

need_uint IDLE_WAIT BUSY_RETRY
need_posint DUR ROUNDS PORT_BASE

bench_init                        # WORK (raw outputs of every run), RES, NOTES, FAILED=0
CLIENT_TO=$((DUR + 20))           # watchdog per client run (connect + DUR + teardown, generous)

# ------------------------------------------------------------------ tools present?
TOOLS=(netchar)
find_iperfs                       # + iperf3, iperf2 (sets I2_VER)
have python3 || { echo "tcp.sh: python3 is required (JSON/CSV parsing and the report)" >&2; exit 2; }
have ss || echo "note: ss (iproute2) not found; waiting a fixed 1 s for servers to listen"

# ------------------------------------------------------------------ build netchar
build_netchar                     # sets NC (a private copy of the binary) and NC_REV

# ------------------------------------------------------------------ ports
P_NC=$PORT_BASE; P_I3=$((PORT_BASE + 1)); P_I2=$((PORT_BASE + 2))
declare -A PORT=([netchar]=$P_NC [iperf3]=$P_I3 [iperf2]=$P_I2)
if have ss; then
  for t in "${TOOLS[@]}"; do
    if port_in_use tcp "${PORT[$t]}"; then
      echo "tcp.sh: port ${PORT[$t]} (for $t) is already in use; pick free ports with PORT_BASE=..." >&2
      exit 2
    fi
  done
fi

# ------------------------------------------------------------------ servers
# One server per tool for the whole run, under `timeout`, stopped on exit (lib.sh: start_server).
# Budget: every run may be retried once, and each round or retry may wait IDLE_WAIT.
SERVER_TO=$(( ROUNDS * 26 * (DUR + 6 + IDLE_WAIT) + 600 ))
server_cmd() { # TOOL -> sets CMD and READY (see start_server)
  case $1 in
    netchar) CMD=("$NC" server -B "$H" -p "$P_NC"); READY=(log) ;;
    iperf3)  CMD=(iperf3 -s -B "$H" -p "$P_I3"); READY=(tcp "$P_I3") ;;
    # -y C makes the server print one CSV line per finished stream: that is the receiver's
    # figure for upload tests, and tells us when the server has finished a test.
    iperf2)  CMD=(iperf -s -B "$H" -p "$P_I2" -y C); READY=(tcp "$P_I2") ;;
  esac
}
stop_servers_on_exit

# ------------------------------------------------------------------ result parser
# parse.py TOOL FILE DIRECTION DUR ZC -> "gbps bytes cpu_seconds|- retransmits|- note..."
# (notes are space-separated tokens; exit status 1 = no usable result)
cat > "$WORK/parse.py" <<'EOF'
import csv, json, sys
tool, path, direction, dur, zc = sys.argv[1], sys.argv[2], sys.argv[3], float(sys.argv[4]), sys.argv[5] == "1"
notes = []
def out(bps, nbytes, cpu, retrans=None):
    print("%.4f %d %s %s %s" % (bps / 1e9, nbytes, "-" if cpu is None else "%.4f" % cpu,
                                "-" if retrans is None else retrans, " ".join(notes)))

if tool == "netchar":
    d = json.load(open(path))
    if d.get("error"):
        notes.append(("error=%r" % d["error"]).replace(" ", "_"))
    s = (d.get("summary") or {}).get(direction)
    if not s:
        sys.exit("no summary.%s in netchar JSON (error=%r)" % (direction, d.get("error")))
    snd, rcv = s["sender"], s["receiver"]
    # Loopback TCP delivers everything that was sent; any mismatch is a netchar counting bug.
    if s.get("bytes_match") is False or snd["bytes"] != rcv["bytes"]:
        notes.append("bytes-mismatch(sent=%d,received=%d,bytes_match=%s)" % (snd["bytes"], rcv["bytes"], s.get("bytes_match")))
    # The reported rate should be bytes*8/seconds; flag anything else.
    if rcv["seconds"] > 0 and abs(rcv["bits_per_second"] - rcv["bytes"] * 8 / rcv["seconds"]) > 1e-3 * rcv["bits_per_second"]:
        notes.append("rate!=bytes/seconds")
    if abs(rcv["seconds"] - dur) > 0.05 * dur:
        notes.append("receiver-seconds=%.3f(expected~%g)" % (rcv["seconds"], dur))
    # Same bytes over a different interval biases the receiver rate against the sender's.
    if snd["seconds"] > 0 and abs(rcv["seconds"] / snd["seconds"] - 1) > 0.01:
        notes.append("receiver-interval-vs-sender:%+.1f%%" % (100 * (rcv["seconds"] / snd["seconds"] - 1)))
    if zc and not d.get("test", {}).get("tcp", {}).get("zerocopy"):
        notes.append("zerocopy-not-recorded-in-test-spec")
    c = d.get("cpu") or {}
    cpu = None
    if "local" in c and "remote" in c:
        cpu = sum(c[k]["user_seconds"] + c[k]["system_seconds"] for k in ("local", "remote"))
    else:
        notes.append("no-cpu-in-json")
    out(rcv["bits_per_second"], rcv["bytes"], cpu, snd.get("retransmits"))

elif tool == "iperf3":
    d = json.load(open(path))
    if d.get("error"):
        sys.exit("iperf3 error: %s" % d["error"])
    e = d["end"]; r = e["sum_received"]; c = e["cpu_utilization_percent"]
    # host_total = client, remote_total = server; % of one core over the test.
    cpu = (c["host_total"] + c["remote_total"]) / 100 * r["seconds"]
    out(r["bits_per_second"], r["bytes"], cpu, e.get("sum_sent", {}).get("retransmits"))

elif tool == "iperf2":
    # CSV: date,local_ip,local_port,remote_ip,remote_port,id,interval,bytes,bits_per_second
    # One line per stream (id -1 would be a sum line: not printed by 2.1.8 with -y C, but
    # skipped if present).  iperf2 has no CPU report: the caller uses process accounting.
    rows = [r for r in csv.reader(open(path)) if len(r) >= 9]
    streams = [r for r in rows if r[5] != "-1"] or rows
    if not streams:
        sys.exit("no iperf2 CSV lines")
    out(sum(float(r[8]) for r in streams), sum(int(r[7]) for r in streams), None)
EOF

# ------------------------------------------------------------------ one run
# run_one ROUND CASE TOOL P REV(0/1) ZC(0/1): runs a client against the tool's server and
# sets ROW to "round case tool status gbps bytes cpu_self cpu_acct other% retrans notes"
# (a results.tsv line; the caller decides whether to keep it) and OTHER to other%.  other% = CPU time of the whole machine during the run that neither the client
# nor the server was charged for (other processes; also ksoftirqd), in % of all CPUs.
run_one() {
  local r=$1 c=$2 t=$3 P=$4 rev=$5 zc=$6
  local base="$WORK/r$r.$c.$t${ATTEMPT:-}" dir=up line s0 s1 m0 m1 n0=0 i args=()
  [ "$rev" = 1 ] && dir=down
  restart_if_dead "$t" "round $r $c" ||
    { ROW=$(printf '%s\t%s\t%s\tFAIL\t\t\t\t\t\t\tserver down' "$r" "$c" "$t"); OTHER=0; return; }
  case $t in
    netchar) args=("$NC" tcp "$H" -p "$P_NC" -t "$DUR" -P "$P" -i 0 --json)
             [ "$rev" = 1 ] && args+=(-R); [ "$zc" = 1 ] && args+=(--zerocopy) ;;
    iperf3)  args=(iperf3 -c "$H" -p "$P_I3" -t "$DUR" -P "$P" -J); [ "$rev" = 1 ] && args+=(-R) ;;
    iperf2)  args=(iperf -c "$H" -p "$P_I2" -t "$DUR" -P "$P" -y C); [ "$rev" = 1 ] && args+=(-R)
             n0=$(wc -l < "$WORK/srv.iperf2.out") ;;
  esac
  echo "${args[*]}" > "$base.cmd"
  m0=$(cpu_ticks); s0=$(proc_cpu "${SPID[$t]}")
  timed "$base.out" "$base.err" "${args[@]}"
  local src=$base.out
  if [ "$t" = iperf2 ]; then
    # Wait (<= 3 s) until the server has printed a line per stream, i.e. it has finished
    # the test, so its CPU reading below includes all of its work.
    for ((i = 0; i < 60; i++)); do
      tail -n +$((n0 + 1)) "$WORK/srv.iperf2.out" > "$base.srv.csv"
      [ "$(awk -F, '$6 != -1' "$base.srv.csv" | wc -l)" -ge "$P" ] && break
      sleep 0.05
    done
    # Upload: the server is the receiver.  Reverse: the client is.
    [ "$rev" = 0 ] && src=$base.srv.csv
  fi
  s1=$(proc_cpu "${SPID[$t]}"); m1=$(cpu_ticks)
  local acct other
  acct=$(awk -v a="$s0" -v b="$s1" -v c="$CLIENT_SECS" 'BEGIN {printf "%.3f", b - a + c}')
  other=$(awk -v m0="$m0" -v m1="$m1" -v acct="$acct" -v hz="$CLK_TCK" 'BEGIN {
    split(m0, x, " "); split(m1, y, " "); tot = (y[2] - x[2]) / hz
    printf "%.1f", (tot > 0) ? 100 * ((y[1] - x[1]) / hz - acct) / tot : 0}')
  note_client_failure "round $r $c $t" "$base.err"
  if line=$(python3 "$WORK/parse.py" "$t" "$src" "$dir" "$DUR" "$zc" 2>> "$base.err") && [ "$RC" -eq 0 ]; then
    read -r gbps bytes cpu retrans rest <<< "$line"
    [ "$t" = iperf2 ] && cpu=$acct          # no self-report: process accounting is the figure
    ROW=$(printf '%s\t%s\t%s\tok\t%s\t%s\t%s\t%s\t%s\t%s\t%s' "$r" "$c" "$t" "$gbps" "$bytes" "$cpu" "$acct" "$other" "$retrans" "${rest:-}")
  else
    [ "$RC" -eq 0 ] && note_unusable "round $r $c $t" "$base.err"
    ROW=$(printf '%s\t%s\t%s\tFAIL\t\t\t\t%s\t%s\t\t' "$r" "$c" "$t" "$acct" "$other")
  fi
  OTHER=$other
  sleep 0.5   # let the previous test's sockets and softirq work drain before the next one
}

# ------------------------------------------------------------------ main
# Case table: id, label, streams, reverse, zerocopy.  zc1 is netchar only; the report compares
# it with the peers' up1 figures.  zc1 runs right after up1 so both see a similar machine.
CASES=(up1 zc1 up2 up4 rev1)
declare -A C_LABEL=([up1]="TCP 1 stream" [zc1]="TCP 1 --zerocopy" [up2]="TCP -P 2" [up4]="TCP -P 4" [rev1]="TCP -R 1 stream")
declare -A C_P=([up1]=1 [zc1]=1 [up2]=2 [up4]=4 [rev1]=1)
declare -A C_REV=([up1]=0 [zc1]=0 [up2]=0 [up4]=0 [rev1]=1)
declare -A C_ZC=([up1]=0 [zc1]=1 [up2]=0 [up4]=0 [rev1]=0)

for t in "${TOOLS[@]}"; do start_server "$t" || { FAILED=1; exit 1; }; done

VERS=$(netchar_version)
for t in "${TOOLS[@]:1}"; do VERS="$VERS, $(iperf_version "$t")"; done
nruns=$(( (${#CASES[@]} - 1) * ${#TOOLS[@]} + 1 ))
echo "tcp.sh: ${#CASES[@]} cases x ${#TOOLS[@]} tools x $ROUNDS rounds of ${DUR}s on $H (~$(( nruns * ROUNDS * (DUR + 1) ))s); logs in $WORK"

T0=$(date +%s)
for ((r = 1; r <= ROUNDS; r++)); do
  start_round "$r" "low/noisy"      # waits for quiet if IDLE_WAIT is set
  rotate "$r" "${TOOLS[@]}"         # the tool that goes first changes every round
  for c in "${CASES[@]}"; do
    for t in "${ORDER[@]}"; do
      [ "$c" = zc1 ] && [ "$t" != netchar ] && continue
      # progress on a terminal only, so logs/pipes get just the report
      [ -t 2 ] && printf '\r  round %d/%d  %-18s %-8s' "$r" "$ROUNDS" "${C_LABEL[$c]}" "$t" >&2
      # A run during which other work took more than BUSY_RETRY % is measured again; the
      # retry is kept.
      measure retry run_one "$r" "$c" "$t" "${C_P[$c]}" "${C_REV[$c]}" "${C_ZC[$c]}"
      [ "$RETRIED" = 1 ] && note "re-measured round $r ${C_LABEL[$c]} $t: other work took ${FIRST_OTHER}% of the machine (retry: ${OTHER}%)"
    done
  done
done
[ -t 2 ] && printf '\r%60s\r' '' >&2
note_dead_servers "${TOOLS[@]}"

# ------------------------------------------------------------------ report
REPORT=$WORK/report.txt
python3 - "$RES" "$NOTES" "$DUR" "$ROUNDS" "$VERS" "$(( $(date +%s) - T0 ))" "$(uname -r)" "$(nproc)" "${TOOLS[*]}" > "$REPORT" <<'EOF'
import collections, statistics, sys
res, notes_path, dur, rounds, vers, wall, kernel, ncpu, tools = sys.argv[1:10]
tools = tools.split()
peers = [t for t in tools if t != "netchar"]
cases = [("up1", "TCP 1 stream"), ("up2", "TCP -P 2"), ("up4", "TCP -P 4"),
         ("rev1", "TCP -R 1 stream"), ("zc1", "TCP 1 --zerocopy")]
label = dict(cases)
PEER_CASE = {"zc1": "up1"}      # zerocopy is netchar-only: compare with the peers' 1-stream runs

# results.tsv: round case tool status gbps bytes cpu_self cpu_acct other% retrans notes
runs = collections.defaultdict(list)
for line in open(res):
    f = line.rstrip("\n").split("\t")
    f += [""] * (11 - len(f))
    runs[(f[1], f[2])].append(f)

def num(x):
    return None if x in ("", "-") else float(x)

def stats(case, tool):
    all_ = runs.get((case, tool), [])
    ok = [f for f in all_ if f[3] == "ok"]
    if not ok:
        return None
    g = [float(f[4]) for f in ok]
    med = statistics.median(g)
    per_gb = lambda col: [num(f[col]) / (int(f[5]) / 1e9) for f in ok if num(f[col]) is not None and int(f[5]) > 0]
    med_or_none = lambda v: statistics.median(v) if v else None
    return dict(gbps=med, rounds=g, n=len(ok), total=len(all_),
                spread=100 * (max(g) - min(g)) / med if med else 0.0,
                cpu=med_or_none(per_gb(6)), acct=med_or_none(per_gb(7)),
                other=[num(f[8]) for f in ok if num(f[8]) is not None],
                retrans=[f[9] for f in ok if f[9] not in ("", "-")],
                notes=[f[10] for f in ok if f[10]])

S = {(c, t): stats(c, t) for c, _ in cases for t in tools}

def ratio(case, peer):
    a, b = S.get((case, "netchar")), S.get((PEER_CASE.get(case, case), peer))
    return a["gbps"] / b["gbps"] if a and b and b["gbps"] else None

def fx(x, f="%.3f"):
    return "-" if x is None else f % x

# ---- main table
print(f"# netchar loopback TCP benchmark: median of {rounds} rounds x {dur}s, 127.0.0.1")
print(f"# {vers}; Linux {kernel}, {ncpu} CPUs; wall {wall}s")
print("# Gbit/s = receiver rate; spread = (max-min)/median of the rounds;"
      " CPU s/GB = client+server CPU seconds per 10^9 bytes received")
print()
W = 25
print(f"{'':<18}" + "".join(f"{('-- ' + t + ' ').ljust(W - 1, '-')} " for t in tools) + " netchar/")
print(f"{'case':<18}" + "".join(f"{'Gbit/s':>7} {'spread':>7} {'CPUs/GB':>8} " for _ in tools)
      + " ".join(f"{p:>7}" for p in peers))
for c, lab in cases:
    row = f"{lab:<18}"
    for t in tools:
        s = S[(c, t)]
        if c in PEER_CASE and t != "netchar":
            cellt = f"{'(' + PEER_CASE[c] + ')':>7}"
        elif s is None:
            cellt = f"{'FAIL' if runs.get((c, t)) else '-':>7}"
        else:
            cellt = f"{s['gbps']:7.2f} {s['spread']:6.1f}% {fx(s['cpu']):>8}"
            if s["n"] < s["total"]:
                cellt += f" [{s['n']}/{s['total']} ok]"
        row += f"{cellt:<{W}}"
    row += " " + " ".join(f"{fx(ratio(c, p), '%5.2fx'):>7}" for p in peers)
    print(row.rstrip())
if "zc1" in dict(cases) and peers:
    print("  (--zerocopy row: ratios are against the peers' 'TCP 1 stream' medians)")

# ---- CPU cross-check: the same formula from process accounting for every tool
# (client: rusage of the waited-for process; server: /proc/PID/stat delta).  "other" is the
# machine's CPU during the runs not charged to either process, in % of all CPUs (median).
print()
print("Cross-check: CPU s/GB as reported (self) and from process accounting (acct);"
      " other = machine CPU not charged to client or server, % of all CPUs")
print(f"{'':<18}" + "".join(f"{('-- ' + t + ' ').ljust(W - 1, '-')} " for t in tools))
print(f"{'case':<18}" + "".join(f"{'self':>7} {'acct':>7} {'other':>8} " for _ in tools))
for c, lab in cases:
    row = f"{lab:<18}"
    for t in tools:
        s = S[(c, t)]
        txt = f"{'-':>7}" if s is None else (f"{fx(s['cpu']):>7} {fx(s['acct']):>7} "
               + f"{fx(statistics.median(s['other']) if s['other'] else None, '%.0f%%'):>8}")
        row += f"{txt:<{W}}"
    print(row.rstrip())

# ---- retransmits on loopback should be (almost) zero; list them per run for both tools that report them
rt = [(c, t, S[(c, t)]["retrans"]) for c, _ in cases for t in tools if S[(c, t)] and S[(c, t)]["retrans"]]
if any(any(x != "0" for x in v) for _, _, v in rt):
    print()
    print("Sender retransmits per run (loopback; iperf2 does not report them)")
    print(f"{'case':<18}" + "".join(f"{t:>18}" for t in tools if t != "iperf2"))
    for c, lab in cases:
        row = f"{lab:<18}"
        for t in tools:
            if t == "iperf2":
                continue
            s = S[(c, t)]
            row += f"{(','.join(s['retrans']) if s and s['retrans'] else '-'):>18}"
        print(row)

# ---- notes
out = []
for c, lab in cases:
    for t in tools:
        s = S[(c, t)]
        if not s:
            continue
        if s["spread"] > 3:
            out.append(f"spread {s['spread']:.1f}% > 3%: {lab}, {t} (rounds: "
                       + ", ".join(f"{g:.2f}" for g in s["rounds"]) + " Gbit/s)")
        if t != "iperf2" and s["cpu"] and s["acct"] and abs(s["acct"] / s["cpu"] - 1) > 0.15:
            out.append(f"{t} {lab}: self-reported CPU differs from process accounting by "
                       f"{100 * (s['acct'] / s['cpu'] - 1):+.0f}%")
        cnt = collections.Counter(n for ns in s["notes"] for n in ns.split())
        if cnt:
            out.append(f"{t} {lab}: " + ", ".join(f"{k} (x{v})" if v > 1 else k for k, v in cnt.items()))
busy = [statistics.median(s["other"]) for s in S.values() if s and s["other"]]
if busy and max(busy) > 15:
    out.append(f"other processes used up to {max(busy):.0f}% of the machine during the runs ('other' column):"
               " figures are unreliable; rerun on an idle machine (IDLE_WAIT=120 waits for one)")
out += [l.rstrip() for l in open(notes_path) if l.strip()]
if out:
    print()
    print("Notes:")
    for l in out:
        print("  * " + l)

# ---- targets (informational)
print()
print("Targets (informational):")
def line(ok, text):
    print(f"  {'n/a ' if ok is None else 'PASS' if ok else 'MISS'}  {text}")
def get(c, t, k):
    s = S.get((c, t)); return s[k] if s else None
r = ratio("up1", "iperf3"); nc, i3 = get("up1", "netchar", "cpu"), get("up1", "iperf3", "cpu")
ok = None if None in (r, nc, i3) else (r >= 1.0 and nc <= i3)
line(ok, "1 stream >= 1.00x iperf3 at no more CPU/GB: "
     + (f"{r:.2f}x, CPU {nc:.3f} vs {i3:.3f} s/GB" if ok is not None else "not measured"))
for c, lab in (("up2", "-P 2"), ("up4", "-P 4")):
    r3, r2 = ratio(c, "iperf3"), ratio(c, "iperf2")
    ok = None if None in (r3, r2) else (r3 >= 1.7 and r2 >= 0.95)
    line(ok, f"{lab} >= 1.7x iperf3 and >= 0.95x iperf2: "
         + (f"{r3:.2f}x / {r2:.2f}x" if ok is not None else "not measured"))
r = ratio("zc1", "iperf3")
line(None if r is None else r >= 1.5,
     "--zerocopy >= 1.5x iperf3 1 stream: " + (f"{r:.2f}x" if r is not None else "not measured"))
EOF

finish                            # print, save if BENCH_SAVE=1, exit with FAILED
