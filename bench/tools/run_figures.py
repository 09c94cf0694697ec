#!/usr/bin/python3
"""Turns one benchmark run's raw numbers into its record: one JSON line.

The bench scripts call this after each run and append what it prints on
stdout to RESULTS/runs.jsonl; a one-line account of the run goes to stderr.

    run_figures.py floor --name debit --repeat 1 --tps 812.4 --units 50 \\
        --cpu-start 10.21 --cpu-end 25.40 --duration 15
    run_figures.py shard --results DIR --name single.group.uniform.1 --shape single \\
        --mode group --workload uniform --repeat 1 --rss-kb 41200 --cpu-end "4.10 9.70"
    run_figures.py sagas --results DIR --name group.hot.1 --mode group --hot 0.5 \\
        --rss-kb 90000 --cpu-end "..."
    run_figures.py gateway --results DIR --name gateway.1 --via gateway --rss-kb 90000 --cpu-end "..."
    run_figures.py gateway --results DIR --name head.hot.1 --via gateway --version head --workload hot ...

For shard, sagas and gateway, a run's files in RESULTS are read: NAME.json
(what shard_bench or saga_bench printed), NAME.cpu-start (the CPU seconds of
the watched processes, then PostgreSQL's, when the measured phase began;
--cpu-end is the same line at the end), and the metrics the script saved
(shard: NAME.metrics and NAME.metrics-start; gateway: NAME.SERVICE.metrics
and NAME.SERVICE.metrics-start of the relay, the shards s0 and s1 and the
orchestrator, and NAME.statements-count when the statements were counted).
"""
import argparse
import json
import re
import sys

import common


def floor(a):
    """A pgbench run of bench-floor: units per second and PostgreSQL's CPU per unit."""
    per_s = a.tps * a.units  # pgbench counts the script's runs; each run is a batch of `units`
    run = {"name": a.name, "repeat": a.repeat, "units_per_s": round(per_s), "pg_cpu_s": round(a.cpu_end - a.cpu_start, 2),
           "pg_cpu_us_per_unit": round((a.cpu_end - a.cpu_start) * 1e6 / (per_s * a.duration), 1)}
    return run, f"bench-floor: {json.dumps(run)}"


def shard(a):
    """A shard_bench run: the shard's CPU, PostgreSQL's, the mean batch the shard committed."""
    run = common.read_json(f"{a.results}/{a.name}.json")
    shard_cpu_s, postgres_cpu_s = common.cpu_used(a.results, a.name, a.cpu_end)

    batches = common.metric_delta(a.results, a.name, "tally_shard_batches_total") or 0
    commands = common.metric_delta(a.results, a.name, "tally_shard_commands_total") or 0
    run.update(shape=a.shape, mode=a.mode, workload=a.workload, repeat=a.repeat, shard_rss_mb=a.rss_kb / 1024,
               shard_cpu_s=shard_cpu_s, postgres_cpu_s=postgres_cpu_s, bench_cpu_s=run["cpu_s"],
               mean_batch=commands / batches if batches else None)
    run["cpu_us_per_debit"] = common.cpu_us_per_unit(run, (shard_cpu_s, postgres_cpu_s), ("shard", "postgres"), 1)
    c = run["cpu_us_per_debit"]
    return run, "bench-shard: run %s: %.0f debits/s, p50 %.1f ms, p99 %.1f ms, %d errors, shard RSS %.0f MB, mean batch %s, CPU us/debit shard %.0f postgres %.0f bench %.0f" % (
        a.name, run["throughput"], run["p50_ms"], run["p99_ms"], run["errors"], run["shard_rss_mb"],
        "%.1f" % run["mean_batch"] if run["mean_batch"] else "-", c["shard"], c["postgres"], c["bench"])


def sagas(a):
    """A saga_bench run against the orchestrator: CPU per transfer of each process."""
    run = common.read_json(f"{a.results}/{a.name}.json")
    used = common.cpu_used(a.results, a.name, a.cpu_end)
    run.update(name=a.name, mode=a.mode, workload="hot" if a.hot > 0 else "uniform", orchestrator_rss_mb=a.rss_kb / 1024,
               cpu_us_per_transfer=common.cpu_us_per_unit(run, used, ("orchestrator", "shard0", "shard1", "postgres")))
    return run, "bench-sagas: run %s: %.0f transfers/s, p50 %.1f ms, p99 %.1f ms, %d failed, %d errors, orchestrator RSS %.0f MB, CPU us/transfer %s" % (
        run["name"], run["throughput"], run["p50_ms"], run["p99_ms"], run["rejected"], run["errors"],
        run["orchestrator_rss_mb"], run["cpu_us_per_transfer"])


def relay_buckets(path, sink):
    """The relay's delivery lag histogram of SINK ("push": every push:*
    sink), summed over sources: {upper bound in s: count}; {} when the file
    is missing."""
    out = {}
    try:
        lines = common.read_text(path).splitlines()
    except OSError:
        return out
    for line in lines:
        # Labels in any order (prometheus-cpp writes them sorted by name).
        m = re.match(r'tally_relay_delivery_lag_seconds_bucket\{([^}]*)\} (\d+)', line)
        if not m:
            continue
        labels = dict(re.findall(r'(\w+)="([^"]*)"', m[1]))
        got = labels.get("sink", "")
        if got == sink or (sink == "push" and got.startswith("push:")):
            le = float("inf") if labels["le"] == "+Inf" else float(labels["le"])
            out[le] = out.get(le, 0) + int(m[2])
    return out


def waits(results, name):
    """The variable cost of a transfer beside its CPU, from the metrics saved
    of the shards (NAME.s0, NAME.s1) and the orchestrator, per saga it
    finished in the same window: the time the commands queued behind others
    on their accounts (ms, summed over a transfer's commands), the refusals
    account_busy the steps met (each one a retry with backoff inside the
    saga) and the shard calls (three without retries). A figure the version
    does not export is left out."""
    finished = common.metric_delta(results, f"{name}.orchestrator", "tally_orch_sagas_finished_total")
    if not finished:
        return {}
    out = {}
    waited = [common.metric_delta(results, f"{name}.{s}", "tally_shard_account_wait_seconds_sum") for s in ("s0", "s1")]
    if None not in waited:
        out["account_wait_ms_per_transfer"] = round(sum(waited) * 1000 / finished, 3)
    for field, metric in (("busy_refusals_per_transfer", "tally_orch_account_busy_total"),
                          ("shard_calls_per_transfer", "tally_orch_calls_total")):
        n = common.metric_delta(results, f"{name}.orchestrator", metric)
        if n is not None:
            out[field] = round(n / finished, 4)
    return out


def gateway(a):
    """A saga_bench run (through the gateway or straight to the
    orchestrator): CPU per transfer of each process, the relay's lags."""
    run = common.read_json(f"{a.results}/{a.name}.json")

    # The relay's lags in the measured phase: its histograms less what they
    # held once the accounts were set up; p99 as the upper bound of the
    # bucket that holds the 99th percentile.
    def lag(sink):
        end = relay_buckets(f"{a.results}/{a.name}.relay.metrics", sink)
        start = relay_buckets(f"{a.results}/{a.name}.relay.metrics-start", sink)
        b = {le: n - start.get(le, 0) for le, n in end.items()}
        total = b.get(float("inf"), 0)
        p99 = next((le for le in sorted(b) if total and b[le] >= 0.99 * total), None)
        return total, None if p99 is None else p99 * 1000

    events, lag_p99 = lag("projection")
    _, push_p99 = lag("push")
    used = common.cpu_used(a.results, a.name, a.cpu_end)
    processes = ("orchestrator", "shard0", "shard1", "gateway", "relay", "redis", "postgres")
    cpu = common.cpu_us_per_unit(run, used, processes)
    run.update(name=a.name, via=a.via, gateway_rss_mb=a.rss_kb / 1024, projection_events=events,
               projection_lag_p99_ms=lag_p99, push_lag_p99_ms=push_p99, cpu_us_per_transfer=cpu)
    # Every process but the load generator, per completed transfer and per
    # request answered (refused and failed ones too).
    services_s = sum(used[:len(processes)])
    refused = run.get("errors_by_kind", {}).get("http_429", 0)
    requests = run["completed"] + run["rejected"] + run["errors"]
    run.update(refused=refused, cpu_us_total=round(services_s * 1e6 / max(run["completed"], 1)),
               cpu_us_per_request=round(services_s * 1e6 / max(requests, 1)))
    run.update(waits(a.results, a.name))
    run.update(common.writes_per_unit(a.results, a.name, run["completed"]))
    try:
        statements = int(common.read_text(f"{a.results}/{a.name}.statements-count").strip())
        run["statements_per_transfer"] = round(statements / max(run["completed"], 1), 2)
    except (OSError, ValueError):
        pass
    if a.version:
        run.update(version=a.version, workload=a.workload)
    return run, "bench-gateway: run %s: %.0f transfers/s, p50 %.1f ms, p99 %.1f ms, %d failed, %d errors, projection lag p99 <= %s ms, push lag p99 <= %s ms, gateway RSS %.0f MB, CPU us/transfer %s" % (
        run["name"], run["throughput"], run["p50_ms"], run["p99_ms"], run["rejected"], run["errors"],
        run["projection_lag_p99_ms"], run["push_lag_p99_ms"], run["gateway_rss_mb"], run["cpu_us_per_transfer"])


def main():
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    benches = parser.add_subparsers(dest="bench", required=True, metavar="BENCH")

    def add_bench(name, what, record, parents=()):
        p = benches.add_parser(name, help=what, description=what, parents=parents)
        p.set_defaults(record=record)
        return p

    p = add_bench("floor", "a pgbench run of scripts/bench-floor (reads no file)", floor)
    p.add_argument("--name", required=True, help="the floor script's name (debit, debit_values, ...)")
    p.add_argument("--repeat", type=int, required=True, help="the repeat's number")
    p.add_argument("--tps", type=float, required=True, help="the transactions per second pgbench reported")
    p.add_argument("--units", type=float, required=True, help="units (debits, transfers) per transaction")
    p.add_argument("--cpu-start", type=float, required=True, help="PostgreSQL's CPU seconds before the run")
    p.add_argument("--cpu-end", type=float, required=True, help="PostgreSQL's CPU seconds after the run")
    p.add_argument("--duration", type=float, required=True, help="the run's length in seconds")

    run = argparse.ArgumentParser(add_help=False)
    run.add_argument("--results", required=True, help="the results folder, which holds the run's files")
    run.add_argument("--name", required=True, help="the run's name: its files are RESULTS/NAME.*")
    run.add_argument("--rss-kb", type=int, required=True, help="the peak RSS (kB) of the service the bench watches")
    run.add_argument("--cpu-end", required=True,
                     help="the CPU seconds of the watched processes and PostgreSQL at the end, as in NAME.cpu-start")

    p = add_bench("shard", "a shard_bench run of scripts/bench-shard (--rss-kb: the shard's)", shard, [run])
    p.add_argument("--shape", required=True, help="single or coalesced")
    p.add_argument("--mode", required=True, help="the shard's commit mode")
    p.add_argument("--workload", required=True, help="uniform or hot")
    p.add_argument("--repeat", required=True, help="the repeat's number (kept as text in the record)")

    p = add_bench("sagas", "a saga_bench run of scripts/bench-sagas (--rss-kb: the orchestrator's)", sagas, [run])
    p.add_argument("--mode", required=True, help="the shards' commit mode")
    p.add_argument("--hot", type=float, required=True, help="the share of transfers on the hot account")

    p = add_bench("gateway", "a saga_bench run of scripts/bench-gateway or bench-compare (--rss-kb: the gateway's)",
                  gateway, [run])
    p.add_argument("--via", required=True, help="orchestrator or gateway")
    p.add_argument("--version", help="bench-compare: base or head; bench-ha: single or ha")
    p.add_argument("--workload", help="bench-compare: uniform, hot or half")

    args = parser.parse_args()
    record, account = args.record(args)
    print(json.dumps(record))
    print(account, file=sys.stderr)


if __name__ == "__main__":
    main()
