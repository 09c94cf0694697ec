#!/usr/bin/python3
"""Checks that each folder includes only what its README allows.

Two rules, over every tracked .cpp and .hpp file:

1. Top level: common/ includes only common/; each service (account_shard,
   orchestrator, relay, gateway) and bench/ include only themselves and
   common/; tests/ may include anything.

2. The README's line: the nearest README.md (in the file's folder, else in
   its parent, and so on up) says what the file may include, in the
   paragraph that begins "May include:". Every backquoted path in that
   paragraph that ends in "/" allows that folder and every folder under it:

       May include: `account_shard/ledger/`, `common/pg/`, `common/time/`.

   (`common/` would allow every folder under common/.) Anything else in the
   paragraph is prose, including backquoted names without the final "/"
   (`common/contract`); so a folder named there as forbidden is written
   without backquotes. A file may always include files of its own folder:
   "May include: only its own folder." allows nothing more. "May include
   anything" (tests/) allows everything. A README without either line is
   reported.

Only quoted includes ("x/y/z.hpp") under a top-level folder of the
repository are checked; <...> includes are libraries. Exits 1 and names
every include that crosses a line, once (the top-level rule's wording when
both rules refuse it).

--exact also reports, for each README, the folders its line allows that no
file under it includes and those that do not exist: a README that allows
more than its folder uses today. scripts/test does not run it.
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
INCLUDE = re.compile(r'^\s*#\s*include\s+"([^"]+)"')
MAY_INCLUDE = re.compile(r"^\s*May include(:| anything\b)")
FOLDER = re.compile(r"`([^`\s]+/)`")
ANYTHING = None  # a README's rule that allows every include


def folder_of(path: str) -> str:
    return path.rsplit("/", 1)[0] if "/" in path else ""


def read_rule(readme: pathlib.Path):
    """The folders a README's "May include:" paragraph allows (each ending
    in "/"), ANYTHING for "May include anything", or a string: what is wrong."""
    lines = readme.read_text().splitlines()
    for i, line in enumerate(lines):
        m = MAY_INCLUDE.match(line)
        if not m:
            continue
        if m.group(1) != ":":
            return ANYTHING
        paragraph = [line[m.start(1):]]
        for more in lines[i + 1:]:
            if not more.strip():
                break
            paragraph.append(more)
        return sorted(set(FOLDER.findall("\n".join(paragraph))))
    return 'no "May include:" line'


class Readmes:
    """The nearest README.md of each folder, and its rule, read once."""

    def __init__(self, root: pathlib.Path):
        self.root = root
        self.nearest: dict[str, str | None] = {}
        self.rules: dict[str, object] = {}

    def readme_of(self, folder: str) -> str | None:
        if folder not in self.nearest:
            candidate = f"{folder}/README.md" if folder else "README.md"
            if (self.root / candidate).is_file():
                self.nearest[folder] = candidate
            else:
                self.nearest[folder] = self.readme_of(folder_of(folder)) if folder else None
        return self.nearest[folder]

    def rule(self, readme: str):
        if readme not in self.rules:
            self.rules[readme] = read_rule(self.root / readme)
        return self.rules[readme]


def allows(rule: list[str], own: str, included: str) -> bool:
    return included == own or any((included + "/").startswith(entry) for entry in rule)


def check(root: pathlib.Path, files: list[str], exact: bool) -> tuple[list[str], list[str]]:
    """The includes across a line, and the READMEs' problems."""
    tops = {name.split("/", 1)[0] for name in files if "/" in name}
    readmes = Readmes(root)
    crossings, problems = [], []
    used: dict[str, set[str]] = {}  # README -> the folders its files include
    for name in files:
        top = name.split("/", 1)[0]
        own = folder_of(name)
        readme = readmes.readme_of(own)
        rule = readmes.rule(readme) if readme else "no README.md above it"
        if isinstance(rule, str):
            problem = f"{readme or name}: {rule}"
            if problem not in problems:
                problems.append(problem)
            continue
        for number, line in enumerate((root / name).read_text().splitlines(), 1):
            m = INCLUDE.match(line)
            if not m:
                continue
            included = folder_of(m.group(1)) or own  # "x.hpp": beside the file
            inc_top = included.split("/", 1)[0]
            if inc_top not in tops:
                continue
            used.setdefault(readme, set()).add(included)
            if top in ALLOWED and inc_top in ALLOWED and inc_top not in ALLOWED[top]:
                crossings.append(f"{name}:{number}: {top}/ may not include {inc_top}/")
            elif rule is not ANYTHING and not allows(rule, own, included):
                crossings.append(f"{name}:{number}: {own}/ may not include {included}/ ({readme})")
    if exact:
        for readme, rule in sorted(readmes.rules.items()):
            if isinstance(rule, str) or rule is ANYTHING:
                continue
            for entry in rule:
                if not (root / entry).is_dir():
                    problems.append(f"{readme}: allows `{entry}`, which does not exist")
                elif not any((f + "/").startswith(entry) for f in used.get(readme, ())):
                    problems.append(f"{readme}: allows `{entry}`, which none of its files includes")
    return crossings, problems


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--root", default=".", help="the repository (default: here)")
    parser.add_argument("--exact", action="store_true",
                        help="also report what a README allows but its files do not include")
    args = parser.parse_args()
    root = pathlib.Path(args.root)
    files = subprocess.run(["git", "-C", str(root), "ls-files", "*.cpp", "*.hpp"], check=True, capture_output=True,
                           text=True).stdout.split()
    bad, problems = check(root, files, args.exact)
    for line in problems + bad:
        print(line)
    print(f"layers: {len(files)} files, {len(bad)} includes across a line")
    return 1 if bad or problems else 0


if __name__ == "__main__":
    sys.exit(main())
