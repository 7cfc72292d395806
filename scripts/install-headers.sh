#!/usr/bin/env bash
# Installs the C headers the build needs, unless they are there: Debian's libsqlite3-dev (SQLite's, which GRDB builds
# BeckonStore against) and libzstd-dev (zstd's, for the fleet log's bodies in BeckonPostgres); and iproute2's `ss`
# for the tests.
set -euo pipefail
missing=()
[ -f /usr/include/sqlite3.h ] || missing+=(libsqlite3-dev)
[ -f /usr/include/zstd.h ] || missing+=(libzstd-dev)
# (And iproute2's `ss`, with which the hostile suite reads the service's listen backlog.)
command -v ss > /dev/null || missing+=(iproute2)
if [ ${#missing[@]} -eq 0 ]; then exit 0; fi
sudo_="" ; [ "$(id -u)" -ne 0 ] && sudo_="sudo"
$sudo_ apt-get update -qq
DEBIAN_FRONTEND=noninteractive $sudo_ apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
