#!/usr/bin/python3
"""Sums up a scripts/bench-scale run: the generated databases (rows and
bytes per table, how long each phase took), how long each migration took
on them, and the figures of the stacks on the scaled databases beside
those on empty ones, as ratios scaled / empty against issue 28's targets.

    scale_summary.py --results DIR

Reads in RESULTS: generate.json (scale_seed.py generate), phases.jsonl
({"phase", "seconds"} per phase of the script), migrations.jsonl
({"database", "file", "db", "seconds"} per migration and database),
runs.jsonl (run_figures.py gateway records, version scaled or empty,
workload uniform or half, and on the scaled databases audit and spike),
scaled.audit.1.audit.json (audit_follow.py), scaled.spike.1.spike.json
(lot_spike.py follow), lists.jsonl ({"store", "repeat", "figures"}:
saga_latency.py on the scaled store and on the small one of 10,000 sagas),
reconcile.jsonl ({"stack", "when", "shard", "mode", "status", "seconds",
"accounts", "differences"} per reconciliation) and machine.txt. Writes
RESULTS/summary.json and RESULTS/throughput.png (throughput over time of
the uniform runs, scaled and empty; with python3-matplotlib) and prints
the summary.
"""
import argparse
import statistics

import common

# Issue 28's targets: (figure, bound, "min" when the ratio must be at least the bound).
TARGETS = {"transfers_per_s": (0.9, "min"), "p99_ms": (1.2, "max"), "saga_lists_p99_ms": (1.5, "max"),
           "transfers_during_audit": (0.8, "min"), "transfers_during_spike": (0.7, "min")}


def read_lines(path):
    try:
        return common.read_json_lines(path)
    except OSError:
        return []


def read_optional(path):
    try:
        return common.read_json(path)
    except (OSError, ValueError):
        return None


def ratios(runs, lists):
    """The medians per stack and their ratios scaled / empty (transfers/s
    of the closed-loop runs, p99 of the open-loop ones) and, per saga query,
    the median p99 on the scaled store / on the small one; each with its
    target and whether it was met."""
    def med(version, workload, field):
        values = [r[field] for r in runs if r["version"] == version and r["workload"] == workload]
        return statistics.median(values) if values else None

    out = {}
    for name, workload, field in (("transfers_per_s", "uniform", "throughput"), ("p99_ms", "half", "p99_ms")):
        scaled, empty = med("scaled", workload, field), med("empty", workload, field)
        out[name] = {"scaled": scaled, "empty": empty, "ratio": scaled / empty if scaled and empty else None}
    # Transfers during a full audit or a month-end spike, against the
    # scaled databases' own closed-loop runs.
    for name, workload in (("transfers_during_audit", "audit"), ("transfers_during_spike", "spike")):
        during, alone = med("scaled", workload, "throughput"), med("scaled", "uniform", "throughput")
        out[name] = {"during": during, "alone": alone, "ratio": during / alone if during and alone else None}
    queries = sorted({q for entry in lists for q in entry["figures"]})
    per_query = {}
    for q in queries:
        def p99(store):
            values = [e["figures"][q]["p99_ms"] for e in lists if e["store"] == store and q in e["figures"]]
            return statistics.median(values) if values else None
        scaled, small = p99("scaled"), p99("small")
        per_query[q] = {"scaled": scaled, "small": small, "ratio": scaled / small if scaled and small else None}
    worst = max((v["ratio"] for v in per_query.values() if v["ratio"] is not None), default=None)
    out["saga_lists_p99_ms"] = {"queries": per_query, "ratio": worst}
    for name, (bound, kind) in TARGETS.items():
        r = out[name]["ratio"]
        out[name].update(target=f"{'>=' if kind == 'min' else '<='} {bound}",
                         met=None if r is None else (r >= bound if kind == "min" else r <= bound))
    return out


def mb(n):
    return f"{n / 1e6:,.0f} MB"


def report(summary):
    """The summary for the terminal, line by line."""
    g = summary["generation"]
    lines = [f"generated: {g['accounts']:,} accounts, {g['ledger_entries']:,} ledger entries "
             f"({g['accounts']:,} openings), {g['sagas']:,} sagas"]
    lines += [f"  {p['phase']}: {p['seconds']:.0f} s" for p in summary["phases"]]
    for db, tables in g["tables"].items():
        lines.append(f"  {db}: {mb(g['database_bytes'][db])}")
        lines += [f"    {name:<22} {t['rows']:>13,} rows {mb(t['bytes']):>11}"
                  for name, t in tables.items() if t["rows"]]
    lines.append("migrations on the generated databases:")
    lines += [f"  {m['file']} on {m['db']}: {m['seconds']:.2f} s" for m in summary["migrations"]] or ["  none"]
    lines.append("reconciliations (incremental: what the run wrote; full: every account):")
    lines += [f"  {r['stack']} {r['when']} {r['shard']} mode={r['mode']}: HTTP {r['status']} in {r['seconds']:.2f} s, "
              f"{r.get('accounts')} accounts, {r.get('differences')} differences" for r in summary["reconciliations"]]
    lines.append("scaled / empty (issue 28's targets):")
    for name, label in (("transfers_per_s", "transfers/s, closed loop"), ("p99_ms", "p99 ms, open loop")):
        r = summary["ratios"][name]
        lines.append(f"  [{verdict(r['met'])}] {label}: {fmt(r['scaled'])} / {fmt(r['empty'])} = {fmt(r['ratio'], 2)} "
                     f"(target {r['target']})")
    for name, label in (("transfers_during_audit", "transfers/s during a full audit / without"),
                        ("transfers_during_spike", "transfers/s during the month-end spike / without")):
        r = summary["ratios"][name]
        lines.append(f"  [{verdict(r['met'])}] {label}: {fmt(r['during'])} / {fmt(r['alone'])} = "
                     f"{fmt(r['ratio'], 2)} (target {r['target']})")
    audit, spike = summary.get("audit"), summary.get("spike")
    if audit:
        lines.append("  full audits: " + ", ".join(
            f"{a['shard']} {a['state']} {a['accounts_checked']:,}/{a['accounts_total']:,} accounts in "
            f"{a['seconds']:.0f} s, {a['differences']} differences" for a in audit["audits"]))
    if spike:
        lines.append(f"  [{verdict(spike['met'])}] month-end spike: {spike['lots']:,} lots expiring at one instant, "
                     f"all expired after {fmt(spike['all_expired_s'], 1)} s (target <= {spike['deadline_s']:.0f} s)")
    s = summary["ratios"]["saga_lists_p99_ms"]
    lines.append(f"  [{verdict(s['met'])}] saga lists and counts p99, scaled store / 10,000 sagas: worst "
                 f"{fmt(s['ratio'], 2)} (target {s['target']})")
    lines += [f"      {q}: {fmt(v['scaled'], 2)} / {fmt(v['small'], 2)} ms = {fmt(v['ratio'], 2)}"
              for q, v in s["queries"].items()]
    return lines


def verdict(met):
    return "n/a" if met is None else "met" if met else "MISSED"


def fmt(value, digits=0):
    return "-" if value is None else f"{value:,.{digits}f}"


def plot(results, runs):
    plt = common.pyplot()
    if plt is None:
        return
    fig, ax = plt.subplots(figsize=(9, 4.5))
    for version, style in (("scaled", "r-"), ("empty", "b-")):
        for r in (r for r in runs if r["version"] == version and r["workload"] == "uniform"):
            common.plot_seconds(ax, common.read_json(f"{results}/{r['name']}.json"), style, r["name"])
    ax.set_ylabel("transfers completed per second")
    ax.set_title("Transfers through the gateway: scaled databases (red) and empty ones (blue)")
    common.finish_axes(ax, "second of the measured run", "lower right")
    common.save_plot(fig, results)


def main():
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--results", required=True)
    a = p.parse_args()
    runs = read_lines(f"{a.results}/runs.jsonl")
    summary = {
        "generation": common.read_json(f"{a.results}/generate.json"),
        "phases": read_lines(f"{a.results}/phases.jsonl"),
        "migrations": read_lines(f"{a.results}/migrations.jsonl"),
        "reconciliations": read_lines(f"{a.results}/reconcile.jsonl"),
        "saga_lists": read_lines(f"{a.results}/lists.jsonl"),
        "runs": runs,
        "ratios": ratios(runs, read_lines(f"{a.results}/lists.jsonl")),
        "audit": read_optional(f"{a.results}/scaled.audit.1.audit.json"),
        "spike": read_optional(f"{a.results}/scaled.spike.1.spike.json"),
    }
    common.write_summary(a.results, summary)
    print("\n".join(report(summary)))
    plot(a.results, runs)


if __name__ == "__main__":
    main()
