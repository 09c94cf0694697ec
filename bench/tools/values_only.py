#!/usr/bin/python3
"""Prints a bench/floor script with its writes taken out, for bench-floor's
cost of generating the values.

    values_only.py bench/floor/debit.sql >RESULTS/debit_values.sql

Reads one pgbench script of bench/floor/ (its `\\set n` line, then
statements separated by `;`) and prints it with each INSERT turned into a
count of the rows its SELECT generates, and each UPDATE into a count of the
rows of its FROM with the json values its SET computes (an INSERT's `::json`
and `::jsonb` casts are left out: parsing is the write's cost).
"""
import argparse
import re


def values_only(text):
    _, body = text.split("\\set n", 1)
    out = ["\\set n" + body.split("\n", 1)[0] + "\n"]
    for stmt in filter(None, (s.strip() for s in body.split("\n", 1)[1].split(";"))):
        if stmt.startswith("INSERT"):
            values = re.sub(r"\)::jsonb?\b", ")", stmt[stmt.index("SELECT"):])
            stmt = f"SELECT count(*) FROM ({values}) v"
        elif stmt.startswith("UPDATE"):
            sets, source = re.match(r"UPDATE \w+ \w SET (.*?)\n\s*FROM (.*)\n\s*WHERE", stmt, re.S).groups()
            values = ", ".join(re.findall(r"\w+ = (\(.*?\)::json)", sets, re.S)) or "1"
            stmt = f"SELECT count(*) FROM (SELECT {values} FROM {source}) v"
        out.append(stmt + ";\n")
    return "".join(out)


def main():
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("script", help="a pgbench script of bench/floor/")
    args = parser.parse_args()
    with open(args.script) as f:
        print(values_only(f.read()), end="")


if __name__ == "__main__":
    main()
