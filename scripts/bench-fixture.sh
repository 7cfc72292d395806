#!/usr/bin/env bash
# Regenerates Tests/BeckonCommandsTests/Fixtures/bench: a reduced shared-benchmark workload (300 users, 25,000 events;
# every one of the 50 rules fires at least twice) and the shared Python reference's fire counts for it, which
# BenchTests compares Beckon's with. Needs ../shared/bench and python3 with orjson (bench.py's only dependency for `ref`).
set -euo pipefail
cd "$(dirname "$0")/.."
out=Tests/BeckonCommandsTests/Fixtures/bench
bench=../shared/bench
tmp=$(mktemp -d)
python3 "$bench/gen_workload.py" --users 300 --events 25000 --out "$out" >/dev/null
BENCH_RESULTS="$tmp" python3 "$bench/bench.py" ref --data "$out" >/dev/null
python3 - "$tmp/results/ref.json" "$out/ref.json" <<'PY'
import json, sys
d = json.load(open(sys.argv[1]))
json.dump({"engine": "ref", "events": d["events"], "total_fires": d["total_fires"], "fires": d["fires"]}, open(sys.argv[2], "w"), indent=1)
PY
echo "wrote $out"
