#!/usr/bin/env python3
"""Writes a deterministic Segment-spec event stream for load and memory tests.

Usage: scripts/generate-stream.py --users N --events M [--days D] [--seed S] > events.jsonl

Users are identified once, then send E_Opened_App (with context.locale) and a mix of other Firefox MMA events,
spread over D days in time order, with a heavy-tailed number of events per user. Every event has a messageId.
"""
import argparse, json, random, sys

EVENTS = ["E_Opened_App"] * 6 + ["E_Opened_New_Tab"] * 3 + ["E_Saved_Bookmark", "E_Interact_With_Search_URL_Area",
          "E_Opened_Bookmark", "E_Opened_Mailto_Link", "E_Cleared_Private_Data"]
LOCALES = ["en_US", "de", "en_GB", "fr", "en_CA", "zh_TW", "es"]

def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--users", type=int, default=10_000)
    ap.add_argument("--events", type=int, default=1_000_000)
    ap.add_argument("--days", type=int, default=30)
    ap.add_argument("--seed", type=int, default=7)
    a = ap.parse_args()
    r = random.Random(a.seed)
    t0 = 1_772_323_200  # 2026-03-01T00:00:00Z
    out = sys.stdout
    w = out.write
    locale = {}
    for i in range(a.users):
        u = "u%07d" % i
        locale[u] = r.choice(LOCALES)
        w(json.dumps({"type": "identify", "userId": u, "messageId": "id-" + u, "timestamp": "2026-03-01T00:00:00Z",
                      "traits": {"Is Default Browser": r.random() < 0.3, "Telemetry Opt In": r.random() < 0.9}},
                     separators=(",", ":")) + "\n")
    weights = [r.paretovariate(1.2) for _ in range(a.users)]
    span = a.days * 86400
    times = sorted(r.randrange(span) for _ in range(a.events))
    users = r.choices(range(a.users), weights=weights, k=a.events)
    for k in range(a.events):
        u = "u%07d" % users[k]
        ts = t0 + times[k]
        stamp = "%sZ" % __import__("datetime").datetime.utcfromtimestamp(ts).isoformat()
        w('{"type":"track","userId":"%s","event":"%s","messageId":"m%d","timestamp":"%s","context":{"locale":"%s"}}\n'
          % (u, r.choice(EVENTS), k, stamp, locale[u]))

if __name__ == "__main__":
    main()
