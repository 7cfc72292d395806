#!/usr/bin/env python3
"""Tests of operating `beckon serve` as a process on loopback: server-side destinations (an outbox delivered at least
once, with retries, backoff, Retry-After and dead letters, and the `beckon outbox` command), live reload of the rules
(`POST /admin/reload` and SIGHUP), privacy requests (export and forget, over HTTP and with `beckon user`), and the
admin endpoints' auth. `BECKON=path/to/beckon python3 Tests/Service/operations_test.py`. Every server and every
receiver listens on 127.0.0.1 only, on a free port, is bounded in time and is stopped by the test that started it.

What these tests pin down where docs/operations.md could be read more than one way:

- Delivery times (backoff, Retry-After, timeouts) are on the machine's clock whatever `--clock` says; the delivery
  tests run `--clock wall`, the reload and privacy tests `--clock events` (deliveries still happen there).
- `beckon_deliveries_total{destination,result}` counts attempts by outcome: every failed attempt that will be tried
  again is one `retried`, the attempt after which an action is dead one `dead`, a 2xx one `delivered`. A series
  never incremented may be absent from /metrics and reads as 0.
- `--retry ID` / `--retry-dead` reset the attempts, so the next request says `Beckon-Attempt: 1`. Otherwise the
  attempt count is stored with the outbox row: the first attempt after a restart continues it.
- A dead row's `lastError` after an HTTP answer names the status code (e.g. "HTTP 400").
- The text table of `beckon outbox` shows each listed row's action id, destination and state word.
- With `body: action` (the default) the request body equals the action object pulled from /v1/users/U/actions.
- A reload that changes no file answers 200 with `"changed": false`; a pending delayed action keeps its due time
  across a reload (it is not rescheduled).
- The 422 `diagnostics` text holds `beckon validate PATH`'s output (which validate writes to standard error) for the
  same PATH the server was started with, line for line, except perhaps validate's final summary line
  ("N files, M rules: …"), which may or may not be part of it.
- `DELETE /v1/users/U` of a user the service does not have answers 200 `{"forgotten": false}`; its export is 200 with
  `state: null` and empty lists. A forget that answered 200 is durable: a `kill -9` right after it and the restart
  (which replays the input log) do not bring the user back.
- An exported event holds every field of the event as it was posted (the service may add fields, e.g. its time).
- After a forget, the user's inbox is 404 (a user the service does not have) or empty.
- `beckon user export` after a graceful stop prints JSON equal to the HTTP export just before the stop; while a server
  holds the database, `beckon user export|forget` exit non-zero with a message and change nothing.
"""
import hashlib
import http.client
import json
import os
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
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from unittest import mock

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from service_test import (  # noqa: E402,F401
    ADMIN_KEY, BECKON, KEY, ROOT, SECRET, STORE, Server, basic, caught_up, dry_run, sqlite_only, store_args, token)

SECRET_ENV = "BECKON_TEST_CAPI_AUTH"
SECRET_VALUE = "Bearer capi-secret-7f3a"


# ---------------------------------------------------------------------------------------------------------------
# A local HTTP receiver with a scripted policy.


class Request:
    def __init__(self, method, path, headers, body, at):
        self.method, self.path, self.headers, self.body, self.at = method, path, headers, body, at

    def json(self):
        return json.loads(self.body)

    @property
    def key(self):
        return self.headers.get("idempotency-key")

    @property
    def attempt(self):
        return self.headers.get("beckon-attempt")

    def __repr__(self):
        return f"<{self.method} {self.path} key={self.key} attempt={self.attempt} at={self.at:.3f}>"


# Policies: (index of the request at this receiver from 0, the request) -> (status, headers, seconds to wait first).
def always(status):
    return lambda i, req: (status, {}, 0)


def fail_first(n, status=503):
    return lambda i, req: (status if i < n else 200, {}, 0)


def sleep_once(seconds):
    return lambda i, req: (200, {}, seconds if i == 0 else 0)


def stall_body_once(seconds):
    """The first answer's head, then one byte of its body, then nothing for `seconds`."""
    return lambda i, req: (200, {STALL: str(seconds)} if i == 0 else {}, 0)


STALL = "x-test-stall-body"


def throttle_once(retry_after=1):
    return lambda i, req: (429, {"Retry-After": str(retry_after)}, 0) if i == 0 else (200, {}, 0)


class _HTTPServer(ThreadingHTTPServer):
    daemon_threads = True
    block_on_close = False  # a handler sleeping past a timeout does not hold the stop
    allow_reuse_address = True


class Receiver:
    """A destination's endpoint on loopback: records (method, path, headers, body, time) of each request and answers
    as `policy` says. `port` may be reserved before it starts: until then connections to it are refused."""

    def __init__(self, policy=None, port=0):
        self.policy = policy or always(200)
        self.port = port
        self.requests = []
        self.cond = threading.Condition()
        self.httpd = None
        self.thread = None

    def start(self):
        receiver = self

        class Handler(BaseHTTPRequestHandler):
            def log_message(self, *args):
                pass

            def read_body(self):
                if "chunked" in (self.headers.get("Transfer-Encoding") or "").lower():
                    out = b""
                    while True:
                        size = int(self.rfile.readline().split(b";")[0].strip() or b"0", 16)
                        if size == 0:
                            while self.rfile.readline() not in (b"\r\n", b"\n", b""):
                                pass
                            return out
                        out += self.rfile.read(size)
                        self.rfile.readline()
                return self.rfile.read(int(self.headers.get("Content-Length") or 0))

            def answer(self):
                body = self.read_body()
                req = Request(self.command, self.path, {k.lower(): v for k, v in self.headers.items()}, body,
                              time.monotonic())
                with receiver.cond:
                    index = len(receiver.requests)
                    receiver.requests.append(req)
                    receiver.cond.notify_all()
                status, headers, delay = receiver.policy(index, req)
                headers = dict(headers)
                stall = float(headers.pop(STALL, 0))
                if delay:
                    time.sleep(delay)
                try:
                    text = b'{"ok":true}' if 200 <= status < 300 else b'{"error":"scripted"}'
                    self.send_response(status)
                    for k, v in headers.items():
                        self.send_header(k, v)
                    self.send_header("Content-Type", "application/json")
                    self.send_header("Content-Length", str(len(text)))
                    self.end_headers()
                    if stall:
                        self.wfile.write(text[:1])
                        self.wfile.flush()
                        time.sleep(stall)
                        return
                    self.wfile.write(text)
                except OSError:
                    pass  # the client gave up (a timeout)

            do_POST = do_PUT = do_PATCH = answer

        self.httpd = _HTTPServer(("127.0.0.1", self.port), Handler)
        self.port = self.httpd.server_address[1]
        self.thread = threading.Thread(target=self.httpd.serve_forever, kwargs={"poll_interval": 0.05}, daemon=True)
        self.thread.start()
        return self

    def stop(self):
        if self.httpd:
            self.httpd.shutdown()
            self.httpd.server_close()
            self.thread.join(timeout=5)
            self.httpd = None

    def url(self, path="/events"):
        return f"http://127.0.0.1:{self.port}{path}"

    def got(self, key=None):
        with self.cond:
            return [r for r in self.requests if key is None or r.key == key]

    def wait_for(self, n, key=None, timeout=10):
        """The requests (for `key`) once there are at least n, or fail after `timeout` seconds."""
        deadline = time.monotonic() + timeout
        with self.cond:
            while True:
                got = [r for r in self.requests if key is None or r.key == key]
                if len(got) >= n:
                    return got
                left = deadline - time.monotonic()
                if left <= 0:
                    raise AssertionError(f"{len(got)} requests for {key} after {timeout} s, expected {n}: {got}")
                self.cond.wait(left)


def free_port():
    """A loopback port nothing listens on (yet): connections to it are refused."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


# ---------------------------------------------------------------------------------------------------------------
# Helpers.


def wait_until(fn, timeout=10, interval=0.1, what="condition"):
    deadline = time.monotonic() + timeout
    while True:
        value = fn()
        if value:
            return value
        if time.monotonic() > deadline:
            raise AssertionError(f"{what} not met within {timeout} s (last: {value!r})")
        time.sleep(interval)


def cli(*args, timeout=30):
    return subprocess.run([BECKON, *args], capture_output=True, text=True, timeout=timeout)


OUTBOX_KEYS = {"actionId", "destination", "userId", "state", "attempts", "nextAttempt", "lastError"}


def outbox(db, *extra):
    """`beckon outbox --db DB --json EXTRA…` (`--postgres URL` on a fleet), one object a line."""
    r = cli("outbox", *store_args(db), "--json", *extra)
    assert r.returncode == 0, (r.returncode, r.stdout, r.stderr)
    rows = [json.loads(line) for line in r.stdout.splitlines() if line.strip()]
    for row in rows:
        assert OUTBOX_KEYS <= set(row), row
    return rows


def outbox_row(db, action_id, *extra):
    rows = [r for r in outbox(db, *extra) if r["actionId"] == action_id]
    assert len(rows) <= 1, rows
    return rows[0] if rows else None


_SAMPLE = re.compile(r'^([a-zA-Z_:][a-zA-Z0-9_:]*)(?:\{(.*)\})?\s+(\S+)')
_LABEL = re.compile(r'([a-zA-Z_][a-zA-Z0-9_]*)="((?:[^"\\]|\\.)*)"')


def metric(server, name, **labels):
    """The value of the series `name` with these labels (others may be there too); 0 when it is absent."""
    status, text = server.request("GET", "/metrics")
    assert status == 200, status
    for line in text.decode().splitlines():
        m = _SAMPLE.match(line)
        if not m or m.group(1) != name:
            continue
        have = dict(_LABEL.findall(m.group(2) or ""))
        if all(have.get(k) == v for k, v in labels.items()):
            return float(m.group(3))
    return 0.0


def deliveries(server, destination, result):
    return metric(server, "beckon_deliveries_total", destination=destination, result=result)


def track(user, event, mid, ts=None, **properties):
    e = {"type": "track", "userId": user, "event": event, "messageId": mid}
    if ts:
        e["timestamp"] = ts
    if properties:
        e["properties"] = properties
    return e


def write(path, text):
    """Writes a whole file at once (a reload never reads half a file)."""
    with open(path + ".tmp", "w") as f:
        f.write(text)
    os.replace(path + ".tmp", path)


ADMIN = {"Authorization": "Bearer " + ADMIN_KEY}


class OpsCase(unittest.TestCase):
    def setUp(self):
        tmp = tempfile.TemporaryDirectory()
        self.addCleanup(tmp.cleanup)
        self.tmp = tmp.name
        self.rules = f"{self.tmp}/rules"
        os.makedirs(self.rules)
        self.db = f"{self.tmp}/db.sqlite"

    def files(self, **files):
        for name, text in files.items():
            write(f"{self.rules}/{name}.yaml", text)

    def receiver(self, policy=None, port=0, start=True):
        r = Receiver(policy, port)
        self.addCleanup(r.stop)
        return r.start() if start else r

    def serve(self, clock="wall", env=None):
        """`beckon serve` of this test's rules and database, with the destination's secret in its environment."""
        server = Server([self.rules], self.db, clock=clock)
        with mock.patch.dict(os.environ, {SECRET_ENV: SECRET_VALUE} if env is None else env):
            server.start()
        self.addCleanup(server.stop)
        return server

    def post(self, server, *events):
        status, body = server.post("/v1/batch", {"batch": list(events)})
        self.assertEqual(status, 200, body)

    def only(self, actions, **fields):
        got = [a for a in actions if all(a.get(k) == v for k, v in fields.items())]
        self.assertEqual(len(got), 1, (fields, actions))
        return got[0]

    def export(self, server, user):
        status, body = server.request("GET", f"/v1/users/{user}/export", headers=ADMIN)
        self.assertEqual(status, 200, body)
        self.assertEqual(body["userId"], user)
        return body

    def forget(self, server, user, forgotten):
        """DELETE /v1/users/USER with the admin key: 200 {"userId": USER, "forgotten": FORGOTTEN}."""
        status, body = server.request("DELETE", f"/v1/users/{user}", headers=ADMIN)
        self.assertEqual(status, 200, body)
        self.assertEqual((body["userId"], body["forgotten"]), (user, forgotten), body)

    def assertForgotten(self, export):
        self.assertIsNone(export["state"], export)
        self.assertEqual((export["actions"], export["outbox"], export["events"]), ([], [], []), export)


# ---------------------------------------------------------------------------------------------------------------
# Destinations.

OPS_RULES = """version: 1
ruleset: ops
rules:
  - id: flaky
    on: Go Flaky
    do:
      - emit: { event: Flaky, payload: { n: 1 } }
      - message: { surface: launch, title: Hello }
      - emit: { event: Unlisted, payload: { n: 2 } }
  - id: slow
    on: Go Slow
    do: [ { emit: { event: Slow, payload: { n: 1 } } } ]
  - id: throttled
    on: Go Throttled
    do: [ { emit: { event: Throttled, payload: { n: 1 } } } ]
  - id: rejected
    on: Go Rejected
    do: [ { emit: { event: Rejected, payload: { n: 1 } } } ]
  - id: broken
    on: Go Broken
    do: [ { emit: { event: Broken, payload: { n: 1 } } } ]
  - id: conversion
    on: Go Payload
    do:
      - emit: { event: Purchase, payload: { event_id: "${sha256('Purchase:' + user.id)}", value: 42, currency: EUR } }
"""


def settings(*destinations):
    return "version: 1\nsettings: ops\ndestinations:\n" + "".join(destinations)


def destination(name, url, **keys):
    """One item of `destinations:`; values are YAML text (`"[Flaky]"`, `"200ms"`)."""
    return f"  - name: {name}\n    url: {url}\n" + "".join(f"    {k}: {v}\n" for k, v in keys.items())


class Delivery(OpsCase):
    def test_503_twice_then_delivered_with_one_idempotency_key_and_the_headers(self):
        capi = self.receiver(fail_first(2))
        messages = self.receiver()
        self.files(ops=OPS_RULES, settings=settings(
            destination("flaky", capi.url("/events"), headers='{ X-Static: "1" }',
                        secret_headers=f"{{ Authorization: {SECRET_ENV} }}", kinds="[emit]", events="[Flaky]",
                        timeout="1s", max_attempts=4, backoff="200ms", max_backoff="2s"),
            destination("messages", messages.url("/messages"), kinds="[message]", backoff="100ms")))
        server = self.serve()
        self.post(server, track("fay", "Go Flaky", "f1"))
        got = capi.wait_for(3)
        actions = server.all_actions("fay")
        emit = self.only(actions, action="emit", event="Flaky")
        message = self.only(actions, action="message")
        unlisted = self.only(actions, action="emit", event="Unlisted")
        time.sleep(0.8)  # more than the next backoff would be: nothing else comes
        got = capi.got()
        self.assertEqual(len(got), 3, got)
        self.assertEqual([r.key for r in got], [emit["id"]] * 3)
        self.assertEqual([r.attempt for r in got], ["1", "2", "3"])
        for r in got:
            self.assertEqual((r.method, r.path), ("POST", "/events"))
            self.assertTrue(r.headers.get("content-type", "").startswith("application/json"), r.headers)
            self.assertEqual(r.headers.get("x-static"), "1")
            self.assertEqual(r.headers.get("authorization"), SECRET_VALUE)
            self.assertEqual(r.json(), emit, "body: action sends the action as pulled")
        # Backoff 200 ms, doubling, each delay between 50% and 100% of its value.
        self.assertGreaterEqual(got[1].at - got[0].at, 0.09)
        self.assertGreaterEqual(got[2].at - got[1].at, 0.19)
        self.assertLess(got[2].at - got[0].at, 5)
        # kinds: the message goes to its own destination only; an emitted event no destination lists goes nowhere.
        self.assertEqual([r.key for r in messages.wait_for(1)], [message["id"]])
        self.assertEqual(messages.got()[0].json(), message)
        self.assertNotIn(unlisted["id"], [r.key for r in capi.got() + messages.got()])
        self.assertNotIn(SECRET_VALUE, messages.got()[0].headers.get("authorization", ""))
        # The outbox: delivered rows are listed with --all only.
        wait_until(lambda: (outbox_row(self.db, emit["id"], "--all") or {}).get("state") == "delivered",
                   what="flaky delivered in the outbox")
        row = outbox_row(self.db, emit["id"], "--all")
        self.assertEqual((row["destination"], row["userId"], row["attempts"]), ("flaky", "fay", 3))
        self.assertIsNone(outbox_row(self.db, emit["id"]))
        self.assertEqual((deliveries(server, "flaky", "retried"), deliveries(server, "flaky", "delivered"),
                          deliveries(server, "flaky", "dead")), (2, 1, 0))
        self.assertEqual(deliveries(server, "messages", "delivered"), 1)

    def slow_attempts(self, policy, user):
        """A `Go Slow` of `user` to a PUT destination with a 500 ms timeout that answers as `policy`: the server, the
        receiver, the action and the receiver's first two requests."""
        slow = self.receiver(policy)
        self.files(ops=OPS_RULES, settings=settings(
            destination("slow", slow.url("/slow"), method="PUT", events="[Slow]", timeout="500ms", max_attempts=4,
                        backoff="100ms")))
        server = self.serve()
        self.post(server, track(user, "Go Slow", "s1"))
        got = slow.wait_for(2, timeout=10)
        return server, slow, self.only(server.all_actions(user), action="emit"), got

    def assertDeliveredAfterOneRetry(self, server, emit):
        wait_until(lambda: (outbox_row(self.db, emit["id"], "--all") or {}).get("state") == "delivered",
                   what="slow delivered")
        self.assertEqual((deliveries(server, "slow", "retried"), deliveries(server, "slow", "delivered")), (1, 1))

    def test_a_timeout_is_tried_again(self):
        server, slow, emit, _ = self.slow_attempts(sleep_once(2.0), "sam")
        time.sleep(0.6)
        got = slow.got()
        self.assertEqual(len(got), 2, got)
        self.assertEqual([(r.method, r.path, r.key, r.attempt) for r in got],
                         [("PUT", "/slow", emit["id"], "1"), ("PUT", "/slow", emit["id"], "2")])
        self.assertGreaterEqual(got[1].at - got[0].at, 0.5, "the second attempt came before the first timed out")
        self.assertDeliveredAfterOneRetry(server, emit)

    def test_an_answer_whose_body_stalls_is_a_timeout_too(self):
        # The head comes at once, then one byte of the body and nothing for 30 s: the attempt's timeout covers the
        # body too (async-http-client's ends at the head; such an attempt held its slot, and a forget waiting for the
        # user's deliveries, for as long as the receiver liked).
        server, _, emit, got = self.slow_attempts(stall_body_once(30), "sid")
        self.assertEqual([(r.key, r.attempt) for r in got[:2]], [(emit["id"], "1"), (emit["id"], "2")])
        self.assertLess(got[1].at - got[0].at, 5, "the second attempt waited for the stalled body")
        self.assertDeliveredAfterOneRetry(server, emit)

    def test_429_retry_after_is_honoured(self):
        throttled = self.receiver(throttle_once(1))
        self.files(ops=OPS_RULES, settings=settings(
            destination("throttled", throttled.url("/t"), method="PATCH", events="[Throttled]", max_attempts=4,
                        backoff="100ms")))
        server = self.serve()
        self.post(server, track("tia", "Go Throttled", "t1"))
        got = throttled.wait_for(2, timeout=10)
        emit = self.only(server.all_actions("tia"), action="emit")
        self.assertEqual([(r.method, r.key, r.attempt) for r in got], [("PATCH", emit["id"], "1"), ("PATCH", emit["id"], "2")])
        gap = got[1].at - got[0].at
        self.assertGreaterEqual(gap, 1.0, "Retry-After: 1 was not honoured")
        self.assertLess(gap, 5.0)
        time.sleep(0.3)
        self.assertEqual(len(throttled.got()), 2)

    def test_400_is_dead_at_once_and_outbox_retry_and_drop(self):
        bad = self.receiver(always(400))
        self.files(ops=OPS_RULES, settings=settings(
            destination("bad_request", bad.url(), events="[Rejected]", max_attempts=5, backoff="100ms")))
        server = self.serve()
        self.post(server, track("rex", "Go Rejected", "r1"), track("roy", "Go Rejected", "r2"))
        rex = self.only(server.all_actions("rex"), action="emit")["id"]
        roy = self.only(server.all_actions("roy"), action="emit")["id"]
        bad.wait_for(1, key=rex)
        bad.wait_for(1, key=roy)
        wait_until(lambda: all((outbox_row(self.db, a) or {}).get("state") == "dead" for a in (rex, roy)),
                   what="both dead")
        time.sleep(0.5)  # a retry would have come within 100 ms
        self.assertEqual(len(bad.got()), 2, bad.got())
        row = outbox_row(self.db, rex)
        self.assertEqual((row["destination"], row["userId"], row["state"], row["attempts"]),
                         ("bad_request", "rex", "dead", 1))
        self.assertIn("400", str(row["lastError"]))
        table = cli("outbox", *store_args(self.db))
        self.assertEqual(table.returncode, 0, table.stderr)
        line = [ln for ln in table.stdout.splitlines() if rex in ln]
        self.assertEqual(len(line), 1, table.stdout)
        self.assertIn("bad_request", line[0])
        self.assertIn("dead", line[0])
        self.assertEqual((deliveries(server, "bad_request", "dead"), deliveries(server, "bad_request", "retried")), (2, 0))
        # --drop one; --retry the other: one more attempt (the count reset), dead again; then --drop-dead.
        self.assertEqual(cli("outbox", *store_args(self.db), "--drop", rex).returncode, 0)
        self.assertIsNone(outbox_row(self.db, rex, "--all"))
        self.assertEqual(cli("outbox", *store_args(self.db), "--retry", roy).returncode, 0)
        got = bad.wait_for(2, key=roy)
        self.assertEqual(got[1].attempt, "1")
        wait_until(lambda: (outbox_row(self.db, roy) or {}).get("state") == "dead", what="roy dead again")
        self.assertEqual(outbox_row(self.db, roy)["attempts"], 1)
        time.sleep(0.3)
        self.assertEqual(len(bad.got(roy)), 2)
        self.assertEqual(len(bad.got(rex)), 1, "a dropped action was sent again")
        self.assertEqual(cli("outbox", *store_args(self.db), "--drop-dead").returncode, 0)
        self.assertEqual(outbox(self.db, "--all"), [])

    def test_500_until_max_attempts_then_dead_and_retry_dead_delivers(self):
        broken = self.receiver(always(500))
        self.files(ops=OPS_RULES, settings=settings(
            destination("broken", broken.url(), events="[Broken]", max_attempts=3, backoff="100ms",
                        max_backoff="200ms")))
        server = self.serve()
        self.post(server, track("bea", "Go Broken", "b1"))
        emit = self.only(server.all_actions("bea"), action="emit")["id"]
        broken.wait_for(3)
        wait_until(lambda: (outbox_row(self.db, emit) or {}).get("state") == "dead", what="dead after 3 attempts")
        time.sleep(0.5)
        got = broken.got()
        self.assertEqual([(r.key, r.attempt) for r in got], [(emit, "1"), (emit, "2"), (emit, "3")])
        row = outbox_row(self.db, emit)
        self.assertEqual((row["state"], row["attempts"]), ("dead", 3))
        self.assertIn("500", str(row["lastError"]))
        self.assertEqual((deliveries(server, "broken", "retried"), deliveries(server, "broken", "dead"),
                          deliveries(server, "broken", "delivered")), (2, 1, 0))
        broken.policy = always(200)
        r = cli("outbox", *store_args(self.db), "--retry-dead")
        self.assertEqual(r.returncode, 0, r.stderr)
        got = broken.wait_for(4)
        self.assertEqual((got[3].key, got[3].attempt), (emit, "1"))
        wait_until(lambda: (outbox_row(self.db, emit, "--all") or {}).get("state") == "delivered", what="delivered")
        time.sleep(0.3)
        self.assertEqual(len(broken.got()), 4)
        self.assertEqual(outbox_row(self.db, emit, "--all")["attempts"], 1)
        self.assertIsNone(outbox_row(self.db, emit))
        self.assertEqual(deliveries(server, "broken", "delivered"), 1)

    def test_body_payload_sends_the_emit_payload_to_every_emit_by_default(self):
        capi = self.receiver()
        meta = self.receiver()
        self.files(ops=OPS_RULES, settings=settings(
            destination("capi", capi.url("/capi"), body="payload"),
            destination("meta", meta.url("/meta"), body="payload", envelope="data")))
        server = self.serve()
        self.post(server, track("pia", "Go Payload", "p1"))
        got = capi.wait_for(1)
        emit = self.only(server.all_actions("pia"), action="emit")
        self.assertEqual(got[0].json(), emit["payload"])
        # An envelope wraps the body as Meta's Conversions API takes it.
        self.assertEqual(meta.wait_for(1)[0].json(), {"data": [emit["payload"]]})
        self.assertEqual(got[0].json(), {"event_id": hashlib.sha256(b"Purchase:pia").hexdigest(), "value": 42,
                                         "currency": "EUR"})
        self.assertEqual((got[0].key, got[0].attempt, got[0].method), (emit["id"], "1", "POST"))
        wait_until(lambda: deliveries(server, "capi", "delivered") == 1, what="delivered counted")

    def test_a_missing_secret_variable_pauses_the_destination_and_loses_nothing(self):
        capi = self.receiver()
        self.files(ops=OPS_RULES, settings=settings(
            destination("capi", capi.url(), secret_headers=f"{{ Authorization: {SECRET_ENV} }}")))
        without = {k: v for k, v in os.environ.items() if k != SECRET_ENV}
        server = Server([self.rules], self.db, clock="wall")
        with mock.patch.dict(os.environ, without, clear=True):
            server.start()
        self.addCleanup(server.stop)
        status, rules = server.request("GET", "/admin/rules", headers={"Authorization": "Bearer " + ADMIN_KEY})
        self.assertEqual(status, 200)
        self.assertEqual(rules["destinations"], [{"name": "capi", "url": capi.url(), "state": "paused",
                                                  "unset": [SECRET_ENV]}])
        self.post(server, track("pia", "Go Payload", "p1"))
        emit = self.only(server.all_actions("pia"), action="emit")["id"]
        wait_until(lambda: outbox_row(self.db, emit), what="the action in the outbox")
        time.sleep(1.0)
        row = outbox_row(self.db, emit)
        self.assertEqual((row["state"], row["attempts"]), ("pending", 0))
        self.assertEqual(capi.got(), [])
        wait_until(lambda: metric(server, "beckon_outbox_pending_actions", destination="capi") == 1, timeout=8,
                   what="the outbox gauge counting the waiting action")
        # With the variable set, the next start sends what waited.
        server.stop()
        server = self.serve()
        got = capi.wait_for(1)
        self.assertEqual((got[0].key, got[0].headers.get("authorization")), (emit, SECRET_VALUE))


class DeliveryCrash(OpsCase):
    def fire_emit(self, capi, timeout):
        """A service whose only destination is `capi` (retried every 200-500 ms, up to 100 attempts), and kim's emit
        fired: the server and the action's id."""
        self.files(ops=OPS_RULES, settings=settings(
            destination("capi", capi.url(), events="[Purchase]", timeout=timeout, max_attempts=100, backoff="200ms",
                        max_backoff="500ms")))
        server = self.serve()
        self.post(server, track("kim", "Go Payload", "k1"))
        return server, self.only(server.all_actions("kim"), action="emit")["id"]

    def test_kill_9_between_the_fire_and_the_delivery_delivers_after_the_restart(self):
        port = free_port()
        capi = self.receiver(port=port, start=False)  # refuses connections until started
        server, emit = self.fire_emit(capi, timeout="1s")
        row = wait_until(lambda: (lambda r: r if r and r["attempts"] >= 1 else None)(outbox_row(self.db, emit)),
                         what="a failed attempt in the outbox")
        self.assertEqual((row["state"], row["destination"], row["userId"]), ("pending", "capi", "kim"))
        self.assertTrue(row["lastError"])
        server.kill()
        capi.start()
        self.assertEqual(capi.port, port)
        server = self.serve()
        got = capi.wait_for(1, timeout=10)
        wait_until(lambda: (outbox_row(self.db, emit, "--all") or {}).get("state") == "delivered", what="delivered")
        time.sleep(0.5)
        got = capi.got()
        self.assertEqual(len(got), 1, got)
        self.assertEqual(got[0].key, emit)
        self.assertGreaterEqual(int(got[0].attempt), row["attempts"] + 1)
        self.assertEqual(got[0].json(), self.only(server.all_actions("kim"), action="emit"))

    def test_kill_9_during_an_attempt_sends_again_once_its_claim_lapses(self):
        # A fleet takes an entry for the longest destination timeout plus 5 s (a single service has no claims): an
        # attempt in flight when its process is killed is made again that soon after, not a minute later.
        capi = self.receiver(policy=lambda index, req: (200, {}, 4.0 if index == 0 else 0))
        server, emit = self.fire_emit(capi, timeout="2s")
        capi.wait_for(1)  # the first attempt is in flight: the receiver holds it
        server.kill()
        server = self.serve()
        got = capi.wait_for(2, timeout=20)
        self.assertEqual([r.key for r in got[:2]], [emit, emit])
        wait_until(lambda: (outbox_row(self.db, emit, "--all") or {}).get("state") == "delivered", what="delivered")


class DeliveryStop(OpsCase):
    def test_a_stop_does_not_wait_for_a_tls_handshake_never_answered(self):
        # A receiver that accepts the connection and never answers the TLS handshake: the HTTP client's shutdown
        # waited for the connection until the attempt's deadline (28 s of a 30 s timeout), past a 30 s grace period.
        silent = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
        self.addCleanup(silent.close)
        silent.bind(("127.0.0.1", 0))
        silent.listen(16)
        held = []
        threading.Thread(target=lambda: [held.append(silent.accept()) for _ in range(16)], daemon=True).start()
        self.files(ops=OPS_RULES, settings=settings(
            destination("capi", f"https://127.0.0.1:{silent.getsockname()[1]}/events", events="[Purchase]",
                        timeout="30s", max_attempts=3)))
        server = self.serve()
        self.post(server, track("kim", "Go Payload", "k1"))
        wait_until(lambda: held, what="the receiver took a connection")
        time.sleep(0.5)
        started = time.monotonic()
        server.proc.send_signal(signal.SIGTERM)
        server.proc.wait(timeout=40)
        took = time.monotonic() - started
        self.assertEqual(server.proc.returncode, 0)
        self.assertLess(took, 5, f"the stop took {took:.1f} s")
        self.assertEqual([r["state"] for r in outbox(self.db)], ["pending"], "the attempt in flight stays pending")


# ---------------------------------------------------------------------------------------------------------------
# Live reload.

RATE_V1 = """version: 1
ruleset: rate
rules:
  - id: ask_rating
    on: Level Completed
    limit: { per_user: 3 }
    do:
      - message: { surface: launch, title: "Enjoying it? Rate us" }
  - id: ask_again_later
    on: Level Completed
    limit: { per_user: 1 }
    wait: 14d
    do:
      - message: { surface: reminder, title: "Still enjoying it?" }
"""
RATE_V2 = RATE_V1.replace("Enjoying it? Rate us", "Having fun? Rate us")
RATE_BAD = RATE_V2.replace("limit: { per_user: 3 }", "limitt: { per_user: 3 }")  # an unknown key, line 6
assert RATE_V2 != RATE_V1 and RATE_BAD != RATE_V2


def level(user, mid, ts):
    return track(user, "Level Completed", mid, ts)


class Reload(OpsCase):
    def rules_info(self, server):
        status, body = server.request("GET", "/admin/rules", headers=ADMIN)
        self.assertEqual(status, 200, body)
        return body

    def shas(self, body):
        return {os.path.basename(f["path"]): f["sha256"] for f in body["files"]}

    def reload(self, server, status=200):
        got, body = server.request("POST", "/admin/reload", headers=ADMIN)
        self.assertEqual(got, status, body)
        return body

    def test_a_destination_a_reload_adds_is_sent_once_however_slow(self):
        # Started without destinations, then reloaded with one whose timeout is 8 s and whose receiver takes 6 s: the
        # attempt is made once. (A fleet set how long an entry is claimed at start, 5 s here, so the slow attempt's
        # claim lapsed, its outcome was refused, and the action was sent again.)
        slow = self.receiver(sleep_once(6.0))
        self.files(ops=OPS_RULES)
        server = self.serve()
        self.files(ops=OPS_RULES, settings=settings(
            destination("slow", slow.url("/slow"), events="[Slow]", timeout="8s", max_attempts=4, backoff="100ms")))
        self.reload(server)
        self.post(server, track("rel", "Go Slow", "r1"))
        emit = self.only(server.all_actions("rel"), action="emit")
        wait_until(lambda: (outbox_row(self.db, emit["id"], "--all") or {}).get("state") == "delivered",
                   what="delivered once", timeout=20)
        time.sleep(1)
        self.assertEqual([(r.key, r.attempt) for r in slow.got()], [(emit["id"], "1")])

    def test_reload_keeps_fire_counts_and_pending_actions_and_refuses_errors(self):
        self.files(rate=RATE_V1)
        server = self.serve(clock="events")
        events = [level("u1", "l1", "2026-03-02T09:00:00Z"), level("u1", "l2", "2026-03-02T10:00:00Z"),
                  level("u1", "l3", "2026-03-03T09:00:00Z"), level("u1", "l4", "2026-03-03T10:00:00Z"),
                  track("u1", "Heartbeat", "h1", "2026-03-16T12:00:00Z")]
        self.post(server, *events[:2])
        self.assertEqual([a["message"]["title"] for a in server.all_actions("u1")], ["Enjoying it? Rate us"] * 2)
        before = self.rules_info(server)
        self.assertEqual(self.shas(before), {"rate.yaml": hashlib.sha256(RATE_V1.encode()).hexdigest()})

        # Only the message text changes.
        self.files(rate=RATE_V2)
        body = self.reload(server)
        self.assertIs(body["changed"], True)
        self.assertEqual(self.shas(body), {"rate.yaml": hashlib.sha256(RATE_V2.encode()).hexdigest()})
        self.assertEqual(body["files"][0]["bytes"], len(RATE_V2.encode()))
        self.assertEqual([(u["name"], u["rules"]) for u in body["rulesets"]], [("rate", 2)])
        self.assertIn("loadedAt", body)
        after = self.rules_info(server)
        self.assertEqual(self.shas(after), self.shas(body))
        self.assertEqual(after["loadedAt"], body["loadedAt"])
        self.assertIs(self.reload(server)["changed"], False, "nothing changed")

        # The 3rd fires with the new text, the 4th is past the limit; 14 days after the first trigger the re-prompt
        # scheduled before the reload comes due (at its own due time, not 14 days after a later trigger).
        self.post(server, events[2])
        self.post(server, events[3])
        self.post(server, events[4])
        got = server.all_actions("u1")
        with open(f"{self.tmp}/events.jsonl", "w") as f:
            f.writelines(json.dumps(e) + "\n" for e in events)
        write(f"{self.tmp}/v1.yaml", RATE_V1)
        write(f"{self.tmp}/v2.yaml", RATE_V2)
        old = dry_run([f"{self.tmp}/v1.yaml"], f"{self.tmp}/events.jsonl")
        new = dry_run([f"{self.tmp}/v2.yaml"], f"{self.tmp}/events.jsonl")
        self.assertEqual(got, old[:2] + new[2:])
        self.assertEqual([(a["rule"], a["time"], a["message"]["title"]) for a in got], [
            ("ask_rating", "2026-03-02T09:00:00Z", "Enjoying it? Rate us"),
            ("ask_rating", "2026-03-02T10:00:00Z", "Enjoying it? Rate us"),
            ("ask_rating", "2026-03-03T09:00:00Z", "Having fun? Rate us"),
            ("ask_again_later", "2026-03-16T09:00:00Z", "Still enjoying it?")])

        # A rule file with an error: 422 with validate's diagnostics, and the running rules unchanged.
        self.files(rate=RATE_BAD)
        body = self.reload(server, 422)
        self.assertIs(body["success"], False)
        self.assertTrue(body["error"])
        v = cli("validate", self.rules)
        self.assertEqual(v.returncode, 1)
        lines = (v.stdout + v.stderr).rstrip("\n").splitlines()
        self.assertRegex(lines[-1], r"^\d+ files?, \d+ rules?: ")
        expected = "\n".join(lines[:-1])
        self.assertIn(f"{self.rules}/rate.yaml:6:5: error: unknown key 'limitt'", expected)
        self.assertIn("    ^~~~~~", expected.splitlines())
        self.assertIn(expected, body["diagnostics"])
        unchanged = self.rules_info(server)
        self.assertEqual((self.shas(unchanged), unchanged["rulesets"]), (self.shas(after), after["rulesets"]))
        self.post(server, level("u3", "u3-1", "2026-03-16T12:00:00Z"))
        self.assertEqual([(a["rule"], a["message"]["title"]) for a in server.all_actions("u3")],
                         [("ask_rating", "Having fun? Rate us")])
        # Fixed, it reloads again.
        self.files(rate=RATE_V1)
        self.assertIs(self.reload(server)["changed"], True)
        self.assertEqual(self.shas(self.rules_info(server)), {"rate.yaml": hashlib.sha256(RATE_V1.encode()).hexdigest()})

    @sqlite_only
    def test_a_restart_replays_the_log_under_the_rules_it_was_logged_under(self):
        # The files change while the server is down, with inputs logged after the last checkpoint: those are
        # replayed under the rule set they were processed under (stored in the database), then carried over.
        gate = """version: 1
ruleset: gate
rules:
  - id: gate
    on: {on}
    limit: {{ per_user: 1 }}
    do:
      - message: {{ surface: launch, title: "Welcome" }}
"""
        self.files(gate=gate.format(on="Go"))
        server = self.serve(clock="events")
        self.post(server, track("u1", "Go", "g1", "2026-03-02T09:00:00Z"))
        self.assertEqual(len(server.all_actions("u1")), 1)
        with sqlite3.connect(self.db) as db:
            checkpoint = db.execute("SELECT coalesce(max(input_seq), 0) FROM checkpoint").fetchone()[0]
            logged = db.execute("SELECT max(seq) FROM input_log").fetchone()[0]
        self.assertLess(checkpoint, logged, "the event must be after the last checkpoint for this test to mean anything")
        server.kill()
        self.files(gate=gate.format(on="Other"))
        server = self.serve(clock="events")
        # Under the new rules u1 has used their one fire (replayed under the old rules); u2 has not.
        self.post(server, track("u1", "Other", "o1", "2026-03-02T10:00:00Z"),
                  track("u2", "Other", "o2", "2026-03-02T10:00:00Z"))
        self.assertEqual(len(server.all_actions("u1")), 1)
        self.assertEqual(len(server.all_actions("u2")), 1)

    def test_watch_reloads_when_a_file_changes(self):
        self.files(rate=RATE_V1)
        server = Server([self.rules], self.db, clock="events", extra=["--watch"])
        server.start()
        self.addCleanup(server.stop)
        before = self.shas(self.rules_info(server))
        self.files(rate=RATE_V2)
        wait_until(lambda: self.shas(self.rules_info(server)) != before, timeout=10, what="--watch reloading the edit")
        self.post(server, level("u1", "l1", "2026-03-02T09:00:00Z"))
        self.assertEqual([a["message"]["title"] for a in server.all_actions("u1") if a["rule"] == "ask_rating"],
                         ["Having fun? Rate us"])
        # A broken save is refused and the rules before it keep serving.
        reloaded = self.shas(self.rules_info(server))
        self.files(rate=RATE_BAD)
        time.sleep(2.5)
        self.assertEqual(self.shas(self.rules_info(server)), reloaded)
        self.assertEqual(metric(server, "beckon_reloads_total", result="refused"), 1)

    def test_ingest_never_fails_during_reloads(self):
        self.files(rate=RATE_V1)
        server = self.serve(clock="events")
        statuses, posted = [], [0]
        stop = threading.Event()

        def poster():
            n = 0
            while not stop.is_set() and n < 20000:
                batch = [level(f"load-{n + i}", f"m{n + i}",
                               time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime(1772442000 + n + i)))  # from 2026-03-02
                         for i in range(10)]
                try:
                    # (Not waiting on a fleet for each post to be processed, so that posts overlap the reloads.)
                    status, _ = server.post("/v1/batch", {"batch": batch}, wait=False)
                except (OSError, http.client.HTTPException) as e:
                    status = repr(e)
                statuses.append(status)
                if status == 200:
                    posted[0] += len(batch)
                n += len(batch)

        t = threading.Thread(target=poster)
        t.start()
        try:
            wait_until(lambda: len(statuses) >= 3, what="the poster started")
            during = len(statuses)
            for i in range(10):
                self.files(rate=RATE_V2 if i % 2 == 0 else RATE_V1)
                self.assertIs(self.reload(server)["changed"], True)
                time.sleep(0.05)
            during = len(statuses) - during
        finally:
            stop.set()
            t.join(timeout=30)
        self.assertFalse(t.is_alive())
        if server.url:
            caught_up(server.url)
        self.assertGreaterEqual(during, 5, "too few posts overlapped the reloads")
        self.assertEqual([s for s in statuses if s != 200], [])
        self.assertEqual(metric(server, "beckon_ingest_events_total", result="accepted"), posted[0])
        self.assertEqual(metric(server, "beckon_actions_total", ruleset="rate", rule="ask_rating", kind="message"),
                         posted[0], "every posted event fired its rule")
        self.assertEqual(self.shas(self.rules_info(server)), {"rate.yaml": hashlib.sha256(RATE_V1.encode()).hexdigest()})

    def test_sighup_reloads(self):
        self.files(rate=RATE_V1)
        server = self.serve(clock="events")
        sha1 = self.shas(self.rules_info(server))["rate.yaml"]
        self.files(rate=RATE_V2)
        sha2 = hashlib.sha256(RATE_V2.encode()).hexdigest()
        server.proc.send_signal(signal.SIGHUP)

        def reloaded():
            self.assertIsNone(server.proc.poll(), "SIGHUP stopped the server")
            return self.shas(self.rules_info(server))["rate.yaml"] != sha1
        wait_until(reloaded, timeout=10, what="SIGHUP reload")
        self.assertEqual(self.shas(self.rules_info(server))["rate.yaml"], sha2)
        self.assertIsNone(server.proc.poll(), "SIGHUP stopped the server")
        self.post(server, level("hu", "hu-1", "2026-03-02T09:00:00Z"))
        self.assertEqual([a["message"]["title"] for a in server.all_actions("hu")], ["Having fun? Rate us"])
        # An error: the server keeps running the rules it has.
        self.files(rate=RATE_BAD)
        server.proc.send_signal(signal.SIGHUP)
        time.sleep(1.0)
        self.assertIsNone(server.proc.poll(), "a bad reload stopped the server")
        self.assertEqual(server.request("GET", "/readyz")[0], 200)
        self.assertEqual(self.shas(self.rules_info(server))["rate.yaml"], sha2)
        self.post(server, level("hv", "hv-1", "2026-03-02T09:01:00Z"))
        self.assertEqual([a["message"]["title"] for a in server.all_actions("hv")], ["Having fun? Rate us"])


# ---------------------------------------------------------------------------------------------------------------
# Privacy: export and forget.

PRIVACY_RULES = """version: 1
ruleset: privacy
rules:
  - id: welcome
    on: Signed Up
    limit: { per_user: 1 }
    do:
      - notify: { id: welcome, sender: Team, message: "Welcome!" }
      - emit: { event: SignUp, payload: { event_id: "${sha256('SignUp:' + user.id)}", plan: free } }
  - id: come_back
    on: Signed Up
    wait: 2d
    do:
      - message: { surface: launch, title: Come back }
"""

U1 = [track("u1", "Signed Up", "u1-1", "2026-03-02T09:00:00Z"), track("u1", "Opened", "u1-2", "2026-03-02T09:05:00Z")]
U2 = [track("u2", "Signed Up", "u2-1", "2026-03-02T09:00:00Z")]
# Past both come_back timers (due 03-04T09:00): others' events, one in u1's partition and one in u2's, so that the clock
# moves for both on either store (a fleet's partitions each keep their own event clock).
LATER = [track("zed5", "Opened", "z-1", "2026-03-05T09:00:00Z"), track("zed6", "Opened", "z-2", "2026-03-05T09:00:00Z")]
AGAIN = track("u1", "Signed Up", "u1-3", "2026-03-05T10:00:00Z")


class Privacy(OpsCase):
    def inbox(self, server, user):
        return server.request("GET", f"/v1/users/{user}/inbox", headers={"Authorization": "Bearer " + token(user)})

    def assertFreshWelcome(self, server):
        """u1 after a forget and AGAIN: the once-only welcome fires again, as for a new user."""
        with open(f"{self.tmp}/again.jsonl", "w") as f:
            f.write(json.dumps(AGAIN) + "\n")
        expected = dry_run([f"{self.rules}/privacy.yaml"], f"{self.tmp}/again.jsonl")
        self.assertEqual([a["action"] for a in expected], ["notify", "emit"])
        self.assertEqual(server.all_actions("u1"), expected)
        status, inbox = self.inbox(server, "u1")
        self.assertEqual((status, inbox["unread"], len(inbox["items"])), (200, 1, 1))

    def test_forget_removes_everything_and_a_later_event_starts_a_new_user(self):
        capi = self.receiver(always(503))
        self.files(privacy=PRIVACY_RULES, settings=settings(
            destination("capi", capi.url(), events="[SignUp]", backoff="2s", max_backoff="2s", max_attempts=10)))
        server = self.serve(clock="events")
        self.post(server, *U1, *U2)
        actions = server.all_actions("u1")
        self.assertEqual([a["action"] for a in actions], ["notify", "emit"])
        emit = actions[1]["id"]
        u2_emit = self.only(server.all_actions("u2"), action="emit")["id"]
        capi.wait_for(1, key=emit)
        status, inbox = self.inbox(server, "u1")
        self.assertEqual((status, inbox["unread"]), (200, 1))

        export = self.export(server, "u1")
        self.assertIsInstance(export["state"], dict)
        self.assertTrue(export["state"])
        self.assertEqual(export["actions"], actions)
        self.assertEqual([(o["actionId"], o["destination"], o["state"]) for o in export["outbox"]], [(emit, "capi", "pending")])
        self.assertIn("attempts", export["outbox"][0])
        self.assertEqual(len(export["events"]), 2, export["events"])
        for posted, stored in zip(U1, export["events"]):
            self.assertTrue(stored["receivedAt"])
            self.assertEqual({k: stored["event"].get(k) for k in posted}, posted)

        self.forget(server, "u1", True)
        # (The answer waits for an attempt in flight: what was sent is sent by now, and nothing more is.)
        u1_sent_at_forget = len(capi.got(emit))
        self.assertForgotten(self.export(server, "u1"))
        self.assertEqual(server.all_actions("u1"), [])
        status, inbox = self.inbox(server, "u1")
        self.assertTrue(status == 404 or (status == 200 and inbox["unread"] == 0 and inbox["items"] == []), (status, inbox))
        self.forget(server, "nobody", False)
        self.assertForgotten(self.export(server, "nobody"))
        u2 = self.export(server, "u2")
        self.assertEqual(len(u2["actions"]), 2)
        self.assertEqual(len(u2["outbox"]), 1)

        # Another user's event moves the stream's clock past the timers: u2's fires, u1's was forgotten.
        self.post(server, *LATER)
        self.assertEqual([a["rule"] for a in server.all_actions("u2")], ["welcome", "welcome", "come_back"])
        self.assertEqual(server.all_actions("u1"), [])

        # No delivery of the forgotten row (u2's row is still tried, every 1-2 s).
        u2_sent = len(capi.got(u2_emit))
        time.sleep(2.6)
        self.assertEqual(len(capi.got(emit)), u1_sent_at_forget, "a forgotten user's action was delivered")
        self.assertGreater(len(capi.got(u2_emit)), u2_sent, "the destination was not retried at all")

        # The same id later: a new user, for whom the once-only welcome fires again.
        self.post(server, AGAIN)
        self.assertFreshWelcome(server)
        export = self.export(server, "u1")
        self.assertEqual([e["event"]["messageId"] for e in export["events"]], ["u1-3"])
        self.assertEqual(len(export["actions"]), 2)

    def test_an_id_merged_into_another_stands_for_the_whole_person(self):
        # a -> b (an identify: a was anonymous), then an alias b -> c, which merges nothing: b is a known user
        # (docs/events.md, "Identity merge"). Export and forget by a or b take the person: b, with a; c is another.
        self.files(privacy=PRIVACY_RULES)
        server = self.serve(clock="events")
        anon = {"type": "track", "anonymousId": "chain-a", "event": "Signed Up", "messageId": "ca-1",
                "timestamp": "2026-03-02T09:00:00Z", "properties": {"secret": "ANON-PII"}}
        identify = {"type": "identify", "anonymousId": "chain-a", "userId": "chain-b", "messageId": "ca-2",
                    "timestamp": "2026-03-02T09:01:00Z", "traits": {"email": "b@example.com"}}
        alias = {"type": "alias", "previousId": "chain-b", "userId": "chain-c", "messageId": "ca-3",
                 "timestamp": "2026-03-02T09:02:00Z"}
        self.post(server, anon, identify, alias, track("chain-c", "Opened", "ca-4", "2026-03-02T09:03:00Z"))
        for asked in ("chain-a", "chain-b"):
            status, export = server.request("GET", f"/v1/users/{asked}/export", headers=ADMIN)
            self.assertEqual(status, 200, export)
            self.assertEqual(export["userId"], "chain-b", (asked, export))
            self.assertEqual(export["mergedIds"], ["chain-a"], (asked, export))
            self.assertLessEqual({"ca-1", "ca-2"}, {e["event"]["messageId"] for e in export["events"]})
            self.assertTrue(export["actions"], export)
        c = self.export(server, "chain-c")
        self.assertEqual((c["userId"], c["mergedIds"]), ("chain-c", []))
        self.forget(server, "chain-a", True)
        for user in ("chain-a", "chain-b"):
            status, export = server.request("GET", f"/v1/users/{user}/export", headers=ADMIN)
            self.assertEqual(status, 200, export)
            self.assertEqual(export["userId"], user, export)
            self.assertEqual(export["mergedIds"], [], export)
            self.assertForgotten(export)
            self.assertEqual(server.all_actions(user), [])
        self.assertIn("ca-4", [e["event"]["messageId"] for e in self.export(server, "chain-c")["events"]])
        # The anonymous id is a stranger again: nothing of before comes back through an old pointer.
        self.post(server, dict(anon, messageId="ca-5", properties={}))
        export = self.export(server, "chain-a")
        self.assertEqual([e["event"]["messageId"] for e in export["events"]], ["ca-5"], export)
        self.assertNotIn("b@example.com", json.dumps(export))
        self.assertEqual(export["mergedIds"], [])

    @sqlite_only
    def test_cli_export_and_forget_with_the_server_stopped_and_refused_while_it_runs(self):
        self.files(privacy=PRIVACY_RULES)
        server = self.serve(clock="events")
        self.post(server, *U1, *U2)
        for cmd in ("export", "forget"):
            r = cli("user", cmd, "--db", self.db, "u1")
            self.assertNotEqual(r.returncode, 0, f"beckon user {cmd} ran beside a server")
            self.assertTrue((r.stderr + r.stdout).strip(), "no message")
        self.assertEqual(len(self.export(server, "u1")["actions"]), 2, "the refused forget forgot")

        # A forget that answered 200 survives a kill -9 and the input log's replay.
        self.forget(server, "u2", True)
        server.kill()
        server = self.serve(clock="events")
        self.assertForgotten(self.export(server, "u2"))
        self.assertEqual(server.all_actions("u2"), [])
        http_export = self.export(server, "u1")
        self.assertEqual(len(http_export["actions"]), 2)
        self.assertEqual(len(http_export["events"]), 2)
        self.assertEqual(server.stop(), 0)

        r = cli("user", "export", "--db", self.db, "u1")
        self.assertEqual(r.returncode, 0, r.stderr)
        cli_export = json.loads(r.stdout)
        # (Everything but the time of the export itself.)
        cli_export.pop("exportedAt")
        http_export.pop("exportedAt")
        self.assertEqual(cli_export, http_export)
        r = cli("user", "export", "--db", self.db, "u2")
        self.assertEqual(r.returncode, 0, r.stderr)
        self.assertForgotten(json.loads(r.stdout))
        r = cli("user", "forget", "--db", self.db, "u1")
        self.assertEqual(r.returncode, 0, r.stderr)
        r = cli("user", "export", "--db", self.db, "u1")
        self.assertEqual(r.returncode, 0, r.stderr)
        self.assertForgotten(json.loads(r.stdout))

        server = self.serve(clock="events")
        self.assertForgotten(self.export(server, "u1"))
        self.assertEqual(server.all_actions("u1"), [])
        self.post(server, AGAIN)
        self.assertFreshWelcome(server)


# ---------------------------------------------------------------------------------------------------------------
# Admin auth.


@sqlite_only  # (the fleet's retention: fleet_test.py)
class Retention(OpsCase):
    def test_events_older_than_the_retention_are_deleted_once_checkpointed(self):
        self.files(**{"privacy": PRIVACY_RULES})
        server = Server([self.rules], self.db, clock="events", extra=["--retention-days", "0"])
        server.start()
        self.post(server, track("u1", "Signed Up", "u1-1", "2026-03-02T09:00:00Z"))
        actions = server.all_actions("u1")
        self.assertTrue(actions)
        server.stop()  # a checkpoint that includes the event
        with sqlite3.connect(self.db) as db:
            self.assertEqual(db.execute("SELECT count(*) FROM input_log").fetchone()[0], 1)
        server = Server([self.rules], self.db, clock="events", extra=["--retention-days", "0"])
        server.start()
        self.addCleanup(server.stop)
        with sqlite3.connect(self.db) as db:
            wait_until(lambda: db.execute("SELECT count(*) FROM input_log").fetchone()[0] == 0,
                       what="the input log emptied by retention")
        export = self.export(server, "u1")
        self.assertEqual(export["events"], [])
        # What the events did stays: the user's state and actions.
        self.assertIsNotNone(export["state"])
        self.assertEqual(export["actions"], actions)
        # With the log emptied, a new record still numbers after the checkpoint: an event accepted and then lost
        # with the process (no checkpoint since) is replayed at the next start.
        self.post(server, track("u2", "Signed Up", "u2-1", "2026-03-02T10:00:00Z"))
        server.kill()
        server = Server([self.rules], self.db, clock="events")
        server.start()
        self.addCleanup(server.stop)
        self.assertIsNotNone(self.export(server, "u2")["state"])


class AdminAuth(OpsCase):
    def test_the_admin_endpoints_need_the_admin_key(self):
        self.files(privacy=PRIVACY_RULES)
        server = self.serve(clock="events")
        self.post(server, *U1)
        endpoints = [("GET", "/admin/rules"), ("POST", "/admin/reload"), ("DELETE", "/v1/users/u1"),
                     ("GET", "/v1/users/u1/export")]
        wrong = {"none": {}, "write key as Basic": {"Authorization": basic(KEY)},
                 "write key as Bearer": {"Authorization": "Bearer " + KEY},
                 "the user's token": {"Authorization": "Bearer " + token("u1")}}
        # (Each endpoint's wrong credentials come from an address of their own: past 10 failures an address gets 429,
        # which hostile_test.py tests.)
        for i, (method, path) in enumerate(endpoints):
            for what, headers in wrong.items():
                with self.subTest(endpoint=f"{method} {path}", credentials=what):
                    self.assertEqual(server.request(method, path, headers=headers, source=f"127.0.0.{20 + i}")[0], 401)
        # Nothing was forgotten by the refused DELETEs; the admin key opens each endpoint.
        export = self.export(server, "u1")
        self.assertEqual(len(export["actions"]), 2)
        self.assertEqual(server.request("GET", "/admin/rules", headers=ADMIN)[0], 200)
        status, body = server.request("POST", "/admin/reload", headers=ADMIN)
        self.assertEqual(status, 200, body)
        self.assertIs(body["changed"], False)
        self.forget(server, "u1", True)


if __name__ == "__main__":
    unittest.main(verbosity=2)
