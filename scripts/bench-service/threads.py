#!/usr/bin/env python3
"""CPU time of a process's threads by name, from /proc (Linux).

  threads.py snapshot PID > FILE          each thread's name and CPU ticks (user + system), one a line
  threads.py split BEFORE AFTER EVENTS    the CPU each of the service's threads spent an event between the two
                                          snapshots, in microseconds, and the events a second that thread alone
                                          could carry at one full core

The service names its own threads (Sources/BeckonStore/NamedThread.swift): beckon-engine runs the engine,
beckon-commit writes each group to SQLite, beckon-walfold folds the write-ahead log into the database file. Every
other thread (SwiftNIO's event loops, the concurrency pool, Dispatch) is counted as "requests": HTTP, decoding,
answering.
"""
import os
import sys

OWN = ("beckon-engine", "beckon-commit", "beckon-walfold")


def stat(path):
    """A `/proc/…/stat` file's name and its fields after the name, from the state on (field 3 is `fields[0]`):
    the name is in parentheses and may hold spaces. Raises OSError when the process or thread has ended."""
    with open(path) as f:
        text = f.read()
    return text[text.index("(") + 1:text.rindex(")")], text[text.rindex(")") + 2:].split()


def cpu_ticks(fields, ended=False):
    """User and system ticks (fields 14 and 15); with `ended`, those of the children waited for too (16 and 17)."""
    return int(fields[11]) + int(fields[12]) + (int(fields[13]) + int(fields[14]) if ended else 0)


def snapshot(pid):
    for tid in os.listdir(f"/proc/{pid}/task"):
        try:
            name, fields = stat(f"/proc/{pid}/task/{tid}/stat")
        except OSError:
            continue  # the thread ended
        print(f"{tid}\t{name}\t{cpu_ticks(fields)}")


def load(path):
    with open(path) as f:
        return {tid: (name, int(ticks)) for tid, name, ticks in (line.rstrip("\n").split("\t") for line in f)}


def split(before, after, events):
    hz = os.sysconf("SC_CLK_TCK")
    a, b = load(before), load(after)
    spent = {}
    for tid, (name, ticks) in b.items():
        role = name if name in OWN else "requests"
        spent[role] = spent.get(role, 0) + ticks - a.get(tid, (name, 0))[1]
    total = sum(spent.values())
    parts = []
    for role in (*OWN, "requests"):
        if role not in spent:
            parts.append(f"{role} -")  # no thread of that name (a build from before they were named)
            continue
        us = spent[role] / hz * 1e6 / events
        alone = f", {1e6 / us:,.0f}/s alone" if us > 0 and role != "requests" else ""
        parts.append(f"{role} {us:.2f}{alone}")
    print(f"{'; '.join(parts)}; all {total / hz * 1e6 / events:.2f}")


if __name__ == "__main__":
    if sys.argv[1] == "snapshot":
        snapshot(sys.argv[2])
    else:
        split(sys.argv[2], sys.argv[3], float(sys.argv[4]))
