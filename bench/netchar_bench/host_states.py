"""Rounds of bench/newest.sh read by the host's state.

On the 2-vCPU virtual machines the bench figures come from, every tool's cross-CPU cases run at
one of two speeds about 40% apart, for tens of seconds at a time, whatever the tool: TCP -P 4
near 22 or 31 Gbit/s, TCP rr across the two CPUs near 35,000 or 49,000 transactions/s (p50 27 or
20 us). A round whose two runs fell in different states compares the host's states, not the
tools. This puts each run of CASE in a state by a threshold on one of its figures, prints every
run with its state, each tool's median in each state, and netchar against each peer over the
rounds where both ran in the same state and over the others.

    python3 -m netchar_bench.host_states CASE FIGURE THRESHOLD RESULTS.tsv [RESULTS.tsv ...]

FIGURE is `value` (the run is in the fast state when its figure is above THRESHOLD) or `p50`
(when its median latency in us is below THRESHOLD). RESULTS.tsv are newest.sh's results.tsv
files (in its log directory), one per run of the script; each file's rounds are its own.
"""

import statistics
import sys
from collections import defaultdict


def read_runs(paths, case):
    """{(file index, round): {tool: (value, p50 or None)}} of CASE's runs that gave a figure."""
    rounds = defaultdict(dict)
    for i, path in enumerate(paths):
        with open(path) as f:
            for line in f:
                cols = line.rstrip("\n").split("\t")
                if len(cols) < 6 or cols[1] != case or cols[3] != "ok":
                    continue
                p50 = float(cols[5]) if cols[5] not in ("", "-") else None
                rounds[(i, int(cols[0]))][cols[2]] = (float(cols[4]), p50)
    return rounds


def state_of(run, figure, threshold):
    value, p50 = run
    if figure == "value":
        return "fast" if value > threshold else "slow"
    if p50 is None:
        raise ValueError("a run without a p50 cannot be put in a state by its p50")
    return "fast" if p50 < threshold else "slow"


def report(rounds, figure, threshold):
    """The report's lines."""
    lines = []
    tools = sorted({t for r in rounds.values() for t in r}, key=lambda t: (t != "netchar", t))
    states = {k: {t: state_of(v, figure, threshold) for t, v in r.items()} for k, r in rounds.items()}
    lines.append("runs, round by round (f: fast state, s: slow):")
    lines.append("  %-8s " % "file.rnd" + " ".join("%16s" % t[:16] for t in tools))
    for k in sorted(rounds):
        cells = []
        for t in tools:
            if t in rounds[k]:
                cells.append("%14.6g %s" % (rounds[k][t][0], states[k][t][0]))
            else:
                cells.append("%16s" % "-")
        lines.append("  %-8s " % ("%d.%d" % (k[0] + 1, k[1])) + " ".join(cells))
    lines.append("each tool by state: runs in the fast state, median figure in each state:")
    for t in tools:
        by = {"fast": [], "slow": []}
        for k, r in rounds.items():
            if t in r:
                by[states[k][t]].append(r[t][0])
        med = {s: ("%.6g" % statistics.median(v)) if v else "-" for s, v in by.items()}
        lines.append("  %-16s fast in %2d of %2d runs; slow median %s, fast median %s"
                     % (t, len(by["fast"]), len(by["fast"]) + len(by["slow"]), med["slow"], med["fast"]))
    lines.append("netchar / peer, per round, by whether the two ran in the same state:")
    for t in tools:
        if t == "netchar":
            continue
        same, other = {"slow": [], "fast": []}, []
        for k, r in rounds.items():
            if "netchar" in r and t in r and r[t][0] > 0:
                ratio = r["netchar"][0] / r[t][0]
                if states[k]["netchar"] == states[k][t]:
                    same[states[k][t]].append(ratio)
                else:
                    other.append(ratio)
        lines.append("  %-16s both slow: %s; both fast: %s; different: %s"
                     % (t, summary(same["slow"]), summary(same["fast"]), summary(other)))
    return lines


def summary(ratios):
    if not ratios:
        return "no rounds"
    return "%d rounds, median %.3f, %d >= 1" % (len(ratios), statistics.median(ratios), sum(r >= 1 for r in ratios))


def main(argv):
    if len(argv) < 4 or argv[1] not in ("value", "p50"):
        sys.stderr.write("usage: host_states CASE value|p50 THRESHOLD RESULTS.tsv [RESULTS.tsv ...]\n")
        return 2
    case, figure = argv[0], argv[1]
    try:
        threshold = float(argv[2])
        rounds = read_runs(argv[3:], case)
        if not rounds:
            sys.stderr.write("host_states: no run of %s with a figure in %s\n" % (case, " ".join(argv[3:])))
            return 1
        print("\n".join(report(rounds, figure, threshold)))
    except (OSError, ValueError) as e:
        sys.stderr.write("host_states: %s\n" % e)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
