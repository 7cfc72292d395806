#!/usr/bin/env bash
# Installs what the console's browser tests and the rendered pages need, unless it is there already: Debian's chromium
# and chromium-driver (with a font), and Selenium and axe-selenium-python (which carries axe-core) from PyPI.
set -euo pipefail
sudo_="" ; [ "$(id -u)" -ne 0 ] && sudo_="sudo"
if ! command -v chromium >/dev/null 2>&1 || ! command -v chromedriver >/dev/null 2>&1; then
  $sudo_ apt-get update -qq
  DEBIAN_FRONTEND=noninteractive $sudo_ apt-get install -y -qq --no-install-recommends \
    chromium chromium-driver fonts-dejavu-core >/dev/null
fi
if ! python3 -c "import selenium, axe_selenium_python" >/dev/null 2>&1; then
  python3 -m pip install -q --disable-pip-version-check selenium==4.51.0 axe-selenium-python==2.1.6
fi
command -v chromium
