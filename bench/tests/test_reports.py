"""The reports, from the results.tsv of real short runs (bench/results/raw/*-results.tsv): the
text must be exactly the saved *-report.txt, which the report code printed before it moved out of
the shell scripts, so a change of layout or of a figure's arithmetic fails here.  Also the adapter
tables and the soak checks."""

import io
import os
import tempfile
import unittest
from contextlib import redirect_stdout

from support import RAW, raw, run_module

from netchar_bench import adapter_report, rr_report, soak, tcp_report, udp_report

KERNEL = "6.18.44-fc-v445"


def printed(main, *args):
    out = io.StringIO()
    with redirect_stdout(out):
        main([str(a) for a in args])
    return out.getvalue()


class Reports(unittest.TestCase):
    maxDiff = None

    def test_tcp(self):
        text = printed(tcp_report.main, RAW / "tcp-results.tsv", RAW / "tcp-notes.txt", 1, 1,
                       "netchar 0.1.0 (NETCHAR binary), iperf3 3.12, iperf 2.1.8", 37, KERNEL, 2,
                       "netchar iperf3 iperf2")
        self.assertEqual(text, raw("tcp-report.txt"))
        # the figures of the first row: medians of one round, ratio of the Gbit/s
        self.assertIn("TCP 1 stream        21.72    0.0%    0.311    8.42    0.0%    0.449    4.41"
                      "    0.0%    0.756    2.58x   4.93x", text)

    def test_udp(self):
        text = printed(udp_report.main, RAW / "udp-results.tsv", RAW / "udp-notes.txt", 1, 1,
                       "netchar 0.1.0 (NETCHAR binary), iperf3 3.12, iperf 2.1.8, nuttcp 6.1.2", 58, KERNEL, 2,
                       "netchar netchar-nogso netchar-gro netchar-q100 iperf3 iperf2 nuttcp")
        self.assertEqual(text, raw("udp-report.txt"))

    def test_rr(self):
        text = printed(rr_report.main, RAW / "rr-results.tsv", RAW / "rr-notes.txt", 1, 1,
                       "netchar 0.1.0 (NETCHAR binary), sockperf 3.7-no.git", 40, KERNEL, 2, "sockperf", 0, 1,
                       RAW / "rr-placements.tsv")
        self.assertEqual(text, raw("rr-report.txt"))

    def test_rr_same_core_target_reads_the_rounds_pairs(self):
        # netchar ahead of sockperf by 2% in rounds 1 and 3, the machine 30% slower in round 2
        # (and sockperf's run there retried to FAIL): the pairs are rounds 1 and 3 only.
        rows = [("1", "nc", "ok", 51000), ("1", "sockperf", "ok", 50000), ("2", "nc", "ok", 35000),
                ("2", "sockperf", "FAIL", ""), ("3", "nc", "ok", 40800), ("3", "sockperf", "ok", 40000)]
        with tempfile.TemporaryDirectory() as d:
            res, notes, pls = (os.path.join(d, n) for n in ("results.tsv", "notes.txt", "placements.tsv"))
            with open(res, "w") as f:
                for r, v, status, tps in rows:
                    f.write(f"{r}\ttcp\tsame\t{v}\t{status}\t{tps}\t20\t19\t30\t90\t1.0\t\n")
            open(notes, "w").close()
            open(pls, "w").close()
            text = printed(rr_report.main, res, notes, 1, 3, "netchar", 40, KERNEL, 2, "sockperf", 0, 1, pls)
        self.assertIn("PASS  TCP same core (0,0), blocking, 1 B: >= 1.00x sockperf per round (median of the rounds'"
                      " ratios): 1.020x (rounds 1.020, 1.020)", text)
        self.assertIn("n/a   UDP same core (0,0), blocking, 1 B: >= 1.00x sockperf per round", text)

    def test_tcp_report_without_peers_or_runs(self):
        with tempfile.TemporaryDirectory() as d:
            res = os.path.join(d, "results.tsv")
            notes = os.path.join(d, "notes.txt")
            with open(res, "w") as f:
                f.write("1\tup1\tnetchar\tFAIL\t\t\t\t0.5\t3.0\t\t\n")
            open(notes, "w").close()
            text = printed(tcp_report.main, res, notes, 1, 1, "netchar", 1, KERNEL, 2, "netchar")
        self.assertIn("TCP 1 stream         FAIL", text)
        self.assertIn("n/a   1 stream >= 1.00x iperf3 at no more CPU/GB: not measured", text)


class AdapterReports(unittest.TestCase):
    def rows(self, text):
        with tempfile.TemporaryDirectory() as d:
            res = os.path.join(d, "results.txt")
            with open(res, "w") as f:
                f.write(text)
            return adapter_report.read_runs(res)

    def test_adapters_median_ratio_spread_verdict(self):
        rows = self.rows("client-P1 iperf3 17e9\nclient-P1 netchar 16e9\nclient-P1 iperf3 18e9\n"
                         "client-P1 netchar 17.5e9\nserver-P1 iperf3 10e9\nserver-P1 netchar nan\n")
        out = io.StringIO()
        with redirect_stdout(out):
            adapter_report.adapters(rows)
        lines = out.getvalue().splitlines()
        # medians 17.5 and 16.75 Gbit/s, ratio 0.957, spreads 1/17.5 and 1.5/16.75; per round
        # 16/17 = 0.941 and 17.5/18 = 0.972, their median 0.957
        self.assertEqual(lines[1], "client-P1                17.50           16.75   0.957    5.7%/  9.0%   0.957   0.941-0.972  PASS")
        self.assertEqual(lines[2], "server-P1                10.00             nan     nan    0.0%/  nan%     nan           n/a  MISS")

    def test_paired_ratios_cancel_a_drifting_machine(self):
        # The machine's speed moves 4x between rounds; netchar is 4% ahead in three rounds of
        # four and 25% behind in one: the medians' ratio (20.61 vs 24 Gbit/s) says 0.859, the
        # per-round ratios' median 1.04.
        rows = self.rows("client-P4 iperf3 10e9\nclient-P4 netchar 10.4e9\nclient-P4 iperf3 18e9\n"
                         "client-P4 netchar 18.72e9\nclient-P4 iperf3 30e9\nclient-P4 netchar 22.5e9\n"
                         "client-P4 iperf3 40e9\nclient-P4 netchar 41.6e9\n")
        out = io.StringIO()
        with redirect_stdout(out):
            adapter_report.adapters(rows)
        self.assertEqual(out.getvalue().splitlines()[1],
                         "client-P4                24.00           20.61   0.859  125.0%/151.4%   1.040   0.750-1.040  PASS")

    def test_iperf2(self):
        rows = self.rows("server-P4 iperf 30e9\nserver-P4 netchar 27e9\n")
        out = io.StringIO()
        with redirect_stdout(out):
            adapter_report.iperf2(rows)
        self.assertEqual(out.getvalue().splitlines()[1],
                         "server-P4                30.00           27.00   0.900    0.0%/  0.0%   0.900   0.900-0.900  MISS")


class Soak(unittest.TestCase):
    def test_results_that_account_exactly_are_ok(self):
        for name in ("netchar-tcp-up1.json", "netchar-tcp-rev1.json", "netchar-udp-u64.json", "netchar-rr-udp-cross.json"):
            with self.subTest(name=name):
                self.assertEqual(soak.check_result(RAW / name), "ok")

    def test_wrong_results_give_one_reason(self):
        with self.assertRaisesRegex(soak.Failed, "not one JSON document"):
            soak.check_result(RAW / "nuttcp-6.1.2-udp-u64.txt")
        with self.assertRaisesRegex(soak.Failed, "lacks a field"):
            soak.check_result(RAW / "iperf3-3.12-tcp-up1.json")
        p = run_module("soak", "check", RAW / "iperf3-3.12-tcp-up1.json")
        self.assertEqual(p.returncode, 1)
        self.assertEqual(len(p.stdout.splitlines()), 1)
        self.assertNotIn("Traceback", p.stdout + p.stderr)

    def test_summary_verdict(self):
        env = dict(os.environ, SOAK_TESTS="9", SOAK_FAILURES="0", SOAK_WARMUP="30", SOAK_LOGGED="9",
                   SOAK_SERVER_STATUS="0")
        flat = run_module("soak", "summary", stdin="0 1000 5 2\n30 1100 6 3\n65 1120 5 2\n", env=env)
        self.assertEqual(flat.returncode, 0, flat.stderr)
        self.assertIn("verdict          flat (last RSS at most 3.2 MiB;", flat.stdout)
        grew = run_module("soak", "summary", stdin="0 1000 5 2\n30 1100 6 3\n65 4120 6 2\n", env=env)
        self.assertEqual(grew.returncode, 1)
        self.assertIn("NOT FLAT: RSS grew: last 4.0 MiB > 3.2 MiB (10% + 2 MiB over 1.1 MiB); fds not back: 5 -> 6",
                      grew.stdout)


if __name__ == "__main__":
    unittest.main()


class LwipReport(unittest.TestCase):
    """bench/lwip.sh's report from one real round (bench/results/raw/lwip/)."""

    def test_lwip(self):
        from netchar_bench import lwip_report

        text = printed(lwip_report.main, RAW / "lwip" / "results.tsv")
        self.assertEqual(text, raw("lwip/report.txt"))
        # the figures read by hand from the raw files: tcp-up's receiver bits_per_second / 1e6,
        # lwiperf's "N bytes in M ms" as N * 8 / M / 1e3
        self.assertIn("up      1019.7  (1 runs)", text)
        self.assertIn("target >= 0.95: PASS", text)

    def test_lwip_without_lwiperf_or_usable_runs(self):
        from netchar_bench import lwip_report

        with tempfile.TemporaryDirectory() as d:
            res = os.path.join(d, "results.tsv")
            with open(os.path.join(d, "tcp-up.1.out"), "w") as f:
                f.write('{"error": "the server went silent"}')
            with open(res, "w") as f:
                f.write("tcp-up\t1\ttcp-up.1.out\nrr\t1\tmissing.out\n")
            text = printed(lwip_report.main, res)
        self.assertIn("up           -  (0 runs)", text)
        self.assertIn("no lwiperf runs", text)
        self.assertIn("- transactions/s", text)
