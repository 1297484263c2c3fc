#!/usr/bin/env bash
# bench/tcp.sh — side-by-side loopback TCP throughput of netchar, iperf3 and iperf2.
#
# Cases: 1 stream up, -P 2, -P 4, reverse (-R, 1 stream), netchar --zerocopy (1 stream,
# compared with the peers' plain 1-stream figures), netchar --rx-wake-per-segment (1 stream, its
# receiver woken for every segment as iperf3's and iperf2's are, where by default it batches
# its wake-ups; compared with the peers' 1-stream figures) and --skip-rx-copy (1 stream; iperf3 runs it
# with its own --skip-rx-copy where it has one, 3.19 and later, else it is compared with
# iperf3's plain 1-stream figure), and netchar's payload rows, --payload random (1 stream) and
# --payload random --verify (its receiver compares every byte with the sender's generator),
# whose cost is read against netchar's own 1-stream row.  Every case runs ROUNDS times per tool;
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
#   BENCH_SAVE=0   1 = also write the report to bench/results/<date>-tcp-<machine>.txt
#   NO_BUILD=0     1 = skip `cargo build` (use the binary already in target/release)
#   IDLE_WAIT=0    seconds to wait, before each round, for the machine to drop below 15% busy
#                  (other builds/tests on a 2-core box distort loopback figures badly)
#   BUSY_RETRY=25  re-measure a run once when other processes took more than this % of the
#                  machine during it (0 = never); each re-measurement is listed in the notes
#   CASES="up1 seg1 zc1 skip1 rand1 ver1 up2 up4 rev1"  the cases run, in this order (a subset:
#                  CI's smoke runs "up1 up4 rev1"; the rows compared with up1 need up1)
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
SERVER_TO=$(( ROUNDS * 30 * (DUR + 6 + IDLE_WAIT) + 600 ))
server_cmd() { # TOOL -> sets CMD and READY (see start_server)
  case $1 in
    netchar) CMD=("$NC" server -B "$H" -p "$P_NC"); READY=(log) ;;
    iperf3)  CMD=("$IPERF3" -s -B "$H" -p "$P_I3"); READY=(tcp "$P_I3") ;;
    # -y C makes the server print one CSV line per finished stream: that is the receiver's
    # figure for upload tests, and tells us when the server has finished a test.
    iperf2)  CMD=("$IPERF2" -s -B "$H" -p "$P_I2" -y C); READY=(tcp "$P_I2") ;;
  esac
}
stop_servers_on_exit

# ------------------------------------------------------------------ result parser
# bench_py peers tcp TOOL FILE DIRECTION DUR ZC -> "gbps bytes cpu_seconds|- retransmits|- note..."
# (bench/netchar_bench/peers.py; notes are space-separated tokens; exit status 1 = no usable result)

# ------------------------------------------------------------------ one run
# run_one ROUND CASE TOOL P REV(0/1) ZC(0/1): runs a client against the tool's server and
# sets ROW to "round case tool status gbps bytes cpu_self cpu_acct other% retrans notes"
# (a results.tsv line; the caller decides whether to keep it) and OTHER to other%.  other% = CPU time of the whole machine during the run that neither the client
# nor the server was charged for (other processes; also ksoftirqd), in % of all CPUs.
# ZC is the case's mode: 0 plain, 1 --zerocopy, skip --skip-rx-copy, seg --rx-wake-per-segment,
# rand --payload random, ver --payload random --verify.
run_one() {
  local r=$1 c=$2 t=$3 P=$4 rev=$5 zc=$6
  local base="$WORK/r$r.$c.$t${ATTEMPT:-}" dir=up line s0 s1 m0 m1 n0=0 i args=()
  [ "$rev" = 1 ] && dir=down
  restart_if_dead "$t" "round $r $c" ||
    { ROW=$(printf '%s\t%s\t%s\tFAIL\t\t\t\t\t\t\tserver down' "$r" "$c" "$t"); OTHER=0; return; }
  case $t in
    netchar) args=("$NC" tcp "$H" -p "$P_NC" -t "$DUR" -P "$P" -i 0 --json)
             [ "$rev" = 1 ] && args+=(-R); [ "$zc" = 1 ] && args+=(--zerocopy)
             [ "$zc" = skip ] && args+=(--skip-rx-copy); [ "$zc" = seg ] && args+=(--rx-wake-per-segment)
             [ "$zc" = rand ] && args+=(--payload random:1); [ "$zc" = ver ] && args+=(--payload random:1 --verify) ;;
    iperf3)  args=("$IPERF3" -c "$H" -p "$P_I3" -t "$DUR" -P "$P" -J); [ "$rev" = 1 ] && args+=(-R)
             [ "$zc" = skip ] && args+=(--skip-rx-copy) ;;
    iperf2)  args=("$IPERF2" -c "$H" -p "$P_I2" -t "$DUR" -P "$P" -y C); [ "$rev" = 1 ] && args+=(-R)
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
  if line=$(bench_py peers tcp "$t" "$src" "$dir" "$DUR" "$zc" 2>> "$base.err") && [ "$RC" -eq 0 ]; then
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
# Case table: id, label, streams, reverse, zerocopy.  zc1, seg1, rand1 and ver1 are netchar
# only; the report compares them with the peers' up1 figures, and the payload rows with
# netchar's own.  They run right after up1 so all see a similar machine.
ALL_CASES="up1 seg1 zc1 skip1 rand1 ver1 up2 up4 rev1"
read -ra CASES <<<"${CASES:-$ALL_CASES}"
for c in "${CASES[@]}"; do
  [[ " $ALL_CASES " == *" $c "* ]] || { echo "tcp.sh: CASES: no case '$c' (the cases: $ALL_CASES)" >&2; exit 2; }
done
NETCHAR_ONLY=" seg1 zc1 rand1 ver1 "
declare -A C_LABEL=([up1]="TCP 1 stream" [seg1]="TCP 1 wake/segment" [zc1]="TCP 1 --zerocopy" [skip1]="TCP 1 skip-rx-copy" [rand1]="TCP 1 random payload" [ver1]="TCP 1 random+verify" [up2]="TCP -P 2" [up4]="TCP -P 4" [rev1]="TCP -R 1 stream")
declare -A C_P=([up1]=1 [seg1]=1 [zc1]=1 [skip1]=1 [rand1]=1 [ver1]=1 [up2]=2 [up4]=4 [rev1]=1)
declare -A C_REV=([up1]=0 [seg1]=0 [zc1]=0 [skip1]=0 [rand1]=0 [ver1]=0 [up2]=0 [up4]=0 [rev1]=1)
declare -A C_ZC=([up1]=0 [seg1]=seg [zc1]=1 [skip1]=skip [rand1]=rand [ver1]=ver [up2]=0 [up4]=0 [rev1]=0)
# iperf3 has --skip-rx-copy from 3.19 (Debian 12 ships 3.12, which lacks it); iperf2 has none.
SKIP_PEERS=""
if [ -n "$IPERF3" ] && "$IPERF3" --help 2>&1 | grep -q -- --skip-rx-copy; then SKIP_PEERS=iperf3
else echo "note: this iperf3 has no --skip-rx-copy (3.19+); the --skip-rx-copy row compares with its plain 1-stream run"; fi

for t in "${TOOLS[@]}"; do start_server "$t" || { FAILED=1; exit 1; }; done

VERS=$(netchar_version)
for t in "${TOOLS[@]:1}"; do VERS="$VERS, $(iperf_version "$t")"; done
nruns=0
for c in "${CASES[@]}"; do
  if [[ "$NETCHAR_ONLY" == *" $c "* ]]; then nruns=$((nruns + 1)); else nruns=$((nruns + ${#TOOLS[@]})); fi
done
echo "tcp.sh: ${#CASES[@]} cases x ${#TOOLS[@]} tools x $ROUNDS rounds of ${DUR}s on $H (~$(( nruns * ROUNDS * (DUR + 1) ))s); logs in $WORK"

T0=$(date +%s)
for ((r = 1; r <= ROUNDS; r++)); do
  start_round "$r" "low/noisy"      # waits for quiet if IDLE_WAIT is set
  rotate "$r" "${TOOLS[@]}"         # the tool that goes first changes every round
  for c in "${CASES[@]}"; do
    for t in "${ORDER[@]}"; do
      [[ "$NETCHAR_ONLY" == *" $c "* ]] && [ "$t" != netchar ] && continue
      [ "$c" = skip1 ] && [ "$t" != netchar ] && [[ " $SKIP_PEERS " != *" $t "* ]] && continue
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
bench_py tcp_report "$RES" "$NOTES" "$DUR" "$ROUNDS" "$VERS" "$(( $(date +%s) - T0 ))" "$(uname -r)" "$(nproc)" "${TOOLS[*]}" "$SKIP_PEERS" > "$REPORT"

finish                            # print, save if BENCH_SAVE=1, exit with FAILED
