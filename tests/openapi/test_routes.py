"""docs/openapi.yaml names exactly the routes the gateway serves.

`<bin>/gateway/gateway --routes` prints the gateway's route table as JSON,
[{"method": "GET", "path": "/v1/accounts/{account_id}", "access": "app"}, ...]
(bin from TALLY_TEST_BIN_DIR, default build/ci). Routes are compared as
sets of (METHOD, path) with the names of path parameters ignored
(`{anything}` and `{rest...}` are both `{}`) and a trailing slash dropped:
the gateway splits paths without empty segments, so `/console` and
`/console/` are one route. Where the table says who may call a route
(`access`), the file's `x-tally-role` must agree; a route it reads no
body of (`body_limit` 0) has no `requestBody` in the file.

    python3 tests/openapi/test_routes.py [-v]
"""
import json
import os
import re
import subprocess
import sys
import unittest

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

import spec as openapi  # noqa: E402

BIN_DIR = os.environ.get("TALLY_TEST_BIN_DIR", os.path.join(openapi.ROOT, "build", "ci"))
# The route table's `access` as the file's `x-tally-role` says it.
ROLE_OF_ACCESS = {"anyone": "none", "app": "app", "operator": "operator"}


def normalise(path):
    """A path with every parameter written `{}` and no trailing slash."""
    path = re.sub(r"\{[^}]*\}", "{}", path)
    return path.rstrip("/") or "/"


def spec_routes(spec):
    """{(METHOD, normalised path): x-tally-role} of every operation of the file."""
    return {(m, normalise(p)): op.get("x-tally-role") for m, p, op in openapi.operations(spec)}


def table_routes(table):
    """{(METHOD, normalised path): access or None} of a `--routes` listing."""
    return {(r["method"].upper(), normalise(r["path"])): r.get("access") for r in table}


def bodiless_with_request_body(spec, table):
    """Routes the table reads no body of (`body_limit` 0) but the file gives a requestBody: [(METHOD, path)]."""
    with_body = {(m, normalise(p)) for m, p, op in openapi.operations(spec) if "requestBody" in op}
    return sorted({(r["method"].upper(), normalise(r["path"])) for r in table if r.get("body_limit") == 0} & with_body)


def compare(in_file, served):
    """(routes served but not in the file, routes in the file the gateway does not serve), sorted."""
    return sorted(set(served) - set(in_file)), sorted(set(in_file) - set(served))


def role_mismatches(in_file, served):
    """Routes in both whose access and x-tally-role disagree: [(route, access, role)]."""
    out = []
    for route in sorted(set(in_file) & set(served)):
        access = served[route]
        if access is not None and ROLE_OF_ACCESS.get(access) != in_file[route]:
            out.append((route, access, in_file[route]))
    return out


def gateway_table(bin_dir=BIN_DIR):
    """The gateway's route table, or (None, why) when the binary cannot print it."""
    binary = os.path.join(bin_dir, "gateway", "gateway")
    if not os.access(binary, os.X_OK):
        return None, f"no gateway binary at {binary} (set TALLY_TEST_BIN_DIR)"
    try:
        run = subprocess.run([binary, "--routes"], capture_output=True, text=True, timeout=10, stdin=subprocess.DEVNULL)
    except subprocess.TimeoutExpired:
        return None, f"{binary} --routes did not exit within 10 s: this build does not support --routes yet"
    try:
        table = json.loads(run.stdout)
    except ValueError:
        table = None
    if run.returncode != 0 or not isinstance(table, list):
        detail = (run.stderr or run.stdout).strip().splitlines()[-1:] or [""]
        return None, (f"{binary} --routes exited {run.returncode} without a JSON route list: this build does not "
                      f"support --routes yet ({detail[0][:200]})")
    return table, ""


def describe(routes):
    return "\n".join(f"  {m} {p}" for m, p in routes)


class CompareTest(unittest.TestCase):
    """The comparison itself, on a hand-written route table."""

    FILE = {("GET", "/v1/accounts/{}"): "app", ("POST", "/v1/credits"): "app", ("GET", "/console"): "none",
            ("GET", "/v1/admin/shards"): "operator"}

    def test_parameter_names_and_trailing_slashes_do_not_count(self):
        self.assertEqual(normalise("/v1/accounts/{account_id}/entries"), "/v1/accounts/{}/entries")
        self.assertEqual(normalise("/console/{file...}"), "/console/{}")
        self.assertEqual(normalise("/console/"), "/console")
        table = table_routes([{"method": "get", "path": "/v1/accounts/{id}", "access": "app"},
                              {"method": "POST", "path": "/v1/credits", "access": "app"},
                              {"method": "GET", "path": "/console/", "access": "anyone"},
                              {"method": "GET", "path": "/v1/admin/shards", "access": "operator"}])
        self.assertEqual(compare(self.FILE, table), ([], []))
        self.assertEqual(role_mismatches(self.FILE, table), [])

    def test_finds_missing_and_extra_routes_and_methods(self):
        table = table_routes([{"method": "GET", "path": "/v1/accounts/{id}"},
                              {"method": "GET", "path": "/v1/credits"},
                              {"method": "GET", "path": "/console"},
                              {"method": "GET", "path": "/v1/admin/health"}])
        missing, extra = compare(self.FILE, table)
        self.assertEqual(missing, [("GET", "/v1/admin/health"), ("GET", "/v1/credits")])
        self.assertEqual(extra, [("GET", "/v1/admin/shards"), ("POST", "/v1/credits")])

    def test_finds_a_role_that_disagrees(self):
        table = table_routes([{"method": "GET", "path": "/v1/admin/shards", "access": "app"},
                              {"method": "GET", "path": "/console", "access": "anyone"}])
        self.assertEqual(role_mismatches(self.FILE, table), [(("GET", "/v1/admin/shards"), "app", "operator")])

    def test_finds_a_request_body_on_a_route_that_reads_none(self):
        spec = {"paths": {"/v1/credits": {"post": {"requestBody": {}}}, "/v1/accounts/{id}": {"get": {}}}}
        table = [{"method": "POST", "path": "/v1/credits", "body_limit": 0},
                 {"method": "GET", "path": "/v1/accounts/{account_id}", "body_limit": 0}]
        self.assertEqual(bodiless_with_request_body(spec, table), [("POST", "/v1/credits")])
        table[0]["body_limit"] = None  # the server's limit
        self.assertEqual(bodiless_with_request_body(spec, table), [])


class GatewayRoutesTest(unittest.TestCase):
    """The file against the built gateway's `--routes`."""

    @classmethod
    def setUpClass(cls):
        cls.table, why = gateway_table()
        if cls.table is None:
            print(f"\nSKIPPED the gateway comparison: {why}", file=sys.stderr)
            raise unittest.SkipTest(why)
        cls.in_file = spec_routes(openapi.load())
        cls.served = table_routes(cls.table)

    def test_file_names_every_route_and_only_those(self):
        missing, extra = compare(self.in_file, self.served)
        problems = []
        if missing:
            problems.append("served by the gateway but missing from docs/openapi.yaml:\n" + describe(missing))
        if extra:
            problems.append("in docs/openapi.yaml but not served by the gateway:\n" + describe(extra))
        self.assertFalse(problems, "\n".join(problems))

    def test_roles_agree(self):
        wrong = role_mismatches(self.in_file, self.served)
        self.assertFalse(wrong, "x-tally-role disagrees with the gateway's access:\n" + "\n".join(
            f"  {m} {p}: gateway {access}, file {role}" for (m, p), access, role in wrong))

    def test_no_request_body_on_a_route_that_reads_none(self):
        wrong = bodiless_with_request_body(openapi.load(), self.table)
        self.assertFalse(wrong, "a requestBody in docs/openapi.yaml where the gateway reads none (body_limit 0):\n" +
                         describe(wrong))


if __name__ == "__main__":
    unittest.main()
