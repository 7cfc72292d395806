#!/usr/bin/env python3
"""Prints two runs' figures side by side as a table: side-by-side.py BEFORE_FIGURES NOW_FIGURES BEFORE_NAME. Each file
holds "name<TAB>value<TAB>unit" lines (scripts/bench-figures.sh, bench-service/figures.py); a figure either run lacks
shows as a dash."""
import os
import sys


def read(path):
    figures = {}
    if os.path.exists(path):
        for line in open(path):
            name, value, unit = line.rstrip("\n").split("\t")
            figures[name] = (float(value), unit)
    return figures


def show(f, unit):
    if f is None:
        return "—"
    v = f[0]
    return (f"{v:,.0f}" if abs(v) >= 100 else f"{v:.2f}") + (f" {unit}" if unit else "")


before, now = read(sys.argv[1]), read(sys.argv[2])
print(f"| {os.path.basename(sys.argv[3])} → now, {os.cpu_count()} cores | before | now | now ÷ before |")
print("|---|---:|---:|---:|")
for name in dict.fromkeys([*before, *now]):
    b, n = before.get(name), now.get(name)
    unit = (n or b)[1]
    ratio = f"{n[0] / b[0]:.2f}" if b and n and b[0] else ""
    print(f"| {name} | {show(b, unit)} | {show(n, unit)} | {ratio} |")
