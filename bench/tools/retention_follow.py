#!/usr/bin/python3
"""What retention keeps during a long run, for scripts/bench-retention.

    retention_follow.py sample --out F --stop FILE --every S --pg-host H --pg-port P \\
        --dbs S0 S1 SAGAS --redis-port R
    retention_follow.py summary --samples F --first F1 --replay F2 --checks F3 --tables F4 --accounts N \\
        --outbox-window-s W --projection-window-s W --detail-window-s W --results DIR

sample: every S seconds until FILE exists, appends one JSON line to F:
{"t_s", "outbox": {db: {"rows", "written"}}, "sagas", "unsettled",
"attempts", "redis_keys", "redis": {kind: live keys}, "redis_bytes"} —
each outbox's rows and how many events it was ever given (its id
sequence), the sagas and the ones not settled (the store's counts by
state), the recorded attempts (saga_step rows), the keys in Redis (as
DBSIZE counts them, expired ones not yet reclaimed among them), the live
ones by kind (a SCAN: saga and account projections, rate-limit buckets,
other) and Redis's used memory.

summary: checks every sample taken once a window has passed against what
the retention settings allow: an outbox holds at most the events written
in its window (outbox_min_age_ms plus a prune interval and the relay's
lag); Redis at most a projection per account, the projections of the
sagas created in the projection window and of the unsettled ones, a
rate-limit bucket per account and OTHER_KEYS more; saga_step at most the attempts of the
sagas of the detail window (3 a saga); and that the replay of the first
run (saga_bench --replay) found no difference and changed nothing
(F3: the sagas, ledger entries and balances before and after it); and
the bytes per transfer the databases kept at the end (F4: one JSON line
per table, {"db", "table", "bytes", "heap_bytes"}), against the issue's
2 KiB. Prints
the targets, writes DIR/summary.json and DIR/retention.png; exits 1 when
one is missed.
"""
import argparse
import json
import os
import sys
import time

import redis

import common

OTHER_KEYS = 100  # the API keys' buckets and the relay's markers
KINDS = {"tally:saga:": "sagas", "tally:account:": "accounts", "tally:rl:account:": "account_buckets"}
ATTEMPTS_PER_SAGA = 3
KEPT_PER_TRANSFER = 2048  # issue 28: database growth per transfer after retention, indexes included


def redis_keys(r):
    """Live keys by kind (SCAN leaves out the expired ones)."""
    out = dict.fromkeys([*KINDS.values(), "other"], 0)
    for key in r.scan_iter(count=1000):
        kind = next((k for prefix, k in KINDS.items() if key.startswith(prefix.encode())), "other")
        out[kind] += 1
    return out


def take_sample(pg, dbs, r, t_s):
    outbox = {}
    for db in dbs:
        rows, written = pg.query(db, "SELECT (SELECT count(*) FROM outbox_event),"
                                     " (SELECT last_value FROM outbox_event_id_seq)")[0]
        outbox[db] = {"rows": int(rows), "written": int(written)}
    sagas, unsettled, attempts = pg.query(
        dbs[-1], "SELECT coalesce(sum(sagas), 0), coalesce(sum(sagas) FILTER (WHERE state NOT IN"
                 " ('completed', 'failed', 'compensated')), 0), (SELECT count(*) FROM saga_step)"
                 " FROM saga_state_count")[0]
    return {"t_s": round(t_s, 1), "outbox": outbox, "sagas": int(sagas), "unsettled": int(unsettled),
            "attempts": int(attempts), "redis_keys": r.dbsize(), "redis": redis_keys(r),
            "redis_bytes": r.info("memory")["used_memory"]}


def sample(a):
    pg = common.Postgres(a.pg_host, a.pg_port, "postgres")
    r = redis.Redis(host="127.0.0.1", port=a.redis_port)
    t0 = time.time()
    with open(a.out, "a") as out:
        while not os.path.exists(a.stop):
            s = take_sample(pg, a.dbs, r, time.time() - t0)
            out.write(json.dumps(s) + "\n")
            out.flush()
            rows = " ".join(f"{db.rsplit('_', 1)[-1]} {o['rows']}" for db, o in s["outbox"].items())
            print(f"retention: {s['t_s']:7.0f}s sagas {s['sagas']} outbox rows {rows} attempts {s['attempts']}"
                  f" redis keys {s['redis_keys']} ({s['redis']['sagas']} sagas)", file=sys.stderr, flush=True)
            time.sleep(a.every)


def before(samples, i, window_s):
    """The latest sample at least window_s before samples[i], or None."""
    for j in range(i - 1, -1, -1):
        if samples[j]["t_s"] <= samples[i]["t_s"] - window_s:
            return samples[j]
    return None


def bounds(samples, accounts, outbox_window_s, projection_window_s, detail_window_s):
    """Per kind, the worst ratio of what was held to what the window
    allows over the samples a whole window after the start, and how many
    samples were checked."""
    worst = {}

    def check(kind, held, allowed):
        ratio = held / allowed if allowed else (0.0 if held == 0 else float("inf"))
        count, prev = worst.get(kind, (0, 0.0))
        worst[kind] = (count + 1, max(prev, ratio))

    for i, s in enumerate(samples):
        o = before(samples, i, outbox_window_s)
        if o:
            for db, now in s["outbox"].items():
                check(f"outbox {db}", now["rows"], now["written"] - o["outbox"][db]["written"])
        p = before(samples, i, projection_window_s)
        if p:
            window = s["sagas"] - p["sagas"] + s["unsettled"]
            check("Redis saga projections", s["redis"]["sagas"], window)
            check("Redis live keys", sum(s["redis"].values()), 2 * accounts + window + OTHER_KEYS)
        d = before(samples, i, detail_window_s)
        if d:
            check("saga_step rows", s["attempts"], ATTEMPTS_PER_SAGA * (s["sagas"] - d["sagas"] + s["unsettled"]))
    return {kind: {"samples": n, "worst_ratio": round(r, 3)} for kind, (n, r) in sorted(worst.items())}


def replay_targets(first, replay, checks):
    """(target, measured, met) for the replay of the first run."""
    same = checks["before"] == checks["after"]
    return [
        (f"every transfer of the first run replayed (journal {replay['replay_journal']})",
         f"{replay['replayed'] + replay['replayed_changed']} answered, errors {replay['errors']}",
         replay["replayed"] + replay["replayed_changed"] == replay["replay_journal"] and replay["errors"] == 0),
        ("a replay returns the stored saga, a changed request 422",
         f"{replay['replay_differences']} differences of {replay['replayed']} replays and"
         f" {replay['replayed_changed']} changed", replay["replay_differences"] == 0 and replay["replayed"] > 0),
        ("the replay changed nothing (sagas, ledger entries, balances)",
         "same" if same else f"before {checks['before']}, after {checks['after']}", same),
        (f"the first run completed every transfer it sent ({replay['replay_journal']} answered with a saga)",
         f"{first['completed']} completed, errors {first['errors']}",
         first["completed"] == replay["replay_journal"] and first["errors"] == 0),
    ]


def kept_per_transfer(tables, transfers):
    """Bytes per transfer of each table (indexes included) over every
    database, largest first, and their total."""
    by_table = {}
    for t in tables:
        by_table[t["table"]] = by_table.get(t["table"], 0) + t["bytes"]
    per = {name: round(b / transfers) for name, b in sorted(by_table.items(), key=lambda kv: -kv[1])}
    return per, sum(by_table.values()) / transfers


def plot(samples, results):
    plt = common.pyplot()
    if plt is None:
        return
    fig, ax = plt.subplots(figsize=(10, 5))
    t = [s["t_s"] for s in samples]
    for db in samples[0]["outbox"]:
        ax.plot(t, [s["outbox"][db]["rows"] for s in samples], label=f"outbox rows {db}")
    ax.plot(t, [s["redis"]["sagas"] for s in samples], label="Redis saga projections")
    ax.plot(t, [s["attempts"] for s in samples], label="saga_step rows")
    ax.set_ylabel("rows / keys held")
    ax2 = ax.twinx()
    ax2.plot(t, [s["sagas"] for s in samples], "k--", label="sagas (right)")
    ax2.set_ylabel("sagas")
    ax2.legend(loc="upper left", fontsize="small")
    common.finish_axes(ax, "seconds", "center left")
    fig.savefig(f"{results}/retention.png", dpi=100, bbox_inches="tight")
    print(f"plot: {results}/retention.png")


def summary(a):
    samples = common.read_json_lines(a.samples)
    first, replay, checks = (common.read_json(p) for p in (a.first, a.replay, a.checks))
    held = bounds(samples, a.accounts, a.outbox_window_s, a.projection_window_s, a.detail_window_s)
    targets = [(f"{kind} ≤ what its window allows", f"worst {b['worst_ratio']} over {b['samples']} samples",
                b["samples"] > 0 and b["worst_ratio"] <= 1.0) for kind, b in held.items()]
    targets += replay_targets(first, replay, checks)
    kept, kept_total = kept_per_transfer(common.read_json_lines(a.tables), first["completed"])
    targets.append(("database bytes kept per transfer after retention ≤ 2 KiB",
                    f"{kept_total:.0f} B (" + ", ".join(f"{n} {b}" for n, b in list(kept.items())[:5]) + ")",
                    kept_total <= KEPT_PER_TRANSFER))
    out = {"transfers": first["completed"], "first_run": {k: first[k] for k in ("throughput", "p99_ms", "duration_s")},
           "replay_run": {k: replay[k] for k in ("throughput", "p99_ms", "duration_s")},
           "replay_examples": replay["replay_examples"], "held": held, "checks": checks,
           "kept_bytes_per_transfer": {"total": round(kept_total), "by_table": kept},
           "peak": {"redis_keys": max(s["redis_keys"] for s in samples),
                    "redis_live_keys": max(sum(s["redis"].values()) for s in samples),
                    "redis_mb": round(max(s["redis_bytes"] for s in samples) / 2**20, 1),
                    "attempts": max(s["attempts"] for s in samples),
                    "outbox": {db: max(s["outbox"][db]["rows"] for s in samples) for db in samples[0]["outbox"]}},
           "targets": [{"target": t, "measured": m, "met": ok} for t, m, ok in targets]}
    with open(f"{a.results}/summary.json", "w") as f:
        json.dump(out, f, indent=2)
    print(json.dumps({k: out[k] for k in ("transfers", "first_run", "replay_run", "peak")}))
    common.print_targets(targets)
    plot(samples, a.results)
    return 0 if all(ok for _, _, ok in targets) else 1


def main():
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    sub = p.add_subparsers(dest="command", required=True)
    s = sub.add_parser("sample")
    s.add_argument("--out", required=True)
    s.add_argument("--stop", required=True)
    s.add_argument("--every", type=float, default=5)
    s.add_argument("--pg-host", required=True)
    s.add_argument("--pg-port", type=int, required=True)
    s.add_argument("--dbs", nargs=3, required=True)
    s.add_argument("--redis-port", type=int, required=True)
    m = sub.add_parser("summary")
    for name in ("samples", "first", "replay", "checks", "tables", "results"):
        m.add_argument(f"--{name}", required=True)
    m.add_argument("--accounts", type=int, required=True)
    for name in ("outbox-window-s", "projection-window-s", "detail-window-s"):
        m.add_argument(f"--{name}", type=float, required=True)
    a = p.parse_args()
    return sample(a) if a.command == "sample" else summary(a)


if __name__ == "__main__":
    sys.exit(main() or 0)
