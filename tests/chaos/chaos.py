#!/usr/bin/python3
"""Runs the chaos test: starts (or attaches to) the system, opens accounts,
runs the workload from many clients while faults are injected at random, then
lets the system quiesce and checks every promise. Exit status 1 on any
violation (the seed and the first violating key are printed) or when fewer
faults than --min-faults were injected.

  chaos.py --form=local    (run by scripts/chaos, which starts the PostgreSQL servers)
  chaos.py --form=compose  (run by scripts/chaos-compose, against docker-compose)
"""
import argparse
import json
import os
import random
import sys
import threading
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

from tally_chaos import checker, report, snapshot  # noqa: E402
from tally_chaos.audit import OutboxAudit  # noqa: E402
from tally_chaos.api import Client  # noqa: E402
from tally_chaos.faults import HA_KINDS, Faults, kinds_for  # noqa: E402
from tally_chaos.workload import Workload  # noqa: E402

ROOT = os.path.abspath(os.path.join(os.path.dirname(__file__), "..", ".."))


def log(msg):
    print(time.strftime("%H:%M:%S ") + msg, flush=True)


def make_cluster(args):
    if args.form == "local":
        from tally_chaos.local import LocalCluster
        if args.ha:
            from tally_chaos.ha import LocalFormation
            return LocalCluster(ROOT, args.bin_dir, args.out, [], log,
                                LocalFormation(json.loads(os.environ["TALLY_CHAOS_HA"]), log))
        pg = json.loads(os.environ["TALLY_CHAOS_PG"])
        return LocalCluster(ROOT, args.bin_dir, args.out, pg, log)
    from tally_chaos.compose import ComposeCluster
    return ComposeCluster(args.out, log, ha=args.ha)


def sampler(cluster, samples, history, faults, audit, stop, t0, every_s=1.0, progress_s=10.0):
    last = time.time()
    while not stop.wait(every_s):
        audit.advance()
        totals = snapshot.total_balance(cluster, cluster.layout.tenant)
        samples.append({"t": time.time(), "total": totals and totals[0], "held": totals and totals[1]})
        if time.time() - last >= progress_s:
            last = time.time()
            ops = history.snapshot()
            unknown = sum(1 for o in ops if o.get("unknown"))
            log(f"progress {time.time() - t0:6.0f} s: {len(ops)} operations ({unknown} unknown), "
                f"{len(faults.events)} faults, Σ balance {totals[0] if totals else 'n/a (a shard database is down)'}, "
                f"{audit.read} events audited")


def quiesce(cluster, deadline_s):
    """Waits until every process runs, no lot is about to expire, every saga
    is terminal and every event is delivered; returns the seconds it took."""
    start = time.time()
    end = start + deadline_s
    while not cluster.everything_running() and time.time() < end:
        time.sleep(0.2)
    cluster.wait_ready(max(1, end - time.time()))
    while time.time() < end:
        try:
            if snapshot.unfinished(cluster, cluster.layout.tenant) == (0, 0, 0):
                break
        except Exception as e:  # a database still recovering
            log(f"quiesce: {e!r}")
        time.sleep(0.5)
    return time.time() - start


def main():
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--form", choices=["local", "compose"], default="local")
    p.add_argument("--ha", action="store_true", help="every database on one replicated cluster (scripts/chaos --ha, scripts/chaos-compose --ha)")
    p.add_argument("--duration", type=float, default=180, help="seconds of faults")
    p.add_argument("--seed", type=int, default=None)
    p.add_argument("--clients", type=int, default=12)
    p.add_argument("--accounts", type=int, default=24)
    p.add_argument("--fault-gap", type=float, default=3.5, help="mean seconds between faults")
    p.add_argument("--pause", type=float, default=12, help="seconds a paused shard stays stopped (past the 10 s deadline)")
    p.add_argument("--min-faults", type=int, default=0)
    p.add_argument("--ha-kind", action="append", choices=sorted(HA_KINDS), default=None,
                   help="--ha: the cluster's faults drawn only from these kinds (repeat it; all by default)")
    p.add_argument("--min-failovers", type=int, default=0,
                   help="with --ha: faults go on past --duration (up to 3 times it) until this many primaries were "
                        "lost, stalled or switched over; fewer fails the run")
    p.add_argument("--quiesce-timeout", type=float, default=240)
    p.add_argument("--out", default=os.path.join(ROOT, "build", "chaos"))
    p.add_argument("--bin-dir", default=os.path.join(ROOT, "build", "ci"))
    args = p.parse_args()
    seed = args.seed if args.seed is not None else random.SystemRandom().randrange(1, 10**9)
    os.makedirs(args.out, exist_ok=True)
    log(f"chaos run ({args.form}): seed {seed}, {args.duration:.0f} s, {args.clients} clients, "
        f"a fault every {args.fault_gap} s on average; output in {args.out}")

    cluster = make_cluster(args)
    cluster.start()
    try:
        return run(args, seed, cluster)
    finally:
        cluster.stop()
        print_server_incidents(cluster)


def print_server_incidents(cluster):
    """A PostgreSQL server that failed by itself (a crash, a full disk) is no
    violation of a promise, but it must not go unseen."""
    for name, path in cluster.postgres_logs():
        try:
            with open(path, errors="replace") as f:
                lines = report.server_incidents(f)
        except OSError:
            continue
        if lines:
            print(f"PostgreSQL of {name} failed by itself ({path}):", flush=True)
            for line in lines:
                print(f"  {line}", flush=True)


def take_snapshot(cluster, audit, deadline):
    """snapshot.take and the audit's result, again while an authority cannot
    be reached (a server that restarted by itself after the faults stopped),
    until the deadline."""
    while True:
        try:
            snap = snapshot.take(cluster, cluster.layout.tenant)
            snap["audit"] = audit.result()
            return snap
        except snapshot.UNREACHABLE as e:
            if time.time() > deadline:
                raise
            log(f"check: an authority cannot be reached, trying again: {snapshot.one_line(e)}")
            time.sleep(1)


def run(args, seed, cluster):
    L = cluster.layout
    api = Client(L.gateway_port, L.app_key, timeout=15)
    accounts = ["hot"] + [f"acct-{i:02d}" for i in range(args.accounts - 1)]
    work = Workload(api, accounts, seed, clients=args.clients)
    audit = OutboxAudit(cluster, L.tenant)
    audit.register()  # before the first event: the pruner waits for it from the start
    log(f"opening {len(accounts)} accounts with {len(accounts)} credits")
    work.open_accounts()

    faults = Faults(cluster, seed, args.fault_gap, args.pause, log, kinds_for(args.ha),
                    {k: HA_KINDS[k] for k in args.ha_kind} if args.ha_kind else HA_KINDS)
    samples, stop_sampling = [], threading.Event()
    t0 = time.time()
    threading.Thread(target=sampler, args=(cluster, samples, work.history, faults, audit, stop_sampling, t0),
                     daemon=True).start()
    work.start()
    faults.start()
    time.sleep(args.duration)
    # With --min-failovers the faults go on until that many happened (up to
    # three times the duration): a slow failover must not fail the run.
    while faults.failovers() < args.min_failovers and time.time() < t0 + 3 * args.duration:
        time.sleep(1)
    faults.finish()
    # Then the formation whole again for HA_QUIET_S (longer than the monitor
    # takes to notice a fault), so the last failover is over and its
    # recovery seen.
    while args.ha and not faults.formation_ready() and time.time() < t0 + 3 * args.duration:
        time.sleep(1)
    log(f"faults stopped after {len(faults.events)}; the clients finish what they started")
    work.finish()
    t_end = time.time()
    quiesce_s = quiesce(cluster, args.quiesce_timeout)
    log(f"quiesced after {quiesce_s:.1f} s; checking every promise")

    history = work.history.snapshot()
    # Projections and cursors settle last (a rebuild after Redis came back
    # empty): give them until the deadline before calling it a violation.
    deadline = t_end + args.quiesce_timeout
    while True:
        try:
            snap = take_snapshot(cluster, audit, deadline)
        except snapshot.UNREACHABLE as e:
            print(f"FAIL: an authority could not be read until the deadline: {snapshot.one_line(e)}; seed {seed}",
                  flush=True)
            return 1
        violations = checker.check(snap, history)
        settling = [v for v in violations if v.promise in ("projection_equals_ledger", "relay_delivery_complete")]
        if not settling or len(settling) != len(violations) or time.time() > deadline:
            break
        time.sleep(1)
    quiesce_s = max(quiesce_s, time.time() - t_end)
    stop_sampling.set()
    for op in history:
        if op.get("saga_id") in snap["sagas"]:
            op["stored_state"] = snap["sagas"][op["saga_id"]]["state"]
    samples.append({"t": time.time(), "total": sum(a["balance"] for a in snap["accounts"]),
                    "held": sum(a["held"] for a in snap["accounts"])})

    crashes = report.failpoint_crashes(cluster.shard_log_lines())
    recoveries = report.recovery_times(history, faults.events, HA_KINDS)
    text = report.summary(history, faults.events, violations, quiesce_s, seed, t_end - t0,
                          cluster.restarts, crashes, snap["expire_entries"], recoveries)
    print(text, flush=True)
    report.write_json(os.path.join(args.out, "summary.json"), seed=seed, form=args.form, faults=faults.events,
                      violations=violations, quiesce_s=quiesce_s, operations=len(history), samples=samples,
                      started=t0, failpoint_crashes=crashes, recoveries=recoveries)
    with open(os.path.join(args.out, "history.jsonl"), "w") as f:
        for op in history:
            f.write(json.dumps(op) + "\n")
    with open(os.path.join(args.out, "summary.txt"), "w") as f:
        f.write(text + "\n")
    png = os.path.join(args.out, "chaos.png")
    if report.plot(png, history, faults.events, samples, t0,
                   f"Tally chaos run ({args.form}, seed {seed}): {len(faults.events)} faults, "
                   f"{len(violations)} violations"):
        log(f"picture: {png}")
    if len(faults.events) < args.min_faults:
        print(f"FAIL: only {len(faults.events)} faults injected, fewer than {args.min_faults}", flush=True)
        return 1
    failovers = faults.failovers()
    if failovers < args.min_failovers:
        print(f"FAIL: only {failovers} failovers, fewer than {args.min_failovers}", flush=True)
        return 1
    if violations:
        print(f"FAIL: {len(violations)} violations; seed {seed}; first violating key {violations[0].key}", flush=True)
        return 1
    print("PASS: every promise held", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
