#!/usr/bin/env bash
# The broadcast benchmark (docs/time.md, "Schedules"): a one-off schedule reaching 10,000 and 100,000 stored users who
# send nothing, with the time to reach them, the time to store their actions and peak memory (bench-broadcast/
# broadcast.py); the release build. Bounded in time (a few minutes). Usage: scripts/bench-broadcast.sh [SIZE...].
# BECKON=PATH runs that binary instead of building one.
set -euo pipefail
cd "$(dirname "$0")/.."
if [ -z "${BECKON:-}" ]; then
  swift build -c release --product beckon > /tmp/beckon-build.log 2>&1 || { cat /tmp/beckon-build.log; exit 1; }
fi
timeout 1200 python3 scripts/bench-broadcast/broadcast.py "${BECKON:-.build/release/beckon}" "$@"
