import unittest

from netchar_bench import pair_summary


class MeanCi95(unittest.TestCase):
    def test_three_values_use_the_t_quantile_for_two_degrees_of_freedom(self):
        mean, half = pair_summary.mean_ci95([1.0, 2.0, 3.0])
        self.assertAlmostEqual(mean, 2.0)
        # sd 1, standard error 1/sqrt(3), t(2) = 4.303
        self.assertAlmostEqual(half, 4.303 / 3 ** 0.5, places=6)

    def test_between_table_rows_the_wider_interval_is_taken(self):
        self.assertEqual(pair_summary.t975(35), pair_summary.t975(30))
        self.assertEqual(pair_summary.t975(1000), 1.960)
        with self.assertRaises(ValueError):
            pair_summary.t975(0)


class SummaryLines(unittest.TestCase):
    def test_an_interval_below_one_straddling_and_above(self):
        rows = [("tcp", c) for c in (0.978, 0.979, 0.976, 0.977)]
        rows += [("udp", c) for c in (0.995, 1.004, 1.001, 0.998)]
        rows += [("crr", c) for c in (1.02, 1.03, 1.025)]
        tcp, udp, crr = pair_summary.summary_lines(rows)
        self.assertTrue(tcp.startswith("tcp   cost 0.9775 ± "), tcp)
        self.assertIn("4 rounds, 4 below 1", tcp)
        self.assertTrue(tcp.endswith("netchar does less work per transaction"), tcp)
        self.assertIn("2 below 1", udp)
        self.assertTrue(udp.endswith("cannot tell the two apart"), udp)
        self.assertTrue(crr.endswith("netchar does more work per transaction"), crr)

    def test_one_round_has_no_interval(self):
        (line,) = pair_summary.summary_lines([("tcp", 0.99)])
        self.assertEqual(line, "tcp   cost 0.990 (one round: no interval)")


if __name__ == "__main__":
    unittest.main()
