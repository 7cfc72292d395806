#!/usr/bin/env python3
"""Broadcast benchmark of `beckon serve` (docs/time.md, "Schedules"), on loopback, bounded in time:

For each size (10,000 and 100,000 users by default):
1. a service under rules with no schedule stores the users (identify calls, a third of them on plan "pro"), and
   stops;
2. a fresh service starts under the same rules plus a one-off schedule (`if: plan != "pro"`) far enough ahead, and
   the users send nothing more. Measured: how long the service takes to reach every stored user (from its start to
   `reach_progress.done`), how long from the run's time until every chosen user's action is stored, and the service's
   peak resident memory (VmHWM) once every user is reached and after the run.

Usage: python3 scripts/bench-broadcast/broadcast.py BECKON [SIZE...]."""
import base64
import calendar
import http.client
import json
import os
import sqlite3
import subprocess
import sys
import tempfile
import time

BECKON = sys.argv[1]
SIZES = [int(a) for a in sys.argv[2:]] or [10_000, 100_000]
KEY = "bench-key"
BASIC = "Basic " + base64.b64encode(f"{KEY}:".encode()).decode()
BASE = ("version: 1\ncampaign: app\nrules:\n  - id: hello\n    on: Opened\n    do:\n"
        "      - message: { surface: home, title: Hello }\n")


def digest(at):
    return ("version: 1\ncampaign: digest\nrules:\n  - id: news\n    schedule: " + at + "\n"
            "    if: default(user.plan, \"\") != \"pro\"\n    do:\n      - message: { surface: home, title: News }\n")


class Server:
    def __init__(self, rules, db):
        self.proc = subprocess.Popen(
            [BECKON, "serve", rules, "--db", db, "--port", "0", "--write-key", KEY, "--clock", "wall"],
            stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True, env={**os.environ, "LOG_LEVEL": "error"})
        line = ""
        while "listening on http://" not in line:
            line = self.proc.stdout.readline()
            if not line:
                raise RuntimeError("beckon serve did not start")
        self.port = int(line.split("listening on http://")[1].split()[0].rsplit(":", 1)[1])

    def post(self, path, body):
        c = http.client.HTTPConnection("127.0.0.1", self.port, timeout=120)
        c.request("POST", path, json.dumps(body), {"Authorization": BASIC, "Content-Type": "application/json"})
        r = c.getresponse()
        r.read()
        c.close()
        assert r.status == 200, r.status

    def metric(self, name):
        c = http.client.HTTPConnection("127.0.0.1", self.port, timeout=60)
        c.request("GET", "/metrics")
        text = c.getresponse().read().decode()
        c.close()
        return sum(float(line.rsplit(" ", 1)[1]) for line in text.splitlines() if line.startswith(name + " "))

    def peak_mb(self, field="VmHWM"):
        with open(f"/proc/{self.proc.pid}/status") as f:
            for line in f:
                if line.startswith(field + ":"):
                    return int(line.split()[1]) / 1024
        return 0

    def stop(self):
        self.proc.terminate()
        self.proc.wait(timeout=120)


def query(db, sql):
    c = sqlite3.connect(f"file:{db}?mode=ro", uri=True, timeout=30)
    try:
        return c.execute(sql).fetchone()
    except sqlite3.OperationalError:
        return None
    finally:
        c.close()


def run(size):
    with tempfile.TemporaryDirectory() as tmp:
        rules, db = f"{tmp}/rules", f"{tmp}/db.sqlite"
        os.makedirs(rules)
        with open(f"{rules}/app.yaml", "w") as f:
            f.write(BASE)
        s = Server(rules, db)
        for start in range(0, size, 500):
            s.post("/v1/batch", {"batch": [
                {"type": "identify", "userId": f"user-{i:07}", "messageId": f"id-{i}",
                 "traits": {"plan": "pro" if i % 3 == 0 else "free", "email": f"user-{i}@example.com"}}
                for i in range(start, min(size, start + 500))]})
        s.stop()
        chosen = sum(1 for i in range(size) if i % 3 != 0)
        lead = 15 + size // 2000
        at = time.time() + lead
        at_text = time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime(at))
        at = calendar.timegm(time.strptime(at_text, "%Y-%m-%dT%H:%M:%SZ"))
        with open(f"{rules}/digest.yaml", "w") as f:
            f.write(digest(at_text))
        started = time.time()
        s = Server(rules, db)
        reached = None
        deadline = at + 300
        while time.time() < deadline:
            if reached is None and (query(db, "SELECT done FROM reach_progress") or (0,))[0] == 1:
                reached = time.time() - started
                reach_peak = s.peak_mb()
            stored = (query(db, "SELECT count(*) FROM action_log") or (0,))[0]
            if stored >= chosen:
                break
            time.sleep(0.2)
        finished = time.time()
        peak = s.peak_mb()
        time.sleep(6)  # (a checkpoint after the run, then the users it loaded are let go)
        evicted = s.metric("beckon_users_evicted_total")
        s.stop()
        stored = query(db, "SELECT count(*) FROM action_log")[0]
        assert stored == chosen, (stored, chosen)
        assert reached is not None and reached < lead, f"the reach took {reached} s, longer than the lead"
        print(f"{size:>8,} stored users: reached all in {reached:.2f} s ({size / reached:,.0f} users/s); "
              f"{chosen:,} actions stored {finished - at:.2f} s after the run's time; peak RSS {reach_peak:.0f} MB when reached, {peak:.0f} MB after the run; "
              f"{evicted:,.0f} users let go from memory",
              flush=True)


print(f"beckon: {BECKON}; cores: {os.cpu_count()}", flush=True)
for n in SIZES:
    run(n)
