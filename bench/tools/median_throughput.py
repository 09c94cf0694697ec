#!/usr/bin/python3
"""Prints the median throughput, rounded, of some of the runs in a runs.jsonl.

    median_throughput.py --runs RESULTS/runs.jsonl --where mode=group --where workload=uniform

The bench scripts offer half of it in their open-loop runs. A run is counted
when each --where FIELD=VALUE holds for its record (a string field; a record
without FIELD does not match).
"""
import argparse

import common


def median_throughput(runs, where):
    """The median throughput, rounded, of the RUNS whose fields have the
    values in WHERE (a dict); a field a run lacks matches nothing."""
    return round(common.median([r for r in runs if all(r.get(k) == v for k, v in where.items())], "throughput"))


def field_value(text):
    field, sep, value = text.partition("=")
    if not sep:
        raise argparse.ArgumentTypeError(f"not FIELD=VALUE: {text}")
    return field, value


def main():
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--runs", required=True, help="a runs.jsonl file, a record per run (run_figures.py)")
    parser.add_argument("--where", type=field_value, action="append", default=[], metavar="FIELD=VALUE",
                        help="count only the runs whose FIELD is VALUE (repeatable)")
    args = parser.parse_args()
    print(median_throughput(common.read_json_lines(args.runs), dict(args.where)))


if __name__ == "__main__":
    main()
