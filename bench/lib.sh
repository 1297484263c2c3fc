# bench/lib.sh — shell helpers shared by bench/tcp.sh, bench/udp.sh and bench/rr.sh.
#
# Sourced, never run.  Each script starts with
#   BENCH=tcp                                   # its name: messages, /tmp dir, results file
#   BENCH_DIR=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
#   . "$BENCH_DIR/lib.sh" || exit 2
# Sourcing only defines functions, the server tables and BENCH_PY_PATH; nothing runs until a
# script calls it.
#
# What stays in the scripts is what differs between them: the knobs and their defaults, the
# tools and their command lines, which servers exist and on which ports, and run_one (what one
# run measures and how "other" CPU is computed).  The parsers of every tool's output and the
# reports are Python, in bench/netchar_bench/ (tested by bench/tests/), run through bench_py.
#
# Globals the helpers read, set by the script: BENCH, BENCH_DIR, DUR, IDLE_WAIT, BUSY_RETRY,
# NO_BUILD, BENCH_SAVE, CLIENT_TO (client watchdog, s), SERVER_TO (server watchdog, s),
# REPORT (the report file, for finish).  Globals they set: see each function.

# ------------------------------------------------------------------ basics
# have CMD: true if CMD is on PATH (optional peers are skipped, not required).
have() { command -v "$1" >/dev/null 2>&1; }

# run_pid FILE CMD...: runs CMD (exec'd, so the pid is CMD's) with its pid written to FILE
# first, for a script that reads the process's counters or stops it by pid.
run_pid() { local f=$1; shift; sh -c 'echo $$ > "$0"; exec "$@"' "$f" "$@"; }

# bench_py MODULE ARG...: python3 -m netchar_bench.MODULE ARG... with bench/ on PYTHONPATH (the
# parsers and report generators, bench/netchar_bench/*.py; each module's docstring says its
# arguments and output).
BENCH_PY_PATH=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
bench_py() { PYTHONPATH="$BENCH_PY_PATH${PYTHONPATH:+:$PYTHONPATH}" python3 -m "netchar_bench.$1" "${@:2}"; }

# note TEXT...: add a line to the report's notes (failures, crashes, re-measurements).
note() { echo "$*" >> "$NOTES"; }

# need_uint KNOB... / need_posint KNOB...: exit 2 ("bad settings") unless each named knob is a
# non-negative / positive integer, so a typo fails before anything is built or started.
need_uint() {
  local v
  for v; do
    [[ ${!v} =~ ^[0-9]+$ ]] || { echo "$BENCH.sh: $v must be a non-negative integer (got '${!v}')" >&2; exit 2; }
  done
}
need_posint() {
  local v
  for v; do
    [[ ${!v} =~ ^[1-9][0-9]*$ ]] || { echo "$BENCH.sh: $v must be a positive integer (got '${!v}')" >&2; exit 2; }
  done
}

# bench_init: create the work directory that keeps every raw output, and the run state.
# Sets ROOT (the repository), WORK, RES (results.tsv: one row per kept run, read by the
# report), NOTES (free-text observations for the report), CLK_TCK and FAILED (set to 1 by any
# crashed/failed run -> exit status 1).
bench_init() {
  ROOT=$(cd "$BENCH_DIR/.." && pwd)
  WORK=$(mktemp -d -t "netchar-bench-$BENCH.XXXXXX")
  RES=$WORK/results.tsv
  NOTES=$WORK/notes.txt
  : > "$RES"; : > "$NOTES"
  CLK_TCK=$(getconf CLK_TCK)
  FAILED=0
}

# ------------------------------------------------------------------ tools
# find_peers: where each peer tool is, the newest the user points at first, Debian's package
# otherwise.  Nothing here downloads or builds a peer: a newer release is built by hand outside
# the repository and named by path (bench/README.md, "Which peer versions run"):
#   IPERF3=PATH                    an iperf3 binary (e.g. a build of esnet/iperf's trunk)
#   IPERF2=PATH                    an iperf 2.x binary
#   NETPERF=PATH NETSERVER=PATH    netperf's two programs (or NETPERF_BIN=DIR holding both)
#   SOCKPERF=PATH                  a sockperf binary
# Without them, the program on PATH (Debian's packages iperf3, iperf, sockperf; Debian 12 has
# no netperf package, so netperf runs only when named).  Sets IPERF3, IPERF2, NETPERF, NETSERVER
# and SOCKPERF to the command to run ("" when absent) and PEER_VER[TOOL] to what a report
# prints: "iperf3 3.21+ (IPERF3)", "iperf 2.1.8 (Debian 2.1.8+dfsg-1)", never a path.
declare -A PEER_VER
peer_origin() { # ENVNAME CMD: where CMD came from, for the report
  local pkg
  if [ -n "${!1:-}" ]; then echo "$1"; return; fi
  pkg=$(dpkg -S "$(readlink -f "$2")" 2>/dev/null | head -1 | cut -d: -f1)
  if [ -n "$pkg" ]; then echo "Debian $(dpkg-query -W -f='${Version}' "$pkg" 2>/dev/null)"
  else echo "PATH"; fi
}
find_peers() {
  local v
  IPERF3=${IPERF3:-} IPERF2=${IPERF2:-} NETPERF=${NETPERF:-} NETSERVER=${NETSERVER:-} SOCKPERF=${SOCKPERF:-}
  local e3=$IPERF3 e2=$IPERF2 enp=$NETPERF esp=$SOCKPERF
  if [ -z "$NETPERF" ] && [ -n "${NETPERF_BIN:-}" ]; then
    NETPERF=$NETPERF_BIN/netperf; NETSERVER=$NETPERF_BIN/netserver; enp=$NETPERF
  fi
  [ -n "$IPERF3" ] || IPERF3=$(command -v iperf3 || true)
  [ -n "$IPERF2" ] || IPERF2=$(command -v iperf || true)
  [ -n "$NETPERF" ] || NETPERF=$(command -v netperf || true)
  [ -n "$NETSERVER" ] || NETSERVER=$(command -v netserver || true)
  [ -n "$SOCKPERF" ] || SOCKPERF=$(command -v sockperf || true)
  if [ -n "$IPERF3" ] && [ -x "$IPERF3" ]; then
    v=$("$IPERF3" --version 2>&1 | awk 'NR==1 {print $2}')
    PEER_VER[iperf3]="iperf3 $v ($(IPERF3=$e3 peer_origin IPERF3 "$IPERF3"))"
  else
    [ -n "$e3" ] && echo "IPERF3=$e3 is not an executable: iperf3 skipped"
    IPERF3=""
  fi
  if [ -n "$IPERF2" ] && [ -x "$IPERF2" ] && [[ $("$IPERF2" --version 2>&1 || true) == *"iperf version 2"* ]]; then
    v=$("$IPERF2" --version 2>&1 | awk '{print $3; exit}')
    PEER_VER[iperf2]="iperf $v ($(IPERF2=$e2 peer_origin IPERF2 "$IPERF2"))"
  else
    IPERF2=""
  fi
  if [ -n "$NETPERF" ] && [ -x "$NETPERF" ] && [ -n "$NETSERVER" ] && [ -x "$NETSERVER" ]; then
    v=$("$NETPERF" -V 2>&1 | awk '/[Vv]ersion/ {print $NF; exit}')
    PEER_VER[netperf]="netperf $v ($(NETPERF=$enp peer_origin NETPERF "$NETPERF"))"
  else
    [ -n "$enp" ] && echo "NETPERF=$enp (with NETSERVER) is not a netperf and netserver pair: netperf skipped"
    NETPERF="" NETSERVER=""
  fi
  if [ -n "$SOCKPERF" ] && [ -x "$SOCKPERF" ]; then
    v=$("$SOCKPERF" --version 2>&1 | sed 's/\x1b\[[0-9;]*m//g' | awk '/version/ {print $3; exit}')
    PEER_VER[sockperf]="sockperf $v ($(SOCKPERF=$esp peer_origin SOCKPERF "$SOCKPERF"))"
  else
    SOCKPERF=""
  fi
}

# find_iperfs: append iperf3 and iperf2 to TOOLS when found (find_peers: IPERF3=, IPERF2=, else
# Debian's packages), else say how to get them.  Sets I2_VER (iperf2's version text).
find_iperfs() {
  find_peers
  if [ -n "$IPERF3" ]; then TOOLS+=(iperf3)
  else echo "iperf3 not found: skipping it (install with: sudo apt-get install iperf3, or set IPERF3=PATH)"; fi
  I2_VER=$([ -n "$IPERF2" ] && "$IPERF2" --version 2>&1 || true)
  if [ -n "$IPERF2" ]; then TOOLS+=(iperf2)
  else echo "iperf (2.x) not found: skipping it (install with: sudo apt-get install iperf, or set IPERF2=PATH)"; fi
}

# iperf_version iperf3|iperf2: "iperf3 X (ORIGIN)" / "iperf X (ORIGIN)" for the report header.
iperf_version() { echo "${PEER_VER[$1]}"; }

# load_average: the first three fields of /proc/loadavg ("0.42 0.61 0.70").
load_average() { cut -d' ' -f1-3 /proc/loadavg; }

# wait_quiet: before a measurement on a shared machine, wait until the 1-minute load average has
# stayed below QUIET_LOAD (default 1.0) for QUIET_FOR seconds in a row (default 120), polling
# every 5 s, for at most QUIET_MAX seconds (default 1800; 0: do not wait).  Sets QUIET to
# "quiet" or to "busy machine" (it gave up), and QUIET_LOADAVG to the load average when the
# measurement starts, both for the report's header.
wait_quiet() {
  local since="" start now l
  start=$(date +%s)
  QUIET="busy machine"
  while :; do
    now=$(date +%s); l=$(cut -d' ' -f1 /proc/loadavg)
    if awk -v l="$l" -v q="${QUIET_LOAD:-1.0}" 'BEGIN {exit !(l < q)}'; then
      [ -n "$since" ] || since=$now
      if [ $((now - since)) -ge "${QUIET_FOR:-120}" ]; then QUIET=quiet; break; fi
    else
      since=""
    fi
    [ $((now - start)) -ge "${QUIET_MAX:-1800}" ] && break
    [ -t 2 ] && printf '\r  waiting for a quiet machine (load %s, %ss so far) ...   ' "$l" $((now - start)) >&2
    sleep 5
  done
  [ -t 2 ] && printf '\r%70s\r' '' >&2
  QUIET_LOADAVG=$(load_average)
}

# build_netchar: build first so the benchmark measures the current tree, then copy the binary
# away (NC=$WORK/netchar): a build may replace target/release/netchar during the run.
# Exits 1 when the build fails or there is no binary.  Sets NC, TARGET_DIR and NC_REV (the
# commit the binary was built from, for the report header).  With NETCHAR=PATH it builds
# nothing and copies that binary instead (exit 2 if there is none).
build_netchar() {
  if [ -n "${NETCHAR:-}" ]; then
    NC=$WORK/netchar
    cp "$NETCHAR" "$NC" || { echo "$BENCH.sh: no netchar binary at $NETCHAR" >&2; exit 2; }
    NC_REV="NETCHAR binary${NETCHAR_REV:+, $NETCHAR_REV}"
    return
  fi
  if [ "$NO_BUILD" != 1 ]; then
    echo "building netchar: cargo build --release -q"
    if ! (cd "$ROOT" && timeout 1800 cargo build --release -q); then
      echo "$BENCH.sh: cargo build failed; nothing measured" >&2; exit 1
    fi
  fi
  # The target dir may be redirected (CARGO_TARGET_DIR, .cargo/config); ask cargo where it is.
  TARGET_DIR=$(cd "$ROOT" && timeout 60 cargo metadata --format-version 1 --no-deps 2>/dev/null |
    python3 -c 'import json,sys; print(json.load(sys.stdin)["target_directory"])' 2>/dev/null) || TARGET_DIR=$ROOT/target
  NC=$WORK/netchar
  cp "$TARGET_DIR/release/netchar" "$NC" || { echo "$BENCH.sh: no netchar binary in $TARGET_DIR/release" >&2; exit 1; }
  NC_REV=$(git -C "$ROOT" rev-parse --short HEAD 2>/dev/null || echo "?")
  [ -n "$(git -C "$ROOT" status --porcelain --untracked-files=no 2>/dev/null)" ] && NC_REV="$NC_REV+dirty"
  # Without a build the binary may predate the tree: label it by its build time instead.
  if [ "$NO_BUILD" = 1 ]; then
    NC_REV="prebuilt $(date -r "$TARGET_DIR/release/netchar" '+%F %T'), tree $NC_REV"
  fi
}

# netchar_version: "netchar X (REV)", the start of the report header's version line.
netchar_version() { echo "netchar $("$NC" --version 2>/dev/null | awk '{print $2}') ($NC_REV)"; }

# ------------------------------------------------------------------ ports and servers
# port_in_use tcp|udp PORT: something listens on / is bound to PORT (any address: a wildcard
# socket would also take our 127.0.0.1 traffic).  Needs ss.
# (In SERVER_NETNS, when a script runs its servers in a network namespace of their own.)
port_in_use() {
  local ns=(); [ -n "${SERVER_NETNS:-}" ] && ns=(ip netns exec "$SERVER_NETNS")
  if [ "$1" = udp ]; then [ -n "$("${ns[@]}" ss -Hlun "sport = :$2" 2>/dev/null)" ]
  else [ -n "$("${ns[@]}" ss -Hltn "sport = :$2" 2>/dev/null)" ]; fi
}

# Servers by name (a tool, or rr.sh's tool.placement names): TPID = the `timeout` watchdog
# process, SPID = the server itself (its /proc/PID/stat is read for CPU accounting).
declare -A TPID SPID

# server_who NAME: how messages name a server.  rr.sh redefines it ("server NAME").
server_who() { echo "$1 server"; }

# start_server NAME [OUT ERR WATCHDOG]: start NAME's server under `timeout` (a watchdog in case
# the script is SIGKILLed; default SERVER_TO s), logging to OUT/ERR (appended; default
# $WORK/srv.NAME.out/.err), and wait up to 5 s for it to be ready.  The script defines
# server_cmd NAME, which sets CMD (the command line) and READY, how to tell it is ready:
#   READY=(log)       netchar: its stderr says "listening on" (new lines only: a restart appends)
#   READY=(tcp PORT)  a peer: something listens on PORT (checked with ss; without ss, wait 1 s)
#   READY=(udp PORT)
# Sets TPID/SPID[NAME], SRV_OUT and SRV_ERR; false (with a message) if the server is not running.
start_server() {
  local n=$1 i n0
  SRV_OUT=${2:-$WORK/srv.$n.out}; SRV_ERR=${3:-$WORK/srv.$n.err}
  server_cmd "$n"
  n0=$(cat "$SRV_ERR" 2>/dev/null | wc -l)
  # The log exists before the server does: the first readiness check may run before the
  # background redirection below has created it.
  : >> "$SRV_ERR"
  timeout -k 2 "${4:-$SERVER_TO}" "${CMD[@]}" >> "$SRV_OUT" 2>> "$SRV_ERR" &
  TPID[$n]=$!
  for ((i = 0; i < 100; i++)); do          # up to 5 s to come up
    if [ "${READY[0]}" = log ]; then tail -n +$((n0 + 1)) "$SRV_ERR" | grep -q "listening on" && break
    elif have ss; then port_in_use "${READY[@]}" && break
    elif [ "$i" -ge 20 ]; then break; fi
    kill -0 "${TPID[$n]}" 2>/dev/null || break
    sleep 0.05
  done
  # The child of `timeout` is the server itself (`taskset` execs it, in rr.sh).
  SPID[$n]=$(pgrep -P "${TPID[$n]}" | head -1)
  if [ -z "${SPID[$n]}" ] || ! kill -0 "${SPID[$n]}" 2>/dev/null; then
    echo "$BENCH.sh: $(server_who "$n") did not start; see $SRV_ERR" >&2
    return 1
  fi
}

# alive NAME: NAME's server is running.
alive() { [ -n "${SPID[$1]:-}" ] && kill -0 "${SPID[$1]}" 2>/dev/null; }

# restart_if_dead NAME WHEN: a server that died before a run is a crash (noted, FAILED=1);
# restart it so the remaining runs still measure something.  WHEN says which run ("round 2
# up1").  False if it cannot be restarted.
restart_if_dead() {
  alive "$1" && return 0
  note "CRASH: $(server_who "$1") was not running before $2; restarted (see $WORK/srv.$1.err)"
  FAILED=1
  start_server "$1"
}

# note_dead_servers NAME...: after the last round, a server that is gone died during the run.
note_dead_servers() {
  local n
  for n; do
    alive "$n" || { note "CRASH: $(server_who "$n") died during the run (see $WORK/srv.$n.err)"; FAILED=1; }
  done
}

# cleanup: stop every server still running (SIGTERM, then SIGKILL after 0.3 s) and delete the
# copied binary (10+ MB; the logs stay for inspection).  Installed by stop_servers_on_exit.
cleanup() {
  local n
  for n in "${!TPID[@]}"; do kill "${SPID[$n]:-}" "${TPID[$n]}" 2>/dev/null; done
  sleep 0.3
  for n in "${!TPID[@]}"; do
    kill -0 "${TPID[$n]}" 2>/dev/null && kill -KILL "${SPID[$n]:-}" "${TPID[$n]}" 2>/dev/null
    wait "${TPID[$n]}" 2>/dev/null
  done
  rm -f "$NC"
}

# stop_servers_on_exit: run cleanup however the script ends; Ctrl-C / SIGTERM exit with 130.
stop_servers_on_exit() {
  trap 'cleanup; [ -n "${SERVER_NETNS:-}" ] && ip netns del "$SERVER_NETNS" 2>/dev/null' EXIT
  trap 'exit 130' INT TERM
}

# ------------------------------------------------------------------ accounting
# (rr_pair.sh, threads_pair.sh)
# cpu_ns PID...: nanoseconds on a CPU of every thread of the processes (0 for one that is gone).
cpu_ns() {
  local total=0 p f n
  for p; do
    for f in /proc/"$p"/task/*/schedstat; do
      read -r n _ < "$f" 2>/dev/null && total=$((total + n))
    done
  done
  echo "$total"
}
# pair_window DUR "PIDS"...: for tests of DUR seconds started together, waits out their middle
# (1 s in to 1 s before the end) and prints "ns... wall_ns": the CPU time of each group of
# processes (every thread) over that window, and the window's length.
pair_window() {
  local dur=$1
  shift
  sleep 1
  pair_window_at "$((dur - 2))" "$@"
}
# pair_window_at SECONDS "PIDS"...: the same over the next SECONDS, from now.
pair_window_at() {
  local secs=$1 g i at bt
  local -a a=() b=() out=()
  shift
  # (each group word-split into its pids)
  # shellcheck disable=SC2086
  for g; do a+=("$(cpu_ns $g)"); done
  at=$(date +%s%N)
  sleep "$secs"
  # shellcheck disable=SC2086
  for g; do b+=("$(cpu_ns $g)"); done
  bt=$(date +%s%N)
  for i in "${!a[@]}"; do out+=("$((b[i] - a[i]))"); done
  echo "${out[*]} $((bt - at))"
}
# need_pair_dur: exit 2 ("bad settings") unless DUR leaves pair_window a window.
need_pair_dur() {
  [ "$DUR" -ge 4 ] || { echo "$BENCH.sh: DUR is at least 4 (the window leaves out the first and last second)" >&2; exit 2; }
}
# pair_stop PID...: ends the processes (SIGTERM, SIGKILL after 3 s) and returns once they are
# gone, so a paired script run straight after another can bind the same ports.  The paired
# scripts' EXIT trap.
pair_stop() {
  local p i alive
  for p; do kill "$p" 2>/dev/null; done
  for ((i = 0; i < 60; i++)); do
    alive=
    for p; do kill -0 "$p" 2>/dev/null && alive=1; done
    [ -z "$alive" ] && return 0
    sleep 0.05
  done
  for p; do kill -KILL "$p" 2>/dev/null; done
}
# pair_listening SCRIPT PORT LOG [PORT LOG]...: waits up to 5 s for each TCP PORT to have a
# listener; if one has none, prints its server's LOG and exits 1 (every round would fail).
pair_listening() {
  local script=$1 i
  shift
  while [ $# -ge 2 ]; do
    for ((i = 0; i < 100; i++)); do port_in_use tcp "$1" && break; sleep 0.05; done
    port_in_use tcp "$1" || { echo "$script: no server listening on port $1: $(head -c 300 "$2")" >&2; exit 1; }
    shift 2
  done
}
# pid_of FILE: waits for a pid file and prints it.
pid_of() { local i; for ((i = 0; i < 200; i++)); do [ -s "$1" ] && { cat "$1"; return; }; sleep 0.01; done; }

# proc_cpu PID [children]: user+system CPU seconds of a whole process (all threads, finished
# ones included), or NaN if it is gone.  With "children", also of its reaped children (rr.sh:
# netserver forks a child per test).  Fields are counted after the ")" that closes comm, so odd
# names cannot shift them.
proc_cpu() {
  local s
  s=$(cat "/proc/$1/stat" 2>/dev/null) || { echo NaN; return; }
  s=${s##*) }
  if [ "${2:-}" = children ]; then
    awk -v hz="$CLK_TCK" '{printf "%.3f\n", ($12 + $13 + $14 + $15) / hz}' <<< "$s"
  else
    awk -v hz="$CLK_TCK" '{printf "%.3f\n", ($12 + $13) / hz}' <<< "$s"
  fi
}

# timed OUT ERR CMD...: run a client under a CLIENT_TO watchdog; sets RC and CLIENT_SECS
# (user+sys seconds of CMD and its children, from bash's `time`, i.e. getrusage of the
# waited-for processes).
timed() {
  local out=$1 err=$2; shift 2
  local TIMEFORMAT='%3U %3S'
  { time timeout -k 2 "$CLIENT_TO" "$@" > "$out" 2> "$err"; } 2> "$WORK/time.txt"
  RC=$?
  CLIENT_SECS=$(awk '{printf "%.3f", $1 + $2}' "$WORK/time.txt")
}

# cpu_ticks [ksoftirqd]: "busy total" clock ticks of all CPUs so far, from /proc/stat (busy =
# not idle/iowait); the difference of two readings, minus what client and server were charged,
# is the "other" work on the machine.  With "ksoftirqd" (udp.sh), a third field: the utime +
# stime ticks of the ksoftirqd threads listed in KSOFT (loopback receive work lands there too).
cpu_ticks() {
  local k="" p s
  if [ "${1:-}" = ksoftirqd ]; then
    k=0
    for p in $KSOFT; do
      s=$(cat "/proc/$p/stat" 2>/dev/null) || continue
      s=${s##*) }; set -- $s; k=$((k + ${12} + ${13}))
    done
  fi
  awk -v k="$k" '$1 == "cpu" {t = 0; for (i = 2; i <= 9; i++) t += $i
    if (k == "") print t - $5 - $6, t; else print t - $5 - $6, t, k; exit}' /proc/stat
}

# busy_pct SECONDS: share of all CPUs busy (not idle/iowait) over an interval, from /proc/stat.
busy_pct() {
  local a b
  a=$(head -1 /proc/stat); sleep "$1"; b=$(head -1 /proc/stat)
  awk -v a="$a" -v b="$b" 'BEGIN {split(a, x); split(b, y); t = 0
    for (i = 2; i <= 9; i++) t += y[i] - x[i]          # user..steal
    idle = (y[5] - x[5]) + (y[6] - x[6])
    printf "%.0f\n", (t > 0) ? 100 * (t - idle) / t : 0}'
}

# wait_idle: wait up to IDLE_WAIT seconds for the machine to drop below 15% busy; sets BUSY.
# Other work on the box (builds, tests) skews loopback figures badly on few cores.
wait_idle() {
  local waited=0
  BUSY=$(busy_pct 0.5)
  while [ "${BUSY:-0}" -gt 15 ] && [ "$waited" -lt "$IDLE_WAIT" ]; do
    [ -t 2 ] && printf '\r  waiting for the machine to go idle (%s%% busy) ...      ' "$BUSY" >&2
    sleep 1; waited=$((waited + 2)); BUSY=$(busy_pct 1)
  done
}

# ------------------------------------------------------------------ runs and rounds
# start_round ROUND EFFECT: before each round, wait for quiet (if IDLE_WAIT allows) and note
# when the machine is still busy.  EFFECT completes "results may be ..." in the note.
start_round() {
  wait_idle
  if [ "${BUSY:-0}" -gt 15 ]; then
    note "WARNING: machine ${BUSY}% busy just before round $1 (other processes); results may be $2"
  fi
}

# rotate ROUND ITEM...: sets ORDER to the items, starting with a different one each round, so
# that no tool is always measured right after a pause.
rotate() {
  local r=$1; shift
  local k=$(( (r - 1) % $# )) items=("$@")
  ORDER=("${items[@]:k}" "${items[@]:0:k}")
}

# note_client_failure WHAT ERRFILE: after `timed`, a client that exited non-zero or was killed
# by its watchdog is a failure (noted with the start of its stderr; FAILED=1).
note_client_failure() {
  [ "$RC" -ne 0 ] || return 0
  local why="exit $RC"
  { [ "$RC" -eq 124 ] || [ "$RC" -eq 137 ]; } && why="timed out after ${CLIENT_TO}s"
  note "FAIL: $1: $why: $(head -c 300 "$2" | tr '\n\t' '  ')"
  FAILED=1
}

# note_unusable WHAT ERRFILE: a client that exited 0 but whose output the parser could not use
# is a failure too (noted with the end of its stderr, where the parser's complaint is).
note_unusable() {
  note "FAIL: $1: unusable output: $(tail -c 300 "$2" | tr '\n\t' '  ')"
  FAILED=1
}

# row_ok ROW: the results.tsv row is a usable run (its status field is "ok").
row_ok() { [[ $1 == *$'\tok\t'* ]]; }

# measure KEEP RUN...: run RUN (the script's run_one and its arguments; it sets ROW and OTHER,
# the % of the machine that other work took during the run) and append the row to keep to RES.
# A run that shared the machine with other work measured that work too: when OTHER exceeds
# BUSY_RETRY (unless 0) it is measured once more, after waiting for quiet if IDLE_WAIT allows,
# with ATTEMPT=.retry (run_one puts it in its file names).  KEEP says which row is kept:
#   retry       always the retry (tcp.sh)
#   quieter     the first attempt if it was ok and had less other work, else the retry (rr.sh)
#   quieter-ok  as quieter, and also the ok first attempt when the retry failed (udp.sh)
# Sets RETRIED=0|1; after a retry also FIRST_OTHER, OTHER (the retry's) and KEPT=first|retry,
# from which the script writes its note.
measure() {
  local keep=$1 first_row; shift
  RETRIED=0; FIRST_OTHER=""; KEPT=""; ATTEMPT=""
  "$@"
  if [ "$BUSY_RETRY" -gt 0 ] && awk -v o="$OTHER" -v l="$BUSY_RETRY" 'BEGIN {exit !(o > l)}'; then
    RETRIED=1; FIRST_OTHER=$OTHER; first_row=$ROW
    wait_idle
    ATTEMPT=.retry
    "$@"
    KEPT=retry
    if [ "$keep" != retry ] && row_ok "$first_row" &&
       { awk -v a="$FIRST_OTHER" -v b="$OTHER" 'BEGIN {exit !(a < b)}' ||
         { [ "$keep" = quieter-ok ] && ! row_ok "$ROW"; }; }; then
      ROW=$first_row; KEPT=first
    fi
  fi
  echo "$ROW" >> "$RES"
}

# ------------------------------------------------------------------ end
# finish: print the report ($REPORT), keep a copy in bench/results/DATE-BENCH-MACHINE.txt when
# BENCH_SAVE=1 (MACHINE: kernel release and CPU count, with the CPU model on the copy's first
# line; a second run on the same day adds the time), say where the raw outputs are, and exit
# with FAILED.
finish() {
  local dest
  cat "$REPORT"
  if [ "$BENCH_SAVE" = 1 ]; then
    mkdir -p "$BENCH_DIR/results"
    dest="$BENCH_DIR/results/$(date +%F)-$BENCH-$(uname -r)-$(nproc)cpu"
    [ -e "$dest.txt" ] && dest="$dest-$(date +%H%M%S)"
    dest="$dest.txt"
    { echo "# $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2 | sed 's/^ //'), kernel $(uname -r)"
      cat "$REPORT"; } > "$dest" && echo "saved: $dest"
  fi
  echo "raw outputs: $WORK"
  exit "$FAILED"
}
