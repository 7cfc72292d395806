"""A local double of Firebase Cloud Messaging's HTTP v1 API and of Google's OAuth token endpoint for the push tests
(docs/push.md), checking what they check: the token endpoint takes a jwt-bearer grant whose assertion is an RS256
JWT signed by the service account's key (verified with its public half), issued by its email, for the messaging
scope, with the endpoint as audience and at most an hour's validity, and answers an access token; the send endpoint
takes only an access token it issued, for the service account's project, and a message with the device token, a
notification body and string data values.

The device token decides the answer:
  good-*    200
  gone-*    404 UNREGISTERED
  bad-*     400 INVALID_ARGUMENT (not a valid registration token)
  busy-*    429 QUOTA_EXCEEDED with Retry-After: 1 the first time, then 200
  expire-*  401 UNAUTHENTICATED for the first access token issued, then 200 for a new one
and every device 503 UNAVAILABLE while `down` is set.
"""
import base64
import json
import os
import threading
import time
import urllib.parse

from cryptography.exceptions import InvalidSignature
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import padding, rsa

from apns_double import TLSDouble, b64url, free_port, tls_files

PROJECT = "stampbook-test"
EMAIL = "beckon@stampbook-test.iam.gserviceaccount.com"
KID = "0123456789abcdef"
SCOPE = "https://www.googleapis.com/auth/firebase.messaging"


def error(code, status, message, fcm_code=None):
    details = [{"@type": "type.googleapis.com/google.firebase.fcm.v1.FcmError", "errorCode": fcm_code}] if fcm_code else []
    return {"error": {"code": code, "message": message, "status": status, "details": details}}


class FCMDouble(TLSDouble):
    alpn = ["h2", "http/1.1"]

    def __init__(self, folder):
        os.makedirs(folder, exist_ok=True)
        self.paths = tls_files(folder)
        self.port = free_port()
        self.token_uri = f"https://127.0.0.1:{self.port}/token"
        key = rsa.generate_private_key(public_exponent=65537, key_size=2048)
        self.public_key = key.public_key()
        self.paths["service_account"] = os.path.join(folder, "service-account.json")
        with open(self.paths["service_account"], "w") as f:
            json.dump({"type": "service_account", "project_id": PROJECT, "private_key_id": KID,
                       "private_key": key.private_bytes(serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8,
                                                        serialization.NoEncryption()).decode(),
                       "client_email": EMAIL, "token_uri": self.token_uri}, f)
        self.issued = []  # access tokens, in order
        self.requests = []  # (token, access token, message, status)
        self.violations = []
        self.busy_answered = set()
        self.down = False
        self.lock = threading.Lock()
        self._loop = None

    def check_assertion(self, assertion):
        try:
            h64, c64, s64 = assertion.split(".")
            header, claims = json.loads(b64url(h64)), json.loads(b64url(c64))
        except (ValueError, json.JSONDecodeError):
            return "not a JWT"
        if header.get("alg") != "RS256" or header.get("kid") != KID:
            return f"header {header}"
        aud = claims.get("aud")
        if claims.get("iss") != EMAIL or claims.get("scope") != SCOPE or self.token_uri not in (
                aud if isinstance(aud, list) else [aud]):
            return f"claims {claims}"
        iat, exp = claims.get("iat", 0), claims.get("exp", 0)
        if abs(time.time() - iat) > 300 or not 0 < exp - iat <= 3600:
            return f"times iat={iat} exp={exp}"
        try:
            self.public_key.verify(b64url(s64), f"{h64}.{c64}".encode(), padding.PKCS1v15(), hashes.SHA256())
        except InvalidSignature:
            return "bad signature"
        return None

    async def app(self, scope, receive, send):
        if scope["type"] != "http":
            return
        headers, body = await self.request(scope, receive)
        status, answer, extra = self.answer(scope, headers, body)
        await send({"type": "http.response.start", "status": status,
                    "headers": [(b"content-type", b"application/json")] + extra})
        await send({"type": "http.response.body", "body": json.dumps(answer).encode()})

    def violation(self, what, status, answer):
        with self.lock:
            self.violations.append(what)
        return status, answer, []

    def answer(self, scope, headers, body):
        path = scope["path"]
        if path == "/token":
            form = urllib.parse.parse_qs(body.decode())
            if form.get("grant_type") != ["urn:ietf:params:oauth:grant-type:jwt-bearer"]:
                return self.violation(f"grant_type {form.get('grant_type')}", 400, {"error": "unsupported_grant_type"})
            problem = self.check_assertion((form.get("assertion") or [""])[0])
            if problem:
                return self.violation("assertion: " + problem, 400, {"error": "invalid_grant"})
            with self.lock:
                token = f"at-{len(self.issued) + 1}-{base64.b16encode(os.urandom(4)).decode()}"
                self.issued.append(token)
            return 200, {"access_token": token, "expires_in": 3599, "token_type": "Bearer"}, []
        if path != f"/v1/projects/{PROJECT}/messages:send" or scope["method"] != "POST":
            return self.violation(f"{scope['method']} {path}", 404, error(404, "NOT_FOUND", "no such method"))
        access = headers.get("authorization", "")[len("Bearer "):]
        if access not in self.issued:
            return self.violation("access token " + access, 401, error(401, "UNAUTHENTICATED", "bad credentials"))
        try:
            message = json.loads(body)["message"]
            device = message["token"]
            assert isinstance(message["notification"]["body"], str)
            assert all(isinstance(v, str) for v in message.get("data", {}).values())
        except (ValueError, KeyError, TypeError, AssertionError):
            return self.violation("message " + body[:120].decode(errors="replace"), 400,
                                  error(400, "INVALID_ARGUMENT", "bad message"))
        with self.lock:
            status, answer, extra = 200, {"name": f"projects/{PROJECT}/messages/{len(self.requests) + 1}"}, []
            if self.down:
                status, answer = 503, error(503, "UNAVAILABLE", "unavailable", "UNAVAILABLE")
            elif device.startswith("gone-"):
                status, answer = 404, error(404, "NOT_FOUND", "Requested entity was not found.", "UNREGISTERED")
            elif device.startswith("bad-"):
                status, answer = 400, error(400, "INVALID_ARGUMENT",
                                            "The registration token is not a valid FCM registration token",
                                            "INVALID_ARGUMENT")
            elif device.startswith("busy-") and device not in self.busy_answered:
                self.busy_answered.add(device)
                status, answer = 429, error(429, "RESOURCE_EXHAUSTED", "quota", "QUOTA_EXCEEDED")
                extra = [(b"retry-after", b"1")]
            elif device.startswith("expire-") and access == self.issued[0]:
                status, answer = 401, error(401, "UNAUTHENTICATED", "Request had invalid authentication credentials.")
            self.requests.append((device, access, message, status))
        return status, answer, extra

    def to(self, device):
        with self.lock:
            return [r for r in self.requests if r[0] == device]
