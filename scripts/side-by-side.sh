#!/usr/bin/env bash
# Runs a service benchmark twice in one go, first with an earlier binary and then with this checkout's release build,
# and prints each of its figures side by side (docs/bench.md, "Side by side"). The machine is shared and noisy: compare
# builds within one such run, never across runs.
#   BEFORE=PATH scripts/bench-service.sh [SECONDS]    (the benchmark scripts call this when BEFORE is set)
#   BEFORE=PATH scripts/side-by-side.sh SCRIPT [ARGS]
# Each script appends "name<TAB>value<TAB>unit" lines to $BENCH_FIGURES (`figure` in scripts/bench-figures.sh).
set -euo pipefail
cd "$(dirname "$0")/.."
script=$1
shift
[ -x "${BEFORE:?BEFORE=PATH names the earlier binary}" ] || { echo "BEFORE=$BEFORE is not an executable"; exit 2; }
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
swift build -c release --product beckon > "$work/build.log" 2>&1 || { cat "$work/build.log"; exit 1; }
# (A copy: the build folder may change while the benchmark runs.)
cp .build/release/beckon "$work/beckon"
before=$BEFORE
echo "== before: $before"
# (Not `BEFORE= BECKON=$BEFORE`: bash makes those assignments left to right, so BECKON would be empty and the "before"
# run would build and measure this checkout.)
BECKON=$before BEFORE= BENCH_FIGURES=$work/before bash "$script" "$@"
echo
echo "== now: $(git rev-parse --short HEAD)$(git diff --quiet HEAD || echo ' (with uncommitted changes)')"
BEFORE= BECKON=$work/beckon BENCH_FIGURES=$work/now bash "$script" "$@"
echo
python3 scripts/side-by-side.py "$work/before" "$work/now" "$BEFORE"
