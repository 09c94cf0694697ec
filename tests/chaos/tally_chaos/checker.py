"""The promises of DESIGN.md checked on a snapshot of the quiesced system
(tally_chaos.snapshot reads it) and on the clients' history. Pure: every
check takes plain data and returns violations, so tests can feed it broken
states."""
from collections import defaultdict

TERMINAL = {"completed", "failed", "compensated"}


class Violation:
    def __init__(self, promise, key, detail):
        self.promise, self.key, self.detail = promise, key, detail

    def __repr__(self):
        return f"{self.promise}: {self.key}: {self.detail}"

    def as_dict(self):
        return {"promise": self.promise, "key": self.key, "detail": self.detail}


CROCKFORD = "0123456789ABCDEFGHJKMNPQRSTVWXYZ"


def saga_created_ms(saga_id):
    """The creation time a saga id begins with: "sg_" and the ULID layout,
    whose first 10 characters carry 48 bits of Unix milliseconds."""
    ms = 0
    for c in saga_id[3:13]:
        ms = ms * 32 + CROCKFORD.index(c)
    return ms


def saga_effect(saga, sagas):
    """What a saga moved, per account, once terminal: only a completed saga
    moves anything. `sagas` resolves a refund's original."""
    if saga["state"] != "completed":
        return {}
    i = saga["input"]
    kind = saga["type"]
    if kind == "credit":
        return {i["account"]: i["amount"]}
    if kind == "deduct":
        return {i["account"]: -i["amount"]}
    if kind == "transfer":
        return {i["source"]: -i["amount"], i["destination"]: i["amount"]}
    if kind == "batch_deduct":
        return {item["account_id"]: -item["amount"] for item in i["items"]}
    if kind == "refund":
        if saga.get("workflow") in ("refund", "revoke_items"):
            return refunded_by(saga)
        original = sagas.get(i["original_saga_id"])
        if original is None:
            return {"?refund-of-unknown-original": i["amount"]}
        o = original["input"]
        return {o["source"]: i["amount"], o["destination"]: -i["amount"]}
    return {"?unknown-saga-type": 0}


def refunded_by(saga):
    """What a refund (of a deduction or a batch item) or a revoke of every
    batch item gave back per account: its step's calls' "a", which is the
    shard's answer (a revoke of what is left names no amount)."""
    i = saga["input"]
    accounts = [item["account_id"] for item in i["items"]] if saga["workflow"] == "revoke_items" else [i["account"]]
    calls = (saga.get("progress") or {}).get("calls", [[]])[0]
    out = defaultdict(int)
    for account, call in zip(accounts, calls):
        out[account] += call.get("a", 0)
    return dict(out)


def refunds_within_originals(sagas, ledger):
    """Per original and account, what its refunds moved on the ledger never
    exceeds what the original took there (cumulative <= original)."""
    taken = {}
    for sid, s in sagas.items():
        if s["state"] != "completed" or s["type"] not in ("deduct", "batch_deduct", "transfer"):
            continue
        effect = saga_effect(s, sagas)
        taken[sid] = {a: -d for a, d in effect.items() if d < 0}
    given = defaultdict(lambda: defaultdict(int))
    for sid, s in sagas.items():
        if s["type"] == "refund":
            for account, delta in ledger.get(sid, {}).items():
                if delta > 0:
                    given[s["input"]["original_saga_id"]][account] += delta
    out = []
    for original, per_account in sorted(given.items()):
        for account, amount in sorted(per_account.items()):
            if amount > taken.get(original, {}).get(account, 0):
                out.append((original, account, amount, taken.get(original, {}).get(account, 0)))
    return out


def expected_balances(sagas):
    out = defaultdict(int)
    for s in sagas.values():
        for account, delta in saga_effect(s, sagas).items():
            out[account] += delta
    return out


def expired_by_account(expire_entries):
    """What expired per account: Σ of its expire entries (negative deltas)."""
    out = defaultdict(int)
    for e in expire_entries:
        out[e["account_id"]] += e["delta"]
    return out


def op_total_bounds(history):
    """The range the clients alone allow for the sum of all balances: what
    they saw complete counts exactly, what they saw fail counts nothing, and an
    operation whose end they did not see may or may not have happened."""
    lo = hi = 0
    for op in history:
        effect = op.get("effect", 0)
        if effect == 0:
            continue
        outcome = op.get("final_state")
        if outcome == "completed":
            lo += effect
            hi += effect
        elif outcome in ("failed", "compensated", "rejected"):
            continue
        else:
            lo += min(0, effect)
            hi += max(0, effect)
    return lo, hi


def check(snap, history):
    v = []
    sagas = snap["sagas"]
    accounts = snap["accounts"]

    # 5. Every saga terminates.
    for sid, s in sorted(sagas.items()):
        if s["state"] not in TERMINAL:
            v.append(Violation("every_saga_terminal", sid, f"state {s['state']} ({s.get('attention') or ''})"))

    # 1. No overdraft.
    for a in accounts:
        if a["balance"] < 0 or a["held"] < 0 or a["balance"] - a["held"] < 0:
            v.append(Violation("nothing_negative", a["account_id"], f"balance {a['balance']} held {a['held']}"))

    # 4. Conservation, exact: the balances are what the terminal sagas moved,
    # less what expired (the expire entries, whose deltas are negative).
    moved = expected_balances(sagas)
    expired = expired_by_account(snap["expire_entries"])
    actual = defaultdict(int)
    for a in accounts:
        actual[a["account_id"]] += a["balance"]
    total_moved, total_expired, total_actual = sum(moved.values()), sum(expired.values()), sum(actual.values())
    if total_moved + total_expired != total_actual:
        v.append(Violation("conservation", "total", f"balances sum to {total_actual}, the sagas moved {total_moved}"
                                                    f" and {-total_expired} expired"))
    for account in sorted(set(moved) | set(expired) | set(actual)):
        if moved.get(account, 0) + expired.get(account, 0) != actual.get(account, 0):
            v.append(Violation("conservation", account,
                               f"balance {actual.get(account, 0)}, completed sagas give {moved.get(account, 0)}"
                               f" and {-expired.get(account, 0)} expired"))
    lo, hi = op_total_bounds(history)
    if not lo <= total_actual - total_expired <= hi:
        v.append(Violation("conservation", "total-vs-clients",
                           f"balances sum to {total_actual} and {-total_expired} expired, outside [{lo}, {hi}]"
                           f" the clients' outcomes allow"))

    # 4. No value held for a terminal saga (all are terminal once quiesced).
    for h in snap["open_holds"]:
        saga = sagas.get(h["hold_id"])
        if saga is None or saga["state"] in TERMINAL:
            v.append(Violation("no_hold_for_terminal_saga", f"{h['account_id']}/{h['hold_id']}",
                               f"{h['amount'] - h['captured']} still held, saga {saga['state'] if saga else 'unknown'}"))
    for a in accounts:
        if a["held"] != a.get("open_held", 0):
            v.append(Violation("no_hold_for_terminal_saga", a["account_id"],
                               f"held {a['held']} but open holds sum to {a.get('open_held', 0)}"))

    # 2. One effect per business key: each saga's ledger entries (their
    # biz_id is the saga id) move exactly what its outcome says.
    for dupe in snap["ledger_dupes"]:
        v.append(Violation("one_effect_per_key", dupe, "two ledger entries for one business key"))
    for dupe in snap["saga_dupes"]:
        v.append(Violation("one_effect_per_key", dupe, "two sagas for one (tenant, type, biz_id)"))
    ledger = snap["ledger_by_saga"]  # {saga_id: {account: net delta}}
    for sid, s in sorted(sagas.items()):
        want = {k: d for k, d in saga_effect(s, sagas).items() if d}
        got = {k: d for k, d in ledger.get(sid, {}).items() if d}
        if want != got:
            v.append(Violation("one_effect_per_key", sid, f"{s['type']} {s['state']}: ledger moved {got}, outcome says {want}"))
    for original, account, gave, took in refunds_within_originals(sagas, ledger):
        v.append(Violation("refunds_within_original", f"{original}/{account}",
                           f"its refunds gave back {gave}, it took {took}"))
    for sid in sorted(set(ledger) - set(sagas)):
        if any(ledger[sid].values()):
            v.append(Violation("one_effect_per_key", sid, f"ledger entries {ledger[sid]} of no saga"))
    for op in history:
        if op.get("conflict"):
            v.append(Violation("one_effect_per_key", op["biz_id"], "422 idempotency_conflict for an unchanged request"))
        if op.get("replay_mismatch"):
            v.append(Violation("one_effect_per_key", op["biz_id"], op["replay_mismatch"]))

    # Every acknowledged saga is present with the acknowledged outcome.
    by_key = {(s["type"], s["biz_id"]): sid for sid, s in sagas.items()}
    for op in history:
        sid = op.get("saga_id")
        if sid is None:
            continue
        s = sagas.get(sid)
        if s is None:
            v.append(Violation("acknowledged_saga_present", sid, f"{op['kind']} {op['biz_id']} acknowledged, not stored"))
            continue
        if op.get("saga_type") and by_key.get((op["saga_type"], op["biz_id"])) != sid:
            v.append(Violation("acknowledged_saga_present", sid, f"{op['biz_id']} names another saga"))
        acked = op.get("acked_state")
        if acked in TERMINAL and s["state"] != acked:
            v.append(Violation("acknowledged_saga_present", sid, f"acknowledged {acked}, stored {s['state']}"))

    # 3. Balance equals its ledger, on every shard; reconciliation is clean.
    for a in accounts:
        if a["balance"] != a["ledger_sum"]:
            v.append(Violation("balance_equals_ledger", a["account_id"],
                               f"balance {a['balance']}, opening + entries {a['ledger_sum']}"))
        if a["status"] != "active":
            v.append(Violation("reconciliation_clean", a["account_id"], f"status {a['status']}"))
    for r in snap["reconciliation"]:
        if r["differences"] != 0:
            v.append(Violation("reconciliation_clean", f"shard {r['shard']} ({r.get('mode', 'full')})",
                               str(r["report"])[:300]))

    # Lots (docs/account_shard.md, "Grant lots and expiry"), read from each
    # shard's tables: they add up to the balance and held; every expired lot
    # has exactly one expire entry (biz_id its id), other lots none; a lot's
    # expired is what the expire operations took from it, and per account
    # the lots' expired is what the expire entries took from the balance.
    lots_of = defaultdict(list)
    for lot in snap["lots"]:
        lots_of[lot["account_id"]].append(lot)
    for a in accounts:
        remaining = sum(lot["remaining"] for lot in lots_of[a["account_id"]])
        held = sum(lot["held"] for lot in lots_of[a["account_id"]])
        if (remaining, held) != (a["balance"], a["held"]):
            v.append(Violation("lots_sum_to_balance", a["account_id"], f"lots: remaining {remaining} held {held};"
                                                                      f" balance {a['balance']} held {a['held']}"))
    entries = defaultdict(int)
    for e in snap["expire_entries"]:
        if not e["biz_id"].startswith("hold:"):
            entries[(e["account_id"], e["biz_id"])] += e["entries"]
    parts = defaultdict(int)
    for p in snap["expire_parts"]:
        parts[(p["account_id"], p["lot_id"])] += p["amount"]
    for lot in snap["lots"]:
        key = f"{lot['account_id']}/lot {lot['lot_id']}"
        n = entries.pop((lot["account_id"], str(lot["lot_id"])), 0)
        if n != (1 if lot["state"] == "expired" else 0):
            v.append(Violation("one_expire_entry_per_expired_lot", key, f"state {lot['state']}, {n} expire entries"))
        took = parts.pop((lot["account_id"], lot["lot_id"]), 0)
        if lot["expired"] != took:
            v.append(Violation("lot_expired_matches_operations", key,
                               f"expired {lot['expired']}, the expire operations took {took} from it"))
    for (account, lot_id), n in sorted(entries.items()):
        v.append(Violation("one_expire_entry_per_expired_lot", f"{account}/lot {lot_id}",
                           f"{n} expire entries, no lot"))
    for (account, lot_id), took in sorted(parts.items()):
        v.append(Violation("lot_expired_matches_operations", f"{account}/lot {lot_id}",
                           f"the expire operations took {took} from no lot"))
    for account in sorted(set(lots_of) | set(expired)):
        lots_expired = sum(lot["expired"] for lot in lots_of[account])
        if lots_expired != -expired.get(account, 0):
            v.append(Violation("lot_expired_matches_operations", account,
                               f"lots expired {lots_expired}, the expire entries took {-expired.get(account, 0)}"))

    # 6. Redis projections equal the ledgers and the saga store.
    proj = snap["projections"]
    for a in accounts:
        doc = proj["accounts"].get(a["account_id"])
        if doc is None:
            v.append(Violation("projection_equals_ledger", a["account_id"], "no projection"))
            continue
        for f in ("balance", "held", "version", "status"):
            if doc.get(f) != a[f]:
                v.append(Violation("projection_equals_ledger", a["account_id"],
                                   f"{f}: projection {doc.get(f)}, ledger {a[f]}"))
                break
    # A saga created before the last rebuild of the saga projections may have
    # none: the rebuild reads the outbox, which the relay prunes, and a read
    # of a missing projection goes to the saga store (docs/relay.md).
    for sid, s in sorted(sagas.items()):
        doc = proj["sagas"].get(sid)
        if doc is None and saga_created_ms(sid) < proj.get("sagas_rebuilt_ms", 0):
            continue
        if doc is None or doc.get("state") != s["state"]:
            v.append(Violation("projection_equals_ledger", sid,
                               f"saga projection {None if doc is None else doc.get('state')}, store {s['state']}"))

    # 7. The relay delivered everything to every sink.
    for b in snap["relay_backlog"]:
        if b["behind"] != 0:
            v.append(Violation("relay_delivery_complete", f"{b['source']}->{b['consumer']}", f"{b['behind']} events behind"))

    # 9. Every store bounded, and no event lost by pruning: a consumer that
    # read slowly (the run's audit) was given every state change of every
    # account and the first event of every saga, while the relay pruned the
    # outboxes behind it.
    audit = snap.get("audit")
    if audit is not None:
        for a in accounts:
            seen = set(audit["account_versions"].get(a["account_id"], []))
            missing = [n for n in range(1, a["version"] + 1) if n not in seen]
            if missing:
                v.append(Violation("no_event_lost_by_pruning", a["account_id"],
                                   f"{len(missing)} of {a['version']} versions never came, first {missing[:5]}"))
        seen_sagas = set(audit["sagas_seen"])
        for sid in sorted(sagas):
            if sid not in seen_sagas:
                v.append(Violation("no_event_lost_by_pruning", sid, "none of its events came"))
        if audit["left"] >= audit["read"]:
            v.append(Violation("outbox_pruned", "outboxes",
                               f"{audit['left']} events left of the {audit['read']} read: nothing was pruned"))
    return v
