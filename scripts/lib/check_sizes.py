#!/usr/bin/python3
"""Checks that every part outside tests/ fits in one's head.

A source file (*.cpp, *.hpp) is at most 400 lines and a function at most 80,
from its first line to its closing brace; a lambda counts as part of the
function it is written in. Functions are found by universal-ctags. Exits 1
and names every file and function over its limit.
"""
import pathlib
import shutil
import subprocess
import sys

from cpp_sources import check_main

MAX_FILE_LINES = 400
MAX_FUNCTION_LINES = 80


def functions(root: pathlib.Path, name: str) -> list[tuple[str, int, int]]:
    """(name, first line, last line) of each function defined in the file."""
    ctags = shutil.which("ctags-universal") or "ctags"  # Debian's name, when another ctags is "ctags"
    tags = subprocess.run([ctags, "--kinds-c++=f", "--fields=+ne", "--sort=no", "-o", "-", name], cwd=root,
                          check=True, capture_output=True, text=True).stdout
    out = []
    for tag in tags.splitlines():
        fields = tag.split("\t")
        extra = dict(f.split(":", 1) for f in fields[3:] if ":" in f)
        if fields[0].startswith("__anon") or "line" not in extra or "end" not in extra:
            continue  # a lambda: its lines are its function's
        scope = extra.get("class") or extra.get("struct")
        function = f"{scope.rsplit('::', 1)[-1]}::{fields[0]}" if scope else fields[0]
        out.append((function, int(extra["line"]), int(extra["end"])))
    return out


def offenders(root: pathlib.Path, files: list[str]) -> list[str]:
    out = []
    for name in files:
        lines = len((root / name).read_text().splitlines())
        if lines > MAX_FILE_LINES:
            out.append(f"{name}: {lines} lines (at most {MAX_FILE_LINES})")
        for function, first, last in functions(root, name):
            length = last - first + 1
            if length > MAX_FUNCTION_LINES:
                out.append(f"{name}:{first}: function {function} is {length} lines (at most {MAX_FUNCTION_LINES})")
    return out


def check(root: pathlib.Path, files: list[str]) -> tuple[list[str], str]:
    files = [f for f in files if not f.startswith("tests/")]
    bad = offenders(root, files)
    return bad, (f"sizes: {len(files)} files outside tests/, {len(bad)} over {MAX_FILE_LINES} lines a file "
                 f"or {MAX_FUNCTION_LINES} a function")


if __name__ == "__main__":
    sys.exit(check_main(__doc__, check))
