#!/usr/bin/env python3
"""Email through an HTTP email API (docs/push.md, "Email") against a local double in SendGrid's v3 shape
(email_double.py): the action's template and merge data, an unsubscribe link with List-Unsubscribe headers, links
through the signed click endpoint; the unsubscribe link sets the trait and records the event, and later emails are
skipped; a click records its event and redirects only to the URL its signature covers; 429 is retried. Runs on either
store (BECKON_TEST_STORE=postgres: a fleet process).
"""
import os
import sys
import tempfile
import time
import unittest
import urllib.parse

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from email_double import API_KEY, EmailDouble  # noqa: E402
from push_test import messages, wait_until  # noqa: E402
from service_test import ADMIN_KEY, Server, caught_up  # noqa: E402

BASE = "https://beckon.example.com"
RULES = """version: 1
campaign: welcome
rules:
  - id: welcome_email
    on: Signed Up
    do:
      - email:
          template: d-welcome
          to: "${user.email}"
          subject: Welcome
          data: { name: "${user.first_name}", shop: "https://shop.example.com/new?from=email", count: 3 }
"""


class Email(unittest.TestCase):
    # (The destination's email block beyond its credentials and links: none for SendGrid's shape.)
    shape = ""

    def setUp(self):
        self.tmp = tempfile.TemporaryDirectory()
        self.addCleanup(self.tmp.cleanup)
        self.double = EmailDouble(os.path.join(self.tmp.name, "email")).start()
        self.addCleanup(self.double.stop)
        rules = os.path.join(self.tmp.name, "rules")
        os.makedirs(rules)
        with open(os.path.join(rules, "welcome.yaml"), "w") as f:
            f.write(RULES)
        with open(os.path.join(rules, "settings.yaml"), "w") as f:
            f.write(f"""version: 1
settings: mail
destinations:
  - name: mail
    url: https://127.0.0.1:{self.double.port}
    backoff: 200ms
    email:
      from: hello@stampbook.example
      from_name: Stampbook
      api_key_env: BECKON_TEST_EMAIL_KEY
      link_secret_env: BECKON_TEST_LINK_SECRET
      links_base_url: {BASE}
      ca_file: {self.double.paths["ca"]}
{self.shape}""")
        os.environ["BECKON_TEST_EMAIL_KEY"] = API_KEY
        os.environ["BECKON_TEST_LINK_SECRET"] = "link-secret-for-tests"
        self.server = Server([rules], os.path.join(self.tmp.name, "db.sqlite")).start()
        self.addCleanup(lambda: self.server.proc.poll() is not None or self.server.kill())

    def post(self, *events):
        now = time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())
        status, body = self.server.post("/v1/batch", {"batch": [{"timestamp": now, **e} for e in events]})
        self.assertEqual(status, 200, body)

    def export(self, user):
        if self.server.url:
            caught_up(self.server.url)
        status, body = self.server.request("GET", f"/v1/users/{user}/export", headers={"Authorization": "Bearer " + ADMIN_KEY})
        self.assertEqual(status, 200, body)
        return body

    def local(self, link):
        """A link of the email, as the local service answers it."""
        self.assertTrue(link.startswith(BASE + "/v1/"), link)
        return link[len(BASE):]

    def test_template_links_unsubscribe_and_clicks(self):
        try:
            self.post({"type": "identify", "userId": "ann", "messageId": "i1",
                       "traits": {"email": "ann@example.com", "first_name": "Ann"}},
                      {"type": "identify", "userId": "bob", "messageId": "i2", "traits": {"email": "busy@example.com"}},
                      {"type": "identify", "userId": "cy", "messageId": "i3", "traits": {"email": "bad@example.com"}},
                      {"type": "track", "userId": "ann", "event": "Signed Up", "messageId": "s1"},
                      {"type": "track", "userId": "bob", "event": "Signed Up", "messageId": "s2"},
                      {"type": "track", "userId": "cy", "event": "Signed Up", "messageId": "s3"})
            wait_until(self, lambda: len(self.double.to("ann@example.com")) == 1
                       and [x[2] for x in self.double.to("busy@example.com")] == [429, 202]
                       and self.double.to("bad@example.com"), "the three emails")
            self.assertEqual(self.double.violations, [])
            _, message, _ = self.double.to("ann@example.com")[0]
            self.assertEqual((message["template_id"], message["subject"]), ("d-welcome", "Welcome"))
            self.assertEqual(message["from"], {"email": "hello@stampbook.example", "name": "Stampbook"})
            data = message["personalizations"][0]["dynamic_template_data"]
            self.assertEqual((data["name"], data["count"]), ("Ann", 3))
            wait_until(self, lambda: [o["state"] for o in self.export("cy")["outbox"]] == ["dead"], "cy's refusal")

            # A click is recorded and redirected to the signed URL only.
            click = self.local(data["shop"])
            status, _ = self.server.request("GET", click)
            self.assertEqual(status, 302)
            conn_status, location = self.redirect(click)
            self.assertEqual((conn_status, location), (302, "https://shop.example.com/new?from=email"))
            tampered = click.replace(urllib.parse.quote("https://shop.example.com", safe=""),
                                     urllib.parse.quote("https://evil.example.com", safe=""))
            self.assertNotEqual(tampered, click)
            self.assertEqual(self.server.request("GET", tampered)[0], 403)
            self.assertEqual(self.server.request("GET", "/v1/click?d=mail&u=ann")[0], 400)

            # One-click unsubscribe (what a mail client posts), then the link itself: the trait, the event, once.
            unsubscribe = self.local(data["unsubscribe_url"])
            status, _ = self.server.request("POST", unsubscribe, b"List-Unsubscribe=One-Click",
                                            {"Content-Type": "application/x-www-form-urlencoded"})
            self.assertEqual(status, 200)
            status, page = self.server.request("GET", unsubscribe)
            self.assertEqual(status, 200)
            self.assertIn(b"unsubscribed", page)
            self.assertEqual(self.server.request("GET", unsubscribe.replace("u=ann", "u=bob"))[0], 403)
            export = self.export("ann")
            self.assertIn({"name": "email_unsubscribed", "value": True},
                          [{"name": k, "value": v} for k, v in export["state"]["attributes"].items()])
            names = [e["event"].get("event") for e in export["events"]]
            # (The second use stored a copy with the same messageId: a duplicate, which changed nothing.)
            self.assertEqual(len({e["event"]["messageId"] for e in export["events"]
                                  if e["event"].get("event") == "Email Unsubscribed"}), 1)
            self.assertEqual(names.count("Email Link Clicked"), 2)

            # Later emails to ann are skipped.
            self.post({"type": "track", "userId": "ann", "event": "Signed Up", "messageId": "s4"})
            wait_until(self, lambda: len(self.export("ann")["outbox"]) == 2
                       and self.export("ann")["outbox"][1]["state"] == "dead", "ann's second email settled")
            self.assertIn("unsubscribed", self.export("ann")["outbox"][1]["lastError"])
            self.assertEqual(len(self.double.to("ann@example.com")), 1)
            # The rule's counts: 4 requests (bob's twice), 2 delivered, cy's failed, ann's second skipped; the links.
            self.assertEqual(messages(self.server, "welcome/welcome_email"),
                             {"sent": 4, "delivered": 2, "failed": 1, "skipped": 1, "clicked": 2, "unsubscribed": 2})
        finally:
            self.assertEqual(self.server.stop(), 0)

    def redirect(self, path):
        import http.client
        c = http.client.HTTPConnection("127.0.0.1", self.server.port, timeout=10)
        try:
            c.request("GET", path)
            r = c.getresponse()
            r.read()
            return r.status, r.getheader("Location")
        finally:
            c.close()



class TemplatedEmail(Email):
    """Another API's shape from a `body` template (Postmark's): the key in its own header, the placeholders filled,
    the merge data as the template model, the unsubscribe link in the headers, and the link works."""
    shape = """      path: /email/withTemplate
      api_key_header: X-Postmark-Server-Token
      body:
        From: "{{from_name}} <{{from}}>"
        To: "{{to}}"
        TemplateAlias: "{{template}}"
        TemplateModel: "{{data}}"
        Headers:
          - { Name: List-Unsubscribe, Value: "<{{unsubscribe_url}}>" }
          - { Name: List-Unsubscribe-Post, Value: List-Unsubscribe=One-Click }
        Metadata: { beckon_action_id: "{{action_id}}" }
"""

    def test_template_links_unsubscribe_and_clicks(self):
        try:
            self.post({"type": "identify", "userId": "dee", "messageId": "i1",
                       "traits": {"email": "dee@example.com", "first_name": "Dee"}},
                      {"type": "track", "userId": "dee", "event": "Signed Up", "messageId": "s1"})
            wait_until(self, lambda: self.double.to("dee@example.com"), "the email")
            self.assertEqual(self.double.violations, [])
            _, message, status = self.double.to("dee@example.com")[0]
            self.assertEqual(status, 200)
            self.assertEqual((message["From"], message["TemplateAlias"]),
                             ("Stampbook <hello@stampbook.example>", "d-welcome"))
            model = message["TemplateModel"]
            self.assertEqual((model["name"], model["count"]), ("Dee", 3))
            self.assertTrue(model["shop"].startswith(BASE + "/v1/click?"), model["shop"])
            action = self.export("dee")["outbox"][0]
            wait_until(self, lambda: [o["state"] for o in self.export("dee")["outbox"]] == ["delivered"], "delivered")
            self.assertEqual(message["Metadata"], {"beckon_action_id": self.export("dee")["actions"][0]["id"]})
            self.assertEqual(action["destination"], "mail")
            status, _ = self.server.request("GET", self.local(model["unsubscribe_url"]))
            self.assertEqual(status, 200)
            self.assertEqual(messages(self.server, "welcome/welcome_email"), {"sent": 1, "delivered": 1, "unsubscribed": 1})
        finally:
            self.assertEqual(self.server.stop(), 0)


if __name__ == "__main__":
    unittest.main()
