#!/usr/bin/env python3
"""Writes examples/abandoned_cart/week.jsonl: a week of a shop's traffic for the abandoned-cart example (deterministic, seed 19).

2,000 shoppers; four in ten start anonymous and sign in (an identify with both ids) within the hour. A shopper adds
one to three products to the cart; a quarter order within two hours (no push comes). The others, if the push would
come (two hours after the last add, unless the shopper ordered), order within a day with a probability that depends
on the push copy they are assigned (control 8%, reminder 11%, urgency 14%), for 20 to 150 of revenue. The
assignment is the engine's (SHA-256 of the test and the user id): the lift is built into this synthetic traffic so
that `beckon report` has something to find; it is not a measurement of anything real."""
import hashlib
import json
import os
import random
from datetime import datetime, timedelta, timezone

rng = random.Random(19)
START = datetime(2026, 3, 2, 7, 0, tzinfo=timezone.utc)
PRODUCTS = ["Boots", "Scarf", "Gloves", "Lamp", "Mug", "Teapot", "Kettle", "Jacket"]
ORDER_RATE = {"control": 0.08, "reminder": 0.11, "urgency": 0.14}


def variant(user):
    h = int.from_bytes(hashlib.sha256(f"holdout:variant:abandoned_cart/cart_push:{user}".encode()).digest()[:8], "big")
    x = (h >> 11) / float(1 << 53)
    return "control" if x < 0.10 else "reminder" if x < 0.55 else "urgency"


def iso(t):
    return t.strftime("%Y-%m-%dT%H:%M:%S.") + f"{t.microsecond // 1000:03d}Z"


events = []
for i in range(2000):
    user = f"shopper-{i:04d}"
    t = START + timedelta(minutes=rng.uniform(0, 6 * 24 * 60))
    who = {"userId": user}
    if rng.random() < 0.4:
        anon = f"anon-{i:04d}"
        who = {"anonymousId": anon}
        events.append({"type": "track", "event": "Application Opened", **who, "timestamp": iso(t)})
    else:
        events.append({"type": "track", "event": "Application Opened", **who, "timestamp": iso(t)})
    last = t
    for _ in range(rng.randint(1, 3)):
        last += timedelta(minutes=rng.uniform(1, 20))
        events.append({"type": "track", "event": "Product Added", **who, "timestamp": iso(last),
                       "properties": {"product": rng.choice(PRODUCTS), "price": rng.randint(10, 120)}})
    if "anonymousId" in who:
        signin = last + timedelta(minutes=rng.uniform(1, 60))
        events.append({"type": "identify", "userId": user, "anonymousId": who["anonymousId"], "timestamp": iso(signin),
                       "traits": {"email": f"{user}@example.com"}})
        # After signing in, some keep using the anonymous id on another device.
        who = {"userId": user} if rng.random() < 0.7 else who
    if rng.random() < 0.25:
        order = last + timedelta(minutes=rng.uniform(5, 110))
    elif rng.random() < ORDER_RATE[variant(user)]:
        order = last + timedelta(hours=2) + timedelta(hours=rng.uniform(0.5, 20))
    else:
        order = None
    if order:
        events.append({"type": "track", "event": "Order Completed", **who, "timestamp": iso(order),
                       "properties": {"revenue": round(rng.uniform(20, 150), 2)}})

events.sort(key=lambda e: e["timestamp"])
for n, e in enumerate(events):
    e["messageId"] = f"m{n:06d}"
OUT = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "examples", "abandoned_cart", "week.jsonl")
with open(OUT, "w") as f:
    for e in events:
        f.write(json.dumps(e, separators=(",", ":")) + "\n")
