"""The report of bench/lwip.sh: the netchar client against the responder on lwIP over TAP, and
iperf -c and netchar --proto lwiperf against lwIP's own lwiperf on the same stack.

    python3 -m netchar_bench.lwip_report RESULTS

RESULTS: one line per run, "CASE<TAB>ROUND<TAB>FILE" (FILE relative to RESULTS' directory, or
absolute): netchar's --json output for tcp-up, tcp-down, udp-up, udp-down, rr, netchar-lwiperf;
lwiperf's report line for iperf-lwiperf.lwiperf and netchar-lwiperf.lwiperf.
"""

import json
import os
import re
import statistics
import sys


def read_runs(path):
    """{case: [file, ...]} from RESULTS."""
    runs = {}
    base = os.path.dirname(os.path.abspath(path))
    with open(path) as f:
        for line in f:
            if not line.strip():
                continue
            case, _, name = line.rstrip("\n").split("\t")
            runs.setdefault(case, []).append(os.path.join(base, name))
    return runs


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


def tcp_mbit(runs, case, flow):
    """Median receiver Mbit/s of CASE and how many runs gave a figure."""
    vals = []
    for p in runs.get(case, []):
        d = load(p)
        vals.append(d["summary"][flow]["receiver"]["bits_per_second"] / 1e6 if d else None)
    return median(vals)


def lwiperf_mbit(runs, case):
    """Median Mbit/s from lwiperf's own report lines ("N bytes in M ms")."""
    vals = []
    for p in runs.get(case + ".lwiperf", []):
        try:
            with open(p) as f:
                m = re.search(r"(\d+) bytes in (\d+) ms", f.read())
        except OSError:
            m = None
        vals.append(int(m.group(1)) * 8 / int(m.group(2)) / 1e3 if m and int(m.group(2)) else None)
    return median(vals)


def report(runs):
    print("TCP, Mbit/s (median of rounds; the receiving end's count)")
    up, n = tcp_mbit(runs, "tcp-up", "up")
    print(f"  netchar tcp             -> responder on lwIP  up   {fmt(up):>9}  ({n} runs)")
    down, n = tcp_mbit(runs, "tcp-down", "down")
    print(f"  netchar tcp -R          <- responder on lwIP  down {fmt(down):>9}  ({n} runs)")
    ref, n = lwiperf_mbit(runs, "iperf-lwiperf")
    if n:
        print(f"  iperf -c                -> lwiperf on lwIP    up   {fmt(ref):>9}  ({n} runs, lwiperf's own count)")
        nl, n2 = lwiperf_mbit(runs, "netchar-lwiperf")
        print(f"  netchar --proto lwiperf -> lwiperf on lwIP    up   {fmt(nl):>9}  ({n2} runs, lwiperf's own count)")
        if up and ref:
            ratio = up / ref
            print(f"  responder / lwiperf (iperf -c): {ratio:.3f}  target >= 0.95: {'PASS' if ratio >= 0.95 else 'MISS'}")
    else:
        print("  (no lwiperf runs: LWIPERF_C and iperf are needed)")
    print()
    print("UDP, 64-byte datagrams, unpaced (-b 0): received per second, lost (lwIP's socket queue: 128)")
    for case, flow in (("udp-up", "up"), ("udp-down", "down")):
        pps, loss = [], []
        for p in runs.get(case, []):
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
    for p in runs.get("rr", []):
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
