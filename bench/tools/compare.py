#!/usr/bin/python3
"""Sums up a scripts/bench-compare run: each figure's median for both
versions (base: the older commit, head: this tree), their ratio head / base,
issue 20's targets met or missed, and a plot.

    compare.py --results DIR --base 7ca9212 --head 96412ac [--floor DIR/floor/summary.json]

Reads RESULTS/runs.jsonl (a record per run from run_figures.py gateway, with
version and workload) and RESULTS/machine.txt; with --floor, bench-floor's
summary (the transfer's floor in us of PostgreSQL CPU). Writes
RESULTS/summary.json, prints the table (Markdown) on stdout and draws
RESULTS/compare.png (with python3-matplotlib).
"""
import argparse

import common

VERSIONS = ("base", "head")
PROCESSES = ("orchestrator", "shard0", "shard1", "gateway", "relay", "redis", "postgres")


def figures(runs, version):
    """The medians of one version's runs, by figure."""
    def sel(workload):
        return [r for r in runs if r["version"] == version and r["workload"] == workload]

    uniform, hot, half = sel("uniform"), sel("hot"), sel("half")
    f = {
        "uniform_per_s": common.median(uniform, "throughput"),
        "hot_per_s": common.median(hot, "throughput"),
        **common.open_loop_figures(half),
        "cpu_us_total": common.median(uniform, "cpu_us_total"),
        "cpu_us": common.medians(uniform, "cpu_us_per_transfer", PROCESSES),
        "hot_cpu_us_total": common.median(hot, "cpu_us_total"),
        "hot_cpu_us_per_request": common.median(hot, "cpu_us_per_request"),
        "hot_refused_per_s": common.median([dict(r, refused_per_s=r["refused"] / r["duration_s"]) for r in hot],
                                           "refused_per_s"),
        "hot_failed": sum(r["rejected"] for r in hot),
        "errors": sum(r["errors"] - r["refused"] for r in uniform + hot + half),
        "runs": {w: [round(r["throughput"]) for r in s] for w, s in (("uniform", uniform), ("hot", hot), ("half", half))},
    }
    f["hot_over_uniform"] = f["hot_per_s"] / f["uniform_per_s"]
    # The hot run's variable cost (run_figures.py waits), where the version exports it.
    hot_costs = common.medians_present(hot, ("account_wait_ms_per_transfer", "busy_refusals_per_transfer",
                                             "shard_calls_per_transfer"))
    f.update({f"hot_{field}": v for field, v in hot_costs.items()})
    f.update(common.medians_present(uniform, ("statements_per_transfer", *WRITES)))
    return f


# What the databases wrote per completed transfer (common.writes_per_unit), uniform runs.
WRITES = ("wal_bytes_per_transfer", "db_bytes_per_transfer", "rows_inserted_per_transfer",
          "rows_updated_per_transfer", "hot_updates_per_transfer", "rows_deleted_per_transfer")


# (label, key, format, the target on head / base or None): issue 28's.
ROWS = [
    ("completed transfers/s, closed loop, uniform", "uniform_per_s", "{:,.0f}", (">=", 1.25)),
    ("the same, half from one hot account", "hot_per_s", "{:,.0f}", (">=", 1.25)),
    ("hot / uniform (same version)", "hot_over_uniform", "{:.2f}", None),
    ("hot: refused requests/s (429)", "hot_refused_per_s", "{:,.0f}", None),
    *common.open_loop_rows("open loop at half the own peak: offered/s", ("<=", 1.0)),
    ("CPU us per completed transfer, all processes", "cpu_us_total", "{:,.0f}", None),
    *[(f"  of which {p}", ("cpu_us", p), "{:,.0f}", None) for p in PROCESSES],
    ("hot: CPU us per completed transfer", "hot_cpu_us_total", "{:,.0f}", None),
    ("hot: CPU us per request (refused ones too)", "hot_cpu_us_per_request", "{:,.0f}", None),
    ("hot: ms queued behind the same account per transfer", "hot_account_wait_ms_per_transfer", "{:.2f}", None),
    ("hot: account_busy retries in sagas per transfer", "hot_busy_refusals_per_transfer", "{:.4f}", None),
    ("hot: shard calls per transfer (3 without retries)", "hot_shard_calls_per_transfer", "{:.3f}", None),
    ("PostgreSQL statements per transfer", "statements_per_transfer", "{:.1f}", None),
    *common.write_rows("WAL bytes per transfer (uniform)", ("<=", 0.4),
                       "database bytes per transfer (growth, every database)"),
    ("rows deleted per transfer (retention)", "rows_deleted_per_transfer", "{:.2f}", None),
]


def value(f, key):
    if isinstance(key, tuple):
        return f[key[0]][key[1]]
    return f.get(key)


def main():
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--results", required=True, help="the results folder of scripts/bench-compare")
    parser.add_argument("--base", required=True, help="the older commit's name, for the table")
    parser.add_argument("--head", required=True, help="this tree's name, for the table")
    parser.add_argument("--floor", help="bench-floor's summary.json (the same session)")
    a = parser.parse_args()

    runs = common.read_json_lines(f"{a.results}/runs.jsonl")
    fig = {v: figures(runs, v) for v in VERSIONS}
    base, head = fig["base"], fig["head"]
    table, targets = common.ratio_table(ROWS, fig, VERSIONS, (f"base {a.base}", f"head {a.head}"), value)
    ok = head["hot_over_uniform"] >= 0.8
    targets.append(("hot >= 0.8 x uniform (head)", f"{head['hot_over_uniform']:.2f}", ok))
    floor_ratio = None
    if a.floor:
        floor_us = common.read_json(a.floor)["transfer_floor_us"]
        floor_ratio = head["cpu_us"]["postgres"] / floor_us
        print(f"\nPostgreSQL CPU per transfer / the floor ({floor_us:.0f} us): base "
              f"{base['cpu_us']['postgres'] / floor_us:.2f}, head {floor_ratio:.2f}")
        targets.append(("PostgreSQL CPU per transfer / floor <= 1.5 (head)", f"{floor_ratio:.2f}", floor_ratio <= 1.5))
    print(f"\nthroughput of each run: base {base['runs']}, head {head['runs']}")
    print(f"errors (other than 429): base {base['errors']}, head {head['errors']}; "
          f"hot sagas failed: base {base['hot_failed']}, head {head['hot_failed']}")
    common.print_targets(targets)
    common.write_summary(a.results, {"base": a.base, "head": a.head, "figures": fig, "table": table,
                                     "pg_cpu_over_floor": floor_ratio,
                                     "targets": [{"target": t, "measured": m, "met": k} for t, m, k in targets]})

    plt = common.pyplot()
    if plt:
        figure, (ax, bars) = plt.subplots(1, 2, figsize=(14, 5), gridspec_kw={"width_ratios": [2, 1]})
        for r in runs:
            if r["name"].endswith(".1") and r["workload"] in ("uniform", "hot"):
                label = f"{r['version']} {a.base if r['version'] == 'base' else a.head}, {r['workload']}"
                common.plot_seconds(ax, r, ("--" if r["version"] == "base" else "-") + ("" if r["workload"] == "uniform" else "."),
                                    label)
        ax.set_ylabel("transfers completed per second")
        ax.set_title("closed loop through the gateway (first repeat)")
        common.finish_axes(ax, "second", "lower right")
        bottom = [0.0, 0.0]
        for p in PROCESSES:
            heights = [fig[v]["cpu_us"][p] for v in VERSIONS]
            bars.bar([f"base {a.base}", f"head {a.head}"], heights, bottom=bottom, label=p)
            bottom = [b + h for b, h in zip(bottom, heights)]
        bars.set_ylabel("CPU us per completed transfer (uniform, medians)")
        bars.set_title("CPU per transfer by process")
        bars.legend(fontsize="small")
        figure.savefig(f"{a.results}/compare.png", dpi=100, bbox_inches="tight")
        print(f"plot: {a.results}/compare.png")
    print(f"results: {a.results}")


if __name__ == "__main__":
    main()
