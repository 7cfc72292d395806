#!/usr/bin/env bash
# The fleet's benchmark (docs/fleet.md, "Capacity"): a throw-away PostgreSQL on this machine (scripts/postgres.sh),
# the release build, then bench-fleet/fleet.py: ingest through 1 and 2 processes (events/s, batch latency, append and
# partition-commit times, lag), processing alone (all partitions, one partition), PostgreSQL's writes per event.
# Bounded in time (about 2 minutes with the default). Usage: scripts/bench-fleet.sh [SECONDS]   (default 10).
# BECKON=PATH runs that binary instead of building one; BEFORE=PATH runs the whole benchmark with that binary, then with
# this checkout's build, and prints each figure side by side (scripts/side-by-side.sh).
set -euo pipefail
cd "$(dirname "$0")/.."
source scripts/bench-figures.sh
seconds=${1:-10}
command -v wrk > /dev/null || { apt-get update > /dev/null && apt-get install -y wrk > /dev/null; }
scripts/install-headers.sh
if [ -z "${BECKON:-}" ]; then
  swift build -c release --product beckon > /tmp/beckon-build.log 2>&1 || { cat /tmp/beckon-build.log; exit 1; }
fi
pg_dir=$(mktemp -d)/postgres
trap 'scripts/postgres.sh stop "$pg_dir"' EXIT
url=$(scripts/postgres.sh start "$pg_dir")
BENCH_PG_DATA=$pg_dir/data python3 scripts/bench-fleet/fleet.py "${BECKON:-.build/release/beckon}" "$url" "$seconds"
