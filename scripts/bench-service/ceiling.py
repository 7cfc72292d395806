#!/usr/bin/env python3
"""The raw SQLite ceiling for `beckon serve`'s writes: the same rows the service wrote in a run (its input log records,
its actions, their outbox entries for destinations, its checkpoints' user states), copied from that run's database into a new one by a minimal program, in
the same transactions' shape — as many transactions as the service committed, each with its share of the input
records and their actions, and every user's state as many times as the service wrote checkpoints, evenly spread —
with the service's settings (WAL, synchronous=FULL), as fast as it goes.
Usage: ceiling.py SOURCE_DB COMMITS CHECKPOINTS. Prints events/s."""
import os
import sqlite3
import sys
import tempfile
import time

source, commits, checkpoints = sys.argv[1], int(sys.argv[2]), int(sys.argv[3])
src = sqlite3.connect(source)
inputs = src.execute("SELECT received_at, events, body FROM input_log ORDER BY seq").fetchall()
actions = src.execute("SELECT user_id, action_id, json FROM action_log ORDER BY seq").fetchall()
outbox = src.execute(
    "SELECT destination, action_id, user_id, body, next_at, created_at FROM outbox ORDER BY id").fetchall()
states = src.execute("SELECT user_id, bytes, next_due FROM user_state").fetchall()
src.close()

with tempfile.TemporaryDirectory(dir=os.path.dirname(os.path.abspath(source))) as tmp:
    db = sqlite3.connect(f"{tmp}/ceiling.sqlite", isolation_level=None)
    db.execute("PRAGMA journal_mode=WAL")
    db.execute("PRAGMA synchronous=FULL")
    db.executescript("""
        CREATE TABLE user_state (user_id TEXT PRIMARY KEY NOT NULL, bytes BLOB NOT NULL, next_due INTEGER) WITHOUT ROWID;
        CREATE TABLE stream_state (id INTEGER PRIMARY KEY CHECK (id = 1), bytes BLOB NOT NULL);
        CREATE TABLE input_log (seq INTEGER PRIMARY KEY AUTOINCREMENT, received_at INTEGER NOT NULL, events INTEGER NOT NULL, body BLOB NOT NULL);
        CREATE TABLE action_log (seq INTEGER PRIMARY KEY AUTOINCREMENT, user_id TEXT NOT NULL, action_id TEXT NOT NULL, json TEXT NOT NULL);
        CREATE INDEX action_log_user ON action_log(user_id, seq);
        CREATE UNIQUE INDEX action_log_id ON action_log(action_id);
        CREATE TABLE outbox (id INTEGER PRIMARY KEY, destination TEXT NOT NULL, action_id TEXT NOT NULL,
            user_id TEXT NOT NULL, body BLOB NOT NULL, state INTEGER NOT NULL DEFAULT 0,
            attempts INTEGER NOT NULL DEFAULT 0, next_at INTEGER NOT NULL, created_at INTEGER NOT NULL, done_at INTEGER,
            last_error TEXT);
        CREATE UNIQUE INDEX outbox_action ON outbox(destination, action_id);
        CREATE INDEX outbox_due ON outbox(next_at) WHERE state = 0;
        CREATE INDEX outbox_user ON outbox(user_id);
        CREATE TABLE checkpoint (id INTEGER PRIMARY KEY CHECK (id = 1), input_seq INTEGER NOT NULL);
    """)
    events = sum(n for _, n, _ in inputs)
    per_commit = max(1, round(len(inputs) / max(commits, 1)))
    per_checkpoint = max(1, round(len(inputs) / max(checkpoints, 1)))
    start = time.perf_counter()
    a = 0
    o = 0
    for i, (received, n, body) in enumerate(inputs):
        if i % per_commit == 0:
            db.execute("BEGIN")
        share = round(len(actions) * (i + 1) / len(inputs))
        db.execute("INSERT INTO input_log (received_at, events, body) VALUES (?, ?, ?)", (received, n, body))
        db.executemany("INSERT INTO action_log (user_id, action_id, json) VALUES (?, ?, ?)", actions[a:share])
        a = share
        out_share = round(len(outbox) * (i + 1) / len(inputs))
        db.executemany(
            "INSERT INTO outbox (destination, action_id, user_id, body, next_at, created_at) VALUES (?, ?, ?, ?, ?, ?)",
            outbox[o:out_share])
        o = out_share
        if (i + 1) % per_checkpoint == 0 or i == len(inputs) - 1:
            db.executemany("INSERT OR REPLACE INTO user_state (user_id, bytes, next_due) VALUES (?, ?, ?)", states)
            db.execute("INSERT OR REPLACE INTO stream_state (id, bytes) VALUES (1, x'00')")
            db.execute("INSERT OR REPLACE INTO checkpoint (id, input_seq) VALUES (1, ?)", (i + 1,))
        if (i + 1) % per_commit == 0 or i == len(inputs) - 1:
            db.execute("COMMIT")
    seconds = time.perf_counter() - start
    db.close()
print(f"{events / seconds:.0f}")
