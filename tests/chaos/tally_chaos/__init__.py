"""Tally's chaos run: a Jepsen-style bank workload through the gateway while
faults are injected, then a checker of every promise in DESIGN.md."""
