#!/usr/bin/env bash
# bench/xdp.sh — 64-byte datagrams per second on one core: the AF_XDP sender (--xdp) against
# netchar's kernel path (UDP GSO, and --no-gso), on a veth pair between two namespaces.
#
# Beside them, the ceiling: bench/ref/xdp_live.c (built with gcc) puts the same frame onto the
# veth over and over through the kernel's XDP live-frames mode, a redirect with no socket and no
# socket buffer per frame, the most one core can offer this veth.
#
# All send into a sink (--proto sink) whose far veth end runs `netchar xdp-count`: an XDP
# program that counts and drops the datagrams in the driver, so the receiving side costs as
# little as it can and the count is the receiving interface's own. The sending process is held
# to one CPU (taskset), the counter to the other. Each run's figures:
#   sent/s     the sender's datagrams over its own seconds (.summary.up.sender)
#   counted/s  the datagrams xdp-count counted, over the same seconds
# The figure is counted/s, what reached the receiving interface's driver. A datagram the sender
# counts but the sink does not was dropped between them (the veth's ring to its XDP peer is
# full: the interface's tx_dropped); each run's difference is listed, not hidden. Rounds
# alternate the cases, starting with a different one each round; the report gives each case's
# median and range over the rounds, and the median of each round's own ratio of the AF_XDP
# rate to each kernel path's, with its range.
#
# Exact commands (D=DUR, in namespace A, pinned to CPU $SEND_CPU):
#   netchar udp 10.203.0.2 -p 9000 --proto sink -l 64 -b 0 -t D -i 0 --json                 (kernel, GSO)
#   netchar udp 10.203.0.2 -p 9000 --proto sink -l 64 -b 0 -t D -i 0 --json --no-gso        (kernel, no GSO)
#   netchar udp 10.203.0.2 -p 9000 --proto sink -l 64 -b 0 -t D -i 0 --json --xdp xdpb0     (AF_XDP)
#   netchar udp ... --xdp xdpb0 --xdp-live --no-udp-checksum                                (live frames)
#   xdp_live xdpb0 MAC_B MAC_A 10.203.0.1 10.203.0.2 D                                      (ceiling)
# and in namespace B, pinned to CPU $COUNT_CPU, around each run:
#   netchar xdp-count xdpb1 -p 9000 --json      (ended by SIGINT after the sender exits)
#
# Knobs: ROUNDS=5, DUR=3, SEND_CPU=0, COUNT_CPU=1, NO_BUILD=0 (1: use target/release/netchar
# as it is), NETCHAR=path (a binary to measure instead). Needs root, ip, taskset, python3.
# Exit: 0 when every run completed, 1 when one failed, 2 for bad settings.
set -u
ROUNDS=${ROUNDS:-5}
DUR=${DUR:-3}
SEND_CPU=${SEND_CPU:-0}
COUNT_CPU=${COUNT_CPU:-1}
NO_BUILD=${NO_BUILD:-0}
for v in ROUNDS DUR SEND_CPU COUNT_CPU; do
  [[ ${!v} =~ ^[0-9]+$ ]] || { echo "xdp.sh: $v must be a non-negative integer (got '${!v}')" >&2; exit 2; }
done
[ "$(id -u)" = 0 ] || { echo "xdp.sh: needs root (namespaces, AF_XDP, XDP)" >&2; exit 2; }
for t in ip taskset python3; do
  command -v $t >/dev/null || { echo "xdp.sh: needs $t" >&2; exit 2; }
done
ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
if [ -z "${NETCHAR:-}" ]; then
  if [ "$NO_BUILD" != 1 ]; then
    (cd "$ROOT" && cargo build --release -p netchar --quiet) || { echo "xdp.sh: build failed" >&2; exit 1; }
  fi
  NETCHAR=$ROOT/target/release/netchar
fi
BIN=$(mktemp -t netchar-xdp-bench.XXXXXX)
cp "$NETCHAR" "$BIN" && chmod 755 "$BIN"
WORK=$(mktemp -d -t netchar-xdp-bench.XXXXXX)
NSA=ncxdpbench-a-$$ NSB=ncxdpbench-b-$$
cleanup() {
  ip netns del "$NSA" 2>/dev/null
  ip netns del "$NSB" 2>/dev/null
  rm -f "$BIN"
}
trap cleanup EXIT
ip netns add "$NSA" && ip netns add "$NSB" || exit 1
ip -n "$NSA" link add xdpb0 type veth peer name xdpb1 netns "$NSB" || exit 1
ip -n "$NSA" addr add 10.203.0.1/24 dev xdpb0
ip -n "$NSB" addr add 10.203.0.2/24 dev xdpb1
ip -n "$NSA" link set xdpb0 up
ip -n "$NSB" link set xdpb1 up
MAC_B=$(ip -n "$NSB" -br link show xdpb1 | awk '{print $3}')
ip -n "$NSA" neigh replace 10.203.0.2 lladdr "$MAC_B" dev xdpb0 nud permanent

CASES=(gso nogso xdp nclive)
declare -A FLAGS=([gso]="" [nogso]="--no-gso" [xdp]="--xdp xdpb0" [nclive]="--xdp xdpb0 --xdp-live --no-udp-checksum")
# The ceiling: the kernel's XDP live-frames mode redirecting one frame to the veth over and over
# (bench/ref/xdp_live.c), no socket buffer per frame. Left out, with a line, without gcc.
if command -v gcc >/dev/null && gcc -O2 -o "$WORK/xdp_live" "$ROOT/bench/ref/xdp_live.c" 2> "$WORK/xdp_live.gcc"; then
  CASES+=(live)
  MAC_A=$(ip -n "$NSA" -br link show xdpb0 | awk '{print $3}')
else
  echo "xdp.sh: no gcc (or bench/ref/xdp_live.c did not build): the live-frames ceiling is left out" >&2
fi
FAILED=0
: > "$WORK/runs.tsv"

# run_case NAME ROUND: one sender run into the counting sink; appends a row to runs.tsv.
run_case() {
  local name=$1 round=$2 out=$WORK/$1-$2
  ip netns exec "$NSB" taskset -c "$COUNT_CPU" "$BIN" xdp-count xdpb1 -p 9000 --json > "$out.count" 2> "$out.count.err" &
  local counter=$!
  for _ in $(seq 100); do grep -q "counting and dropping" "$out.count.err" 2>/dev/null && break; sleep 0.05; done
  if [ "$name" = live ]; then
    ip netns exec "$NSA" taskset -c "$SEND_CPU" "$WORK/xdp_live" xdpb0 "$MAC_B" "$MAC_A" 10.203.0.1 10.203.0.2 \
      "$DUR" > "$out.json" 2> "$out.err"
  else
    # shellcheck disable=SC2086
    ip netns exec "$NSA" taskset -c "$SEND_CPU" "$BIN" udp 10.203.0.2 -p 9000 --proto sink -l 64 -b 0 \
      -t "$DUR" -i 0 --json ${FLAGS[$name]} > "$out.json" 2> "$out.err"
  fi
  local rc=$?
  kill -INT "$counter"; wait "$counter"
  if [ $rc != 0 ]; then echo "xdp.sh: $name round $round failed: $(tail -1 "$out.err")" >&2; FAILED=1; return; fi
  python3 - "$name" "$round" "$out.json" "$out.count" >> "$WORK/runs.tsv" <<'EOF' || FAILED=1
import json, sys
name, rnd, result, count = sys.argv[1:]
r = json.load(open(result))
s = r if name == "live" else r["summary"]["up"]["sender"]
c = json.load(open(count))
sent, counted, secs = s["packets"], c["packets"], s["seconds"]
if counted > sent:
    print(f"xdp.sh: {name} round {rnd}: xdp-count counted {counted}, more than the {sent} sent", file=sys.stderr)
    sys.exit(1)
print(f"{name}\t{rnd}\t{sent / secs:.0f}\t{counted / secs:.0f}\t{sent - counted}")
EOF
}

for ((r = 0; r < ROUNDS; r++)); do
  for ((i = 0; i < ${#CASES[@]}; i++)); do
    run_case "${CASES[$(((i + r) % ${#CASES[@]}))]}" "$r"
  done
done

python3 - "$WORK/runs.tsv" "$ROUNDS" "$DUR" <<'EOF'
import statistics, sys
rows = [l.split("\t") for l in open(sys.argv[1]).read().splitlines()]
rate, sent_rate, dropped = {}, {}, {}
for name, rnd, sent, counted, lost in rows:
    rate.setdefault(name, {})[int(rnd)] = float(counted)
    sent_rate.setdefault(name, []).append(float(sent))
    dropped.setdefault(name, []).append(int(lost))
label = {"gso": "kernel path, UDP GSO", "nogso": "kernel path, --no-gso", "xdp": "AF_XDP (--xdp, copy mode)",
         "nclive": "netchar --xdp-live (live frames, stamped)", "live": "ceiling: XDP live frames (bench/ref/xdp_live.c)"}
print(f"64-byte datagrams/s sent on one core into an XDP sink on a veth pair, {sys.argv[2]} rounds x {sys.argv[3]} s")
print("(counted by the sink's XDP program; 'sent' is the sender's own count)\n")
print("| sender | counted M/s, median | range | sent M/s, median | sent but not counted, per run |")
print("|---|---|---|---|---|")
for name in ("gso", "nogso", "xdp", "nclive", "live"):
    v = list(rate.get(name, {}).values())
    if v:
        print(f"| {label[name]} | {statistics.median(v) / 1e6:.3f} | {min(v) / 1e6:.3f}–{max(v) / 1e6:.3f} "
              f"| {statistics.median(sent_rate[name]) / 1e6:.3f} | {', '.join(map(str, dropped[name]))} |")
print()
for top, base in (("xdp", "gso"), ("xdp", "nogso"), ("nclive", "gso"), ("nclive", "nogso"), ("live", "gso"),
                  ("live", "nclive")):
    ratios = [rate[top][r] / rate[base][r] for r in rate.get(top, {}) if r in rate.get(base, {})]
    if ratios:
        print(f"{label[top]} / {label[base]}: {statistics.median(ratios):.2f} "
              f"({min(ratios):.2f}–{max(ratios):.2f}) over {len(ratios)} rounds")
EOF
exit $FAILED
