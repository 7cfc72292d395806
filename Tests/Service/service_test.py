#!/usr/bin/env python3
"""Tests of `beckon serve` as a process on loopback: HTTP replays equal dry-runs, kill -9 under load loses and
doubles nothing, delayed actions come due on the wall clock (also while the server was down), bad requests are
refused and store nothing. Run by scripts/test.sh; `BECKON=path/to/beckon python3 Tests/Service/service_test.py`.
Every server is bounded in time and stopped by the test that started it.

The same tests run against either store: BECKON_TEST_STORE=postgres (with BECKON_TEST_POSTGRES, a URL whose role may
create databases) starts each server as a fleet process (`beckon serve --postgres`) on a database of its own, and
waits after each accepted request until the fleet has processed it (a fleet answers 200 once the events are in its
log; a single service once they are processed). Tests of what only a single service has (its SQLite file, one clock
for the whole stream) are skipped there."""
import base64
import glob
import hashlib
import hmac
import html
import http.client
import json
import os
import random
import re
import signal
import socket
import sqlite3
import subprocess
import sys
import tempfile
import threading
import time
import unittest
import urllib.parse

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
BECKON = os.environ.get("BECKON", os.path.join(ROOT, ".build/debug/beckon"))
STORE = os.environ.get("BECKON_TEST_STORE", "sqlite")
PG = os.environ.get("BECKON_TEST_POSTGRES")
sqlite_only = unittest.skipIf(STORE == "postgres", "a single service's own: its SQLite file, or one clock for all")
KEY = "test-write-key"
SECRET = "a-test-secret-of-at-least-32-bytes!!"
ADMIN_KEY = "test-admin-key"


def b64url(data):
    return base64.urlsafe_b64encode(data).rstrip(b"=").decode()


def token(user, secret=SECRET, exp=None):
    """An HS256 JWT with `sub` = user, as an app's backend would mint it."""
    header = b64url(json.dumps({"alg": "HS256", "typ": "JWT"}).encode())
    claims = {"sub": user}
    if exp is not None:
        claims["exp"] = exp
    payload = b64url(json.dumps(claims).encode())
    sig = b64url(hmac.new(secret.encode(), f"{header}.{payload}".encode(), hashlib.sha256).digest())
    return f"{header}.{payload}.{sig}"


def basic(key):
    return "Basic " + base64.b64encode(f"{key}:".encode()).decode()


def pg_database(db):
    """The fleet database standing for the SQLite path `db` (the same path: the same database, across restarts)."""
    name = "svc_" + hashlib.sha1(db.encode()).hexdigest()[:16]
    found = subprocess.run(["psql", PG, "-tAc", f"SELECT 1 FROM pg_database WHERE datname = '{name}'"],
                           capture_output=True, text=True, check=True).stdout.strip()
    if not found:
        subprocess.run(["psql", PG, "-q", "-c", f"CREATE DATABASE {name}"], check=True, capture_output=True)
    return PG.rsplit("/", 1)[0] + "/" + name


def store_args(db):
    """`beckon serve`'s store standing for the SQLite path `db`: that file, or its fleet database (``pg_database``)."""
    return ["--postgres", pg_database(db)] if STORE == "postgres" else ["--db", db]


def fleet(url, *args):
    """`beckon fleet ARGS --postgres URL`'s output."""
    return subprocess.run([BECKON, "fleet", *args, "--postgres", url], capture_output=True, text=True, check=True).stdout


def caught_up(url, seconds=30):
    """Until every partition of the fleet at `url` has processed what was appended."""
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        r = subprocess.run([BECKON, "fleet", "status", "--json", "--postgres", url], capture_output=True, text=True)
        rows = [json.loads(line) for line in r.stdout.splitlines()] if r.returncode == 0 else []
        if rows and all(p["lag"] == 0 for p in rows):
            return
        time.sleep(0.1)
    raise AssertionError(f"the fleet did not process its log within {seconds} s")


class Server:
    """A `beckon serve` process on a free loopback port (a fleet process with BECKON_TEST_STORE=postgres)."""

    starts = 0
    # (The fleet database of a fleet process; None for a single service, and for subclasses that start their own.)
    url = None

    def __init__(self, rules, db, clock=os.environ.get("BECKON_TEST_CLOCK", "events"), extra=()):
        self.rules, self.db, self.clock, self.extra = rules, db, clock, list(extra)
        self.proc = None
        self.port = None

    def start(self):
        Server.starts += 1
        store = store_args(self.db)
        self.url = None
        if STORE == "postgres":
            self.url = store[1]
            store += ["--lease-seconds", "3", "--owner", f"svc-{os.getpid()}-{Server.starts}"]
        args = [BECKON, "serve", *self.rules, *store, "--port", "0", "--write-key", KEY,
                "--user-secret", SECRET, "--admin-key", ADMIN_KEY, "--clock", self.clock, *self.extra]
        self.proc = subprocess.Popen(args, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                                     env={**os.environ, "LOG_LEVEL": "warning"})
        deadline = time.time() + 30
        while time.time() < deadline:
            line = self.proc.stdout.readline()
            if not line:
                raise RuntimeError("beckon serve exited: " + self.proc.stderr.read())
            if "listening on http://" in line:
                self.port = int(line.split("listening on http://")[1].split()[0].rsplit(":", 1)[1])
                while self.url and self.request("GET", "/readyz")[0] != 200:
                    assert time.time() < deadline, "the fleet process was not ready in 30 s"
                    time.sleep(0.1)
                return self
        raise RuntimeError("beckon serve did not start in 30 s")

    def stop(self):
        if self.proc and self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
            try:
                self.proc.wait(timeout=20)
            except subprocess.TimeoutExpired:
                self.kill()
                raise AssertionError("beckon serve did not stop within 20 s of SIGTERM")
        self.close()
        return self.proc.returncode

    def kill(self):
        self.proc.send_signal(signal.SIGKILL)
        self.proc.wait()
        self.close()

    def close(self):
        self.proc.stdout.close()
        self.proc.stderr.close()

    def request(self, method, path, body=None, headers=None, timeout=30, source=None):
        """`source`: a loopback address to send from (the service counts wrong credentials per client address)."""
        conn = http.client.HTTPConnection("127.0.0.1", self.port, timeout=timeout,
                                          source_address=(source, 0) if source else None)
        try:
            data = body if isinstance(body, (bytes, type(None))) else json.dumps(body).encode()
            conn.request(method, path, body=data, headers=headers or {})
            r = conn.getresponse()
            text = r.read()
            return r.status, (json.loads(text) if text and r.getheader("Content-Type", "").startswith("application/json") else text)
        finally:
            conn.close()

    def post(self, path, body, key=KEY, wait=True):
        """`wait`: on a fleet, return once it has processed what it accepted (as a single service answers)."""
        answer = self.request("POST", path, body, {"Authorization": basic(key), "Content-Type": "application/json"})
        if self.url and answer[0] == 200 and wait:
            caught_up(self.url)
        return answer

    def actions(self, user, after=0, wait=None):
        q = f"?after={after}" + (f"&wait={wait}" if wait is not None else "")
        status, body = self.request("GET", f"/v1/users/{user}/actions{q}", headers={"Authorization": "Bearer " + token(user)})
        assert status == 200, (status, body)
        return body

    def all_actions(self, user):
        out, cursor = [], 0
        while True:
            page = self.actions(user, cursor)
            out += page["actions"]
            if not page["actions"]:
                return out
            cursor = int(page["cursor"])


class HTTP:
    """A cookie-keeping client for the console over plain HTTP (Python's cookie jar would not send a Secure cookie
    over http://, so cookies are kept by hand)."""

    def __init__(self, port):
        self.port, self.cookies = port, {}

    def request(self, method, path, form=None, headers=None, raw=None):
        conn = http.client.HTTPConnection("localhost", self.port, timeout=60)
        h = dict(headers or {})
        if self.cookies:
            h["Cookie"] = "; ".join(f"{k}={v}" for k, v in self.cookies.items())
        body = raw
        if form is not None:
            body = urllib.parse.urlencode(form).encode()
            h["Content-Type"] = "application/x-www-form-urlencoded"
        try:
            conn.request(method, path, body=body, headers=h)
            r = conn.getresponse()
            text = r.read().decode("utf-8", "replace")
            set_cookies = r.headers.get_all("Set-Cookie") or []
            for c in set_cookies:
                name, value = c.split(";")[0].split("=", 1)
                if "Max-Age=0" in c:
                    self.cookies.pop(name, None)
                else:
                    self.cookies[name] = value
            return r.status, dict(r.getheaders()), text, set_cookies
        finally:
            conn.close()

    def login(self, key=ADMIN_KEY):
        status, _, page, _ = self.request("GET", "/console/login")
        assert status == 200, status
        token = re.search(r'name="csrf" value="([0-9a-f]+)"', page).group(1)
        return self.request("POST", "/console/login", form={"csrf": token, "key": key})

    def csrf(self, path="/console"):
        status, _, page, _ = self.request("GET", path)
        assert status == 200, (status, page[:200])
        return re.search(r'name="csrf" value="([0-9a-f]+)"', page).group(1)


def dry_run(rules, events_path):
    r = subprocess.run([BECKON, "dry-run", *rules, "--events", events_path, "--format", "jsonl"],
                       capture_output=True, text=True, check=True)
    return [json.loads(line) for line in r.stdout.splitlines() if line.strip()]


def partition(user):
    """The fleet's partition of a user id (FNV-1a of its UTF-8, modulo 64: FleetLog.partition(of:))."""
    h = 0xcbf29ce484222325
    for b in user.encode():
        h = ((h ^ b) * 0x100000001b3) % (1 << 64)
    return h % 64


def store_dry_run(rules, events, tmp):
    """What the store serving the tests fires for `events` (a list, in the order posted): a dry-run of them all for a
    single service; for a fleet, whose partitions each keep their own event clock (docs/fleet.md), a dry-run of each
    partition's events on their own (for streams with no sign-in across partitions)."""
    if STORE != "postgres":
        groups = {0: events}
    else:
        groups = {}
        for e in events:
            groups.setdefault(partition(e.get("userId") or e.get("anonymousId")), []).append(e)
    out = []
    for p, group in sorted(groups.items()):
        path = f"{tmp}/partition-{p}.jsonl"
        with open(path, "w") as f:
            for e in group:
                f.write(json.dumps(e) + "\n")
        out += dry_run(rules, path)
    return out


def read_jsonl(path):
    with open(path) as f:
        return [json.loads(line) for line in f if line.strip()]


def by_user(actions):
    out = {}
    for a in actions:
        out.setdefault(a["userId"], []).append(a)
    return out


def app_rules(app):
    return [d for d in (f"{ROOT}/rules/{app}", f"{ROOT}/campaigns/{app}") if os.path.isdir(d)]


def event_count(db):
    """The events the store holds (its input log's, or a fleet's log entries)."""
    if STORE == "postgres":
        return int(subprocess.run(["psql", pg_database(db), "-tAc",
                                   "SELECT coalesce(sum(coalesce(cardinality(users), 1)), 0) FROM beckon_log "
                                   "WHERE user_id <> '' OR users IS NOT NULL"],
                                  capture_output=True, text=True, check=True).stdout.strip() or 0)
    with sqlite3.connect(db) as c:
        return c.execute("SELECT coalesce(sum(events), 0) FROM input_log").fetchone()[0]


def logged_events(db):
    """The events of the input log, in the order the server took them (docs/service.md, "Durability")."""
    with sqlite3.connect(db) as c:
        records = [bytes(b) for (b,) in c.execute("SELECT body FROM input_log ORDER BY seq")]
    events = []
    for r in records:
        i = 0
        while i < len(r):
            nl = r.index(b"\n", i)
            fields = r[i:nl].decode().split(" ")
            i = nl + 1
            if fields[0] == "A":
                pass
            elif fields[0] == "E":
                n = int(fields[1])
                events.append(r[i:i + n].decode())
                i += n + 1
            elif fields[0] == "R":
                i += int(fields[2]) + int(fields[3]) + 1
            else:
                assert fields[0] == "T", fields
    return events


class Replay(unittest.TestCase):
    def test_every_sample_over_http_equals_its_dry_run(self):
        samples = sorted(glob.glob(f"{ROOT}/samples/*/*.jsonl"))
        self.assertGreater(len(samples), 10)
        for sample in samples:
            app = os.path.basename(os.path.dirname(sample))
            rules = app_rules(app)
            with self.subTest(sample=os.path.relpath(sample, ROOT)), tempfile.TemporaryDirectory() as tmp:
                events = read_jsonl(sample)
                expected = store_dry_run(rules, events, tmp)
                server = Server(rules, f"{tmp}/db.sqlite").start()
                try:
                    # Batches of 5, so that a stream spans requests and group commits.
                    for i in range(0, len(events), 5):
                        status, body = server.post("/v1/batch", {"batch": events[i:i + 5]})
                        self.assertEqual(status, 200, body)
                    users = {e.get("userId") or e.get("anonymousId") for e in events}
                    got = {u: server.all_actions(u) for u in users}
                    want = by_user(expected)
                    for u in users:
                        self.assertEqual(got[u], want.get(u, []), f"actions of {u}")
                    self.assertGreater(sum(len(v) for v in got.values()), 0)
                    if app == "stampbook":
                        for u in users:
                            notes = [a for a in want.get(u, []) if "unread" in a]
                            status, inbox = server.request(
                                "GET", f"/v1/users/{u}/inbox", headers={"Authorization": "Bearer " + token(u)})
                            self.assertEqual(status, 200)
                            self.assertEqual(inbox["unread"], notes[-1]["unread"] if notes else 0, f"unread of {u}")
                            self.assertEqual(inbox["unread"], sum(1 for i in inbox["items"] if not i["read"]))
                finally:
                    self.assertEqual(server.stop(), 0)

    def test_inbox_read_endpoint(self):
        with tempfile.TemporaryDirectory() as tmp:
            server = Server(app_rules("stampbook"), f"{tmp}/db.sqlite").start()
            try:
                ev = {"type": "track", "userId": "zoe", "event": "Signed In", "timestamp": "2026-03-02T09:00:00Z",
                      "messageId": "zoe-1"}
                self.assertEqual(server.post("/v1/batch", {"batch": [ev]})[0], 200)
                auth = {"Authorization": "Bearer " + token("zoe")}
                status, inbox = server.request("GET", "/v1/users/zoe/inbox", headers=auth)
                self.assertEqual((status, inbox["unread"]), (200, 1))
                item = inbox["items"][0]["id"]
                status, inbox = server.request("POST", f"/v1/users/zoe/inbox/{item}/read", headers=auth)
                self.assertEqual((status, inbox["unread"], inbox["items"][0]["read"]), (200, 0, True))
                status, _ = server.request("POST", "/v1/users/zoe/inbox/nope/read", headers=auth)
                self.assertEqual(status, 404)
            finally:
                server.stop()
            # The read state survived the restart.
            server = Server(app_rules("stampbook"), f"{tmp}/db.sqlite").start()
            try:
                status, inbox = server.request("GET", "/v1/users/zoe/inbox", headers={"Authorization": "Bearer " + token("zoe")})
                self.assertEqual((status, inbox["unread"]), (200, 0))
            finally:
                server.stop()


class Crash(unittest.TestCase):
    def test_kill_9_under_load_loses_and_doubles_nothing(self):
        rules = app_rules("bossup")
        # Every bossup sample, once per copy, each copy a new set of users and message ids.
        base = []
        for s in sorted(glob.glob(f"{ROOT}/samples/bossup/*.jsonl")):
            base += read_jsonl(s)
        base = [e for e in base if e.get("messageId")]
        workers = 4
        streams = [[] for _ in range(workers)]
        for copy in range(300):
            for e in base:
                e2 = dict(e, userId=f"{e['userId']}-{copy}", messageId=f"{e['messageId']}-{copy}")
                streams[copy % workers].append(e2)
        # Each worker sends its users' events in time order, as apps do: a batch spans minutes, not weeks, so a batch
        # sent again after a crash is within the dedup window (messageId de-duplicates as in dry-run, docs/events.md).
        for s in streams:
            s.sort(key=lambda e: e["timestamp"])
        total = len({e["messageId"] for s in streams for e in s})
        rng = random.Random(7)
        with tempfile.TemporaryDirectory() as tmp:
            db = f"{tmp}/db.sqlite"
            server = Server(rules, db).start()
            acked = set()
            lock = threading.Lock()
            kills = 0

            def send(stream):
                i = 0
                while i < len(stream):
                    batch = stream[i:i + rng.randint(1, 40)]
                    try:
                        # (A fleet is waited for once, at the end: its 200 means the events are in its log.)
                        status, _ = server.post("/v1/batch", {"batch": batch}, wait=False)
                    except (OSError, http.client.HTTPException):
                        status = None
                    if status == 200:
                        with lock:
                            acked.update(e["messageId"] for e in batch)
                        i += len(batch)
                    else:
                        time.sleep(0.05)  # the server is down or restarting: send the same batch again

            threads = [threading.Thread(target=send, args=(s,)) for s in streams]
            for t in threads:
                t.start()
            deadline = time.time() + 240
            while any(t.is_alive() for t in threads) and time.time() < deadline:
                time.sleep(rng.uniform(0.1, 0.6))
                if kills < 4 and any(t.is_alive() for t in threads):
                    server.kill()
                    kills += 1
                    server = Server(rules, db).start()
            for t in threads:
                t.join(timeout=max(1, deadline - time.time()))
            self.assertFalse(any(t.is_alive() for t in threads), "the load did not finish in 240 s")
            self.assertGreaterEqual(kills, 2)
            self.assertEqual(len(acked), total)
            if server.url:
                # A fleet's actions and log (each partition in its order: one order per user, as docs/fleet.md says).
                caught_up(server.url)
                stored = sorted((a["id"], json.dumps(a)) for a in map(json.loads, fleet(server.url, "actions").splitlines()))
                logged = fleet(server.url, "events").splitlines()
            else:
                with sqlite3.connect(db) as c:
                    stored = c.execute("SELECT action_id, json FROM action_log ORDER BY seq").fetchall()
                logged = logged_events(db)
            ids = [json.loads(e)["messageId"] for e in logged]
            self.assertEqual(set(ids), acked, "an acknowledged event is not in the log")
            action_ids = [a for a, _ in stored]
            self.assertEqual(len(action_ids), len(set(action_ids)), "an action id appears twice")
            # The actions equal the dry-run's over the logged events in the order the server took them; a batch
            # sent again after a crash is in the log twice, and the dry-run, like the server, takes it as duplicates.
            with open(f"{tmp}/accepted.jsonl", "w") as f:
                for e in logged:
                    f.write(e + "\n")
            expected = dry_run(rules, f"{tmp}/accepted.jsonl")
            if server.url:
                expected.sort(key=lambda a: a["id"])
            self.assertEqual([json.loads(j) for _, j in stored], expected)
            summary = subprocess.run([BECKON, "dry-run", *rules, "--events", f"{tmp}/accepted.jsonl", "--format", "jsonl"],
                                     capture_output=True, text=True, check=True).stderr
            self.assertIn(f"duplicates {len(ids) - len(set(ids))},", summary, "an event sent twice was processed twice")
            self.assertGreater(len(expected), 100)
            server.stop()


class ActionIds(unittest.TestCase):
    def test_an_action_fired_again_is_stored_once(self):
        with tempfile.TemporaryDirectory() as tmp:
            os.makedirs(f"{tmp}/rules")
            with open(f"{tmp}/rules/ping.yaml", "w") as f:
                f.write("version: 1\ncampaign: ping\nrules:\n  - id: pong\n    on: Ping\n"
                        "    do:\n      - message: { surface: launch, title: Pong }\n")
            server = Server([f"{tmp}/rules"], f"{tmp}/db.sqlite").start()
            try:
                def ping(mid, day):
                    return {"type": "track", "userId": "p", "event": "Ping", "messageId": mid,
                            "timestamp": f"2026-03-{day:02d}T09:00:00Z"}
                # m1 again after the 7-day dedup window: the engine takes it (late) and fires the same action id.
                for batch in ([ping("m1", 1)], [ping("m2", 10)], [ping("m1", 1)]):
                    self.assertEqual(server.post("/v1/batch", {"batch": batch})[0], 200)
                ids = [a["id"] for a in server.all_actions("p")]
                self.assertEqual(len(ids), 2)
                self.assertEqual(len(set(ids)), 2)
            finally:
                server.stop()


LIVE_RULES = """version: 1
campaign: live_clock
rules:
  - id: welcome_later
    on: Signed Up
    wait: 2s
    do:
      - message: { surface: launch, title: Welcome }
"""


class WallClockRules(unittest.TestCase):
    """A wall-clock server over one rule file (`RULES`) and a database in a fresh folder."""
    RULES = ""

    def setUp(self):
        self.tmp = tempfile.TemporaryDirectory()
        os.makedirs(f"{self.tmp.name}/rules")
        with open(f"{self.tmp.name}/rules/rules.yaml", "w") as f:
            f.write(self.RULES)
        self.db = f"{self.tmp.name}/db.sqlite"

    def tearDown(self):
        self.tmp.cleanup()

    def server(self):
        return Server([f"{self.tmp.name}/rules"], self.db, clock="wall").start()


class LiveClock(WallClockRules):
    RULES = LIVE_RULES

    def test_a_delayed_action_comes_due_with_no_further_event(self):
        server = self.server()
        try:
            sent = time.time()
            # No timestamp: the event's time is its arrival.
            self.assertEqual(server.post("/v1/track", {"userId": "amy", "event": "Signed Up", "messageId": "a1"})[0], 200)
            page = server.actions("amy", 0, wait=10)
            got = time.time()
            self.assertEqual(len(page["actions"]), 1, page)
            a = page["actions"][0]
            self.assertEqual((a["rule"], a["action"]), ("welcome_later", "message"))
            self.assertNotIn("late", a)
            self.assertGreaterEqual(got - sent, 1.9)
            self.assertLess(got - sent, 4.0, "the action came more than 2 s after its due time")
            # A device clock an hour ahead is taken as arriving now: it fires nobody's timer early.
            ahead = time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime(time.time() + 3600))
            self.assertEqual(server.post("/v1/track", {"userId": "bo", "event": "Signed Up", "timestamp": ahead,
                                                       "messageId": "b1"})[0], 200)
            self.assertEqual(server.actions("bo", 0, wait=1)["actions"], [])
            self.assertEqual(len(server.actions("bo", 0, wait=10)["actions"]), 1)
        finally:
            self.assertEqual(server.stop(), 0)

    def test_a_timer_due_while_the_server_was_down_fires_once_after_restart(self):
        server = self.server()
        self.assertEqual(server.post("/v1/track", {"userId": "cy", "event": "Signed Up", "messageId": "c1"})[0], 200)
        server.kill()
        time.sleep(3)
        server = self.server()
        try:
            page = server.actions("cy", 0, wait=5)
            self.assertEqual(len(page["actions"]), 1, page)
            self.assertTrue(page["actions"][0]["late"])
            time.sleep(1)
            self.assertEqual(len(server.all_actions("cy")), 1)
        finally:
            server.stop()
        server = self.server()
        try:
            time.sleep(1)
            self.assertEqual(len(server.all_actions("cy")), 1, "the timer fired again after a second restart")
        finally:
            server.stop()


MERGE_RULES = """version: 1
campaign: inbox
rules:
  - id: welcome
    on: Signed In
    do:
      - notify: { id: welcome, message: "Welcome" }
  - id: echo
    on: Ping
    do:
      - message: { surface: home, title: "${event.properties.n}" }
"""


class MergeProtection(unittest.TestCase):
    def test_a_sign_in_or_alias_naming_a_known_user_hands_nothing_over(self):
        """The write key is in every app: an alias or identify naming a signed-in user's id as the earlier one
        handed that user's inbox, later actions and push devices to the sender (docs/events.md, "Identity merge").
        A known user (one named as a `userId`) is never merged; an anonymous visitor still is."""
        with tempfile.TemporaryDirectory() as tmp:
            os.makedirs(f"{tmp}/rules")
            with open(f"{tmp}/rules/inbox.yaml", "w") as f:
                f.write(MERGE_RULES)
            server = Server([f"{tmp}/rules"], f"{tmp}/db.sqlite").start()
            try:
                def inbox(user):
                    status, body = server.request("GET", f"/v1/users/{user}/inbox",
                                                  headers={"Authorization": "Bearer " + token(user)})
                    self.assertEqual(status, 200, body)
                    return [i["id"] for i in body["items"]]

                at = "2026-03-01T09:0{}:00Z".format
                self.assertEqual(server.post("/v1/track", {"userId": "victim", "event": "Signed In",
                                                           "messageId": "v1", "timestamp": at(0)})[0], 200)
                self.assertEqual(server.request(
                    "POST", "/v1/users/victim/devices", {"token": "victim-phone", "platform": "ios"},
                    {"Authorization": "Bearer " + token("victim"), "Content-Type": "application/json"})[0], 200)
                self.assertEqual(server.post("/v1/alias", {"userId": "mallory", "previousId": "victim",
                                                           "messageId": "x1", "timestamp": at(1)})[0], 200)
                self.assertEqual(server.post("/v1/identify", {"anonymousId": "victim", "userId": "mallory",
                                                              "messageId": "x2", "timestamp": at(2)})[0], 200)
                self.assertEqual(inbox("mallory"), [], "the victim's inbox went to the sender")
                self.assertEqual(inbox("victim"), ["welcome"])
                self.assertEqual(server.post("/v1/track", {"userId": "victim", "event": "Ping", "messageId": "v2",
                                                           "properties": {"n": "victim-private"},
                                                           "timestamp": at(3)})[0], 200)
                self.assertNotIn("victim-private", json.dumps(server.all_actions("mallory")))
                self.assertIn("victim-private", json.dumps(server.all_actions("victim")))
                status, export = server.request("GET", "/v1/users/mallory/export",
                                                headers={"Authorization": "Bearer " + ADMIN_KEY})
                self.assertEqual(status, 200, export)
                self.assertEqual((export["mergedIds"], [d["token"] for d in export["state"]["devices"]]), ([], []))

                # An anonymous visitor still merges into the user who signs in.
                self.assertEqual(server.post("/v1/track", {"anonymousId": "anon-7", "event": "Signed In",
                                                           "messageId": "a1", "timestamp": at(4)})[0], 200)
                self.assertEqual(server.post("/v1/identify", {"anonymousId": "anon-7", "userId": "zoe",
                                                              "messageId": "a2", "timestamp": at(5)})[0], 200)
                self.assertEqual(inbox("zoe"), ["welcome"])
            finally:
                self.assertEqual(server.stop(), 0)


class PushDevices(unittest.TestCase):
    def test_push_devices_are_registered_removed_and_kept(self):
        """POST /v1/users/{id}/devices keeps the app's push device in the user's state (docs/push.md); export shows
        it, DELETE removes it, a restart keeps it; bad bodies and other users' tokens are refused."""
        with tempfile.TemporaryDirectory() as tmp:
            server = Server(app_rules("stampbook"), f"{tmp}/db.sqlite").start()
            auth = {"Authorization": "Bearer " + token("zoe"), "Content-Type": "application/json"}
            admin = {"Authorization": "Bearer " + ADMIN_KEY}

            def devices():
                if server.url:
                    caught_up(server.url)
                status, export = server.request("GET", "/v1/users/zoe/export", headers=admin)
                self.assertEqual(status, 200, export)
                return sorted((d["token"], d["platform"], d["pushEnabled"]) for d in export["state"]["devices"])

            try:
                phone = {"token": "a" * 64, "platform": "ios", "app": "com.example.stampbook"}
                tablet = {"token": "fcm:token-1", "platform": "android", "pushEnabled": False}
                for d in (phone, tablet, phone):
                    self.assertEqual(server.request("POST", "/v1/users/zoe/devices", d, auth), (200, {"success": True}))
                self.assertEqual(devices(), [("a" * 64, "ios", True), ("fcm:token-1", "android", False)])
                for bad in ({"token": "x"}, {"token": "x", "platform": "web"}, {"token": "", "platform": "ios"},
                            {"token": "t" * 513, "platform": "ios"}, {"token": "a\u0000b", "platform": "ios"},
                            {"token": "a\nb", "platform": "ios"}, b"not json"):
                    status, body = server.request("POST", "/v1/users/zoe/devices", bad, auth)
                    self.assertEqual(status, 400, (bad, body))
                status, _ = server.request("POST", "/v1/users/zoe/devices", b"{" + b" " * 5000 + b"}", auth)
                self.assertEqual(status, 413)
                other = {"Authorization": "Bearer " + token("ann"), "Content-Type": "application/json"}
                self.assertEqual(server.request("POST", "/v1/users/zoe/devices", phone, other)[0], 403)
                self.assertEqual(server.request("DELETE", "/v1/users/zoe/devices/fcm%3Atoken-1", headers=auth)[0], 200)
                self.assertEqual(devices(), [("a" * 64, "ios", True)])
            finally:
                server.kill()
            server = Server(app_rules("stampbook"), f"{tmp}/db.sqlite").start()
            try:
                self.assertEqual(devices(), [("a" * 64, "ios", True)])
            finally:
                self.assertEqual(server.stop(), 0)


IDENTITY_RULES = """version: 1
campaign: cart
rules:
  - id: abandoned
    on: Product Added
    wait: 2s
    unless: Order Completed
    do:
      - push: { body: "Your ${event.properties.product} is waiting" }
  - id: hello
    on: Opened
    do:
      - message: { surface: home, title: Hello }
"""


class IdentityMerge(WallClockRules):
    """An anonymous visitor who signs in is one user in `beckon serve` too, across a kill -9."""
    RULES = IDENTITY_RULES

    def test_the_anonymous_cart_reaches_the_signed_in_user_after_a_restart(self):
        server = self.server()
        self.assertEqual(server.post("/v1/track", {"anonymousId": "a-9", "event": "Product Added", "messageId": "m1",
                                                   "properties": {"product": "Shoes"}})[0], 200)
        self.assertEqual(server.post("/v1/identify", {"userId": "ann", "anonymousId": "a-9", "messageId": "m2",
                                                      "traits": {"email": "ann@example.com"}})[0], 200)
        server.kill()
        server = self.server()
        try:
            # The anonymous id's event after the restart is Ann's.
            self.assertEqual(server.post("/v1/track", {"anonymousId": "a-9", "event": "Opened", "messageId": "m3"})[0], 200)
            deadline = time.time() + 10
            while time.time() < deadline and len(server.all_actions("ann")) < 2:
                time.sleep(0.2)
            ann = server.all_actions("ann")
            self.assertEqual(sorted(a["action"] for a in ann), ["message", "push"], ann)
            self.assertEqual({a["userId"] for a in ann}, {"ann"})
            push = next(a for a in ann if a["action"] == "push")
            self.assertEqual(push["push"]["body"], "Your Shoes is waiting")
            self.assertEqual(server.all_actions("a-9"), [])
            time.sleep(1)
            self.assertEqual(len(server.all_actions("ann")), 2, "an action fired twice")
        finally:
            self.assertEqual(server.stop(), 0)

    def test_an_order_after_sign_in_cancels_the_anonymous_carts_push(self):
        server = self.server()
        try:
            self.assertEqual(server.post("/v1/batch", {"batch": [
                {"type": "track", "anonymousId": "a-7", "event": "Product Added", "messageId": "n1"},
                {"type": "identify", "userId": "bo", "anonymousId": "a-7", "messageId": "n2"},
                {"type": "track", "userId": "bo", "event": "Order Completed", "messageId": "n3"}]})[0], 200)
            time.sleep(3)
            self.assertEqual(server.all_actions("bo"), [])
            self.assertEqual(server.all_actions("a-7"), [])
        finally:
            self.assertEqual(server.stop(), 0)


class TimedRulesLive(WallClockRules):
    """`schedule` and `inactive_for` run on the service's wall clock, with no further event."""

    def setUp(self):
        self.at = time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime(time.time() + 8))
        self.RULES = f"""version: 1
campaign: timed
rules:
  - id: news
    schedule: {self.at}
    do:
      - message: {{ surface: home, title: News }}
  - id: miss_you
    inactive_for: 3s
    do:
      - message: {{ surface: inbox, title: Still there? }}
"""
        super().setUp()

    def test_a_schedule_and_inactivity_come_due_on_the_wall_clock(self):
        server = self.server()
        try:
            self.assertEqual(server.post("/v1/track", {"userId": "amy", "event": "Opened", "messageId": "t1"})[0], 200)
            deadline = time.time() + 20
            while time.time() < deadline and len(server.all_actions("amy")) < 2:
                time.sleep(0.2)
            got = {a["rule"]: a for a in server.all_actions("amy")}
            self.assertEqual(sorted(got), ["miss_you", "news"], got)
            self.assertEqual(got["news"]["time"], self.at)
            time.sleep(1)
            self.assertEqual(len(server.all_actions("amy")), 2, "a timed rule ran twice")
        finally:
            self.assertEqual(server.stop(), 0)


BROADCAST_BASE = """version: 1
campaign: app
rules:
  - id: hello
    on: Opened
    do:
      - message: { surface: home, title: Hello }
"""


def broadcast_rules(at):
    return f"""version: 1
campaign: digest
rules:
  - id: news
    schedule: {at}
    if: default(user.plan, "") != "pro"
    do:
      - message: {{ surface: home, title: News }}
"""


class Broadcast(WallClockRules):
    """A schedule deployed by a reload reaches every stored user, including those who send nothing after it, and
    `GET /admin/audience` sizes it first (docs/time.md, "Schedules")."""
    RULES = BROADCAST_BASE
    USERS = [f"u{i:02}" for i in range(30)]

    def store_users(self, server):
        batch = [{"type": "identify", "userId": u, "messageId": f"id-{u}",
                  "traits": {"plan": "pro" if i % 3 == 0 else "free"}} for i, u in enumerate(self.USERS)]
        self.assertEqual(server.post("/v1/batch", {"batch": batch})[0], 200)

    def deploy(self, server, at):
        with open(f"{self.tmp.name}/rules/digest.yaml", "w") as f:
            f.write(broadcast_rules(at))
        got, body = server.request("POST", "/admin/reload", headers={"Authorization": f"Bearer {ADMIN_KEY}"})
        self.assertEqual(got, 200, body)

    def audience(self, server, rule, key=ADMIN_KEY):
        got, body = server.request("GET", "/admin/audience?rule=" + urllib.parse.quote(rule, safe=""),
                                   headers={"Authorization": f"Bearer {key}"})
        return got, body

    def test_audience_size_before_a_send(self):
        server = self.server()
        try:
            self.store_users(server)
            self.deploy(server, "every monday 10:00")
            deadline = time.time() + 20
            while True:
                got, body = self.audience(server, "digest/news")
                self.assertEqual(got, 200, body)
                if body["stored"] == 30 or time.time() > deadline:
                    break
                time.sleep(0.5)
            self.assertEqual((body["rule"], body["users"], body["stored"], body["undecodable"]),
                             ("digest/news", 20, 30, 0), body)
            self.assertEqual(self.audience(server, "news")[1]["users"], 20)
            got, body = self.audience(server, "digest/nws")
            self.assertEqual(got, 404, body)
            self.assertIn("did you mean 'digest/news'?", body["error"])
            self.assertEqual(server.request("GET", "/admin/audience", headers={"Authorization": f"Bearer {ADMIN_KEY}"})[0], 400)
            self.assertEqual(self.audience(server, "digest/news", key="wrong")[0], 401)
            # The console: beside the scheduled rule on the overview, and an edit's reach in the playground.
            c = HTTP(server.port)
            c.login()
            _, _, overview, _ = c.request("GET", "/console")
            self.assertRegex(overview, r"<th scope=\"row\">digest/news</th><td>every monday 10:00</td><td>20 of 30 stored users</td>")
            rules_path = f"{self.tmp.name}/rules/digest.yaml"
            edited = broadcast_rules("every monday 10:00").replace('if: default(user.plan, "") != "pro"', "if: true")
            status, _, page, _ = c.request("POST", "/console/playground", form={
                "csrf": c.csrf(), "path": rules_path, "rules": edited, "events": ""})
            self.assertEqual(status, 200, page[:300])
            self.assertIn("digest/news: this edit would reach 30 of 30 stored users now", page)
            self.assertEqual(server.all_actions("u01"), [], "sizing an audience fired something")
        finally:
            self.assertEqual(server.stop(), 0)

    def test_audience_size_from_the_command_line(self):
        server = self.server()
        try:
            self.store_users(server)
            self.deploy(server, "every monday 10:00")
        finally:
            self.assertEqual(server.stop(), 0)

        def audience(*args):
            return subprocess.run([BECKON, "audience", *store_args(self.db), *args], capture_output=True, text=True,
                                  timeout=60)

        r = audience("digest/news")
        self.assertEqual(r.returncode, 0, r.stderr)
        self.assertRegex(r.stdout, r"^digest/news: 20 of 30 stored users selected at \S+Z\n$")
        r = audience("--json", "news")
        self.assertEqual(r.returncode, 0, r.stderr)
        body = json.loads(r.stdout)
        self.assertEqual((body["rule"], body["users"], body["stored"], body["undecodable"]), ("digest/news", 20, 30, 0))
        # An edit before it is deployed: with no `if`, all 30 would be reached.
        edited = f"{self.tmp.name}/edited"
        os.makedirs(edited)
        with open(f"{edited}/digest.yaml", "w") as f:
            f.write(broadcast_rules("every monday 10:00").replace(
                'if: default(user.plan, "") != "pro"', 'if: true'))
        r = audience("--rules", edited, "--json", "digest/news")
        self.assertEqual(r.returncode, 0, r.stderr)
        self.assertEqual(json.loads(r.stdout)["users"], 30)
        r = audience("digest/nws")
        self.assertEqual(r.returncode, 1)
        self.assertIn("did you mean 'digest/news'?", r.stderr)
        self.assertEqual(audience("--at", "yesterday", "digest/news").returncode, 1)
        # Sizing fired nothing: a server started again has no action for anyone.
        server = self.server()
        try:
            self.assertEqual(server.all_actions("u01"), [])
        finally:
            self.assertEqual(server.stop(), 0)

    def test_a_schedule_reaches_stored_users_who_send_nothing_across_a_kill(self):
        server = self.server()
        self.store_users(server)
        at = time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime(time.time() + 8))
        self.deploy(server, at)
        # Killed while the broadcast may be reaching the stored users: it goes on after the restart.
        server.kill()
        server = self.server()
        try:
            chosen = [u for i, u in enumerate(self.USERS) if i % 3 != 0]
            deadline = time.time() + 30
            while time.time() < deadline and sum(len(server.all_actions(u)) for u in chosen) < len(chosen):
                time.sleep(0.3)
            for u in self.USERS:
                got = server.all_actions(u)
                if u in chosen:
                    self.assertEqual([(a["rule"], a["time"]) for a in got], [("news", at)], u)
                else:
                    self.assertEqual(got, [], u)
        finally:
            self.assertEqual(server.stop(), 0)
        server = self.server()
        try:
            time.sleep(1)
            self.assertEqual(sum(len(server.all_actions(u)) for u in self.USERS), 20, "a run reached a user twice")
        finally:
            self.assertEqual(server.stop(), 0)


class OffPlan(WallClockRules):
    """Events that do not fit the tracking plan are accepted, processed with what converts without loss, and counted
    (docs/events.md, "Events off the tracking plan")."""
    RULES = """version: 1
campaign: shop
rules:
  - id: big_order
    on: Order Completed
    where: event.properties.revenue > 10
    do:
      - message: { surface: home, title: Thanks }
"""
    PLAN = """version: 1
tracking_plan: shop
events:
  Order Completed:
    properties:
      revenue: { type: number }
"""

    def test_off_plan_events_are_accepted_converted_and_counted(self):
        with open(f"{self.tmp.name}/rules/plan.yaml", "w") as f:
            f.write(self.PLAN)
        server = self.server()
        try:
            def order(user, revenue):
                return {"type": "track", "event": "Order Completed", "userId": user, "messageId": f"m-{user}",
                        "properties": {"revenue": revenue}}
            batch = [order("fits", 20), order("converts", "18.50"), order("off", "lots"),
                     {"type": "track", "event": "Wishlist Viewed", "userId": "unknown", "messageId": "m-w"}]
            self.assertEqual(server.post("/v1/batch", {"batch": batch})[0], 200)
            deadline = time.time() + 10
            while time.time() < deadline and len(server.all_actions("converts")) < 1:
                time.sleep(0.1)
            self.assertEqual(len(server.all_actions("converts")), 1, "the converted order's message")
            self.assertEqual(len(server.all_actions("fits")), 1)
            self.assertEqual(server.all_actions("off"), [])
            # (The counters are added once the commit is written, just after its actions can be read.)
            deadline = time.time() + 10
            while True:
                text = server.request("GET", "/metrics")[1].decode()
                if 'beckon_ingest_events_total{result="off_plan"} 2' in text or time.time() > deadline:
                    break
                time.sleep(0.1)
            self.assertIn('beckon_ingest_events_total{result="off_plan"} 2', text)
            self.assertIn('beckon_ingest_events_total{result="accepted"} 4', text)
        finally:
            self.assertEqual(server.stop(), 0)


class LateEventsReplay(WallClockRules):
    """Late events are judged as they arrived, live and in the console's timeline alike (docs/events.md, "Events out of
    time order"): a run that came due before a batch of late events arrived fired without them, and the timeline's
    replay lets time pass to the service's clock before each event, so it says the same."""
    RULES = BROADCAST_BASE

    def test_a_run_before_late_events_is_judged_without_them_in_the_timeline_too(self):
        server = self.server()
        try:
            self.assertEqual(server.post("/v1/batch", {"batch": [
                {"type": "identify", "userId": "u", "messageId": "i-u", "traits": {"plan": "free"}}]})[0], 200)
            at = time.time() + 4
            stamp = time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime(at))
            with open(f"{self.tmp.name}/rules/digest.yaml", "w") as f:
                f.write(broadcast_rules(stamp).replace('if: default(user.plan, "") != "pro"',
                                                       'if: count("Opened", "lifetime") == 0'))
            got, body = server.request("POST", "/admin/reload", headers={"Authorization": f"Bearer {ADMIN_KEY}"})
            self.assertEqual(got, 200, body)
            # The run comes due (nothing was opened yet), then an Opened stamped before it arrives, late.
            deadline = time.time() + 20
            while time.time() < deadline and not server.all_actions("u"):
                time.sleep(0.2)
            self.assertEqual([a["rule"] for a in server.all_actions("u")], ["news"])
            before = time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime(at - 2))
            self.assertEqual(server.post("/v1/batch", {"batch": [
                {"type": "track", "event": "Opened", "userId": "u", "messageId": "o-u", "timestamp": before}]})[0], 200)
            c = HTTP(server.port)
            c.login()
            _, _, page, _ = c.request("GET", "/console/user?id=u")
            steps = html.unescape(page)
            self.assertIn("✓ digest/news", steps, "the timeline fired the run as the service did")
            self.assertNotIn("✗ digest/news", steps)
        finally:
            self.assertEqual(server.stop(), 0)


class Shutdown(unittest.TestCase):
    def test_sigterm_answers_long_polls_and_stops_promptly(self):
        with tempfile.TemporaryDirectory() as tmp:
            server = Server(app_rules("stampbook"), f"{tmp}/db.sqlite").start()
            answers = []
            poll = threading.Thread(target=lambda: answers.append(server.actions("nobody", 0, wait=30)))
            poll.start()
            time.sleep(0.5)
            started = time.time()
            self.assertEqual(server.stop(), 0)
            poll.join(timeout=10)
            self.assertLess(time.time() - started, 10, "a long poll held the stop")
            self.assertEqual(answers, [{"actions": [], "cursor": "0"}])

    def test_sigterm_does_not_wait_for_bodies_still_being_sent(self):
        # A client that sent a head and part of its body, and one that waits for a 100 Continue with none: the stop
        # closes them (their requests were not taken) instead of waiting out the 60 s body timeout; a request whose
        # body is whole at the stop is answered.
        with tempfile.TemporaryDirectory() as tmp:
            server = Server(app_rules("stampbook"), f"{tmp}/db.sqlite").start()
            head = (f"POST /v1/track HTTP/1.1\r\nHost: x\r\nAuthorization: {basic(KEY)}\r\n"
                    "Content-Type: application/json\r\n")
            half = socket.create_connection(("127.0.0.1", server.port), timeout=5)
            half.sendall((head + "Content-Length: 100\r\n\r\n").encode() + b'{"userId":')
            expect = socket.create_connection(("127.0.0.1", server.port), timeout=5)
            expect.sendall((head + "Content-Length: 100\r\nExpect: 100-continue\r\n\r\n").encode())
            time.sleep(0.5)
            started = time.time()
            self.assertEqual(server.stop(), 0)
            self.assertLess(time.time() - started, 10, "a body still being sent held the stop")
            for s in (half, expect):
                s.settimeout(5)
                try:
                    data = s.recv(65536)
                except OSError:
                    data = b""
                self.assertFalse(data.startswith(b"HTTP/1.1 200"), data)
                s.close()


class BadRequests(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        cls.tmp = tempfile.TemporaryDirectory()
        cls.db = f"{cls.tmp.name}/db.sqlite"
        cls.server = Server(app_rules("stampbook"), cls.db).start()

    @classmethod
    def tearDownClass(cls):
        cls.server.stop()
        cls.tmp.cleanup()

    def good(self, n=1):
        return {"type": "track", "userId": "u", "event": "Signed In", "timestamp": "2026-03-02T09:00:00Z",
                "messageId": f"m{n}"}

    def refused(self, status, body, path="/v1/batch", key=KEY, headers=None):
        before = event_count(self.db)
        if headers is not None:
            got, answer = self.server.request("POST", path, body, headers)
        else:
            got, answer = self.server.post(path, body, key=key)
        self.assertEqual(got, status, answer)
        self.assertEqual(event_count(self.db), before, "a refused request stored events")
        return answer

    def test_bad_json(self):
        a = self.refused(400, b'{"batch": [{"type": "track", "userId": ')
        self.assertFalse(a["success"])
        self.refused(400, b"not json", path="/v1/track")

    def test_one_bad_event_refuses_the_whole_batch_and_says_which(self):
        bad = {"type": "track", "event": "Signed In", "timestamp": "2026-03-02T09:00:00Z"}
        a = self.refused(400, {"batch": [self.good(1), self.good(2), bad]})
        self.assertEqual(a["event"], 2)
        self.assertIn("userId", a["error"])

    def test_oversize_event_and_request(self):
        big = dict(self.good(3), properties={"x": "y" * 33 * 1024})
        a = self.refused(400, {"batch": [self.good(4), big]})
        self.assertEqual(a["event"], 1)
        many = {"batch": [dict(self.good(i), properties={"x": "y" * 20000}) for i in range(30)]}
        self.refused(400, many)

    def test_wrong_or_missing_write_key(self):
        self.refused(401, {"batch": [self.good(5)]}, key="wrong")
        self.refused(401, {"batch": [self.good(5)]}, headers={"Content-Type": "application/json"})

    def test_user_endpoints_need_the_users_own_token(self):
        s = self.server
        self.assertEqual(s.request("GET", "/v1/users/u/actions")[0], 401)
        self.assertEqual(s.request("GET", "/v1/users/u/actions", headers={"Authorization": "Bearer " + token("u", secret="x" * 40)})[0], 401)
        self.assertEqual(s.request("GET", "/v1/users/u/actions", headers={"Authorization": "Bearer " + token("u", exp=1)})[0], 401)
        self.assertEqual(s.request("GET", "/v1/users/u/actions", headers={"Authorization": "Bearer " + token("other")})[0], 403)
        self.assertEqual(s.request("GET", "/v1/users/u/inbox", headers={"Authorization": "Bearer " + token("other")})[0], 403)
        self.assertEqual(s.request("POST", "/v1/users/u/inbox/welcome/read", headers={"Authorization": "Bearer " + token("other")})[0], 403)
        self.assertEqual(s.request("GET", "/v1/users/u/actions?after=x", headers={"Authorization": "Bearer " + token("u")})[0], 400)

    def test_an_id_holding_nul_is_refused_in_events_and_paths(self):
        # SQLite's text binding would cut "victim\u0000x" at the NUL (the victim's own id: their actions, state and
        # forget shared with whoever sends it), and PostgreSQL refuses NUL in text.
        s = self.server
        victim = {"type": "track", "userId": "victim", "event": "Signed In", "timestamp": "2026-03-02T09:00:00Z",
                  "messageId": "nul1"}
        self.assertEqual(s.post("/v1/batch", {"batch": [victim]})[0], 200)
        before = s.all_actions("victim")
        self.assertTrue(before)
        for key in ("userId", "anonymousId", "messageId"):
            a = self.refused(400, {"batch": [self.good(6), dict(victim, **{key: "victim\u0000x"})]})
            self.assertEqual(a["event"], 1, a)
            self.assertIn("U+0000", a["error"], a)
        alias = {"type": "alias", "userId": "victim", "previousId": "victim\u0000x"}
        self.assertIn("U+0000", self.refused(400, alias, path="/v1/alias")["error"])
        admin = {"Authorization": "Bearer " + ADMIN_KEY}
        status, body = s.request("DELETE", "/v1/users/victim%00x", headers=admin)
        self.assertEqual(status, 400, body)
        self.assertEqual(s.request("GET", "/v1/users/victim%00x/export", headers=admin)[0], 400)
        self.assertEqual(s.request("GET", "/v1/users/victim%00x/actions",
                                   headers={"Authorization": "Bearer " + token("victim\u0000x")})[0], 400)
        self.assertEqual(s.all_actions("victim"), before, "the victim's actions changed")

    def test_expect_100_continue_is_answered_before_the_body(self):
        # curl and other clients send `Expect: 100-continue` and wait for the interim answer (curl 1 s) before the body.
        body = json.dumps({"type": "track", "userId": "e-1", "event": "Signed In", "timestamp": "2026-03-02T09:00:00Z",
                           "messageId": "e-1", "properties": {"x": "y" * 2000}}).encode()
        s = socket.create_connection(("127.0.0.1", self.server.port), timeout=5)
        self.addCleanup(s.close)
        s.sendall((f"POST /v1/track HTTP/1.1\r\nHost: x\r\nAuthorization: {basic(KEY)}\r\n"
                   f"Content-Type: application/json\r\nContent-Length: {len(body)}\r\nExpect: 100-continue\r\n\r\n").encode())
        s.settimeout(0.8)
        interim = s.recv(65536)
        self.assertTrue(interim.startswith(b"HTTP/1.1 100 Continue\r\n"), interim)
        s.sendall(body)
        s.settimeout(5)
        final = interim.split(b"\r\n\r\n", 1)[1]
        while b"\r\n\r\n" not in final:
            final += s.recv(65536)
        self.assertTrue(final.startswith(b"HTTP/1.1 200 OK\r\n"), final)

    def test_a_user_id_is_percent_decoded_in_the_path(self):
        user = "ana b/ç"
        ev = {"type": "track", "userId": user, "event": "Signed In", "timestamp": "2026-03-02T09:00:00Z", "messageId": "pd1"}
        self.assertEqual(self.server.post("/v1/batch", {"batch": [ev]})[0], 200)
        path = "/v1/users/" + urllib.parse.quote(user, safe="") + "/actions"
        status, body = self.server.request("GET", path, headers={"Authorization": "Bearer " + token(user)})
        self.assertEqual(status, 200, body)
        # (The welcome and its push.)
        self.assertEqual([(a["userId"], a["action"]) for a in body["actions"]], [(user, "notify"), (user, "push")])
        self.assertEqual(self.server.request("GET", path, headers={"Authorization": "Bearer " + token("ana b")})[0], 403)

    def test_canonically_equivalent_ids_are_different_users(self):
        # A token for "café" (é as one code point) does not read "cafe" + a combining accent: ids are bytes.
        path = "/v1/users/" + urllib.parse.quote("cafe\u0301", safe="") + "/actions"
        self.assertEqual(self.server.request("GET", path, headers={"Authorization": "Bearer " + token("caf\u00e9")})[0], 403)

    def test_health_and_metrics(self):
        self.assertEqual(self.server.request("GET", "/livez")[0], 200)
        self.assertEqual(self.server.request("GET", "/readyz")[0], 200)
        status, text = self.server.request("GET", "/metrics")
        self.assertEqual(status, 200)
        text = text.decode()
        for name in ("beckon_ingest_events_total{result=\"rejected\"}", "beckon_build_info", "beckon_http_request_duration_seconds"):
            self.assertIn(name, text)
        self.assertNotIn("/v1/users/u/", text, "a user id in a metric label")


class Admin(unittest.TestCase):
    def test_admin_rules_needs_the_admin_key_and_lists_the_files(self):
        with tempfile.TemporaryDirectory() as tmp:
            server = Server(app_rules("stampbook"), f"{tmp}/db.sqlite").start()
            try:
                for headers in ({}, {"Authorization": basic(KEY)}, {"Authorization": "Bearer " + KEY},
                                {"Authorization": "Bearer " + token("mia")}, {"Authorization": basic(ADMIN_KEY)},
                                {"Authorization": "Bearer " + ADMIN_KEY + "x"}):
                    self.assertEqual(server.request("GET", "/admin/rules", headers=headers)[0], 401, headers)
                status, body = server.request("GET", "/admin/rules", headers={"Authorization": "Bearer " + ADMIN_KEY})
                self.assertEqual(status, 200)
                want = {}
                for path in glob.glob(f"{ROOT}/rules/stampbook/*.yaml"):  # (its campaign tests are read too)
                    with open(path, "rb") as f:
                        want[os.path.basename(path)] = hashlib.sha256(f.read()).hexdigest()
                got = {os.path.basename(f["path"]): f["sha256"] for f in body["files"]}
                self.assertEqual(got, want)
                self.assertIn("stampbook_welcome", [u["name"] for u in body["rulesets"]])
            finally:
                server.stop()

    def test_an_admin_key_may_not_be_a_write_key(self):
        with tempfile.TemporaryDirectory() as tmp:
            r = subprocess.run([BECKON, "serve", *app_rules("stampbook"), *store_args(f"{tmp}/db.sqlite"), "--port", "0",
                                "--write-key", KEY, "--admin-key", KEY], capture_output=True, text=True, timeout=30)
            self.assertEqual(r.returncode, 1)
            self.assertIn("admin key", r.stderr)


class Startup(unittest.TestCase):
    def test_rules_with_errors_refuse_to_start(self):
        with tempfile.TemporaryDirectory() as tmp:
            with open(f"{tmp}/bad.yaml", "w") as f:
                f.write("version: 1\ncampaign: x\nrules:\n  - id: r\n    on: A\n    do: [{ mesage: {} }]\n")
            r = subprocess.run([BECKON, "serve", tmp, *store_args(f"{tmp}/db.sqlite"), "--port", "0", "--write-key", KEY],
                               capture_output=True, text=True, timeout=30)
            self.assertEqual(r.returncode, 1)
            self.assertIn("bad.yaml:6:", r.stderr)
            # (Nothing is created: no SQLite file, no tables in the fleet's database.)
            if STORE == "postgres":
                tables = subprocess.run(["psql", pg_database(f"{tmp}/db.sqlite"), "-tAc",
                                         "SELECT count(*) FROM pg_tables WHERE tablename LIKE 'beckon%'"],
                                        capture_output=True, text=True, check=True).stdout.strip()
                self.assertEqual(tables, "0")
            else:
                self.assertFalse(os.path.exists(f"{tmp}/db.sqlite"))

    def test_no_write_key_refuses_to_start(self):
        with tempfile.TemporaryDirectory() as tmp:
            r = subprocess.run([BECKON, "serve", *app_rules("stampbook"), *store_args(f"{tmp}/db.sqlite"), "--port", "0"],
                               capture_output=True, text=True, timeout=30,
                               env={k: v for k, v in os.environ.items() if k != "BECKON_WRITE_KEYS"})
        self.assertEqual(r.returncode, 1)
        self.assertIn("write key", r.stderr)


if __name__ == "__main__":
    unittest.main(verbosity=2)
