"""The report of bench/lwip.sh: the netchar client against the responder on lwIP over TAP, and
iperf -c and netchar --proto lwiperf against lwIP's own lwiperf on the same stack.

    python3 -m netchar_bench.lwip_report RESULTS

RESULTS: one line per run, "CASE<TAB>ROUND<TAB>FILE" (FILE relative to RESULTS' directory, or
absolute): netchar's --json output for tcp-up, tcp-up-sockets (the responder built without its
TCP sink), tcp-down, udp-up, udp-down, rr, netchar-lwiperf; lwiperf's report line for
iperf-lwiperf.lwiperf and netchar-lwiperf.lwiperf; for CASE.cpu (tcp-up, tcp-up-sockets,
iperf-lwiperf) the server's CPU seconds during that run.
"""

import json
import os
import re
import statistics
import sys


def read_runs(path):
    """{case: [(round, file), ...]} from RESULTS."""
    runs = {}
    base = os.path.dirname(os.path.abspath(path))
    with open(path) as f:
        for line in f:
            if not line.strip():
                continue
            case, rnd, name = line.rstrip("\n").split("\t")
            runs.setdefault(case, []).append((rnd, os.path.join(base, name)))
    return runs


def files(runs, case):
    return [p for _, p in runs.get(case, [])]


def load(path):
    """netchar's one result (echo prints a list), or None when the run left no usable JSON."""
    try:
        with open(path) as f:
            d = json.load(f)
    except (OSError, ValueError):
        return None
    d = d[0] if isinstance(d, list) and d else d
    return d if isinstance(d, dict) and not d.get("error") else None


def median(xs):
    xs = [x for x in xs if x is not None]
    return (statistics.median(xs), len(xs)) if xs else (None, 0)


def fmt(x, nd=1):
    return "-" if x is None else f"{x:.{nd}f}"


def tcp_rounds(runs, case, flow):
    """{round: receiver Mbit/s} of CASE (None for a run without a figure)."""
    vals = {}
    for r, p in runs.get(case, []):
        d = load(p)
        vals[r] = d["summary"][flow]["receiver"]["bits_per_second"] / 1e6 if d else None
    return vals


def tcp_mbit(runs, case, flow):
    """Median receiver Mbit/s of CASE and how many runs gave a figure."""
    return median(tcp_rounds(runs, case, flow).values())


def lwiperf_counts(runs, case):
    """{round: (bytes, ms)} from lwiperf's own report lines ("N bytes in M ms"); None when absent."""
    vals = {}
    for r, p in runs.get(case + ".lwiperf", []):
        try:
            with open(p) as f:
                m = re.search(r"(\d+) bytes in (\d+) ms", f.read())
        except OSError:
            m = None
        vals[r] = (int(m.group(1)), int(m.group(2))) if m and int(m.group(2)) else None
    return vals


def lwiperf_rounds(runs, case):
    """{round: Mbit/s} from lwiperf's own report lines."""
    return {r: c[0] * 8 / c[1] / 1e3 if c else None for r, c in lwiperf_counts(runs, case).items()}


def cpu_per_gb(runs, case, received):
    """Median server CPU seconds per GB received over the rounds of CASE; received: {round: bytes}."""
    vals = []
    for r, p in runs.get(case + ".cpu", []):
        try:
            with open(p) as f:
                secs = float(f.read().strip())
        except (OSError, ValueError):
            secs = None
        got = received.get(r)
        vals.append(secs / (got / 1e9) if secs is not None and got else None)
    return median(vals)


def tcp_received(runs, case):
    """{round: bytes the responder received} of a TCP up CASE."""
    vals = {}
    for r, p in runs.get(case, []):
        d = load(p)
        vals[r] = d["summary"]["up"]["receiver"]["total_bytes"] if d else None
    return vals


def lwiperf_mbit(runs, case):
    """Median Mbit/s from lwiperf's own report lines and how many runs gave one."""
    return median(lwiperf_rounds(runs, case).values())


def round_ratios(num, den):
    """num / den of the rounds that have both figures, in round order."""
    return [num[r] / den[r] for r in sorted(num, key=int) if num[r] and den.get(r)]


def ratio_line(label, ratios, ratio):
    spread = ""
    if len(ratios) > 1:
        spread = f"; per round {min(ratios):.3f} to {max(ratios):.3f} ({' '.join(f'{x:.2f}' for x in ratios)})"
    return f"  {label}: {ratio:.3f}{spread}"


def report(runs):
    print("TCP, Mbit/s (median of rounds; the receiving end's count)")
    up, n = tcp_mbit(runs, "tcp-up", "up")
    print(f"  netchar tcp             -> responder on lwIP  up   {fmt(up):>9}  ({n} runs)")
    socks, ns = tcp_mbit(runs, "tcp-up-sockets", "up")
    if ns:
        print(f"  netchar tcp -> responder, sockets only    up   {fmt(socks):>9}  ({ns} runs, built TCP_SINK=0)")
    down, n = tcp_mbit(runs, "tcp-down", "down")
    print(f"  netchar tcp -R          <- responder on lwIP  down {fmt(down):>9}  ({n} runs)")
    ref, n = lwiperf_mbit(runs, "iperf-lwiperf")
    if n:
        print(f"  iperf -c                -> lwiperf on lwIP    up   {fmt(ref):>9}  ({n} runs, lwiperf's own count)")
        nl, n2 = lwiperf_mbit(runs, "netchar-lwiperf")
        print(f"  netchar --proto lwiperf -> lwiperf on lwIP    up   {fmt(nl):>9}  ({n2} runs, lwiperf's own count)")
        ref_rounds = lwiperf_rounds(runs, "iperf-lwiperf")
        if up and ref:
            ratio = up / ref
            print(ratio_line("responder / lwiperf (iperf -c)", round_ratios(tcp_rounds(runs, "tcp-up", "up"), ref_rounds),
                             ratio) + f"  target >= 0.95: {'PASS' if ratio >= 0.95 else 'MISS'}")
        if socks and ref:
            print(ratio_line("responder, sockets only / lwiperf",
                             round_ratios(tcp_rounds(runs, "tcp-up-sockets", "up"), ref_rounds), socks / ref))
    else:
        print("  (no lwiperf runs: LWIPERF_C and iperf are needed)")
    costs = [
        ("responder", cpu_per_gb(runs, "tcp-up", tcp_received(runs, "tcp-up"))),
        ("sockets only", cpu_per_gb(runs, "tcp-up-sockets", tcp_received(runs, "tcp-up-sockets"))),
        ("lwiperf (iperf -c)", cpu_per_gb(runs, "iperf-lwiperf",
                                          {r: c and c[0] for r, c in lwiperf_counts(runs, "iperf-lwiperf").items()})),
    ]
    if any(n for _, (_, n) in costs):
        print("  server CPU seconds per GB received (median): "
              + ", ".join(f"{name} {fmt(v, 2)}" for name, (v, n) in costs if n))
    print()
    print("UDP, 64-byte datagrams, unpaced (-b 0): received per second, lost (lwIP's socket queue: 128)")
    for case, flow in (("udp-up", "up"), ("udp-down", "down")):
        pps, loss = [], []
        for p in files(runs, case):
            d = load(p)
            if d:
                rx = d["summary"][flow]["receiver"]
                pps.append(rx["packets"] / rx["seconds"] if rx["seconds"] else None)
                loss.append(rx["loss_percent"])
        (p_med, n), (l_med, _) = median(pps), median(loss)
        print(f"  {flow:<5} {fmt(p_med, 0):>9} datagrams/s received, {fmt(l_med)}% lost  ({n} runs)")
    print()
    print("rr over TCP, 1-byte request and response")
    tps, p50, p99, place = [], [], [], "-"
    for p in files(runs, "rr"):
        d = load(p)
        if d:
            rr = d["summary"]["rr"]
            tps.append(rr["transactions_per_second"])
            p50.append(rr["latency_us"]["p50"])
            p99.append(rr["latency_us"]["p99"])
            place = d["summary"].get("placement", "-")
    (t, n), (a, _), (b, _) = median(tps), median(p50), median(p99)
    print(f"  {fmt(t, 0)} transactions/s, round trip p50 {fmt(a)} us, p99 {fmt(b)} us  ({n} runs)")
    print(f"  netchar's placement line (last run): {place}")


def main(argv):
    if len(argv) != 1:
        print(__doc__.strip().split("\n\n")[1], file=sys.stderr)
        return 2
    report(read_runs(argv[0]))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
