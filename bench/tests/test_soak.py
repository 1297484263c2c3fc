"""The peer-protocol checks of bench/soak.sh (netchar_bench.soak), against real outputs saved in
bench/tests/soak/ (its README.md gives the command behind each file); a wrong result is a copy
of a real one with one figure changed."""

import json
import os
import socket
import tempfile
import unittest
from pathlib import Path

from support import run_module

from netchar_bench import soak

FIX = Path(__file__).resolve().parent / "soak"


class Changed:
    """A temporary copy of fixture NAME after EDIT (a function of the parsed JSON, or of the
    text for a text fixture); its path is the value of the with statement."""

    def __init__(self, name, edit):
        self.name, self.edit = name, edit

    def __enter__(self):
        text = (FIX / self.name).read_text()
        if self.name.endswith(".json"):
            doc = json.loads(text)
            self.edit(doc)
            text = json.dumps(doc)
        else:
            text = self.edit(text)
        self.tmp = tempfile.NamedTemporaryFile("w", suffix=Path(self.name).suffix, delete=False)
        self.tmp.write(text)
        self.tmp.close()
        return self.tmp.name

    def __exit__(self, *exc):
        os.unlink(self.tmp.name)


def streams(doc, flow, role):
    return [s for s in doc["streams"] if s["flow"] == flow and s["role"] == role]


class PeerCheck(unittest.TestCase):
    CASES = {
        "netchar-echo-tcp.json": ["tcp", "127.0.0.1:7", "--proto", "echo", "-t", "1"],
        "netchar-echo-udp.json": ["udp", "127.0.0.1:7", "--proto", "echo", "-b", "50M", "-t", "1"],
        "netchar-echo-rr.json": ["rr", "127.0.0.1:7", "--proto", "echo", "-t", "1"],
        "netchar-iperf3-udp.json": ["udp", "127.0.0.1:5201", "--proto", "iperf3", "-b", "50M", "-t", "1"],
        "netchar-iperf2-tcp.json": ["tcp", "127.0.0.1:5001", "--proto", "iperf2", "-t", "1"],
        "netchar-netio-32k.json": ["suite", "netio", "127.0.0.1", "--proto", "netio", "-b", "32k"],
        "netchar-nc-test-ecos-quick.json": ["suite", "ecos", "127.0.0.1", "--proto", "nc-test", "--quick"],
    }

    def test_real_results_are_ok(self):
        for name, args in self.CASES.items():
            with self.subTest(name=name):
                self.assertEqual(soak.check_peer(FIX / name, args), "ok")

    def test_the_protocol_must_be_the_one_asked_for(self):
        with self.assertRaisesRegex(soak.Failed, "protocol 'netio', asked for 'iperf3'"):
            soak.check_peer(FIX / "netchar-netio-32k.json", ["suite", "netio", "h", "--proto", "iperf3"])

    def test_an_error_in_one_result_of_a_suite(self):
        def edit(doc):
            doc[3]["error"] = "the slave sent no results"
        with Changed("netchar-nc-test-ecos-quick.json", edit) as path:
            with self.assertRaisesRegex(soak.Failed, "^result 4 of 9: error: the slave sent no results$"):
                soak.check_peer(path, self.CASES["netchar-nc-test-ecos-quick.json"])

    def test_echo_must_get_every_byte_back(self):
        def edit(doc):
            streams(doc, "down", "receiver")[0]["bytes"] -= 1
        with Changed("netchar-echo-tcp.json", edit) as path:
            with self.assertRaisesRegex(soak.Failed, r"echo: sent (\d+) bytes, \d+ came back"):
                soak.check_peer(path, self.CASES["netchar-echo-tcp.json"])

    def test_echo_datagrams_back_must_be_received_or_lost(self):
        def edit(doc):
            streams(doc, "down", "receiver")[0]["udp_received"]["packets"] -= 2
        with Changed("netchar-echo-udp.json", edit) as path:
            with self.assertRaisesRegex(soak.Failed, r"echo: sent \d+ datagrams, received \+ lost \d+"):
                soak.check_peer(path, self.CASES["netchar-echo-udp.json"])

    def test_udp_with_both_ends_must_account_exactly(self):
        def edit(doc):
            streams(doc, "up", "sender")[0]["udp_sent"]["packets"] += 1
        with Changed("netchar-iperf3-udp.json", edit) as path:
            with self.assertRaisesRegex(soak.Failed, r"stream 1 up: sent \d+ != received \d+ \+ lost 0"):
                soak.check_peer(path, self.CASES["netchar-iperf3-udp.json"])

    def test_a_stream_that_moved_nothing(self):
        def edit(doc):
            doc["streams"][0]["bytes"] = 0
        with Changed("netchar-iperf2-tcp.json", edit) as path:
            with self.assertRaisesRegex(soak.Failed, "stream 1 up sender: 0 bytes"):
                soak.check_peer(path, self.CASES["netchar-iperf2-tcp.json"])

    def test_missing_fields_and_no_json_are_one_line(self):
        with self.assertRaisesRegex(soak.Failed, "lacks a field"):
            soak.check_peer(FIX / "iperf3-3.12-tcp-up.json", ["tcp", "h", "--proto", "iperf3"])
        p = run_module("soak", "peer-check", FIX / "iperf2-2.1.8-udp-up.txt", "tcp", "h", "--proto", "iperf2")
        self.assertEqual(p.returncode, 1)
        self.assertEqual(len(p.stdout.splitlines()), 1)
        self.assertIn("not one JSON document", p.stdout)
        self.assertNotIn("Traceback", p.stdout + p.stderr)


class Iperf3Check(unittest.TestCase):
    def test_real_results_are_ok(self):
        for name in ("iperf3-3.12-tcp-up.json", "iperf3-3.12-tcp-rev.json", "iperf3-3.12-udp-up.json"):
            with self.subTest(name=name):
                self.assertEqual(soak.check_iperf3(FIX / name), "ok")

    def test_tcp_up_must_be_exact(self):
        def edit(doc):
            doc["end"]["sum_received"]["bytes"] -= 1
        with Changed("iperf3-3.12-tcp-up.json", edit) as path:
            with self.assertRaisesRegex(soak.Failed, r"sender \d+ bytes, the netchar receiver \d+"):
                soak.check_iperf3(path)

    def test_tcp_reverse_may_lose_the_tail_but_not_gain(self):
        # The real file: the client stopped reading before the last bytes the server sent.
        doc = json.loads((FIX / "iperf3-3.12-tcp-rev.json").read_text())
        self.assertLess(doc["end"]["sum_received"]["bytes"], doc["end"]["sum_sent"]["bytes"])

        def edit(doc):
            doc["end"]["sum_received"]["bytes"] = doc["end"]["sum_sent"]["bytes"] + 1
        with Changed("iperf3-3.12-tcp-rev.json", edit) as path:
            with self.assertRaisesRegex(soak.Failed, "more than the"):
                soak.check_iperf3(path)

    def test_udp_up_total_is_what_was_sent(self):
        def edit(doc):
            doc["end"]["sum_received"]["packets"] -= 1
        with Changed("iperf3-3.12-udp-up.json", edit) as path:
            with self.assertRaisesRegex(soak.Failed, r"the netchar receiver's total \d+"):
                soak.check_iperf3(path)

    def test_an_iperf3_error(self):
        with Changed("iperf3-3.12-tcp-up.json", lambda d: d.update(error="the server is busy running a test. try again later")) as path:
            with self.assertRaisesRegex(soak.Failed, "^error: the server is busy"):
                soak.check_iperf3(path)
        p = run_module("soak", "iperf3-check", FIX / "netchar-echo-tcp.json")
        self.assertEqual((p.returncode, len(p.stdout.splitlines())), (1, 1))
        self.assertNotIn("Traceback", p.stdout + p.stderr)


class Iperf2Check(unittest.TestCase):
    def test_real_outputs_are_ok(self):
        for name, args in {
            "iperf2-2.1.8-udp-up.txt": ["-c", "h", "-u", "-b", "50M"],
            "iperf2-2.1.8-udp-rev.txt": ["-c", "h", "-u", "-b", "50M", "-R"],
            "iperf2-2.1.8-tcp-dualtest.txt": ["-c", "h", "-d", "-L", "5002"],
            "iperf2-2.1.8-tcp-P2.txt": ["-c", "h", "-P", "2"],
        }.items():
            with self.subTest(name=name):
                self.assertEqual(soak.check_iperf2(FIX / name, args), "ok")

    def test_iperf_exits_0_after_these(self):
        with self.assertRaisesRegex(soak.Failed, "^tcp connect failed: Connection refused$"):
            soak.check_iperf2(FIX / "iperf2-2.1.8-tcp-refused.txt", ["-c", "h"])
        with self.assertRaisesRegex(soak.Failed, "^read failed: Connection refused$"):
            soak.check_iperf2(FIX / "iperf2-2.1.8-udp-no-server.txt", ["-c", "h", "-u"])

    def test_a_missing_server_report_or_stream(self):
        with Changed("iperf2-2.1.8-udp-up.txt", lambda t: t.split("[  1] Server Report:")[0]) as path:
            with self.assertRaisesRegex(soak.Failed, "no server report"):
                soak.check_iperf2(path, ["-c", "h", "-u"])
        with self.assertRaisesRegex(soak.Failed, r"report lines for 1 stream\(s\), 2 expected"):
            soak.check_iperf2(FIX / "iperf2-2.1.8-udp-up.txt", ["-c", "h", "-r"])
        with self.assertRaisesRegex(soak.Failed, r"report lines for 2 stream\(s\), 1 expected"):
            soak.check_iperf2(FIX / "iperf2-2.1.8-tcp-P2.txt", ["-c", "h"])


class Ports(unittest.TestCase):
    def test_each_port_and_the_next_are_free(self):
        ports = soak.free_ports(4)
        self.assertEqual(len(ports), 4)
        for p in ports:
            self.assertFalse(any(abs(p - q) < 2 for q in ports if q != p))
            for port in (p, p + 1):
                for kind in (socket.SOCK_STREAM, socket.SOCK_DGRAM):
                    with socket.socket(socket.AF_INET, kind) as s:
                        s.bind(("127.0.0.1", port))
        p = run_module("soak", "ports", 3)
        self.assertEqual((p.returncode, len(p.stdout.split())), (0, 3), p.stderr)


class Summary(unittest.TestCase):
    ENV = dict(os.environ, SOAK_TESTS="9", SOAK_FAILURES="0", SOAK_WARMUP="30", SOAK_LOGGED="12",
               SOAK_SERVER_STATUS="0", SOAK_LOGGED_BY="iperf3 4, native 8")

    def test_anonymous_rss_and_log_lines_are_printed(self):
        p = run_module("soak", "summary", stdin="0 1000 5 2 200\n30 1100 6 3 300\n65 1120 5 2 310\n", env=self.ENV)
        self.assertEqual(p.returncode, 0, p.stderr)
        self.assertIn("server log lines iperf3 4, native 8\n", p.stdout)
        self.assertIn("RSS anonymous    first 0.2 MiB, after warm-up 0.3 MiB, max 0.3 MiB, last 0.3 MiB", p.stdout)

    def test_without_the_anonymous_column_as_before(self):
        p = run_module("soak", "summary", stdin="0 1000 5 2\n30 1100 6 3\n65 4120 6 2\n", env=self.ENV)
        self.assertEqual(p.returncode, 1)
        self.assertNotIn("RSS anonymous", p.stdout)
        self.assertIn("NOT FLAT: RSS grew", p.stdout)


if __name__ == "__main__":
    unittest.main()
