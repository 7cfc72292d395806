#!/usr/bin/env python3
"""Writes a deterministic month of Stampbook launch traffic (seed 002) for `beckon report`.

Usage: scripts/generate-stampbook.py [--users N] [--seed S] > examples/stampbook_reminder/launch_month.jsonl

New users sign in over the first two weeks of March 2026, and many come back weekly until mid-April, so that every
goal window (up to 30 days) closes before the stream ends. About a third claim the welcome stamp within a day; some tap the
bell and open the welcome notification; some claim other stamps. Users still without the welcome stamp after a day
are in the reminder experiment (examples/stampbook_reminder): the treatment claims it more often and sooner than the
holdout. Holdout membership is computed exactly as the engine does (SHA-256 of "holdout:CAMPAIGN:USER", first 8
bytes, top 53 bits, below 0.2), so the simulated effect lands on the right users.
"""
import argparse, datetime, hashlib, json, random, sys

CAMPAIGN = "stampbook_claim_reminder"
HOLDOUT = 0.2
T0 = datetime.datetime(2026, 3, 1, tzinfo=datetime.timezone.utc)
OTHER_STAMPS = ["golden_gate", "pike_place", "space_needle", "alcatraz", "ferry_building"]

def held_out(user):
    n = int.from_bytes(hashlib.sha256(("holdout:%s:%s" % (CAMPAIGN, user)).encode()).digest()[:8], "big")
    return (n >> 11) / float(1 << 53) < HOLDOUT

def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--users", type=int, default=1200)
    ap.add_argument("--seed", type=int, default=2026)
    a = ap.parse_args()
    r = random.Random(a.seed)
    events = []
    def add(t, user, name, **props):
        events.append((t, user, name, props))
    H = 3600.0
    for i in range(a.users):
        u = "u%07d" % i
        t = r.randrange(14) * 86400 + r.randrange(7 * 3600, 23 * 3600)
        add(t, u, "Signed In")
        if r.random() < 0.15:
            add(t + r.uniform(1 * H, 120 * H), u, "Signed In")
        back = t
        while r.random() < 0.75:
            back += r.uniform(5 * 24 * H, 9 * 24 * H)
            if back > 45 * 24 * H:
                break
            add(back, u, "Signed In")
        if r.random() < 0.55:
            tap = t + min(r.expovariate(1 / (10 * H)), 160 * H)
            add(tap, u, "Notification Bell Tapped")
            if r.random() < 0.8:
                add(tap + r.uniform(20, 180), u, "Notification Opened", notification_id="welcome")
        if r.random() < 0.5:
            add(t + r.expovariate(1 / (30 * H)), u, "Stamp Claimed", stamp_id=r.choice(OTHER_STAMPS))
        if r.random() < 0.36:
            add(t + min(r.expovariate(1 / (6 * H)), 23.9 * H), u, "Stamp Claimed", stamp_id="welcome")
        elif held_out(u):
            if r.random() < 0.24:
                add(t + 24 * H + r.expovariate(1 / (40 * H)), u, "Stamp Claimed", stamp_id="welcome")
        elif r.random() < 0.44:
            add(t + 24 * H + r.expovariate(1 / (18 * H)), u, "Stamp Claimed", stamp_id="welcome")
    events.sort(key=lambda e: (e[0], e[1]))
    out = sys.stdout
    for k, (t, u, name, props) in enumerate(events):
        stamp = (T0 + datetime.timedelta(seconds=int(t))).strftime("%Y-%m-%dT%H:%M:%SZ")
        e = {"type": "track", "userId": u, "event": name, "timestamp": stamp, "messageId": "%s-%d" % (u, k)}
        if props:
            e["properties"] = props
        out.write(json.dumps(e, separators=(",", ":")) + "\n")

if __name__ == "__main__":
    main()
