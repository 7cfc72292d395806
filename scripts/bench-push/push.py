#!/usr/bin/env python3
"""Push benchmark of `beckon serve` (docs/push.md), on loopback, bounded in time (a few minutes at most):

1. APNs: 10,000 users with 1 to 3 iOS devices each (about 20,000, registered through POST /v1/users/{id}/devices),
   then 50,000 events that each fire a push, through an `apns` destination to the APNs double
   (Tests/Service/apns_double.py: HTTP/2 over TLS, every provider token's ES256 signature verified), in a process of
   its own on the same cores: pushes delivered a second and device requests a second, from the first post to the
   last delivery; beckon's peak resident memory (VmHWM);
2. the generic destination, side by side: the same 50,000 pushes to a webhook destination (`kinds: [push]`) on an
   asyncio HTTP/1.1 receiver answering 200, one request per push (the relay an operator wrote before APNs).

Usage: python3 scripts/bench-push/push.py BECKON."""
import asyncio
import base64
import http.client
import json
import os
import random
import shutil
import subprocess
import sys
import tempfile
import threading
import time

BECKON = sys.argv[1]
ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
sys.path.insert(0, os.path.join(ROOT, "Tests", "Service"))
sys.path.insert(0, os.path.join(ROOT, "scripts", "bench-service"))
from receiver import receiver  # noqa: E402
KEY, SECRET = "bench-key", "a-bench-user-secret-of-at-least-32-bytes"
BASIC = "Basic " + base64.b64encode(f"{KEY}:".encode()).decode()
USERS = int(os.environ.get("BENCH_USERS", "10000"))
PUSHES = int(os.environ.get("BENCH_PUSHES", "50000"))

RULES = ("version: 1\ncampaign: bench\nrules:\n  - id: thanks\n    on: Purchase\n    do:\n"
         "      - push: { title: Thanks, body: \"Order ${event.messageId} is on its way\" }\n")


def token(user):
    import hashlib
    import hmac
    def b64(b):
        return base64.urlsafe_b64encode(b).rstrip(b"=").decode()
    head = b64(json.dumps({"alg": "HS256", "typ": "JWT"}).encode())
    body = b64(json.dumps({"sub": user}).encode())
    sig = b64(hmac.new(SECRET.encode(), f"{head}.{body}".encode(), hashlib.sha256).digest())
    return f"{head}.{body}.{sig}"


class Server:
    def __init__(self, rules, db):
        self.proc = subprocess.Popen(
            [BECKON, "serve", rules, "--db", db, "--port", "0", "--write-key", KEY, "--user-secret", SECRET,
             "--clock", "wall"], stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True,
            env={**os.environ, "LOG_LEVEL": "error"})
        line = ""
        while "listening on http://" not in line:
            line = self.proc.stdout.readline()
            if not line:
                raise RuntimeError("beckon serve did not start")
        self.port = int(line.split("listening on http://")[1].split()[0].rsplit(":", 1)[1])

    def connection(self):
        return http.client.HTTPConnection("127.0.0.1", self.port, timeout=60)

    def delivered(self):
        c = self.connection()
        c.request("GET", "/metrics")
        text = c.getresponse().read().decode()
        c.close()
        return sum(float(line.rsplit(" ", 1)[1]) for line in text.splitlines()
                   if line.startswith("beckon_deliveries_total{") and 'result="delivered"' in line)

    def peak_mb(self):
        with open(f"/proc/{self.proc.pid}/status") as f:
            for line in f:
                if line.startswith("VmHWM:"):
                    return int(line.split()[1]) / 1024
        return 0

    def cpu_seconds(self):
        """User and system CPU time beckon has used (from /proc)."""
        with open(f"/proc/{self.proc.pid}/stat") as f:
            fields = f.read().rsplit(")", 1)[1].split()
        return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")

    def stop(self):
        self.proc.terminate()
        self.proc.wait(timeout=60)


def register_devices(server):
    """1 to 3 iOS devices for each user, through the API, from 8 threads on keep-alive connections."""
    r = random.Random(7)
    devices = {f"u{i}": r.randint(1, 3) for i in range(USERS)}
    users = list(devices)

    def work(part):
        c = server.connection()
        for u in part:
            for d in range(devices[u]):
                body = json.dumps({"token": f"good-{u}-{d}", "platform": "ios"}).encode()
                c.request("POST", f"/v1/users/{u}/devices", body,
                          {"Authorization": "Bearer " + token(u), "Content-Type": "application/json"})
                resp = c.getresponse()
                resp.read()
                assert resp.status == 200, resp.status
        c.close()

    threads = [threading.Thread(target=work, args=(users[k::8],)) for k in range(8)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    return sum(devices.values())


def post_and_wait(server):
    c = server.connection()
    t0 = time.monotonic()
    cpu0 = server.cpu_seconds()
    for k in range(0, PUSHES, 100):
        body = json.dumps({"batch": [{"type": "track", "event": "Purchase", "userId": f"u{i % USERS}",
                                      "messageId": f"p-{i}"} for i in range(k, k + 100)]}).encode()
        c.request("POST", "/v1/batch", body, {"Authorization": BASIC, "Content-Type": "application/json"})
        resp = c.getresponse()
        resp.read()
        assert resp.status == 200, resp.status
    posted = time.monotonic() - t0
    deadline = time.monotonic() + 600
    while server.delivered() < PUSHES and time.monotonic() < deadline:
        time.sleep(0.2)
    took, delivered = time.monotonic() - t0, server.delivered()
    return posted, took, delivered, (server.cpu_seconds() - cpu0) / max(delivered, 1) * 1e6


def bench_apns(work):
    folder = os.path.join(work, "apns")
    os.makedirs(folder)
    double = subprocess.Popen(
        [sys.executable, "-c", "import sys, time; sys.path.insert(0, sys.argv[2]); from apns_double import APNsDouble; "
         "d = APNsDouble(sys.argv[1]); d.max_requests = 10**9; d.start(); print(d.port, flush=True); time.sleep(3600)", folder,
         os.path.join(ROOT, "Tests", "Service")], stdout=subprocess.PIPE, text=True)
    port = int(double.stdout.readline())
    rules = os.path.join(work, "apns-rules")
    os.makedirs(rules)
    open(os.path.join(rules, "bench.yaml"), "w").write(RULES)
    from apns_double import KEY_ID, TEAM, TOPIC
    open(os.path.join(rules, "settings.yaml"), "w").write(
        f"version: 1\nsettings: bench\ndestinations:\n  - name: ios\n    url: https://127.0.0.1:{port}\n"
        f"    apns:\n      topic: {TOPIC}\n      team_id: {TEAM}\n      key_id: {KEY_ID}\n"
        f"      key_file: {folder}/AuthKey_{KEY_ID}.p8\n      ca_file: {folder}/ca.pem\n")
    server = Server(rules, os.path.join(work, "apns.sqlite"))
    try:
        t0 = time.monotonic()
        n = register_devices(server)
        registered = time.monotonic() - t0
        posted, took, delivered, cpu = post_and_wait(server)
        print(f"APNs: {USERS:,} users with {n:,} iOS devices registered in {registered:.1f} s "
              f"({n / registered:,.0f} registrations/s)")
        print(f"APNs: {PUSHES:,} pushes posted in {posted:.1f} s, {delivered:,.0f} delivered {took:.1f} s after the "
              f"first post: {delivered / took:,.0f} pushes/s, {delivered / took * n / USERS:,.0f} device requests/s; "
              f"beckon {cpu:,.0f} µs of CPU a push; beckon peak RSS {server.peak_mb():.0f} MB "
              "(the double: Python, one process, on the same cores)")
    finally:
        server.stop()
        double.kill()
        double.wait()


def bench_webhook(work):
    ready, stop = [], threading.Event()
    t = threading.Thread(target=lambda: asyncio.run(receiver(ready, stop)))
    t.start()
    while not ready:
        time.sleep(0.01)
    rules = os.path.join(work, "webhook-rules")
    os.makedirs(rules)
    open(os.path.join(rules, "bench.yaml"), "w").write(RULES)
    open(os.path.join(rules, "settings.yaml"), "w").write(
        f"version: 1\nsettings: bench\ndestinations:\n  - {{ name: relay, url: \"http://127.0.0.1:{ready[0]}/push\", "
        "kinds: [push], timeout: 5s }\n")
    server = Server(rules, os.path.join(work, "webhook.sqlite"))
    try:
        posted, took, delivered, cpu = post_and_wait(server)
        print(f"generic destination: {PUSHES:,} pushes posted in {posted:.1f} s, {delivered:,.0f} delivered {took:.1f} s "
              f"after the first post: {delivered / took:,.0f} pushes/s (one request each); beckon {cpu:,.0f} µs of CPU a "
              f"push; beckon peak RSS "
              f"{server.peak_mb():.0f} MB (receiver: Python asyncio on the same cores)")
    finally:
        server.stop()
        stop.set()
        t.join()


if __name__ == "__main__":
    print(f"machine: {os.cpu_count()} cores")
    work = tempfile.mkdtemp()
    try:
        bench_apns(work)
        bench_webhook(work)
    finally:
        shutil.rmtree(work)
