"""The report of bench/rr.sh: per protocol, placement and tool the median transactions/s and
round-trip latency (mean, p50, p99, p99.9) with spreads, netchar's ratio to the best peer,
netchar's own placement strings, notes and the informational PASS/MISS target lines.

    python3 -m netchar_bench.rr_report RESULTS NOTES DUR ROUNDS VERSIONS WALL_S KERNEL NCPU "PEERS" \
        CLIENT_CPU CROSS_SERVER_CPU PLACEMENTS

RESULTS: results.tsv, one row per kept run: round proto placement variant status tps mean p50
p99 p999 other% notes.  PLACEMENTS: "proto.placement.variant<TAB>netchar's .summary.placement".
"""

import collections
import statistics
import sys

from .report_common import busy_warning, counted, print_notes, read_lines, target_line


def main(argv):
    res, notes_path, dur, rounds, vers, wall, kernel, ncpu, peers, ccpu, xcpu, plpath = argv
    peers = peers.split()
    PL = [("same", "same core (%s,%s)" % (ccpu, ccpu)), ("cross", "cross core (%s,%s)" % (ccpu, xcpu))]
    VAR = [("nc", "netchar", "1 B"), ("nc14", "netchar -l 14", "14 B"), ("ncbp", "netchar --busy-poll", "1 B"),
           ("sockperf", "sockperf pp", "14 B"), ("netperf", "netperf *_RR", "1 B")]
    VLABEL = {v: (l, b) for v, l, b in VAR}
    NCV = ("nc", "nc14", "ncbp")

    # results.tsv: round proto placement variant status tps mean p50 p99 p999 other% notes
    runs = collections.defaultdict(list)
    for line in read_lines(res):
        f = line.rstrip("\n").split("\t")
        f += [""] * (12 - len(f))
        runs[(f[1], f[2], f[3])].append(f)

    def num(x):
        return None if x in ("", "-") else float(x)

    def col(ok, i):
        v = [num(f[i]) for f in ok if num(f[i]) is not None]
        if not v:
            return None, None, v
        m = statistics.median(v)
        return m, (100 * (max(v) - min(v)) / m if m else 0.0), v

    def stats(key):
        all_ = runs.get(key, [])
        ok = [f for f in all_ if f[4] == "ok"]
        if not ok:
            return None
        s = dict(n=len(ok), total=len(all_), other=[num(f[10]) for f in ok if num(f[10]) is not None],
                 notes=[f[11] for f in ok if f[11]])
        for name, i in (("tps", 5), ("mean", 6), ("p50", 7), ("p99", 8), ("p999", 9)):
            s[name], s[name + "_spread"], s[name + "_all"] = col(ok, i)
        return s

    S = {k: stats(k) for k in runs}

    def best_peer(proto, pl, only=None):
        c = [(S[(proto, pl, p)]["tps"], p) for p in peers if (only is None or p in only)
             and S.get((proto, pl, p)) and S[(proto, pl, p)]["tps"]]
        return max(c)[1] if c else None

    def paired(proto, pl, v, peer):
        """netchar's trans/s over the peer's in each round where both ran (a round's runs are back
        to back, the first tool rotating), and their median: the pair sees one machine state, so
        its ratio cancels the drift between rounds that a ratio of two medians carries."""
        def by_round(variant):
            return {f[0]: num(f[5]) for f in runs.get((proto, pl, variant), []) if f[4] == "ok" and num(f[5])}
        ours, theirs = by_round(v), by_round(peer)
        ratios = [ours[r] / theirs[r] for r in sorted(ours, key=int) if r in theirs]
        return ratios, (statistics.median(ratios) if ratios else None)

    def fx(x, f="%.2f"):
        return "-" if x is None else f % x

    print(f"# netchar loopback request/response benchmark: median of {rounds} rounds x {dur}s, 127.0.0.1, 1 transaction in flight")
    print(f"# {vers}; Linux {kernel}, {ncpu} CPUs; wall {wall}s")
    print("# trans/s: netchar .summary.rr.transactions_per_second; sockperf replies received in its valid window"
          " (after 400 ms warm-up) / that window; netperf THROUGHPUT")
    print("# latency = full round trip in µs (sockperf --full-rtt); each column is the median over rounds;"
          " spread = (max-min)/median of the rounds")
    print("# x-peer = netchar / best peer in the same protocol and placement (by trans/s; the 14 B row against"
          " sockperf, the 14 B peer); for p99 lower is better")
    print()
    hdr = (f"{'proto':<5} {'placement':<16} {'tool':<20} {'msg':>4} {'trans/s':>9} {'sprd':>6} {'mean':>7} "
           f"{'p50':>7} {'p99':>8} {'sprd':>6} {'p99.9':>8} {'sprd':>6}  {'x-peer trans/s':<22} {'x p99':>6}")
    print(hdr)
    print("-" * len(hdr))
    for proto in ("tcp", "udp"):
        for pl, pll in PL:
            for v, lab, size in VAR:
                key = (proto, pl, v)
                if key not in runs:
                    continue
                s = S[key]
                head = f"{proto.upper():<5} {pll:<16} {lab:<20} {size:>4} "
                if s is None:
                    print(head + f"{'FAIL':>9}")
                    continue
                row = head + (f"{s['tps']:9.0f} {fx(s['tps_spread'], '%.1f%%'):>6} {fx(s['mean']):>7} {fx(s['p50']):>7} "
                              f"{fx(s['p99']):>8} {fx(s['p99_spread'], '%.0f%%'):>6} {fx(s['p999']):>8} "
                              f"{fx(s['p999_spread'], '%.0f%%'):>6}")
                if v in NCV:
                    bp = best_peer(proto, pl, ["sockperf"] if v == "nc14" else None)
                    if bp:
                        b = S[(proto, pl, bp)]
                        row += f"  {s['tps'] / b['tps']:5.2f}x {bp:<15}"
                        row += f" {fx(s['p99'] / b['p99'] if s['p99'] and b['p99'] else None, '%5.2fx'):>6}"
                if s["n"] < s["total"]:
                    row += f"  [{s['n']}/{s['total']} ok]"
                print(row.rstrip())
        print()

    # netchar's own placement strings
    try:
        pls = [l.rstrip("\n").split("\t", 1) for l in read_lines(plpath) if l.strip()]
    except OSError:
        pls = []
    if pls:
        print("Placement reported by netchar (.summary.placement):")
        seen = collections.defaultdict(set)
        for k, p in pls:
            proto, pl, v = k.split(".")
            seen[(pl, p)].add(f"{proto}/{v}")
        for (pl, p), who in sorted(seen.items()):
            print(f"  {dict(PL)[pl]:<17} \"{p}\"  ({', '.join(sorted(who))})")
        print()

    # ---- notes
    out = []
    for key, s in sorted(S.items()):
        if not s:
            continue
        proto, pl, v = key
        lab = f"{proto.upper()} {dict(PL)[pl]} {VLABEL[v][0]}"
        if s["tps_spread"] and s["tps_spread"] > 5:
            out.append(f"trans/s spread {s['tps_spread']:.1f}% > 5%: {lab} (rounds: "
                       + ", ".join(f"{x:.0f}" for x in s["tps_all"]) + ")")
        if v in NCV and s["tps"] and s["mean"]:
            fill = s["tps"] * s["mean"] / 1e6
            if not 0.90 <= fill <= 1.01:
                out.append(f"{lab}: median trans/s x mean latency = {fill:.3f}; with 1 in flight it should be ~0.95-1.0")
        if counted(s["notes"]):
            out.append(f"{lab}: " + counted(s["notes"]))
    busy = [statistics.median(s["other"]) for s in S.values() if s and s["other"]]
    warning = busy_warning(busy, "", "latency figures")
    if warning:
        out.append(warning)
    print_notes(out, notes_path, blank_before=False, blank_after=True)

    # ---- targets (informational)
    print("Targets (informational; perf.md goals 5 and 6, issue 13):")
    line = target_line
    for proto in ("tcp", "udp"):
        for pl, pll in PL:
            s, bp = S.get((proto, pl, "nc")), best_peer(proto, pl)
            lab = f"{proto.upper()} {pll}, blocking, 1 B"
            if not s or not bp:
                line(None, f"{lab}: >= 1.05x best peer trans/s, p99 no worse: not measured")
                continue
            b = S[(proto, pl, bp)]
            r = s["tps"] / b["tps"]
            p99ok = s["p99"] is not None and b["p99"] is not None and s["p99"] <= b["p99"]
            line(r >= 1.05 and p99ok, f"{lab}: >= 1.05x best peer trans/s with p99 no worse: {r:.2f}x {bp}"
                 f" ({s['tps']:.0f} vs {b['tps']:.0f}/s), p99 {fx(s['p99'])} vs {fx(b['p99'])} µs")
            if pl == "cross":
                line(r >= 0.95, f"{lab}: parity >= 0.95x best peer (goal 6): {r:.2f}x")
    # Issue 13's target: one core, parity or better with sockperf, read from the rounds' pairs.
    for proto in ("tcp", "udp"):
        lab = f"{proto.upper()} {dict(PL)['same']}, blocking, 1 B"
        ratios, pm = paired(proto, "same", "nc", "sockperf")
        if pm is None:
            line(None, f"{lab}: >= 1.00x sockperf per round (median of the rounds' ratios): not measured")
            continue
        line(pm >= 1.0, f"{lab}: >= 1.00x sockperf per round (median of the rounds' ratios): {pm:.3f}x"
             f" (rounds {', '.join(f'{r:.3f}' for r in ratios)})")
    for proto in ("tcp", "udp"):
        s, bp = S.get((proto, "cross", "ncbp")), best_peer(proto, "cross")
        lab = f"{proto.upper()} {dict(PL)['cross']}, --busy-poll"
        if not s or not bp:
            line(None, f"{lab}: >= 10x the blocking peers: not measured")
            continue
        r = s["tps"] / S[(proto, "cross", bp)]["tps"]
        line(r >= 10, f"{lab}: >= 10x the best blocking peer: {r:.1f}x {bp} ({s['tps']:.0f} vs {S[(proto, 'cross', bp)]['tps']:.0f}/s)")


if __name__ == "__main__":
    main(sys.argv[1:])
