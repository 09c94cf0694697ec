"""What the bench tools share: a run's files in RESULTS (the load
generator's NAME.json, NAME.cpu-start), runs.jsonl, medians, the targets'
lines, the throughput plot, and psql."""
import json
import re
import statistics
import subprocess


def read_json(path):
    with open(path) as f:
        return json.load(f)


def read_json_lines(path):
    """One dict per line of a JSON-lines file such as RESULTS/runs.jsonl."""
    with open(path) as f:
        return [json.loads(line) for line in f]


def read_text(path):
    with open(path) as f:
        return f.read()


def write_json(path, value, indent):
    with open(path, "w") as f:
        json.dump(value, f, indent=indent)


def write_summary(results, summary):
    """RESULTS/summary.json: SUMMARY and what the figures were measured on
    (RESULTS/machine.txt)."""
    write_json(f"{results}/summary.json", {**summary, "machine": read_text(f"{results}/machine.txt")}, indent=2)


def cpu_used(results, name, cpu_end):
    """CPU seconds each watched process used in a run's measured phase:
    CPU_END (the script's record_cpu line at the end) less
    RESULTS/NAME.cpu-start (the same line when the measured phase began)."""
    start = map(float, read_text(f"{results}/{name}.cpu-start").split())
    return [e - s for s, e in zip(start, map(float, cpu_end.split()))]


def metric_delta(results, name, metric):
    """How much a Prometheus counter (or a histogram's _sum or _count) of
    RESULTS/NAME.metrics grew since RESULTS/NAME.metrics-start, summed over
    its label sets; None when the process does not export it (an older
    version) or its metrics were not saved."""
    def total(path):
        found = re.findall(rf"^{metric}(?:{{[^}}]*}})? (\S+)$", read_text(path), re.M)
        return sum(map(float, found)) if found else None

    try:
        end, start = total(f"{results}/{name}.metrics"), total(f"{results}/{name}.metrics-start")
    except OSError:
        return None
    return None if end is None else end - (start or 0.0)


def cpu_us_per_unit(run, used, processes, ndigits=None):
    """Microseconds of CPU per completed unit: of each of PROCESSES (their
    USED seconds, in order), then of the load generator ("bench")."""
    done = max(run["completed"], 1)
    cpu = {k: round(u * 1e6 / done, ndigits) for k, u in zip(processes, used)}
    cpu["bench"] = round(run["cpu_s"] * 1e6 / done, ndigits)
    return cpu


def median(runs, field):
    return statistics.median(r[field] for r in runs)


def medians(runs, field, keys):
    """Per key, the median of run[FIELD][key] over RUNS."""
    return {k: statistics.median(r[field][k] for r in runs) for k in keys}


def medians_present(runs, fields):
    """The median of each of FIELDS that every one of RUNS has (an older
    version may not export it); {} without runs."""
    return {f: median(runs, f) for f in fields if runs and all(f in r for r in runs)}


def open_loop_figures(half):
    """The medians of a gateway bench's open-loop runs at half the peak
    (run_figures.py gateway, workload "half")."""
    return {
        "half_offered_per_s": median(half, "offered_rate"),
        "half_per_s": median(half, "throughput"),
        "half_p50_ms": median(half, "p50_ms"),
        "half_p99_ms": median(half, "p99_ms"),
    }


def open_loop_rows(offered_label, p99_target):
    """ratio_table's rows of open_loop_figures: the offered rate (as
    OFFERED_LABEL), the completed rate, p50 and p99 (with P99_TARGET)."""
    return [
        (offered_label, "half_offered_per_s", "{:,.0f}", None),
        ("open loop: completed/s", "half_per_s", "{:,.0f}", None),
        ("open loop: p50 ms", "half_p50_ms", "{:.1f}", None),
        ("open loop: p99 ms", "half_p99_ms", "{:.1f}", p99_target),
    ]


def write_rows(wal_label, wal_target, db_label):
    """ratio_table's rows of writes_per_unit: WAL bytes (as WAL_LABEL, with
    WAL_TARGET), database bytes (as DB_LABEL), rows inserted and updated
    (HOT among them)."""
    return [
        (wal_label, "wal_bytes_per_transfer", "{:,.0f}", wal_target),
        (db_label, "db_bytes_per_transfer", "{:,.0f}", None),
        ("rows inserted per transfer", "rows_inserted_per_transfer", "{:.2f}", None),
        ("rows updated per transfer", "rows_updated_per_transfer", "{:.2f}", None),
        ("  of which HOT", "hot_updates_per_transfer", "{:.2f}", None),
    ]


def ratio_table(rows, figures, kinds, headings, value=lambda f, key: f.get(key)):
    """Prints, in Markdown, each of ROWS ((label, key, format, target or
    None)) with the figure of both KINDS (keys of FIGURES; "-" where one
    does not give it, the row left out where neither does), the ratio of
    the second to the first and the target on it; HEADINGS are the two
    columns'. VALUE reads a figure by its key. Returns the table's records
    and the targets as (target, measured, met)."""
    first, second = kinds
    print(f"| figure (medians) | {headings[0]} | {headings[1]} | {second} / {first} | target |")
    print("|---|---:|---:|---:|---|")
    table, targets = [], []
    for label, key, fmt, target in rows:
        a, b = value(figures[first], key), value(figures[second], key)
        if a is None and b is None:
            continue
        ratio = b / a if a and b is not None else None
        cell = "" if target is None else f"{target[0]} {target[1]}×"
        if target is not None and ratio is not None:
            ok = ratio >= target[1] if target[0] == ">=" else ratio <= target[1]
            targets.append((f"{label.strip()}: {second} / {first} {cell}", f"{ratio:.2f}×", ok))
        table.append({"figure": label.strip(), first: a, second: b, "ratio": ratio})
        shown = ["-" if v is None else fmt.format(v) for v in (a, b)]
        print(f"| {label} | {shown[0]} | {shown[1]} | {'-' if ratio is None else f'{ratio:.2f}×'} | {cell} |")
    return table, targets


def print_targets(targets):
    """One line per (target, measured, met)."""
    for target, measured, ok in targets:
        print(f"  [{'met' if ok else 'MISSED'}] {target}: {measured}")


def pyplot():
    """matplotlib.pyplot drawing to files, or None (and a line that says
    so) without python3-matplotlib."""
    try:
        import matplotlib
        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        print("no python3-matplotlib: no throughput.png")
        return None
    return plt


def plot_seconds(ax, run, style, label, field="per_second"):
    """RUN's per-second series FIELD over its measured seconds (without the
    drain after the deadline)."""
    values = run[field][:int(run["duration_s"])]
    ax.plot(range(1, len(values) + 1), values, style, label=label)


def finish_axes(ax, xlabel, legend_loc):
    ax.set_xlabel(xlabel)
    ax.grid(True, alpha=0.3)
    ax.legend(loc=legend_loc, fontsize="small")


def save_plot(fig, results):
    fig.savefig(f"{results}/throughput.png", dpi=100, bbox_inches="tight")
    print(f"plot: {results}/throughput.png")


def write_counts(path):
    """A write_counts file (scripts/lib/bench.sh): {"wal": bytes, "dbs":
    {name: {"bytes", "inserted", "updated", "deleted", "hot"}}}; None when
    it is missing."""
    try:
        lines = read_text(path).splitlines()
    except OSError:
        return None
    out = {"wal": 0, "dbs": {}}
    for line in lines:
        f = line.split()
        if f and f[0] == "wal":
            out["wal"] = int(f[1])
        elif f and f[0] == "db":
            out["dbs"][f[1]] = dict(zip(("bytes", "inserted", "updated", "deleted", "hot"), map(int, f[2:7])))
    return out


def writes_per_unit(results, name, units):
    """Per unit (a completed transfer) between NAME.writes-start and
    NAME.writes: WAL bytes, database bytes (every database's growth) and
    rows inserted, updated (HOT among them) and deleted, summed over the
    databases; {} without both files or units."""
    start, end = write_counts(f"{results}/{name}.writes-start"), write_counts(f"{results}/{name}.writes")
    if not start or not end or not units:
        return {}
    total = {k: sum(d[k] - start["dbs"].get(db, {}).get(k, 0) for db, d in end["dbs"].items())
             for k in ("bytes", "inserted", "updated", "deleted", "hot")}
    return {"wal_bytes_per_transfer": round((end["wal"] - start["wal"]) / units),
            "db_bytes_per_transfer": round(total["bytes"] / units),
            "rows_inserted_per_transfer": round(total["inserted"] / units, 2),
            "rows_updated_per_transfer": round(total["updated"] / units, 2),
            "hot_updates_per_transfer": round(total["hot"] / units, 2),
            "rows_deleted_per_transfer": round(total["deleted"] / units, 2)}


class Postgres:
    """psql on one server: SQL files with variables, and queries' rows as text fields."""

    def __init__(self, host, port, user):
        self.base = ["psql", "-h", host, "-p", str(port), "-U", user, "-X", "-q", "-v", "ON_ERROR_STOP=1"]

    def run_file(self, db, path, variables):
        args = [*self.base, "-d", db, "-f", path]
        for name, value in variables.items():
            args += ["-v", f"{name}={value}"]
        subprocess.run(args, check=True, stdout=subprocess.DEVNULL)

    def query(self, db, sql):
        """The rows of SQL as lists of text fields."""
        out = subprocess.run([*self.base, "-d", db, "-At", "-F", "\t", "-c", sql], check=True, capture_output=True,
                             text=True).stdout
        return [line.split("\t") for line in out.splitlines()]

    def scalar(self, db, sql):
        return self.query(db, sql)[0][0]
