#!/usr/bin/env bash
# The service's load benchmark, on loopback with the load from a second process, bounded in time (about a minute):
#  1. durable ingest throughput: after a 3-second warm-up, wrk posts /v1/batch bodies of 100 new events (one in ten an
#     app open that the bossup onboarding acts on; the rest screens and taps) from 128, then 512 connections for
#     SECONDS, against `beckon serve` (wall clock, release build) on rules/bossup + the benchmark's reminder campaign,
#     with the CPU each of its threads spent an event (bench-service/threads.py: the engine's, the commit's, ...);
#  2. the raw SQLite ceiling: the same rows that run wrote, copied by a minimal C program through SQLite's C API, the
#     library the service links (bench-service/ceiling.c, built here with cc);
#  3. latency: single /v1/track requests at 1,000 a second for SECONDS against a fresh server, p50/p99 from the moment
#     each was due; and the live clock's timer lag p99 (from /metrics) over that run;
#  4. operations (bench-service/operations.py): reloads under load with 10,000 users, forget, delivery to a receiver.
# Usage: scripts/bench-service.sh [SECONDS]   (default 10). Needs wrk (installed with apt-get if missing).
# BECKON=PATH runs that binary instead of building one; BEFORE=PATH runs the whole benchmark with that binary, then with
# this checkout's build, and prints each figure side by side (scripts/side-by-side.sh).
set -euo pipefail
cd "$(dirname "$0")/.."
source scripts/bench-figures.sh
seconds=${1:-10}
command -v wrk > /dev/null || apt-get install -y wrk > /dev/null 2>&1 || { apt-get update > /dev/null && apt-get install -y wrk > /dev/null; }
bash scripts/install-headers.sh  # (SQLite's, for the C ceiling below and the build; zstd's, for the build)
if [ -z "${BECKON:-}" ]; then
  swift build -c release --product beckon > /tmp/beckon-build.log 2>&1 || { cat /tmp/beckon-build.log; exit 1; }
fi
beckon=${BECKON:-.build/release/beckon}
work=$(mktemp -d)
key=bench-key
server_pid=
trap '[ -n "$server_pid" ] && kill "$server_pid" 2> /dev/null; rm -rf "$work"' EXIT
# The C ceiling, built with the system's C compiler or the Swift toolchain's clang.
"$(command -v cc || command -v clang)" -O2 -o "$work/ceiling" scripts/bench-service/ceiling.c -lsqlite3

start_server() {
  rm -f "$work"/db.sqlite*
  "$beckon" serve rules/bossup scripts/bench-service/rules --db "$work/db.sqlite" --port 0 --write-key "$key" \
    > "$work/out" 2> "$work/err" &
  server_pid=$!
  for _ in $(seq 100); do grep -q "listening on" "$work/out" 2> /dev/null && break; sleep 0.1; done
  port=$(grep -o 'http://[^ ]*' "$work/out" | sed 's/.*://')
  [ -n "$port" ] || { cat "$work/err"; echo "beckon serve did not start"; exit 1; }
}
stop_server() { kill "$server_pid"; wait "$server_pid" 2> /dev/null || true; server_pid=; }
metric() { curl -s "http://127.0.0.1:$port/metrics" | awk -v m="$1" '$1 == m { print $2 }'; }
# The smallest histogram bucket holding 99% of the timer lags.
lag_p99() {
  curl -s "http://127.0.0.1:$port/metrics" | awk '
    /^beckon_timer_lag_seconds_bucket/ { split($1, a, "\""); le[n] = a[2]; c[n] = $2; n++ }
    /^beckon_timer_lag_seconds_count/ { total = $2 }
    END { if (total == 0) { print "no timers"; exit } for (i = 0; i < n; i++) if (c[i] >= 0.99 * total) { print "<= " le[i] " s (" total " timers)"; exit } }'
}

echo "machine: $(nproc) cores; $(date -u +%Y-%m-%dT%H:%MZ)"
echo "binary: $beckon (sha256 $(sha256sum < "$beckon" | cut -c1-12))"
auth=$(printf '%s:' "$key" | base64)
# Durable ingest at a number of connections: a 3-second warm-up (the 10,000 users' first events, the tables' first
# pages), the measured run, then the SQLite ceiling for the rows that server wrote.
ingest() {
  local conns=$1
  start_server
  BENCH_AUTH=$auth wrk -t1 -c"$conns" -d3s -s scripts/bench-service/batch.lua "http://127.0.0.1:$port" > /dev/null 2>&1
  local before accepted checkpoints commits actions rps non2xx durable ceiling threads
  before=$(metric 'beckon_ingest_events_total{result="accepted"}')
  python3 scripts/bench-service/threads.py snapshot "$server_pid" > "$work/threads.before"
  BENCH_AUTH=$auth wrk -t1 -c"$conns" -d"${seconds}s" -s scripts/bench-service/batch.lua "http://127.0.0.1:$port" \
    > "$work/wrk" 2>&1
  python3 scripts/bench-service/threads.py snapshot "$server_pid" > "$work/threads.after"
  accepted=$(metric 'beckon_ingest_events_total{result="accepted"}')
  threads=$(python3 scripts/bench-service/threads.py split "$work/threads.before" "$work/threads.after" \
    "$(awk -v a="$accepted" -v b="$before" 'BEGIN { print a - b }')")
  checkpoints=$(metric 'beckon_checkpoints_total')
  commits=$(metric 'beckon_database_commit_seconds_count')
  actions=$(python3 -c "import sqlite3,sys; print(sqlite3.connect(sys.argv[1]).execute('select count(*) from action_log').fetchone()[0])" "$work/db.sqlite")
  outboxed=$(python3 -c "import sqlite3,sys; print(sqlite3.connect(sys.argv[1]).execute('select count(*) from outbox').fetchone()[0])" "$work/db.sqlite")
  rps=$(awk '/Requests\/sec/ { print $2 }' "$work/wrk")
  non2xx=$(awk '/Non-2xx/ { print $5 }' "$work/wrk")
  stop_server
  durable=$(awk -v r="$rps" 'BEGIN { printf "%.0f", r * 100 }')
  ceiling=$("$work/ceiling" "$work/db.sqlite" "$commits" "$((checkpoints + 1))")
  echo "durable ingest, /v1/batch of 100, $conns connections, ${seconds} s after 3 s of warm-up: $durable events/s"
  figure "durable ingest, $conns connections" "$durable" events/s
  figure "durable ingest, $conns connections ÷ SQLite ceiling" "$(awk -v a="$durable" -v b="$ceiling" 'BEGIN { printf "%.3f", a / b }')"
  echo "  ($accepted events in all, $actions actions stored, $outboxed of them in the outbox for bossup's Meta" \
    "destination, ${non2xx:-0} non-200 in the measured run;" \
    "batch latency $(awk '/Latency/ { print "avg " $2 ", max " $4 }' "$work/wrk"))"
  echo "  SQLite ceiling, the same rows in as many transactions: $ceiling events/s; the service reaches" \
    "$(awk -v a="$durable" -v b="$ceiling" 'BEGIN { printf "%.2f", a / b }')x"
  echo "  CPU an event by thread in the measured run, microseconds: $threads"
  # (A build from before the threads were named has no figure for them: side-by-side.py shows a dash.)
  local cpu name role
  for name in "the engine's thread:beckon-engine" "the commit thread:beckon-commit" "the whole process:all"; do
    role=${name##*:}
    cpu=$(sed -n "s/.*$role \([0-9.]*\)[;,]\?.*/\1/p" <<< "$threads")
    if [ -n "$cpu" ]; then figure "CPU an event, $conns connections: ${name%:*}" "$cpu" µs; fi
  done
}
ingest 128
ingest 512

start_server
read -r p50 p99 max bad n < <(python3 scripts/bench-service/latency.py "$port" "$key" 1000 "$seconds")
sleep 3
echo "single /v1/track at 1,000/s for ${seconds} s: p50 ${p50} ms, p99 ${p99} ms, max ${max} ms ($n requests, $bad not 200)"
figure "/v1/track at 1,000/s, p99" "$p99" ms
echo "timer lag p99 (2 s reminders on the live clock): $(lag_p99)"
stop_server

python3 scripts/bench-service/operations.py "$beckon" "$seconds"
