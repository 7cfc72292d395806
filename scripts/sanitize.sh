#!/usr/bin/env bash
# Runs the Swift test suite under AddressSanitizer, then under ThreadSanitizer (Swift Testing runs suites in parallel,
# and the regex and function caches are shared between threads), each in a scratch path of its own so that the normal
# build is untouched. Exit status 1 if either finds anything or a test fails.
#
# Usage: scripts/sanitize.sh [address|thread]...   (default: both)
set -euo pipefail
cd "$(dirname "$0")/.."
sanitizers=("$@")
[ ${#sanitizers[@]} -gt 0 ] || sanitizers=(address thread)
status=0
for s in "${sanitizers[@]}"; do
  case "$s" in address|thread) ;; *) echo "usage: scripts/sanitize.sh [address|thread]..." >&2; exit 64 ;; esac
  echo "== swift test --sanitize=$s"
  log=$(mktemp)
  # Leaks are not checked: LeakSanitizer reports the DSL schema graph, built once and kept for the process, as a leak.
  if ASAN_OPTIONS=detect_leaks=0 TSAN_OPTIONS=halt_on_error=1 \
      swift test --sanitize="$s" --scratch-path ".build-$s" > "$log" 2>&1 \
      && ! grep -q "Sanitizer" "$log"; then
    grep -E "^✔ Test run|Executed .* tests" "$log" | tail -n 1
  else
    grep -E "✘|Sanitizer|SUMMARY|error:" "$log" | head -n 40
    echo "swift test --sanitize=$s failed (full log: $log)"
    status=1
  fi
done
exit $status
