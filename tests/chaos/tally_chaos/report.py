"""The summary and the picture: throughput and the total balance over time,
with every fault marked."""
import json
import re
import statistics
from collections import Counter

# What a PostgreSQL server logs when it fails on its own, as no fault of the
# run makes it fail: a process of its own (or an orphan it took for one, see
# compose.yaml) that ended abnormally, a full disk, no memory.
SERVER_INCIDENT = re.compile(r"PANIC|terminated by signal|server process \(PID \d+\) exited with exit code"
                             r"|No space left on device|out of memory|could not (write|fsync|extend)")


def outcome_of(op):
    if op.get("conflict"):
        return "conflict"
    if op.get("rejected"):
        return f"rejected {op['rejected']}"
    if op.get("unknown"):
        return "unknown"
    return op.get("final_state") or op.get("stored_state") or op.get("acked_state") or "pending"


# Requests that write value: their completion needs a shard's commit and the
# saga store's (a replay may be answered from what an instance holds).
WRITES = ("credit", "deduct", "transfer", "batch")


GAP_WINDOW_S = 60  # after a fault, where its longest stretch without a completed write is sought


def recovery_times(history, faults, kinds):
    """Per fault of `kinds`: seconds from the fault to the end of the first
    write begun after it that the API acknowledged completed (None when
    none came), and the longest stretch without any completed write in the
    GAP_WINDOW_S after the fault (the fault's own start counts as one end).
    The first understates a switchover, whose writes go on until the old
    primary drains; the second is its refused writes."""
    done = sorted((op["t0"], op["t1"]) for op in history
                  if op["kind"] in WRITES and op.get("acked_state") == "completed" and not op.get("replayed")
                  and "t1" in op)
    all_ends = sorted(t1 for _, t1 in done)
    out = []
    for e in faults:
        if e["kind"] in kinds:
            ends = [t1 for t0, t1 in done if t0 >= e["t"]]
            out.append({"kind": e["kind"], "t": e["t"], "recovery_s": min(ends) - e["t"] if ends else None,
                        "gap_s": longest_gap(all_ends, e["t"])})
    return out


def longest_gap(ends, t):
    """The longest stretch between completions in [t, t + GAP_WINDOW_S];
    when none falls there, up to the first one after it (None if none)."""
    inside = [t] + [x for x in ends if t < x <= t + GAP_WINDOW_S]
    if len(inside) == 1:
        later = [x for x in ends if x > t]
        return later[0] - t if later else None
    return max(b - a for a, b in zip(inside, inside[1:]))


def recovery_lines(recoveries):
    lines = []
    for kind in sorted({r["kind"] for r in recoveries}):
        times = sorted(r["recovery_s"] for r in recoveries if r["kind"] == kind and r["recovery_s"] is not None)
        missing = sum(1 for r in recoveries if r["kind"] == kind and r["recovery_s"] is None)
        gaps = sorted(r["gap_s"] for r in recoveries if r["kind"] == kind and r.get("gap_s") is not None)
        if times:
            lines.append(f"  {kind:24s} {len(times):3d}: median {statistics.median(times):.1f} s, worst {times[-1]:.1f} s"
                         + (f"; longest stretch without a completed write: median {statistics.median(gaps):.1f} s, "
                            f"worst {gaps[-1]:.1f} s" if gaps else "")
                         + (f"; {missing} with no write after them" if missing else ""))
        else:
            lines.append(f"  {kind:24s} {missing:3d}: no write after them")
    return (["recovery, fault to the first completed write begun after it:"] + lines) if lines else []


def summary(history, faults, violations, quiesce_s, seed, duration_s, restarts, crashes, expire_entries,
            recoveries=()):
    by = Counter((op["kind"], outcome_of(op)) for op in history)  # the stored end where the client saw none
    kinds = sorted({k for k, _ in by})
    lines = [f"== chaos summary (seed {seed}, {duration_s:.0f} s of faults)", "operations by kind and outcome:"]
    for k in kinds:
        parts = ", ".join(f"{o} {n}" for (kk, o), n in sorted(by.items()) if kk == k)
        lines.append(f"  {k:10s} {sum(n for (kk, _), n in by.items() if kk == k):6d}  ({parts})")
    lines.append(f"  {'all':10s} {len(history):6d}")
    counts = Counter(e["kind"] for e in faults)
    lines.append(f"faults: {len(faults)} ({', '.join(f'{k} {n}' for k, n in sorted(counts.items()))}); "
                 f"restarted by the run's supervisor: {restarts}")
    lines.append(f"failpoint crashes in the shards' logs: {sum(crashes.values())}"
                 f" ({', '.join(f'{k} {n}' for k, n in sorted(crashes.items()))})")
    by_shard = Counter()
    for e in expire_entries:
        by_shard[e["shard"]] += e["entries"]
    lines.append(f"expire entries: {sum(by_shard.values())}"
                 f" ({', '.join(f'shard {k} {n}' for k, n in sorted(by_shard.items()))}), of held parts"
                 f" {sum(e['entries'] for e in expire_entries if e['biz_id'].startswith('hold:'))};"
                 f" value expired {-sum(e['delta'] for e in expire_entries)}")
    lines += recovery_lines(recoveries)
    lines.append(f"time to quiesce: {quiesce_s:.1f} s")
    lines.append(f"violations: {len(violations)}")
    for v in violations[:20]:
        lines.append(f"  {v}")
    if violations:
        lines.append(f"first violating key: {violations[0].key} ({violations[0].promise}); seed {seed}")
    return "\n".join(lines)


def failpoint_crashes(lines):
    """How often each failpoint crashed a shard: the log line a crash writes
    last ({"msg": "failpoint crash", "failpoint": name, ...}). An armed
    failpoint fires only if its shard gets there before another fault."""
    out = Counter()
    for line in lines:
        if '"failpoint crash"' in line:
            try:
                out[json.loads(line)["failpoint"]] += 1
            except (ValueError, KeyError):
                continue
    return out


def server_incidents(lines, limit=20):
    """The lines of a PostgreSQL log that show it failing by itself, at most
    `limit` of them (the first ones: the cause comes before the echoes)."""
    return [line.rstrip("\n") for line in lines if SERVER_INCIDENT.search(line)][:limit]


def write_json(path, **parts):
    with open(path, "w") as f:
        json.dump(parts, f, indent=1, default=lambda o: o.as_dict() if hasattr(o, "as_dict") else str(o))


def plot(path, history, faults, samples, t0, title):
    try:
        import matplotlib
        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        return False
    end = max([op["t1"] for op in history] + [s["t"] for s in samples] + [t0 + 1])
    seconds = int(end - t0) + 1
    done = [0] * seconds
    unsure = [0] * seconds
    for op in history:
        i = int(op["t1"] - t0)
        if 0 <= i < seconds:
            (unsure if op.get("unknown") or op.get("rejected") else done)[i] += 1
    fig, (top, bottom, timeline) = plt.subplots(3, 1, figsize=(12, 8), sharex=True,
                                                gridspec_kw={"height_ratios": [3, 3, 2]})
    top.plot(range(seconds), done, lw=1, label="answered ops/s")
    top.plot(range(seconds), unsure, lw=1, color="tab:red", label="unknown or rejected ops/s")
    top.set_ylabel("operations / s")
    top.set_title(title)
    top.legend(loc="upper right", fontsize=8)
    ts = [s["t"] - t0 for s in samples if s["total"] is not None]
    bottom.plot(ts, [s["total"] for s in samples if s["total"] is not None], lw=1, label="Σ balance")
    bottom.plot(ts, [s["held"] for s in samples if s["total"] is not None], lw=1, label="Σ held")
    bottom.set_ylabel("units")
    bottom.legend(loc="lower right", fontsize=8)
    # Every fault on its kind's row, and as a faint line across the plots above.
    kinds = sorted({e["kind"] for e in faults})
    palette = plt.get_cmap("Dark2")
    for row, kind in enumerate(kinds):
        at = [e["t"] - t0 for e in faults if e["kind"] == kind]
        timeline.scatter(at, [row] * len(at), marker="|", s=120, color=palette(row % 8))
        for x in at:
            for ax in (top, bottom):
                ax.axvline(x, color=palette(row % 8), lw=0.6, alpha=0.25 if len(faults) < 100 else 0.08)
    timeline.set_yticks(range(len(kinds)), kinds, fontsize=8)
    timeline.set_ylim(-0.5, len(kinds) - 0.5)
    timeline.set_xlabel("seconds")
    timeline.set_title(f"{len(faults)} faults", fontsize=9)
    fig.savefig(path, dpi=90, bbox_inches="tight")
    plt.close(fig)
    return True
