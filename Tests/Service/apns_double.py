"""A local double of Apple's push service for the push tests (docs/push.md), checking what APNs checks: HTTP/2 over
TLS (a certificate made here, trusted by the service through the destination's `ca_file`), a provider token that is
an ES256 JWT with the key id in its header and the team id and a recent issue time in its claims, verified with the
key's public half; `apns-topic`, `apns-push-type`, `apns-priority`, a UUID `apns-id`; a JSON payload with `aps.alert`.

The device token decides the answer, as the real service's would for such a device:
  good-*    200
  gone-*    410 Unregistered
  bad-*     400 BadDeviceToken
  busy-*    429 TooManyRequests with Retry-After: 1 the first time, then 200
  expire-*  403 ExpiredProviderToken for the first provider token it sees, then 200 for a new one
and every device 503 ServiceUnavailable while `down` is set.
A request that breaks a rule is answered 400 or 403 with the reason APNs gives, and recorded as a violation.
"""
import asyncio
import base64
import datetime
import ipaddress
import json
import os
import re
import threading
import time

from cryptography import x509
from cryptography.exceptions import InvalidSignature
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec
from cryptography.hazmat.primitives.asymmetric.utils import encode_dss_signature
from cryptography.x509.oid import NameOID

TEAM, KEY_ID, TOPIC = "TEAM123456", "KEY7654321", "com.example.stampbook"
UUID = re.compile(r"^[0-9A-F]{8}-[0-9A-F]{4}-[0-9A-F]{4}-[0-9A-F]{4}-[0-9A-F]{12}$")


def b64url(data):
    return base64.urlsafe_b64decode(data + "=" * (-len(data) % 4))


def credentials(folder):
    """Writes the signing key (.p8), a CA and a loopback server certificate; returns their paths and the public key."""
    key = ec.generate_private_key(ec.SECP256R1())
    p8 = os.path.join(folder, f"AuthKey_{KEY_ID}.p8")
    with open(p8, "wb") as f:
        f.write(key.private_bytes(serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8,
                                  serialization.NoEncryption()))
    return {"p8": p8, **tls_files(folder)}, key.public_key()


def tls_files(folder):
    """A CA and a certificate for 127.0.0.1 signed by it, in `folder`: their paths (ca, cert, key)."""
    now = datetime.datetime.now(datetime.timezone.utc)
    ca_key = ec.generate_private_key(ec.SECP256R1())
    ca_name = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, "Beckon test CA")])
    ca = (x509.CertificateBuilder().subject_name(ca_name).issuer_name(ca_name).public_key(ca_key.public_key())
          .serial_number(x509.random_serial_number()).not_valid_before(now - datetime.timedelta(days=1))
          .not_valid_after(now + datetime.timedelta(days=2))
          .add_extension(x509.BasicConstraints(ca=True, path_length=None), critical=True)
          .sign(ca_key, hashes.SHA256()))
    server_key = ec.generate_private_key(ec.SECP256R1())
    cert = (x509.CertificateBuilder()
            .subject_name(x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, "127.0.0.1")]))
            .issuer_name(ca_name).public_key(server_key.public_key()).serial_number(x509.random_serial_number())
            .not_valid_before(now - datetime.timedelta(days=1)).not_valid_after(now + datetime.timedelta(days=2))
            .add_extension(x509.SubjectAlternativeName([x509.IPAddress(ipaddress.ip_address("127.0.0.1")),
                                                        x509.DNSName("localhost")]), critical=False)
            .sign(ca_key, hashes.SHA256()))
    paths = {"ca": os.path.join(folder, "ca.pem"), "cert": os.path.join(folder, "server.pem"),
             "key": os.path.join(folder, "server-key.pem")}
    with open(paths["ca"], "wb") as f:
        f.write(ca.public_bytes(serialization.Encoding.PEM))
    with open(paths["cert"], "wb") as f:
        f.write(cert.public_bytes(serialization.Encoding.PEM))
    with open(paths["key"], "wb") as f:
        f.write(server_key.private_bytes(serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8,
                                         serialization.NoEncryption()))
    return paths


def free_port():
    import socket
    s = socket.socket()
    s.bind(("127.0.0.1", 0))
    port = s.getsockname()[1]
    s.close()
    return port


class TLSDouble:
    """An ASGI app served by hypercorn over TLS (HTTP/2 and HTTP/1.1 by ALPN) on a loopback port, in a thread."""

    # Requests on a connection before the double closes it (GOAWAY): hypercorn's default, which the tests keep, as
    # a provider may close a connection; the push benchmark lifts it, as APNs keeps a connection open for hours.
    max_requests = 1000

    def start(self):
        from hypercorn.asyncio import serve
        from hypercorn.config import Config
        import socket
        if self.port is None:
            self.port = free_port()
        config = Config()
        config.bind = [f"127.0.0.1:{self.port}"]
        config.certfile, config.keyfile = self.paths["cert"], self.paths["key"]
        config.alpn_protocols = self.alpn
        config.loglevel = "ERROR"
        config.accesslog = None
        config.keep_alive_max_requests = self.max_requests
        ready = threading.Event()

        def run():
            self._loop = asyncio.new_event_loop()
            self._stop = asyncio.Event()

            async def main():
                ready.set()
                await serve(self.app, config, shutdown_trigger=self._stop.wait)

            self._loop.run_until_complete(main())

        self._thread = threading.Thread(target=run, daemon=True)
        self._thread.start()
        ready.wait(10)
        deadline = time.time() + 10
        while time.time() < deadline:
            try:
                socket.create_connection(("127.0.0.1", self.port), timeout=1).close()
                return self
            except OSError:
                time.sleep(0.05)
        raise RuntimeError("the double did not start")

    @staticmethod
    async def request(scope, receive):
        """An ASGI request's headers (lower-case names) and whole body."""
        body = b""
        while True:
            m = await receive()
            body += m.get("body", b"")
            if not m.get("more_body"):
                break
        return {k.decode().lower(): v.decode() for k, v in scope["headers"]}, body

    def stop(self):
        if self._loop:
            self._loop.call_soon_threadsafe(self._stop.set)
            self._thread.join(timeout=10)
            self._loop = None


class APNsDouble(TLSDouble):
    alpn = ["h2"]

    def __init__(self, folder):
        self.paths, self.public_key = credentials(folder)
        self.requests = []  # (token, apns-id, provider token, payload, status, when)
        self.violations = []
        self.first_provider = None
        self.verified = {}  # provider token -> its iat, once its signature is verified
        self.down = False  # answer 503 to everything (an outage)
        self.busy_answered = set()
        self.lock = threading.Lock()
        self.port = None
        self._loop = None
        self._stop = None

    def check_jwt(self, token):
        # (A token whose signature was verified once is not verified again, as APNs does on a connection; its age
        # is checked every time.)
        if token in self.verified:
            iat = self.verified[token]
            return None if abs(time.time() - iat) <= 3600 else "ExpiredProviderToken"
        try:
            header_b64, claims_b64, sig_b64 = token.split(".")
            header, claims = json.loads(b64url(header_b64)), json.loads(b64url(claims_b64))
        except (ValueError, json.JSONDecodeError):
            return "InvalidProviderToken"
        if header.get("alg") != "ES256" or header.get("kid") != KEY_ID or claims.get("iss") != TEAM:
            return "InvalidProviderToken"
        if not isinstance(claims.get("iat"), (int, float)) or abs(time.time() - claims["iat"]) > 3600:
            return "ExpiredProviderToken"
        sig = b64url(sig_b64)
        if len(sig) != 64:
            return "InvalidProviderToken"
        der = encode_dss_signature(int.from_bytes(sig[:32], "big"), int.from_bytes(sig[32:], "big"))
        try:
            self.public_key.verify(der, f"{header_b64}.{claims_b64}".encode(), ec.ECDSA(hashes.SHA256()))
        except InvalidSignature:
            return "InvalidProviderToken"
        self.verified[token] = claims["iat"]
        return None

    async def app(self, scope, receive, send):
        if scope["type"] != "http":
            return
        headers, body = await self.request(scope, receive)
        status, reason, extra = self.answer(scope, headers, body)
        out = [(b"content-type", b"application/json")] + extra
        if "apns-id" in headers:
            out.append((b"apns-id", headers["apns-id"].encode()))
        await send({"type": "http.response.start", "status": status, "headers": out})
        await send({"type": "http.response.body", "body": json.dumps({"reason": reason}).encode() if reason else b""})

    def answer(self, scope, headers, body):
        path = scope["path"]
        token = path.rsplit("/", 1)[-1]
        provider = headers.get("authorization", "")[len("bearer "):]

        def violation(what, status, reason):
            with self.lock:
                self.violations.append(what)
            return status, reason, []

        if scope.get("http_version") != "2":
            return violation(f"HTTP/{scope.get('http_version')}", 400, "BadHTTPVersion")
        if scope["method"] != "POST" or not path.startswith("/3/device/"):
            return violation(f"{scope['method']} {path}", 404, "BadPath")
        problem = self.check_jwt(provider)
        if problem:
            return violation(problem, 403, problem)
        if headers.get("apns-topic") != TOPIC:
            return violation("topic " + headers.get("apns-topic", "-"), 400, "BadTopic")
        if headers.get("apns-push-type") != "alert" or headers.get("apns-priority") not in ("5", "10"):
            return violation("push type or priority", 400, "InvalidPushType")
        if not UUID.match(headers.get("apns-id", "")):
            return violation("apns-id " + headers.get("apns-id", "-"), 400, "BadMessageId")
        try:
            payload = json.loads(body)
            assert isinstance(payload["aps"]["alert"]["body"], str)
        except (ValueError, KeyError, TypeError, AssertionError):
            return violation("payload " + body[:100].decode(errors="replace"), 400, "PayloadEmpty")
        with self.lock:
            if self.down:
                self.requests.append((token, headers["apns-id"], provider, payload, 503, time.monotonic()))
                return 503, "ServiceUnavailable", []
            if self.first_provider is None:
                self.first_provider = provider
            status, reason, extra = 200, None, []
            if token.startswith("gone-"):
                status, reason = 410, "Unregistered"
            elif token.startswith("bad-"):
                status, reason = 400, "BadDeviceToken"
            elif token.startswith("busy-") and token not in self.busy_answered:
                self.busy_answered.add(token)
                status, reason, extra = 429, "TooManyRequests", [(b"retry-after", b"1")]
            elif token.startswith("expire-") and provider == self.first_provider:
                status, reason = 403, "ExpiredProviderToken"
            self.requests.append((token, headers["apns-id"], provider, payload, status, time.monotonic()))
        return status, reason, extra

    def to(self, token):
        with self.lock:
            return [r for r in self.requests if r[0] == token]
