#!/usr/bin/env python3
"""Fault tests of a fleet (docs/fleet.md, "Failure modes"): PostgreSQL restarted three times and every backend
terminated three times under ingest, each process answering ingest again within the lease plus 5 s and the union of
actions equal to `beckon dry-run` of the log; PostgreSQL stopped for 20 s, ingest answered 503 within 2 s and /readyz
503 throughout, both 200 within 5 s of its return, and what was answered 503 fires only once re-sent; SIGTERM during an
outage ends the process within 10 s; a partition that cannot move keeps /readyz 503 until it moves.

The suite starts a PostgreSQL cluster of its own (scripts/postgres.sh, in a temporary folder, on a free loopback port)
so that it may restart and stop it; BECKON_TEST_POSTGRES is not used. Each test makes its own database, and stops every
process it started; the cluster is stopped and deleted at the end. `BECKON=path/to/beckon python3 -m unittest
Tests/Service/fleet_fault_test.py`; with FLEET_LOGS=1 each process's standard error goes to /tmp/fleet-NAME.err.
"""
import glob
import json
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import threading
import time
import unittest
import urllib.parse

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from fleet_test import LEASE, Process, fleet, wait_caught_up  # noqa: E402
from service_test import ROOT, dry_run, read_jsonl  # noqa: E402

RULES = [f"{ROOT}/campaigns/firefox"]
BATCH = 20  # events a request
FIRST = "2026-03-01T00:00:00Z"  # the generated stream's first timestamp: a probe's, so that it moves no clock


def note(*args):
    """With FLEET_LOGS=1, what a test measured, on standard error."""
    if os.environ.get("FLEET_LOGS"):
        print(time.strftime("%H:%M:%S"), *args, file=sys.stderr, flush=True)


def pg_bin(name):
    found = sorted(glob.glob("/usr/lib/postgresql/*/bin"), key=lambda d: int(d.split("/")[-2]))
    return f"{found[-1]}/{name}"


def as_postgres(args):
    """The server refuses to run as root: the cluster belongs to the postgres user (as in scripts/postgres.sh)."""
    return ["runuser", "-u", "postgres", "--", *args] if os.getuid() == 0 else list(args)


class Cluster:
    """A throw-away PostgreSQL cluster of scripts/postgres.sh in a temporary folder, which a test may restart, stop
    and start again on the same port."""

    def __init__(self):
        self.tmp = tempfile.mkdtemp(prefix="beckon-fleet-fault-")
        self.dir = f"{self.tmp}/postgres"
        try:
            self.url = subprocess.run([f"{ROOT}/scripts/postgres.sh", "start", self.dir], capture_output=True,
                                      text=True, check=True, timeout=300).stdout.strip().splitlines()[-1]
        except BaseException:
            self.destroy()
            raise
        self.port = urllib.parse.urlparse(self.url).port
        self.data = f"{self.dir}/data"

    def pg_ctl(self, *args, check=True):
        # -l: the server's output goes to its log, never to a pipe of ours (which it would hold open).
        return subprocess.run(as_postgres([pg_bin("pg_ctl"), "-D", self.data, *args]), capture_output=True, text=True,
                              check=check, timeout=90)

    def options(self):
        return (f"-c listen_addresses=127.0.0.1 -c port={self.port} -c unix_socket_directories={self.dir} "
                "-c max_connections=200")

    def restart(self):
        """`pg_ctl restart -m fast`: returns once the server accepts connections again."""
        self.pg_ctl("-m", "fast", "-w", "-t", "60", "-l", f"{self.dir}/server.log", "-o", self.options(), "restart")

    def stop(self):
        self.pg_ctl("-m", "fast", "-w", "-t", "60", "stop")

    def start(self):
        self.pg_ctl("-w", "-t", "60", "-l", f"{self.dir}/server.log", "-o", self.options(), "start")

    def running(self):
        return self.pg_ctl("status", check=False).returncode == 0

    def ensure_running(self):
        if not self.running():
            self.start()

    def psql(self, database, *sql):
        args = ["psql", "-h", "127.0.0.1", "-p", str(self.port), "-U", "postgres", "-d", database, "-qAt"]
        for s in sql:
            args += ["-c", s]
        return subprocess.run(args, capture_output=True, text=True, check=True, timeout=30).stdout

    def database(self, name):
        """A new, empty database owned by the cluster's beckon role; its URL."""
        self.psql("postgres", f"DROP DATABASE IF EXISTS {name} WITH (FORCE)", f"CREATE DATABASE {name} OWNER beckon")
        return self.url.rsplit("/", 1)[0] + "/" + name

    def terminate_backends(self, name):
        """Every connection to database `name` ends (pg_terminate_backend); how many there were."""
        out = self.psql("postgres", "SELECT count(pg_terminate_backend(pid)) FROM pg_stat_activity "
                                    f"WHERE datname = '{name}' AND pid <> pg_backend_pid()")
        return int(out.strip() or 0)

    def destroy(self):
        subprocess.run([f"{ROOT}/scripts/postgres.sh", "stop", self.dir], capture_output=True, timeout=120)
        shutil.rmtree(self.tmp, ignore_errors=True)


def stream(events, seed):
    """scripts/generate-stream.py: 50 users identified, then `events` Firefox events in time order over 30 days."""
    out = subprocess.run([sys.executable, f"{ROOT}/scripts/generate-stream.py", "--users", "50", "--events",
                          str(events), "--days", "30", "--seed", str(seed)],
                         capture_output=True, text=True, check=True).stdout
    return [json.loads(line) for line in out.splitlines()]


def chunks(events):
    return [events[i:i + BATCH] for i in range(0, len(events), BATCH)]


def probe(label, name):
    """An event that fires nothing and moves no partition's clock (its time is the stream's first), for asking a
    process whether it takes ingest; re-sent with the same messageId until it is taken."""
    return [{"type": "track", "userId": f"probe-{name}", "event": "E_Opened_New_Tab",
             "messageId": f"probe-{label}-{name}", "timestamp": FIRST}]


def post_once(p, batch, timeout):
    """(status or the exception's name, seconds taken), on a new connection."""
    started = time.monotonic()
    try:
        result = p.post(batch, timeout=timeout)
    except Exception as e:  # noqa: BLE001 (a refused or cut connection, a timeout: all recorded)
        result = type(e).__name__
    return result, time.monotonic() - started


def get_once(p, path, timeout):
    started = time.monotonic()
    try:
        result = p.request("GET", path, timeout=timeout)[0]
    except Exception as e:  # noqa: BLE001
        result = type(e).__name__
    return result, time.monotonic() - started


def in_parallel(procs, work):
    """work(p) for each process, each on its own thread; their results by process name."""
    out = {}

    def run(p):
        out[p.name] = work(p)

    threads = [threading.Thread(target=run, args=(p,), daemon=True) for p in procs]
    for t in threads:
        t.start()
    for t in threads:
        t.join(timeout=120)
    return out


class Poster(threading.Thread):
    """Posts `batches` in order, one request at a time, to the processes in turn; a request answered anything but
    200 (or not answered) is sent again, with the same messageIds, to the next process until one answers 200. Stops
    between batches once `stop` is set, at once once `abort` is; gives up (an error) after `bound` seconds."""

    def __init__(self, procs, batches, pace=0.02, bound=60):
        super().__init__(daemon=True)
        self.procs, self.batches, self.pace, self.bound = procs, batches, pace, bound
        self.stop, self.abort = threading.Event(), threading.Event()
        self.acked, self.errors = set(), []
        self.sent = self.refused = 0
        self.lock = threading.Lock()

    def run(self):
        deadline = time.monotonic() + self.bound
        k = 0
        for n, batch in enumerate(self.batches):
            if self.stop.is_set() or self.abort.is_set():
                return
            while True:
                p = self.procs[k % len(self.procs)]
                k += 1
                status, _ = post_once(p, batch, timeout=5)
                with self.lock:
                    self.sent += 1
                if status == 200:
                    with self.lock:
                        self.acked.update(e["messageId"] for e in batch)
                    break
                with self.lock:
                    self.refused += 1
                if self.abort.is_set():
                    return
                if time.monotonic() > deadline:
                    self.errors.append(f"batch {n} not acknowledged by any process within {self.bound} s "
                                       f"(last answer {status})")
                    return
                time.sleep(0.1)
            time.sleep(self.pace)
        self.errors.append("the stream ran out before the test was done with it")

    def finish(self, seconds=60):
        self.stop.set()
        self.join(timeout=seconds)
        return not self.is_alive()


class FleetFaults(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        cls.cluster = Cluster()

    @classmethod
    def tearDownClass(cls):
        cls.cluster.destroy()

    def setUp(self):
        self.exit_codes = {}
        self.cluster.ensure_running()

    def start_fleet(self, name, count):
        url = self.cluster.database(name)
        procs = []
        self.addCleanup(self.stop_fleet, procs)
        for i in range(count):
            procs.append(Process(RULES, url, f"{name}-{i}").start())
        wait_caught_up(self, url, 30)
        return url, procs

    def stop_fleet(self, procs):
        """Cleanup: the database back (a process stops more readily with it), then every process at once: SIGTERM,
        at most 30 s for all, then SIGKILL. Exit codes in self.exit_codes."""
        try:
            self.cluster.ensure_running()
        finally:
            for p in procs:
                if p.alive():
                    p.signal(signal.SIGCONT)
                    p.signal(signal.SIGTERM)
            deadline = time.monotonic() + 30
            for p in procs:
                try:
                    p.proc.wait(timeout=max(0.1, deadline - time.monotonic()))
                    self.exit_codes[p.name] = p.proc.returncode
                except subprocess.TimeoutExpired:
                    p.proc.kill()
                    p.proc.wait()
                    self.exit_codes[p.name] = "did not stop within 30 s of SIGTERM"
                p.proc.stdout.close()
            note(f"{self.id()}: exit codes {self.exit_codes}")

    def check_equal_to_dry_run(self, url, acked, minimum):
        """The union of every process's actions is `beckon dry-run` of the log, each action id once; every
        acknowledged event is in the log. Returns (actions, logged events)."""
        fired = [json.loads(line) for line in fleet(url, "actions").splitlines()]
        ids = [a["id"] for a in fired]
        self.assertEqual(len(ids), len(set(ids)), "an action id was stored twice")
        with tempfile.TemporaryDirectory() as tmp:
            with open(f"{tmp}/accepted.jsonl", "w") as f:
                f.write(fleet(url, "events"))
            logged = read_jsonl(f"{tmp}/accepted.jsonl")
            self.assertTrue(acked <= {e.get("messageId") for e in logged}, "an acknowledged event is not in the log")
            expected = dry_run(RULES, f"{tmp}/accepted.jsonl")
        self.assertGreaterEqual(len(expected), minimum, "too few actions for the test to mean anything")
        self.assertEqual(sorted(ids), sorted(a["id"] for a in expected), "the fleet's actions are not the dry-run's")
        by_id = {a["id"]: a for a in fired}
        for a in expected:
            self.assertEqual(by_id[a["id"]], a)
        return fired, logged

    def ingest_again_within(self, procs, back, seconds, label):
        """For each process, seconds from `back` to its first 200 to a probe (re-sent until then), or None when it
        did not answer 200 within `seconds`; each request on a new connection, none waited for past the bound."""

        def work(p):
            deadline = back + seconds
            last = None
            while time.monotonic() < deadline:
                status, _ = post_once(p, probe(label, p.name), timeout=max(0.2, min(2.0, deadline - time.monotonic())))
                if status == 200:
                    return round(time.monotonic() - back, 2), status
                last = status
                time.sleep(0.2)
            return None, last

        return in_parallel(procs, work)

    def rounds_under_ingest(self, name, fault):
        """Three processes, a poster; three times: `fault()`, then every process answers ingest 200 within the
        lease plus 5 s of the database being back; at the end, lag 0 and the actions are the dry-run's."""
        url, procs = self.start_fleet(name, 3)
        poster = Poster(procs, chunks(stream(60_000, seed=11)))
        self.addCleanup(poster.join, 10)
        self.addCleanup(poster.abort.set)
        poster.start()
        time.sleep(2)
        bound = LEASE + 5
        report = []
        for rnd in range(1, 4):
            acked_before = len(poster.acked)
            fault()
            back = time.monotonic()
            times = self.ingest_again_within(procs, back, bound, f"{name}-{rnd}")
            report.append((rnd, times))
            note(f"{name} round {rnd}: seconds to ingest 200 (last answer) {times}; poster acked {len(poster.acked)}, "
                 f"refused {poster.refused}")
            dead = [p.name for p in procs if not p.alive()]
            self.assertEqual(dead, [], f"round {rnd}: a process exited; recovery so far: {report}")
            late = {n: t for n, t in times.items() if t[0] is None}
            self.assertEqual(late, {}, f"round {rnd}: not answering ingest with 200 within {bound} s of the "
                                       f"database's return (name: (seconds, last answer)); all rounds: {report}")
            # The poster's stream goes on too (it re-sends what was refused until it is taken).
            deadline = time.monotonic() + bound
            while len(poster.acked) <= acked_before and time.monotonic() < deadline and poster.is_alive():
                time.sleep(0.1)
            self.assertGreater(len(poster.acked), acked_before, f"round {rnd}: the poster's stream did not go on")
            note(f"{name} round {rnd}: the poster goes on, acked {len(poster.acked)}")
            time.sleep(3)
        self.assertTrue(poster.finish(45), "the poster did not finish within 45 s")
        note(f"{name}: poster done: {poster.sent} requests, {poster.refused} refused, {len(poster.acked)} events "
             f"acked, errors {poster.errors}")
        self.assertEqual(poster.errors, [])
        wait_caught_up(self, url, 30)
        note(f"{name}: caught up")
        self.check_equal_to_dry_run(url, poster.acked, minimum=20)
        self.doCleanups()
        self.assertEqual(self.exit_codes, {p.name: 0 for p in procs}, "exit codes after SIGTERM")

    def test_restart_postgres_under_ingest_three_rounds(self):
        self.rounds_under_ingest("fault_restart", self.cluster.restart)

    def test_terminate_backends_under_ingest_three_rounds(self):
        name = "fault_terminate"

        def terminate():
            self.assertGreater(self.cluster.terminate_backends(name), 0, "no connection of the fleet's to terminate")

        self.rounds_under_ingest(name, terminate)

    def test_postgres_stopped_20s_ingest_503_fast_and_readyz(self):
        name = "fault_outage"
        url, procs = self.start_fleet(name, 2)
        batches = chunks(stream(20_000, seed=13))
        before, rest = batches[:100], batches[100:]
        for i, batch in enumerate(before):
            status, _ = post_once(procs[i % 2], batch, timeout=10)
            self.assertEqual(status, 200, f"batch {i} before the outage")
        acked = {e["messageId"] for b in before for e in b}
        wait_caught_up(self, url, 30)

        self.cluster.stop()
        stopped = time.monotonic()
        outage, lock = {"next": 0}, threading.Lock()
        ingest = []  # (process, seconds since the stop, seconds taken, answer, batch index)
        ready = []  # (process, seconds since the stop, answer)

        def post_during(p):
            """A request every 300 ms, each on its own thread (so a slow answer delays none of the next ones)."""

            def one(k, started):
                status, took = post_once(p, rest[k], timeout=5)
                with lock:
                    ingest.append((p.name, round(started - stopped, 2), round(took, 2), status, k))

            sent = []
            while time.monotonic() < stopped + 20:
                started = time.monotonic()
                with lock:
                    k = outage["next"]
                    outage["next"] += 1
                t = threading.Thread(target=one, args=(k, started), daemon=True)
                t.start()
                sent.append(t)
                time.sleep(max(0.0, started + 0.3 - time.monotonic()))
            for t in sent:
                t.join(timeout=max(0.1, stopped + 30 - time.monotonic()))

        def poll_ready(p):
            while time.monotonic() < stopped + 20:
                started = time.monotonic()
                status, _ = get_once(p, "/readyz", timeout=2)
                with lock:
                    ready.append((p.name, round(started - stopped, 2), status))
                time.sleep(max(0.0, started + 0.5 - time.monotonic()))

        threads = [threading.Thread(target=f, args=(p,), daemon=True) for p in procs for f in (post_during, poll_ready)]
        for t in threads:
            t.start()
        for t in threads:
            t.join(timeout=40)
        self.assertFalse(any(t.is_alive() for t in threads))

        self.cluster.start()
        back = time.monotonic()

        def recovered(p):
            deadline = back + 5
            got = {"ingest": None, "readyz": None}
            last = {}
            while time.monotonic() < deadline and None in got.values():
                if got["ingest"] is None:
                    status, _ = post_once(p, probe("outage", p.name), max(0.2, min(2.0, deadline - time.monotonic())))
                    last["ingest"] = status
                    if status == 200:
                        got["ingest"] = round(time.monotonic() - back, 2)
                if got["readyz"] is None and time.monotonic() < deadline:
                    status, _ = get_once(p, "/readyz", max(0.2, min(2.0, deadline - time.monotonic())))
                    last["readyz"] = status
                    if status == 200:
                        got["readyz"] = round(time.monotonic() - back, 2)
                time.sleep(0.2)
            return got, last

        recovery = in_parallel(procs, recovered)

        # During the outage: every ingest answered 503 within 2 s, none 200; /readyz 503 after the first 3 s. Within
        # 5 s of the database's return, both answer 200 to ingest and /readyz. (All checked, then reported together.)
        problems = []
        slow = [r for r in ingest if r[2] > 2.0]
        not_503 = [r for r in ingest if r[3] != 503]
        answers = sorted({str(r[3]) for r in ingest})
        if slow:
            problems.append(f"ingest answered later than 2 s during the outage: {len(slow)} of {len(ingest)}, "
                            f"slowest {max(r[2] for r in ingest)} s, e.g. {slow[:4]}")
        if not_503:
            problems.append(f"ingest answered other than 503 during the outage: {len(not_503)} of {len(ingest)} "
                            f"(answers {answers}), e.g. {not_503[:4]}")
        if len(ingest) < 2 * 60:  # (one every 300 ms for 20 s: ~66 a process)
            problems.append(f"only {len(ingest)} ingest requests answered or timed out in the 20 s")
        settled = [r for r in ready if r[1] >= 3.0]
        ready_wrong = [r for r in settled if r[2] != 503]
        if ready_wrong:
            problems.append(f"/readyz answered other than 503 during the outage: {len(ready_wrong)} of "
                            f"{len(settled)} polls after the first 3 s (answers "
                            f"{sorted({str(r[2]) for r in settled})}), e.g. {ready_wrong[:4]}")
        if len(settled) < 2 * 25:
            problems.append(f"only {len(settled)} /readyz polls after the first 3 s (one every 500 ms wanted)")
        late = {n: r for n, r in recovery.items() if None in r[0].values()}
        if late:
            problems.append(f"not answering 200 within 5 s of the database's return (seconds to 200; last answers): "
                            f"{recovery}")
        if problems:
            self.fail("\n".join(problems))

        # Nothing answered 503 was stored, nor fired anything: the fleet's actions are the dry-run of the log, which
        # holds none of those events.
        wait_caught_up(self, url, 30)
        refused = sorted({r[4] for r in ingest if r[3] != 200})  # (all of them, as checked above)
        answered_503 = {e["messageId"] for r in ingest if r[3] == 503 for e in rest[r[4]]}
        _, logged = self.check_equal_to_dry_run(url, acked, minimum=10)
        stored = answered_503 & {e.get("messageId") for e in logged}
        self.assertEqual(len(stored), 0, f"{len(stored)} events answered 503 during the outage were stored")
        actions_before = len(fleet(url, "actions").splitlines())
        # Sent again (with the same messageIds), each fires exactly once: the actions are the dry-run of the log, each
        # action id once.
        deadline = time.monotonic() + 60
        for n, k in enumerate(refused):
            while True:
                status, _ = post_once(procs[n % 2], rest[k], timeout=5)
                if status == 200:
                    break
                self.assertLess(time.monotonic(), deadline, f"re-sending: batch {k} not taken ({status})")
                time.sleep(0.1)
            acked |= {e["messageId"] for e in rest[k]}
        wait_caught_up(self, url, 30)
        fired, _ = self.check_equal_to_dry_run(url, acked, minimum=10)
        note(f"{self.id()}: {len(refused)} batches re-sent; actions {actions_before} before, {len(fired)} after")
        self.assertGreater(len(fired), actions_before, "the re-sent events fired nothing: the test means little")
        self.doCleanups()
        self.assertEqual(self.exit_codes, {p.name: 0 for p in procs}, "exit codes after SIGTERM")

    def test_a_stuck_partition_keeps_readyz_503_until_it_moves(self):
        """A table the runners write locked by another session: the partition that has an event to process cannot
        move. /readyz answers 503 from half a lease on, also while the partition is let go for making no progress and
        taken again; once the lock goes, 200 and the event processed."""
        url, procs = self.start_fleet("fault_stuck", 1)
        p = procs[0]
        self.assertEqual(p.request("GET", "/readyz")[0], 200)
        locker = subprocess.Popen(
            ["psql", "-h", "127.0.0.1", "-p", str(self.cluster.port), "-U", "postgres", "-d", "fault_stuck", "-qAt"],
            stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True)
        self.addCleanup(locker.stdout.close)
        self.addCleanup(lambda: locker.poll() is None and locker.kill())
        locker.stdin.write("BEGIN;\nLOCK TABLE beckon_user_state IN EXCLUSIVE MODE;\nSELECT 'locked';\n")
        locker.stdin.flush()
        self.assertEqual(locker.stdout.readline().strip(), "locked")
        self.assertEqual(post_once(p, probe("stuck", p.name), timeout=10)[0], 200, "ingest while a table is locked")
        posted = time.monotonic()
        answers = []  # (seconds since the post, status, body)
        while time.monotonic() < posted + 5 * LEASE:
            started = time.monotonic()
            try:
                status, body = p.request("GET", "/readyz", timeout=2)
            except Exception as e:  # noqa: BLE001
                status, body = type(e).__name__, b""
            answers.append((round(started - posted, 2), status, body.decode(errors="replace")[:120]))
            time.sleep(max(0.0, started + 0.2 - time.monotonic()))
        first = next((a for a in answers if a[1] == 503), None)
        self.assertIsNotNone(first, f"/readyz never 503 while a partition could not move: {answers[-3:]}")
        self.assertLessEqual(first[0], LEASE, f"/readyz 503 only {first[0]} s after the post")
        after = [a for a in answers if a[0] >= first[0]]
        # (A poll that got no answer in time says nothing either way; one answered 200 is wrong.)
        wrong = [a for a in after if a[1] == 200]
        note(f"{self.id()}: first 503 at {first[0]} s ({first[2]}); {len(wrong)} of {len(after)} polls after it 200")
        self.assertEqual(wrong, [], f"/readyz 200 while the partition was still stuck (of {len(after)} polls)")
        self.assertIn("partition", first[2])
        locker.stdin.write("ROLLBACK;\n\\q\n")
        locker.stdin.close()
        locker.wait(timeout=10)
        released = time.monotonic()
        while p.request("GET", "/readyz")[0] != 200:
            self.assertLess(time.monotonic(), released + 2 * LEASE + 5, "/readyz not 200 once the lock went")
            time.sleep(0.2)
        wait_caught_up(self, url, 30)

    def test_sigterm_during_outage_exits_within_10s(self):
        url, procs = self.start_fleet("fault_sigterm", 1)
        p = procs[0]
        self.assertEqual(post_once(p, chunks(stream(200, seed=17))[0], timeout=10)[0], 200)
        self.cluster.stop()
        time.sleep(3)
        self.assertTrue(p.alive(), "the process exited on its own when the database went away")
        started = time.monotonic()
        p.signal(signal.SIGTERM)
        try:
            p.proc.wait(timeout=10)
            exited = True
        except subprocess.TimeoutExpired:
            p.proc.kill()
            p.proc.wait()
            exited = False
        note(f"{self.id()}: {time.monotonic() - started:.2f} s after SIGTERM, exit code {p.proc.returncode}")
        self.assertTrue(exited, "the process did not exit within 10 s of SIGTERM while PostgreSQL was down (SIGKILLed)")


if __name__ == "__main__":
    unittest.main()
