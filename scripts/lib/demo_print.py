#!/usr/bin/python3
"""Prints an answer of Tally's public API as the lines scripts/run shows.

    curl -s .../v1/accounts/alice/entries | demo_print.py entries
    curl -s .../v1/accounts/dave/lots?state=all | demo_print.py lots
    curl -s .../v1/admin/sagas/SAGA_ID | demo_print.py history

Reads the JSON answer on stdin: an account's ledger entries (a line per
entry), its lots (a line per lot), or a saga's operator view (the saga, then
a line per step attempt of its history).
"""
import argparse
import json
import sys


def entries(answer):
    for e in answer["entries"]:
        print("  #%-3d %-14s %-12s %+6d -> %d" % (e["seq"], e["biz_type"], e["biz_id"], e["delta"], e["balance_after"]))


def lots(answer):
    for lot in answer["lots"]:
        print("  lot %d: granted %d, remaining %d, expires %s, %s" % (lot["lot_id"], lot["granted"], lot["remaining"],
              lot["expires_at"] or "never", lot["state"]))


def history(saga):
    print("  %s %s %s" % (saga["saga_id"], saga["type"], saga["state"]))
    for a in saga["history"]:
        print("  %s %-20s attempt %d on %s: %s" % (a["sent_at"], a["step"], a["attempt"], a["shard"], a["outcome"]))


def main():
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("answer", choices=("entries", "lots", "history"), help="what the answer on stdin is")
    args = parser.parse_args()
    {"entries": entries, "lots": lots, "history": history}[args.answer](json.load(sys.stdin))


if __name__ == "__main__":
    main()
