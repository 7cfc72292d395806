#!/usr/bin/env python3
"""Tests of the console (docs/console.md) in a real headless Chromium (Debian's chromium and chromium-driver, through
Selenium), against `beckon serve` on loopback: sign in, the overview's counts after a posted sample, a user's timeline
with explain's verdicts, the playground's positioned diagnostic and dry-run table, sign out; the pages at 1280 and
390 px; axe-core's accessibility rules; and the security rules over plain HTTP (no page without a session, CSRF,
hostile text inert, the playground's limits and isolation). With BECKON_SCREENSHOTS=DIR the screenshots are written
there (scripts/render-console.sh writes docs/images). Run by scripts/test.sh."""
import base64
import glob
import html
import http.client
import json
import os
import re
import shutil
import subprocess
import sys
import tempfile
import unittest
import urllib.parse

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from service_test import ADMIN_KEY, BECKON, HTTP, ROOT, Server  # noqa: E402

from axe_selenium_python import Axe  # noqa: E402
from selenium import webdriver  # noqa: E402
from selenium.common.exceptions import NoAlertPresentException, WebDriverException  # noqa: E402
from selenium.webdriver.chrome.options import Options  # noqa: E402
from selenium.webdriver.chrome.service import Service  # noqa: E402
from selenium.webdriver.common.by import By  # noqa: E402
from selenium.webdriver.support.ui import WebDriverWait  # noqa: E402

RULES = os.path.join(ROOT, "rules/stampbook")
SAMPLES = sorted(glob.glob(os.path.join(ROOT, "samples/stampbook/*.jsonl")))
SHOTS = os.environ.get("BECKON_SCREENSHOTS")
SCRIPT = '<script>alert("x")</script>'
IMG = '"><img src=x onerror=alert(1)>'
HOSTILE_USER = 'eve' + IMG


def read(path):
    with open(path) as f:
        return f.read()


def sample_events():
    out = []
    for path in SAMPLES:
        with open(path) as f:
            out += [line for line in f.read().splitlines() if line.strip()]
    return out


def hostile_events():
    """Hostile text where every page shows users' text: a user id, a trait (an attribute), an event's name."""
    return [
        {"type": "identify", "userId": HOSTILE_USER, "timestamp": "2026-03-02T12:00:00Z", "messageId": "h1",
         "traits": {"nickname": SCRIPT, "bio": IMG}},
        {"type": "track", "userId": HOSTILE_USER, "event": "Signed In", "timestamp": "2026-03-02T12:01:00Z",
         "messageId": "h2" + SCRIPT, "properties": {"note": SCRIPT}},
    ]


def browser(width, height=900):
    o = Options()
    o.binary_location = shutil.which("chromium") or "/usr/bin/chromium"
    for a in ["--headless=new", "--no-sandbox", "--disable-gpu", "--disable-dev-shm-usage", "--hide-scrollbars",
              f"--window-size={width},{height}", "--force-device-scale-factor=1", "--lang=en-US"]:
        o.add_argument(a)
    d = webdriver.Chrome(service=Service(shutil.which("chromedriver") or "/usr/bin/chromedriver"), options=o)
    d.set_page_load_timeout(60)
    # A window is at least 500 px wide: a phone's width is emulated (as the browser's device mode does).
    d.execute_cdp_cmd("Emulation.setDeviceMetricsOverride",
                      {"width": width, "height": height, "deviceScaleFactor": 1, "mobile": width < 600})
    return d


def gone(element):
    """Whether an element of a page is no longer in the browser's document (the page was replaced)."""
    try:
        element.tag_name  # noqa: B018
        return False
    except WebDriverException:
        return True


def submit(d, css):
    """Clicks a form's button and waits for the page it loads."""
    old = d.find_element(By.TAG_NAME, "html")
    d.find_element(By.CSS_SELECTOR, css).click()
    WebDriverWait(d, 60).until(lambda drv: gone(old))
    WebDriverWait(d, 60).until(lambda drv: drv.execute_script("return document.readyState") == "complete")


class ConsoleTest(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        cls.tmp = tempfile.mkdtemp(prefix="beckon-console-")
        cls.server = Server([RULES], os.path.join(cls.tmp, "db.sqlite")).start()
        cls.base = f"http://localhost:{cls.server.port}"
        events = [json.loads(line) for line in sample_events()] + hostile_events()
        for i in range(0, len(events), 10):
            status, body = cls.server.post("/v1/batch", {"batch": events[i:i + 10]})
            assert status == 200, (status, body)

    @classmethod
    def tearDownClass(cls):
        cls.server.stop()
        shutil.rmtree(cls.tmp, ignore_errors=True)

    # MARK: helpers

    def sign_in(self, d):
        d.get(self.base + "/console")
        self.assertTrue(d.current_url.endswith("/console/login"), d.current_url)
        d.find_element(By.ID, "key").send_keys(ADMIN_KEY)
        submit(d, "form.stack button[type=submit]")
        self.assertTrue(d.current_url.endswith("/console"), d.current_url)

    def shot(self, d, name):
        if not SHOTS:
            return
        os.makedirs(SHOTS, exist_ok=True)
        # The whole page: the viewport made as tall as the page for the picture (capturing beyond the viewport
        # would lay out wide regions again, scrolled).
        width, height = d.execute_script("return [window.innerWidth, window.innerHeight]")
        full = d.execute_script("return document.documentElement.scrollHeight")
        metrics = {"width": width, "deviceScaleFactor": 1, "mobile": width < 600}
        d.execute_cdp_cmd("Emulation.setDeviceMetricsOverride", {**metrics, "height": full})
        shot = d.execute_cdp_cmd("Page.captureScreenshot", {"format": "png"})
        d.execute_cdp_cmd("Emulation.setDeviceMetricsOverride", {**metrics, "height": height})
        with open(os.path.join(SHOTS, name + ".png"), "wb") as f:
            f.write(base64.b64decode(shot["data"]))

    def inert(self, d):
        """No script or image came from users' text: no dialog, no element of theirs."""
        with self.assertRaises(NoAlertPresentException):
            d.switch_to.alert.text  # noqa: B018
        self.assertEqual(d.find_elements(By.CSS_SELECTOR, "script, img, iframe"), [])

    def expected_counts(self):
        """Per rule (triggered, fired) of a dry-run of the same events, the reference for the overview."""
        with open(os.path.join(self.tmp, "all.jsonl"), "w") as f:
            f.write("\n".join(sample_events() + [json.dumps(e) for e in hostile_events()]) + "\n")
        out = subprocess.run([BECKON, "dry-run", RULES, "--events", f.name], capture_output=True, text=True,
                             timeout=120).stdout
        counts = {}
        for line in out.splitlines():
            m = re.match(r"^(\S+/\S+)\s+(\d+)\s+(\d+)\s", line)
            if m:
                counts[m.group(1)] = (int(m.group(2)), int(m.group(3)))
        self.assertTrue(counts, out)
        return counts

    def explain_lines(self, user):
        out = subprocess.run([BECKON, "explain", RULES, "--events", os.path.join(self.tmp, "all.jsonl"), "--user", user],
                             capture_output=True, text=True, timeout=120).stdout
        return [line.strip() for line in out.splitlines() if line.strip().startswith(("✓", "✗", "⏲"))]

    # MARK: the marketer's path in a browser

    def test_sign_in_overview_timeline_playground_sign_out(self):
        d = browser(1280)
        try:
            self.sign_in(d)
            self.assertEqual(d.find_element(By.TAG_NAME, "h1").text, "Overview")
            # The live counts are those of a dry-run of the posted events (last hour: triggered, fired).
            for rule, (triggered, fired) in self.expected_counts().items():
                row = d.find_element(By.ID, "rule-" + re.sub(r"[^A-Za-z0-9]", "-", rule))
                cells = [c.text for c in row.find_elements(By.TAG_NAME, "td")]
                self.assertEqual((int(cells[0]), int(cells[1])), (triggered, fired), rule)
                self.assertEqual((int(cells[5]), int(cells[6])), (triggered, fired), rule)
            self.assertIn("welcome.yaml", d.find_element(By.TAG_NAME, "main").text)
            self.inert(d)
            self.shot(d, "console-overview-1280")

            # A user's timeline: explain's verdict lines, word for word.
            d.get(self.base + "/console/user")
            d.find_element(By.ID, "uid").send_keys("mia")
            submit(d, "form[role=search] button")
            text = d.find_element(By.CSS_SELECTOR, "ol.timeline").text
            expected = self.explain_lines("mia")
            self.assertTrue(expected)
            for line in expected:
                self.assertIn(line, text)
            self.assertIn("welcome_stamp_claimed_first  if was false", text)
            self.assertIn("Attributes", d.find_element(By.TAG_NAME, "main").text)
            self.shot(d, "console-user-1280")

            # The playground: a typo gets a positioned diagnostic; the fixed file a dry-run table.
            d.get(self.base + "/console/playground?file=" + urllib.parse.quote(os.path.join(RULES, "welcome.yaml"))
                  + "&user=mia&n=10")
            rules = d.find_element(By.ID, "rules")
            original = rules.get_attribute("value")
            self.assertIn("welcome_notification", original)
            loaded = d.find_element(By.ID, "events").get_attribute("value").splitlines()
            self.assertEqual({json.loads(x)["userId"] for x in loaded}, {"mia"})
            broken = original.replace("per_user: 1", "per_usr: 1")
            line = broken.splitlines().index(next(x for x in broken.splitlines() if "per_usr" in x)) + 1
            column = broken.splitlines()[line - 1].index("per_usr") + 1
            d.execute_script("arguments[0].value = arguments[1]", rules, broken)
            submit(d, "form.stack button[type=submit]")
            diag = d.find_element(By.CSS_SELECTOR, ".diag.error").text
            self.assertIn(f"welcome.yaml:{line}:{column}", diag)
            self.assertIn("per_user", diag)  # the suggestion
            self.assertEqual(d.find_elements(By.CSS_SELECTOR, "table.dryrun"), [])
            self.shot(d, "console-playground-diagnostic-1280")
            rules = d.find_element(By.ID, "rules")
            d.execute_script("arguments[0].value = arguments[1]", rules, original)
            submit(d, "form.stack button[type=submit]")
            table = d.find_element(By.CSS_SELECTOR, "table.dryrun").text
            self.assertIn("stampbook_welcome/welcome_notification", table)
            self.assertIn("notify", table)
            self.assertIn("not fired", table)
            self.shot(d, "console-playground-1280")

            d.get(self.base + "/console/report?from=2026-03-01&to=2026-03-31")
            self.assertIn("claimed_welcome_within_24h", d.find_element(By.TAG_NAME, "main").text)
            self.shot(d, "console-report-1280")

            # Signing out ends the session: the pages send to the sign-in form again.
            submit(d, "form.logout button")
            self.assertTrue(d.current_url.endswith("/console/login"), d.current_url)
            d.get(self.base + "/console/user?id=mia")
            self.assertTrue(d.current_url.endswith("/console/login"), d.current_url)
            self.shot(d, "console-login-1280")
        finally:
            d.quit()

    def test_narrow_screen_and_accessibility(self):
        """At 390 px no page scrolls sideways (wide tables scroll in their own region), and axe-core finds nothing
        serious or critical on any page."""
        d = browser(390, 844)
        try:
            d.get(self.base + "/console/login")
            pages = [("login", None)]
            pages += [("overview", "/console"), ("user", "/console/user?id=mia"),
                      ("playground", "/console/playground?user=mia&n=5"),
                      ("report", "/console/report?from=2026-03-01&to=2026-03-31")]
            found = {}
            for name, path in pages:
                if path:
                    d.get(self.base + path)
                if name == "playground":
                    submit(d, "form.stack button[type=submit]")
                    self.assertTrue(d.find_elements(By.CSS_SELECTOR, "table.dryrun"))
                overflow = d.execute_script("return document.documentElement.scrollWidth - window.innerWidth")
                self.assertLessEqual(overflow, 0, f"{name} scrolls sideways by {overflow} px at 390 px")
                self.shot(d, f"console-{name}-390")  # (before axe, which scrolls regions as it checks contrast)
                axe = Axe(d)
                axe.inject()
                results = axe.run()
                self.assertGreater(len(results["passes"]), 10, name)  # it ran
                bad = [v for v in results["violations"] if v["impact"] in ("serious", "critical")]
                found[name] = [(v["id"], v["impact"], len(v["nodes"])) for v in results["violations"]]
                self.assertEqual(bad, [], f"{name}: " + "; ".join(
                    f"{v['id']} ({v['impact']}): {v['nodes'][0]['target']}" for v in bad))
                if name == "login":
                    self.sign_in(d)
            print("axe findings (none serious):", found, file=sys.stderr)
        finally:
            d.quit()

    def test_hostile_text_is_inert_on_every_page(self):
        d = browser(1280)
        try:
            self.sign_in(d)
            user = urllib.parse.quote(HOSTILE_USER)
            for path in ["/console", f"/console/user?id={user}", f"/console/playground?user={user}&n=5",
                         "/console/report?from=2026-03-01&to=2026-03-31"]:
                d.get(self.base + path)
                self.inert(d)
            # The text is shown as text.
            d.get(self.base + f"/console/user?id={user}")
            main = d.find_element(By.TAG_NAME, "main").text
            self.assertIn(HOSTILE_USER, main)
            self.assertIn(SCRIPT.replace('"', '\\"'), main)  # the trait's JSON value
            d.get(self.base + f"/console/playground?user={user}&n=5")
            d.execute_script("arguments[0].value = arguments[1]", d.find_element(By.ID, "rules"),
                             "version: 1\nruleset: x" + SCRIPT + "\n</textarea>" + IMG + "\n")
            submit(d, "form.stack button[type=submit]")
            self.inert(d)
            self.assertTrue(d.find_elements(By.CSS_SELECTOR, ".diag"))
            loaded = d.find_element(By.ID, "events").get_attribute("value").splitlines()
            self.assertEqual({json.loads(x)["userId"] for x in loaded}, {HOSTILE_USER})
        finally:
            d.quit()

    # MARK: security over plain HTTP

    def test_no_page_without_a_session(self):
        c = HTTP(self.server.port)
        for path in ["/console", "/console/user?id=mia", "/console/playground?user=mia", "/console/report"]:
            status, headers, body, _ = c.request("GET", path)
            self.assertEqual(status, 303, path)
            self.assertEqual(headers.get("Location"), "/console/login")
            self.assertNotIn("mia", body)
        status, _, body, _ = c.request("POST", "/console/playground", form={"rules": "x", "events": ""})
        self.assertEqual(status, 403)
        self.assertNotIn("Dry run", body)
        # A made-up session id is no session.
        c.cookies["__Secure-beckon_session"] = "0" * 64
        self.assertEqual(c.request("GET", "/console")[0], 303)

    def test_sign_in_cookie_and_headers(self):
        c = HTTP(self.server.port)
        status, _, body, cookies = c.login(key="not-the-key")
        self.assertEqual(status, 401)
        self.assertFalse(any(x.startswith("__Secure-beckon_session=") for x in cookies))
        status, headers, _, cookies = c.login()
        self.assertEqual(status, 303)
        session = next(x for x in cookies if x.startswith("__Secure-beckon_session="))
        for attribute in ["HttpOnly", "Secure", "SameSite=Strict", "Path=/console"]:
            self.assertIn(attribute, session)
        status, headers, body, _ = c.request("GET", "/console")
        self.assertEqual(status, 200)
        self.assertIn("default-src 'none'", headers["Content-Security-Policy"])
        self.assertNotIn("script-src", headers["Content-Security-Policy"])  # none: default-src 'none' holds
        self.assertNotIn("<script", body)
        self.assertNotRegex(body, r'(src|href)="(https?:)?//')  # nothing from elsewhere
        # A sign-in without the form's own token (a cross-site form) is refused.
        other = HTTP(self.server.port)
        status, _, _, cookies = other.request("POST", "/console/login", form={"key": ADMIN_KEY, "csrf": "a" * 64})
        self.assertEqual(status, 403)
        self.assertFalse(any(x.startswith("__Secure-beckon_session=") for x in cookies))

    def test_cross_site_forms_are_refused(self):
        c = HTTP(self.server.port)
        c.login()
        token = c.csrf()
        form = {"path": "p.yaml", "rules": "version: 1\nruleset: p\nrules: []\n", "events": ""}
        self.assertEqual(c.request("POST", "/console/playground", form=form)[0], 403)
        self.assertEqual(c.request("POST", "/console/playground", form={**form, "csrf": "f" * 64})[0], 403)
        status, _, _, _ = c.request("POST", "/console/playground", form={**form, "csrf": token},
                                    headers={"Sec-Fetch-Site": "same-site", "Origin": "http://evil.localhost"})
        self.assertEqual(status, 403)
        status, _, _, _ = c.request("POST", "/console/playground", form={**form, "csrf": token},
                                    headers={"Sec-Fetch-Site": "cross-site"})
        self.assertEqual(status, 403)
        self.assertEqual(c.request("POST", "/console/playground", form={**form, "csrf": token})[0], 200)
        # A log-out without the token does not end the session; with it, it does.
        self.assertEqual(c.request("POST", "/console/logout", form={})[0], 403)
        self.assertEqual(c.request("GET", "/console")[0], 200)
        self.assertEqual(c.request("POST", "/console/logout", form={"csrf": token})[0], 303)
        self.assertEqual(c.request("GET", "/console")[0], 303)

    def test_playground_reads_no_file_and_changes_nothing_live(self):
        c = HTTP(self.server.port)
        c.login()
        token = c.csrf()
        _, _, before, _ = c.request("GET", "/console")
        events = "\n".join(
            '{"type":"track","userId":"playground-user","event":"Signed In","timestamp":"2026-03-05T10:00:00Z"}'
            for _ in range(3))
        for path in ["/etc/passwd", "../../../../etc/passwd", os.path.join(RULES, "settings.yaml")]:
            status, _, page, _ = c.request("POST", "/console/playground", form={
                "csrf": token, "path": path, "rules": "", "events": events})
            self.assertEqual(status, 200)
            self.assertNotIn("root:x:0:0", page)
        status, _, page, _ = c.request("POST", "/console/playground", form={
            "csrf": token, "path": os.path.join(RULES, "welcome.yaml"),
            "rules": read(os.path.join(RULES, "welcome.yaml")), "events": events})
        self.assertIn("playground-user", page)
        self.assertIn("✓", page)
        # Nothing of it reached the service: no state for the user, and the live counts are as they were.
        _, _, timeline, _ = c.request("GET", "/console/user?id=playground-user")
        self.assertIn("The service holds no state for this user.", timeline)
        _, _, after, _ = c.request("GET", "/console")
        strip = lambda s: re.findall(r'<tr id="rule-[^"]*">.*?</tr>', s, re.S)  # noqa: E731
        self.assertEqual(strip(before), strip(after))
        status, body = self.server.request("GET", "/v1/users/playground-user/export",
                                           headers={"Authorization": "Bearer " + ADMIN_KEY})
        self.assertEqual((status, body["state"], body["events"]), (200, None, []))

    def test_last_events_read_back_as_processed(self):
        """An event posted to /v1/track has no `type` and may have no time of its own: "the last N events" gives both,
        as the service decoded them, so the playground runs them as the service did."""
        # (An event no rule takes: the overview's counts stay those of the samples.)
        status, _ = self.server.post("/v1/track", {"userId": "tracker", "event": "Notification Bell Tapped", "messageId": "t1",
                                                   "originalTimestamp": "2026-03-06T10:00:00Z"})
        self.assertEqual(status, 200)
        c = HTTP(self.server.port)
        c.login()
        token = c.csrf()
        _, _, page, _ = c.request("GET", "/console/playground?user=tracker&n=5&file="
                                  + urllib.parse.quote(os.path.join(RULES, "welcome.yaml")))
        lines = html.unescape(re.search(r'<textarea id="events"[^>]*>(.*?)</textarea>', page, re.S).group(1))
        events = [json.loads(x) for x in lines.splitlines()]
        self.assertEqual([(e["type"], e["timestamp"], e["event"]) for e in events],
                         [("track", "2026-03-06T10:00:00Z", "Notification Bell Tapped")])
        self.assertNotIn("originalTimestamp", events[0])
        _, _, page, _ = c.request("POST", "/console/playground", form={
            "csrf": token, "path": os.path.join(RULES, "welcome.yaml"), "rules": read(os.path.join(RULES, "welcome.yaml")),
            "events": lines})
        self.assertIn("1 event, 1 user, 0 actions fired (bad lines 0", page)

    def test_playground_limits(self):
        c = HTTP(self.server.port)
        c.login()
        token = c.csrf()
        rules = read(os.path.join(RULES, "welcome.yaml"))
        path = os.path.join(RULES, "welcome.yaml")
        line = '{"type":"track","userId":"u","event":"Signed In","timestamp":"2026-03-05T10:00:00Z"}'
        status, _, page, _ = c.request("POST", "/console/playground", form={
            "csrf": token, "path": path, "rules": rules, "events": "\n".join([line] * 10_001)})
        self.assertEqual(status, 200)
        self.assertIn("over the playground&#39;s 10000 lines", page)
        self.assertNotIn('class="dryrun"', page)
        status, _, page, _ = c.request("POST", "/console/playground", form={
            "csrf": token, "path": path, "rules": rules + "#" * (256 * 1024), "events": line})
        self.assertIn("over the playground&#39;s 256 KiB", page)
        status, _, page, _ = c.request("POST", "/console/playground", form={
            "csrf": token, "path": path, "rules": rules, "events": line, "until": "+400d"})
        self.assertIn("until is more than 90d after the last event", page)
        # A body over the form limit is refused before it is read whole.
        status, _, _, _ = c.request("POST", "/console/playground", raw=b"csrf=" + token.encode() + b"&events=" + b"x" * (5 << 20),
                                    headers={"Content-Type": "application/x-www-form-urlencoded"})
        self.assertEqual(status, 413)


if __name__ == "__main__":
    unittest.main()
