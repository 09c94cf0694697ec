"""Unit tests of scripts/bench-retention's checks (bench/tools/retention_follow.py):
what each retention window allows, the judgement of the replay, and the
bytes kept per transfer.

    /usr/bin/python3 -m unittest discover -s tests/bench
"""
import os
import sys
import unittest

sys.path.insert(0, os.path.join(os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__)))),
                                "bench", "tools"))

import retention_follow  # noqa: E402


def sample(t_s, written, rows, sagas, saga_keys, attempts=0, unsettled=0):
    return {"t_s": t_s, "outbox": {"s0": {"rows": rows, "written": written}}, "sagas": sagas,
            "unsettled": unsettled, "attempts": attempts, "redis_keys": saga_keys,
            "redis": {"sagas": saga_keys, "accounts": 10, "account_buckets": 0, "other": 1}}


class Bounds(unittest.TestCase):
    def test_an_outbox_may_hold_what_was_written_in_its_window(self):
        samples = [sample(0, 0, 0, 0, 0), sample(10, 100, 100, 0, 0), sample(20, 300, 200, 0, 0)]
        held = retention_follow.bounds(samples, accounts=10, outbox_window_s=10, projection_window_s=100,
                                       detail_window_s=100)
        # At 10 s: 100 of the 100 written since 0; at 20 s: 200 of the 200 since 10.
        self.assertEqual(held["outbox s0"], {"samples": 2, "worst_ratio": 1.0})

    def test_an_outbox_holding_older_events_misses(self):
        samples = [sample(0, 0, 0, 0, 0), sample(10, 100, 100, 0, 0), sample(20, 150, 150, 0, 0)]
        held = retention_follow.bounds(samples, 10, 10, 100, 100)
        self.assertEqual(held["outbox s0"]["worst_ratio"], 3.0)  # 150 held, 50 written in the window

    def test_samples_within_the_first_window_are_not_checked(self):
        samples = [sample(0, 0, 0, 0, 0), sample(5, 100, 100, 0, 0)]
        self.assertEqual(retention_follow.bounds(samples, 10, 10, 10, 10), {})

    def test_saga_projections_count_the_sagas_of_the_window_and_the_unsettled(self):
        samples = [sample(0, 0, 0, 1000, 0), sample(60, 0, 0, 1500, 600, unsettled=100)]
        held = retention_follow.bounds(samples, 10, 1000, 60, 1000)
        self.assertEqual(held["Redis saga projections"]["worst_ratio"], 1.0)  # 600 of 500 + 100
        # Live keys: 600 sagas, 10 accounts, 1 other, of 2 × 10 + 600 + OTHER_KEYS.
        self.assertAlmostEqual(held["Redis live keys"]["worst_ratio"],
                               round(611 / (20 + 600 + retention_follow.OTHER_KEYS), 3))

    def test_attempts_count_three_a_saga_of_the_detail_window(self):
        samples = [sample(0, 0, 0, 0, 0), sample(30, 0, 0, 100, 0, attempts=301)]
        held = retention_follow.bounds(samples, 10, 1000, 1000, 30)
        self.assertAlmostEqual(held["saga_step rows"]["worst_ratio"], round(301 / 300, 3))


class Kept(unittest.TestCase):
    def test_tables_add_up_over_the_databases_per_transfer(self):
        tables = [{"db": "s0", "table": "operation", "bytes": 3000, "heap_bytes": 2000},
                  {"db": "s1", "table": "operation", "bytes": 1000, "heap_bytes": 700},
                  {"db": "sagas", "table": "saga", "bytes": 5000, "heap_bytes": 3000}]
        per, total = retention_follow.kept_per_transfer(tables, transfers=10)
        self.assertEqual(list(per.items()), [("saga", 500), ("operation", 400)])
        self.assertEqual(total, 900)


class ReplayTargets(unittest.TestCase):
    first = {"completed": 100, "errors": 0}
    replay = {"replay_journal": 100, "replayed": 99, "replayed_changed": 1, "replay_differences": 0, "errors": 0}
    checks = {"before": {"sagas": 100}, "after": {"sagas": 100}}

    def test_a_clean_replay_meets_every_target(self):
        self.assertTrue(all(ok for _, _, ok in retention_follow.replay_targets(self.first, self.replay, self.checks)))

    def test_a_difference_a_change_or_a_missing_answer_misses(self):
        for replay, checks in (({**self.replay, "replay_differences": 1}, self.checks),
                               (self.replay, {"before": {"sagas": 100}, "after": {"sagas": 101}}),
                               ({**self.replay, "replayed": 98, "errors": 1}, self.checks)):
            met = [ok for _, _, ok in retention_follow.replay_targets(self.first, replay, checks)]
            self.assertFalse(all(met), (replay, checks))

    def test_a_first_run_with_transfers_left_unanswered_misses(self):
        met = [ok for _, _, ok in retention_follow.replay_targets({"completed": 99, "errors": 1}, self.replay,
                                                                  self.checks)]
        self.assertFalse(all(met))


if __name__ == "__main__":
    unittest.main()
