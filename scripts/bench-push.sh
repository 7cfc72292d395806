#!/usr/bin/env bash
# The push benchmark (docs/push.md): 50,000 pushes to 10,000 users with 1-3 iOS devices each through the APNs
# double, and the same pushes through a generic destination, side by side (bench-push/push.py); the release build.
# Bounded in time (a few minutes). Usage: scripts/bench-push.sh. BECKON=PATH runs that binary instead of building one.
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/install-python-clients.sh
if [ -z "${BECKON:-}" ]; then
  swift build -c release --product beckon > /tmp/beckon-build.log 2>&1 || { cat /tmp/beckon-build.log; exit 1; }
fi
timeout 900 python3 scripts/bench-push/push.py "${BECKON:-.build/release/beckon}"
