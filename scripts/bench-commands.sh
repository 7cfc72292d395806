#!/usr/bin/env bash
# The commands a marketer runs on a large event file: `dry-run --format jsonl` (every action as a JSON line) and
# `report`, on the Firefox MMA campaign (campaigns/firefox) over a generated stream (scripts/generate-stream.py: EVENTS
# events, one user for every ten). Prints the events per second of each, the best of 3 runs, wall clock (the lines are
# decoded on the other cores: docs/architecture.md, "Threads").
# Usage: scripts/bench-commands.sh [EVENTS]   (default 500,000; about a minute)
# BECKON=PATH runs that binary instead of building one; BEFORE=PATH runs it, then this checkout's release build, and
# prints each figure side by side (scripts/side-by-side.sh).
set -euo pipefail
cd "$(dirname "$0")/.."
source scripts/bench-figures.sh
events=${1:-500000}
if [ -z "${BECKON:-}" ]; then
  swift build -c release --product beckon > /tmp/beckon-build.log 2>&1 || { cat /tmp/beckon-build.log; exit 1; }
fi
beckon=${BECKON:-.build/release/beckon}
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
python3 scripts/generate-stream.py --users $((events / 10)) --events "$events" > "$work/events.jsonl"
lines=$(wc -l < "$work/events.jsonl")
echo "$beckon on $lines lines ($((events / 10)) identifies, $events events), $(nproc) cores"
for command in "dry-run --format jsonl" report; do
  best=$(python3 - "$beckon" "$work/events.jsonl" $command <<'PY'
import subprocess, sys, time
beckon, events, args = sys.argv[1], sys.argv[2], sys.argv[3:]
best = None
for _ in range(3):
    t = time.monotonic()
    subprocess.run([beckon, args[0], "campaigns/firefox", "--events", events, *args[1:]], check=True,
                   stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    best = min(best or 1e9, time.monotonic() - t)
print("%.3f" % best)
PY
)
  rate=$(python3 -c "print(round($lines / $best))")
  echo "$command: $best s, $rate lines/s"
  figure "$command, lines/s" "$rate" "lines/s"
done
