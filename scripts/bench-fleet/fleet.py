#!/usr/bin/env python3
"""The fleet's benchmark (docs/fleet.md, "Capacity"), run by scripts/bench-fleet.sh against a throw-away PostgreSQL
on this machine. Usage: fleet.py BECKON POSTGRES_URL SECONDS. Each part uses a database of its own:

1. ingest through 1, then 2 processes: wrk posts /v1/batch bodies of 100 new events (bench-service/batch.lua) with
   128 connections in all (split between the processes) for SECONDS after a 3-second warm-up; events/s accepted,
   batch latency, the append's and the partition commit's mean time (from /metrics), the largest lag sampled each
   second, and how long the fleet took to process what was left when the load stopped;
2. latency: single /v1/track requests at 1,000 a second through one process, p50/p99 from when each was due;
3. processing alone: 200,000 events written straight into the log (no process running), then one process started:
   the time until every partition has processed them (events/s for 64 partitions), and the same for 50,000 events
   of users of one partition (one partition's throughput);
4. CPU an event, in parts 1 and 3: the beckon processes' own (all their threads), PostgreSQL's (the postmaster, its
   backends and background processes, and those that ended meanwhile), the rest of the machine's (wrk, this script)
   and its idle share, from /proc: with everything on one machine, N cores carry at most N × 10^6 / (their sum)
   events a second (the benchmark's own lag polls, a `beckon fleet status` and its connection each, are in the rest
   and in PostgreSQL's share: one a second under load, up to twenty a second while the lag drains);
5. PostgreSQL's work per event over part 1's 1-process run: commits, rows written and WAL bytes (pg_stat_database,
   pg_stat_wal), and where the WAL goes: pg_waldump over the run's WAL, each record's bytes counted to the table or
   index its first block belongs to (with BENCH_PG_DATA, the cluster's data folder, which scripts/bench-fleet.sh sets),
   and the share of users' state rewrites that were heap-only (HOT: on the same page, no index entry).
"""
import base64
import glob
import hashlib
import json
import os
import re
import subprocess
import sys
import tempfile
import threading
import time
from collections import Counter

sys.path.insert(0, os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "bench-service"))
from figures import figure  # noqa: E402
from threads import cpu_ticks, stat  # noqa: E402

beckon, base_url, seconds = sys.argv[1], sys.argv[2], int(sys.argv[3])
root = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
rules = [f"{root}/rules/bossup", f"{root}/scripts/bench-service/rules"]
key = "bench-key"
auth = base64.b64encode(f"{key}:".encode()).decode()


def psql(url, sql):
    return subprocess.run(["psql", url, "-qAtX", "-c", sql], capture_output=True, text=True, check=True).stdout.strip()


def database(name):
    psql(base_url, f"DROP DATABASE IF EXISTS {name} WITH (FORCE)")
    psql(base_url, f"CREATE DATABASE {name}")
    url = base_url.rsplit("/", 1)[0] + "/" + name
    subprocess.run([beckon, "fleet", "migrate", "--postgres", url], check=True, capture_output=True)
    return url


def status(url):
    out = subprocess.run([beckon, "fleet", "status", "--postgres", url, "--json"], capture_output=True, text=True,
                         check=True).stdout
    return [json.loads(line) for line in out.splitlines()]


def lag(url):
    return sum(p["lag"] for p in status(url))


class Process:
    def __init__(self, url, name):
        self.proc = subprocess.Popen(
            [beckon, "serve", *rules, "--postgres", url, "--port", "0", "--write-key", key, "--owner", name],
            stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True, env={**os.environ, "LOG_LEVEL": "error"})
        line = self.proc.stdout.readline()
        m = re.search(r"http://127.0.0.1:(\d+)", line)
        if not m:
            raise RuntimeError("beckon serve --postgres did not start: " + line)
        self.port = int(m.group(1))

    def metrics(self):
        out = subprocess.run(["curl", "-s", f"http://127.0.0.1:{self.port}/metrics"], capture_output=True, text=True)
        values = {}
        for line in out.stdout.splitlines():
            if line and not line.startswith("#"):
                name, value = line.rsplit(" ", 1)
                values[name] = float(value)
        return values

    def stop(self):
        self.proc.terminate()
        self.proc.wait(timeout=60)


HZ = os.sysconf("SC_CLK_TCK")


def ticks(pid, ended=False):
    """A process's CPU ticks (user + system, all its threads); with `ended`, also its children that ended."""
    return cpu_ticks(stat(f"/proc/{pid}/stat")[1], ended)


def postgres_ticks():
    """PostgreSQL's CPU ticks: the postmaster, its live children, and those that ended (the postmaster waits for its
    children, so theirs is in its own children's count). None without BENCH_PG_DATA (its data folder)."""
    data = os.environ.get("BENCH_PG_DATA")
    if not data:
        return None
    with open(os.path.join(data, "postmaster.pid")) as f:
        master = int(f.readline())
    total = ticks(master, ended=True)
    for pid in filter(str.isdigit, os.listdir("/proc")):
        try:
            _, fields = stat(f"/proc/{pid}/stat")
            if int(fields[1]) == master:
                total += cpu_ticks(fields)
        except (OSError, ValueError):
            continue  # (it ended meanwhile: then it is in the postmaster's count, or in neither if between the two)
    return total


def machine_ticks():
    """The machine's (busy, idle) ticks over all cores, from /proc/stat."""
    with open("/proc/stat") as f:
        v = [int(x) for x in f.readline().split()[1:]]
    return sum(v) - v[3] - v[4], v[3] + v[4]


class CPU:
    """CPU spent from its making to `stop()` by the beckon processes `pids`, by PostgreSQL and by the machine; or
    from `before`, counts taken earlier (`counts()`)."""

    def __init__(self, pids, before=None):
        self.pids = pids
        self.before = before or self.counts(pids)

    @staticmethod
    def counts(pids):
        """The processes' ticks, PostgreSQL's and the machine's now (processes not started yet: `[]`)."""
        return [ticks(p) for p in pids], postgres_ticks(), machine_ticks()

    def stop(self, events, what):
        """A line for the report, and the beckon processes' and PostgreSQL's µs an event (None: not measured)."""
        beckon = sum(ticks(p) for p in self.pids) - sum(self.before[0])
        pg = postgres_ticks()
        pg = pg - self.before[1] if pg is not None and self.before[1] is not None else None
        busy, idle = (a - b for a, b in zip(machine_ticks(), self.before[2]))
        us = lambda t: t / HZ * 1e6 / events  # noqa: E731
        parts = [f"beckon {us(beckon):.1f} µs"]
        if pg is not None:
            parts.append(f"PostgreSQL {us(pg):.1f} µs")
            parts.append(f"the rest of the machine {us(busy - beckon - pg):.1f} µs")
        line = (f"  CPU an event ({what}): {', '.join(parts)}; {100 * idle / max(busy + idle, 1):.0f}% of the "
                f"machine's {os.cpu_count()} cores idle; at 100,000 events/s they give {os.cpu_count() * 10} µs an "
                f"event in all")
        return line, us(beckon), (us(pg) if pg is not None else None)


def wait_held(url, processes, seconds=30):
    deadline = time.time() + seconds
    while time.time() < deadline:
        owners = [p["owner"] for p in status(url)]
        shares = [owners.count(o) for o in set(owners)]
        # (Every partition held, each process its share: a rebalance under way would show as lag.)
        if None not in owners and len(shares) == processes and min(shares) >= 64 // processes - 1:
            return
        time.sleep(0.2)
    raise RuntimeError("the partitions were not shared out in time")


def wrk(port, conns, secs, out=None):
    env = {**os.environ, "BENCH_AUTH": auth}
    r = subprocess.run(["wrk", "-t1", f"-c{conns}", f"-d{secs}s", "--latency", "-s",
                        f"{root}/scripts/bench-service/batch.lua", f"http://127.0.0.1:{port}"],
                       capture_output=True, text=True, env=env)
    if out is not None:
        out.append(r.stdout)
    return r.stdout


def wrk_value(text, label):
    m = re.search(label + r"\s+([\d.]+)(us|ms|s)\b", text)
    if not m:
        return None
    v = float(m.group(1))
    return v / 1000 if m.group(2) == "us" else v * 1000 if m.group(2) == "s" else v


def ingest(n):
    url = database(f"bench_ingest_{n}")
    procs = [Process(url, f"bench-{i}") for i in range(n)]
    try:
        wait_held(url, n)
        conns = 128 // n
        threads = [threading.Thread(target=wrk, args=(p.port, conns, 3)) for p in procs]
        [t.start() for t in threads]
        [t.join() for t in threads]
        before = [p.metrics() for p in procs]
        stats0 = pg_stats(url)
        lsn0 = psql(url, "SELECT pg_current_wal_lsn()")
        cpu = CPU([p.proc.pid for p in procs])
        outs = []
        threads = [threading.Thread(target=wrk, args=(p.port, conns, seconds, outs)) for p in procs]
        [t.start() for t in threads]
        peak = 0
        while any(t.is_alive() for t in threads):
            peak = max(peak, lag(url))
            time.sleep(1)
        [t.join() for t in threads]
        stopped = time.time()
        left = lag(url)
        while lag(url) > 0:
            time.sleep(0.1)
        drain = time.time() - stopped
        rps = sum(float(re.search(r"Requests/sec:\s+([\d.]+)", o).group(1)) for o in outs)
        events = rps * 100 * seconds
        spent = cpu.stop(events, "the run and the processing of what was left")
        stats1 = pg_stats(url)
        lsn1 = psql(url, "SELECT pg_current_wal_lsn()")
        after = [p.metrics() for p in procs]
        non2xx = sum(int(m.group(1)) for o in outs for m in [re.search(r"Non-2xx or 3xx responses: (\d+)", o)] if m)
        p50 = max(wrk_value(o, "50%") for o in outs)
        p99 = max(wrk_value(o, "99%") for o in outs)

        def mean(metric):
            s = sum(a.get(metric + "_sum", 0) - b.get(metric + "_sum", 0) for a, b in zip(after, before))
            c = sum(a.get(metric + "_count", 0) - b.get(metric + "_count", 0) for a, b in zip(after, before))
            return (s / c * 1000 if c else 0), c

        append_ms, appends = mean("beckon_fleet_append_seconds")
        commit_ms, commits = mean("beckon_fleet_partition_commit_seconds")
        print(f"ingest through {n} process(es), /v1/batch of 100, {128} connections, {seconds} s after 3 s of warm-up: "
              f"{rps * 100:.0f} events/s ({non2xx} non-200)")
        print(f"  batch latency p50 {p50:.1f} ms, p99 {p99:.1f} ms; append (one transaction for the requests queued "
              f"together) {append_ms:.1f} ms mean over {appends:.0f} requests; partition commit {commit_ms:.1f} ms mean "
              f"over {commits:.0f} commits ({events / max(commits, 1):.0f} events each)")
        print(f"  lag: at most {peak} events sampled each second; {left} left when the load stopped, processed "
              f"{drain:.1f} s later")
        print(spent[0])
        figure(f"fleet ingest through {n} process(es), beckon CPU an event", spent[1], "µs")
        if spent[2] is not None:
            figure(f"fleet ingest through {n} process(es), PostgreSQL CPU an event", spent[2], "µs")
        # (Warm-up included: the load is the same throughout.)
        rows, entries = (int(x) for x in psql(
            url, "SELECT count(*), coalesce(sum(coalesce(cardinality(users), 1)), 0) FROM beckon_log").split("|"))
        print(f"  the log: {entries} entries in {rows} rows, {entries / max(rows, 1):.0f} entries a row "
              f"(docs/fleet.md, \"Pages\")")
        if n == 1:
            d = {k: stats1[k] - stats0[k] for k in stats0}
            print(f"  PostgreSQL per event: {d['commits'] / events:.3f} commits, {d['rows'] / events:.2f} rows "
                  f"written, {d['wal_bytes'] / events:.0f} WAL bytes ({d['wal_records'] / events:.1f} records)")
            wal_by_relation(url, lsn0, lsn1, events)
            updates, hot = map(int, psql(url, "SELECT n_tup_upd, n_tup_hot_upd FROM pg_stat_user_tables "
                                              "WHERE relname = 'beckon_user_state'").split("|"))
            print(f"  users' states: {updates} updates, {100 * hot / max(updates, 1):.0f}% heap-only (HOT)")
            figure("fleet users' state updates that are heap-only", 100 * hot / max(updates, 1), "%")
            figure("fleet WAL per event", d["wal_bytes"] / events, "B")
        figure(f"fleet ingest through {n} process(es)", rps * 100, "events/s")
        figure(f"fleet ingest through {n} process(es), batch p99", p99, "ms")
    finally:
        for p in procs:
            p.stop()


def latency():
    """Single /v1/track requests at 1,000 a second through one process (bench-service/latency.py): the ingest latency
    of a fleet that is not saturated."""
    url = database("bench_latency")
    proc = Process(url, "latency")
    try:
        wait_held(url, 1)
        out = subprocess.run([sys.executable, f"{root}/scripts/bench-service/latency.py", str(proc.port), key, "1000",
                              str(seconds)], capture_output=True, text=True, check=True).stdout.split()
        p50, p99, top, bad, n = out[:5]
        print(f"single /v1/track at 1,000/s through one process for {seconds} s: p50 {p50} ms, p99 {p99} ms, max {top} ms "
              f"({n} requests, {bad} not 200)")
        figure("fleet /v1/track at 1,000/s, p99", p99, "ms")
    finally:
        proc.stop()


def pg_stats(url):
    row = psql(url, "SELECT xact_commit, tup_inserted + tup_updated + tup_deleted FROM pg_stat_database "
                    "WHERE datname = current_database()").split("|")
    wal = psql(url, "SELECT wal_records, wal_bytes FROM pg_stat_wal").split("|")
    return {"commits": int(row[0]), "rows": int(row[1]), "wal_records": int(wal[0]), "wal_bytes": int(wal[1])}


def wal_by_relation(url, lsn0, lsn1, events):
    """The WAL between two positions, by the table or index of each record's first block (pg_waldump), per event."""
    data = os.environ.get("BENCH_PG_DATA")
    if not data:
        return
    names = dict(line.split("|", 1) for line in psql(
        url, "SELECT pg_relation_filenode(oid), relname FROM pg_class WHERE pg_relation_filenode(oid) IS NOT NULL"
    ).splitlines())
    dumps = sorted(glob.glob("/usr/lib/postgresql/*/bin/pg_waldump"))
    if not dumps:
        return
    dump = dumps[-1]
    command = [dump, "-p", os.path.join(data, "pg_wal"), "-s", lsn0, "-e", lsn1]
    if os.getuid() == 0:
        command = ["runuser", "-u", "postgres", "--", *command]
    bytes_by = Counter()
    with subprocess.Popen(command, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True) as p:
        for line in p.stdout:
            m = re.search(r"len \(rec/tot\):\s*\d+/\s*(\d+),.*?desc: (\S+)", line)
            if not m:
                continue
            rel = re.search(r"blkref #0: rel \d+/\d+/(\d+)", line)
            kind = line.split()[1]
            bytes_by[(names.get(rel.group(1), "?") if rel else "-", kind + "/" + m.group(2))] += int(m.group(1))
    total = sum(bytes_by.values())
    print(f"  WAL by relation and record (pg_waldump, {total / events:.0f} bytes an event in all), bytes an event:")
    for (relation, record), b in bytes_by.most_common(12):
        print(f"    {b / events:6.1f}  {relation} {record}")


def fnv(user):
    h = 0xcbf29ce484222325
    for b in user.encode():
        h ^= b
        h = (h * 0x100000001b3) & 0xffffffffffffffff
    return h % 64


def drain(name, count, one_partition):
    """Writes `count` events straight into a new fleet database's log, then times one process processing them."""
    url = database(name)
    users = [f"u{i}" for i in range(200_000)]
    if one_partition:
        users = [u for u in users if fnv(u) == 0]
    users = users[:10_000]
    names = ["Application Opened", "Product Viewed", "Button Tapped", "Product Viewed", "Search Performed"]
    seq = [0] * 64
    now = int(time.time() * 1000)
    with tempfile.NamedTemporaryFile("w", suffix=".copy", delete=False) as f:
        for i in range(count):
            u = users[i % len(users)]
            p = fnv(u)
            seq[p] += 1
            event = json.dumps({"type": "track", "userId": u, "event": names[i % len(names)], "messageId": f"d{i}",
                                "context": {"os": {"name": "iOS"}}}, separators=(",", ":")).encode()
            body = b"A - %d - %d\nE %d\n" % (now, now, len(event)) + event + b"\n"
            f.write(f"{p}\t{seq[p]}\t{u}\t{now}\t\\\\x{body.hex()}\n")
        path = f.name
    with open(path) as f:
        subprocess.run(["psql", url, "-qX", "-c", "COPY beckon_log (partition, seq, user_id, received_at, body) FROM STDIN"],
                       stdin=f, check=True, capture_output=True)
    os.unlink(path)
    for p in range(64):
        psql(url, f"UPDATE beckon_sequence SET next_seq = {seq[p] + 1} WHERE partition = {p}")
    started = time.time()
    # (From before the process is started: its start, and PostgreSQL's work for it, are in the count.)
    before = CPU.counts([])
    proc = Process(url, "drain")
    try:
        cpu = CPU([proc.proc.pid], before)
        while lag(url) > 0:
            time.sleep(0.05)
        took = time.time() - started
        spent = cpu.stop(count, "processing alone, its start included")
    finally:
        proc.stop()
    return took, spent


print(f"binary: {beckon} (sha256 {hashlib.sha256(open(beckon, 'rb').read()).hexdigest()[:12]})")
print(f"machine: {os.cpu_count()} cores, PostgreSQL {psql(base_url, 'SHOW server_version')} on the same machine "
      f"(fsync {psql(base_url, 'SHOW fsync')}, synchronous_commit {psql(base_url, 'SHOW synchronous_commit')})")
ingest(1)
ingest(2)
latency()
t, spent = drain("bench_drain", 200_000, False)
print(f"processing alone, 200,000 logged events of 10,000 users, one process from start: {200_000 / t:.0f} events/s "
      f"({t:.1f} s, including its start)")
print(spent[0])
figure("fleet processing alone, 64 partitions", 200_000 / t, "events/s")
figure("fleet processing alone, beckon CPU an event", spent[1], "µs")
if spent[2] is not None:
    figure("fleet processing alone, PostgreSQL CPU an event", spent[2], "µs")
t, _ = drain("bench_drain_one", 50_000, True)
print(f"one partition alone, 50,000 logged events of its users: {50_000 / t:.0f} events/s ({t:.1f} s)")
figure("fleet processing alone, one partition", 50_000 / t, "events/s")
