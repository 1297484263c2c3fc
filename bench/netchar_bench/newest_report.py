"""The report of bench/newest.sh: per case and tool, the median of the rounds and its spread;
netchar's ratio to every other tool read round by round (the two ran back to back in each
round), their median, range and how many rounds were at or above 1; and the targets of issue 25.

    python3 -m netchar_bench.newest_report RESULTS.tsv NOTES.txt

RESULTS.tsv rows: round, case, tool, status (ok|FAIL), value (Gbit/s, received datagrams/s or
transactions/s), p50 and p99 in µs (rr, crr), placement, notes.
"""

import statistics
import sys

CASES = [
    ("tcp1", "TCP 1 stream", "Gbit/s"),
    ("tcp4", "TCP -P 4", "Gbit/s"),
    ("skip1", "TCP 1 --skip-rx-copy", "Gbit/s"),
    ("udp64", "UDP 64 B", "datagrams/s received"),
    ("udp1472", "UDP 1472 B", "datagrams/s received"),
    ("rr.tcp.same", "TCP rr, same core", "transactions/s"),
    ("rr.udp.same", "UDP rr, same core", "transactions/s"),
    ("rr.tcp.cross", "TCP rr, cross core", "transactions/s"),
    ("rr.udp.cross", "UDP rr, cross core", "transactions/s"),
    ("crr", "TCP crr", "connections/s"),
]
TOOL_LABEL = {"netchar-bp": "netchar --busy-poll", "netchar-l128": "netchar -l 128Ki", "netperf-j": "netperf -j (timed)", "udp_ref": "udp_ref (limit)",
             "udp_ref-s": "udp_ref -s (stamped)"}


def read(path):
    rows = []
    with open(path) as f:
        for line in f:
            p = line.rstrip("\n").split("\t")
            p += [""] * (9 - len(p))
            rows.append(dict(round=int(p[0]), case=p[1], tool=p[2], ok=p[3] == "ok",
                             value=float(p[4]) if p[3] == "ok" else None,
                             p50=float(p[5]) if p[5] not in ("", "-") else None,
                             p99=float(p[6]) if p[6] not in ("", "-") else None,
                             placement=p[7], notes=p[8]))
    return rows


def fmt(v, unit):
    if v is None:
        return "-"
    if unit == "Gbit/s":
        return "%.2f" % v
    return "{:,.0f}".format(v)


def spread(vals):
    m = statistics.median(vals)
    return (max(vals) - min(vals)) / m if m else 0.0


def paired(rows, case, a, b):
    """Per round a/b, for rounds where both ran."""
    va = {r["round"]: r["value"] for r in rows if r["case"] == case and r["tool"] == a and r["ok"]}
    vb = {r["round"]: r["value"] for r in rows if r["case"] == case and r["tool"] == b and r["ok"]}
    return [va[k] / vb[k] for k in sorted(va) if k in vb and vb[k]]


def ratio_text(rs):
    if not rs:
        return "-"
    return "%.3f (%.3f-%.3f, %d/%d rounds >= 1)" % (statistics.median(rs), min(rs), max(rs),
                                                     sum(r >= 1 for r in rs), len(rs))


def table(rows):
    out = []
    head = "%-20s %-22s %14s %7s %8s %8s  %s" % ("case", "tool", "median", "spread", "p50 us", "p99 us", "netchar/tool per round: median (range, rounds >= 1)")
    out.append(head)
    out.append("-" * len(head))
    for case, label, unit in CASES:
        cr = [r for r in rows if r["case"] == case]
        if not cr:
            continue
        tools = []
        for r in cr:
            if r["tool"] not in tools:
                tools.append(r["tool"])
        tools.sort(key=lambda t: (t != "netchar", t))
        placement = next((r["placement"] for r in cr if r["placement"]), "")
        out.append("%s (%s; %s)" % (label, unit, placement))
        for t in tools:
            vals = [r["value"] for r in cr if r["tool"] == t and r["ok"]]
            p50 = [r["p50"] for r in cr if r["tool"] == t and r["ok"] and r["p50"] is not None]
            p99 = [r["p99"] for r in cr if r["tool"] == t and r["ok"] and r["p99"] is not None]
            fails = sum(1 for r in cr if r["tool"] == t and not r["ok"])
            med = statistics.median(vals) if vals else None
            rt = "" if t == "netchar" else ratio_text(paired(rows, case, "netchar", t))
            out.append("  %-18s %-22s %14s %6.1f%% %8s %8s  %s%s" % (
                "", TOOL_LABEL.get(t, t), fmt(med, unit), 100 * spread(vals) if vals else 0,
                "%.2f" % statistics.median(p50) if p50 else "-", "%.2f" % statistics.median(p99) if p99 else "-",
                rt, "  (%d failed)" % fails if fails else ""))
    return out


def verdict(ok):
    return "PASS" if ok else "MISS"


def targets(rows):
    out = []

    def have(case, tool):
        return bool(paired(rows, case, "netchar", tool))

    def line(text, rs, need_every, floor=1.0):
        if not rs:
            return
        med = statistics.median(rs)
        ok = min(rs) >= floor if need_every else med >= floor
        out.append("%s %s: %s" % (verdict(ok), text, ratio_text(rs)))

    for case, label in (("tcp4", "TCP -P 4"),):
        for peer in ("iperf3", "iperf2"):
            if have(case, peer):
                line("%s >= 1.00x %s (median of the rounds' ratios)" % (label, peer), paired(rows, case, "netchar", peer), False)
    if have("skip1", "iperf3"):
        line("TCP 1 --skip-rx-copy >= 1.30x iperf3's own --skip-rx-copy (median)", paired(rows, "skip1", "netchar", "iperf3"), False, 1.30)
    for case, label in (("tcp1", "TCP 1 stream"), ("tcp4", "TCP -P 4")):
        # Like for like: netchar writing iperf3's 128 KiB (netchar's own default writes 512 KiB).
        rs = paired(rows, case, "netchar-l128", "iperf3")
        if rs:
            out.append("info %s, netchar -l 128Ki / iperf3 (the same write length): %s" % (label, ratio_text(rs)))
    for case, label in (("udp64", "UDP 64 B"), ("udp1472", "UDP 1472 B")):
        if have(case, "udp_ref"):
            line("%s received datagrams/s within 10%% of udp_ref (>= 0.90x)" % label, paired(rows, case, "netchar", "udp_ref"), False, 0.90)
        if have(case, "udp_ref-s"):
            line("%s received datagrams/s within 10%% of udp_ref -s, the limit with a receive stamp per datagram (>= 0.90x)" % label,
                 paired(rows, case, "netchar", "udp_ref-s"), False, 0.90)
        if have(case, "iperf3"):
            line("%s received datagrams/s >= 2.5x iperf3" % label, paired(rows, case, "netchar", "iperf3"), False, 2.5)
    for case, label in (("rr.tcp.same", "TCP rr same core"), ("rr.udp.same", "UDP rr same core"),
                        ("rr.tcp.cross", "TCP rr cross core (blocking)"), ("rr.udp.cross", "UDP rr cross core (blocking)")):
        for peer in ("netperf", "netperf-j", "sockperf"):
            if have(case, peer):
                shown = TOOL_LABEL.get(peer, peer).split(" (")[0]
                line("%s >= 1.00x %s in every round" % (label, shown), paired(rows, case, "netchar", peer), True)
        if case.endswith("cross"):
            for peer in ("netperf", "sockperf"):
                rs = paired(rows, case, "netchar-bp", peer)
                if rs:
                    line("%s --busy-poll >= 1.00x %s in every round" % (label.split(" (")[0], peer), rs, True)
    if have("crr", "netperf"):
        line("TCP crr >= 1.00x netperf TCP_CRR (median)", paired(rows, "crr", "netchar", "netperf"), False)
    if any(r["tool"] == "netchar-before" for r in rows):
        out.append("")
        out.append("netchar / netchar-before, per round (the change measured in the same rounds):")
        for case, label, _ in CASES:
            rs = paired(rows, case, "netchar", "netchar-before")
            if rs:
                out.append("  %-20s %s" % (label, ratio_text(rs)))
    return out


def main(argv):
    if len(argv) != 2:
        print(__doc__, file=sys.stderr)
        return 2
    rows = read(argv[0])
    out = table(rows)
    out.append("")
    out.append("targets (issue 25):")
    out += targets(rows)
    notes = [r for r in rows if r["ok"] and r["notes"]]
    try:
        with open(argv[1]) as f:
            extra = [l.rstrip("\n") for l in f if l.strip()]
    except OSError:
        extra = []
    if notes or extra:
        out.append("")
        out.append("notes:")
        out += ["  round %d %s %s: %s" % (r["round"], r["case"], r["tool"], r["notes"]) for r in notes]
        out += ["  " + l for l in extra]
    print("\n".join(out))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
