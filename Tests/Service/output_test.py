#!/usr/bin/env python3
"""The commands' output where it cannot be written as it comes, each `beckon dry-run --format jsonl` as a process:

1. Standard output on a full disk (/dev/full): the command says so on standard error and exits 74.
2. A reader that goes away while `SIGPIPE` is ignored (as a parent may leave it): the command stops at once, exit 74,
   instead of running the rest of the stream for nothing.
3. Standard output a non-blocking pipe (as Node and some CI runners leave it) whose reader is slow: every line
   arrives, whole, exit 0.
4. An events file that cannot be opened: the error says why.
5. Standard error closed: the bad line's report is lost, the output is not (exit 0).

Run: `BECKON=path/to/beckon python3 -m unittest Tests/Service/output_test.py -v` (default .build/debug/beckon).
"""
import fcntl
import json
import os
import signal
import subprocess
import sys
import tempfile
import time
import unittest

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import service_test  # noqa: E402

RULES = """version: 1
campaign: out
rules:
  - id: ping
    on: Ping
    do: [ { deep_link: "app://ping" } ]
"""

EVENTS = 20000


class Output(unittest.TestCase):
    def setUp(self):
        tmp = tempfile.TemporaryDirectory(prefix="beckon-output-")
        self.addCleanup(tmp.cleanup)
        self.rules = os.path.join(tmp.name, "rules.yaml")
        with open(self.rules, "w") as f:
            f.write(RULES)
        self.events = os.path.join(tmp.name, "events.jsonl")
        with open(self.events, "w") as f:
            for i in range(EVENTS):
                f.write(json.dumps({"type": "track", "userId": f"u{i % 500}", "event": "Ping",
                                    "timestamp": "2026-03-02T09:00:00Z", "messageId": f"m{i}"}) + "\n")
        self.command = [service_test.BECKON, "dry-run", self.rules, "--events", self.events, "--format", "jsonl"]

    def test_1_a_full_disk_is_said_and_fails(self):
        with open("/dev/full", "w") as full:
            r = subprocess.run(self.command, stdout=full, stderr=subprocess.PIPE, text=True, timeout=120)
        self.assertEqual(r.returncode, 74, r.stderr)
        self.assertIn("could not be written", r.stderr)
        self.assertIn("No space left on device", r.stderr)

    def test_2_a_reader_gone_with_sigpipe_ignored_stops_the_run(self):
        p = subprocess.Popen(self.command, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                             preexec_fn=lambda: signal.signal(signal.SIGPIPE, signal.SIG_IGN))
        first = p.stdout.readline()
        self.assertTrue(first.startswith(b'{"id":'), first)
        p.stdout.close()
        _, err = p.communicate(timeout=120)
        self.assertEqual(p.returncode, 74, err)
        self.assertIn(b"Broken pipe", err)
        # Stopped where it was, not at the end: the summary of a whole run is not printed.
        self.assertNotIn(b"%d events" % EVENTS, err)

    def test_3_a_non_blocking_pipe_gets_every_line(self):
        whole = subprocess.run(self.command, capture_output=True, timeout=120)
        self.assertEqual(whole.returncode, 0, whole.stderr)
        self.assertEqual(whole.stdout.count(b"\n"), EVENTS)
        read_end, write_end = os.pipe()
        flags = fcntl.fcntl(write_end, fcntl.F_GETFL)
        fcntl.fcntl(write_end, fcntl.F_SETFL, flags | os.O_NONBLOCK)
        p = subprocess.Popen(self.command, stdout=write_end, stderr=subprocess.PIPE)
        os.close(write_end)
        got = bytearray()
        deadline = time.monotonic() + 120
        while time.monotonic() < deadline:
            time.sleep(0.002)  # a slow reader: the pipe fills
            chunk = os.read(read_end, 4096)
            if not chunk:
                break
            got += chunk
        os.close(read_end)
        err = p.communicate(timeout=60)[1]
        self.assertEqual(p.returncode, 0, err)
        self.assertEqual(bytes(got), whole.stdout)

    def test_5_standard_error_closed_loses_no_output(self):
        whole = subprocess.run(self.command, capture_output=True, timeout=120)
        bad = self.events + ".bad"
        with open(self.events) as f, open(bad, "w") as out:
            out.write("not json\n" + f.read())
        command = self.command[:-3] + [bad, "--format", "jsonl"]
        r = subprocess.run(command, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL,
                           preexec_fn=lambda: os.close(2), timeout=120)
        self.assertEqual(r.returncode, 0)
        self.assertEqual(r.stdout, whole.stdout)

    def test_4_a_file_that_cannot_be_opened_says_why(self):
        for command in (["dry-run"], ["report"], ["explain", "--user", "u"]):
            with self.subTest(command=command[0]):
                r = subprocess.run([service_test.BECKON, *command, self.rules, "--events", self.events + ".missing"],
                                   capture_output=True, text=True, timeout=60)
                self.assertEqual(r.returncode, 1)
                self.assertIn("cannot open events file", r.stderr)
                self.assertIn("No such file or directory", r.stderr)


if __name__ == "__main__":
    unittest.main()
