#!/usr/bin/env python3
"""Single `/v1/track` requests at a fixed rate from several keep-alive connections; each request's latency is measured
from the moment it was due to be sent (so a slow answer that delays the next request counts against the service).
Usage: latency.py PORT WRITE_KEY RATE SECONDS. Prints p50 p99 max in ms, and the number of non-200 answers."""
import base64
import http.client
import json
import sys
import threading
import time

port, key, rate, seconds = int(sys.argv[1]), sys.argv[2], float(sys.argv[3]), float(sys.argv[4])
connections = 8
auth = "Basic " + base64.b64encode(f"{key}:".encode()).decode()
names = ["Product Viewed", "Button Tapped", "Application Opened", "Search Performed", "Product Viewed"]
latencies, failures = [], [0]
lock = threading.Lock()
start = time.perf_counter() + 0.2


def worker(w):
    conn = http.client.HTTPConnection("127.0.0.1", port, timeout=10)
    k = 0
    mine, bad = [], 0
    while True:
        due = start + (k * connections + w) / rate
        if due - start > seconds:
            break
        now = time.perf_counter()
        if due > now:
            time.sleep(due - now)
        body = json.dumps({"userId": f"lat{(k * connections + w) % 5000}", "event": names[k % len(names)],
                           "messageId": f"lat-{w}-{k}"})
        try:
            conn.request("POST", "/v1/track", body, {"Authorization": auth, "Content-Type": "application/json"})
            r = conn.getresponse()
            r.read()
            ok = r.status == 200
        except (OSError, http.client.HTTPException):
            ok = False
            conn = http.client.HTTPConnection("127.0.0.1", port, timeout=10)
        mine.append(time.perf_counter() - due)
        bad += 0 if ok else 1
        k += 1
    with lock:
        latencies.extend(mine)
        failures[0] += bad


threads = [threading.Thread(target=worker, args=(w,)) for w in range(connections)]
for t in threads:
    t.start()
for t in threads:
    t.join()
latencies.sort()
q = lambda p: latencies[min(len(latencies) - 1, int(p * len(latencies)))] * 1000
print(f"{q(0.50):.2f} {q(0.99):.2f} {latencies[-1] * 1000:.2f} {failures[0]} {len(latencies)}")
