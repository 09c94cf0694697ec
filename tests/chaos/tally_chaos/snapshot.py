"""Reads what the checker needs from the authorities (each shard's and the
orchestrator's PostgreSQL), from Redis and from each shard's reconciliation
(the operator endpoint of the gateway), for one tenant."""
import json
from collections import defaultdict

import psycopg2
import redis

from tally_chaos.api import Client


# What an authority that cannot be reached raises (a server restarting; a
# connection it closed, which a rollback on the way out then finds closed).
UNREACHABLE = (psycopg2.OperationalError, psycopg2.InterfaceError, redis.exceptions.ConnectionError)


def one_line(error):
    """An error's message on one line (libpq's span several)."""
    return " ".join(str(error).split())


def connect(conninfo):
    return psycopg2.connect(conninfo, connect_timeout=3)


def query(conninfo, sql, params=()):
    with connect(conninfo) as c, c.cursor() as cur:
        cur.execute(sql, params)
        rows = cur.fetchall()
    c.close()
    return rows


def relay_backlog(conninfo, consumers):
    out = []
    for consumer in consumers:
        rows = query(conninfo,
                     "SELECT count(*) FROM outbox_event e WHERE NOT EXISTS ("
                     " SELECT 1 FROM relay_cursor c WHERE c.consumer = %s AND (e.tx_id, e.id) <= (c.tx_id, c.id))",
                     (consumer,))
        out.append({"consumer": consumer, "behind": rows[0][0]})
    return out


def take(cluster, tenant):
    """cluster: shard_conninfos (list), saga_conninfo, redis (host, port),
    layout (the gateway's port, the operator key), relay_consumers."""
    snap = {"accounts": [], "open_holds": [], "ledger_dupes": [], "reconciliation": [], "relay_backlog": [],
            "lots": [], "expire_entries": [], "expire_parts": []}
    ledger_by_saga = defaultdict(lambda: defaultdict(int))
    for shard, conninfo in enumerate(cluster.shard_conninfos):
        sums = dict(query(conninfo, "SELECT account_id, coalesce(sum(delta), 0) FROM ledger_entry WHERE tenant = %s"
                                    " GROUP BY account_id", (tenant,)))
        held = dict(query(conninfo, "SELECT account_id, sum(amount - captured) FROM hold WHERE tenant = %s"
                                    " AND state = 'held' GROUP BY account_id", (tenant,)))
        for account_id, balance, held_now, status, version in query(
                conninfo, "SELECT account_id, balance, held, status, version FROM account WHERE tenant = %s", (tenant,)):
            snap["accounts"].append({"shard": shard, "account_id": account_id, "balance": balance, "held": held_now,
                                     "status": status, "version": version, "ledger_sum": int(sums.get(account_id, 0)),
                                     "open_held": int(held.get(account_id, 0))})
        for account_id, hold_id, amount, captured in query(
                conninfo, "SELECT account_id, hold_id, amount, captured FROM hold WHERE tenant = %s AND state = 'held'",
                (tenant,)):
            snap["open_holds"].append({"shard": shard, "account_id": account_id, "hold_id": hold_id,
                                       "amount": amount, "captured": captured})
        for biz_id, account_id, delta in query(
                conninfo, "SELECT biz_id, account_id, sum(delta) FROM ledger_entry WHERE tenant = %s"
                          " AND biz_type <> 'expire' GROUP BY biz_id, account_id", (tenant,)):
            ledger_by_saga[biz_id][account_id] += int(delta)
        for account_id, lot_id, remaining, held_now, expired, state in query(
                conninfo, "SELECT account_id, lot_id, remaining, held, expired, state FROM lot WHERE tenant = %s",
                (tenant,)):
            snap["lots"].append({"shard": shard, "account_id": account_id, "lot_id": lot_id, "remaining": remaining,
                                 "held": held_now, "expired": expired, "state": state})
        # An expiry's entry: biz_id the lot id, or hold:<hold id> for a held part.
        for account_id, biz_id, entries, delta in query(
                conninfo, "SELECT account_id, biz_id, count(*), sum(delta) FROM ledger_entry WHERE tenant = %s"
                          " AND biz_type = 'expire' GROUP BY 1, 2", (tenant,)):
            snap["expire_entries"].append({"shard": shard, "account_id": account_id, "biz_id": biz_id,
                                           "entries": entries, "delta": int(delta)})
        # What the expire operations took from each lot ([[lot_id, amount, ...], ...]).
        for account_id, lot_id, amount in query(
                conninfo, "SELECT o.account_id, (p->>0)::bigint, sum((p->>1)::bigint)"
                          " FROM operation o, jsonb_array_elements(o.lots) p WHERE o.tenant = %s"
                          " AND o.biz_type = 'expire' GROUP BY 1, 2", (tenant,)):
            snap["expire_parts"].append({"account_id": account_id, "lot_id": lot_id, "amount": int(amount)})
        for row in query(conninfo, "SELECT account_id, biz_type, biz_id FROM ledger_entry WHERE tenant = %s"
                                   " GROUP BY 1, 2, 3 HAVING count(*) > 1", (tenant,)):
            snap["ledger_dupes"].append(f"shard {shard}: " + "/".join(row))
        # As an operator sees it, through the gateway (which freezes what
        # differs): what was written since the last run, then everything.
        for mode in ("incremental", "full"):
            rec = Client(cluster.layout.gateway_port, cluster.layout.operator_key, timeout=30).get(
                f"/v1/admin/reconciliation?shard={shard}&mode={mode}")
            if rec.status != 200:
                snap["reconciliation"].append({"shard": shard, "mode": mode, "differences": -1,
                                               "report": f"HTTP {rec.status}"})
            else:
                snap["reconciliation"].append({"shard": shard, "mode": mode, "differences": rec.body["differences"],
                                               "report": rec.body["accounts_with_differences"]})
        for b in relay_backlog(conninfo, cluster.relay_consumers):
            snap["relay_backlog"].append({"source": f"shard {shard}", **b})
    snap["ledger_by_saga"] = {k: dict(v) for k, v in ledger_by_saga.items()}

    snap["sagas"] = {}
    as_json = lambda v: v if isinstance(v, (dict, type(None))) else json.loads(v)  # noqa: E731
    # A refund's progress says what each of its calls gave back ("a").
    for sid, kind, biz_id, state, inp, attention, workflow, progress in query(
            cluster.saga_conninfo, "SELECT saga_id, type, biz_id, state, input, attention, workflow,"
            " CASE WHEN type = 'refund' THEN progress END FROM saga WHERE tenant = %s", (tenant,)):
        snap["sagas"][sid] = {"type": kind, "biz_id": biz_id, "state": state, "input": as_json(inp),
                              "attention": attention, "workflow": workflow, "progress": as_json(progress)}
    snap["saga_dupes"] = ["/".join(r) for r in query(
        cluster.saga_conninfo, "SELECT tenant, type, biz_id FROM saga GROUP BY 1, 2, 3 HAVING count(*) > 1")]
    for b in relay_backlog(cluster.saga_conninfo, cluster.relay_consumers):
        snap["relay_backlog"].append({"source": "orchestrator", **b})

    r = redis.Redis(host=cluster.redis[0], port=cluster.redis[1], socket_timeout=5)
    snap["projections"] = {"accounts": {}, "sagas": {}}
    # When the relay last finished rebuilding the saga projections (unix ms; 0: never).
    snap["projections"]["sagas_rebuilt_ms"] = int(r.get("tally:projection-source:orchestrator") or 0)
    pipe = r.pipeline(transaction=False)
    for a in snap["accounts"]:
        pipe.hget(f"tally:account:{tenant}/{a['account_id']}", "doc")
    for a, doc in zip(snap["accounts"], pipe.execute()):
        snap["projections"]["accounts"][a["account_id"]] = json.loads(doc) if doc else None
    ids = sorted(snap["sagas"])
    for start in range(0, len(ids), 1000):
        pipe = r.pipeline(transaction=False)
        for sid in ids[start:start + 1000]:
            pipe.hget(f"tally:saga:{tenant}/{sid}", "doc")
        for sid, doc in zip(ids[start:start + 1000], pipe.execute()):
            snap["projections"]["sagas"][sid] = json.loads(doc) if doc else None
    return snap


def unfinished(cluster, tenant, horizon_s=60):
    """What still moves: lots that the expiry job will expire within
    horizon_s (the workload's expire within seconds, a refund's grace lot
    only in days), sagas not terminal, events not yet delivered. Lots first:
    once none is due, no expiry writes an event after the backlog is read."""
    due = 0
    for conninfo in cluster.shard_conninfos:
        due += query(conninfo, "SELECT count(*) FROM lot l JOIN account a USING (tenant, account_id)"
                               " WHERE l.tenant = %s AND l.state = 'open' AND a.status = 'active'"
                               " AND l.expires_at < now() + make_interval(secs => %s)", (tenant, horizon_s))[0][0]
    rows = query(cluster.saga_conninfo, "SELECT count(*) FROM saga WHERE tenant = %s AND state NOT IN"
                                        " ('completed', 'failed', 'compensated')", (tenant,))
    behind = sum(b["behind"] for b in relay_backlog(cluster.saga_conninfo, cluster.relay_consumers))
    for conninfo in cluster.shard_conninfos:
        behind += sum(b["behind"] for b in relay_backlog(conninfo, cluster.relay_consumers))
    return due, rows[0][0], behind


def total_balance(cluster, tenant):
    """(Σ balance, Σ held) over every shard, or None while one is unreachable."""
    total = held = 0
    try:
        for conninfo in cluster.shard_conninfos:
            b, h = query(conninfo, "SELECT coalesce(sum(balance), 0), coalesce(sum(held), 0) FROM account"
                                   " WHERE tenant = %s", (tenant,))[0]
            total, held = total + int(b), held + int(h)
    except psycopg2.Error:
        return None
    return total, held
