#!/usr/bin/env python3
"""The HTTP API against its contract (`GET /openapi.json`, Sources/BeckonServer/API/openapi.json), on each store: the
document is valid OpenAPI 3.1 (openapi-spec-validator), and schemathesis exercises a live `beckon serve` over SQLite
and a live `beckon serve --postgres` with it — no 5xx, every status, content type and body as documented, and every
protected route refusing a request without its credential.

Bounded: a fixed seed and at most MAX_EXAMPLES examples per operation and phase; long polls asked with `wait=0`.
The PostgreSQL case needs BECKON_TEST_POSTGRES (scripts/test.sh sets it). scripts/install-python-clients.sh installs
schemathesis and openapi-spec-validator.
"""
import json
import os
import subprocess
import sys
import tempfile
import time
import unittest
import urllib.request

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from service_test import ADMIN_KEY, KEY, ROOT, Server, basic, token  # noqa: E402
from fleet_test import LEASE, Process, database, wait_caught_up  # noqa: E402

DOCUMENT = os.path.join(ROOT, "Sources/BeckonServer/API/openapi.json")
RULES = [os.path.join(ROOT, "rules/stampbook")]
MAX_EXAMPLES = int(os.environ.get("CONTRACT_MAX_EXAMPLES", "60"))
SEED = os.environ.get("CONTRACT_SEED", "20261127")
USER = "mia"
# The checks of the contract; `ignored_auth` runs on its own, last: its wrong credentials make the address throttled
# (429 for every request with a credential), which would leave the other checks nothing but 429s to look at.
CHECKS = "not_a_server_error,status_code_conformance,content_type_conformance,response_schema_conformance"
PG = os.environ.get("BECKON_TEST_POSTGRES")


def config(directory):
    """A schemathesis.toml with each security scheme's credential, the user the token names, and `wait=0`."""
    path = os.path.join(directory, "schemathesis.toml")
    with open(path, "w") as f:
        f.write(f"""
[auth.openapi.writeKey]
username = "{KEY}"
password = ""
[auth.openapi.adminKey]
bearer = "{ADMIN_KEY}"
[auth.openapi.userToken]
bearer = "{token(USER)}"
[parameters]
"path.userId" = "{USER}"
"query.wait" = 0
""")
    return path


def schemathesis(test, port, checks, directory):
    """Runs schemathesis against the server on `port`; fails the test with its report unless it passes."""
    args = [sys.executable, "-m", "schemathesis.cli", "--config-file", config(directory), "run", f"http://127.0.0.1:{port}/openapi.json",
            "--checks", checks, "--max-examples", str(MAX_EXAMPLES), "--seed", SEED, "--request-timeout", "20",
            "--no-color"]
    r = subprocess.run(args, capture_output=True, text=True, timeout=600, cwd=directory)
    summary = [line for line in r.stdout.splitlines() if "generated" in line and "passed" in line]
    # ("N generated, N passed": schemathesis's own count of cases it left out is not a skipped test.)
    counts = ", ".join(summary[-1].strip().split(", ")[:2]) if summary else "?"
    print(f"\nschemathesis ({checks.count(',') + 1} checks): {counts}", file=sys.stderr)
    test.assertEqual(r.returncode, 0, r.stdout[-6000:] + r.stderr[-2000:])


def seed_events(post):
    """A user with an inbox item and actions, so that the user routes answer with content."""
    events = [{"type": "track", "event": "Signed In", "userId": USER, "messageId": "contract-1",
               "timestamp": "2026-03-02T09:00:00Z"}]
    status = post(events)
    assert status == 200, status


class Document(unittest.TestCase):
    def test_the_document_is_valid_openapi_3_1(self):
        from openapi_spec_validator import validate
        with open(DOCUMENT) as f:
            document = json.load(f)
        validate(document)
        self.assertEqual(document["openapi"], "3.1.0")


class SQLite(unittest.TestCase):
    def test_a_single_service_keeps_the_contract(self):
        with tempfile.TemporaryDirectory() as d:
            server = Server(RULES, os.path.join(d, "beckon.sqlite")).start()
            try:
                with urllib.request.urlopen(f"http://127.0.0.1:{server.port}/openapi.json", timeout=10) as r:
                    with open(DOCUMENT, "rb") as f:
                        self.assertEqual(json.loads(r.read()), json.loads(f.read()), "the served document is not the file")
                seed_events(lambda events: server.post("/v1/batch", {"batch": events})[0])
                schemathesis(self, server.port, CHECKS, d)
                schemathesis(self, server.port, "not_a_server_error,ignored_auth", d)
            finally:
                server.stop()


@unittest.skipUnless(PG, "needs BECKON_TEST_POSTGRES")
class PostgreSQL(unittest.TestCase):
    def test_a_fleet_process_keeps_the_contract(self):
        url = database("beckon_contract")
        with tempfile.TemporaryDirectory() as d:
            process = Process(RULES, url, "contract").start()
            try:
                deadline = time.monotonic() + 60
                while process.request("GET", "/readyz")[0] != 200:
                    self.assertLess(time.monotonic(), deadline, "the fleet process was not ready within 60 s")
                    time.sleep(0.2)
                seed_events(lambda events: process.post(events))
                wait_caught_up(self, url, seconds=60)
                schemathesis(self, process.port, CHECKS, d)
                schemathesis(self, process.port, "not_a_server_error,ignored_auth", d)
            finally:
                process.stop()


if __name__ == "__main__":
    unittest.main()
