"""The command lines the bench scripts run: `python3 -m netchar_bench.peers ...` prints the line
that becomes a results.tsv row, and exits 1 with one line on stderr (no traceback, nothing on
stdout) when the output is unusable."""

import os
import tempfile
import unittest

from support import RAW, run_module


class PeersCommand(unittest.TestCase):
    def line(self, *args):
        p = run_module("peers", *args)
        self.assertEqual(p.returncode, 0, p.stderr)
        self.assertEqual(p.stderr, "")
        return p.stdout

    def test_tcp_lines_are_the_rows_the_run_wrote(self):
        # bench/results/raw/tcp-results.tsv, round 1: gbps bytes cpu retransmits (notes: none)
        self.assertEqual(self.line("tcp", "netchar", RAW / "netchar-tcp-up1.json", "up", 1, 0),
                         "21.7182 2717515776 0.8443 2 \n")
        self.assertEqual(self.line("tcp", "iperf3", RAW / "iperf3-3.12-tcp-up1.json", "up", 1, 0),
                         "8.4157 1055391744 0.4735 4 \n")
        self.assertEqual(self.line("tcp", "iperf2", RAW / "iperf2-2.1.8-tcp-up2-server.csv", "up", 1, 0),
                         "17.4350 2183266424 - - \n")
        self.assertEqual(self.line("tcp", "netchar", RAW / "netchar-tcp-rev1.json", "down", 1, 0),
                         "11.6256 1454505984 0.6239 3 \n")

    def test_udp_lines(self):
        self.assertEqual(self.line("udp", "netchar", RAW / "netchar-udp-u64.json", 64, 1, "max"),
                         "240832 1.005086 153065 0.971898 80635262.6 122682035.7 36.4432 0.2855 \n")
        self.assertEqual(self.line("udp", "iperf2", RAW / "iperf2-2.1.8-udp-u64-client.txt", 64, 1, "max",
                                   RAW / "iperf2-2.1.8-udp-u64-server.txt"),
                         "149485 1.000000 81384 0.998700 41722847.7 76536320.0 46.0000 - \n")
        self.assertEqual(self.line("udp", "nuttcp", RAW / "nuttcp-6.1.2-udp-u64.txt", 64, 1, "max"),
                         "61710 1.028083 17907 1.028083 8918300.0 30732474.0 70.9810 0.2570 \n")

    def test_rr_lines(self):
        self.assertEqual(self.line("rr", "netchar", RAW / "netchar-rr-udp-cross.json", "udp", 1, 0, 1, 0, 1),
                         "11885.8 83.432 50.719 126.911 7991.295 \n")
        self.assertEqual(self.line("rr", "sockperf", RAW / "sockperf-3.7-rr-tcp-same.txt", "tcp", 14, 0, 0, 0, 1),
                         "48716.4 20.510 19.275 43.210 207.496 \n")
        self.assertEqual(self.line("placement", RAW / "netchar-rr-udp-cross.json"),
                         "client pinned to CPU 0, server pinned to CPU 1\n")

    def test_unusable_output_is_one_line_and_exit_1(self):
        with tempfile.TemporaryDirectory() as d:
            junk = os.path.join(d, "junk.out")
            with open(junk, "w") as f:
                f.write('{"end": {"sum_sent": {}}}\n')
            for args in (("tcp", "iperf3", junk, "up", 1, 0), ("tcp", "netchar", junk, "up", 1, 0),
                         ("tcp", "iperf2", junk, "up", 1, 0), ("udp", "iperf3", junk, 64, 1, "max"),
                         ("udp", "nuttcp", junk, 64, 1, "max"), ("udp", "iperf2", junk, 64, 1, "max", junk),
                         ("rr", "sockperf", junk, "tcp", 14, 0, 0, 0, 1), ("rr", "netchar", junk, "tcp", 1, 0, 0, 0, 1),
                         ("tcp", "iperf3", os.path.join(d, "missing.out"), "up", 1, 0)):
                with self.subTest(args=args):
                    p = run_module("peers", *args)
                    self.assertEqual(p.returncode, 1)
                    self.assertEqual(p.stdout, "")
                    self.assertEqual(len(p.stderr.strip().splitlines()), 1, p.stderr)
                    self.assertNotIn("Traceback", p.stderr)

    def test_adapter_figures_are_nan_when_unusable(self):
        self.assertEqual(self.line("bps", RAW / "iperf3-3.12-tcp-up1.json"), "8415715550.735703\n")
        p = run_module("peers", "bps", RAW / "nuttcp-6.1.2-udp-u64.txt")
        self.assertEqual((p.returncode, p.stdout), (0, "nan\n"))
        p = run_module("peers", "csv-bps", stdin=(RAW / "iperf2-2.1.8-tcp-up2-server.csv").read_text())
        self.assertEqual((p.returncode, p.stdout), (0, "%r\n" % ((1734606908 + 448659516) * 8 / 1.0)))
        p = run_module("peers", "csv-bps", stdin="no CSV here\n")
        self.assertEqual((p.returncode, p.stdout), (0, "nan\n"))

    def test_usage(self):
        p = run_module("peers", "tcp", "netchar")
        self.assertEqual(p.returncode, 2)
        self.assertIn("usage:", p.stderr)


if __name__ == "__main__":
    unittest.main()
