#!/usr/bin/python3
"""Checks that each top-level folder includes only what its README allows.

common/ includes only common/; each service (account_shard, orchestrator,
relay, gateway) and bench/ include only themselves and common/; tests/
may include anything. Exits 1 and names every include that crosses a line.
"""
import argparse
import pathlib
import re
import subprocess
import sys

ALLOWED = {
    "common": {"common"},
    "account_shard": {"account_shard", "common"},
    "orchestrator": {"orchestrator", "common"},
    "relay": {"relay", "common"},
    "gateway": {"gateway", "common"},
    "bench": {"bench", "common"},
}
INCLUDE = re.compile(r'^\s*#\s*include\s+"([A-Za-z_]+)/')


def crossings(root: pathlib.Path, files: list[str]) -> list[str]:
    out = []
    for name in files:
        top = name.split("/", 1)[0]
        allowed = ALLOWED.get(top)
        if allowed is None:
            continue
        for number, line in enumerate((root / name).read_text().splitlines(), 1):
            m = INCLUDE.match(line)
            if m and m.group(1) in ALLOWED and m.group(1) not in allowed:
                out.append(f"{name}:{number}: {top}/ may not include {m.group(1)}/")
    return out


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--root", default=".", help="the repository (default: here)")
    args = parser.parse_args()
    root = pathlib.Path(args.root)
    files = subprocess.run(["git", "-C", str(root), "ls-files", "*.cpp", "*.hpp"], check=True, capture_output=True,
                           text=True).stdout.split()
    bad = crossings(root, files)
    for line in bad:
        print(line)
    print(f"layers: {len(files)} files, {len(bad)} includes across a line")
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
