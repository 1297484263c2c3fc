"""host_states: each run put in a state by its own figure, and netchar against a peer over the
rounds where the two ran in the same state, apart from the others."""

import os
import tempfile
import unittest

from support import run_module

# round, case, tool, status, value, p50: two rounds with both tools slow, one with both fast,
# one with the peer alone fast (netchar behind only there), and a failed run that is left out.
ROWS = """\
1\trr.tcp.cross\tnetchar\tok\t36000\t26.5\t45.0\tplacement\t
1\trr.tcp.cross\tnetperf\tok\t35000\t27.0\t46.0\tplacement\t
2\trr.tcp.cross\tnetchar\tok\t36500\t26.4\t45.0\tplacement\t
2\trr.tcp.cross\tnetperf\tok\t37000\t26.0\t46.0\tplacement\t
3\trr.tcp.cross\tnetchar\tok\t50000\t19.1\t35.0\tplacement\t
3\trr.tcp.cross\tnetperf\tok\t48000\t20.0\t37.0\tplacement\t
4\trr.tcp.cross\tnetchar\tok\t36000\t26.5\t45.0\tplacement\t
4\trr.tcp.cross\tnetperf\tok\t48000\t20.0\t37.0\tplacement\t
5\trr.tcp.cross\tnetchar\tFAIL\t\t\t\t\t
5\trr.tcp.cross\tnetperf\tok\t35000\t27.0\t46.0\tplacement\t
5\ttcp4\tnetchar\tok\t24.0\t\t\tplacement\t
"""


class HostStates(unittest.TestCase):
    def run_on(self, *args, rows=ROWS):
        with tempfile.TemporaryDirectory() as d:
            path = os.path.join(d, "results.tsv")
            with open(path, "w") as f:
                f.write(rows)
            return run_module("host_states", *args, path)

    def test_rounds_are_compared_within_a_state_and_apart_from_mixed_ones(self):
        p = self.run_on("rr.tcp.cross", "p50", 23)
        self.assertEqual(p.returncode, 0, p.stderr)
        out = p.stdout.splitlines()
        self.assertIn("  netchar          fast in  1 of  4 runs; slow median 36000, fast median 50000", out)
        self.assertIn("  netperf          fast in  2 of  5 runs; slow median 35000, fast median 48000", out)
        # Round 1: 36000/35000; round 2: 36500/37000; round 3 both fast: 50000/48000; round 4
        # mixed: 36000/48000 (the host, not the tools); round 5 has no netchar figure.
        self.assertIn("  netperf          both slow: 2 rounds, median 1.008, 1 >= 1; both fast: 1 rounds, "
                      "median 1.042, 1 >= 1; different: 1 rounds, median 0.750, 0 >= 1", out)
        self.assertIn("  1.4               36000 s          48000 f", out)

    def test_a_threshold_on_the_figure_itself(self):
        p = self.run_on("rr.tcp.cross", "value", 40000)
        self.assertEqual(p.returncode, 0, p.stderr)
        self.assertIn("netchar          fast in  1 of  4 runs", p.stdout)

    def test_bad_input_is_one_line_and_a_failure(self):
        p = self.run_on("crr", "p50", 23)
        self.assertEqual((p.returncode, p.stdout), (1, ""))
        self.assertRegex(p.stderr, r"^host_states: no run of crr with a figure in .*results\.tsv\n$")
        p = self.run_on("tcp4", "p50", 23)
        self.assertEqual((p.returncode, p.stdout), (1, ""))
        self.assertEqual(p.stderr, "host_states: a run without a p50 cannot be put in a state by its p50\n")
        p = self.run_on("tcp4", "mean", 23)
        self.assertEqual(p.returncode, 2)


if __name__ == "__main__":
    unittest.main()
