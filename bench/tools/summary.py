#!/usr/bin/python3
"""Sums up a benchmark's runs: medians per configuration, the targets met or
missed, and a plot of the throughput over time.

    summary.py floor --results DIR --cores 2
    summary.py shard --results DIR
    summary.py sagas --results DIR
    summary.py gateway --results DIR

Reads RESULTS/runs.jsonl (a record per run, from run_figures.py) and, but
for floor, RESULTS/machine.txt. Writes RESULTS/summary.json, prints the
summary on stdout and, but for floor, draws RESULTS/throughput.png (with
python3-matplotlib).
"""
import argparse
import statistics

import common


def floor(results, cores):
    """PostgreSQL's CPU per unit less that of generating the values, and
    what that allows on CORES cores."""
    runs = common.read_json_lines(f"{results}/runs.jsonl")

    def median(name, key):
        return common.median([r for r in runs if r["name"] == name], key)

    summary = {}
    print(f"PostgreSQL CPU per unit, medians of {max(r['repeat'] for r in runs)} runs ({cores} cores):")
    for name in ("debit", "transfer_shards", "transfer_store"):
        total, values = median(name, "pg_cpu_us_per_unit"), median(name + "_values", "pg_cpu_us_per_unit")
        net = total - values
        summary[name] = {"pg_cpu_us": total, "values_us": values, "floor_us": round(net, 1),
                         "pgbench_units_per_s": median(name, "units_per_s")}
        print(f"  {name:16} {total:7.1f} us - {values:5.1f} us of generated values = {net:6.1f} us"
              f"  (pgbench reached {summary[name]['pgbench_units_per_s']:,}/s)")
    transfer = summary["transfer_shards"]["floor_us"] + summary["transfer_store"]["floor_us"]
    summary["transfer_floor_us"] = round(transfer, 1)
    summary["debit_max_per_s"] = round(cores * 1e6 / summary["debit"]["floor_us"])
    summary["transfer_max_per_s"] = round(cores * 1e6 / transfer)
    print(f"  a debit: {summary['debit']['floor_us']:.1f} us -> at most {summary['debit_max_per_s']:,} debits/s"
          f" if PostgreSQL had all {cores} cores")
    print(f"  a transfer (shards + saga store): {transfer:.1f} us -> at most {summary['transfer_max_per_s']:,}"
          f" transfers/s if PostgreSQL had all {cores} cores")
    common.write_json(f"{results}/summary.json", summary, indent=1)


def shard(results):
    """Per shape, commit mode and workload, the closed-loop medians; per
    shape, the open-loop run with the median p99; pgbench's median."""
    runs = common.read_json_lines(f"{results}/runs.jsonl")
    shards = [r for r in runs if r["mode"] != "pgbench"]
    closed = [r for r in shards if r.get("loop") != "open"]
    # Per shape, the open-loop run with the median p99, and every run's p99.
    open_all = {shape: sorted((r for r in shards if r.get("loop") == "open" and r["shape"] == shape),
                              key=lambda r: r["p99_ms"]) for shape in ("single", "coalesced")}
    open_runs = {shape: sel[(len(sel) - 1) // 2] for shape, sel in open_all.items()}
    shapes = ("single", "coalesced")

    configs = {}
    for shape in shapes:
        for mode in ("group", "per-command"):
            for workload in ("uniform", "hot"):
                sel = [r for r in closed if r["shape"] == shape and r["mode"] == mode and r["workload"] == workload]
                med = lambda field: common.median(sel, field) if sel else None  # noqa: E731
                batches = [r["mean_batch"] for r in sel if r.get("mean_batch") is not None]
                configs[f"{shape} {mode}/{workload}"] = {
                    "throughput": med("throughput"),
                    "throughput_all": [round(r["throughput"]) for r in sel],
                    "p50_ms": med("p50_ms"), "p99_ms": med("p99_ms"), "max_ms": med("max_ms"),
                    "errors": sum(r["errors"] for r in sel),
                    "rejected": sum(r["rejected"] for r in sel),
                    "shard_rss_mb": max(r["shard_rss_mb"] for r in sel),
                    "mean_batch": statistics.median(batches) if batches else None,
                    "shard_cpu_s": med("shard_cpu_s"), "bench_cpu_s": med("bench_cpu_s"),
                    "postgres_cpu_s": med("postgres_cpu_s"),
                    "cpu_us_per_debit": common.medians(sel, "cpu_us_per_debit", ("shard", "postgres", "bench")),
                }
    pgbench = common.median([r for r in runs if r["mode"] == "pgbench"], "throughput")
    rss = max(r["shard_rss_mb"] for r in shards)

    def throughput(shape, mode, workload):
        return configs[f"{shape} {mode}/{workload}"]["throughput"]

    ratios, targets = {}, []
    for shape in shapes:
        g_u, g_h = throughput(shape, "group", "uniform"), throughput(shape, "group", "hot")
        p_u, p_h = throughput(shape, "per-command", "uniform"), throughput(shape, "per-command", "hot")
        o = open_runs[shape]
        p99s = " / ".join(format(r["p99_ms"], ".1f") for r in open_all[shape])
        ratios[shape] = {"group_over_per_command_hot": g_h / p_h, "group_over_per_command_uniform": g_u / p_u,
                         "group_uniform_over_pgbench": g_u / pgbench}
        targets += [
            (shape, "uniform throughput >= 15,000/s", f"{g_u:,.0f}/s", g_u >= 15000),
            (shape, "hot-account throughput >= 5,000/s", f"{g_h:,.0f}/s", g_h >= 5000),
            (shape, "group >= 4x per-command (hot)", f"{ratios[shape]['group_over_per_command_hot']:.1f}x",
             ratios[shape]["group_over_per_command_hot"] >= 4),
            (shape, "p99 <= 20 ms at half peak (median run)",
             f"{o['p99_ms']:.1f} ms at {o['offered_rate']:,.0f}/s (runs {p99s} ms)", o["p99_ms"] <= 20),
        ]
    targets.append(("both", "shard RSS <= 200 MB", f"{rss:.0f} MB", rss <= 200))
    summary = {"configs": configs, "pgbench_tps": pgbench,
               "open_loop": {shape: {k: o[k] for k in ("offered_rate", "throughput", "p50_ms", "p90_ms", "p99_ms",
                                                       "p999_ms", "max_ms", "errors", "shard_rss_mb")}
                             | {"p99_ms_all": [r["p99_ms"] for r in open_all[shape]]} for shape, o in open_runs.items()},
               "ratios": ratios,
               "targets": [{"shape": sh, "target": t, "measured": m, "met": ok} for sh, t, m, ok in targets]}
    common.write_summary(results, summary)

    print()
    print(f"{'configuration':<32}{'debits/s (median)':>18}{'runs':>22}{'p50 ms':>8}{'p99 ms':>8}{'max ms':>8}{'batch':>7}{'RSS MB':>8}{'errors':>7}")
    for name, c in configs.items():
        runs_txt = "/".join(str(t) for t in c["throughput_all"])
        batch = f"{c['mean_batch']:.1f}" if c["mean_batch"] else "-"
        print(f"{name:<32}{c['throughput']:>18,.0f}{runs_txt:>22}{c['p50_ms']:>8.1f}{c['p99_ms']:>8.1f}{c['max_ms']:>8.1f}{batch:>7}{c['shard_rss_mb']:>8.0f}{c['errors']:>7}")
    for shape, o in open_runs.items():
        print(f"{shape + ' open loop group/uniform':<32}{o['throughput']:>18,.0f}{'offered ' + format(o['offered_rate'], ',.0f'):>22}{o['p50_ms']:>8.1f}{o['p99_ms']:>8.1f}{o['max_ms']:>8.1f}{'':>7}{o['shard_rss_mb']:>8.0f}{o['errors']:>7}")
    print(f"{'pgbench (16 clients)':<32}{pgbench:>18,.0f}")
    print()
    print("CPU per debit (us, measured phase, shard / postgres / bench):")
    for name, c in configs.items():
        u = c["cpu_us_per_debit"]
        print(f"  {name:<30} {u['shard']:>5.0f} / {u['postgres']:>5.0f} / {u['bench']:>5.0f}")
    print()
    for shape in shapes:
        r = ratios[shape]
        print(f"{shape}: group / per-command hot {r['group_over_per_command_hot']:.1f}x, uniform {r['group_over_per_command_uniform']:.1f}x;"
              f" group uniform / pgbench {r['group_uniform_over_pgbench']:.2f}")
    common.print_targets((f"{shape}: {t}", m, ok) for shape, t, m, ok in targets)

    plt = common.pyplot()
    if plt:
        fig, grid = plt.subplots(2, 2, figsize=(14, 9), sharey="row")
        axes, tails = grid
        for ax, shape in zip(axes, shapes):
            for r in closed:
                if r["shape"] == shape and r["repeat"] == "1":
                    common.plot_seconds(ax, r, "-", f"{r['mode']}/{r['workload']}")
            o = open_runs[shape]
            common.plot_seconds(ax, o, "--", f"open loop at {o['offered_rate']:,.0f}/s")
            ax.set_title(f"{shape} requests" + (f" ({o['per_request']} debits each)" if o["per_request"] > 1 else ""))
            common.finish_axes(ax, "second", "lower right")
        axes[0].set_ylabel("debits committed per second")
        for ax, shape in zip(tails, shapes):
            for r in open_all[shape]:
                common.plot_seconds(ax, r, "-", f"repeat {r['repeat']} (p99 {r['p99_ms']:.1f} ms)", "p99_ms_by_second_sent")
            ax.axhline(20, color="red", linestyle=":", label="target 20 ms")
            ax.set_title(f"{shape} requests, open loop at {open_runs[shape]['offered_rate']:,.0f}/s")
            common.finish_axes(ax, "second (of sending)", "upper right")
        tails[0].set_ylabel("p99 latency of the debits sent in that second (ms)")
        fig.suptitle("account_shard throughput over time (first repeat) and latency at half the peak (every repeat)")
        common.save_plot(fig, results)
    print(f"results: {results}")


def sagas(results):
    """Per commit mode and workload, the closed-loop medians through the
    orchestrator; the two open-loop runs."""
    runs = common.read_json_lines(f"{results}/runs.jsonl")
    closed = [r for r in runs if r["loop"] == "closed"]
    o = next(r for r in runs if r["name"] == "group.uniform.open")
    half = next(r for r in runs if r["name"] == "group.uniform.half")
    configs = {}
    for mode, workload in (("group", "uniform"), ("group", "hot"), ("per-command", "uniform")):
        sel = [r for r in closed if r["mode"] == mode and r["workload"] == workload]
        configs[f"{mode}/{workload}"] = {
            "throughput": common.median(sel, "throughput"), "throughput_all": [round(r["throughput"]) for r in sel],
            "p50_ms": common.median(sel, "p50_ms"), "p99_ms": common.median(sel, "p99_ms"),
            "max_ms": common.median(sel, "max_ms"),
            "failed": sum(r["rejected"] for r in sel), "errors": sum(r["errors"] for r in sel),
            "orchestrator_rss_mb": max(r["orchestrator_rss_mb"] for r in sel),
            "cpu_us_per_transfer": common.medians(sel, "cpu_us_per_transfer", sel[0]["cpu_us_per_transfer"]),
        }
    g, h, p = (configs[k]["throughput"] for k in ("group/uniform", "group/hot", "per-command/uniform"))
    rss = max(r["orchestrator_rss_mb"] for r in runs)
    ratios = {"group_over_per_command": g / p, "hot_over_uniform": h / g}
    targets = [
        ("completed transfers/s sustained (group, uniform) >= 3,000", f"{g:,.0f}/s", g >= 3000),
        (f"p99 start-to-completed <= 100 ms at {o['offered_rate']:,.0f}/s offered", f"{o['p99_ms']:.1f} ms ({o['throughput']:,.0f}/s completed)",
         o["p99_ms"] <= 100 and o["throughput"] >= 0.95 * o["offered_rate"]),
        ("half the transfers on one hot account >= 1,000/s", f"{h:,.0f}/s", h >= 1000),
        ("orchestrator RSS <= 300 MB", f"{rss:.0f} MB", rss <= 300),
    ]
    summary = {"configs": configs, "ratios": ratios,
               "open_loop": {r["name"]: {k: r[k] for k in ("offered_rate", "throughput", "p50_ms", "p90_ms", "p99_ms",
                                                           "p999_ms", "max_ms", "errors", "orchestrator_rss_mb")}
                             for r in (o, half)},
               "targets": [{"target": t, "measured": m, "met": ok} for t, m, ok in targets]}
    common.write_summary(results, summary)
    print()
    print(f"{'configuration':<24}{'transfers/s (median)':>22}{'runs':>20}{'p50 ms':>8}{'p99 ms':>8}{'max ms':>9}{'RSS MB':>8}{'failed':>8}{'errors':>8}")
    for name, c in configs.items():
        print(f"{name:<24}{c['throughput']:>22,.0f}{'/'.join(map(str, c['throughput_all'])):>20}{c['p50_ms']:>8.1f}{c['p99_ms']:>8.1f}{c['max_ms']:>9.1f}{c['orchestrator_rss_mb']:>8.0f}{c['failed']:>8}{c['errors']:>8}")
    for r in (o, half):
        print(f"{'open loop group/uniform':<24}{r['throughput']:>22,.0f}{'offered ' + format(r['offered_rate'], ',.0f'):>20}{r['p50_ms']:>8.1f}{r['p99_ms']:>8.1f}{r['max_ms']:>9.1f}{r['orchestrator_rss_mb']:>8.0f}{r['rejected']:>8}{r['errors']:>8}")
    print()
    print("CPU per transfer (us, measured phase):")
    for name, c in configs.items():
        print(f"  {name:<22} " + "  ".join(f"{k} {v:.0f}" for k, v in c["cpu_us_per_transfer"].items()))
    print(f"group / per-command {ratios['group_over_per_command']:.1f}x; hot / uniform {ratios['hot_over_uniform']:.2f}")
    common.print_targets(targets)

    plt = common.pyplot()
    if plt:
        fig, ax = plt.subplots(figsize=(10, 5))
        for r in closed:
            if r["name"].endswith(".1"):
                common.plot_seconds(ax, r, "-", f"{r['mode']}/{r['workload']}")
        for r in (o, half):
            common.plot_seconds(ax, r, "--", f"open loop at {r['offered_rate']:,.0f}/s")
        ax.set_ylabel("transfer sagas completed per second")
        ax.set_title("cross-shard transfers through the orchestrator (first repeat)")
        common.finish_axes(ax, "second", "lower right")
        common.save_plot(fig, results)
    print(f"results: {results}")


def gateway(results):
    """Closed loop straight to the orchestrator and through the gateway
    (medians); the two open-loop runs through the gateway, the second with
    WebSocket subscribers."""
    runs = common.read_json_lines(f"{results}/runs.jsonl")
    closed = {via: [r for r in runs if r["via"] == via and r["loop"] == "closed"] for via in ("orchestrator", "gateway")}
    half = next(r for r in runs if r["name"] == "gateway.half")
    subs = next(r for r in runs if r["name"] == "gateway.subscribers")
    med = {via: common.median(sel, "throughput") for via, sel in closed.items()}
    ratio = med["gateway"] / med["orchestrator"]
    targets = [
        ("completed transfers/s through the gateway >= 2,500", f"{med['gateway']:,.0f}/s", med["gateway"] >= 2500),
        (f"p99 <= 150 ms at half that rate ({half['offered_rate']:,.0f}/s offered)",
         f"{half['p99_ms']:.1f} ms ({half['throughput']:,.0f}/s completed)",
         half["p99_ms"] <= 150 and half["throughput"] >= 0.95 * half["offered_rate"]),
        ("projection lag p99 <= 100 ms", f"<= {half['projection_lag_p99_ms']} ms", (half["projection_lag_p99_ms"] or 1e9) <= 100),
        (f"gateway RSS <= 200 MB with {subs.get('subscribers_open', 0)} WebSocket subscribers", f"{subs['gateway_rss_mb']:.0f} MB",
         subs["gateway_rss_mb"] <= 200 and subs.get("subscribers_open", 0) >= 1000),
    ]
    summary = {"closed_loop": {via: {"throughput": med[via], "throughput_all": [round(r["throughput"]) for r in sel],
                                     "p50_ms": common.median(sel, "p50_ms"), "p99_ms": common.median(sel, "p99_ms"),
                                     "errors": sum(r["errors"] for r in sel), "failed": sum(r["rejected"] for r in sel),
                                     "cpu_us_per_transfer": common.medians(sel, "cpu_us_per_transfer",
                                                                           sel[0]["cpu_us_per_transfer"])}
                               for via, sel in closed.items()},
               "gateway_over_orchestrator": ratio,
               **{key: {k: r.get(k) for k in ("offered_rate", "throughput", "p50_ms", "p99_ms", "max_ms", "errors",
                                               "projection_lag_p99_ms", "push_lag_p99_ms", "gateway_rss_mb",
                                               "subscribers_open", "subscriber_frames", "cpu_us_per_transfer")}
                  for key, r in (("half", half), ("subscribers", subs))},
               "targets": [{"target": t, "measured": m, "met": ok} for t, m, ok in targets]}
    common.write_summary(results, summary)
    print()
    for via, c in summary["closed_loop"].items():
        print(f"closed loop via {via:<13} {c['throughput']:>8,.0f} transfers/s (runs {'/'.join(map(str, c['throughput_all']))}), p50 {c['p50_ms']:.1f} ms, p99 {c['p99_ms']:.1f} ms, {c['failed']} failed, {c['errors']} errors")
    for key in ("half", "subscribers"):
        h = summary[key]
        print(f"open loop via gateway at {h['offered_rate']:,.0f}/s: {h['throughput']:,.0f}/s completed, p50 {h['p50_ms']:.1f} ms, p99 {h['p99_ms']:.1f} ms, projection lag p99 <= {h['projection_lag_p99_ms']} ms, push lag p99 <= {h['push_lag_p99_ms']} ms, gateway RSS {h['gateway_rss_mb']:.0f} MB, {h.get('subscribers_open') or 0} subscribers, {h.get('subscriber_frames') or 0} frames")
    print(f"gateway / orchestrator direct: {ratio:.2f}")
    print("CPU per transfer (us, measured phase):")
    for label, cpu in [(f"closed loop via {via}", c["cpu_us_per_transfer"]) for via, c in summary["closed_loop"].items()] + \
            [("open loop via gateway", summary["half"]["cpu_us_per_transfer"]),
             ("open loop, subscribers", summary["subscribers"]["cpu_us_per_transfer"])]:
        print(f"  {label:<28} " + "  ".join(f"{k} {v:,.0f}" for k, v in cpu.items()))
    common.print_targets(targets)

    plt = common.pyplot()
    if plt:
        fig, ax = plt.subplots(figsize=(10, 5))
        for r in runs:
            if r["name"].endswith(".1") or r["name"] in ("gateway.half", "gateway.subscribers"):
                label = f"via {r['via']}" if r["loop"] == "closed" else f"via gateway, open loop at {r['offered_rate']:,.0f}/s" + \
                    (f", {r['subscribers_open']} subscribers" if r.get("subscribers_open") else "")
                common.plot_seconds(ax, r, "--" if r["loop"] == "open" else "-", label)
        ax.set_ylabel("transfer sagas completed per second")
        ax.set_title("cross-shard transfers: straight to the orchestrator and through the gateway (first repeat)")
        common.finish_axes(ax, "second", "lower right")
        common.save_plot(fig, results)
    print(f"results: {results}")


def main():
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    benches = parser.add_subparsers(dest="bench", required=True, metavar="BENCH")
    for bench, what in (("floor", "scripts/bench-floor: PostgreSQL's CPU per unit, the floor it sets"),
                        ("shard", "scripts/bench-shard: one account_shard"),
                        ("sagas", "scripts/bench-sagas: transfers through the orchestrator"),
                        ("gateway", "scripts/bench-gateway: transfers through the gateway")):
        p = benches.add_parser(bench, help=what, description=what)
        p.add_argument("--results", required=True, help="the results folder")
        if bench == "floor":
            p.add_argument("--cores", type=int, required=True, help="the cores PostgreSQL could have")
    args = parser.parse_args()
    if args.bench == "floor":
        floor(args.results, args.cores)
    else:
        {"shard": shard, "sagas": sagas, "gateway": gateway}[args.bench](args.results)


if __name__ == "__main__":
    main()
