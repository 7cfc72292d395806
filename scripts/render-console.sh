#!/usr/bin/env bash
# Renders the console's pages at 1280 and 390 px to docs/images/console-*.png: runs the browser tests
# (Tests/Service/console_test.py) against rules/stampbook and its samples with BECKON_SCREENSHOTS set.
#
#   scripts/render-console.sh [OUT_DIR]
set -euo pipefail
cd "$(dirname "$0")/.."
out="$(realpath -m "${1:-docs/images}")"
scripts/install-chromium.sh >/dev/null
swift build --product beckon >/dev/null
BECKON=.build/debug/beckon BECKON_SCREENSHOTS="$out" python3 -m unittest Tests/Service/console_test.py
echo "wrote $out/console-*.png"
