#!/usr/bin/env python3
"""Operations benchmark of `beckon serve` (docs/operations.md), on loopback, bounded in time (about a minute):

1. reload: 10,000 users with state (rules/bossup), then single /v1/track requests at 500 a second while the rules are
   reloaded once a second (alternating two edits of a rule's text): each reload's time, and the requests' latency
   before the reloads and during them (p50, p99, max, from the moment each was due);
2. forget: DELETE /v1/users/{id} with those users' events in the input log: the time of each of 5;
3. delivery: 50,000 events that each fire an emit for a destination on a local receiver (asyncio, answering 200):
   deliveries a second from the first post to the last delivery (the receiver shares the 2 cores);
4. memory: 200,000 events over 100,000 new users (an app open with an attribution link, then a screen, each) into a
   fresh server on rules/bossup; its resident memory (VmRSS) once it has settled after them (its last checkpoint
   written, and its free pages given back), minus before them, per user; and its heap in use (`beckon_heap_bytes`,
   which moves less with the allocator's arenas than the resident memory does).

Usage: python3 scripts/bench-service/operations.py BECKON [SECONDS]."""
import asyncio
import base64
import http.client
import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import threading
import time

from figures import figure
from receiver import receiver

BECKON = sys.argv[1]
SECONDS = int(sys.argv[2]) if len(sys.argv) > 2 else 10
ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
KEY, ADMIN = "bench-key", "bench-admin"
BASIC = "Basic " + base64.b64encode(f"{KEY}:".encode()).decode()


class Server:
    def __init__(self, rules, db, env=None):
        self.proc = subprocess.Popen(
            [BECKON, "serve", *rules, "--db", db, "--port", "0", "--write-key", KEY, "--admin-key", ADMIN],
            stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True,
            env={**os.environ, "LOG_LEVEL": "error", **(env or {})})
        line = self.proc.stdout.readline()
        self.port = int(line.split("http://")[1].split()[0].rsplit(":", 1)[1])

    def request(self, method, path, body=None, headers=None):
        c = http.client.HTTPConnection("127.0.0.1", self.port, timeout=60)
        try:
            c.request(method, path, body=json.dumps(body).encode() if body is not None else None, headers=headers or {})
            r = c.getresponse()
            return r.status, r.read()
        finally:
            c.close()

    def post(self, events):
        s, b = self.request("POST", "/v1/batch", {"batch": events}, {"Authorization": BASIC, "Content-Type": "application/json"})
        assert s == 200, (s, b)

    def stop(self):
        self.proc.terminate()
        self.proc.wait(timeout=60)


def opened(user, i):
    return {"type": "track", "event": "Application Opened", "userId": user, "messageId": f"{user}-{i}",
            "properties": {"platform": "android"}}


def pct(xs, p):
    xs = sorted(xs)
    return xs[min(len(xs) - 1, int(p * len(xs)))] if xs else float("nan")


def paced(port, rate, seconds, out):
    """Single /v1/track requests at `rate` a second for `seconds`, latency from when each was due (ms)."""
    c = http.client.HTTPConnection("127.0.0.1", port, timeout=60)
    start = time.monotonic()
    i = 0
    while True:
        due = start + i / rate
        if due > start + seconds:
            break
        now = time.monotonic()
        if due > now:
            time.sleep(due - now)
        body = json.dumps({"userId": f"p{i % 500}", "event": "Screen Viewed", "messageId": f"p-{i}"}).encode()
        c.request("POST", "/v1/track", body=body, headers={"Authorization": BASIC, "Content-Type": "application/json"})
        r = c.getresponse()
        r.read()
        out.append((due - start, (time.monotonic() - due) * 1000, r.status))
        i += 1
    c.close()


def bench_reload_and_forget(work):
    rules = os.path.join(work, "rules")
    shutil.copytree(os.path.join(ROOT, "rules/bossup"), rules)
    onboarding = os.path.join(rules, "onboarding.yaml")
    original = open(onboarding).read()
    # (An edit of a rule's text: a new rule set, the same rules.)
    edited = original.replace("Parse the install deep link", "Parse the install link", 1)
    assert edited != original
    server = Server([rules], os.path.join(work, "reload.sqlite"))
    try:
        users = [f"u{n:05d}" for n in range(10_000)]
        for k in range(0, len(users), 100):
            server.post([opened(u, 0) for u in users[k:k + 100]])
        time.sleep(6)  # (past the 5-second checkpoint that writes the 10,000 new states: not a reload's cost)
        results = []
        baseline = SECONDS / 2
        t = threading.Thread(target=paced, args=(server.port, 500, baseline + SECONDS, results))
        t.start()
        time.sleep(baseline)
        reloads = []
        for n in range(int(SECONDS) - 1):
            open(onboarding, "w").write(edited if n % 2 == 0 else original)
            t0 = time.monotonic()
            s, b = server.request("POST", "/admin/reload", headers={"Authorization": "Bearer " + ADMIN})
            reloads.append((time.monotonic() - t0) * 1000)
            assert s == 200 and json.loads(b)["changed"], (s, b)
            time.sleep(max(0, 1 - (time.monotonic() - t0)))
        t.join()
        before = [ms for at, ms, _ in results if at < baseline]
        during = [ms for at, ms, _ in results if at >= baseline]
        bad = sum(1 for _, _, s in results if s != 200)
        print(f"reload with 10,000 users: {len(reloads)} reloads, each {statistics.median(reloads):.0f} ms median, "
              f"{max(reloads):.0f} ms max")
        figure("reload with 10,000 users, median", statistics.median(reloads), "ms")
        figure("/v1/track at 500/s, p99 before the reloads", pct(before, .99), "ms")
        figure("/v1/track at 500/s, p99 during a reload a second", pct(during, .99), "ms")
        print(f"  single /v1/track at 500/s: before the reloads p50 {pct(before, .5):.2f} ms, p99 {pct(before, .99):.2f} ms, "
              f"max {max(before):.1f} ms; during them p50 {pct(during, .5):.2f} ms, p99 {pct(during, .99):.2f} ms, "
              f"max {max(during):.1f} ms ({len(results)} requests, {bad} not 200)")
        forgets = []
        for u in users[:5]:
            t0 = time.monotonic()
            s, b = server.request("DELETE", f"/v1/users/{u}", headers={"Authorization": "Bearer " + ADMIN})
            forgets.append((time.monotonic() - t0) * 1000)
            assert s == 200 and json.loads(b)["forgotten"], (s, b)
        records = subprocess.run(["sqlite3", os.path.join(work, "reload.sqlite"), "select count(*) from input_log"],
                                 capture_output=True, text=True).stdout.strip()
        print(f"forget with 10,000 users and {records or '?'} input log records: "
              f"{statistics.median(forgets):.0f} ms median, {max(forgets):.0f} ms max (5 users)")
        figure("forget with 10,000 users, median", statistics.median(forgets), "ms")
    finally:
        server.stop()


def bench_delivery(work):
    ready, stop, count = [], threading.Event(), [0]
    t = threading.Thread(target=lambda: asyncio.run(receiver(ready, stop, count)))
    t.start()
    while not ready:
        time.sleep(0.01)
    rules = os.path.join(work, "emit")
    os.makedirs(rules)
    open(os.path.join(rules, "settings.yaml"), "w").write(
        f"version: 1\nsettings: bench\ndestinations:\n  - {{ name: sink, url: \"http://127.0.0.1:{ready[0]}/e\", "
        "body: payload, timeout: 5s }\n")
    open(os.path.join(rules, "emit.yaml"), "w").write(
        "version: 1\nruleset: forward\nrules:\n  - id: forward\n    on: Purchase\n    do:\n"
        "      - emit: { event: Purchased, payload: { event_id: \"${event.messageId}\", value: 1 } }\n")
    server = Server([rules], os.path.join(work, "emit.sqlite"))
    n = 50_000
    try:
        t0 = time.monotonic()
        for k in range(0, n, 100):
            server.post([{"type": "track", "event": "Purchase", "userId": f"b{i % 1000}", "messageId": f"b-{i}"}
                         for i in range(k, k + 100)])
        posted = time.monotonic() - t0
        deadline = time.monotonic() + 300
        while count[0] < n and time.monotonic() < deadline:
            time.sleep(0.05)
        took = time.monotonic() - t0
        print(f"delivery: {n} emits posted in {posted:.1f} s, all {count[0]} delivered {took:.1f} s after the first post: "
              f"{count[0] / took:,.0f} deliveries/s (receiver: Python asyncio on the same cores)")
        figure("delivery of 50,000 emits", count[0] / took, "/s")
    finally:
        server.stop()
        stop.set()
        t.join()


def rss_kb(pid):
    for line in open(f"/proc/{pid}/status"):
        if line.startswith("VmRSS:"):
            return int(line.split()[1])
    raise RuntimeError("no VmRSS")


def metric(server, name):
    """A metric without labels as /metrics says it; None from a build without it."""
    s, b = server.request("GET", "/metrics")
    for line in b.decode().splitlines():
        if line.startswith(name + " "):
            return float(line.split()[1])
    return None


def heap_bytes(server):
    """The service's heap in use (beckon_heap_bytes; None from a build without it)."""
    return metric(server, "beckon_heap_bytes")


def counter(server, name):
    """A counter; 0 from a build without it."""
    return metric(server, name) or 0.0


def settle(server):
    """Waits past the 5-second checkpoint after the last post until the service has settled: no checkpoint written for
    1.5 seconds, and its free pages given back since the last (docs/service.md, "Memory"); 15 seconds at most (a build
    without `beckon_memory_given_back_total` waits them all)."""
    start = time.monotonic()
    checkpoints, since = counter(server, "beckon_checkpoints_total"), time.monotonic()
    given = counter(server, "beckon_memory_given_back_total")
    while time.monotonic() - start < 15:
        time.sleep(0.25)
        now = counter(server, "beckon_checkpoints_total")
        if now != checkpoints:
            checkpoints, since = now, time.monotonic()
            given = counter(server, "beckon_memory_given_back_total")
        elif (time.monotonic() - start >= 6 and time.monotonic() - since >= 1.5
              and counter(server, "beckon_memory_given_back_total") > given):
            return


def bench_memory(work):
    server = Server([os.path.join(ROOT, "rules/bossup")], os.path.join(work, "memory.sqlite"))
    users = 100_000
    try:
        server.post([opened("warm", 0)])
        time.sleep(1)
        before, heap_before = rss_kb(server.proc.pid), heap_bytes(server)

        def post(first):
            for k in range(first, users, 400):
                batch = []
                for u in range(k, min(k + 100, users)):
                    user = f"m{u:06d}"
                    batch.append({**opened(user, 0), "properties": {
                        "platform": "ios", "url": f"https://example.com/?utm_source=facebook&fbclid=x{u}"}})
                    batch.append({"type": "screen", "name": "Home", "userId": user, "messageId": f"{user}-1"})
                server.post(batch)
        threads = [threading.Thread(target=post, args=(k,)) for k in range(0, 400, 100)]
        [t.start() for t in threads]
        [t.join() for t in threads]
        settle(server)
        after, heap_after = rss_kb(server.proc.pid), heap_bytes(server)
        per = (after - before) * 1024 / users
        heap = f"; heap in use {(heap_after - heap_before) / users:.0f} bytes a user" if heap_after else ""
        print(f"memory: resident {before / 1024:.0f} MB before, {after / 1024:.0f} MB after 200,000 events over "
              f"100,000 users (rules/bossup): {per:.0f} bytes a user{heap}")
        figure("resident memory per user, 100,000 users", per, "B")
        if heap_after:
            figure("heap in use per user, 100,000 users", (heap_after - heap_before) / users, "B")
    finally:
        server.stop()


if __name__ == "__main__":
    work = tempfile.mkdtemp()
    try:
        bench_reload_and_forget(work)
        bench_delivery(work)
        bench_memory(work)
    finally:
        shutil.rmtree(work)
