"""A local double of an HTTP email API in SendGrid's v3 Mail Send shape for the email tests (docs/push.md, "Email"),
over TLS (HTTP/2 and HTTP/1.1): it takes only the API key it was given as a bearer token, and checks the message:
one recipient, a template id, a sender, merge data with the unsubscribe URL, and the List-Unsubscribe (that same URL
in angle brackets) and List-Unsubscribe-Post (One-Click) headers. It answers 202, or by recipient:
  bad@*    400
  busy@*   429 with Retry-After: 1 the first time, then 202
It also speaks another shape, Postmark's (`POST /email/withTemplate`, the key in `X-Postmark-Server-Token`; `From`,
`To`, `TemplateAlias`, `TemplateModel` with the unsubscribe URL, the same two headers in `Headers`), answering 200:
what a destination's `body` template makes.
"""
import json
import os
import threading

from apns_double import TLSDouble, free_port, tls_files

API_KEY = "SG.test-key"


class EmailDouble(TLSDouble):
    alpn = ["h2", "http/1.1"]

    def __init__(self, folder):
        os.makedirs(folder, exist_ok=True)
        self.paths = tls_files(folder)
        self.port = free_port()
        self.messages = []  # (recipient, message, status)
        self.violations = []
        self.busy_answered = set()
        self.lock = threading.Lock()
        self._loop = None

    async def app(self, scope, receive, send):
        if scope["type"] != "http":
            return
        headers, body = await self.request(scope, receive)
        status, extra = self.answer(scope, headers, body)
        await send({"type": "http.response.start", "status": status, "headers": extra})
        await send({"type": "http.response.body", "body": b""})

    def answer(self, scope, headers, body):
        def violation(what, status):
            with self.lock:
                self.violations.append(what)
            return status, []

        if scope["method"] == "POST" and scope["path"] == "/email/withTemplate":
            return self.postmark(headers, body, violation)
        if scope["method"] != "POST" or scope["path"] != "/v3/mail/send":
            return violation(f"{scope['method']} {scope['path']}", 404)
        if headers.get("authorization") != "Bearer " + API_KEY:
            return violation("authorization " + headers.get("authorization", "-"), 401)
        try:
            m = json.loads(body)
            (p,) = m["personalizations"]
            (to,) = p["to"]
            recipient = to["email"]
            data = p["dynamic_template_data"]
            assert m["template_id"] and "@" in m["from"]["email"]
            assert m["headers"]["List-Unsubscribe"] == "<" + data["unsubscribe_url"] + ">"
            assert m["headers"]["List-Unsubscribe-Post"] == "List-Unsubscribe=One-Click"
        except (ValueError, KeyError, TypeError, AssertionError):
            return violation("message " + body[:200].decode(errors="replace"), 400)
        with self.lock:
            status, extra = 202, []
            if recipient.startswith("bad@"):
                status = 400
            elif recipient.startswith("busy@") and recipient not in self.busy_answered:
                self.busy_answered.add(recipient)
                status, extra = 429, [(b"retry-after", b"1")]
            self.messages.append((recipient, m, status))
        return status, extra

    def postmark(self, headers, body, violation):
        if headers.get("x-postmark-server-token") != API_KEY or "authorization" in headers:
            return violation("token " + headers.get("x-postmark-server-token", "-"), 401)
        try:
            m = json.loads(body)
            recipient, model = m["To"], m["TemplateModel"]
            assert m["TemplateAlias"] and "@" in m["From"] and isinstance(model, dict)
            sent = {h["Name"]: h["Value"] for h in m["Headers"]}
            assert sent["List-Unsubscribe"] == "<" + model["unsubscribe_url"] + ">"
            assert sent["List-Unsubscribe-Post"] == "List-Unsubscribe=One-Click"
        except (ValueError, KeyError, TypeError, AssertionError):
            return violation("message " + body[:200].decode(errors="replace"), 422)
        with self.lock:
            self.messages.append((recipient, m, 200))
        return 200, []

    def to(self, recipient):
        with self.lock:
            return [x for x in self.messages if x[0] == recipient]
