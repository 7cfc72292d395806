#!/usr/bin/env bash
# Installs Debian's chromium (for rendering the HTML report to a PNG) unless it is already there.
set -euo pipefail
if command -v chromium >/dev/null 2>&1; then exit 0; fi
sudo_="" ; [ "$(id -u)" -ne 0 ] && sudo_="sudo"
$sudo_ apt-get update -qq
DEBIAN_FRONTEND=noninteractive $sudo_ apt-get install -y -qq --no-install-recommends chromium fonts-dejavu-core >/dev/null
command -v chromium
