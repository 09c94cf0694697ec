#!/usr/bin/python3
"""Checks that the services read a statement's rows by column name.

In account_shard/, orchestrator/ and relay/ every result is read through an
enum naming its columns in select order (common/pg/rows.hpp): a read such
as r.text(i, 3) or r.int64(0, 0) names its column by position. Exits 1 and
names every such read.
"""
import argparse
import pathlib
import re
import subprocess
import sys

FOLDERS = ["account_shard", "orchestrator", "relay"]
POSITIONAL = re.compile(r"\.(text|int64|boolean|opt_int64|is_null)\([^,()]+, *[0-9a-z_]+\)")


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--root", default=".", help="the repository (default: here)")
    args = parser.parse_args()
    root = pathlib.Path(args.root)
    patterns = [f"{folder}/*.{ext}" for folder in FOLDERS for ext in ("cpp", "hpp")]
    files = subprocess.run(["git", "-C", str(root), "ls-files", *patterns], check=True, capture_output=True,
                           text=True).stdout.split()
    bad = [f"{name}:{number}: {line.strip()}" for name in files
           for number, line in enumerate((root / name).read_text().splitlines(), 1) if POSITIONAL.search(line)]
    for line in bad:
        print(line)
    print(f"rows: {len(files)} files, {len(bad)} reads by column position")
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
