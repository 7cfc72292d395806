#!/usr/bin/env bash
# Installs Debian's libsqlite3-dev (SQLite's headers, which GRDB builds BeckonStore against) unless it is already there.
set -euo pipefail
if [ -f /usr/include/sqlite3.h ]; then exit 0; fi
sudo_="" ; [ "$(id -u)" -ne 0 ] && sudo_="sudo"
$sudo_ apt-get update -qq
DEBIAN_FRONTEND=noninteractive $sudo_ apt-get install -y -qq --no-install-recommends libsqlite3-dev >/dev/null
