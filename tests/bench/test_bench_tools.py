"""Unit tests of the bench tools (bench/tools/), each run as the bench
scripts run it, on a copy of a small results folder of fixtures/: per bench,
a runs.jsonl of fabricated runs (3 repeats of every configuration) and the
raw files of one run (the load generator's NAME.json, NAME.cpu-start, the
metrics saved). The figures are checked against the fixtures' numbers.

    /usr/bin/python3 -m unittest discover -s tests/bench
"""
import json
import os
import re
import shutil
import subprocess
import sys
import tempfile
import unittest

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(os.path.dirname(HERE))
TOOLS = os.path.join(ROOT, "bench", "tools")
FIXTURES = os.path.join(HERE, "fixtures")


def tool(name, *args, check=True):
    """Runs bench/tools/NAME with ARGS: the finished process (text output)."""
    return subprocess.run([sys.executable, os.path.join(TOOLS, name), *map(str, args)],
                          capture_output=True, text=True, check=check)


def read_lines(path):
    with open(path) as f:
        return [json.loads(line) for line in f]


def middle(values):
    """The middle one of three values: their median."""
    assert len(values) == 3, values
    return sorted(values)[1]


class ResultsTestCase(unittest.TestCase):
    """A test on a copy of fixtures/BENCH in a temporary results folder."""
    bench = None

    def setUp(self):
        tmp = tempfile.TemporaryDirectory()
        self.addCleanup(tmp.cleanup)
        self.results = os.path.join(tmp.name, self.bench)
        shutil.copytree(os.path.join(FIXTURES, self.bench), self.results)
        self.runs = read_lines(os.path.join(self.results, "runs.jsonl"))

    def file(self, name):
        return os.path.join(self.results, name)

    def cpu_start(self, name):
        with open(self.file(f"{name}.cpu-start")) as f:
            return [float(x) for x in f.read().split()]

    def bench_json(self, name):
        with open(self.file(f"{name}.json")) as f:
            return json.load(f)

    def keep_closed_loop_runs(self):
        """Leaves in runs.jsonl what it holds when the scripts compute their
        peak: the open-loop runs at half of it are still to come."""
        with open(self.file("runs.jsonl"), "w") as f:
            f.writelines(json.dumps(r) + "\n" for r in self.runs if r.get("loop") != "open")

    def summary(self, *extra):
        """Runs summary.py; its stdout lines and the summary.json it wrote."""
        out = tool("summary.py", self.bench, "--results", self.results, *extra).stdout
        with open(self.file("summary.json")) as f:
            return out.splitlines(), json.load(f)

    def assert_plot(self, lines):
        with open(self.file("throughput.png"), "rb") as f:
            self.assertEqual(f.read(8), b"\x89PNG\r\n\x1a\n")
        self.assertIn(f"plot: {self.results}/throughput.png", lines)
        self.assertEqual(lines[-1], f"results: {self.results}")

    def assert_targets(self, lines, targets, label=lambda t: t["target"]):
        """A line per target, [met] or [MISSED] as summary.json says."""
        for t in targets:
            self.assertIn(f"  [{'met' if t['met'] else 'MISSED'}] {label(t)}: {t['measured']}", lines)


class ValuesOnlyTest(unittest.TestCase):
    def test_every_write_becomes_a_count_of_its_values(self):
        for script in ("debit", "transfer_shards", "transfer_store"):
            with self.subTest(script=script):
                path = os.path.join(ROOT, "bench", "floor", f"{script}.sql")
                with open(path) as f:
                    text = f.read()
                out = tool("values_only.py", path).stdout
                writes = len(re.findall(r"^(INSERT|UPDATE) ", text, re.M))
                self.assertGreater(writes, 0)
                self.assertTrue(out.startswith("\\set n 50\n"))
                self.assertEqual(len(re.findall(r"^SELECT count\(\*\) FROM \(", out, re.M)), writes)
                self.assertNotRegex(out, r"(?m)^(INSERT|UPDATE) ")
                self.assertNotIn("::jsonb", out)
                self.assertIn("BEGIN;\n", out)


class FloorTest(ResultsTestCase):
    bench = "floor"

    def test_run_figures(self):
        p = tool("run_figures.py", "floor", "--name", "debit", "--repeat", 2, "--tps", 800, "--units", 50,
                 "--cpu-start", 10, "--cpu-end", 22, "--duration", 15)
        run = json.loads(p.stdout)
        # 800 batches of 50 a second; 12 s of PostgreSQL CPU over 15 s of 40,000 debits a second.
        self.assertEqual(run, {"name": "debit", "repeat": 2, "units_per_s": 40000, "pg_cpu_s": 12.0,
                               "pg_cpu_us_per_unit": 20.0})
        self.assertEqual(p.stderr, f"bench-floor: {p.stdout}")

    def test_summary(self):
        lines, summary = self.summary("--cores", 2)

        def med(name, key):
            return middle([r[key] for r in self.runs if r["name"] == name])

        self.assertEqual(lines[0], "PostgreSQL CPU per unit, medians of 3 runs (2 cores):")
        for name in ("debit", "transfer_shards", "transfer_store"):
            s = summary[name]
            self.assertEqual(s["pg_cpu_us"], med(name, "pg_cpu_us_per_unit"))
            self.assertEqual(s["values_us"], med(f"{name}_values", "pg_cpu_us_per_unit"))
            self.assertEqual(s["floor_us"], round(s["pg_cpu_us"] - s["values_us"], 1))
            self.assertEqual(s["pgbench_units_per_s"], med(name, "units_per_s"))
            self.assertEqual(len([line for line in lines if line.startswith(f"  {name} ")]), 1)
        transfer = summary["transfer_shards"]["floor_us"] + summary["transfer_store"]["floor_us"]
        self.assertEqual(summary["transfer_floor_us"], round(transfer, 1))
        self.assertEqual(summary["debit_max_per_s"], round(2e6 / summary["debit"]["floor_us"]))
        self.assertEqual(summary["transfer_max_per_s"], round(2e6 / transfer))
        self.assertIn(f"at most {summary['debit_max_per_s']:,} debits/s", lines[-2])
        self.assertIn(f"{summary['transfer_floor_us']:.1f} us -> at most {summary['transfer_max_per_s']:,} transfers/s",
                      lines[-1])


class ShardTest(ResultsTestCase):
    bench = "shard"

    def test_run_figures(self):
        name = "single.group.uniform.1"
        p = tool("run_figures.py", "shard", "--results", self.results, "--name", name, "--shape", "single",
                 "--mode", "group", "--workload", "uniform", "--repeat", 1, "--rss-kb", 25792,
                 "--cpu-end", "9.85 1.00")
        run, raw = json.loads(p.stdout), self.bench_json(name)
        shard_start, pg_start = self.cpu_start(name)
        self.assertEqual(run["repeat"], "1")  # a string, as the summary's plot expects
        self.assertEqual(run["shard_rss_mb"], 25792 / 1024)
        self.assertAlmostEqual(run["shard_cpu_s"], 9.85 - shard_start)
        self.assertAlmostEqual(run["postgres_cpu_s"], 1.00 - pg_start)
        # Commands over batches between the two metrics files: (28680 - 887) / (2754 - 54).
        self.assertAlmostEqual(run["mean_batch"], 27793 / 2700)
        self.assertEqual(run["cpu_us_per_debit"],
                         {"shard": round((9.85 - shard_start) * 1e6 / raw["completed"], 1),
                          "postgres": round((1.00 - pg_start) * 1e6 / raw["completed"], 1),
                          "bench": round(raw["cpu_s"] * 1e6 / raw["completed"], 1)})
        self.assertEqual(run["per_second"], raw["per_second"])
        self.assertTrue(p.stderr.startswith(f"bench-shard: run {name}: {raw['throughput']:.0f} debits/s,"))
        self.assertIn(f"mean batch {27793 / 2700:.1f},", p.stderr)

    def test_median_throughput(self):
        self.keep_closed_loop_runs()
        for shape in ("single", "coalesced"):
            expected = middle([r["throughput"] for r in self.runs if r.get("shape") == shape
                               and r["mode"] == "group" and r["workload"] == "uniform" and r["loop"] == "closed"])
            out = tool("median_throughput.py", "--runs", self.file("runs.jsonl"), "--where", f"shape={shape}",
                       "--where", "mode=group", "--where", "workload=uniform").stdout
            self.assertEqual(out, f"{round(expected)}\n")

    def test_summary(self):
        lines, summary = self.summary()
        configs = summary["configs"]
        self.assertEqual(len(configs), 8)  # 2 shapes x 2 modes x 2 workloads
        for key, c in configs.items():
            shape, rest = key.split(" ")
            mode, workload = rest.split("/")
            sel = [r for r in self.runs if r.get("shape") == shape and r["mode"] == mode
                   and r["workload"] == workload and r["loop"] == "closed"]
            self.assertEqual(c["throughput"], middle([r["throughput"] for r in sel]))
            self.assertEqual(c["throughput_all"], [round(r["throughput"]) for r in sel])
            self.assertEqual(c["p99_ms"], middle([r["p99_ms"] for r in sel]))
            self.assertEqual(c["cpu_us_per_debit"]["shard"], middle([r["cpu_us_per_debit"]["shard"] for r in sel]))
            self.assertEqual(c["errors"], sum(r["errors"] for r in sel))
            self.assertEqual(len([line for line in lines if line.startswith(f"{key} ")]), 1)
        for shape, o in summary["open_loop"].items():
            p99s = sorted(r["p99_ms"] for r in self.runs if r.get("shape") == shape and r["loop"] == "open")
            self.assertEqual(o["p99_ms_all"], p99s)
            self.assertEqual(o["p99_ms"], middle(p99s))  # the run with the median p99
        self.assertEqual(summary["pgbench_tps"], middle([r["throughput"] for r in self.runs if r["mode"] == "pgbench"]))
        self.assertEqual(len(summary["targets"]), 9)
        self.assert_targets(lines, summary["targets"], lambda t: f"{t['shape']}: {t['target']}")
        self.assert_plot(lines)


class SagasTest(ResultsTestCase):
    bench = "sagas"

    def test_run_figures(self):
        name = "group.hot.1"
        p = tool("run_figures.py", "sagas", "--results", self.results, "--name", name, "--mode", "group",
                 "--hot", 0.5, "--rss-kb", 66582, "--cpu-end", "5.11 10.20 2.40 1.59")
        run, raw = json.loads(p.stdout), self.bench_json(name)
        used = [e - s for s, e in zip(self.cpu_start(name), (5.11, 10.20, 2.40, 1.59))]
        self.assertEqual((run["name"], run["mode"], run["workload"]), (name, "group", "hot"))
        self.assertEqual(run["orchestrator_rss_mb"], 66582 / 1024)
        self.assertEqual(run["cpu_us_per_transfer"],
                         {**{k: round(u * 1e6 / raw["completed"]) for k, u in
                             zip(("orchestrator", "shard0", "shard1", "postgres"), used)},
                          "bench": round(raw["cpu_s"] * 1e6 / raw["completed"])})
        self.assertTrue(p.stderr.startswith(f"bench-sagas: run {name}: {raw['throughput']:.0f} transfers/s,"))

    def test_median_throughput(self):
        expected = middle([r["throughput"] for r in self.runs
                           if r["loop"] == "closed" and r["mode"] == "group" and r["workload"] == "uniform"])
        out = tool("median_throughput.py", "--runs", self.file("runs.jsonl"), "--where", "loop=closed",
                   "--where", "mode=group", "--where", "workload=uniform").stdout
        self.assertEqual(out, f"{round(expected)}\n")

    def test_summary(self):
        lines, summary = self.summary()
        self.assertEqual(list(summary["configs"]), ["group/uniform", "group/hot", "per-command/uniform"])
        for key, c in summary["configs"].items():
            mode, workload = key.split("/")
            sel = [r for r in self.runs if r["mode"] == mode and r["workload"] == workload and r["loop"] == "closed"]
            self.assertEqual(c["throughput"], middle([r["throughput"] for r in sel]))
            self.assertEqual(c["max_ms"], middle([r["max_ms"] for r in sel]))
            self.assertEqual(c["cpu_us_per_transfer"]["postgres"],
                             middle([r["cpu_us_per_transfer"]["postgres"] for r in sel]))
            self.assertEqual(len([line for line in lines if line.startswith(f"{key} ")]), 1)
        self.assertEqual(sorted(summary["open_loop"]), ["group.uniform.half", "group.uniform.open"])
        g, h = summary["configs"]["group/uniform"]["throughput"], summary["configs"]["group/hot"]["throughput"]
        self.assertEqual(summary["ratios"]["hot_over_uniform"], h / g)
        self.assertEqual(summary["targets"][0]["met"], g >= 3000)
        self.assert_targets(lines, summary["targets"])
        self.assert_plot(lines)


class GatewayTest(ResultsTestCase):
    bench = "gateway"
    cpu_end = "7.79 7.47 5.42 9.92 3.92 7.11 8.54"

    def run_figures(self, name):
        p = tool("run_figures.py", "gateway", "--results", self.results, "--name", name, "--via", "gateway",
                 "--rss-kb", 82247, "--cpu-end", self.cpu_end)
        return json.loads(p.stdout), p.stderr

    def buckets(self, file, sink):
        """{le: count} of the lag histogram of SINK (a prefix), summed over sources."""
        out = {}
        with open(self.file(file)) as f:
            for s, source, le, n in re.findall(r'sink="([^"]+)",source="(\w+)",le="([^"]+)"\} (\d+)', f.read()):
                if s.startswith(sink):
                    out[le] = out.get(le, 0) + int(n)
        return out

    def test_run_figures(self):
        name = "gateway.half"
        run, stderr = self.run_figures(name)
        raw = self.bench_json(name)
        used = [e - s for s, e in zip(self.cpu_start(name), map(float, self.cpu_end.split()))]
        self.assertEqual(run["gateway_rss_mb"], 82247 / 1024)
        self.assertEqual(run["cpu_us_per_transfer"]["relay"], round(used[4] * 1e6 / raw["completed"]))
        self.assertEqual(list(run["cpu_us_per_transfer"]),
                         ["orchestrator", "shard0", "shard1", "gateway", "relay", "redis", "postgres", "bench"])
        for sink, field in (("projection", "projection_lag_p99_ms"), ("push:", "push_lag_p99_ms")):
            end = self.buckets(f"{name}.relay.metrics", sink)
            start = self.buckets(f"{name}.relay.metrics-start", sink)
            delta = {float(le): n - start[le] for le, n in end.items()}
            total = delta[float("inf")]
            if sink == "projection":
                self.assertEqual(run["projection_events"], total)
            # p99: the upper bound (in ms) of the first bucket that holds 99 % of the events.
            self.assertEqual(run[field], min(le for le, n in delta.items() if n >= 0.99 * total) * 1000)
        self.assertTrue(stderr.startswith(f"bench-gateway: run {name}: {raw['throughput']:.0f} transfers/s,"))

    def test_run_figures_of_a_compare_run(self):
        name = "gateway.half"
        with open(self.file(f"{name}.statements-count"), "w") as f:
            f.write("123456\n")
        p = tool("run_figures.py", "gateway", "--results", self.results, "--name", name, "--via", "gateway",
                 "--rss-kb", 82247, "--cpu-end", self.cpu_end, "--version", "head", "--workload", "half")
        run, raw = json.loads(p.stdout), self.bench_json(name)
        used = [e - s for s, e in zip(self.cpu_start(name), map(float, self.cpu_end.split()))]
        self.assertEqual((run["version"], run["workload"]), ("head", "half"))
        self.assertEqual(run["statements_per_transfer"], round(123456 / raw["completed"], 2))
        # Every process but the load generator, whose CPU the bench reports itself.
        self.assertEqual(run["cpu_us_total"], round(sum(used) * 1e6 / raw["completed"]))
        requests = raw["completed"] + raw["rejected"] + raw["errors"]
        self.assertEqual(run["cpu_us_per_request"], round(sum(used) * 1e6 / requests))
        self.assertEqual(run["refused"], raw.get("errors_by_kind", {}).get("http_429", 0))

    def test_run_figures_give_what_the_databases_wrote_per_transfer(self):
        name = "gateway.half"
        with open(self.file(f"{name}.writes-start"), "w") as f:
            f.write("wal 1000000\ndb bench_s0 9000000 100 10 0 5\ndb bench_sagas 20000000 50 20 0 0\n")
        with open(self.file(f"{name}.writes"), "w") as f:
            f.write("wal 61000000\ndb bench_s0 12000000 40100 20010 0 10005\ndb bench_sagas 29000000 30050 "
                    "20020 5000 10000\n")
        run, raw = self.run_figures(name)[0], self.bench_json(name)
        n = raw["completed"]
        self.assertEqual(run["wal_bytes_per_transfer"], round(60000000 / n))
        self.assertEqual(run["db_bytes_per_transfer"], round(12000000 / n))
        self.assertEqual(run["rows_inserted_per_transfer"], round(70000 / n, 2))
        self.assertEqual(run["rows_updated_per_transfer"], round(40000 / n, 2))
        self.assertEqual(run["hot_updates_per_transfer"], round(20000 / n, 2))
        self.assertEqual(run["rows_deleted_per_transfer"], round(5000 / n, 2))

    def test_run_figures_give_the_variable_cost_per_finished_saga(self):
        run, _ = self.run_figures("gateway.half")
        # 4,000 sagas finished in the window; the shards' account waits grew by 6 s and 2 s.
        self.assertEqual(run["account_wait_ms_per_transfer"], round((7.5 - 1.5 + 2.25 - 0.25) * 1000 / 4000, 3))
        self.assertEqual(run["busy_refusals_per_transfer"], round(40 / 4000, 4))
        self.assertEqual(run["shard_calls_per_transfer"], round(12040 / 4000, 4))

    def test_a_version_without_account_waits_leaves_them_out(self):
        for s in ("s0", "s1"):
            for suffix in ("metrics", "metrics-start"):
                with open(self.file(f"gateway.half.{s}.{suffix}"), "w") as f:
                    f.write("tally_shard_batches_total 5\n")
        run, _ = self.run_figures("gateway.half")
        self.assertNotIn("account_wait_ms_per_transfer", run)
        self.assertIn("shard_calls_per_transfer", run)
        os.remove(self.file("gateway.half.orchestrator.metrics"))
        run, _ = self.run_figures("gateway.half")
        self.assertNotIn("shard_calls_per_transfer", run)

    def test_run_figures_without_relay_metrics(self):
        for suffix in ("relay.metrics", "relay.metrics-start"):
            os.remove(self.file(f"gateway.half.{suffix}"))
        run, _ = self.run_figures("gateway.half")
        self.assertEqual((run["projection_events"], run["projection_lag_p99_ms"], run["push_lag_p99_ms"]), (0, None, None))

    def test_median_throughput(self):
        expected = middle([r["throughput"] for r in self.runs if r["via"] == "gateway" and r["loop"] == "closed"])
        self.keep_closed_loop_runs()
        out = tool("median_throughput.py", "--runs", self.file("runs.jsonl"), "--where", "via=gateway").stdout
        self.assertEqual(out, f"{round(expected)}\n")

    def test_bad_where(self):
        p = tool("median_throughput.py", "--runs", self.file("runs.jsonl"), "--where", "via", check=False)
        self.assertEqual(p.returncode, 2)
        self.assertIn("not FIELD=VALUE: via", p.stderr)

    def test_summary(self):
        lines, summary = self.summary()
        for via, c in summary["closed_loop"].items():
            sel = [r for r in self.runs if r["via"] == via and r["loop"] == "closed"]
            self.assertEqual(c["throughput"], middle([r["throughput"] for r in sel]))
            self.assertEqual(c["throughput_all"], [round(r["throughput"]) for r in sel])
            self.assertEqual(c["cpu_us_per_transfer"]["gateway"],
                             middle([r["cpu_us_per_transfer"]["gateway"] for r in sel]))
            self.assertEqual(len([line for line in lines if line.startswith(f"closed loop via {via} ")]), 1)
        closed = summary["closed_loop"]
        self.assertEqual(summary["gateway_over_orchestrator"],
                         closed["gateway"]["throughput"] / closed["orchestrator"]["throughput"])
        self.assertEqual(summary["subscribers"]["subscribers_open"], 1000)
        self.assertEqual(summary["half"]["subscribers_open"], None)
        self.assert_targets(lines, summary["targets"])
        self.assert_plot(lines)


class CompareTest(ResultsTestCase):
    bench = "compare"

    def compare(self, *extra):
        out = tool("compare.py", "--results", self.results, "--base", "7ca9212", "--head", "abc1234", *extra).stdout
        with open(self.file("summary.json")) as f:
            return out.splitlines(), json.load(f)

    def med(self, version, workload, key, sub=None):
        return middle([r[key][sub] if sub else r[key] for r in self.runs
                       if r["version"] == version and r["workload"] == workload])

    def test_the_table_gives_each_versions_median_and_their_ratio(self):
        lines, summary = self.compare("--floor", self.file("floor-summary.json"))
        f = summary["figures"]
        for v in ("base", "head"):
            self.assertEqual(f[v]["uniform_per_s"], self.med(v, "uniform", "throughput"))
            self.assertEqual(f[v]["hot_per_s"], self.med(v, "hot", "throughput"))
            self.assertEqual(f[v]["half_p99_ms"], self.med(v, "half", "p99_ms"))
            self.assertEqual(f[v]["cpu_us_total"], self.med(v, "uniform", "cpu_us_total"))
            self.assertEqual(f[v]["cpu_us"]["relay"], self.med(v, "uniform", "cpu_us_per_transfer", "relay"))
            self.assertEqual(f[v]["hot_over_uniform"], f[v]["hot_per_s"] / f[v]["uniform_per_s"])
        # The 429s of the hot runs are refusals, not errors: base's second
        # repeat has one other error in each of its three runs.
        self.assertEqual(f["base"]["errors"], 3)
        self.assertEqual(f["head"]["errors"], 0)
        uniform = next(row for row in summary["table"] if row["figure"] == "completed transfers/s, closed loop, uniform")
        self.assertEqual(uniform["ratio"], f["head"]["uniform_per_s"] / f["base"]["uniform_per_s"])
        ratio = f["head"]["uniform_per_s"] / f["base"]["uniform_per_s"]
        self.assertIn(f"| completed transfers/s, closed loop, uniform | {f['base']['uniform_per_s']:,.0f} | "
                      f"{f['head']['uniform_per_s']:,.0f} | {ratio:.2f}× | >= 1.25× |", lines)
        self.assertEqual(summary["pg_cpu_over_floor"], f["head"]["cpu_us"]["postgres"] / 480.0)
        # The rows (throughput uniform and hot, p99, WAL), hot / uniform, the floor.
        self.assertEqual(len(summary["targets"]), 6)
        self.assertEqual(f["head"]["wal_bytes_per_transfer"], self.med("head", "uniform", "wal_bytes_per_transfer"))
        self.assertIn("| WAL bytes per transfer (uniform) | 12,800 | 4,900 | 0.38× | <= 0.4× |", lines)
        self.assert_targets(lines, summary["targets"])
        with open(self.file("compare.png"), "rb") as png:
            self.assertEqual(png.read(8), b"\x89PNG\r\n\x1a\n")
        self.assertEqual(lines[-1], f"results: {self.results}")

    def test_the_hot_runs_variable_cost_is_shown_where_a_version_gives_it(self):
        lines, summary = self.compare()
        head = summary["figures"]["head"]
        self.assertEqual(head["hot_account_wait_ms_per_transfer"], self.med("head", "hot", "account_wait_ms_per_transfer"))
        self.assertEqual(head["hot_busy_refusals_per_transfer"], 0.002)
        self.assertNotIn("hot_account_wait_ms_per_transfer", summary["figures"]["base"])
        self.assertIn("| hot: ms queued behind the same account per transfer | - | 2.50 | - |  |", lines)
        self.assertIn("| hot: shard calls per transfer (3 without retries) | - | 3.002 | - |  |", lines)

    def test_without_a_floor_there_is_no_floor_target(self):
        lines, summary = self.compare()
        self.assertIsNone(summary["pg_cpu_over_floor"])
        self.assertEqual(len(summary["targets"]), 5)
        self.assertNotIn("db_bytes_per_transfer", summary["figures"]["base"])  # the fixture's base has none


class HaCostTest(ResultsTestCase):
    """fixtures/ha: the records of a real scripts/bench-ha run."""
    bench = "ha"

    def med(self, kind, workload, key):
        return middle([r[key] for r in self.runs if r["version"] == kind and r["workload"] == workload])

    def test_the_table_gives_each_kinds_median_their_ratio_and_the_targets(self):
        out = tool("ha_cost.py", "--results", self.results).stdout
        lines = out.splitlines()
        with open(self.file("summary.json")) as f:
            summary = json.load(f)
        fig = summary["figures"]
        for kind in ("single", "ha"):
            self.assertEqual(fig[kind]["uniform_per_s"], self.med(kind, "uniform", "throughput"))
            self.assertEqual(fig[kind]["half_p99_ms"], self.med(kind, "half", "p99_ms"))
            self.assertEqual(fig[kind]["wal_bytes_per_transfer"], self.med(kind, "uniform", "wal_bytes_per_transfer"))
        ratio = fig["ha"]["uniform_per_s"] / fig["single"]["uniform_per_s"]
        self.assertIn(f"| completed transfers/s, closed loop | {fig['single']['uniform_per_s']:,.0f} | "
                      f"{fig['ha']['uniform_per_s']:,.0f} | {ratio:.2f}× | >= 0.8× |", lines)
        self.assertEqual([t["target"] for t in summary["targets"]],
                         ["completed transfers/s, closed loop: ha / single >= 0.8×",
                          "open loop: p99 ms: ha / single <= 1.5×"])
        self.assertEqual(summary["targets"][0]["met"], ratio >= 0.8)
        self.assertIn(f"WAL shipped per transfer to two standbys: {2 * fig['ha']['wal_bytes_per_transfer']:,.0f} bytes",
                      lines)
        self.assert_targets(lines, summary["targets"])


class HelpTest(unittest.TestCase):
    def test_every_tool_says_what_it_reads_and_writes(self):
        for name, words in (("run_figures.py", ("runs.jsonl", "NAME.json")), ("summary.py", ("runs.jsonl", "summary.json")),
                            ("median_throughput.py", ("runs.jsonl",)), ("values_only.py", ("bench/floor",)),
                            ("compare.py", ("runs.jsonl", "summary.json", "compare.png"))):
            with self.subTest(tool=name):
                out = tool(name, "--help").stdout
                for word in words:
                    self.assertIn(word, out)


if __name__ == "__main__":
    unittest.main()


class WalByRelationTest(unittest.TestCase):
    """bench/tools/wal_by_relation.py on a few pg_waldump lines."""
    WALDUMP = [
        "rmgr: Heap        len (rec/tot):     79/   400, tx:  1, lsn: 0/1, prev 0/0, desc: INSERT off 1, "
        "blkref #0: rel 1663/5/100 blk 0",
        "rmgr: Btree       len (rec/tot):     64/   100, tx:  1, lsn: 0/2, prev 0/1, desc: INSERT_LEAF off 2, "
        "blkref #0: rel 1663/5/101 blk 1",
        "rmgr: Heap        len (rec/tot):     79/   200, tx:  2, lsn: 0/3, prev 0/2, desc: HOT_UPDATE off 1, "
        "blkref #0: rel 1663/6/100 blk 0",
        "rmgr: Transaction len (rec/tot):     34/    60, tx:  1, lsn: 0/4, prev 0/3, desc: COMMIT 2026-12-06",
        "not a record",
    ]
    RELATIONS = ["5|100|s0|ledger_entry|ledger_entry", "5|101|s0|ledger_entry_key|ledger_entry",
                 "6|100|sagas|saga|saga", "too|few"]

    def test_sums_per_relation_table_and_kind_per_transfer(self):
        import importlib.util
        spec = importlib.util.spec_from_file_location("wal_by_relation", os.path.join(TOOLS, "wal_by_relation.py"))
        w = importlib.util.module_from_spec(spec)
        spec.loader.exec_module(w)
        relations = w.read_relations(self.RELATIONS)
        self.assertEqual(len(relations), 3)
        report = w.wal_by_relation(self.WALDUMP, relations, transfers=2)
        self.assertEqual(report["bytes_per_transfer"], 380.0)
        tables = {r["name"]: r["bytes"] for r in report["by_table"]}
        self.assertEqual(tables, {"s0.ledger_entry": 250.0, "sagas.saga": 100.0,
                                  "(no relation) Transaction": 30.0})
        relation = {r["name"]: (r["bytes"], r["records"]) for r in report["by_relation"]}
        self.assertEqual(relation["s0.ledger_entry_key"], (50.0, 0.5))
        self.assertEqual(report["by_relation"][0]["name"], "s0.ledger_entry", "largest first")
        kinds = {r["name"]: r["bytes"] for r in report["by_kind"]}
        self.assertEqual(kinds["Heap/HOT_UPDATE"], 100.0)
        self.assertIn("WAL per completed transfer: 380 B", w.text(report))

    def test_no_transfer_is_an_error(self):
        r = tool("wal_by_relation.py", "--waldump", "/dev/null", "--relations", "/dev/null", "--transfers", "0",
                 check=False)
        self.assertEqual(r.returncode, 1)
        self.assertIn("no completed transfer", r.stderr)
