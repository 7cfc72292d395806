#!/usr/bin/env bash
# Counts the instructions an event costs end to end — `beckon dry-run --format jsonl` of the shared benchmark's
# workload in Segment's shape, every thread of it (the lines decoded on the other core, the actions' JSON written) —
# with callgrind, which counts the same on every run, where the wall clock of this shared host moves by a third
# between rounds. An event's cost is the difference between two runs over the same users, of EVENTS and 2 × EVENTS
# events (the second stream the first plus as many again), ÷ EVENTS: start-up, the rules' compile and the users'
# identifies cancel out.
#
# Usage: scripts/bench-instructions.sh [EVENTS]   (default 100,000 over 10,000 users; about a minute a build)
# It counts `beckon-bench` (the same commands as `beckon`, and the counting allocator: one increment a malloc):
# valgrind 3.19 crashes itself at the start of `beckon`, whose main is asynchronous, as it starts its second thread.
# BECKON=PATH counts that `beckon-bench` instead of this checkout's release build; BEFORE=PATH also counts an earlier
# `beckon-bench` (`swift build -c release --product beckon-bench` at that commit) on the same files and prints both side
# by side. Valgrind 3.19 cannot read the DWARF 5 that Swift 6.3 writes ("unhandled dwarf2 abbrev form code 0x25",
# then it gives up): each binary is counted as a copy without its debug information (`objcopy --strip-debug`), which
# runs the same instructions.
set -euo pipefail
cd "$(dirname "$0")/.."
events=${1:-100000}
users=$((events / 10))
command -v valgrind >/dev/null || { apt-get install -y -qq valgrind >/dev/null; }
beckon=${BECKON:-}
if [ -z "$beckon" ]; then
  swift build -c release --product beckon-bench >/dev/null
  beckon=.build/release/beckon-bench
fi
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
python3 ../shared/bench/gen_workload.py --users "$users" --events $((2 * events)) --out "$work/data" >/dev/null
"$beckon" bench --workload "$work/data" --export "$work" 2>/dev/null
head -n $((users + events)) "$work/events.jsonl" > "$work/half.jsonl"

# The instructions of one dry-run (all threads) of `$2` by binary `$1`.
count() {
  valgrind --tool=callgrind --callgrind-out-file=/dev/null --log-file="$work/vg.log" \
    "$1" dry-run "$work/bench.yaml" --events "$2" --format jsonl >/dev/null 2>"$work/err.log"
  sed -n 's/.*Collected : \([0-9]*\).*/\1/p' "$work/vg.log"
}
# Instructions an event for binary `$1`.
per_event() {
  local bin="$work/$(basename "$1")-$2"
  objcopy --strip-debug "$1" "$bin"
  local a b
  a=$(count "$bin" "$work/half.jsonl")
  b=$(count "$bin" "$work/events.jsonl")
  echo $(((b - a) / events))
}
now=$(per_event "$beckon" now)
echo "end to end (dry-run --format jsonl, $users users, $events events): $now instructions an event, this build"
if [ -n "${BEFORE:-}" ]; then
  before=$(per_event "$BEFORE" before)
  echo "end to end: $before instructions an event before ($BEFORE); now ÷ before $(python3 -c "print('%.3f' % ($now / $before))")"
fi
