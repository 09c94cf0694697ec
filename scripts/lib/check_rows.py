#!/usr/bin/python3
"""Checks that the services read a statement's rows by column name.

In account_shard/, orchestrator/ and relay/ every result is read through an
enum naming its columns in select order (common/pg/rows.hpp): a read such
as r.text(i, 3) or r.int64(0, 0) names its column by position. Exits 1 and
names every such read.
"""
import pathlib
import re
import sys

from cpp_sources import check_main

FOLDERS = {"account_shard", "orchestrator", "relay"}
POSITIONAL = re.compile(r"\.(text|int64|boolean|opt_int64|is_null)\([^,()]+, *[0-9a-z_]+\)")


def check(root: pathlib.Path, files: list[str]) -> tuple[list[str], str]:
    mine = [name for name in files if name.split("/", 1)[0] in FOLDERS]
    bad = [f"{name}:{number}: {line.strip()}" for name in mine
           for number, line in enumerate((root / name).read_text().splitlines(), 1) if POSITIONAL.search(line)]
    return bad, f"rows: {len(mine)} files, {len(bad)} reads by column position"


if __name__ == "__main__":
    sys.exit(check_main(__doc__, check))
