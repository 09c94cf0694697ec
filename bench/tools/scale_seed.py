#!/usr/bin/python3
"""Fills two shard databases and a saga store at scale through the real
schema, with set-based SQL (bench/tools/scale/*.sql) run by psql, chunk by
chunk, several chunks at once; then checks that the three databases agree.

    scale_seed.py generate --port 5432 --shards db_s0 db_s1 --sagas db_sagas \\
        --accounts 10000000 --entries 20000000 [--keep-sagas 10000] [--chunk 100000] [--jobs 2] \\
        [--summary FILE]
    scale_seed.py check --port 5432 --shards db_s0 db_s1 --sagas db_sagas [--summary FILE]

The databases must exist with their schema as of the migrations the SQL is
written against (shard 0005, orchestrator 0005: scripts/bench-scale applies
them, and every later one after generation). ENTRIES counts the ledger
entries that move value; each account also has its opening entry (delta 0).
Progress goes to stderr; --summary gets the plan, each phase's seconds and
the rows and bytes of every table (generate), or the figures of the check.
check exits 1 when the databases disagree: a shard's balances differ from
its ledger or its lots, or the value in the accounts differs from what the
settled sagas credited and deducted less what expired.
"""
import argparse
import concurrent.futures
import json
import math
import os
import sys
import time

import common

SQL = os.path.join(os.path.dirname(os.path.abspath(__file__)), "scale")
DAY_MS = 86_400_000
# Per account (shard.sql): the welcome credit, 10 % a credit that expires
# and its expiry, 30 % a credit that expires later. Per slot, on average:
# 60 % transfers (2 entries), 20 % deductions, 10 % held deductions, 3 %
# refused transfers (none), 7 % deductions refunded in part (2).
ENTRIES_PER_ACCOUNT = 1 + 2 * 0.10 + 0.30
ENTRIES_PER_SLOT = 0.60 * 2 + 0.20 + 0.10 + 0.07 * 2


def plan(accounts, entries, now_ms):
    """The model's parameters (common.sql): slots S over R rounds, the day
    [t0, t0 + span) ending five minutes before now, spread over `total`
    positions."""
    if accounts < 2:
        raise ValueError("at least 2 accounts")
    slots = max(0, round((entries - ENTRIES_PER_ACCOUNT * accounts) / ENTRIES_PER_SLOT))
    rounds = max(1, math.ceil(slots / accounts))
    return {"N": accounts, "S": slots, "R": rounds, "t0": now_ms - DAY_MS, "span": DAY_MS - 300_000,
            "total": (rounds + 2) * accounts * 16}


def chunks(accounts, size):
    return [(i0, min(i0 + size, accounts)) for i0 in range(0, accounts, size)]


def log(message):
    print(f"scale-seed: {message}", file=sys.stderr, flush=True)


def table_sizes(pg, db):
    """Rows (exact) and bytes (heap, indexes, TOAST) of each table of DB."""
    out = {}
    for name, size in pg.query(db, "SELECT relname, pg_total_relation_size(oid) FROM pg_class "
                                   "WHERE relkind = 'r' AND relnamespace = 'public'::regnamespace ORDER BY relname"):
        out[name] = {"rows": int(pg.scalar(db, f'SELECT count(*) FROM "{name}"')), "bytes": int(size)}
    return out


def generate(a):
    pg = common.Postgres(a.host, a.port, a.user)
    model = plan(a.accounts, a.entries, int(time.time() * 1000))
    log(f"{a.accounts:,} accounts, {model['S']:,} activity slots over {model['R']} round(s); "
        f"chunks of {a.chunk:,} accounts, {a.jobs} at a time")
    tasks = [(db, "shard.sql", {"shard": k}) for k, db in enumerate(a.shards)] + [(a.sagas, "sagas.sql", {})]
    work = [(db, script, {**model, **extra, "i0": i0, "i1": i1}) for db, script, extra in tasks
            for i0, i1 in chunks(a.accounts, a.chunk)]
    phases = {}
    started = time.monotonic()
    with concurrent.futures.ThreadPoolExecutor(max_workers=a.jobs) as pool:
        def one(item):
            db, script, variables = item
            t = time.monotonic()
            pg.run_file(db, os.path.join(SQL, script), variables)
            return db, variables["i0"], variables["i1"], time.monotonic() - t

        for done, (db, i0, i1, seconds) in enumerate(pool.map(one, work), 1):
            elapsed = time.monotonic() - started
            log(f"{done:4}/{len(work)} {db}: accounts {i0:,}-{i1 - 1:,} in {seconds:.1f} s "
                f"({elapsed:.0f} s so far, about {elapsed / done * (len(work) - done):.0f} s to go)")
    phases["insert_s"] = round(time.monotonic() - started, 1)

    finishing = time.monotonic()
    for db in a.shards:
        # New entries take sequence numbers after the generated ones.
        pg.query(db, "SELECT setval('ledger_seq', (SELECT max(seq) FROM ledger_entry))")
    if a.keep_sagas is not None:
        # The store keeps the newest sagas (ids sort by creation time).
        pg.query(a.sagas, f"""
            WITH cut AS (SELECT saga_id FROM saga ORDER BY saga_id DESC OFFSET {int(a.keep_sagas)} LIMIT 1),
                 gone AS (DELETE FROM saga_step WHERE saga_id <= (SELECT saga_id FROM cut))
            DELETE FROM saga WHERE saga_id <= (SELECT saga_id FROM cut)""")
    phases["finish_s"] = round(time.monotonic() - finishing, 1)

    # As autovacuum would leave a database in service: statistics, hint
    # bits and visibility map set.
    t = time.monotonic()
    with concurrent.futures.ThreadPoolExecutor(max_workers=a.jobs) as pool:
        list(pool.map(lambda db: pg.query(db, "VACUUM (ANALYZE)"), [*a.shards, a.sagas]))
    phases["vacuum_analyze_s"] = round(time.monotonic() - t, 1)
    log(f"inserted in {phases['insert_s']} s, vacuumed and analysed in {phases['vacuum_analyze_s']} s")

    tables = {db: table_sizes(pg, db) for db in [*a.shards, a.sagas]}
    summary = {"plan": model, "accounts": a.accounts, "entries_asked": a.entries, "phases": phases, "tables": tables,
               "database_bytes": {db: int(pg.scalar(db, "SELECT pg_database_size(current_database())"))
                                  for db in [*a.shards, a.sagas]}}
    summary["ledger_entries"] = sum(tables[db]["ledger_entry"]["rows"] for db in a.shards)
    summary["sagas"] = tables[a.sagas]["saga"]["rows"]
    if a.summary:
        with open(a.summary, "w") as f:
            json.dump(summary, f, indent=2)
    log(f"{summary['ledger_entries']:,} ledger entries ({a.accounts:,} of them openings), {summary['sagas']:,} sagas")


def check(a):
    """Conservation and agreement, in SQL over each database (the shards'
    reconciliation itself runs through their API: scripts/bench-scale)."""
    pg = common.Postgres(a.host, a.port, a.user)
    problems = []
    figures = {"shards": {}}
    for db in a.shards:
        row = pg.query(db, """
            SELECT (SELECT coalesce(sum(balance), 0) FROM account), (SELECT coalesce(sum(held), 0) FROM account),
                   (SELECT coalesce(sum(delta), 0) FROM ledger_entry),
                   (SELECT coalesce(sum(delta), 0) FROM ledger_entry WHERE biz_type = 'expire'),
                   (SELECT coalesce(sum(remaining), 0) FROM lot), (SELECT coalesce(sum(held), 0) FROM lot),
                   (SELECT coalesce(sum(amount), 0) FROM hold WHERE state = 'held'),
                   (SELECT count(*) FROM account)""")[0]
        balance, held, ledger, expired, lot_remaining, lot_held, open_holds, accounts = map(int, row)
        figures["shards"][db] = {"accounts": accounts, "balance": balance, "held": held, "ledger": ledger,
                                 "expired": expired, "lot_remaining": lot_remaining, "lot_held": lot_held,
                                 "open_holds": open_holds}
        if not balance == ledger == lot_remaining:
            problems.append(f"{db}: balances {balance}, ledger {ledger}, lots' remaining {lot_remaining}")
        if not held == lot_held == open_holds:
            problems.append(f"{db}: held {held}, lots' held {lot_held}, open holds {open_holds}")
    # Transfers move value between accounts; credits and refunds bring it
    # in, deductions and expiries take it out.
    net = int(pg.scalar(a.sagas, """
        SELECT coalesce(sum(CASE WHEN type IN ('credit', 'refund') THEN 1 WHEN type = 'deduct' THEN -1 ELSE 0 END
                            * (input->>'amount')::bigint), 0)
        FROM saga WHERE state = 'completed'"""))
    in_accounts = sum(s["balance"] for s in figures["shards"].values())
    expired = sum(s["expired"] for s in figures["shards"].values())
    figures.update(sagas_net=net, balances=in_accounts, expired=expired)
    if in_accounts != net + expired:
        problems.append(f"value: the accounts hold {in_accounts}, the settled sagas brought in {net} "
                        f"and {-expired} expired")
    figures["problems"] = problems
    if a.summary:
        with open(a.summary, "w") as f:
            json.dump(figures, f, indent=2)
    for p in problems:
        log(f"check failed: {p}")
    if problems:
        sys.exit(1)
    log(f"check: balances = ledgers = lots ({in_accounts:,}), held = lots' held = open holds, "
        f"value = settled sagas' net {net:,} less {-expired:,} expired")


def main():
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    sub = p.add_subparsers(dest="command", required=True)
    for name in ("generate", "check"):
        s = sub.add_parser(name)
        s.add_argument("--host", default="127.0.0.1")
        s.add_argument("--port", type=int, required=True)
        s.add_argument("--user", default="postgres")
        s.add_argument("--shards", nargs=2, required=True, metavar="DB")
        s.add_argument("--sagas", required=True, metavar="DB")
        s.add_argument("--summary")
        if name == "generate":
            s.add_argument("--accounts", type=int, required=True)
            s.add_argument("--entries", type=int, required=True)
            s.add_argument("--keep-sagas", type=int, help="keep the newest N sagas only")
            s.add_argument("--chunk", type=int, default=100_000, help="accounts per statement")
            s.add_argument("--jobs", type=int, default=2, help="statements at once")
    a = p.parse_args()
    generate(a) if a.command == "generate" else check(a)


if __name__ == "__main__":
    main()
