#!/usr/bin/python3
"""Sums up a scripts/bench-ha run: each figure's median on one server
("single") and on the replicated cluster ("ha"), their ratio ha / single,
and issue 29's targets for the cost of the guarantee.

    ha_cost.py --results DIR

Reads RESULTS/runs.jsonl (a record per run from run_figures.py gateway,
with version single or ha and workload uniform or half); writes
RESULTS/summary.json and prints the table (Markdown) on stdout.
"""
import argparse

import common

KINDS = ("single", "ha")


def figures(runs, kind):
    """The medians of one kind's runs, by figure."""
    uniform = [r for r in runs if r["version"] == kind and r["workload"] == "uniform"]
    half = [r for r in runs if r["version"] == kind and r["workload"] == "half"]
    f = {
        "uniform_per_s": common.median(uniform, "throughput"),
        **common.open_loop_figures(half),
        "cpu_us_total": common.median(uniform, "cpu_us_total"),
        "postgres_cpu_us": common.median([dict(r, pg=r["cpu_us_per_transfer"]["postgres"]) for r in uniform], "pg"),
        "errors": sum(r["errors"] for r in uniform + half),
        "runs": {w: [round(r["throughput"]) for r in s] for w, s in (("uniform", uniform), ("half", half))},
    }
    f.update(common.medians_present(uniform, ("wal_bytes_per_transfer", "db_bytes_per_transfer",
                                              "rows_inserted_per_transfer", "rows_updated_per_transfer",
                                              "hot_updates_per_transfer")))
    return f


# (label, key, format, the target on ha / single or None).
ROWS = [
    ("completed transfers/s, closed loop", "uniform_per_s", "{:,.0f}", (">=", 0.8)),
    *common.open_loop_rows("open loop at half the single server's peak: offered/s", ("<=", 1.5)),
    ("CPU us per transfer, services and the primary", "cpu_us_total", "{:,.0f}", None),
    ("  of which the primary's PostgreSQL", "postgres_cpu_us", "{:,.0f}", None),
    *common.write_rows("WAL bytes per transfer (on the primary; each standby receives it)", None,
                       "database bytes per transfer"),
]


def main():
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--results", required=True, help="the results folder of scripts/bench-ha")
    a = parser.parse_args()
    runs = common.read_json_lines(f"{a.results}/runs.jsonl")
    fig = {k: figures(runs, k) for k in KINDS}
    table, targets = common.ratio_table(ROWS, fig, KINDS, KINDS)
    wal = fig["ha"].get("wal_bytes_per_transfer")
    if wal is not None:
        print(f"\nWAL shipped per transfer to two standbys: {2 * wal:,.0f} bytes")
    print(f"throughput of each run: single {fig['single']['runs']}, ha {fig['ha']['runs']}")
    print(f"errors: single {fig['single']['errors']}, ha {fig['ha']['errors']}")
    common.print_targets(targets)
    common.write_summary(a.results, {"figures": fig, "table": table,
                                     "targets": [{"target": t, "measured": m, "met": k} for t, m, k in targets]})


if __name__ == "__main__":
    main()
