"""Every parser against a saved raw output (bench/results/raw/, see its README.md for the
commands), with the expected figures read from the fixture by hand, and against malformed
input, which must raise ParseError (one clear line), never return a figure."""

import unittest

from support import raw

from netchar_bench import peers
from netchar_bench.peers import ParseError


class TcpNetchar(unittest.TestCase):
    def test_upload_receiver_rate_bytes_cpu_retransmits(self):
        r = peers.tcp_netchar(raw("netchar-tcp-up1.json"), "up", 1.0, False)
        # .summary.up.receiver
        self.assertEqual(r["bps"], 21718239131.277714)
        self.assertEqual(r["bytes"], 2717515776)
        # .cpu.local + .cpu.remote, user + system seconds
        self.assertAlmostEqual(r["cpu"], 0.007081 + 0.426396 + 0.013588 + 0.397212, places=9)
        # .summary.up.sender.retransmits
        self.assertEqual(r["retransmits"], 2)
        self.assertEqual(r["notes"], [])

    def test_reverse_reads_the_down_summary(self):
        r = peers.tcp_netchar(raw("netchar-tcp-rev1.json"), "down", 1.0, False)
        self.assertEqual(r["bps"], 11625620469.355558)
        self.assertEqual(r["bytes"], 1454505984)
        self.assertEqual(r["retransmits"], 3)

    def test_wrong_direction_is_an_error_not_a_figure(self):
        with self.assertRaisesRegex(ParseError, r"no summary\.up"):
            peers.tcp_netchar(raw("netchar-tcp-rev1.json"), "up", 1.0, False)

    def test_zerocopy_asked_but_not_recorded_is_noted(self):
        r = peers.tcp_netchar(raw("netchar-tcp-up1.json"), "up", 1.0, True)
        self.assertIn("zerocopy-not-recorded-in-test-spec", r["notes"])

    def test_duration_far_from_the_asked_one_is_noted(self):
        r = peers.tcp_netchar(raw("netchar-tcp-up1.json"), "up", 3.0, False)
        self.assertIn("receiver-seconds=1.001(expected~3)", r["notes"])

    def test_malformed(self):
        for text in ("", "not json", "[1, 2]", '{"summary": {"up": {"sender": {"bytes": 1}}}}',
                     '{"summary": {"up": {"sender": "x", "receiver": 3}}}'):
            with self.subTest(text=text), self.assertRaises(ParseError):
                peers.tcp_netchar(text, "up", 1.0, False)


class TcpIperf3(unittest.TestCase):
    def test_receiver_rate_bytes_cpu_retransmits(self):
        r = peers.tcp_iperf3(raw("iperf3-3.12-tcp-up1.json"))
        # .end.sum_received
        self.assertEqual(r["bps"], 8415715550.735703)
        self.assertEqual(r["bytes"], 1055391744)
        # (host_total + remote_total) % of one core over sum_received.seconds
        self.assertAlmostEqual(r["cpu"], (10.574692684860459 + 36.625033265854725) / 100 * 1.003258)
        self.assertEqual(r["retransmits"], 4)

    def test_malformed(self):
        with self.assertRaisesRegex(ParseError, "iperf3 error: unable to connect"):
            peers.tcp_iperf3('{"start": {}, "error": "unable to connect to server"}')
        with self.assertRaisesRegex(ParseError, "sum_received"):
            peers.tcp_iperf3('{"end": {"sum_sent": {}}}')
        with self.assertRaisesRegex(ParseError, "not JSON"):
            peers.tcp_iperf3("iperf3: error - unable to connect")


class TcpIperf2(unittest.TestCase):
    def test_server_csv_sums_the_streams(self):
        r = peers.tcp_iperf2(raw("iperf2-2.1.8-tcp-up2-server.csv"))
        self.assertEqual(r["bytes"], 1734606908 + 448659516)
        self.assertEqual(r["bps"], 13897994113 + 3536992307)
        self.assertIsNone(r["cpu"])          # iperf2 reports no CPU: process accounting instead
        self.assertIsNone(r["retransmits"])

    def test_client_csv_of_a_reverse_run(self):
        r = peers.tcp_iperf2(raw("iperf2-2.1.8-tcp-rev1-client.csv"))
        self.assertEqual(r["bytes"], 1485701120)
        self.assertEqual(r["bps"], 11816564772)

    def test_sum_line_is_skipped(self):
        text = raw("iperf2-2.1.8-tcp-up2-server.csv") + "19700101000000,127.0.0.1,0,127.0.0.1,25302,-1,0.0-1.0,999,999\n"
        self.assertEqual(peers.tcp_iperf2(text)["bytes"], 1734606908 + 448659516)

    def test_csv_bps_over_the_longest_interval(self):
        self.assertEqual(peers.iperf2_csv_bps(raw("iperf2-2.1.8-tcp-up2-server.csv")),
                         (1734606908 + 448659516) * 8 / 1.0)

    def test_malformed(self):
        for text in ("", "Client connecting to 127.0.0.1, TCP port 5001\n",
                     "19700101000000,127.0.0.1,1,127.0.0.1,2,3,0.0-1.0,many,13897994113\n"):
            with self.subTest(text=text), self.assertRaises(ParseError):
                peers.tcp_iperf2(text)
            with self.subTest(text=text), self.assertRaises(ParseError):
                peers.iperf2_csv_bps(text)


class ReceiverBps(unittest.TestCase):
    def test_iperf3_and_netchar(self):
        self.assertEqual(peers.receiver_bps(raw("iperf3-3.12-tcp-up1.json")), 8415715550.735703)
        self.assertEqual(peers.receiver_bps(raw("netchar-tcp-up1.json")), 21718239131.277714)

    def test_malformed(self):
        for text in ("", "{}", '{"end": {}}', '{"summary": {"up": {"receiver": {"bits_per_second": "fast"}}}}'):
            with self.subTest(text=text), self.assertRaises(ParseError):
                peers.receiver_bps(text)


class UdpNetchar(unittest.TestCase):
    def test_packets_rates_loss_cpu(self):
        r = peers.udp_netchar(raw("netchar-udp-u64.json"), "netchar", 64, 1.0)
        # .summary.up.sender / .receiver
        self.assertEqual(r["sent"], 240832)
        self.assertEqual(r["sent_secs"], 1.0050858980000001)
        self.assertEqual(r["rx"], 153065)
        self.assertEqual(r["rx_secs"], 0.9718983670000001)
        self.assertEqual(r["rx_bps"], 80635262.55518442)
        self.assertEqual(r["sent_bps"], 122682035.68009864)
        self.assertEqual(r["loss"], 36.443246744618655)
        self.assertAlmostEqual(r["cpu"], 0.005844 + 0.140676 + 0.007336 + 0.13169, places=9)
        self.assertEqual(r["notes"], [])      # sent = received + lost, bytes = packets x 64, drops = lost

    def test_variant_that_does_not_match_the_test_record_is_noted(self):
        r = peers.udp_netchar(raw("netchar-udp-u64.json"), "netchar-nogso", 64, 1.0)
        self.assertEqual(r["notes"], ["test.udp-gso=True,gro=False(expected False,False)"])

    def test_wrong_payload_length_is_noted(self):
        r = peers.udp_netchar(raw("netchar-udp-u64.json"), "netchar", 32, 1.0)
        self.assertIn("received-bytes/L=306130!=packets=153065", r["notes"])

    def test_malformed(self):
        for text in ("", "{}", '{"summary": {"up": {"sender": {"packets": 1}, "receiver": {}}}}'):
            with self.subTest(text=text), self.assertRaises(ParseError):
                peers.udp_netchar(text, "netchar", 64, 1.0)


class UdpIperf3(unittest.TestCase):
    def test_packets_rates_loss_cpu(self):
        r = peers.udp_iperf3(raw("iperf3-3.12-udp-u64.json"), 64)
        self.assertEqual(r["sent"], 81430)                  # sum_sent.packets
        self.assertEqual(r["sent_secs"], 1.00011)
        self.assertEqual(r["rx"], 2504064 // 64)            # sum_received.bytes / L = 39126
        self.assertEqual(r["rx"], 81430 - 42304)            # = packets - lost_packets
        self.assertEqual(r["rx_secs"], 1.000245)
        self.assertAlmostEqual(r["rx_bps"], 39126 * 64 * 8 / 1.000245)
        self.assertAlmostEqual(r["sent_bps"], 81430 * 64 * 8 / 1.00011)
        self.assertEqual(r["loss"], 51.95136927422326)
        self.assertAlmostEqual(r["cpu"], (31.82011683891379 + 17.5307296639357) / 100 * 1.00011)
        self.assertEqual(r["notes"], [])

    def test_malformed(self):
        with self.assertRaisesRegex(ParseError, "iperf3 error"):
            peers.udp_iperf3('{"error": "the server is busy running a test"}', 64)
        with self.assertRaisesRegex(ParseError, "lost_packets"):
            peers.udp_iperf3('{"end": {"sum_sent": {"packets": 1, "seconds": 1}, "sum_received": {"bytes": 64, "packets": 1, "seconds": 1}, '
                             '"cpu_utilization_percent": {"host_total": 1, "remote_total": 1}}}', 64)


class UdpIperf2(unittest.TestCase):
    def test_client_sent_and_server_received(self):
        r = peers.udp_iperf2(raw("iperf2-2.1.8-udp-u64-client.txt"), raw("iperf2-2.1.8-udp-u64-server.txt"), 64)
        self.assertEqual(r["sent"], 149485)                 # "Sent 149485 datagrams"
        self.assertEqual(r["sent_secs"], 1.0)               # 0.0000-1.0000 sec
        self.assertEqual(r["rx"], 149484 - 68100)           # server: 68100/149484 lost/total
        self.assertAlmostEqual(r["rx_secs"], 0.9987)        # server: 0.0000-0.9987 sec
        self.assertAlmostEqual(r["rx_bps"], 81384 * 64 * 8 / 0.9987)
        self.assertEqual(r["loss"], 46.0)                   # (46%)
        self.assertIsNone(r["cpu"])
        self.assertEqual(r["notes"], [])

    def test_falls_back_to_the_server_report_relayed_to_the_client(self):
        r = peers.udp_iperf2(raw("iperf2-2.1.8-udp-u64-client.txt"), "", 64)
        self.assertEqual(r["rx"], 81384)
        self.assertEqual(r["notes"], ["rx-from-client's-server-report"])

    def test_malformed(self):
        with self.assertRaisesRegex(ParseError, "no send summary"):
            peers.udp_iperf2("connect failed: Connection refused\n", raw("iperf2-2.1.8-udp-u64-server.txt"), 64)
        client_without_report = raw("iperf2-2.1.8-udp-u64-client.txt").split("Server Report:")[0]
        with self.assertRaisesRegex(ParseError, "no receiver report"):
            peers.udp_iperf2(client_without_report, "", 64)


class UdpNuttcp(unittest.TestCase):
    def test_packets_rate_loss_cpu(self):
        r = peers.udp_nuttcp(raw("nuttcp-6.1.2-udp-u64.txt"), 64)
        # megabytes=1.0930 rate_Mbps=8.9183 tx_cpu=23 rx_cpu=2 drop=43803 pkt=61710 data_loss=70.98102 tx_megabytes=3.7665
        secs = 1.0930 * 1048576 * 8 / 8.9183e6
        self.assertEqual(r["rx"], 61710 - 43803)
        self.assertEqual(r["sent"], round(3.7665 * 1048576 / 64))
        self.assertAlmostEqual(r["rx_secs"], secs)
        self.assertAlmostEqual(r["sent_secs"], secs)
        self.assertEqual(r["rx_bps"], 8.9183e6)
        self.assertEqual(r["loss"], 70.98102)
        self.assertAlmostEqual(r["cpu"], (23 + 2) / 100 * secs)
        self.assertEqual(r["notes"], [])

    def test_malformed(self):
        with self.assertRaisesRegex(ParseError, "no -fparse result"):
            peers.udp_nuttcp("nuttcp-t: Info: attempting to switch into server mode\n", 64)
        with self.assertRaisesRegex(ParseError, "nuttcp output"):
            peers.udp_nuttcp(raw("nuttcp-6.1.2-udp-u64.txt").replace("pkt=61710", "pkt=lots"), 64)
        with self.assertRaisesRegex(ParseError, "megabytes"):
            peers.udp_nuttcp("rate_Mbps=8.9 pkt=10 drop=0\n", 64)


class RrNetchar(unittest.TestCase):
    def test_rate_and_latency_percentiles(self):
        r = peers.rr_netchar(raw("netchar-rr-udp-cross.json"), "udp", 1, 0, 1, False, 1.0)
        # .summary.rr
        self.assertEqual(r["tps"], 11885.788932160141)
        self.assertEqual(r["mean"], 83.43235874137636)
        self.assertEqual(r["p50"], 50.719)
        self.assertEqual(r["p99"], 126.911)
        self.assertEqual(r["p999"], 7991.295)
        self.assertEqual(r["notes"], [])

    def test_what_was_asked_is_checked_against_the_test_record(self):
        r = peers.rr_netchar(raw("netchar-rr-udp-cross.json"), "tcp", 14, 0, 0, True, 1.0)
        self.assertIn("test.rr.udp=True(asked:False)", r["notes"])
        self.assertIn("test.rr.request_bytes=1(asked:14)", r["notes"])
        self.assertIn("test.rr.busy_poll=False(asked:True)", r["notes"])
        self.assertIn("pinning-recorded-as-client=0,server=1", r["notes"])

    def test_placement(self):
        self.assertEqual(peers.netchar_placement(raw("netchar-rr-udp-cross.json")),
                         "client pinned to CPU 0, server pinned to CPU 1")

    def test_malformed(self):
        with self.assertRaisesRegex(ParseError, r"no summary\.rr"):
            peers.rr_netchar(raw("netchar-tcp-up1.json"), "tcp", 1, 0, 0, False, 1.0)
        with self.assertRaisesRegex(ParseError, "transactions_per_second"):
            peers.rr_netchar('{"summary": {"rr": {"latency_us": {"mean": 1}}}}', "tcp", 1, 0, 0, False, 1.0)
        with self.assertRaises(ParseError):
            peers.netchar_placement("netchar: error: connection refused")


class RrSockperf(unittest.TestCase):
    def test_valid_window_rate_and_percentiles(self):
        r = peers.rr_sockperf(raw("sockperf-3.7-rr-tcp-same.txt"))
        # [Valid Duration] RunTime=0.550 sec; ... ReceivedMessages=26794
        self.assertAlmostEqual(r["tps"], 26794 / 0.550)
        self.assertEqual(r["mean"], 20.510)                 # avg-rtt=20.510
        self.assertEqual(r["p50"], 19.275)                  # percentile 50.000
        self.assertEqual(r["p99"], 43.210)                  # percentile 99.000
        self.assertEqual(r["p999"], 207.496)                # percentile 99.900
        self.assertEqual(r["notes"], [])

    def test_drops_are_noted(self):
        text = raw("sockperf-3.7-rr-tcp-same.txt").replace("# dropped messages = 0", "# dropped messages = 7")
        self.assertIn("dropped=7", peers.rr_sockperf(text)["notes"])

    def test_malformed(self):
        with self.assertRaisesRegex(ParseError, "no sockperf summary"):
            peers.rr_sockperf("sockperf: ERROR: Failed to connect\n")


class RrNetperf(unittest.TestCase):
    # netperf is not packaged by Debian, so there is no saved run: this is the documented
    # `-P 0 -o THROUGHPUT,MEAN_LATENCY,P50_LATENCY,P99_LATENCY` line.
    def test_the_output_line(self):
        r = peers.rr_netperf("MIGRATED TCP REQUEST/RESPONSE TEST\n12345.67,80.50,78,120\n")
        self.assertEqual((r["tps"], r["mean"], r["p50"], r["p99"], r["p999"]), (12345.67, 80.5, 78.0, 120.0, None))

    def test_malformed(self):
        with self.assertRaisesRegex(ParseError, "no netperf -o line"):
            peers.rr_netperf("establish control: are you sure there is a netserver listening?\n")


if __name__ == "__main__":
    unittest.main()
