"""validate_responses.py on hand-written records shaped as the gateway's
C++ builds them (orchestrator/saga/codec.cpp public_json, the shard's
queries.cpp, gateway/service/*routes.cpp): the good ones pass against
docs/openapi.yaml, and each broken one is caught.

    python3 tests/openapi/test_validate_responses.py [-v]
"""
import copy
import json
import os
import sys
import tempfile
import unittest

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

import spec as openapi  # noqa: E402
import validate_responses as vr  # noqa: E402

T = "2026-12-01T10:00:00.000Z"
SAGA_ID = "sg_01JF0Z8Q4W3T5V6X7Y8Z9A0B1C"
ACCOUNT = {"account_id": "acc:1", "balance": 100, "held": 20, "available": 80, "status": "active", "version": 7,
           "updated_at": T, "next_expiry": {"at": "2027-01-31T00:00:00.000Z", "amount": 25}}
STEP = {"name": "credit_account", "state": "succeeded", "attempts": 1, "started_at": T, "finished_at": T, "error": None}
CREDIT = {"saga_id": SAGA_ID, "type": "credit", "biz_id": "c-1", "state": "running",
          "input": {"account_id": "acc:1", "amount": 5, "expires_at": "2027-01-31T00:00:00.000Z"}, "error": None,
          "created_at": T, "updated_at": T, "deadline": T, "steps": [STEP]}
REFUND = dict(CREDIT, type="refund", state="completed", input={"original_saga_id": SAGA_ID},
              steps=[dict(STEP, name="refund_items")], refunded={"amount": 0, "items": []})
ATTEMPT = {"step": "credit_account", "item": 0, "compensation": False, "attempt": 1, "shard": "s0",
           "request": {"type": "credit"}, "outcome": "succeeded", "code": None, "sent_at": T, "answered_at": T}
REPORT = {"watermark": 12, "accounts": 3, "differences": 1, "frozen": [{"tenant": "acme", "account_id": "a"}],
          "accounts_with_differences": [{"tenant": "acme", "account_id": "a", "snapshot": 5, "rebuilt": 6,
                                         "difference": 1, "writes_after_watermark": 0,
                                         "findings": [{"class": "unexplained", "amount": 1}]}]}


def rec(method, target, status, body, content_type="application/json", **headers):
    """One recorded response; bodies that are not text are dumped as JSON."""
    headers = {k.replace("_", "-").lower(): v for k, v in headers.items()}
    headers.setdefault("x-request-id", "req_1")
    return {"method": method, "target": target, "status": status, "content_type": content_type,
            "body": body if isinstance(body, str) else json.dumps(body), "headers": headers}


def err(code):
    return {"error": {"code": code, "message": "m", "request_id": "req_1"}}


GOOD = [
    rec("GET", "/v1/accounts/acc%3A1?consistency=strong", 200, ACCOUNT, x_tally_read="authority"),
    rec("POST", "/v1/accounts", 201, ACCOUNT, x_tally_read="authority"),
    rec("GET", "/v1/accounts/acc%2Fx", 400, err("invalid_request")),
    rec("GET", "/v1/accounts/a/entries?limit=2", 200, {"entries": [
        {"seq": 1, "biz_type": "open_account", "biz_id": "a", "delta": 0, "balance_after": 0, "created_at": T},
        {"seq": 9, "biz_type": "refund", "biz_id": "k", "delta": 5, "balance_after": 5, "reverses": 4,
         "created_at": T}], "next": "9"}),
    rec("GET", "/v1/accounts/a/lots?state=all", 200, {"lots": [
        {"lot_id": 1, "granted": 5, "remaining": 0, "held": 0, "expired": 5, "expires_at": T, "rule_version": "1",
         "state": "expired", "origin": "refund", "grace_ms": 604800000, "created_at": T}], "next": None}),
    rec("POST", "/v1/credits?wait_ms=5000", 202, CREDIT),
    rec("POST", "/v1/refunds", 200, REFUND, idempotent_replayed="true"),
    rec("POST", "/v1/credits", 422, err("idempotency_conflict")),
    rec("POST", "/v1/credits", 429, err("rate_limited"), retry_after="2"),
    rec("POST", f"/v1/deductions/{SAGA_ID}/confirm", 409, err("invalid_state")),
    rec("GET", f"/v1/sagas/{SAGA_ID}", 404, err("not_found"), x_tally_read="authority"),
    rec("GET", "/v1/sagas?type=credit&biz_id=c-1", 200, {"sagas": [CREDIT], "next": None}),
    rec("GET", "/v1/stream", 400, err("invalid_request")),
    rec("GET", f"/v1/admin/sagas/{SAGA_ID}?wait_ms=100", 202, dict(CREDIT, history=[ATTEMPT])),
    rec("GET", "/v1/admin/sagas/counts", 200, {"counts": {s: 0 for s in (
        "pending", "running", "awaiting_confirmation", "compensating", "completed", "failed", "compensated",
        "needs_attention")}, "overdue": 0}),
    rec("GET", "/v1/admin/shards", 200, {"shards": [
        {"shard": 0, "name": "s0", "buckets": 512, "health": "unreachable"},
        {"shard": 1, "name": "s1", "buckets": 512, "health": "ok", "leader": True, "epoch": 3, "outbox": None,
         "commits": {"batches": 2, "commands": 9, "batch_retries": 0, "batch_failures": 0, "queued": 0,
                     "mean_batch_size": 4.5, "mean_commit_ms": 1.25}}]}),
    rec("GET", "/v1/admin/reconciliation?shard=0", 200, REPORT),
    rec("GET", "/v1/admin/reconciliation/reports?shard=0", 200, {"reports": [
        {"report_id": 1, "shard": 0, "ran_at": T, "mode": "incremental", "since": 3, "watermark": 12, "differences": 1,
         "classes": {"unexplained": 1},
         "frozen": [], "report": REPORT}]}),
    rec("GET", "/v1/admin/accounts?status=frozen", 200, {"accounts": [dict(ACCOUNT, status="frozen", shard=1)]}),
    rec("GET", "/v1/admin/health", 200, {"at": T, "services": [{"name": "gateway", "ready": True},
                                                              {"name": "shard 0", "ready": False}],
                                         "metrics": {"sagas_started": 3.0, "relay_lag_seconds": 0.5}}),
    rec("GET", "/v1/admin/workflows", 403, err("forbidden")),
    rec("GET", "/v1/nothing", 404, err("not_found")),
    rec("DELETE", "/v1/accounts/a", 401, err("unauthorized")),
    rec("GET", "/metrics", 200, "# HELP x\n", "text/plain; version=0.0.4"),
    rec("GET", "/readyz", 503, err("unavailable")),
    rec("GET", "/console", 301, "", "", location="/console/"),
    rec("GET", "/console/", 200, "<html>", "text/html; charset=utf-8"),
    rec("GET", "/console/js/app.js", 200, "export {}", "text/javascript; charset=utf-8"),
    rec("GET", "/v1/openapi.yaml", 200, "openapi: 3.1.0", "application/yaml; charset=utf-8"),
    rec("POST", "/v1/accounts", 429, err("account_busy"), retry_after="1"),
]


def broken(record, change):
    """A copy of `record` with `change` applied to it."""
    out = copy.deepcopy(record)
    change(out)
    return out


def with_body(body):
    return lambda r: r.update(body=json.dumps(body))


BAD = {
    "tenant in an account": broken(GOOD[0], with_body(dict(ACCOUNT, tenant="acme"))),
    "a status the operation does not list": broken(GOOD[0], lambda r: r.update(status=202)),
    "X-Request-Id missing": broken(GOOD[0], lambda r: r["headers"].pop("x-request-id")),
    "X-Tally-Read missing": broken(GOOD[0], lambda r: r["headers"].pop("x-tally-read")),
    "Retry-After missing": broken(GOOD[8], lambda r: r["headers"].pop("retry-after")),
    "Retry-After not a number": broken(GOOD[8], lambda r: r["headers"].update({"retry-after": "soon"})),
    "an error code for another status": broken(GOOD[7], with_body(err("not_found"))),
    "a refund without refunded": broken(GOOD[6], with_body({k: v for k, v in REFUND.items() if k != "refunded"})),
    "a credit's input with a transfer's fields": broken(GOOD[5], with_body(dict(CREDIT, input={"from_account": "a"}))),
    "history outside the operator's view": broken(GOOD[11], with_body({"sagas": [dict(CREDIT, history=[])],
                                                                        "next": None})),
    "a count missing": broken(GOOD[14], with_body({"counts": {"pending": 0}, "overdue": 0})),
    "a time without milliseconds": broken(GOOD[0], with_body(dict(ACCOUNT, updated_at="2026-12-01T10:00:00Z"))),
    "an undocumented content type": broken(GOOD[23], lambda r: r.update(content_type="application/json")),
    "a body that is not JSON": broken(GOOD[0], lambda r: r.update(body="{")),
    "an unknown route answered 200": broken(GOOD[21], lambda r: r.update(status=200)),
    "an unknown route without the error body": broken(GOOD[21], with_body({"error": "nope"})),
}


class ValidateResponsesTest(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        cls.spec = vr.Spec(openapi.load())

    def test_matching_prefers_literal_segments_and_decodes(self):
        self.assertEqual(self.spec.match("GET", "/v1/admin/sagas/counts?x=1")[0], "/v1/admin/sagas/counts")
        self.assertEqual(self.spec.match("GET", f"/v1/admin/sagas/{SAGA_ID}")[0], "/v1/admin/sagas/{saga_id}")
        self.assertEqual(self.spec.match("GET", "/v1/accounts/a%2Fb")[0], "/v1/accounts/{account_id}")
        self.assertEqual(self.spec.match("GET", "/v1/%73agas")[0], "/v1/sagas")
        self.assertEqual(self.spec.match("GET", "/console/js/lib/x.js")[0], "/console/{file}")
        self.assertEqual(self.spec.match("GET", "/v1/accounts/a/b/c"), (None, None))
        self.assertEqual(self.spec.match("PUT", "/v1/accounts"), (None, None))

    def test_good_responses_pass(self):
        for r in GOOD:
            with self.subTest(target=r["target"], status=r["status"]):
                self.assertEqual(vr.check(self.spec, r)[1], [])

    def test_each_broken_response_is_caught(self):
        for why, r in BAD.items():
            with self.subTest(why):
                self.assertNotEqual(vr.check(self.spec, r)[1], [], why)

    def test_the_command_exits_1_on_a_failure_and_0_without(self):
        with tempfile.TemporaryDirectory() as d:
            good, bad = os.path.join(d, "good.jsonl"), os.path.join(d, "bad.jsonl")
            with open(good, "w") as f:
                f.writelines(json.dumps(r) + "\n" for r in GOOD)
            with open(bad, "w") as f:
                f.writelines(json.dumps(r) + "\n" for r in GOOD + list(BAD.values()))
            with open(os.devnull, "w") as quiet:
                stdout, sys.stdout = sys.stdout, quiet
                try:
                    self.assertEqual(vr.main(["--responses", good]), 0)
                    self.assertEqual(vr.main(["--responses", bad]), 1)
                finally:
                    sys.stdout = stdout


if __name__ == "__main__":
    unittest.main()
