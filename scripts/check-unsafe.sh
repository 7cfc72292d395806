#!/usr/bin/env bash
# Lists every Swift file that holds a raw-memory construct (Unmanaged, unsafe pointers and buffers, unowned(unsafe),
# @exclusivity(unchecked), unsafeBitCast, unsafe addressors, nonisolated(unsafe)) and fails when one is outside the
# allowed places: the storage layer (Sources/BeckonCore/Runtime/Storage/) and the byte scanners that read input
# in place (the event decoder, the YAML event reader), plus the command-line tools' line reader,
# the bench's timed loops, the fuzz glue and the zlib and zstd calls (the app client's gzip, the fleet log's bodies).
# The semantic layer (rules, limits, time, actions, state, the engine) holds none. Run by scripts/test.sh.
set -euo pipefail
cd "$(dirname "$0")/.."

pattern='Unmanaged|Unsafe(Mutable)?(Raw)?(Buffer)?Pointer|unowned\(unsafe\)|@exclusivity\(unchecked\)|unsafeBitCast|unsafe(Mutable)?Address|withUnsafe|nonisolated\(unsafe\)|assumingMemoryBound|bindMemory'

# Each allowed file or folder, with why.
allowed=(
  "Sources/BeckonCore/Runtime/Storage/"           # the storage layer: its invariants are in Storage.swift
  "Sources/BeckonCore/Events/SegmentDecoder.swift" # the event decoder's byte scanner
  "Sources/BeckonCore/Events/KeyTable.swift"       # the decoder's key table, probed with the scanner's bytes
  "Sources/BeckonCore/Events/JSONTree.swift"       # a whole JSON document read with the decoder's scanner
  "Sources/BeckonYAML/YAMLEvents.swift"            # libyaml's C events, read in place
  "Sources/BeckonTools/IO/"                        # the commands' line reader and writer: file bytes in place
  "Sources/BeckonCommands/Bench/"                  # the bench's timed loops and workload loading
  "Sources/BeckonCommands/Fuzz/FuzzEntry.swift"    # libFuzzer's input buffer
  "Fuzz/Sources/"                                  # the fuzz harness
  "Sources/BeckonClient/Gzip.swift"                # the app client's zlib call: bytes in, bytes out
  "Sources/BeckonPostgres/LogBody.swift"           # the fleet log's zstd and zlib calls: bytes in, bytes out
)

status=0
echo "files with raw-memory constructs:"
while IFS= read -r f; do
  ok=no
  for a in "${allowed[@]}"; do
    case "$f" in "$a"*) ok=yes ;; esac
  done
  n=$(grep -cE "$pattern" "$f" || true)
  if [ "$ok" = yes ]; then
    printf '  %-55s %3d lines (allowed)\n' "$f" "$n"
  else
    printf '  %-55s %3d lines NOT ALLOWED\n' "$f" "$n"
    grep -nE "$pattern" "$f" | sed 's/^/      /'
    status=1
  fi
done < <(grep -rlE "$pattern" --include='*.swift' Sources Fuzz/Sources | sort)
if [ "$status" -ne 0 ]; then
  echo "raw memory outside the storage layer and the byte scanners: move it behind a typed API in Runtime/Storage/"
fi
exit "$status"
