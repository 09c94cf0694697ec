"""Unit tests of scripts/bench-scale's pure logic: the generator's plan
(bench/tools/scale_seed.py), the latency percentiles
(bench/tools/saga_latency.py), the ratios against issue 28's targets
(bench/tools/scale_summary.py), and the month-end spike's and the full
audits' summaries (bench/tools/lot_spike.py, audit_follow.py).

    /usr/bin/python3 -m unittest discover -s tests/bench
"""
import os
import sys
import unittest

sys.path.insert(0, os.path.join(os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__)))),
                                "bench", "tools"))

import audit_follow  # noqa: E402
import lot_spike  # noqa: E402
import saga_latency  # noqa: E402
import scale_seed  # noqa: E402
import scale_summary  # noqa: E402


class Plan(unittest.TestCase):
    def test_slots_fill_the_entries_left_after_the_accounts_own(self):
        p = scale_seed.plan(100_000, 500_000, now_ms=1_000_000_000_000)
        # 1.5 entries per account of its own, 1.64 per slot on average.
        self.assertEqual(p["S"], round((500_000 - 150_000) / 1.64))
        self.assertEqual(p["R"], 3)
        self.assertEqual(p["total"], (3 + 2) * 100_000 * 16)

    def test_the_day_ends_five_minutes_before_now(self):
        p = scale_seed.plan(10, 100, now_ms=1_000_000_000_000)
        self.assertEqual(p["t0"], 1_000_000_000_000 - 86_400_000)
        self.assertEqual(p["t0"] + p["span"], 1_000_000_000_000 - 300_000)

    def test_fewer_entries_than_the_accounts_own_leave_no_slot(self):
        p = scale_seed.plan(1000, 100, now_ms=0)
        self.assertEqual((p["S"], p["R"]), (0, 1))

    def test_chunks_cover_every_account_once(self):
        self.assertEqual(scale_seed.chunks(10, 4), [(0, 4), (4, 8), (8, 10)])


class Percentile(unittest.TestCase):
    def test_nearest_rank(self):
        values = list(range(1, 101))
        self.assertEqual(saga_latency.percentile(values, 0.5), 50)
        self.assertEqual(saga_latency.percentile(values, 0.99), 99)
        self.assertEqual(saga_latency.percentile([7, 3], 0.99), 7)
        self.assertEqual(saga_latency.percentile([4], 0.5), 4)

    def test_figures(self):
        self.assertEqual(saga_latency.figures([1.0, 2.0, 3.0, 4.0]), {"p50_ms": 2.0, "p99_ms": 4.0, "requests": 4})


def run(version, workload, throughput, p99):
    return {"version": version, "workload": workload, "throughput": throughput, "p99_ms": p99}


def lists(store, **p99):
    return {"store": store, "repeat": 1, "figures": {q: {"p99_ms": v} for q, v in p99.items()}}


class Ratios(unittest.TestCase):
    runs = [run("scaled", "uniform", 900, 0), run("scaled", "uniform", 950, 0), run("scaled", "uniform", 1000, 0),
            run("empty", "uniform", 1000, 0), run("empty", "uniform", 1000, 0), run("empty", "uniform", 990, 0),
            run("scaled", "half", 0, 30), run("empty", "half", 0, 20)]

    def test_medians_and_ratios_against_the_targets(self):
        r = scale_summary.ratios(self.runs, [lists("scaled", list=3.0, counts=1.0),
                                             lists("small", list=2.0, counts=1.0)])
        self.assertEqual(r["transfers_per_s"]["scaled"], 950)
        self.assertEqual(r["transfers_per_s"]["empty"], 1000)
        self.assertAlmostEqual(r["transfers_per_s"]["ratio"], 0.95)
        self.assertTrue(r["transfers_per_s"]["met"])
        self.assertEqual(r["transfers_per_s"]["target"], ">= 0.9")
        self.assertAlmostEqual(r["p99_ms"]["ratio"], 1.5)
        self.assertFalse(r["p99_ms"]["met"])
        # The worst query decides.
        self.assertEqual(r["saga_lists_p99_ms"]["queries"]["list"]["ratio"], 1.5)
        self.assertEqual(r["saga_lists_p99_ms"]["ratio"], 1.5)
        self.assertTrue(r["saga_lists_p99_ms"]["met"])

    def test_the_median_of_each_store_over_the_repeats(self):
        r = scale_summary.ratios([], [lists("scaled", list=1.0), lists("scaled", list=5.0), lists("scaled", list=9.0),
                                      lists("small", list=2.0)])
        self.assertEqual(r["saga_lists_p99_ms"]["queries"]["list"], {"scaled": 5.0, "small": 2.0, "ratio": 2.5})
        self.assertFalse(r["saga_lists_p99_ms"]["met"])

    def test_a_figure_not_measured_is_neither_met_nor_missed(self):
        r = scale_summary.ratios([run("scaled", "uniform", 900, 0)], [])
        self.assertIsNone(r["transfers_per_s"]["ratio"])
        self.assertIsNone(r["transfers_per_s"]["met"])
        self.assertIsNone(r["saga_lists_p99_ms"]["met"])

    def test_transfers_during_an_audit_and_a_spike_against_the_scaled_runs_alone(self):
        r = scale_summary.ratios(self.runs + [run("scaled", "audit", 760, 0), run("scaled", "spike", 570, 0)], [])
        self.assertEqual(r["transfers_during_audit"]["alone"], 950)
        self.assertAlmostEqual(r["transfers_during_audit"]["ratio"], 0.8)
        self.assertTrue(r["transfers_during_audit"]["met"])
        self.assertAlmostEqual(r["transfers_during_spike"]["ratio"], 0.6)
        self.assertFalse(r["transfers_during_spike"]["met"])
        self.assertEqual(r["transfers_during_spike"]["target"], ">= 0.7")


class Spike(unittest.TestCase):
    def test_lots_are_shared_evenly_over_the_shards(self):
        self.assertEqual(lot_spike.shares(1_000_001, 2), [500_001, 500_000])
        self.assertEqual(lot_spike.shares(1, 2), [1, 0])

    def test_all_expired_at_the_first_sample_with_none_open(self):
        samples = [{"t_s": -1.0, "open": 10}, {"t_s": 0.5, "open": 10}, {"t_s": 42.0, "open": 3},
                   {"t_s": 97.5, "open": 0}]
        s = lot_spike.summary(samples, 10, 1000, 180)
        self.assertEqual(s["all_expired_s"], 97.5)
        self.assertTrue(s["met"])

    def test_lots_left_at_the_deadline_miss(self):
        s = lot_spike.summary([{"t_s": 0.0, "open": 10}, {"t_s": 181.0, "open": 2}], 10, 1000, 180)
        self.assertIsNone(s["all_expired_s"])
        self.assertFalse(s["met"])

    def test_the_load_s_accounts_are_spared_and_the_limit_is_a_number(self):
        sql = lot_spike.arm_sql(500, 1_700_000_000_000, 10_000)
        self.assertIn("substr(account_id, 5)::bigint < 10000", sql)
        self.assertIn("LIMIT 500", sql)
        self.assertIn("held = 0 AND remaining > 0", sql)


class Audits(unittest.TestCase):
    @staticmethod
    def audit(state, differences=0):
        return {"audit_id": 7, "state": state, "accounts_checked": 5, "accounts_total": 5, "differences": differences}

    def test_completed_and_clean_only_when_every_shard_s_is(self):
        s = audit_follow.summary({"s0": self.audit("completed"), "s1": self.audit("completed")}, {"s0": 1, "s1": 2})
        self.assertTrue(s["completed"] and s["clean"])
        s = audit_follow.summary({"s0": self.audit("completed"), "s1": self.audit("running")}, {"s0": 1, "s1": 2})
        self.assertFalse(s["completed"])
        s = audit_follow.summary({"s0": self.audit("completed", 1), "s1": self.audit("completed")}, {"s0": 1, "s1": 2})
        self.assertFalse(s["clean"])
        self.assertFalse(audit_follow.summary({}, {})["completed"])


if __name__ == "__main__":
    unittest.main()
