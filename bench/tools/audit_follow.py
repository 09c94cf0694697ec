#!/usr/bin/python3
"""A full audit of every shard under load, for scripts/bench-scale: starts
one (POST /v1/audits, nothing frozen) on each shard and follows them to
their end.

    audit_follow.py --ports P0 P1 --token T --tenant bench --out F [--deadline-s S]

Appends each second's progress ({"t_s", "shard", "state",
"accounts_checked", "accounts_total", "differences"} per shard) to F, shows
it on the terminal every 10 s, and ends when every audit has ended or S
seconds have passed; prints the summary ({"audits": [{"shard",
"audit_id", "state", "accounts_checked", "accounts_total", "differences",
"seconds"}], "completed", "clean"}). Exits 1 unless every audit
completed without a difference.
"""
import argparse
import json
import sys
import time
import urllib.request


def call(port, token, method, path):
    req = urllib.request.Request(f"http://127.0.0.1:{port}{path}", method=method,
                                 headers={"Authorization": f"Bearer {token}"})
    with urllib.request.urlopen(req, timeout=30) as r:
        return json.load(r)


def summary(last, started_s):
    """Per shard its audit's last state; completed when every one
    completed, clean when none found a difference."""
    audits = [{"shard": shard, "audit_id": a["audit_id"], "state": a["state"],
               "accounts_checked": a["accounts_checked"], "accounts_total": a["accounts_total"],
               "differences": a["differences"], "seconds": round(started_s[shard], 1)}
              for shard, a in sorted(last.items())]
    return {"audits": audits, "completed": bool(audits) and all(a["state"] == "completed" for a in audits),
            "clean": all(a["differences"] == 0 for a in audits)}


def main():
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--ports", type=int, nargs="+", required=True)
    p.add_argument("--token", required=True)
    p.add_argument("--tenant", required=True)
    p.add_argument("--out", required=True)
    p.add_argument("--deadline-s", type=float, default=3600)
    a = p.parse_args()
    t0 = time.time()
    ids = {f"s{i}": call(port, a.token, "POST", f"/v1/audits?tenant={a.tenant}&freeze=false")["audit_id"]
           for i, port in enumerate(a.ports)}
    last, took = {}, {}
    with open(a.out, "a") as out:
        while True:
            t_s = time.time() - t0
            for i, port in enumerate(a.ports):
                shard = f"s{i}"
                if shard in last and last[shard]["state"] != "running":
                    continue
                last[shard] = call(port, a.token, "GET", f"/v1/audits/{ids[shard]}?tenant={a.tenant}")
                took[shard] = t_s
                out.write(json.dumps({"t_s": round(t_s, 1), "shard": shard, **{
                    k: last[shard][k] for k in ("state", "accounts_checked", "accounts_total", "differences")}}) + "\n")
            out.flush()
            running = [s for s, v in last.items() if v["state"] == "running"]
            if int(t_s) % 10 == 0 or not running:
                print("audit: " + ", ".join(f"{s} {v['accounts_checked']:,}/{v['accounts_total']:,} {v['state']}"
                                            for s, v in sorted(last.items())), file=sys.stderr, flush=True)
            if not running or t_s > a.deadline_s:
                break
            time.sleep(1)
    result = summary(last, took)
    print(json.dumps(result))
    sys.exit(0 if result["completed"] and result["clean"] else 1)


if __name__ == "__main__":
    main()
