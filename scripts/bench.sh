#!/usr/bin/env bash
# Races Beckon against the peer engines on one generated workload, in one go:
#   1. ../shared/bench/run.sh generates the workload and runs the Python reference, the peers and the C++ ceiling;
#   2. beckon-bench bench (`beckon` with the malloc-counting allocator linked in, release build) runs on the same files
#      and checks its fires against the reference;
#   3. one table: events/s of each, and Beckon's ratio to each (in process and end to end).
# Usage: scripts/bench.sh [--users N] [--events N]     (defaults: the workload's, 100,000 users and 1,000,000 events)
# Results stay in $BENCH_RESULTS (default /tmp/beckon-bench).
set -euo pipefail
cd "$(dirname "$0")/.."
export BENCH_RESULTS="${BENCH_RESULTS:-/tmp/beckon-bench}"
shared="$(cd ../shared/bench && pwd)"
"$shared/run.sh" "$@" >/dev/null
swift build -c release --product beckon-bench >/dev/null
.build/release/beckon-bench bench --workload "$BENCH_RESULTS/data" --format json > "$BENCH_RESULTS/beckon.json"
python3 - "$BENCH_RESULTS" <<'PY'
import glob, json, os, sys
out = sys.argv[1]
b = json.load(open(os.path.join(out, "beckon.json")))
peers = []
for f in sorted(glob.glob(os.path.join(out, "results", "*.json"))):
    d = json.load(open(f))
    if d.get("engine") in (None, "decode"):
        continue
    peers.append(d)
peers.sort(key=lambda d: -d["events_per_s"])
ip, e2e = b["events_per_s_in_process"], b["events_per_s_end_to_end"]
print("workload: %d users, %d events, %d rules; one core of %d" % (b["users"], b["events"], b["rules"], b["cores"]))
print()
print("| engine | events/s | peak RSS MB | = reference | Beckon in process ÷ it | Beckon end to end ÷ it |")
print("|---|---:|---:|:-:|---:|---:|")
print("| **beckon (in process)** | %s | %.0f | %s | | |" % (format(ip, ","), b["peak_rss_kb"] / 1024,
      {True: "yes", False: "NO"}.get(b.get("matches_reference"), "-")))
print("| **beckon (end to end)** | %s | | | | |" % format(e2e, ","))
for d in peers:
    name = d["engine"]
    same = {True: "yes", False: "NO", None: "-"}[d.get("matches_ref")] if name != "ref" else "(is it)"
    print("| %s | %s | %.0f | %s | %.1f× | %.1f× |" % (name, format(d["events_per_s"], ","), d["peak_rss_kb"] / 1024, same,
          ip / d["events_per_s"], e2e / d["events_per_s"]))
print()
print("state %.0f bytes/user, %.2f allocations/event; %d rules: %s events/s in process (%.2f× the time of %d); "
      "%d rules load+compile in %.0f ms" % (b["state_bytes_per_user"], b["allocations_per_event"], b["scale_rules"],
      format(b["events_per_s_in_process_scaled"], ","), ip / max(1, b["events_per_s_in_process_scaled"]), b["rules"],
      b["compile_rules"], b["compile_ms_many"]))
PY
