#!/usr/bin/env bash
# Races Beckon against the peer engines on one generated workload, in one go:
#   1. ../shared/bench/run.sh generates the workload and runs the Python reference, the peers and the C++ ceiling;
#   2. beckon-bench bench (`beckon` with the malloc-counting allocator linked in, release build) runs on the same files
#      and checks its fires against the reference;
#   3. one table: events/s of each, and Beckon's ratio to each (in process and end to end).
# Usage: scripts/bench.sh [--users N] [--events N]     (defaults: the workload's, 100,000 users and 1,000,000 events)
# Results stay in $BENCH_RESULTS (default /tmp/beckon-bench). BEFORE=PATH also runs that earlier `beckon`'s `bench` on
# the same files (right after this build's) and prints each figure side by side (scripts/side-by-side.py).
set -euo pipefail
cd "$(dirname "$0")/.."
export BENCH_RESULTS="${BENCH_RESULTS:-/tmp/beckon-bench}"
shared="$(cd ../shared/bench && pwd)"
"$shared/run.sh" "$@" >/dev/null
swift build -c release --product beckon-bench >/dev/null
.build/release/beckon-bench bench --workload "$BENCH_RESULTS/data" --format json > "$BENCH_RESULTS/beckon.json"
rm -f "$BENCH_RESULTS/before.json"
if [ -n "${BEFORE:-}" ]; then
  "$BEFORE" bench --workload "$BENCH_RESULTS/data" --format json > "$BENCH_RESULTS/before.json"
fi
python3 - "$BENCH_RESULTS" <<'PY'
import glob, json, os, sys
out = sys.argv[1]
b = json.load(open(os.path.join(out, "beckon.json")))
if b["allocations_per_event"] is None:
    sys.exit("beckon-bench counted no allocations: its malloc shim is not linked in (Sources/BeckonAllocCount)")
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
if b.get("decoding_workers"):
    print("| **beckon (end to end, lines decoded on %d more thread%s)** | %s | | | | |" % (b["decoding_workers"],
          "" if b["decoding_workers"] == 1 else "s", format(b["events_per_s_end_to_end_cores"], ",")))
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

# The figures of the issue's table, for this build and (with BEFORE) the earlier one, on the same files.
ceiling = next((d["events_per_s"] for d in peers if d["engine"].startswith("cpp_ceiling")), None)
sys.path.insert(0, "scripts/bench-service")
from figures import figure
def figures(run, path):
    if os.path.exists(path):
        os.remove(path)
    figure("in process", run["events_per_s_in_process"], "events/s", path)
    figure("end to end (JSON lines to actions)", run["events_per_s_end_to_end"], "events/s", path)
    cores = run.get("events_per_s_end_to_end_cores") or 0
    if cores:
        figure("end to end, decoded on every core", cores, "events/s", path)
    if ceiling:
        figure("in process ÷ the C++ ceiling", run["events_per_s_in_process"] / ceiling, "", path)
        figure("end to end ÷ the C++ ceiling", run["events_per_s_end_to_end"] / ceiling, "", path)
        if cores:
            figure("end to end on every core ÷ the C++ ceiling (one core)", cores / ceiling, "", path)
    figure("decoding alone", run["events_per_s_decode"], "events/s", path)
    figure("state per user (engine heap)", run["state_bytes_per_user"], "B", path)
    figure(f"{run['compile_rules']:,} rules load + compile", run["compile_ms_many"], "ms", path)
    figure("peak RSS", run["peak_rss_kb"] / 1024, "MB", path)
figures(b, os.path.join(out, "now.figures"))
if os.path.exists(os.path.join(out, "before.json")):
    figures(json.load(open(os.path.join(out, "before.json"))), os.path.join(out, "before.figures"))
PY
if [ -n "${BEFORE:-}" ]; then
  echo
  python3 scripts/side-by-side.py "$BENCH_RESULTS/before.figures" "$BENCH_RESULTS/now.figures" "$BEFORE"
fi
