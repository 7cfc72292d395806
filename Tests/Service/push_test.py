#!/usr/bin/env python3
"""Push through APNs and FCM (docs/push.md) against local doubles (the FCM one: fcm_double.py, with its OAuth token
endpoint). APNs, against a local double that checks what Apple checks (apns_double.py): HTTP/2
over TLS, the ES256 provider token verified with the key's public half, the headers and the payload. A push goes to
every iOS device of the user that allows push; a token APNs calls invalid is removed from the user and never sent to
again; 429 is retried after its Retry-After with the same apns-id; 403 ExpiredProviderToken makes a new provider
token; a user with no device gets `skipped`; kill -9 between the fire and the delivery sends it once after the
restart, with the same apns-id. Runs on either store (BECKON_TEST_STORE=postgres: a fleet process).
"""
import json
import os
import shutil
import sqlite3
import subprocess
import sys
import tempfile
import time
import unittest

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from apns_double import KEY_ID, TEAM, TOPIC, APNsDouble  # noqa: E402
from fcm_double import FCMDouble  # noqa: E402
from service_test import ADMIN_KEY, HTTP, STORE, Server, caught_up, token  # noqa: E402

RULES = """version: 1
campaign: welcome
rules:
  - id: hello
    on: Signed Up
    do:
      - push: { title: Welcome, body: "Hi ${event.properties.name}", deep_link: "stampbook://home" }
"""


def settings(url, p8, ca):
    return f"""version: 1
settings: push
destinations:
  - name: ios
    url: {url}
    backoff: 200ms
    max_attempts: 5
    apns:
      topic: {TOPIC}
      team_id: {TEAM}
      key_id: {KEY_ID}
      key_file: {p8}
      ca_file: {ca}
"""


def fcm_destination(fcm):
    """An item of `destinations:` sending through the FCM double."""
    return f"""  - name: android
    url: https://127.0.0.1:{fcm.port}
    backoff: 200ms
    max_attempts: 5
    fcm:
      service_account_file: {fcm.paths["service_account"]}
      ca_file: {fcm.paths["ca"]}
"""


# After a kill -9, a single service sends at once; a fleet process takes an attempt the killed one had in flight once
# its claim lapses (FCM's four timeouts and 5 s, 45 s here: docs/fleet.md, "Delivery to destinations").
RESTART_SECONDS = 90 if STORE == "postgres" else 20


def messages(server, rule):
    """beckon_messages_total of a rule's pushes and emails (`unit/rule`), by result (those above 0)."""
    _, text = server.request("GET", "/metrics")
    out = {}
    for line in text.decode().splitlines():
        if line.startswith("beckon_messages_total{") and f'rule="{rule}"' in line:
            result = line.split('result="')[1].split('"')[0]
            out[result] = out.get(result, 0) + int(float(line.rsplit(" ", 1)[1]))
    return {k: v for k, v in out.items() if v}


def psql(url, sql):
    return subprocess.run(["psql", url, "-qAt", "-c", sql], capture_output=True, text=True, check=True,
                          timeout=30).stdout


def held(server, user):
    """The tokens the store records `user` as the latest reporter of (docs/push.md, "Devices")."""
    if server.url:
        return psql(server.url, f"SELECT token FROM beckon_device_owner WHERE user_id = '{user}' ORDER BY token").split()
    with sqlite3.connect(f"file:{server.db}?mode=ro", uri=True) as c:
        return [t for (t,) in c.execute("SELECT token FROM device_owner WHERE user_id = ? ORDER BY token", (user,))]


def wait_until(test, check, what, seconds=20):
    deadline = time.time() + seconds
    while time.time() < deadline:
        value = check()
        if value:
            return value
        time.sleep(0.1)
    test.fail(f"{what} not within {seconds} s")


class PushCase(unittest.TestCase):
    """The APNs double, and the rules and settings pointing at it."""

    def setUp(self):
        self.tmp = tempfile.TemporaryDirectory()
        self.addCleanup(self.tmp.cleanup)
        self.apns = APNsDouble(self.tmp.name).start()
        self.addCleanup(self.apns.stop)
        self.rules = os.path.join(self.tmp.name, "rules")
        os.makedirs(self.rules)
        with open(os.path.join(self.rules, "welcome.yaml"), "w") as f:
            f.write(RULES)
        with open(os.path.join(self.rules, "settings.yaml"), "w") as f:
            f.write(settings(f"https://127.0.0.1:{self.apns.port}", self.apns.paths["p8"], self.apns.paths["ca"]))
        self.db = os.path.join(self.tmp.name, "db.sqlite")

    def serve(self):
        server = Server([self.rules], self.db).start()
        self.addCleanup(lambda: server.proc.poll() is not None or server.kill())
        return server

    def register(self, server, user, tok, enabled=True, platform="ios"):
        status, body = server.request("POST", f"/v1/users/{user}/devices",
                                      {"token": tok, "platform": platform, "app": TOPIC, "pushEnabled": enabled},
                                      {"Authorization": "Bearer " + token(user), "Content-Type": "application/json"})
        self.assertEqual(status, 200, body)

    def sign_up(self, server, user, n=1):
        now = time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())
        status, body = server.post("/v1/track", {"userId": user, "event": "Signed Up", "messageId": f"{user}-{n}",
                                                 "timestamp": now, "properties": {"name": user}})
        self.assertEqual(status, 200, body)

    def export(self, server, user):
        if server.url:
            caught_up(server.url)
        status, body = server.request("GET", f"/v1/users/{user}/export", headers={"Authorization": "Bearer " + ADMIN_KEY})
        self.assertEqual(status, 200, body)
        return body

    def outbox(self, server, user):
        return [(o["destination"], o["state"], o.get("lastError")) for o in self.export(server, user)["outbox"]]


class Push(PushCase):
    def test_fan_out_invalid_tokens_retries_and_provider_token_renewal(self):
        server = self.serve()
        try:
            self.register(server, "ann", "good-ann-phone")
            self.register(server, "ann", "gone-ann-old")
            self.register(server, "ann", "good-ann-off", enabled=False)
            self.register(server, "bob", "busy-bob")
            self.register(server, "cy", "expire-cy")
            self.register(server, "dee", "bad-dee")
            for user in ("ann", "bob", "cy", "dee", "eve"):
                self.sign_up(server, user)
            wait_until(self, lambda: all(s != "pending" for u in ("ann", "bob", "cy", "dee", "eve")
                                         for _, s, _ in self.outbox(server, u)), "every push settled")
            self.assertEqual(self.apns.violations, [])
            # ann: both devices that allow push were sent to, with one apns-id each; the phone took it.
            self.assertEqual([r[4] for r in self.apns.to("good-ann-phone")], [200])
            self.assertEqual([r[4] for r in self.apns.to("gone-ann-old")], [410])
            self.assertEqual(self.apns.to("good-ann-off"), [], "a device with push off was sent to")
            phone = self.apns.to("good-ann-phone")[0]
            self.assertEqual(phone[3]["aps"]["alert"], {"title": "Welcome", "body": "Hi ann"})
            self.assertEqual(phone[3]["deep_link"], "stampbook://home")
            # Each device's outcome is recorded with the entry: the phone took it, the old one is gone.
            self.assertEqual(self.outbox(server, "ann"), [
                ("ios", "delivered", "1 of 2 devices accepted; gone-ann…: 410 Unregistered (token removed)")])
            tokens = sorted(d["token"] for d in self.export(server, "ann")["state"]["devices"])
            self.assertEqual(tokens, ["good-ann-off", "good-ann-phone"], "the Unregistered token is not removed")
            # bob: 429, then the same push with the same apns-id after Retry-After.
            bob = self.apns.to("busy-bob")
            self.assertEqual([r[4] for r in bob], [429, 200])
            self.assertEqual(bob[0][1], bob[1][1])
            self.assertEqual(self.outbox(server, "bob"), [("ios", "delivered", None)])
            # cy: 403 ExpiredProviderToken, then a new provider token, accepted.
            cy = self.apns.to("expire-cy")
            self.assertEqual([r[4] for r in cy], [403, 200])
            self.assertNotEqual(cy[0][2], cy[1][2])
            # One provider token served every push but cy's retry: made once, shared, made again once refused.
            self.assertEqual(len({r[2] for r in self.apns.requests}), 2)
            # dee: BadDeviceToken, dead, the token removed; eve: no device, skipped.
            self.assertEqual(self.outbox(server, "dee")[0][:2], ("ios", "dead"))
            self.assertEqual(self.export(server, "dee")["state"]["devices"], [])
            state, error = self.outbox(server, "eve")[0][1:]
            self.assertEqual(state, "dead")
            self.assertIn("skipped", error)
            # The rule's counts: 6 device requests (ann 2, bob 2, cy 1, dee 1), 3 delivered, dee's failed, eve's
            # skipped, 2 tokens removed.
            self.assertEqual(messages(server, "welcome/hello"),
                             {"sent": 6, "delivered": 3, "failed": 1, "skipped": 1, "token_removed": 2})

            # A second push to ann goes to the phone only: the removed token is never sent to again.
            self.sign_up(server, "ann", 2)
            wait_until(self, lambda: len(self.apns.to("good-ann-phone")) == 2, "ann's second push")
            time.sleep(0.5)
            self.assertEqual(len(self.apns.to("gone-ann-old")), 1)
        finally:
            self.assertEqual(server.stop(), 0)

    def test_kill_9_between_the_fire_and_the_delivery_sends_it_once(self):
        self.apns.down = True  # (APNs answers 503: the push stays in the outbox, tried again)
        server = self.serve()
        self.register(server, "fay", "good-fay")
        self.sign_up(server, "fay")
        wait_until(self, lambda: self.apns.to("good-fay"), "a first attempt")
        server.kill()
        self.apns.down = False
        server = self.serve()
        try:
            wait_until(self, lambda: [r for r in self.apns.to("good-fay") if r[4] == 200], "the delivery after the restart",
                       seconds=RESTART_SECONDS)
            time.sleep(1)
            sent = self.apns.to("good-fay")
            self.assertEqual([r[4] for r in sent].count(200), 1, "delivered twice")
            self.assertEqual({r[1] for r in sent}, {sent[0][1]}, "a retry carried another apns-id")
            self.assertEqual(self.outbox(server, "fay"), [("ios", "delivered", None)])
            self.assertEqual(self.apns.violations, [])
        finally:
            self.assertEqual(server.stop(), 0)


class Rate(PushCase):
    """`rate: 10/s` on the APNs destination: 30 pushes take at least 2 s (10 at once, then 10 a second), and no second
    holds more than the bucket and its refill (20)."""

    def setUp(self):
        super().setUp()
        path = os.path.join(self.rules, "settings.yaml")
        with open(path) as f:
            text = f.read()
        with open(path, "w") as f:
            f.write(text.replace("    max_attempts: 5\n", "    max_attempts: 5\n    rate: 10/s\n"))

    def test_a_rate_spaces_the_requests(self):
        server = self.serve()
        try:
            users = [f"r{i}" for i in range(30)]
            for u in users:
                self.register(server, u, f"good-{u}")
            for u in users:
                self.sign_up(server, u)
            wait_until(self, lambda: len(self.apns.requests) >= 30, "30 pushes", seconds=60)
            times = sorted(r[5] for r in self.apns.requests)
            self.assertGreaterEqual(times[-1] - times[0], 1.9, "30 requests at 10/s came too fast")
            busiest = max(sum(1 for t in times if start <= t < start + 1) for start in times)
            self.assertLessEqual(busiest, 20)
            self.assertEqual(self.apns.violations, [])
        finally:
            self.assertEqual(server.stop(), 0)


class TokenMoves(PushCase):
    """A token is its latest reporter's (docs/push.md, "Devices"): a phone ann registered and bob registered after
    her gets bob's pushes, not ann's, and leaves ann's devices; ann registering it again takes it back."""

    def test_a_token_another_user_reported_since_is_theirs(self):
        server = self.serve()
        try:
            self.register(server, "ann", "good-shared")
            self.register(server, "ann", "good-ann-own")
            self.register(server, "bob", "good-shared")
            self.export(server, "bob")  # (a fleet: bob's registration processed)
            self.sign_up(server, "ann")
            self.sign_up(server, "bob")
            wait_until(self, lambda: all(s != "pending" for u in ("ann", "bob") for _, s, _ in self.outbox(server, u)),
                       "both pushes settled")
            self.assertEqual(self.apns.violations, [])
            shared = [r[3]["aps"]["alert"]["body"] for r in self.apns.to("good-shared")]
            self.assertEqual(shared, ["Hi bob"], "the shared phone got another user's push")
            self.assertEqual([r[3]["aps"]["alert"]["body"] for r in self.apns.to("good-ann-own")], ["Hi ann"])
            wait_until(self, lambda: [d["token"] for d in self.export(server, "ann")["state"]["devices"]]
                       == ["good-ann-own"], "the shared token gone from ann's devices")
            self.assertEqual([d["token"] for d in self.export(server, "bob")["state"]["devices"]], ["good-shared"])

            # ann signs in on the phone again: it is hers, and bob's next push leaves it out.
            self.register(server, "ann", "good-shared")
            self.export(server, "ann")
            self.sign_up(server, "bob", 2)
            self.sign_up(server, "ann", 2)
            wait_until(self, lambda: len(self.apns.to("good-shared")) == 2, "ann's second push on the phone")
            time.sleep(0.5)
            self.assertEqual([r[3]["aps"]["alert"]["body"] for r in self.apns.to("good-shared")], ["Hi bob", "Hi ann"])
            wait_until(self, lambda: [s for _, s, _ in self.outbox(server, "bob")] == ["delivered", "dead"],
                       "bob's second push skipped")
            self.assertEqual(self.apns.violations, [])

            # The store's record of who holds each token: ann holds both; a forget deletes hers.
            self.assertEqual(held(server, "ann"), ["good-ann-own", "good-shared"])
            self.assertEqual(held(server, "bob"), [])
            status, body = server.request("DELETE", "/v1/users/ann", headers={"Authorization": "Bearer " + ADMIN_KEY})
            self.assertEqual(status, 200, body)
            self.assertEqual(held(server, "ann"), [])
        finally:
            self.assertEqual(server.stop(), 0)


class OtherPlatformAPNs(APNsDouble):
    """APNs as Apple answers an FCM registration token (here: one named `fcm-…`): 400 BadDeviceToken."""

    def answer(self, scope, headers, body):
        tok = scope["path"].rsplit("/", 1)[-1]
        if tok.startswith("fcm-"):
            with self.lock:
                self.requests.append((tok, headers.get("apns-id"), None, None, 400, time.monotonic()))
            return 400, "BadDeviceToken", []
        return super().answer(scope, headers, body)


class BigAnswerAPNs(APNsDouble):
    """APNs answering with bodies over 16 KiB (a misbehaving provider or a proxy): `big-ok-…` 200, `big-gone-…` 410."""

    def answer(self, scope, headers, body):
        status, reason, extra = super().answer(scope, headers, body)
        tok = scope["path"].rsplit("/", 1)[-1]
        if tok.startswith("big-"):
            return (410 if "gone" in tok else 200), "x" * 20_000, extra
        return status, reason, extra


class BigAnswers(PushCase):
    """A provider's answer is read up to 16 KiB; past it the status alone decides: a 200 is an accepted push (it was
    sent again, four times, and recorded dead), a 410 removes the token."""

    def setUp(self):
        super().setUp()
        self.apns.stop()
        self.apns = BigAnswerAPNs(self.tmp.name).start()
        self.addCleanup(self.apns.stop)
        with open(os.path.join(self.rules, "settings.yaml"), "w") as f:
            f.write(settings(f"https://127.0.0.1:{self.apns.port}", self.apns.paths["p8"], self.apns.paths["ca"]))

    def test_a_big_answer_is_judged_by_its_status(self):
        server = self.serve()
        try:
            self.register(server, "ann", "big-ok-ann")
            self.register(server, "bob", "big-gone-bob")
            self.sign_up(server, "ann")
            self.sign_up(server, "bob")
            wait_until(self, lambda: [s for _, s, _ in self.outbox(server, "ann")] == ["delivered"], "ann's push delivered")
            wait_until(self, lambda: [s for _, s, _ in self.outbox(server, "bob")] == ["dead"], "bob's push dead")
            time.sleep(0.5)
            self.assertEqual(len(self.apns.to("big-ok-ann")), 1, "an accepted push was sent again")
            self.assertEqual(len(self.apns.to("big-gone-bob")), 1)
            self.assertEqual(self.export(server, "bob")["state"]["devices"], [], "the token APNs called gone stays")
        finally:
            self.assertEqual(server.stop(), 0)


class PushTo(PushCase):
    """A push's `to:` names one device (docs/push.md): with an APNs and an FCM destination, a device of the user goes
    only through its own platform's provider (the other one's "invalid token" removed the user's phone), never with
    push off, never once another user took it over; a token nobody holds is sent as given, and nobody's device is
    removed for it."""

    def setUp(self):
        self.tmp = tempfile.TemporaryDirectory()
        self.addCleanup(self.tmp.cleanup)
        os.makedirs(os.path.join(self.tmp.name, "apns"))
        self.apns = OtherPlatformAPNs(os.path.join(self.tmp.name, "apns")).start()
        self.addCleanup(self.apns.stop)
        self.fcm = FCMDouble(os.path.join(self.tmp.name, "fcm")).start()
        self.addCleanup(self.fcm.stop)
        self.rules = os.path.join(self.tmp.name, "rules")
        os.makedirs(self.rules)
        with open(os.path.join(self.rules, "to.yaml"), "w") as f:
            f.write("""version: 1
campaign: to
rules:
  - id: one
    on: Ping
    do:
      - push: { title: Hi, body: "one", to: "${event.properties.tok}" }
""")
        with open(os.path.join(self.rules, "settings.yaml"), "w") as f:
            f.write(settings(f"https://127.0.0.1:{self.apns.port}", self.apns.paths["p8"], self.apns.paths["ca"])
                    + fcm_destination(self.fcm))
        self.db = os.path.join(self.tmp.name, "db.sqlite")

    def ping(self, server, user, tok, n):
        now = time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())
        status, body = server.post("/v1/track", {"userId": user, "event": "Ping", "messageId": f"{user}-ping-{n}",
                                                 "timestamp": now, "properties": {"tok": tok}})
        self.assertEqual(status, 200, body)

    def settled(self, server, user, count):
        return wait_until(self, lambda: (lambda o: len(o) == count and all(st != "pending" for _, st, _ in o) and o)(
            self.outbox(server, user)), f"{user}'s pushes settled")

    def test_to_names_one_of_the_users_devices_on_its_own_platform(self):
        server = self.serve()
        try:
            self.register(server, "ann", "fcm-ann-phone", platform="android")
            self.register(server, "cy", "good-cy-off", enabled=False)
            self.register(server, "dee", "good-dee-phone")
            self.register(server, "eve", "good-dee-phone")  # dee's phone passed on to eve
            self.export(server, "eve")
            self.ping(server, "ann", "fcm-ann-phone", 1)
            self.ping(server, "cy", "good-cy-off", 1)
            self.ping(server, "dee", "good-dee-phone", 1)
            self.ping(server, "dee", "good-nobodys", 2)
            ann = sorted(self.settled(server, "ann", 2))
            self.assertEqual([(d, st) for d, st, _ in ann], [("android", "delivered"), ("ios", "dead")])
            self.assertIn("skipped: the device `to:` names is android, not ios", ann[1][2])
            self.assertEqual(self.apns.to("fcm-ann-phone"), [], "an Android token went to APNs")
            self.assertEqual(len(self.fcm.to("fcm-ann-phone")), 1)
            self.assertEqual([d["token"] for d in self.export(server, "ann")["state"]["devices"]], ["fcm-ann-phone"])
            self.settled(server, "cy", 2)
            self.assertEqual(self.apns.to("good-cy-off"), [], "a device with push off was sent to")
            self.settled(server, "dee", 4)
            self.assertEqual(self.apns.to("good-dee-phone"), [], "a phone another user took over got dee's push")
            self.assertEqual(len(self.apns.to("good-nobodys")), 1, "a token nobody holds is sent to as given")
            self.assertEqual(self.apns.violations, [])
        finally:
            self.assertEqual(server.stop(), 0)


class ShippedStampbook(PushCase):
    """The shipped Stampbook rule set (rules/stampbook) with an APNs destination beside it: the welcome goes as a push
    to a user's registered phone, is `skipped` for a user with none, and the inbox item stays for both."""

    def setUp(self):
        super().setUp()
        with open(os.path.join(self.rules, "settings.yaml")) as f:
            push = f.read()
        os.remove(os.path.join(self.rules, "welcome.yaml"))
        root = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
        for name in os.listdir(os.path.join(root, "rules", "stampbook")):
            shutil.copy(os.path.join(root, "rules", "stampbook", name), self.rules)
        # (The operator's part: the destination, added to Stampbook's settings file.)
        with open(os.path.join(self.rules, "settings.yaml"), "a") as f:
            f.write(push[push.index("destinations:"):])

    def test_the_welcome_goes_to_the_phone_and_stays_in_the_inbox(self):
        server = self.serve()
        try:
            self.register(server, "noa", "good-noa-phone")
            now = time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())
            for user in ("noa", "pia"):
                status, body = server.post("/v1/track", {"userId": user, "event": "Signed In", "timestamp": now,
                                                         "messageId": f"{user}-signed-in"})
                self.assertEqual(status, 200, body)
            wait_until(self, lambda: all(s != "pending" for u in ("noa", "pia") for _, s, _ in self.outbox(server, u)),
                       "both welcomes settled")
            self.assertEqual(self.apns.violations, [])
            sent = self.apns.to("good-noa-phone")
            self.assertEqual([r[4] for r in sent], [200])
            self.assertEqual(sent[0][3]["aps"]["alert"], {"title": "Welcome to Stampbook", "body": "Claim your first stamp"})
            self.assertEqual(sent[0][3]["deep_link"], "stampbook://stamps/welcome")
            self.assertEqual(self.outbox(server, "noa"), [("ios", "delivered", None)])
            state, error = self.outbox(server, "pia")[0][1:]
            self.assertEqual(state, "dead")
            self.assertIn("skipped", error)
            for user in ("noa", "pia"):
                status, inbox = server.request("GET", f"/v1/users/{user}/inbox",
                                               headers={"Authorization": "Bearer " + token(user)})
                self.assertEqual(status, 200)
                self.assertEqual([(i["id"], i["read"]) for i in inbox["items"]], [("welcome", False)])
            self.assertEqual(messages(server, "stampbook_welcome/welcome_notification"),
                             {"sent": 1, "delivered": 1, "skipped": 1})
            # The same counts in the console's live table, in the rule's row.
            client = HTTP(server.port)
            self.assertEqual(client.login()[0], 303)
            status, _, page, _ = client.request("GET", "/console")
            self.assertEqual(status, 200)
            row = page[page.index('id="rule-stampbook-welcome-welcome-notification"'):]
            self.assertIn("<td>sent 1, delivered 1, skipped 1</td>", row[:row.index("</tr>")])
            if server.url:
                # A fleet process writes them for the other processes' consoles (every 10 s).
                wait_until(self, lambda: "delivered" in psql(server.url, "SELECT messages FROM beckon_activity WHERE "
                                                             "rule = 'stampbook_welcome/welcome_notification'"),
                           "the counts in beckon_activity", seconds=30)
                stored = json.loads(psql(server.url, "SELECT messages FROM beckon_activity WHERE "
                                                     "rule = 'stampbook_welcome/welcome_notification'"))
                self.assertEqual(stored, {"sent": 1, "delivered": 1, "skipped": 1})
        finally:
            self.assertEqual(server.stop(), 0)


class FCMPush(PushCase):
    """The same through FCM's HTTP v1 API, with the service account's OAuth access token."""

    def setUp(self):
        self.tmp = tempfile.TemporaryDirectory()
        self.addCleanup(self.tmp.cleanup)
        self.fcm = FCMDouble(os.path.join(self.tmp.name, "fcm")).start()
        self.addCleanup(self.fcm.stop)
        self.rules = os.path.join(self.tmp.name, "rules")
        os.makedirs(self.rules)
        with open(os.path.join(self.rules, "welcome.yaml"), "w") as f:
            f.write(RULES)
        with open(os.path.join(self.rules, "settings.yaml"), "w") as f:
            f.write("version: 1\nsettings: push\ndestinations:\n" + fcm_destination(self.fcm))
        self.db = os.path.join(self.tmp.name, "db.sqlite")

    def test_fan_out_invalid_tokens_retries_and_provider_token_renewal(self):
        server = self.serve()
        try:
            self.register(server, "ann", "good-ann-phone", platform="android")
            self.register(server, "ann", "gone-ann-old", platform="android")
            self.register(server, "ann", "good-ann-iphone", platform="ios")
            self.register(server, "bob", "busy-bob", platform="android")
            self.register(server, "cy", "expire-cy", platform="android")
            self.register(server, "dee", "bad-dee", platform="android")
            for user in ("ann", "bob", "cy", "dee", "eve"):
                self.sign_up(server, user)
            wait_until(self, lambda: all(s != "pending" for u in ("ann", "bob", "cy", "dee", "eve")
                                         for _, s, _ in self.outbox(server, u)), "every push settled")
            self.assertEqual(self.fcm.violations, [])
            self.assertEqual([r[3] for r in self.fcm.to("good-ann-phone")], [200])
            self.assertEqual([r[3] for r in self.fcm.to("gone-ann-old")], [404])
            self.assertEqual(self.fcm.to("good-ann-iphone"), [], "an iOS device was sent to through FCM")
            message = self.fcm.to("good-ann-phone")[0][2]
            self.assertEqual(message["notification"], {"title": "Welcome", "body": "Hi ann"})
            self.assertEqual(message["data"]["deep_link"], "stampbook://home")
            (_, state, note), = self.outbox(server, "ann")
            self.assertEqual(state, "delivered")
            self.assertTrue(note.startswith("1 of 2 devices accepted; gone-ann…: 404 UNREGISTERED"), note)
            self.assertTrue(note.endswith("(token removed)"), note)
            tokens = sorted(d["token"] for d in self.export(server, "ann")["state"]["devices"])
            self.assertEqual(tokens, ["good-ann-iphone", "good-ann-phone"], "the UNREGISTERED token is not removed")
            self.assertEqual([r[3] for r in self.fcm.to("busy-bob")], [429, 200])
            self.assertEqual(self.outbox(server, "bob"), [("android", "delivered", None)])
            cy = self.fcm.to("expire-cy")
            self.assertEqual([r[3] for r in cy], [401, 200])
            self.assertNotEqual(cy[0][1], cy[1][1], "the access token was not renewed")
            self.assertEqual(self.outbox(server, "dee")[0][:2], ("android", "dead"))
            self.assertEqual(self.export(server, "dee")["state"]["devices"], [])
            self.assertIn("skipped", self.outbox(server, "eve")[0][2])
            # One access token served every push but cy's renewal: it is kept until it expires.
            self.assertEqual(len(self.fcm.issued), 2)
            self.sign_up(server, "ann", 2)
            wait_until(self, lambda: len(self.fcm.to("good-ann-phone")) == 2, "ann's second push")
            time.sleep(0.5)
            self.assertEqual(len(self.fcm.to("gone-ann-old")), 1)
        finally:
            self.assertEqual(server.stop(), 0)

    def test_kill_9_between_the_fire_and_the_delivery_sends_it_once(self):
        self.fcm.down = True
        server = self.serve()
        self.register(server, "fay", "good-fay", platform="android")
        self.sign_up(server, "fay")
        wait_until(self, lambda: self.fcm.to("good-fay"), "a first attempt")
        server.kill()
        self.fcm.down = False
        server = self.serve()
        try:
            wait_until(self, lambda: [r for r in self.fcm.to("good-fay") if r[3] == 200], "the delivery after the restart",
                       seconds=RESTART_SECONDS)
            time.sleep(1)
            self.assertEqual([r[3] for r in self.fcm.to("good-fay")].count(200), 1, "delivered twice")
            self.assertEqual(self.outbox(server, "fay"), [("android", "delivered", None)])
            self.assertEqual(self.fcm.violations, [])
        finally:
            self.assertEqual(server.stop(), 0)


if __name__ == "__main__":
    unittest.main()
