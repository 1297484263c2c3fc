"""The reports of bench/adapters.sh (iperf3 adapter) and bench/iperf2.sh (iperf2 adapter): per
case, the peer tool's own median rate next to netchar's adapter in the same role, and their ratio
against the 0.95 target.

    python3 -m netchar_bench.adapter_report adapters RESULTS   # iperf3 rows, with the spread
    python3 -m netchar_bench.adapter_report iperf2 RESULTS     # iperf2 rows

RESULTS: one line per run, "CASE TOOL BIT/S" (TOOL: the peer's name or netchar; BIT/S may be nan).
"""

import statistics as st
import sys

NAN = float("nan")


def read_runs(path):
    """{case: {tool: [bit/s, ...]}} from RESULTS."""
    rows = {}
    with open(path) as f:
        for line in f:
            case, tool, v = line.split()
            rows.setdefault(case, {}).setdefault(tool, []).append(float(v))
    return rows


def spread(xs):
    """(max - min) / median of the rounds."""
    return (max(xs) - min(xs)) / st.median(xs) if xs else NAN


def paired(peer, ours):
    """Per-round ratios ours/peer (the k-th run of each tool ran in round k, back to back) and
    their median: pairing cancels the machine's drift between rounds, which on a shared VM moves
    both tools by more than the difference between them."""
    ratios = [b / a for a, b in zip(peer, ours) if a > 0 and a == a and b == b]
    return ratios, (st.median(ratios) if ratios else NAN)


def table(rows, peer, label):
    """Per case: the peer tool's and netchar's medians, their ratio, the spreads, and the median
    and range of the rounds' own ratios, which the verdict reads."""
    print(f"{'case':<12} {label + ' Gbit/s':>17} {'netchar Gbit/s':>15} {'ratio':>7} {'spread':>14} "
          f"{'paired':>7} {'range':>13}  verdict (paired >= 0.95)")
    for case in sorted(rows):
        t = rows[case]
        a, b = st.median(t.get(peer, [NAN])), st.median(t.get("netchar", [NAN]))
        ratio = b / a if a else NAN
        ratios, pm = paired(t.get(peer, []), t.get("netchar", []))
        rng = f"{min(ratios):.3f}-{max(ratios):.3f}" if ratios else "n/a"
        print(f"{case:<12} {a/1e9:>17.2f} {b/1e9:>15.2f} {ratio:>7.3f} "
              f"{spread(t.get(peer, []))*100:>6.1f}%/{spread(t.get('netchar', []))*100:>5.1f}% "
              f"{pm:>7.3f} {rng:>13}  {'PASS' if pm >= 0.95 else 'MISS'}")
    print()


FOOTNOTE = """ratio: of the medians over the rounds; spread: (max-min)/median over the rounds, peer tool / netchar
paired: median of each round's ratio (its two runs back to back, the first tool alternating
        by round), and the range of those ratios; the verdict reads it"""


def adapters(rows):
    table(rows, "iperf3", "peer tool")
    print("client-*: iperf3 -c vs netchar tcp --proto iperf3, both against iperf3 -s (the server's count)")
    print("server-*: iperf3 -c against iperf3 -s vs against netchar server --iperf3 (the client's receiver line)")
    print(FOOTNOTE)


def iperf2(rows):
    table(rows, "iperf", "iperf")
    print("client-*: iperf -c vs netchar tcp --proto iperf2, both against iperf -s (the server's CSV)")
    print("server-*: iperf -c against iperf -s vs against netchar server --iperf2 (the client's CSV)")
    print(FOOTNOTE)


def main(argv):
    if len(argv) != 2 or argv[0] not in ("adapters", "iperf2"):
        print(__doc__.strip().split("\n\n")[1], file=sys.stderr)
        return 2
    {"adapters": adapters, "iperf2": iperf2}[argv[0]](read_runs(argv[1]))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
