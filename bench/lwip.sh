#!/usr/bin/env bash
# bench/lwip.sh — the C responder on lwIP's own stack in user space over TAP (responder/
# ports/lwip-tap), measured by the netchar client from the kernel side of the TAP device, and
# held against lwIP's own iperf server on the same stack and driver (lwiperf).
#
#   tcp-up / tcp-down   netchar tcp [-R] against the responder: the receiver's count
#   tcp-up sockets      netchar tcp against the responder built TCP_SINK=0 (its receiver reads
#                       through lwIP's sockets instead of counting in lwIP's receive callback)
#   tcp-up lwiperf      iperf -c against lwiperf, and netchar tcp --proto lwiperf against
#                       lwiperf: lwiperf's own count of the bytes it received (its report)
#   udp-up / udp-down   netchar udp -b 0 -l 64 [-R]: datagrams received per second and lost
#   rr                  netchar rr -l 1 over TCP: transactions/s and round trip p50/p99
# The issue's target: the responder at >= 0.95x lwiperf's TCP up rate (iperf -c) on the same
# stack, i.e. the responder is not the bottleneck. Beside the rates, the TCP up cases report the
# server process's CPU time (user + system, /proc/PID/stat) per GB received: on a machine
# shared with other work the rates swing with the load, the cost per byte much less.
#
# Needs root (a namespace with a TAP device), make, gcc, liblwip-dev, python3; iperf (2.x)
# and an lwIP 2.1.3 source tree for lwiperf (LWIPERF_C=path/to/lwip/src/apps/lwiperf/
# lwiperf.c; without it the lwiperf rows are skipped: Debian's liblwip lacks lwiperf).
# Knobs: DUR=3 (seconds per run), ROUNDS=3 (medians), PIN=1 (the responder's threads on CPU
# RESP_CPU=1, the client on CLIENT_CPU=0; 0 = unpinned), NETCHAR=PATH (a prebuilt client;
# else cargo build --release), NO_BUILD=0, BENCH_SAVE=0 (1: also write
# bench/results/<date>-lwip-<machine>.txt), INPUT=direct (frames run through lwIP by the
# driver's input thread under the core lock; queued: handed to lwIP's tcpip thread, for the
# responder and lwiperf alike), NICE=0 (e.g. -10: servers and clients run at that niceness, so
# other work on a shared machine yields to them; needs root, which the script has anyway).
set -u -o pipefail
BENCH=lwip
BENCH_DIR=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
. "$BENCH_DIR/lib.sh" || exit 2

DUR=${DUR:-3}
ROUNDS=${ROUNDS:-3}
PIN=${PIN:-1}
RESP_CPU=${RESP_CPU:-1}
CLIENT_CPU=${CLIENT_CPU:-0}
NO_BUILD=${NO_BUILD:-0}
BENCH_SAVE=${BENCH_SAVE:-0}
LWIPERF_C=${LWIPERF_C:-}
INPUT=${INPUT:-direct}
NICE=${NICE:-0}
case $INPUT in
  direct) TAP_INPUT= ;;
  queued) TAP_INPUT=-DNC_TAP_QUEUED_INPUT ;;
  *) echo "lwip.sh: INPUT must be direct or queued (got '$INPUT')" >&2; exit 2 ;;
esac
need_posint DUR ROUNDS
need_uint PIN RESP_CPU CLIENT_CPU
[[ $NICE =~ ^-?[0-9]+$ ]] && ((NICE >= -20 && NICE <= 19)) || { echo "lwip.sh: NICE must be -20 to 19 (got '$NICE')" >&2; exit 2; }
[ "$(id -u)" = 0 ] || { echo "lwip.sh: needs root (a network namespace with a TAP device)"; exit 2; }
have python3 || { echo "lwip.sh: python3 is needed" >&2; exit 2; }

bench_init
REPORT=$WORK/report.txt
build_netchar
make -s -B -C "$ROOT/responder" lwip-tap lwip-tap-sockets TAP_INPUT="$TAP_INPUT" ||
  { echo "lwip.sh: make -C responder lwip-tap lwip-tap-sockets failed" >&2; exit 1; }
RESP=$ROOT/responder/build/netchar-responder-lwip
RESP_SOCKETS=$ROOT/responder/build/netchar-responder-lwip-sockets
LWIPERF=
if [ -n "$LWIPERF_C" ] && have iperf; then
  make -s -B -C "$ROOT/responder" lwiperf-tap TAP_INPUT="$TAP_INPUT" LWIPERF_C="$(realpath "$LWIPERF_C")" && LWIPERF=$ROOT/responder/build/lwiperf-tap
else
  echo "lwiperf rows skipped: give LWIPERF_C=path/to/lwip-2.1.3/src/apps/lwiperf/lwiperf.c and install iperf"
fi

NS=nclwb-$$
TAP=ncbtap0
KERNEL_IP=10.203.0.1
LWIP_IP=10.203.0.2
PIDS=()
trap 'for p in "${PIDS[@]}"; do kill "$p" 2>/dev/null; done; ip netns del $NS 2>/dev/null' EXIT
LWIPERF_TAP=ncbtap1
LWIPERF_IP=10.203.1.2
SOCKETS_TAP=ncbtap2
SOCKETS_IP=10.203.2.2
ip netns add $NS && ip -n $NS link set lo up || { echo "lwip.sh: cannot create namespace $NS" >&2; exit 1; }
for t in "$TAP $KERNEL_IP" "$LWIPERF_TAP 10.203.1.1" "$SOCKETS_TAP 10.203.2.1"; do
  set -- $t
  ip -n $NS tuntap add dev "$1" mode tap && ip -n $NS addr add "$2/24" dev "$1" && ip -n $NS link set "$1" up ||
    { echo "lwip.sh: cannot create TAP $1 in $NS" >&2; exit 1; }
done

RUN_RESP=(ip netns exec $NS nice -n "$NICE")
RUN_CLIENT=(ip netns exec $NS nice -n "$NICE")
if [ "$PIN" = 1 ]; then
  RUN_RESP+=(taskset -c "$RESP_CPU")
  RUN_CLIENT+=(taskset -c "$CLIENT_CPU")
  PLACEMENT="each responder and lwiperf (all threads: main loop, lwIP tcpip thread, TAP input) on CPU $RESP_CPU, client on CPU $CLIENT_CPU"
else
  PLACEMENT="not pinned"
fi
[ "$NICE" != 0 ] && PLACEMENT="$PLACEMENT; servers and clients at nice $NICE"

# start NAME CMD...: one server in the namespace, ready when its stderr says "listening on".
start() {
  local name=$1 i; shift
  "${RUN_RESP[@]}" "$@" > "$WORK/$name.out" 2> "$WORK/$name.err" & PIDS+=($!)
  for ((i = 0; i < 100; i++)); do grep -qs "listening on" "$WORK/$name.err" && return 0; sleep 0.05; done
  echo "lwip.sh: $name did not start:"; cat "$WORK/$name.err"; exit 1
}
start responder "$RESP" --tap $TAP --ip $LWIP_IP/24 --port 5300
start responder-sockets "$RESP_SOCKETS" --tap $SOCKETS_TAP --ip $SOCKETS_IP/24 --port 5300
[ -n "$LWIPERF" ] && start lwiperf "$LWIPERF" --tap $LWIPERF_TAP --ip $LWIPERF_IP/24

# Each run appends "CASE<TAB>round<TAB>raw file" to $RES; the report parses the files.
cpu_ticks() { awk '{print $14 + $15}' "/proc/$1/stat" 2>/dev/null || echo 0; } # PID: user + system
client() { # CASE ROUND CMD...: one client run, its stdout kept; with SERVER=PID also that
  local c=$1 r=$2 t0=0; shift 2 # server's CPU seconds during the run (CASE.cpu)
  local out=$WORK/$c.$r.out
  [ -n "${SERVER:-}" ] && t0=$(cpu_ticks "$SERVER")
  timeout $((DUR + 30)) "${RUN_CLIENT[@]}" "$@" > "$out" 2> "$out.err" || { note "$c round $r failed: $(tail -1 "$out.err")"; FAILED=1; }
  printf '%s\t%s\t%s\n' "$c" "$r" "${out##*/}" >> "$RES"
  if [ -n "${SERVER:-}" ]; then
    awk -v a="$t0" -v b="$(cpu_ticks "$SERVER")" -v hz="$CLK_TCK" 'BEGIN {print (b - a) / hz}' > "$out.cpu"
    printf '%s\t%s\t%s\n' "$c.cpu" "$r" "${out##*/}.cpu" >> "$RES"
  fi
}
lwiperf_client() { # CASE ROUND CMD...: the figure is lwiperf's report line for this run
  local c=$1 r=$2 n0; shift 2
  n0=$(grep -c "report" "$WORK/lwiperf.err")
  client "$c" "$r" "$@"
  sleep 0.5
  grep "report" "$WORK/lwiperf.err" | tail -n +$((n0 + 1)) | tail -1 > "$WORK/$c.$r.lwiperf"
  printf '%s\t%s\t%s\n' "$c.lwiperf" "$r" "$c.$r.lwiperf" >> "$RES"
}
for ((r = 1; r <= ROUNDS; r++)); do
  echo "round $r/$ROUNDS"
  SERVER=${PIDS[0]} client tcp-up "$r" "$NC" tcp $LWIP_IP -p 5300 -t "$DUR" --json
  if [ -n "$LWIPERF" ]; then
    SERVER=${PIDS[2]} lwiperf_client iperf-lwiperf "$r" iperf -c $LWIPERF_IP -t "$DUR" -y C
    lwiperf_client netchar-lwiperf "$r" "$NC" tcp $LWIPERF_IP --proto lwiperf -t "$DUR" --json
  fi
  SERVER=${PIDS[1]} client tcp-up-sockets "$r" "$NC" tcp $SOCKETS_IP -p 5300 -t "$DUR" --json
  client tcp-down "$r" "$NC" tcp $LWIP_IP -p 5300 -t "$DUR" -R --json
  client udp-up "$r" "$NC" udp $LWIP_IP -p 5300 -t "$DUR" -b 0 -l 64 --json
  client udp-down "$r" "$NC" udp $LWIP_IP -p 5300 -t "$DUR" -b 0 -l 64 -R --json
  client rr "$r" "$NC" rr $LWIP_IP -p 5300 -t "$DUR" -l 1 --json
done
kill -0 "${PIDS[0]}" 2>/dev/null || { note "the responder died: $(tail -3 "$WORK/responder.err")"; FAILED=1; }
kill -0 "${PIDS[1]}" 2>/dev/null ||
  { note "the sockets-only responder died: $(tail -3 "$WORK/responder-sockets.err")"; FAILED=1; }

bench_py lwip_report "$RES" > "$REPORT"
{
  echo "# bench/lwip.sh DUR=$DUR ROUNDS=$ROUNDS PIN=$PIN INPUT=$INPUT NICE=$NICE; $(netchar_version); lwIP $(pkg-config --modversion lwip 2>/dev/null) (Debian liblwip)"
  echo "# $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2 | sed 's/^ //'), kernel $(uname -r), $(nproc) CPUs, load average $(cut -d' ' -f1-3 /proc/loadavg)"
  echo "# placement: $PLACEMENT"
  cat "$REPORT"
} > "$WORK/full.txt"
cat "$WORK/full.txt"
[ -s "$NOTES" ] && { echo; echo "notes:"; cat "$NOTES"; }
if [ "$BENCH_SAVE" = 1 ]; then
  mkdir -p "$BENCH_DIR/results"
  dest="$BENCH_DIR/results/$(date +%F)-$BENCH-$(uname -r)-$(nproc)cpu"
  [ -e "$dest.txt" ] && dest="$dest-$(date +%H%M%S)"
  cp "$WORK/full.txt" "$dest.txt" && echo "saved: $dest.txt"
fi
echo "raw outputs: $WORK"
exit "$FAILED"
