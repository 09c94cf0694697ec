"""What the source checks (check_layers.py, check_sizes.py) share: the C++
files git tracks, read with --root, and the report: each offender on a line,
then a summary; exit status 1 when there is any."""
import argparse
import pathlib
import subprocess
from typing import Callable

# (the repository, its *.cpp and *.hpp) -> (the offenders, the summary line)
Check = Callable[[pathlib.Path, list[str]], tuple[list[str], str]]


def check_main(doc: str, check: Check) -> int:
    parser = argparse.ArgumentParser(description=doc, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--root", default=".", help="the repository (default: here)")
    args = parser.parse_args()
    root = pathlib.Path(args.root)
    files = subprocess.run(["git", "-C", str(root), "ls-files", "*.cpp", "*.hpp"], check=True, capture_output=True,
                           text=True).stdout.split()
    bad, summary = check(root, files)
    for line in bad:
        print(line)
    print(summary)
    return 1 if bad else 0
