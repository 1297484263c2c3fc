#!/usr/bin/env bash
# bench/housekeeping.sh — what netchar's threads other than the data-plane workers cost during a
# request/response test: each thread's CPU and wake-ups over the middle 3 s of a 6 s
# `netchar rr -A 0,1` (client on CPU 0, server on CPU 1), read from the scheduler
# (/proc/PID/task/*/schedstat), and the housekeeping's share of the data thread's CPU per end.
#
#   bash bench/housekeeping.sh                     # target/release/netchar, built if missing
#   NC=old/netchar bash bench/housekeeping.sh      # another build
# Knobs: NC, PORT_BASE=15640. Needs taskset.
set -u -o pipefail
BENCH_DIR=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
ROOT=$(cd "$BENCH_DIR/.." && pwd)
NC=${NC:-$ROOT/target/release/netchar} P=${PORT_BASE:-15640}
command -v taskset >/dev/null || { echo "housekeeping.sh: taskset is required" >&2; exit 2; }
if [ ! -x "$NC" ]; then
  (cd "$ROOT" && cargo build --release -q -p netchar) || { echo "housekeeping.sh: cannot build netchar" >&2; exit 1; }
fi
WORK=$(mktemp -d -t netchar-housekeeping.XXXXXX)
taskset -c 1 "$NC" server -B 127.0.0.1 -p "$P" > "$WORK/server.log" 2>&1 & S=$!
trap 'kill "$S" 2>/dev/null; wait "$S" 2>/dev/null; rm -rf "$WORK"' EXIT
for ((i = 0; i < 100; i++)); do grep -q "limits:" "$WORK/server.log" 2>/dev/null && break; sleep 0.05; done
grep -q "limits:" "$WORK/server.log" || { echo "housekeeping.sh: the server did not start: $(head -c 300 "$WORK/server.log")" >&2; exit 1; }
taskset -c 0 "$NC" rr 127.0.0.1 -p "$P" -t 6 -A 0,1 -l 1 -i 0 --json > "$WORK/rr.json" 2>&1 & C=$!
sleep 1.5
# snap: "tid pid name runtime_ns runs" for every thread of both processes.
snap() {
  local p t
  for p in "$S" "$C"; do
    for t in /proc/"$p"/task/*; do
      echo "$(basename "$t") $p $(cat "$t/comm") $(cut -d' ' -f1,3 "$t/schedstat")"
    done 2>/dev/null
  done | sort
}
snap > "$WORK/a"; sleep 3; snap > "$WORK/b"
wait "$C" || { echo "housekeeping.sh: the rr test failed: $(head -c 300 "$WORK/rr.json")" >&2; exit 1; }
echo "# housekeeping: $("$NC" --version 2>/dev/null), rr -A 0,1 (client CPU 0, server CPU 1), 3 s in the middle of 6 s; Linux $(uname -r), $(nproc) CPUs"
join <(cut -d' ' -f1-5 "$WORK/a") <(cut -d' ' -f1,4,5 "$WORK/b") | awk -v s="$S" '
  { side = ($2 == s) ? "server" : "client"; ms = ($6 - $4) / 1e6; w = $7 - $5
    if ($3 ~ /^netchar-(receive|sender)/) data[side] += ms; else { hk[side] += ms; hw[side] += w }
    printf "%s %-16s %10.3f ms %7d wake-ups\n", side, $3, ms, w }
  END { for (k in data) printf "%s: housekeeping %.3f ms (%d wake-ups) = %.3f%% of the data thread'"'"'s %.1f ms\n", k, hk[k], hw[k], 100 * hk[k] / data[k], data[k] }'
