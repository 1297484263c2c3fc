"""bench/newest.sh's parsers (netperf TCP_STREAM and TCP_CRR, netchar crr, bench/ref/udp_ref)
against real outputs of one short run (bench/results/raw/README.md), and its report against the
text it printed for that run's rows."""

import unittest

from support import RAW, raw, run_module

from netchar_bench import newest_report, peers
from netchar_bench.peers import ParseError


class NewestParsers(unittest.TestCase):
    def test_netperf_tcp_stream_is_its_throughput_in_bits_per_second(self):
        r = peers.tcp_netperf(raw("netperf-2.7.1-tcp-stream.txt"))
        self.assertAlmostEqual(r["bps"], 3100.56e6)
        self.assertEqual(r["bytes"], int(3100.56e6 * 1.02 / 8))
        self.assertIsNone(r["cpu"])

    def test_netperf_tcp_stream_without_units_is_an_error(self):
        with self.assertRaisesRegex(ParseError, "no netperf -o"):
            peers.tcp_netperf("3100.56\n")
        with self.assertRaisesRegex(ParseError, "unknown unit"):
            peers.tcp_netperf("3100.56,10^5bits/s,1.0\n")

    def test_netperf_tcp_crr_reads_as_rr(self):
        r = peers.rr_netperf(raw("netperf-2.7.1-tcp-crr.txt"))
        self.assertEqual((r["tps"], r["mean"], r["p50"], r["p99"]), (13365.72, 74.52, 41.0, 820.0))

    def test_netchar_crr_is_connections_per_second_and_their_latency(self):
        r = peers.crr_netchar(raw("netchar-crr.json"))
        self.assertAlmostEqual(r["tps"], 8219.73940269031)
        self.assertAlmostEqual(r["p50"], 41.375)
        self.assertAlmostEqual(r["p99"], 2136.063)

    def test_udp_ref_counts_received_datagrams_over_the_receivers_interval(self):
        r = peers.udp_ref(raw("udp_ref-u64.txt"), 64)
        self.assertEqual((r["sent"], r["rx"]), (187392, 161223))
        self.assertAlmostEqual(r["rx"] / r["rx_secs"], 161223 / 1.019964)
        with self.assertRaisesRegex(ParseError, "not 1472"):
            peers.udp_ref(raw("udp_ref-u64.txt"), 1472)
        with self.assertRaisesRegex(ParseError, "no udp_ref line"):
            peers.udp_ref("", 64)

    def test_command_lines_take_the_new_tools(self):
        p = run_module("peers", "tcp", "netperf", RAW / "netperf-2.7.1-tcp-stream.txt", "up", 1, 0)
        self.assertEqual(p.returncode, 0, p.stderr)
        self.assertTrue(p.stdout.startswith("3.1006 "))
        p = run_module("peers", "udp", "udp_ref", RAW / "udp_ref-u64.txt", 64, 1, "max")
        self.assertEqual(p.returncode, 0, p.stderr)
        self.assertTrue(p.stdout.startswith("187392 1.011296 161223 1.019964 "))
        p = run_module("peers", "rr", "netchar", RAW / "netchar-crr.json", "crr", 1, 0, 1, 0, 1)
        self.assertEqual(p.returncode, 0, p.stderr)
        self.assertTrue(p.stdout.startswith("8219.7 "))


class NewestReport(unittest.TestCase):
    def test_the_report_is_the_text_saved_with_its_rows(self):
        p = run_module("newest_report", RAW / "newest-results.tsv", RAW / "newest-notes.txt")
        self.assertEqual(p.returncode, 0, p.stderr)
        self.assertEqual(p.stdout, raw("newest-report.txt"))

    def test_ratios_are_paired_by_round(self):
        rows = [dict(round=r, case="rr.tcp.same", tool=t, ok=True, value=v, p50=None, p99=None, placement="", notes="")
                for r, t, v in ((1, "netchar", 110.0), (1, "netperf", 100.0), (2, "netchar", 90.0), (2, "netperf", 100.0),
                                (3, "netchar", 50.0))]
        rs = newest_report.paired(rows, "rr.tcp.same", "netchar", "netperf")
        self.assertEqual(rs, [1.1, 0.9])
        out = "\n".join(newest_report.targets(rows))
        self.assertIn("MISS TCP rr same core >= 1.00x netperf in every round: 1.000 (0.900-1.100, 1/2 rounds >= 1)", out)

    def test_skip_rx_copy_is_read_against_iperf3s_own_at_1_30(self):
        rows = [dict(round=r, case="skip1", tool=t, ok=True, value=v, p50=None, p99=None, placement="", notes="")
                for r, t, v in ((1, "netchar", 40.0), (1, "iperf3", 31.0), (2, "netchar", 36.0), (2, "iperf3", 30.0),
                                (3, "netchar", 30.0), (3, "iperf3", 25.0))]
        out = "\n".join(newest_report.targets(rows))
        self.assertIn("MISS TCP 1 --skip-rx-copy >= 1.30x iperf3's own --skip-rx-copy (median): 1.200 (1.200-1.290, 3/3 rounds >= 1)", out)
        rows[0]["value"] = rows[2]["value"] = 42.0
        rows[4]["value"] = 33.0
        out = "\n".join(newest_report.targets(rows))
        self.assertIn("PASS TCP 1 --skip-rx-copy >= 1.30x iperf3's own --skip-rx-copy (median): 1.355", out)


if __name__ == "__main__":
    unittest.main()
