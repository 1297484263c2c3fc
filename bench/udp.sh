#!/usr/bin/env bash
# bench/udp.sh — side-by-side loopback UDP benchmark of netchar, iperf3, iperf2 and nuttcp.
#
# Cases (every tool, ROUNDS x DUR seconds each, 127.0.0.1 only):
#   u64    64-byte payload at maximum rate: datagrams/s sent and received, CPU per received
#          datagram.  netchar runs twice: default (UDP GSO on the sender) and --no-gso.
#   u1472  1472-byte payload at maximum rate: received Gbit/s.  netchar default (GSO),
#          --no-gso, and --gro (receiver GRO; its figure is "coalesced" and kept apart), and
#          netchar's payload rows: --payload random (a copy from the pregenerated ring behind
#          each header) and --payload random --verify (the receiver compares every datagram),
#          read against netchar (GSO).
#   p1g    1472-byte payload paced at 1 Gbit/s (10^9 bit/s of payload): achieved receiver
#          rate, loss and CPU.  netchar default (each datagram at its own time) and with
#          --pacing-quantum 100us (datagrams due within 100 µs sent as one batch).
# Within a round the tools run back to back (starting tool rotated each round) so that they
# see the same machine state; the median over rounds is reported, per column.
#
# Exact client commands (H=127.0.0.1, L=64|1472, D=DUR):
#   netchar  netchar udp H -p PORT -t D -l L -i 0 --json -b 0 [--no-gso|--gro]  (paced: -b 1G [--pacing-quantum 100us])
#   iperf3   iperf3 -c H -p PORT -u -t D -l L -J -b 0                           (paced: -b 1G = 10^9)
#   iperf2   iperf -c H -p PORT -u -t D -l L -e -b 10G  against a fresh `iperf -s -u -B H -p PORT -e`
#            per run (paced: -b 1000000000; iperf2's `1G` would be 2^30 bit/s, `1g` 10^9)
#   nuttcp   nuttcp -4 -P PORT -p PORT+1 -T D -u -l L -R 0 -fparse -fxmitstats H
#            (paced: -R 1000000, i.e. 10^6 Kbps = 10^9 bit/s)
# All rates are payload rates (UDP payload bits per second), which is what every tool's -b/-R sets.
#
# Figures:
#   sent pps / recv pps  datagrams the sender sent / the receiver actually got, per second of
#            each side's own interval.  netchar: .summary.up.sender.packets / .seconds and
#            .receiver.packets / .seconds; iperf3: .end.sum_sent.packets / .seconds and
#            .end.sum_received.bytes / L / .seconds; iperf2: client "Sent N datagrams" over its
#            interval, server Total - Lost over its interval; nuttcp: tx_megabytes*2^20/L and
#            pkt - drop, over the interval implied by megabytes and rate_Mbps.
#   Gbit/s   received payload bits per second / 10^9.
#   loss %   the tool's own figure (lost / expected).
#   CPU s/M  client + server CPU seconds (user + system) per million received datagrams.
#            netchar: its own .cpu.local + .cpu.remote; peers: process accounting (client:
#            rusage of the waited-for process via bash `time`; server: /proc/PID/stat delta).
#            Process accounting is taken for netchar too, as a cross-check.
#   other    machine CPU during the run charged neither to client, server nor ksoftirqd, in %
#            of all CPUs (other jobs on the box).  ksoftirqd's share is listed separately.
#            /proc/stat is tick-sampled while process accounting is exact, so "other" is
#            approximate: a few % either way, and for timer-driven senders (the paced runs,
#            iperf3 above all) it can read -30%..+30% on its own.
#
# Knobs (environment):
#   DUR=3          seconds per run
#   ROUNDS=3       rounds (median over these)
#   PORT_BASE=15310  netchar PORT_BASE (TCP+UDP), iperf3 +1 (TCP+UDP), iperf2 +2 (UDP),
#                  nuttcp +3 (TCP control) and +4 (UDP data); all on 127.0.0.1
#   BENCH_SAVE=0   1 = also write the report to bench/results/<date>-udp-<machine>.txt
#   NO_BUILD=0     1 = skip `cargo build` (use the binary already in target/release)
#   IDLE_WAIT=0    seconds to wait, before each round and each re-measurement, for the machine
#                  to drop below 15% busy
#   BUSY_RETRY=25  re-measure a run once when other processes took more than this % of the
#                  machine during it (0 = never), keeping the attempt with less other work;
#                  each re-measurement is listed in the notes
# Exit status: 0 when every run completed (PASS/MISS lines are informational), 1 when the build
# failed, a client failed/timed out/printed no usable result, or a server died; 2 for bad
# settings (a knob's value, a port in use, python3 missing).
set -u -o pipefail
BENCH=udp
BENCH_DIR=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
. "$BENCH_DIR/lib.sh" || exit 2           # shared helpers (build, servers, accounting, retries)

DUR=${DUR:-3}
ROUNDS=${ROUNDS:-3}
PORT_BASE=${PORT_BASE:-15310}
BENCH_SAVE=${BENCH_SAVE:-0}
NO_BUILD=${NO_BUILD:-0}
IDLE_WAIT=${IDLE_WAIT:-0}
BUSY_RETRY=${BUSY_RETRY:-25}
H=127.0.0.1                       # loopback only: every server binds here, every client targets it

need_uint IDLE_WAIT BUSY_RETRY
need_posint DUR ROUNDS PORT_BASE

bench_init                        # WORK (raw outputs of every run), RES, NOTES, FAILED=0
CLIENT_TO=$((DUR + 20))           # watchdog per client run (setup + DUR + grace + iperf2's FIN retries)

# ------------------------------------------------------------------ tools present?
TOOLS=(netchar)
find_iperfs                       # + iperf3, iperf2 (sets I2_VER)
if have nuttcp; then TOOLS+=(nuttcp)
else echo "nuttcp not found: skipping it (install with: sudo apt-get install nuttcp)"; fi
have python3 || { echo "udp.sh: python3 is required (JSON parsing and the report)" >&2; exit 2; }
have ss || echo "note: ss (iproute2) not found; waiting a fixed 1 s for servers to come up"

# ------------------------------------------------------------------ build netchar
build_netchar                     # sets NC (a private copy of the binary) and NC_REV

# ------------------------------------------------------------------ ports
P_NC=$PORT_BASE; P_I3=$((PORT_BASE + 1)); P_I2=$((PORT_BASE + 2)); P_NT=$((PORT_BASE + 3)); P_ND=$((PORT_BASE + 4))
if have ss; then
  declare -A NEED_TCP=([netchar]="$P_NC" [iperf3]="$P_I3" [iperf2]="" [nuttcp]="$P_NT")
  declare -A NEED_UDP=([netchar]="$P_NC" [iperf3]="$P_I3" [iperf2]="$P_I2" [nuttcp]="$P_ND")
  for t in "${TOOLS[@]}"; do
    for p in ${NEED_TCP[$t]}; do port_in_use tcp "$p" && { echo "udp.sh: TCP port $p (for $t) is already in use; pick free ports with PORT_BASE=..." >&2; exit 2; }; done
    for p in ${NEED_UDP[$t]}; do port_in_use udp "$p" && { echo "udp.sh: UDP port $p (for $t) is already in use; pick free ports with PORT_BASE=..." >&2; exit 2; }; done
  done
fi

# ------------------------------------------------------------------ servers
# Servers run under `timeout` and are stopped on exit (lib.sh: start_server).  netchar, iperf3
# and nuttcp servers live for the whole run; iperf2 gets a fresh server per run (at line rate
# its end-of-test datagram can be dropped, which leaves a shared server stuck in the old test).
# Budget: every run may be retried once, and each round or retry may wait IDLE_WAIT.
SERVER_TO=$(( ROUNDS * 30 * (DUR + 6 + IDLE_WAIT) + 600 ))
server_cmd() { # TOOL -> sets CMD and READY (see start_server)
  case $1 in
    netchar) CMD=("$NC" server -B "$H" -p "$P_NC"); READY=(log) ;;
    iperf3)  CMD=("$IPERF3" -s -B "$H" -p "$P_I3"); READY=(tcp "$P_I3") ;;
    iperf2)  CMD=("$IPERF2" -s -u -B "$H" -p "$P_I2" -e); READY=(udp "$P_I2") ;;
    # nuttcp's server has no bind option: it listens on the wildcard address, but the only
    # client that ever connects is ours, to 127.0.0.1.
    nuttcp)  CMD=(nuttcp -4 -S --nofork -P "$P_NT"); READY=(tcp "$P_NT") ;;
  esac
}
# stop_server is udp.sh's own: only the per-run iperf2 server is stopped before the end.
stop_server() { # TOOL: SIGINT (twice: iperf2 waits for its threads after the first), 2 s to exit, then SIGKILL
  local t=$1 i
  [ -n "${TPID[$t]:-}" ] || return 0
  kill -INT "${SPID[$t]:-}" 2>/dev/null
  for ((i = 0; i < 20; i++)); do
    kill -0 "${TPID[$t]}" 2>/dev/null || break
    [ "$i" = 3 ] && kill -INT "${SPID[$t]:-}" 2>/dev/null
    sleep 0.1
  done
  kill -0 "${TPID[$t]}" 2>/dev/null && kill -KILL "${SPID[$t]:-}" "${TPID[$t]}" 2>/dev/null
  wait "${TPID[$t]}" 2>/dev/null
  unset "TPID[$t]" "SPID[$t]"
}
stop_servers_on_exit

# ------------------------------------------------------------------ accounting
# ksoftirqd threads, whose CPU time `cpu_ticks ksoftirqd` reports separately: loopback UDP
# receive work lands there too, and the report shows its share.
KSOFT=$(pgrep '^ksoftirqd/' | tr '\n' ' ')

# ------------------------------------------------------------------ result parser
# bench_py peers udp VARIANT FILE LEN DUR MODE [SERVERLOG] ->
#   "sent_pkts sent_secs rx_pkts rx_secs rx_bps sent_bps loss_pct cpu_self|- note..."
# (bench/netchar_bench/peers.py; notes are space-separated tokens; exit status 1 = no usable result)

# ------------------------------------------------------------------ one run
# Case table: id, label, payload length, mode (max | paced).
CASES=(u64 u1472 p1g)
declare -A C_LABEL=([u64]="UDP 64 B max rate" [u1472]="UDP 1472 B max rate" [p1g]="UDP 1472 B paced 1 Gbit/s")
declare -A C_LEN=([u64]=64 [u1472]=1472 [p1g]=1472)
declare -A C_MODE=([u64]=max [u1472]=max [p1g]=paced)
declare -A C_VARIANTS=([u64]="netchar netchar-nogso iperf3 iperf2 nuttcp"
                       [u1472]="netchar netchar-nogso netchar-gro netchar-rand netchar-verify iperf3 iperf2 nuttcp"
                       [p1g]="netchar netchar-q100 iperf3 iperf2 nuttcp")

# run_one ROUND CASE VARIANT: runs a client against the variant's server and sets ROW to a
# results.tsv line "round case variant status sent_pps rx_pps rx_gbps sent_gbps loss cpu_self
# cpu_acct other% ksoftirqd% rx_pkts notes" (the caller decides whether to keep it) and OTHER.
run_one() {
  local r=$1 c=$2 v=$3 t=${3%%-*}
  local L=${C_LEN[$c]} mode=${C_MODE[$c]} base="$WORK/r$r.$c.$v${ATTEMPT:-}" line s0 s1 m0 m1 i args=()
  if [ "$t" = iperf2 ]; then
    : > "$base.srv"
    start_server iperf2 "$base.srv" "$base.srv.err" $((CLIENT_TO + 15)) ||
      { FAILED=1; note "FAIL: round $r $c iperf2: server did not start"
        ROW=$(printf '%s\t%s\t%s\tFAIL\t\t\t\t\t\t\t\t\t\t\tserver did not start' "$r" "$c" "$v"); OTHER=0; return; }
  elif ! restart_if_dead "$t" "round $r $c"; then
    ROW=$(printf '%s\t%s\t%s\tFAIL\t\t\t\t\t\t\t\t\t\t\tserver down' "$r" "$c" "$v"); OTHER=0; return
  fi
  case $v in
    netchar*) args=("$NC" udp "$H" -p "$P_NC" -t "$DUR" -l "$L" -i 0 --json)
              if [ "$mode" = paced ]; then args+=(-b 1G); else args+=(-b 0); fi
              [ "$v" = netchar-nogso ] && args+=(--no-gso); [ "$v" = netchar-gro ] && args+=(--gro)
              [ "$v" = netchar-q100 ] && args+=(--pacing-quantum 100us)
              [ "$v" = netchar-rand ] && args+=(--payload random:1)
              [ "$v" = netchar-verify ] && args+=(--payload random:1 --verify) ;;
    iperf3)   args=("$IPERF3" -c "$H" -p "$P_I3" -u -t "$DUR" -l "$L" -J)
              if [ "$mode" = paced ]; then args+=(-b 1G); else args+=(-b 0); fi ;;
    iperf2)   args=("$IPERF2" -c "$H" -p "$P_I2" -u -t "$DUR" -l "$L" -e)
              if [ "$mode" = paced ]; then args+=(-b 1000000000); else args+=(-b 10G); fi ;;
    nuttcp)   args=(nuttcp -4 -P "$P_NT" -p "$P_ND" -T "$DUR" -u -l "$L" -fparse -fxmitstats)
              if [ "$mode" = paced ]; then args+=(-R 1000000); else args+=(-R 0); fi
              args+=("$H") ;;
  esac
  echo "${args[*]}" > "$base.cmd"
  m0=$(cpu_ticks ksoftirqd); s0=$(proc_cpu "${SPID[$t]}")
  timed "$base.out" "$base.err" "${args[@]}"
  if [ "$t" = iperf2 ]; then
    # Wait (<= 3 s) until the server has printed its report, i.e. it has finished the test, so
    # its CPU reading below includes all of its work.
    for ((i = 0; i < 60; i++)); do
      grep -Eq '[0-9.]+-[0-9.]+ sec .* -?[0-9]+/[0-9]+ +\(' "$base.srv" && break
      sleep 0.05
    done
  fi
  s1=$(proc_cpu "${SPID[$t]}"); m1=$(cpu_ticks ksoftirqd)
  [ "$t" = iperf2 ] && stop_server iperf2
  local acct other ksoft
  acct=$(awk -v a="$s0" -v b="$s1" -v c="$CLIENT_SECS" 'BEGIN {printf "%.3f", b - a + c}')
  read -r other ksoft < <(awk -v m0="$m0" -v m1="$m1" -v acct="$acct" -v hz="$CLK_TCK" 'BEGIN {
    split(m0, x, " "); split(m1, y, " "); tot = (y[2] - x[2]) / hz; k = (y[3] - x[3]) / hz
    if (tot <= 0) { print "0 0"; exit }
    printf "%.1f %.1f\n", 100 * ((y[1] - x[1]) / hz - acct - k) / tot, 100 * k / tot}')
  note_client_failure "round $r $c $v" "$base.err"
  if line=$(bench_py peers udp "$v" "$base.out" "$L" "$DUR" "$mode" "$base.srv" 2>> "$base.err") && [ "$RC" -eq 0 ]; then
    local sent sent_s rx rx_s rx_bps sent_bps loss cpu rest
    read -r sent sent_s rx rx_s rx_bps sent_bps loss cpu rest <<< "$line"
    [ "$t" != netchar ] && cpu=$acct        # peers: process accounting is the figure
    ROW=$(awk -v OFS='\t' -v r="$r" -v c="$c" -v v="$v" -v sent="$sent" -v ss="$sent_s" -v rx="$rx" \
      -v rs="$rx_s" -v rb="$rx_bps" -v sb="$sent_bps" -v loss="$loss" -v cpu="$cpu" -v acct="$acct" \
      -v other="$other" -v ks="$ksoft" -v notes="${rest:-}" 'BEGIN {
        print r, c, v, "ok", sprintf("%.1f", sent / ss), sprintf("%.1f", rx / rs), sprintf("%.4f", rb / 1e9),
              sprintf("%.4f", sb / 1e9), loss, cpu, acct, other, ks, rx, notes}')
  else
    [ "$RC" -eq 0 ] && note_unusable "round $r $c $v" "$base.err"
    ROW=$(printf '%s\t%s\t%s\tFAIL\t\t\t\t\t\t\t%s\t%s\t%s\t\t' "$r" "$c" "$v" "$acct" "$other" "$ksoft")
  fi
  OTHER=$other
  sleep 0.5   # let the previous test's sockets and softirq work drain before the next one
}

# ------------------------------------------------------------------ main
for t in "${TOOLS[@]}"; do
  [ "$t" = iperf2 ] && continue            # fresh server per run
  start_server "$t" || { FAILED=1; exit 1; }
done

VERS=$(netchar_version)
for t in "${TOOLS[@]}"; do
  case $t in
    iperf*) VERS="$VERS, $(iperf_version "$t")" ;;
    nuttcp) VERS="$VERS, nuttcp $(nuttcp -V 2>&1 | sed -n '1s/^nuttcp-//p')" ;;
  esac
done
# Variants in run order (rotated per round); a variant runs only if its tool is present.
ALL_VARIANTS=()
for v in netchar netchar-nogso netchar-gro netchar-q100 netchar-rand netchar-verify iperf3 iperf2 nuttcp; do
  [[ " ${TOOLS[*]} " == *" ${v%%-*} "* ]] && ALL_VARIANTS+=("$v")
done
nruns=0
for c in "${CASES[@]}"; do for v in ${C_VARIANTS[$c]}; do
  [[ " ${ALL_VARIANTS[*]} " == *" $v "* ]] && nruns=$((nruns + 1)); done; done
echo "udp.sh: ${#CASES[@]} cases, $nruns runs per round x $ROUNDS rounds of ${DUR}s on $H (~$(( nruns * ROUNDS * (DUR + 2) ))s); logs in $WORK"

T0=$(date +%s)
for ((r = 1; r <= ROUNDS; r++)); do
  start_round "$r" "low/noisy"      # waits for quiet if IDLE_WAIT is set
  rotate "$r" "${ALL_VARIANTS[@]}"  # the variant that goes first changes every round
  for c in "${CASES[@]}"; do
    for v in "${ORDER[@]}"; do
      [[ " ${C_VARIANTS[$c]} " == *" $v "* ]] || continue
      # progress on a terminal only, so logs/pipes get just the report
      [ -t 2 ] && printf '\r  round %d/%d  %-26s %-14s' "$r" "$ROUNDS" "${C_LABEL[$c]}" "$v" >&2
      # A run during which other work took more than BUSY_RETRY % is measured again; the
      # attempt with less other work is kept (an ok one over a failed one).
      measure quieter-ok run_one "$r" "$c" "$v"
      if [ "$RETRIED" = 1 ]; then
        kept=$KEPT; [ "$kept" = first ] && kept="first attempt"
        note "re-measured round $r ${C_LABEL[$c]} $v: other work took ${FIRST_OTHER}% of the machine (retry: ${OTHER}%); kept the $kept"
      fi
    done
  done
done
[ -t 2 ] && printf '\r%70s\r' '' >&2
for t in "${TOOLS[@]}"; do
  [ "$t" = iperf2 ] || note_dead_servers "$t"    # iperf2's servers are per run
done

# ------------------------------------------------------------------ report
REPORT=$WORK/report.txt
bench_py udp_report "$RES" "$NOTES" "$DUR" "$ROUNDS" "$VERS" "$(( $(date +%s) - T0 ))" "$(uname -r)" "$(nproc)" "${ALL_VARIANTS[*]}" > "$REPORT"

finish                            # print, save if BENCH_SAVE=1, exit with FAILED
