#!/usr/bin/python3
"""Latency of the saga lists and counts through the gateway: each query
sent REQUESTS times in a row over one keep-alive connection (after 10
unmeasured), p50 and p99 of each; one JSON object on stdout.

    saga_latency.py --port 8080 --app-key K --operator-key K --store scaled --repeat 1 [--account acc-1] \\
        [--requests 200]

The queries, newest first: GET /v1/sagas (no filter; its second page by
the first's cursor; by type; by account) and GET /v1/admin/sagas?state=failed,
and the counts, GET /v1/admin/sagas/counts. Any answer but 200 is an error.
The line printed is {"store": STORE, "repeat": REPEAT, "figures": {query: {"p50_ms", "p99_ms", "requests"}}}
(scripts/bench-scale appends it to RESULTS/lists.jsonl).
"""
import argparse
import http.client
import json
import math
import time


def percentile(values, q):
    """Nearest rank: the smallest value with at least Q of all values at or
    below it (as bench/load.cpp)."""
    ordered = sorted(values)
    rank = math.ceil(q * len(ordered))
    return ordered[min(max(rank, 1), len(ordered)) - 1]


def figures(latencies_ms):
    return {"p50_ms": round(percentile(latencies_ms, 0.5), 3), "p99_ms": round(percentile(latencies_ms, 0.99), 3),
            "requests": len(latencies_ms)}


class Gateway:
    def __init__(self, port):
        self.conn = http.client.HTTPConnection("127.0.0.1", port, timeout=60)

    def get(self, path, key):
        """(seconds taken, parsed body); raises on any status but 200."""
        start = time.perf_counter()
        self.conn.request("GET", path, headers={"Authorization": f"Bearer {key}"})
        response = self.conn.getresponse()
        body = response.read()
        took = time.perf_counter() - start
        if response.status != 200:
            raise RuntimeError(f"GET {path}: {response.status} {body[:200]!r}")
        return took, json.loads(body)


def main():
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--port", type=int, required=True)
    p.add_argument("--app-key", required=True)
    p.add_argument("--operator-key", required=True)
    p.add_argument("--account", default="acc-1")
    p.add_argument("--requests", type=int, default=200)
    p.add_argument("--store", required=True, help="what the stack runs on, for the record")
    p.add_argument("--repeat", type=int, required=True)
    a = p.parse_args()
    gw = Gateway(a.port)
    _, first = gw.get("/v1/sagas", a.app_key)
    queries = {
        "list": ("/v1/sagas", a.app_key),
        "list_page_2": (f"/v1/sagas?cursor={first['next']}" if first.get("next") else "/v1/sagas", a.app_key),
        "list_by_type": ("/v1/sagas?type=transfer", a.app_key),
        "list_by_account": (f"/v1/sagas?account={a.account}", a.app_key),
        "admin_by_state": ("/v1/admin/sagas?state=failed", a.operator_key),
        "counts": ("/v1/admin/sagas/counts", a.operator_key),
    }
    out = {}
    for name, (path, key) in queries.items():
        for _ in range(10):
            gw.get(path, key)
        out[name] = figures([gw.get(path, key)[0] * 1000 for _ in range(a.requests)])
    print(json.dumps({"store": a.store, "repeat": a.repeat, "figures": out}))


if __name__ == "__main__":
    main()
