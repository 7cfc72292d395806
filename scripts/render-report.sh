#!/usr/bin/env bash
# Renders the example report (rules/stampbook + the reminder experiment on a generated launch month) to HTML, then to
# docs/images/report.png with Debian's headless chromium (installed by scripts/install-chromium.sh when missing).
#
#   scripts/render-report.sh [OUT.png]
set -euo pipefail
cd "$(dirname "$0")/.."
out="${1:-docs/images/report.png}"
scripts/install-chromium.sh >/dev/null
swift build -c release --product beckon >/dev/null
html="$(mktemp -d)/report.html"
.build/release/beckon report rules/stampbook examples/stampbook_reminder \
  --events examples/stampbook_reminder/launch_month.jsonl --html "$html" >/dev/null
mkdir -p "$(dirname "$out")"
chromium --headless --no-sandbox --disable-gpu --hide-scrollbars --window-size=1240,3400 \
  --screenshot="$(realpath -m "$out")" "file://$html" 2>/dev/null
echo "wrote $out (from $html)"
