#!/usr/bin/env bash
# bench/newest.sh — netchar against the newest peers, round by round (issue 25).
#
# Every case runs each of its tools once per round, back to back (the tool that goes first
# changes from round to round), so each round gives netchar's own ratio to every peer on the
# same machine state; the verdicts read the median of those per-round ratios and how many
# rounds were at or above 1 (on a shared 2-vCPU machine, the machine's speed moves between
# rounds by more than the differences measured, and a round's runs see the same machine).
#
# Cases (PIN=1, the default: clients on CLIENT_CPU=0, servers on SERVER_CPU=1, rr "same" both
# on CLIENT_CPU; the placement is printed beside every latency figure):
#   tcp1         TCP 1 stream up, Gbit/s at the receiver: netchar, iperf3, iperf2, netperf TCP_STREAM
#   tcp4         TCP -P 4 up: netchar, iperf3 (multi-threaded from 3.16), iperf2
#   skip1        TCP 1 stream up, the receiver reading with --skip-rx-copy (MSG_TRUNC, no copy to
#                user space): netchar and iperf3 with its own --skip-rx-copy (3.19 and later; an
#                older iperf3 is left out of this case)
#                (both: also netchar -l 128Ki, iperf3's write length beside netchar's 512 KiB)
#   udp64        UDP 64 B at full rate, datagrams/s received: netchar (GSO sender), iperf3,
#                and bench/ref/udp_ref (sendmmsg with GSO into recvmmsg: this machine's limit),
#                plain and with -s (udp_ref-s: a kernel receive stamp with every datagram, which a
#                receiver that measures jitter must ask for: the limit for such a receiver)
#   udp1472      the same with 1472 B datagrams
#   rr.tcp.same  TCP request/response, 1 B, one in flight, both ends on CLIENT_CPU: netchar,
#                netperf TCP_RR, netperf -j (it then times every transaction, as netchar
#                does for its percentiles: a clock read each), sockperf ping-pong (14 B, its minimum)
#   rr.udp.same  the same over UDP (netperf UDP_RR)
#   rr.tcp.cross rr with the server on SERVER_CPU: netchar, netchar --busy-poll, netperf, sockperf
#   rr.udp.cross the same over UDP
#   crr          a TCP connection per transaction: netchar crr, netperf TCP_CRR
#
# Peers: the newest the user built, by path, else Debian's packages (lib.sh: find_peers):
#   IPERF3=PATH IPERF2=PATH NETPERF=PATH NETSERVER=PATH SOCKPERF=PATH (NETPERF_BIN=DIR works too)
# and the report says which version of each ran and where it came from (a variable or Debian).
# A peer that is missing is skipped with a message; nothing is downloaded or built but udp_ref
# (gcc, into the work directory).
#
# Knobs (environment):
#   DUR=3 ROUNDS=5        seconds per run, rounds
#   CASES="tcp1 tcp4 skip1 udp64 udp1472 rr.tcp.same rr.udp.same rr.tcp.cross rr.udp.cross crr"
#   PORT_BASE=15500       ports PORT_BASE..PORT_BASE+13 on 127.0.0.1
#   PIN=1                 0: no taskset and no -A/-T pinning (the rr "same" cases need PIN=1)
#   VETH=0                1: the servers run in a network namespace of their own, reached over a
#                         veth pair (10.199.0.1 here, 10.199.0.2 there; needs root and `ip`), so
#                         every byte crosses veth's transmit and receive paths, not loopback's;
#                         udp_ref (loopback only) is left out
#   CLIENT_CPU=0 SERVER_CPU=1
#   NETCHAR=PATH          measure this binary (no build); NO_BUILD=1: the one in target/release
#   NETCHAR_BEFORE=PATH   a second netchar (the build before a data-path change): it runs as the
#                         tool "netchar-before" in every case, so before and after are measured
#                         in the same rounds, and the report gives after/before per case
#   QUIET_LOAD=1.0 QUIET_FOR=120 QUIET_MAX=1800  wait, before the first round, until the 1-minute
#                         load average stayed below QUIET_LOAD for QUIET_FOR s, at most QUIET_MAX s;
#                         a run that gave up is labelled "busy machine" with its load average
#   BENCH_SAVE=0          1: also write bench/results/<date>-newest-<machine>.txt
# Exit status: 0 when every run gave a figure (PASS/MISS lines are informational), 1 when a run
# failed or the build failed, 2 for bad settings.
set -u -o pipefail
BENCH=newest
BENCH_DIR=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
. "$BENCH_DIR/lib.sh" || exit 2

DUR=${DUR:-3}
ROUNDS=${ROUNDS:-5}
PORT_BASE=${PORT_BASE:-15500}
PIN=${PIN:-1}
CLIENT_CPU=${CLIENT_CPU:-0}
SERVER_CPU=${SERVER_CPU:-1}
NO_BUILD=${NO_BUILD:-0}
BENCH_SAVE=${BENCH_SAVE:-0}
CASES=${CASES:-"tcp1 tcp4 skip1 udp64 udp1472 rr.tcp.same rr.udp.same rr.tcp.cross rr.udp.cross crr"}
NETCHAR_BEFORE=${NETCHAR_BEFORE:-}
VETH=${VETH:-0}
H=127.0.0.1
need_posint DUR ROUNDS PORT_BASE
need_uint VETH
need_uint PIN CLIENT_CPU SERVER_CPU
[ "$CLIENT_CPU" != "$SERVER_CPU" ] || { echo "newest.sh: CLIENT_CPU and SERVER_CPU must differ" >&2; exit 2; }
for c in $CASES; do
  case $c in tcp1|tcp4|skip1|udp64|udp1472|rr.tcp.same|rr.udp.same|rr.tcp.cross|rr.udp.cross|crr) ;;
    *) echo "newest.sh: unknown case '$c' in CASES" >&2; exit 2 ;; esac
done
have python3 || { echo "newest.sh: python3 is required" >&2; exit 2; }
[ "$PIN" = 0 ] || have taskset || { echo "newest.sh: PIN=1 needs taskset (util-linux)" >&2; exit 2; }

SERVER_NETNS=""
if [ "$VETH" = 1 ]; then
  [ "$(id -u)" = 0 ] && have ip || { echo "newest.sh: VETH=1 needs root and ip (iproute2)" >&2; exit 2; }
  SERVER_NETNS=ncbench-srv$$
  ip netns add "$SERVER_NETNS" &&
    ip link add ncb$$a type veth peer name ncb$$b &&
    ip link set ncb$$b netns "$SERVER_NETNS" &&
    ip addr add 10.199.0.1/24 dev ncb$$a && ip link set ncb$$a up &&
    ip -n "$SERVER_NETNS" addr add 10.199.0.2/24 dev ncb$$b &&
    ip -n "$SERVER_NETNS" link set ncb$$b up && ip -n "$SERVER_NETNS" link set lo up ||
    { echo "newest.sh: VETH=1: could not make the namespace and veth pair" >&2; ip netns del "$SERVER_NETNS" 2>/dev/null; exit 2; }
  H=10.199.0.2
fi
bench_init
CLIENT_TO=$((DUR + 25))
find_peers
IPERF3_SKIPS=0
[ -n "$IPERF3" ] && "$IPERF3" --help 2>&1 | grep -q -- --skip-rx-copy && IPERF3_SKIPS=1
build_netchar
NCB=""
if [ -n "$NETCHAR_BEFORE" ]; then
  NCB=$WORK/netchar-before
  cp "$NETCHAR_BEFORE" "$NCB" || { echo "newest.sh: no netchar binary at NETCHAR_BEFORE=$NETCHAR_BEFORE" >&2; exit 2; }
fi
UDP_REF=""
if have gcc; then
  gcc -O2 -o "$WORK/udp_ref" "$BENCH_DIR/ref/udp_ref.c" 2> "$WORK/udp_ref.build.err" && UDP_REF=$WORK/udp_ref
fi
[ "$VETH" = 1 ] && UDP_REF=""
[ -n "$UDP_REF" ] || echo "udp_ref not built (needs gcc) or VETH=1: the UDP cases have no reference"

C=$CLIENT_CPU S=$SERVER_CPU
pin() { # CPU -> the taskset prefix (none with PIN=0)
  [ "$PIN" = 0 ] || echo "taskset -c $1"
}

# ------------------------------------------------------------------ servers
# name -> port; each pinned to its CPU for its whole life.
declare -A SPORT=(
  [nc.x]=$PORT_BASE [nc.s]=$((PORT_BASE + 1)) [ncb.x]=$((PORT_BASE + 2)) [ncb.s]=$((PORT_BASE + 3))
  [i3]=$((PORT_BASE + 4)) [i2]=$((PORT_BASE + 5)) [np.x]=$((PORT_BASE + 6)) [np.s]=$((PORT_BASE + 7))
  [spu.x]=$((PORT_BASE + 8)) [spu.s]=$((PORT_BASE + 9)) [spt.x]=$((PORT_BASE + 10)) [spt.s]=$((PORT_BASE + 11)))
SERVERS=(nc.x nc.s)
[ -n "$NCB" ] && SERVERS+=(ncb.x ncb.s)
[ -n "$IPERF3" ] && SERVERS+=(i3)
[ -n "$IPERF2" ] && SERVERS+=(i2)
[ -n "$NETPERF" ] && SERVERS+=(np.x np.s)
[ -n "$SOCKPERF" ] && SERVERS+=(spu.x spu.s spt.x spt.s)
if have ss; then
  for n in "${SERVERS[@]}"; do
    p=${SPORT[$n]}
    if port_in_use tcp "$p" || port_in_use udp "$p"; then
      echo "newest.sh: port $p is in use; pick free ports with PORT_BASE=..." >&2; exit 2
    fi
  done
fi
SERVER_TO=$(( ROUNDS * 40 * (DUR + 8) + ${QUIET_MAX:-1800} + 600 ))
server_cmd() {
  local n=$1 p=${SPORT[$1]} cpu=$S
  [[ $n == *.s ]] && cpu=$C
  READY=(tcp "$p")
  case $n in
    nc.*)  CMD=("$NC" server -B "$H" -p "$p"); READY=(log) ;;
    ncb.*) CMD=("$NCB" server -B "$H" -p "$p"); READY=(log) ;;
    i3)    CMD=("$IPERF3" -s -B "$H" -p "$p") ;;
    i2)    CMD=("$IPERF2" -s -B "$H" -p "$p" -y C) ;;
    np.*)  CMD=("$NETSERVER" -D -L "$H" -p "$p") ;;
    spu.*) CMD=("$SOCKPERF" sr -i "$H" -p "$p"); READY=(udp "$p") ;;
    spt.*) CMD=("$SOCKPERF" sr --tcp -i "$H" -p "$p") ;;
  esac
  CMD=($(pin "$cpu") "${CMD[@]}")
  [ -n "$SERVER_NETNS" ] && CMD=(ip netns exec "$SERVER_NETNS" "${CMD[@]}")
}
server_who() { echo "server $1"; }
stop_servers_on_exit

# ------------------------------------------------------------------ cases
declare -A LABEL=([tcp1]="TCP 1 stream" [tcp4]="TCP -P 4" [skip1]="TCP 1 --skip-rx-copy" [udp64]="UDP 64 B" [udp1472]="UDP 1472 B"
  [rr.tcp.same]="TCP rr, same core" [rr.udp.same]="UDP rr, same core" [rr.tcp.cross]="TCP rr, cross core"
  [rr.udp.cross]="UDP rr, cross core" [crr]="TCP crr")
tools_of() { # CASE -> TOOLS (those present)
  local c=$1 t=(netchar)
  [ -n "$NCB" ] && t+=(netchar-before)
  case $c in
    tcp1)    t+=(netchar-l128); [ -n "$IPERF3" ] && t+=(iperf3); [ -n "$IPERF2" ] && t+=(iperf2); [ -n "$NETPERF" ] && t+=(netperf) ;;
    tcp4)    t+=(netchar-l128); [ -n "$IPERF3" ] && t+=(iperf3); [ -n "$IPERF2" ] && t+=(iperf2) ;;
    skip1)   [ "$IPERF3_SKIPS" = 1 ] && t+=(iperf3) ;;
    udp*)    [ -n "$IPERF3" ] && t+=(iperf3); [ -n "$UDP_REF" ] && t+=(udp_ref udp_ref-s) ;;
    rr.*.cross) t+=(netchar-bp); [ -n "$NETPERF" ] && t+=(netperf netperf-j); [ -n "$SOCKPERF" ] && t+=(sockperf) ;;
    rr.*)    [ -n "$NETPERF" ] && t+=(netperf netperf-j); [ -n "$SOCKPERF" ] && t+=(sockperf) ;;
    crr)     [ -n "$NETPERF" ] && t+=(netperf) ;;
  esac
  TOOLS=("${t[@]}")
}

# conntrack_room WHAT: a crr run makes a connection per transaction, and where the kernel tracks
# connections (any nft/iptables NAT rule loads nf_conntrack; a container runtime's do), each stays
# in the table for 120 s after it closed. crr runs back to back (CASES=crr) fill it, and a full
# table drops new connections' SYNs: the next run fails to connect, whichever tool it is. So a
# crr run waits (at most 130 s) until the table is at most half full, and the wait is noted.
conntrack_room() {
  local count=/proc/sys/net/netfilter/nf_conntrack_count max=/proc/sys/net/netfilter/nf_conntrack_max
  [ -r "$count" ] && [ -r "$max" ] || return 0
  local m waited=0; m=$(cat "$max")
  while [ "$(cat "$count")" -gt $((m / 2)) ] && [ "$waited" -lt 130 ]; do sleep 1; waited=$((waited + 1)); done
  [ "$waited" -gt 0 ] && note "$1: waited ${waited} s for the connection-tracking table to be at most half full ($(cat "$count") of $m entries)"
  return 0
}

# run_one ROUND CASE TOOL: one client run; appends "round case tool status value p50 p99 placement
# notes" to RES (value: Gbit/s, received datagrams/s or transactions/s).
run_one() {
  local r=$1 c=$2 t=$3 base="$WORK/r$1.$2.$3" proto=tcp pl=cross sc=$S line v p50="" p99="" rest="" kind
  local bin=$NC srv args=() src
  [ "$t" = netchar-before ] && bin=$NCB
  [[ $c == rr.udp.* ]] && proto=udp
  [[ $c == *.same ]] && { pl=same; sc=$C; }
  local sfx=x; [ "$pl" = same ] && sfx=s
  case $c in tcp*|skip1) kind=tcp ;; udp*) kind=udp ;; crr) kind=crr ;; *) kind=rr ;; esac
  local L=64; [ "$c" = udp1472 ] && L=1472
  local P=1; [ "$c" = tcp4 ] && P=4
  local A=(); [ "$PIN" = 1 ] && A=(-A "$C,$sc")
  local T=(); [ "$PIN" = 1 ] && T=(-T "$C,$sc")
  case $t in
    netchar|netchar-before|netchar-bp|netchar-l128)
      srv=nc.$sfx; [ "$t" = netchar-before ] && srv=ncb.$sfx
      case $kind in
        tcp) args=("$bin" tcp "$H" -p "${SPORT[$srv]}" -t "$DUR" -P "$P" "${A[@]}" -i 0 --json)
             [ "$t" = netchar-l128 ] && args+=(-l 128Ki); [ "$c" = skip1 ] && args+=(--skip-rx-copy) ;;
        udp) args=("$bin" udp "$H" -p "${SPORT[$srv]}" -t "$DUR" -l "$L" -b 0 "${A[@]}" -i 0 --json) ;;
        rr)  args=("$bin" rr "$H" -p "${SPORT[$srv]}" -t "$DUR" "${A[@]}" -i 0 --json)
             [ "$proto" = udp ] && args+=(--udp); [ "$t" = netchar-bp ] && args+=(--busy-poll) ;;
        crr) args=("$bin" crr "$H" -p "${SPORT[$srv]}" -t "$DUR" "${A[@]}" -i 0 --json) ;;
      esac ;;
    iperf3) srv=i3
      args=("$IPERF3" -c "$H" -p "${SPORT[i3]}" -t "$DUR" -J)
      if [ "$kind" = udp ]; then args+=(-u -l "$L" -b 0); else args+=(-P "$P"); fi
      [ "$c" = skip1 ] && args+=(--skip-rx-copy) ;;
    iperf2) srv=i2; args=("$IPERF2" -c "$H" -p "${SPORT[i2]}" -t "$DUR" -P "$P" -y C) ;;
    netperf|netperf-j) srv=np.$sfx
      case $kind in
        tcp) args=("$NETPERF" -H "$H" -p "${SPORT[$srv]}" -t TCP_STREAM -l "$DUR" -P 0 "${T[@]}" -- -m 131072 -o THROUGHPUT,THROUGHPUT_UNITS,ELAPSED_TIME) ;;
        rr)  local nt=TCP_RR; [ "$proto" = udp ] && nt=UDP_RR
             local j=(); [ "$t" = netperf-j ] && j=(-j)
             args=("$NETPERF" -H "$H" -p "${SPORT[$srv]}" -t "$nt" -l "$DUR" -P 0 "${T[@]}" "${j[@]}" -- -r 1,1 -o THROUGHPUT,MEAN_LATENCY,P50_LATENCY,P99_LATENCY) ;;
        crr) args=("$NETPERF" -H "$H" -p "${SPORT[$srv]}" -t TCP_CRR -l "$DUR" -P 0 "${T[@]}" -- -r 1,1 -o THROUGHPUT,MEAN_LATENCY,P50_LATENCY,P99_LATENCY) ;;
      esac ;;
    sockperf) srv=spt.$sfx; [ "$proto" = udp ] && srv=spu.$sfx
      args=("$SOCKPERF" pp -i "$H" -p "${SPORT[$srv]}" -t "$DUR" -m 14 --full-rtt)
      [ "$proto" = tcp ] && args+=(--tcp) ;;
    udp_ref|udp_ref-s) srv=""; args=("$UDP_REF" -l "$L" -t "$DUR")
      [ "$t" = udp_ref-s ] && args+=(-s)
      [ "$PIN" = 1 ] && args+=(-c "$C" -C "$S") ;;
  esac
  if [ -n "$srv" ] && ! restart_if_dead "$srv" "round $r $c $t"; then
    printf '%s\t%s\t%s\tFAIL\t\t\t\t\tserver down\n' "$r" "$c" "$t" >> "$RES"; return
  fi
  [ "$PIN" = 1 ] && [[ $t != udp_ref* ]] && args=(taskset -c "$C" "${args[@]}")
  [ "$kind" = crr ] && conntrack_room "round $r $c $t"
  echo "${args[*]}" > "$base.cmd"
  local n0=0; [ "$t" = iperf2 ] && n0=$(wc -l < "$WORK/srv.i2.out")
  timed "$base.out" "$base.err" "${args[@]}"
  note_client_failure "round $r $c $t" "$base.err"
  src=$base.out
  if [ "$t" = iperf2 ]; then             # the receiver's lines are the server's (-y C)
    local i
    for ((i = 0; i < 60; i++)); do
      tail -n +$((n0 + 1)) "$WORK/srv.i2.out" > "$base.srv.csv"
      [ "$(awk -F, '$6 != -1' "$base.srv.csv" | wc -l)" -ge "$P" ] && break
      sleep 0.05
    done
    src=$base.srv.csv
  fi
  [ "$t" = sockperf ] && { cat "$base.out" "$base.err" > "$base.all"; src=$base.all; }
  local tool=${t%%-*}; [ "$t" = netchar-before ] && tool=netchar
  local placement="client CPU $C, server CPU $sc"; [ "$PIN" = 0 ] && placement=unpinned
  if [ "$RC" -eq 0 ] && case $kind in
      tcp) line=$(bench_py peers tcp "$tool" "$src" up "$DUR" 0 2>> "$base.err") ;;
      udp) line=$(bench_py peers udp "$tool" "$src" "$L" "$DUR" max 2>> "$base.err") ;;
      rr)  line=$(bench_py peers rr "$tool" "$src" "$proto" "$([ "$t" = sockperf ] && echo 14 || echo 1)" "$C" "$sc" "$([ "$t" = netchar-bp ] && echo 1 || echo 0)" "$DUR" 2>> "$base.err") ;;
      crr) line=$(bench_py peers rr "$tool" "$src" crr 1 "$C" "$sc" 0 "$DUR" 2>> "$base.err") ;;
    esac; then
    case $kind in
      tcp) read -r v _ _ _ rest <<< "$line" ;;
      udp) local sent ss rx rs; read -r sent ss rx rs _ _ _ _ rest <<< "$line"
           v=$(awk -v a="$rx" -v b="$rs" 'BEGIN {printf "%.1f", a / b}') ;;
      rr|crr) read -r v _ p50 p99 _ rest <<< "$line" ;;
    esac
    printf '%s\t%s\t%s\tok\t%s\t%s\t%s\t%s\t%s\n' "$r" "$c" "$t" "$v" "$p50" "$p99" "$placement" "${rest:-}" >> "$RES"
  else
    [ "$RC" -eq 0 ] && note_unusable "round $r $c $t" "$base.err"
    printf '%s\t%s\t%s\tFAIL\t\t\t\t%s\t\n' "$r" "$c" "$t" "$placement" >> "$RES"
  fi
  sleep 0.3
}

# ------------------------------------------------------------------ main
for n in "${SERVERS[@]}"; do start_server "$n" || { FAILED=1; exit 1; }; done
VERS=$(netchar_version)
[ -n "$NCB" ] && VERS="$VERS, netchar-before $("$NCB" --version 2>/dev/null | awk '{print $2}') (NETCHAR_BEFORE${NETCHAR_BEFORE_REV:+, $NETCHAR_BEFORE_REV})"
for t in iperf3 iperf2 netperf sockperf; do [ -n "${PEER_VER[$t]:-}" ] && VERS="$VERS, ${PEER_VER[$t]}"; done
[ -n "$UDP_REF" ] && VERS="$VERS, udp_ref ($(gcc -dumpfullversion 2>/dev/null || gcc -dumpversion) -O2)"
echo "newest.sh: cases: $CASES; $ROUNDS rounds of ${DUR}s; logs in $WORK"
echo "waiting for a quiet machine (1-minute load < ${QUIET_LOAD:-1.0} for ${QUIET_FOR:-120} s, at most ${QUIET_MAX:-1800} s)"
wait_quiet
LOAD_START=$QUIET_LOADAVG
T0=$(date +%s)
for ((r = 1; r <= ROUNDS; r++)); do
  note "round $r: load average $(load_average) at its start"
  for c in $CASES; do
    tools_of "$c"
    rotate "$r" "${TOOLS[@]}"
    for t in "${ORDER[@]}"; do
      [ -t 2 ] && printf '\r  round %d/%d  %-20s %-16s' "$r" "$ROUNDS" "$c" "$t" >&2
      run_one "$r" "$c" "$t"
    done
  done
done
[ -t 2 ] && printf '\r%60s\r' '' >&2
note_dead_servers "${SERVERS[@]}"
REPORT=$WORK/report.txt
{
  echo "bench/newest.sh: DUR=$DUR ROUNDS=$ROUNDS PIN=$PIN VETH=$VETH (clients CPU $C, servers CPU $S; rr same core: both CPU $C), $(uname -r), $(nproc) CPUs"
  echo "versions: $VERS"
  echo "machine: $QUIET (load average $LOAD_START at the start, $(load_average) at the end; $(( $(date +%s) - T0 )) s)"
  bench_py newest_report "$RES" "$NOTES"
} > "$REPORT"
finish
