"""Unit tests of the chaos checker: each promise's check finds a state that
breaks it, and a consistent state passes."""
import copy
import os
import sys
import unittest

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

from tally_chaos import checker, report  # noqa: E402


def consistent():
    """Two accounts: a credit of 100 to a, a transfer of 30 a→b, a failed
    deduction, a refund of 10 of the transfer; an expiring credit of 25 to b
    (its lot 2), of which a hold took 5; the lot expired (20 by the expiry
    job), then the hold was released and its 5 expired too."""
    sagas = {
        "sg_c": {"type": "credit", "biz_id": "c1", "state": "completed", "input": {"account": "a", "amount": 100}},
        "sg_t": {"type": "transfer", "biz_id": "t1", "state": "completed",
                 "input": {"source": "a", "destination": "b", "amount": 30}},
        "sg_d": {"type": "deduct", "biz_id": "d1", "state": "failed", "input": {"account": "b", "amount": 500}},
        "sg_r": {"type": "refund", "biz_id": "r1", "state": "completed", "workflow": "refund_transfer",
                 "input": {"original_saga_id": "sg_t", "amount": 10}},
        "sg_e": {"type": "credit", "biz_id": "e1", "state": "completed",
                 "input": {"account": "b", "amount": 25, "expires_at": "2026-12-03T10:00:05Z"}},
        "sg_h": {"type": "deduct", "biz_id": "h1", "state": "compensated", "input": {"account": "b", "amount": 5}},
    }
    accounts = [
        {"shard": 0, "account_id": "a", "balance": 80, "held": 0, "status": "active", "version": 4,
         "ledger_sum": 80, "open_held": 0},
        {"shard": 1, "account_id": "b", "balance": 20, "held": 0, "status": "active", "version": 7,
         "ledger_sum": 20, "open_held": 0},
    ]
    lots = [
        {"shard": 0, "account_id": "a", "lot_id": 1, "remaining": 80, "held": 0, "expired": 0, "state": "open"},
        {"shard": 1, "account_id": "b", "lot_id": 1, "remaining": 20, "held": 0, "expired": 0, "state": "open"},
        {"shard": 1, "account_id": "b", "lot_id": 2, "remaining": 0, "held": 0, "expired": 25, "state": "expired"},
    ]
    return {
        "sagas": sagas, "accounts": accounts, "open_holds": [], "ledger_dupes": [], "saga_dupes": [],
        "ledger_by_saga": {"sg_c": {"a": 100}, "sg_t": {"a": -30, "b": 30}, "sg_r": {"a": 10, "b": -10},
                           "sg_d": {"b": 0}, "sg_e": {"b": 25}},
        "lots": lots,
        "expire_entries": [{"shard": 1, "account_id": "b", "biz_id": "2", "entries": 1, "delta": -20},
                           {"shard": 1, "account_id": "b", "biz_id": "hold:sg_h", "entries": 1, "delta": -5}],
        "expire_parts": [{"account_id": "b", "lot_id": 2, "amount": 20}, {"account_id": "b", "lot_id": 2, "amount": 5}],
        "reconciliation": [{"shard": 0, "differences": 0, "report": []}, {"shard": 1, "differences": 0, "report": []}],
        "projections": {"accounts": {a["account_id"]: {k: a[k] for k in ("balance", "held", "version", "status")}
                                     for a in accounts},
                        "sagas": {sid: {"state": s["state"]} for sid, s in sagas.items()}},
        "relay_backlog": [{"source": "shard 0", "consumer": "projection", "behind": 0}],
        "audit": {"account_versions": {"a": [1, 2, 3, 4], "b": list(range(1, 8))}, "sagas_seen": sorted(sagas),
                  "read": 40, "left": 3},
    }


HISTORY = [
    {"kind": "credit", "biz_id": "c1", "saga_id": "sg_c", "saga_type": "credit", "acked_state": "completed",
     "final_state": "completed", "effect": 100},
    {"kind": "deduct", "biz_id": "d1", "saga_id": "sg_d", "saga_type": "deduct", "acked_state": "failed",
     "final_state": "failed", "effect": -500},
    {"kind": "transfer", "biz_id": "t1", "saga_id": "sg_t", "saga_type": "transfer", "acked_state": "running",
     "effect": 0},
    {"kind": "credit", "biz_id": "e1", "saga_id": "sg_e", "saga_type": "credit", "acked_state": "completed",
     "final_state": "completed", "effect": 25},
    {"kind": "held", "biz_id": "h1", "saga_id": "sg_h", "saga_type": "deduct", "acked_state": "compensated",
     "final_state": "compensated", "effect": -5},
]


def set_saga_state(snap, saga_id, state):
    """The saga in `state`, in the store and in its projection alike."""
    snap["sagas"][saga_id]["state"] = state
    snap["projections"]["sagas"][saga_id]["state"] = state


class CheckerTest(unittest.TestCase):
    def promises(self, snap, history=HISTORY):
        return {v.promise for v in checker.check(snap, history)}

    def assert_broken(self, snap, *promises, history=HISTORY):
        """`snap` breaks each of `promises`, and perhaps others."""
        found = self.promises(snap, history)
        for promise in promises:
            self.assertIn(promise, found)

    def test_a_consistent_state_passes(self):
        self.assertEqual(checker.check(consistent(), HISTORY), [])

    def test_a_unit_created_from_nothing_breaks_conservation(self):
        s = consistent()
        s["accounts"][1]["balance"] += 1
        s["accounts"][1]["ledger_sum"] += 1
        s["lots"][1]["remaining"] += 1
        s["projections"]["accounts"]["b"]["balance"] += 1
        self.assertEqual(self.promises(s), {"conservation"})

    @staticmethod
    def revoked():
        """consistent(), then a batch took 5 from a and 5 from b; b's item
        was revoked by 2, then a revoke of every item gave back what was
        left: 5 to a, 3 to b."""
        s = consistent()
        s["sagas"]["sg_b"] = {"type": "batch_deduct", "biz_id": "b1", "state": "completed",
                              "input": {"items": [{"account_id": "a", "amount": 5}, {"account_id": "b", "amount": 5}]}}
        s["sagas"]["sg_v1"] = {"type": "refund", "biz_id": "v1", "state": "completed", "workflow": "refund",
                               "input": {"original_saga_id": "sg_b", "account": "b", "amount": 2},
                               "progress": {"calls": [[{"a": 2}]]}}
        s["sagas"]["sg_v2"] = {"type": "refund", "biz_id": "v2", "state": "completed", "workflow": "revoke_items",
                               "input": {"original_saga_id": "sg_b",
                                         "items": [{"account_id": "a", "amount": 0}, {"account_id": "b", "amount": 0}]},
                               "progress": {"calls": [[{"a": 5}, {"a": 3}]]}}
        s["ledger_by_saga"].update({"sg_b": {"a": -5, "b": -5}, "sg_v1": {"b": 2}, "sg_v2": {"a": 5, "b": 3}})
        for sid in ("sg_b", "sg_v1", "sg_v2"):
            s["projections"]["sagas"][sid] = {"state": "completed"}
            s["audit"]["sagas_seen"].append(sid)
        return s

    def test_revokes_move_what_their_shards_said_and_no_more_than_the_items_took(self):
        self.assertEqual(checker.check(self.revoked(), HISTORY), [])
        s = self.revoked()
        s["ledger_by_saga"]["sg_v2"]["b"] = 4  # the ledger gave back more than the saga was told
        s["accounts"][1]["balance"] += 1
        s["accounts"][1]["ledger_sum"] += 1
        s["lots"][1]["remaining"] += 1
        s["projections"]["accounts"]["b"]["balance"] += 1
        self.assertEqual(self.promises(s), {"one_effect_per_key", "refunds_within_original", "conservation"})

    def test_a_saga_applied_twice_breaks_one_effect_per_key(self):
        s = consistent()
        s["ledger_by_saga"]["sg_c"] = {"a": 200}
        self.assert_broken(s, "one_effect_per_key")

    def test_an_acknowledged_outcome_that_changed_is_found(self):
        s = consistent()
        set_saga_state(s, "sg_d", "compensated")
        self.assertEqual(self.promises(s), {"acknowledged_saga_present"})

    def test_an_acknowledged_saga_that_is_gone_is_found(self):
        h = HISTORY + [{"kind": "credit", "biz_id": "c9", "saga_id": "sg_gone", "acked_state": "pending", "effect": 5}]
        self.assert_broken(consistent(), "acknowledged_saga_present", history=h)

    def test_a_saga_left_running_and_a_hold_left_open_are_found(self):
        s = consistent()
        set_saga_state(s, "sg_t", "running")
        s["open_holds"].append({"shard": 0, "account_id": "a", "hold_id": "sg_d", "amount": 5, "captured": 0})
        self.assert_broken(s, "every_saga_terminal", "no_hold_for_terminal_saga")

    def test_balance_apart_from_its_ledger_and_a_stale_projection_are_found(self):
        s = consistent()
        s["accounts"][0]["ledger_sum"] = 79
        s["projections"]["accounts"]["b"]["version"] = 2
        self.assert_broken(s, "balance_equals_ledger", "projection_equals_ledger")

    def test_undelivered_events_and_a_reconciliation_difference_are_found(self):
        s = consistent()
        s["relay_backlog"][0]["behind"] = 3
        s["reconciliation"][1] = {"shard": 1, "differences": 1, "report": ["b"]}
        self.assertEqual(self.promises(s), {"relay_delivery_complete", "reconciliation_clean"})

    def test_a_saga_projection_may_be_missing_only_if_a_rebuild_came_after_the_saga(self):
        s = consistent()
        sid = "sg_01M9669ERDB48FCDE5HFC7AT7H"  # created at 1796577999629 ms
        self.assertEqual(checker.saga_created_ms(sid), 1796577999629)
        s["sagas"][sid] = {"type": "credit", "biz_id": "late", "state": "failed", "input": {"account": "a", "amount": 1}}
        s["audit"]["sagas_seen"].append(sid)
        s["projections"]["sagas_rebuilt_ms"] = 1796577999630
        self.assertEqual(checker.check(s, HISTORY), [])  # its events pruned before the rebuild: read through
        s["projections"]["sagas_rebuilt_ms"] = 1796577999629
        self.assertEqual(self.promises(s), {"projection_equals_ledger"})
        s["projections"]["sagas"][sid] = {"state": "running"}  # a stale one is wrong whatever the rebuild
        s["projections"]["sagas_rebuilt_ms"] = 1796577999630
        self.assertEqual(self.promises(s), {"projection_equals_ledger"})

    def test_an_event_pruned_before_the_audit_had_it_is_found(self):
        s = consistent()
        s["audit"]["account_versions"]["b"].remove(5)
        s["audit"]["sagas_seen"].remove("sg_t")
        v = checker.check(s, HISTORY)
        self.assertEqual({(x.promise, x.key) for x in v},
                         {("no_event_lost_by_pruning", "b"), ("no_event_lost_by_pruning", "sg_t")})

    def test_an_outbox_never_pruned_is_found(self):
        s = consistent()
        s["audit"]["left"] = s["audit"]["read"]
        self.assertEqual(self.promises(s), {"outbox_pruned"})

    def test_a_conflict_on_an_unchanged_request_is_a_violation(self):
        h = HISTORY + [{"kind": "credit", "biz_id": "c1", "conflict": True, "effect": 0}]
        self.assertEqual(self.promises(consistent(), h), {"one_effect_per_key"})

    def test_lots_that_do_not_add_up_to_the_balance_or_held_are_found(self):
        s = consistent()
        s["lots"][1]["remaining"] -= 1
        self.assertEqual(self.promises(s), {"lots_sum_to_balance"})
        s = consistent()
        s["lots"][0]["held"] = 3
        self.assertEqual(self.promises(s), {"lots_sum_to_balance"})

    def test_an_expired_lot_has_exactly_one_expire_entry_and_no_other_lot_has_one(self):
        for entry in ({"biz_id": "2", "entries": 1, "delta": 0},   # a second entry of expired lot 2
                      {"biz_id": "1", "entries": 1, "delta": 0},   # an entry of open lot 1
                      {"biz_id": "9", "entries": 1, "delta": 0}):  # an entry of no lot
            s = consistent()
            s["expire_entries"].append({"shard": 1, "account_id": "b", **entry})
            self.assertEqual(self.promises(s), {"one_expire_entry_per_expired_lot"}, entry)
        s = consistent()
        s["lots"][2]["state"] = "exhausted"  # an entry, but the lot did not expire
        self.assertEqual(self.promises(s), {"one_expire_entry_per_expired_lot"})

    def test_a_lots_expired_apart_from_the_expire_operations_is_found(self):
        s = consistent()
        s["expire_parts"][1]["amount"] = 4
        self.assertEqual(self.promises(s), {"lot_expired_matches_operations"})
        s = consistent()
        s["expire_parts"].append({"account_id": "a", "lot_id": 7, "amount": 1})  # a lot that does not exist
        self.assertEqual(self.promises(s), {"lot_expired_matches_operations"})

    def test_value_gone_without_an_expire_entry_breaks_conservation(self):
        # The hold's expired part left the balance, but no entry says so.
        s = consistent()
        del s["expire_entries"][1]
        self.assertEqual(self.promises(s), {"conservation", "lot_expired_matches_operations"})

    def test_the_clients_bound_the_total(self):
        # The client saw the credit of 100 complete; a total below it is impossible.
        s = copy.deepcopy(consistent())
        h = [dict(HISTORY[0], effect=1000)]
        self.assert_broken(s, "conservation", history=h)


class FailpointCrashTest(unittest.TestCase):
    def test_each_crash_is_counted_by_its_failpoint(self):
        crash = '{"ts":"2026-12-03T10:00:05.120Z","level":"warn","service":"account_shard",' \
                '"msg":"failpoint crash","failpoint":"%s","hit":1}\n'
        lines = [crash % "expiry_before_commit", '{"msg":"expiry: lots expired","lots":3}\n',
                 crash % "before_commit", crash % "expiry_before_commit", '{"msg":"failpoint crash","fail\n']  # cut off
        self.assertEqual(report.failpoint_crashes(lines), {"expiry_before_commit": 2, "before_commit": 1})


class ServerIncidentTest(unittest.TestCase):
    # As PostgreSQL 15 logs a postgres_restart fault: no incident.
    RESTART = [
        "2026-12-02 14:08:43.750 UTC [1] LOG:  received immediate shutdown request\n",
        "2026-12-02 14:08:46.275 UTC [8] LOG:  database system was interrupted; last known up at 2026-12-02\n",
        "2026-12-02 14:08:46.790 UTC [6] LOG:  checkpoint starting: end-of-recovery immediate wait\n",
        "2026-12-02 14:08:47.001 UTC [1] LOG:  database system is ready to accept connections\n",
    ]

    def test_a_fault_of_the_run_is_no_incident(self):
        self.assertEqual(report.server_incidents(self.RESTART), [])

    def test_a_crash_and_a_full_disk_are_incidents(self):
        crash = "2026-12-02 14:03:50.1 UTC [1] LOG:  server process (PID 77) was terminated by signal 9: Killed\n"
        disk = "2026-12-02 14:03:49.9 UTC [70] PANIC:  could not write to file \"pg_wal/xlogtemp.70\": " \
               "No space left on device\n"
        self.assertEqual(report.server_incidents(self.RESTART[:2] + [disk, crash] + self.RESTART[2:]),
                         [disk.rstrip("\n"), crash.rstrip("\n")])

    def test_an_orphan_taken_for_a_server_process_is_an_incident(self):
        orphan = "2026-12-02 15:32:28.563 UTC [1] LOG:  server process (PID 122) exited with exit code 2\n"
        self.assertEqual(report.server_incidents(self.RESTART + [orphan]), [orphan.rstrip("\n")])

    def test_at_most_the_first_lines_are_kept(self):
        lines = [f"LOG:  server process (PID {i}) was terminated by signal 6\n" for i in range(30)]
        self.assertEqual(report.server_incidents(lines, limit=3), [line.rstrip("\n") for line in lines[:3]])


class RecoveryTest(unittest.TestCase):
    def test_recovery_ends_at_the_first_completed_write_begun_after_the_fault(self):
        def op(kind, t0, t1, state="completed", **extra):
            return {"kind": kind, "t0": t0, "t1": t1, "acked_state": state, **extra}
        history = [op("transfer", 9.0, 30.0),             # begun before the fault
                   op("replay", 11.0, 11.5),              # no write needed
                   op("credit", 12.0, 12.5, replayed=True),
                   op("deduct", 12.0, 13.0, state="failed"),
                   op("batch", 15.0, 21.0),
                   op("credit", 16.0, 20.0)]
        faults = [{"kind": "primary_node_loss", "t": 10.0}, {"kind": "shard_kill", "t": 10.0},
                  {"kind": "switchover", "t": 40.0}]
        got = report.recovery_times(history, faults, ("primary_node_loss", "switchover"))
        self.assertEqual([(r["kind"], r["recovery_s"]) for r in got], [("primary_node_loss", 10.0), ("switchover", None)])
        lines = report.recovery_lines(got)
        self.assertIn("primary_node_loss          1: median 10.0 s, worst 10.0 s", "\n".join(lines))
        self.assertIn("switchover                 1: no write after them", "\n".join(lines))

    def test_the_longest_stretch_without_a_completed_write_follows_the_fault(self):
        def op(t0, t1):
            return {"kind": "transfer", "t0": t0, "t1": t1, "acked_state": "completed"}
        # Writes go on for 2 s after the switchover (their ends: 11, 12), none
        # ends for 5 s, then they come back every second.
        history = [op(9.5, 10.5), op(10.0, 11.0), op(11.5, 12.0), op(12.1, 17.0), op(16.5, 18.0), op(17.5, 19.0),
                   op(90.0, 95.0)]
        got = report.recovery_times(history, [{"kind": "switchover", "t": 10.2}, {"kind": "switchover", "t": 20.0}],
                                    ("switchover",))
        self.assertEqual([(round(r["recovery_s"], 1), r["gap_s"]) for r in got], [(1.8, 5.0), (75.0, 75.0)])
        self.assertIn("longest stretch without a completed write: median 40.0 s, worst 75.0 s",
                      "\n".join(report.recovery_lines(got)))


if __name__ == "__main__":
    unittest.main()
