#!/usr/bin/env bash
# ensure-chromium.sh
#
# Makes sure Debian's chromium is installed, for the console's browser tests (api/ui, driven by
# chromedp). As root it installs the package when missing; otherwise it says how, and the
# browser tests skip with the same message.
set -euo pipefail

if [ -n "${JOBS_CHROMIUM:-}" ] && [ -x "$JOBS_CHROMIUM" ]; then
  exit 0
fi
if command -v chromium >/dev/null 2>&1 || [ -x /usr/bin/chromium ]; then
  exit 0
fi
if [ "$(id -u)" = 0 ]; then
  echo "ensure-chromium: chromium not found; installing it for the browser tests" >&2
  apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq chromium >/dev/null
else
  echo "ensure-chromium: chromium not found and not root: run 'apt-get install -y chromium' as root," \
    "or the browser tests of api/ui skip" >&2
fi
