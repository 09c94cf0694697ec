#!/usr/bin/python3
"""A month-end spike for scripts/bench-scale: many lots expiring at one
instant on the scaled shards, and how long the shards' expiry jobs take to
expire them all.

    lot_spike.py arm --port P --shards DB0 DB1 --lots N --delay-s D [--spare K]
    lot_spike.py follow --port P --shards DB0 DB1 --at-ms T --lots N --deadline-s S --out F

arm: gives N open lots (half on each shard; unheld, with value left, not
of the load's accounts acc-0 ... acc-(K-1)) the expiry now + D seconds, as
a grant on those terms would have, in one statement per shard; prints {"lots", "at_ms", "armed_ms"} (armed_ms: when
the last statement committed). follow: from at_ms on, counts each second
the spike's lots still open (the due ones, through the shards' lot_due
index), appends {"t_s", "open"} lines to F and prints progress every ten
samples; ends when none is left or S seconds after at_ms, and prints the
summary ({"lots", "at_ms", "all_expired_s" (null: not within S),
"deadline_s", "met"}).
"""
import argparse
import json
import sys
import time

import common


def shares(lots, shards):
    """Lots per shard: as even as can be, the first shards taking the rest."""
    return [lots // shards + (1 if i < lots % shards else 0) for i in range(shards)]


def arm_sql(lots, at_ms, spare):
    return ("WITH picked AS (SELECT tenant, account_id, lot_id FROM lot"
            " WHERE state = 'open' AND held = 0 AND remaining > 0"
            f" AND NOT (account_id ~ '^acc-[0-9]{{1,18}}$' AND substr(account_id, 5)::bigint < {int(spare)})"
            f" ORDER BY tenant, account_id, lot_id LIMIT {int(lots)}),"
            f" armed AS (UPDATE lot l SET expires_at = to_timestamp({int(at_ms)} / 1000.0), updated_at = now()"
            " FROM picked p WHERE (l.tenant, l.account_id, l.lot_id) = (p.tenant, p.account_id, p.lot_id)"
            " RETURNING 1)"
            " SELECT count(*) FROM armed")


def open_sql(at_ms):
    return ("SELECT count(*) FROM lot WHERE state = 'open' AND expires_at IS NOT NULL"
            f" AND expires_at <= to_timestamp({int(at_ms)} / 1000.0)")


def summary(samples, lots, at_ms, deadline_s):
    """The first second at which no lot of the spike was left open."""
    done = next((s["t_s"] for s in samples if s["open"] == 0), None)
    return {"lots": lots, "at_ms": at_ms, "all_expired_s": done, "deadline_s": deadline_s,
            "met": done is not None and done <= deadline_s}


def arm(a):
    at_ms = int(time.time() * 1000) + int(a.delay_s * 1000)
    pg = common.Postgres("127.0.0.1", a.port, "postgres")
    per_shard = zip(a.shards, shares(a.lots, len(a.shards)))
    armed = sum(int(pg.scalar(db, arm_sql(n, at_ms, a.spare))) for db, n in per_shard)
    print(json.dumps({"lots": armed, "at_ms": at_ms, "armed_ms": int(time.time() * 1000)}))


def follow(a):
    pg = common.Postgres("127.0.0.1", a.port, "postgres")
    samples = []
    with open(a.out, "a") as out:
        while True:
            t_s = round(time.time() - a.at_ms / 1000, 1)
            left = sum(int(pg.scalar(db, open_sql(a.at_ms))) for db in a.shards)
            samples.append({"t_s": t_s, "open": left})
            out.write(json.dumps(samples[-1]) + "\n")
            out.flush()
            if len(samples) % 10 == 1 or left == 0:
                print(f"lot-spike: {t_s:.0f} s after the instant, {left:,} of {a.lots:,} lots still open",
                      file=sys.stderr, flush=True)
            if left == 0 or t_s > a.deadline_s:
                break
            time.sleep(1)
    print(json.dumps(summary(samples, a.lots, a.at_ms, a.deadline_s)))


def main():
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    sub = p.add_subparsers(dest="command", required=True)
    for name in ("arm", "follow"):
        s = sub.add_parser(name)
        s.add_argument("--port", type=int, required=True)
        s.add_argument("--shards", nargs="+", required=True)
        s.add_argument("--lots", type=int, required=True)
    sub.choices["arm"].add_argument("--delay-s", type=float, required=True)
    sub.choices["arm"].add_argument("--spare", type=int, default=0)
    sub.choices["follow"].add_argument("--at-ms", type=int, required=True)
    sub.choices["follow"].add_argument("--deadline-s", type=float, default=180)
    sub.choices["follow"].add_argument("--out", required=True)
    a = p.parse_args()
    arm(a) if a.command == "arm" else follow(a)


if __name__ == "__main__":
    main()
