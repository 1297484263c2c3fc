"""The report of bench/udp.sh: the 64 B and 1472 B maximum-rate tables (pps or Gbit/s, spread,
loss, CPU per million datagrams, netchar's ratio to iperf3 and to the best peer), the paced
1 Gbit/s table, the CPU cross-check, notes and the informational PASS/MISS target lines.

    python3 -m netchar_bench.udp_report RESULTS NOTES DUR ROUNDS VERSIONS WALL_S KERNEL NCPU "VARIANTS"

RESULTS: results.tsv, one row per kept run: round case variant status sent_pps rx_pps rx_gbps
sent_gbps loss cpu acct other ksoft rx_pkts notes.  VARIANTS: the variants that ran (netchar,
netchar-nogso, netchar-gro, netchar-q100, iperf3, iperf2, nuttcp).
"""

import collections
import statistics
import sys

from .report_common import busy_warning, counted, cpu_disagreement, print_notes, read_lines, target_line


def main(argv):
    res, notes_path, dur, rounds, vers, wall, kernel, ncpu, variants = argv
    variants = variants.split()
    PEERS = [v for v in ("iperf3", "iperf2", "nuttcp") if v in variants]
    NAME = {"netchar": "netchar (GSO)", "netchar-nogso": "netchar --no-gso",
            "netchar-gro": "netchar --gro", "netchar-q100": "netchar (GSO) 100us",
            "netchar-rand": "netchar random payload", "netchar-verify": "netchar random+verify",
            "iperf3": "iperf3", "iperf2": "iperf2", "nuttcp": "nuttcp"}
    CASES = [("u64", "UDP 64 B, max rate", ["netchar", "netchar-nogso"] + PEERS),
             ("u1472", "UDP 1472 B, max rate",
              ["netchar", "netchar-nogso"] + PEERS + ["netchar-gro", "netchar-rand", "netchar-verify"]),
             ("p1g", "UDP 1472 B, paced 1 Gbit/s", ["netchar", "netchar-q100"] + PEERS)]
    LABEL = {c: l for c, l, _ in CASES}
    COLS = ["round", "case", "variant", "status", "sent_pps", "rx_pps", "rx_gbps", "sent_gbps", "loss",
            "cpu", "acct", "other", "ksoft", "rx_pkts", "notes"]

    runs = collections.defaultdict(list)
    for line in read_lines(res):
        f = line.rstrip("\n").split("\t")
        f += [""] * (len(COLS) - len(f))
        runs[(f[1], f[2])].append(dict(zip(COLS, f)))

    def num(x):
        return None if x in ("", "-", None) else float(x)

    def stats(case, v):
        all_ = runs.get((case, v), [])
        ok = [f for f in all_ if f["status"] == "ok"]
        if not ok:
            return None
        s = dict(n=len(ok), total=len(all_))
        for k in ("sent_pps", "rx_pps", "rx_gbps", "sent_gbps", "loss", "other", "ksoft"):
            vals = [num(f[k]) for f in ok if num(f[k]) is not None]
            s[k] = statistics.median(vals) if vals else None
            s[k + "_all"] = vals
            med = s[k]
            s[k + "_spread"] = 100 * (max(vals) - min(vals)) / med if vals and med else None
        per_m = lambda col: [num(f[col]) / (float(f["rx_pkts"]) / 1e6) for f in ok
                             if num(f[col]) is not None and num(f["rx_pkts"])]
        for k in ("cpu", "acct"):
            v_ = per_m(k)
            s[k] = statistics.median(v_) if v_ else None
        s["notes"] = [f["notes"] for f in ok if f["notes"]]
        return s

    S = {(c, v): stats(c, v) for c, _, vs in CASES for v in vs}

    def fx(x, f="%.3f", w=0):
        return ("-" if x is None else f % x).rjust(w)
    def fk(x, w=9):                                 # 1234567 -> 1234.6k
        return fx(None if x is None else x / 1e3, "%.1fk", w)
    def best_peer(case, key):
        c = [(S[(case, p)][key], p) for p in PEERS if S.get((case, p)) and S[(case, p)][key]]
        return max(c) if c else (None, None)
    def ratio(a, b):
        return a / b if a is not None and b else None

    print(f"# netchar loopback UDP benchmark: median of {rounds} rounds x {dur}s, 127.0.0.1")
    print(f"# {vers}; Linux {kernel}, {ncpu} CPUs; wall {wall}s")
    print("# pps = datagrams/s (recv: datagrams the receiver got); Gbit/s = received payload bits/s / 10^9;"
          " spread = (max-min)/median of the rounds;")
    print("# CPU s/M = client+server CPU seconds per 10^6 received datagrams (netchar: own report; peers:"
          " process accounting); loss % = the tool's own figure")

    def status(case, v):
        s = S[(case, v)]
        if s is None:
            return "FAIL" if runs.get((case, v)) else "-"
        return "" if s["n"] == s["total"] else f" [{s['n']}/{s['total']} ok]"

    # ---- 64 B
    c = "u64"
    bp, bpn = best_peer(c, "rx_pps")
    i3 = S.get((c, "iperf3")) and S[(c, "iperf3")]["rx_pps"]
    print()
    print(f"{LABEL[c]}  (best peer by recv pps: {bpn or '-'})")
    print(f"{'tool':<26}{'sent pps':>10}{'spread':>8}{'recv pps':>10}{'spread':>8}{'loss %':>8}{'CPU s/M':>9}"
          f"{'recv/iperf3':>12}{'recv/best':>10}")
    for v in [x for x in CASES[0][2]]:
        s = S[(c, v)]
        if s is None:
            print(f"{NAME[v]:<26}{status(c, v):>10}"); continue
        row = (f"{NAME[v]:<26}{fk(s['sent_pps'], 10)}{fx(s['sent_pps_spread'], '%.1f%%', 8)}"
               f"{fk(s['rx_pps'], 10)}{fx(s['rx_pps_spread'], '%.1f%%', 8)}{fx(s['loss'], '%.1f', 8)}"
               f"{fx(s['cpu'], '%.3f', 9)}")
        if v.startswith("netchar"):
            row += fx(ratio(s["rx_pps"], i3), "%.2fx", 12) + fx(ratio(s["rx_pps"], bp), "%.2fx", 10)
        print(row + status(c, v))

    # ---- 1472 B
    c = "u1472"
    bg, bgn = best_peer(c, "rx_gbps")
    i3g = S.get((c, "iperf3")) and S[(c, "iperf3")]["rx_gbps"]
    print()
    print(f"{LABEL[c]}  (best peer by recv Gbit/s: {bgn or '-'})")
    print(f"{'tool':<26}{'recv Gbit/s':>12}{'spread':>8}{'sent Gbit/s':>12}{'recv pps':>10}{'loss %':>8}{'CPU s/M':>9}"
          f"{'recv/iperf3':>12}{'recv/best':>10}")
    for v in CASES[1][2]:
        s = S[(c, v)]
        if v in ("netchar-rand", "netchar-verify") and not runs.get((c, v)):
            continue                                # results from before the payload rows
        if v == "netchar-gro":
            print("  -- receiver GRO: coalesced deliveries, not comparable with the rows above --")
        if v == "netchar-rand":
            print("  -- netchar's payload rows (GSO), against netchar (GSO) --")
        if s is None:
            print(f"{NAME[v]:<26}{status(c, v):>12}"); continue
        lab = NAME[v] + (" (coalesced)" if v == "netchar-gro" else "")
        row = (f"{lab:<26}{fx(s['rx_gbps'], '%.2f', 12)}{fx(s['rx_gbps_spread'], '%.1f%%', 8)}"
               f"{fx(s['sent_gbps'], '%.2f', 12)}{fk(s['rx_pps'], 10)}{fx(s['loss'], '%.1f', 8)}{fx(s['cpu'], '%.3f', 9)}")
        if v in ("netchar", "netchar-nogso"):
            row += fx(ratio(s["rx_gbps"], i3g), "%.2fx", 12) + fx(ratio(s["rx_gbps"], bg), "%.2fx", 10)
        elif v == "netchar-gro":
            row += f"{'not comparable':>22}"
        elif v in ("netchar-rand", "netchar-verify"):
            base = S.get((c, "netchar"))
            if base and base["rx_gbps"] and s["rx_gbps"] is not None:
                extra = None if s["cpu"] is None or base["cpu"] is None else s["cpu"] - base["cpu"]
                row += f"  {s['rx_gbps'] / base['rx_gbps']:.2f}x of netchar (GSO), CPU {fx(extra, '%+.3f')} s/M"
        print(row + status(c, v))

    # ---- paced
    c = "p1g"
    print()
    print(f"{LABEL[c]}  (target 1.000 Gbit/s of payload; error = recv rate vs target)")
    print(f"{'tool':<26}{'sent Gbit/s':>12}{'recv Gbit/s':>12}{'spread':>8}{'error':>9}{'loss %':>8}{'CPU s/M':>9}  flags")
    FLAGS = {"netchar": "-b 1G", "netchar-q100": "-b 1G --pacing-quantum 100us", "iperf3": "-b 1G", "iperf2": "-b 1000000000", "nuttcp": "-R 1000000 (Kbps)"}
    for v in CASES[2][2]:
        s = S[(c, v)]
        if s is None:
            print(f"{NAME[v]:<26}{status(c, v):>12}"); continue
        err = None if s["rx_gbps"] is None else 100 * (s["rx_gbps"] - 1.0)
        print(f"{NAME[v]:<26}{fx(s['sent_gbps'], '%.4f', 12)}{fx(s['rx_gbps'], '%.4f', 12)}"
              f"{fx(s['rx_gbps_spread'], '%.2f%%', 8)}{fx(err, '%+.2f%%', 9)}{fx(s['loss'], '%.2f', 8)}"
              f"{fx(s['cpu'], '%.3f', 9)}  {FLAGS[v]}{status(c, v)}")

    # ---- cross-check
    print()
    print("Cross-check: CPU s/M as reported (self: netchar's JSON; peers: process accounting) and from process"
          " accounting (acct);")
    print("other = machine CPU charged to neither client, server nor ksoftirqd; ksoftirqd = its share"
          " (% of all CPUs, medians)")
    print(f"{'case':<28}{'tool':<18}{'self':>8}{'acct':>8}{'other':>8}{'ksoftirqd':>10}")
    for c, lab, vs in CASES:
        for v in vs:
            s = S[(c, v)]
            if s is None:
                continue
            print(f"{lab:<28}{NAME[v]:<18}{fx(s['cpu'], '%.3f', 8)}{fx(s['acct'], '%.3f', 8)}"
                  f"{fx(s['other'], '%.0f%%', 8)}{fx(s['ksoft'], '%.0f%%', 10)}")

    # ---- notes
    out = []
    for c, lab, vs in CASES:
        key = "rx_pps" if c == "u64" else "rx_gbps"
        for v in vs:
            s = S[(c, v)]
            if not s:
                continue
            if s[key + "_spread"] is not None and s[key + "_spread"] > 3:
                unit = "pps" if key == "rx_pps" else "Gbit/s"
                fmt = (lambda x: "%.0fk" % (x / 1e3)) if key == "rx_pps" else (lambda x: "%.3f" % x)
                out.append(f"spread {s[key + '_spread']:.1f}% > 3%: {lab}, {NAME[v]} (rounds: "
                           + ", ".join(fmt(g) for g in s[key + "_all"]) + f" {unit})")
            disagreement = cpu_disagreement(f"{NAME[v]} {lab}", s["cpu"], s["acct"]) if v.startswith("netchar") else None
            if disagreement:
                out.append(disagreement)
            if counted(s["notes"]):
                out.append(f"{NAME[v]} {lab}: " + counted(s["notes"]))
    busy = [s["other"] for s in S.values() if s and s["other"] is not None]
    warning = busy_warning(busy, " ('other' column)", "figures")
    if warning:
        out.append(warning)
    print_notes(out, notes_path)

    # ---- targets (informational)
    print()
    print("Targets (informational):")
    line = target_line
    def get(c, v, k):
        s = S.get((c, v)); return s[k] if s else None
    r = ratio(get("u64", "netchar", "rx_pps"), get("u64", "iperf3", "rx_pps"))
    line(None if r is None else r >= 2.5, "64 B recv pps, netchar (GSO) >= 2.5x iperf3: "
         + ("not measured" if r is None else f"{r:.2f}x"))
    bp, bpn = best_peer("u64", "rx_pps")
    r = ratio(get("u64", "netchar-nogso", "rx_pps"), bp)
    line(None if r is None else r >= 1.0, f"64 B recv pps, netchar --no-gso >= 1.0x best peer ({bpn}): "
         + ("not measured" if r is None else f"{r:.2f}x"))
    r = ratio(get("u1472", "netchar", "rx_gbps"), get("u1472", "iperf3", "rx_gbps"))
    line(None if r is None else r >= 3.0, "1472 B recv Gbit/s, netchar (GSO) >= 3x iperf3: "
         + ("not measured" if r is None else f"{r:.2f}x"))
    g, lo = get("p1g", "netchar", "rx_gbps"), get("p1g", "netchar", "loss")
    line(None if g is None else abs(g - 1.0) <= 0.005, "paced 1 Gbit/s: netchar recv rate within +-0.5%: "
         + ("not measured" if g is None else f"{g:.4f} Gbit/s ({100 * (g - 1):+.2f}%), loss {lo:.3f}%"))
    g, cq, c0 = get("p1g", "netchar-q100", "rx_gbps"), get("p1g", "netchar-q100", "cpu"), get("p1g", "netchar", "cpu")
    line(None if g is None else abs(g - 1.0) <= 0.005, "paced 1 Gbit/s, --pacing-quantum 100us: recv rate within +-0.5%: "
         + ("not measured" if g is None else f"{g:.4f} Gbit/s ({100 * (g - 1):+.2f}%), CPU s/M {cq:.3f}"
            + (f" ({cq / c0:.2f}x the default's)" if c0 else "")))


if __name__ == "__main__":
    main(sys.argv[1:])
