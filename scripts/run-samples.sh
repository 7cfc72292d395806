#!/usr/bin/env bash
# The main job: validates every shipped rule set and dry-runs each sample stream against the rules of its app.
# samples/APP/*.jsonl run against rules/APP or campaigns/APP.
# Usage: scripts/run-samples.sh [--debug] [--quiet] [--format table|jsonl]
set -euo pipefail
cd "$(dirname "$0")/.."
config=release
quiet=0
format=table
while [ $# -gt 0 ]; do
  case "$1" in
    --debug) config=debug ;;
    --quiet) quiet=1 ;;
    --format) format="$2"; shift ;;
    *) echo "unknown option $1" >&2; exit 64 ;;
  esac
  shift
done
swift build -c "$config" --product beckon > /tmp/beckon-build.log 2>&1 || { cat /tmp/beckon-build.log; exit 1; }
beckon=".build/$config/beckon"

for dir in rules/*/ campaigns/*/; do
  [ -d "$dir" ] || continue
  "$beckon" validate "$dir"
done

status=0
for app_dir in samples/*/; do
  app=$(basename "$app_dir")
  rules=""
  [ -d "rules/$app" ] && rules="rules/$app"
  [ -d "campaigns/$app" ] && rules="$rules campaigns/$app"
  if [ -z "$rules" ]; then echo "samples/$app has no rules/$app or campaigns/$app" >&2; status=1; continue; fi
  for sample in "$app_dir"*.jsonl; do
    if [ "$quiet" = 1 ]; then
      "$beckon" dry-run $rules --events "$sample" --format jsonl > /dev/null 2> /tmp/beckon-dry-run.err \
        || { cat /tmp/beckon-dry-run.err; status=1; }
      echo "dry-run $sample: $(tail -n 1 /tmp/beckon-dry-run.err)"
    else
      echo "== beckon dry-run $rules --events $sample"
      "$beckon" dry-run $rules --events "$sample" --format "$format" || status=1
      echo
    fi
  done
done
exit $status
