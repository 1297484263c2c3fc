"""The closing lines of the paired scripts (rr_pair.sh): each protocol's cost over its rounds,
as a mean with its 95% confidence interval.

A round's cost is netchar's CPU per transaction over the peer's, both measured in one window;
the rounds of one run are independent samples of it, so Student's t gives the interval (as
ministat does for its comparisons). An interval wholly below 1 says netchar did less work per
transaction; one that straddles 1 says the rounds cannot tell the two apart.
"""

import math
import sys

# Two-sided 95% quantiles of Student's t by degrees of freedom (standard table values).
_T975 = {1: 12.706, 2: 4.303, 3: 3.182, 4: 2.776, 5: 2.571, 6: 2.447, 7: 2.365, 8: 2.306,
         9: 2.262, 10: 2.228, 11: 2.201, 12: 2.179, 13: 2.160, 14: 2.145, 15: 2.131, 16: 2.120,
         17: 2.110, 18: 2.101, 19: 2.093, 20: 2.086, 21: 2.080, 22: 2.074, 23: 2.069, 24: 2.064,
         25: 2.060, 26: 2.056, 27: 2.052, 28: 2.048, 29: 2.045, 30: 2.042, 40: 2.021, 60: 2.000,
         120: 1.980}


def t975(df):
    """The quantile for `df` degrees of freedom; between table rows, the next smaller df's
    (the wider interval)."""
    if df < 1:
        raise ValueError("a confidence interval needs two samples or more")
    return _T975[max(k for k in _T975 if k <= df)] if df <= 120 else 1.960


def mean_ci95(values):
    """(mean, half-width of the 95% confidence interval) of two values or more."""
    n = len(values)
    mean = sum(values) / n
    sd = math.sqrt(sum((v - mean) ** 2 for v in values) / (n - 1)) if n > 1 else 0.0
    return mean, t975(n - 1) * sd / math.sqrt(n)


def verdict(mean, half):
    if mean + half < 1:
        return "netchar does less work per transaction"
    if mean - half > 1:
        return "netchar does more work per transaction"
    return "the rounds cannot tell the two apart"


def summary_lines(rows):
    """`rows`: (protocol, cost) per round, in order; one line per protocol."""
    by_proto = {}
    for proto, cost in rows:
        by_proto.setdefault(proto, []).append(cost)
    out = []
    for proto, costs in by_proto.items():
        below = sum(c < 1 for c in costs)
        if len(costs) < 2:
            out.append(f"{proto:<5} cost {costs[0]:.3f} (one round: no interval)")
            continue
        mean, half = mean_ci95(costs)
        out.append(f"{proto:<5} cost {mean:.4f} ± {half:.4f} (95%, {len(costs)} rounds, {below} below 1;"
                   f" {min(costs):.3f}–{max(costs):.3f}): {verdict(mean, half)}")
    return out


def main(argv):
    rows = []
    with open(argv[0]) as f:
        for line in f:
            proto, cost = line.split()
            rows.append((proto, float(cost)))
    for line in summary_lines(rows):
        print(line)


if __name__ == "__main__":
    main(sys.argv[1:])
