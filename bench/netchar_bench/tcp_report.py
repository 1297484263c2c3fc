"""The report of bench/tcp.sh: per case and tool the median receiver Gbit/s, the spread of the
rounds and CPU s/GB, netchar's ratio to each peer, the CPU cross-check (self-reported against
process accounting, and the machine's other work), retransmits, notes and the informational
PASS/MISS target lines.

    python3 -m netchar_bench.tcp_report RESULTS NOTES DUR ROUNDS VERSIONS WALL_S KERNEL NCPU "TOOLS"

RESULTS: results.tsv, one row per kept run: round case tool status gbps bytes cpu_self cpu_acct
other% retransmits notes (status "ok" or "FAIL").  NOTES: free-text lines for the notes section.
TOOLS: the tools that ran, netchar first.
"""

import collections
import statistics
import sys

from .report_common import busy_warning, counted, cpu_disagreement, print_notes, read_lines, target_line


def main(argv):
    res, notes_path, dur, rounds, vers, wall, kernel, ncpu, tools = argv[:9]
    # Peers that ran the skip1 case with their own --skip-rx-copy (iperf3 >= 3.19); for the
    # others the row compares with their plain 1-stream runs.
    skip_peers = argv[9].split() if len(argv) > 9 else []
    tools = tools.split()
    peers = [t for t in tools if t != "netchar"]
    cases = [("up1", "TCP 1 stream"), ("up2", "TCP -P 2"), ("up4", "TCP -P 4"),
             ("rev1", "TCP -R 1 stream"), ("seg1", "TCP 1 wake/segment"), ("zc1", "TCP 1 --zerocopy"),
             ("skip1", "TCP 1 skip-rx-copy"), ("rand1", "TCP 1 random payload"), ("ver1", "TCP 1 random+verify")]
    label = dict(cases)
    # zerocopy, wake/segment and the payload rows are netchar-only: compare with the peers'
    # 1-stream runs
    PEER_CASE = {"zc1": "up1", "seg1": "up1", "rand1": "up1", "ver1": "up1"}

    def peer_case(case, peer):
        if case == "skip1" and peer not in skip_peers:
            return "up1"
        return PEER_CASE.get(case, case)

    # results.tsv: round case tool status gbps bytes cpu_self cpu_acct other% retrans notes
    runs = collections.defaultdict(list)
    for line in read_lines(res):
        f = line.rstrip("\n").split("\t")
        f += [""] * (11 - len(f))
        runs[(f[1], f[2])].append(f)

    # A case no tool ran (results from before it existed) is left out of the tables.
    cases = [(c, lab) for c, lab in cases if any(k[0] == c for k in runs)]

    def num(x):
        return None if x in ("", "-") else float(x)

    def stats(case, tool):
        all_ = runs.get((case, tool), [])
        ok = [f for f in all_ if f[3] == "ok"]
        if not ok:
            return None
        g = [float(f[4]) for f in ok]
        med = statistics.median(g)
        per_gb = lambda col: [num(f[col]) / (int(f[5]) / 1e9) for f in ok if num(f[col]) is not None and int(f[5]) > 0]
        med_or_none = lambda v: statistics.median(v) if v else None
        return dict(gbps=med, rounds=g, n=len(ok), total=len(all_),
                    spread=100 * (max(g) - min(g)) / med if med else 0.0,
                    cpu=med_or_none(per_gb(6)), acct=med_or_none(per_gb(7)),
                    other=[num(f[8]) for f in ok if num(f[8]) is not None],
                    retrans=[f[9] for f in ok if f[9] not in ("", "-")],
                    notes=[f[10] for f in ok if f[10]])

    S = {(c, t): stats(c, t) for c, _ in cases for t in tools}

    def ratio(case, peer):
        a, b = S.get((case, "netchar")), S.get((peer_case(case, peer), peer))
        return a["gbps"] / b["gbps"] if a and b and b["gbps"] else None

    def fx(x, f="%.3f"):
        return "-" if x is None else f % x

    def payload_cost(base, rows):
        """Each row's rate as a share of netchar's `base` rate, and its extra CPU s/GB."""
        b = S.get((base, "netchar"))
        out = []
        for c in rows:
            s = S.get((c, "netchar"))
            if not (b and s and b["gbps"]):
                continue
            extra = None if s["cpu"] is None or b["cpu"] is None else s["cpu"] - b["cpu"]
            out.append(f" {label[c]} {s['gbps'] / b['gbps']:.2f}x, CPU {fx(extra, '%+.3f')} s/GB")
        return ";".join(out) or " not measured"

    # ---- main table
    print(f"# netchar loopback TCP benchmark: median of {rounds} rounds x {dur}s, 127.0.0.1")
    print(f"# {vers}; Linux {kernel}, {ncpu} CPUs; wall {wall}s")
    print("# Gbit/s = receiver rate; spread = (max-min)/median of the rounds;"
          " CPU s/GB = client+server CPU seconds per 10^9 bytes received")
    print()
    W = 25
    print(f"{'':<18}" + "".join(f"{('-- ' + t + ' ').ljust(W - 1, '-')} " for t in tools) + " netchar/")
    print(f"{'case':<18}" + "".join(f"{'Gbit/s':>7} {'spread':>7} {'CPUs/GB':>8} " for _ in tools)
          + " ".join(f"{p:>7}" for p in peers))
    for c, lab in cases:
        row = f"{lab:<18}"
        for t in tools:
            s = S[(c, t)]
            if t != "netchar" and peer_case(c, t) != c:
                cellt = f"{'(' + peer_case(c, t) + ')':>7}"
            elif s is None:
                cellt = f"{'FAIL' if runs.get((c, t)) else '-':>7}"
            else:
                cellt = f"{s['gbps']:7.2f} {s['spread']:6.1f}% {fx(s['cpu']):>8}"
                if s["n"] < s["total"]:
                    cellt += f" [{s['n']}/{s['total']} ok]"
            row += f"{cellt:<{W}}"
        row += " " + " ".join(f"{fx(ratio(c, p), '%5.2fx'):>7}" for p in peers)
        print(row.rstrip())
    if "seg1" in dict(cases) and peers:
        print("  (wake/segment row: netchar --rx-wake-per-segment, its receiver woken for every segment as the"
              " peers' are; ratios are against the peers' 'TCP 1 stream' medians)")
    if "zc1" in dict(cases) and peers:
        print("  (--zerocopy row: ratios are against the peers' 'TCP 1 stream' medians)")
    if "rand1" in dict(cases) or "ver1" in dict(cases):
        print("  (payload rows: netchar --payload random, and with --verify; their cost against netchar's own"
              " 'TCP 1 stream':" + payload_cost("up1", ["rand1", "ver1"]) + ")")
    plain_skip = [p for p in peers if p not in skip_peers]
    if "skip1" in dict(cases) and plain_skip:
        print("  (--skip-rx-copy row: " + ", ".join(plain_skip) + " have no --skip-rx-copy here;"
              " ratios are against their 'TCP 1 stream' medians)")

    # ---- CPU cross-check: the same formula from process accounting for every tool
    # (client: rusage of the waited-for process; server: /proc/PID/stat delta).  "other" is the
    # machine's CPU during the runs not charged to either process, in % of all CPUs (median).
    print()
    print("Cross-check: CPU s/GB as reported (self) and from process accounting (acct);"
          " other = machine CPU not charged to client or server, % of all CPUs")
    print(f"{'':<18}" + "".join(f"{('-- ' + t + ' ').ljust(W - 1, '-')} " for t in tools))
    print(f"{'case':<18}" + "".join(f"{'self':>7} {'acct':>7} {'other':>8} " for _ in tools))
    for c, lab in cases:
        row = f"{lab:<18}"
        for t in tools:
            s = S[(c, t)]
            txt = f"{'-':>7}" if s is None else (f"{fx(s['cpu']):>7} {fx(s['acct']):>7} "
                   + f"{fx(statistics.median(s['other']) if s['other'] else None, '%.0f%%'):>8}")
            row += f"{txt:<{W}}"
        print(row.rstrip())

    # ---- retransmits on loopback should be (almost) zero; list them per run for both tools that report them
    rt = [(c, t, S[(c, t)]["retrans"]) for c, _ in cases for t in tools if S[(c, t)] and S[(c, t)]["retrans"]]
    if any(any(x != "0" for x in v) for _, _, v in rt):
        print()
        print("Sender retransmits per run (loopback; iperf2 does not report them)")
        print(f"{'case':<18}" + "".join(f"{t:>18}" for t in tools if t != "iperf2"))
        for c, lab in cases:
            row = f"{lab:<18}"
            for t in tools:
                if t == "iperf2":
                    continue
                s = S[(c, t)]
                row += f"{(','.join(s['retrans']) if s and s['retrans'] else '-'):>18}"
            print(row)

    # ---- notes
    out = []
    for c, lab in cases:
        for t in tools:
            s = S[(c, t)]
            if not s:
                continue
            if s["spread"] > 3:
                out.append(f"spread {s['spread']:.1f}% > 3%: {lab}, {t} (rounds: "
                           + ", ".join(f"{g:.2f}" for g in s["rounds"]) + " Gbit/s)")
            disagreement = cpu_disagreement(f"{t} {lab}", s["cpu"], s["acct"]) if t != "iperf2" else None
            if disagreement:
                out.append(disagreement)
            if counted(s["notes"]):
                out.append(f"{t} {lab}: " + counted(s["notes"]))
    busy = [statistics.median(s["other"]) for s in S.values() if s and s["other"]]
    warning = busy_warning(busy, " ('other' column)", "figures")
    if warning:
        out.append(warning)
    print_notes(out, notes_path)

    # ---- targets (informational)
    print()
    print("Targets (informational):")
    line = target_line
    def get(c, t, k):
        s = S.get((c, t)); return s[k] if s else None
    r = ratio("up1", "iperf3"); nc, i3 = get("up1", "netchar", "cpu"), get("up1", "iperf3", "cpu")
    ok = None if None in (r, nc, i3) else (r >= 1.0 and nc <= i3)
    line(ok, "1 stream >= 1.00x iperf3 at no more CPU/GB: "
         + (f"{r:.2f}x, CPU {nc:.3f} vs {i3:.3f} s/GB" if ok is not None else "not measured"))
    for c, lab in (("up2", "-P 2"), ("up4", "-P 4")):
        r3, r2 = ratio(c, "iperf3"), ratio(c, "iperf2")
        ok = None if None in (r3, r2) else (r3 >= 1.7 and r2 >= 0.95)
        line(ok, f"{lab} >= 1.7x iperf3 and >= 0.95x iperf2: "
             + (f"{r3:.2f}x / {r2:.2f}x" if ok is not None else "not measured"))
    r = ratio("zc1", "iperf3")
    line(None if r is None else r >= 1.5,
         "--zerocopy >= 1.5x iperf3 1 stream: " + (f"{r:.2f}x" if r is not None else "not measured"))
    zc, plain = get("zc1", "netchar", "gbps"), get("up1", "netchar", "gbps")
    r = zc / plain if zc and plain else None
    line(None if r is None else r >= 1.0,
         "--zerocopy >= 1.00x netchar plain 1 stream: " + (f"{r:.2f}x" if r is not None else "not measured"))
    r = ratio("skip1", "iperf3")
    how = "iperf3 --skip-rx-copy" if "iperf3" in skip_peers else "iperf3 plain 1 stream"
    line(None if r is None else r >= 1.3,
         f"--skip-rx-copy >= 1.3x {how}: " + (f"{r:.2f}x" if r is not None else "not measured"))


if __name__ == "__main__":
    main(sys.argv[1:])
