"""Where a run's WAL goes: pg_waldump's records between two positions,
summed per relation (each index counted apart and under its table) and per
record kind, per completed transfer.

  wal_by_relation.py --waldump FILE --relations FILE --transfers N [--json OUT]

--waldump: pg_waldump's plain output (one line per record); --relations:
lines "database oid|relfilenode|database|relation|table" (for an index, its
table; for a table, itself). Records without a relation (commits, running
transactions) are summed under "(no relation) KIND"."""
import argparse
import collections
import json
import re
import sys

RECORD = re.compile(r"rmgr: (\S+)\s+len \(rec/tot\):\s*\d+/\s*(\d+),.*?desc: (\S+)")
BLOCK = re.compile(r"blkref #0: rel \d+/(\d+)/(\d+)")


def read_relations(lines):
    """{(database oid, relfilenode): (database, relation, table)}"""
    out = {}
    for line in lines:
        parts = line.rstrip("\n").split("|")
        if len(parts) == 5:
            out[(parts[0], parts[1])] = (parts[2], parts[3], parts[4])
    return out


def wal_by_relation(waldump_lines, relations, transfers):
    """Per relation, per table (its indexes in it) and per record kind: bytes
    and records per transfer, largest first; and the total."""
    by_relation = collections.Counter()
    records = collections.Counter()
    by_table = collections.Counter()
    by_kind = collections.Counter()
    total = 0
    for line in waldump_lines:
        m = RECORD.search(line)
        if not m:
            continue
        size = int(m.group(2))
        total += size
        by_kind[f"{m.group(1)}/{m.group(3)}"] += size
        b = BLOCK.search(line)
        if b and (b.group(1), b.group(2)) in relations:
            database, relation, table = relations[(b.group(1), b.group(2))]
            key = f"{database}.{relation}"
            by_table[f"{database}.{table}"] += size
        else:
            key = f"(no relation) {m.group(1)}"
            by_table[key] += size
        by_relation[key] += size
        records[key] += 1

    def per_transfer(counter, with_records=False):
        rows = []
        for name, size in counter.most_common():
            row = {"name": name, "bytes": round(size / transfers, 1)}
            if with_records:
                row["records"] = round(records[name] / transfers, 2)
            rows.append(row)
        return rows

    return {"transfers": transfers, "bytes_per_transfer": round(total / transfers, 1),
            "by_table": per_transfer(by_table), "by_relation": per_transfer(by_relation, True),
            "by_kind": per_transfer(by_kind)}


def text(report, top=25):
    out = [f"WAL per completed transfer: {report['bytes_per_transfer']:.0f} B over {report['transfers']} transfers",
           "", "by table (its indexes included):"]
    out += [f"  {r['name']:50s} {r['bytes']:8.0f} B" for r in report["by_table"][:top]]
    out += ["", "by relation:"]
    out += [f"  {r['name']:50s} {r['bytes']:8.0f} B {r['records']:6.2f} records" for r in report["by_relation"][:top]]
    out += ["", "by record kind:"]
    out += [f"  {r['name']:50s} {r['bytes']:8.0f} B" for r in report["by_kind"][:top]]
    return "\n".join(out)


def main(argv=None):
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--waldump", required=True)
    p.add_argument("--relations", required=True)
    p.add_argument("--transfers", type=int, required=True)
    p.add_argument("--json")
    a = p.parse_args(argv)
    if a.transfers < 1:
        print("wal_by_relation: no completed transfer", file=sys.stderr)
        return 1
    with open(a.relations) as f:
        relations = read_relations(f)
    with open(a.waldump) as f:
        report = wal_by_relation(f, relations, a.transfers)
    if a.json:
        with open(a.json, "w") as f:
            json.dump(report, f, indent=2)
    print(text(report))
    return 0


if __name__ == "__main__":
    sys.exit(main())
