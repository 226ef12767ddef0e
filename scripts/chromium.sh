#!/usr/bin/env bash
# Installs Debian's chromium for the tests that render the lab's HTML
# reports in a headless browser, when it is missing and this runs as root
# with apt-get. Prints what it did; never fails the caller: the tests
# decide what a missing browser means (skip, or fail under CI=true).
set -uo pipefail

for b in chromium chromium-browser google-chrome; do
  if command -v "$b" >/dev/null 2>&1; then
    exit 0
  fi
done
if [ "$(id -u)" != 0 ] || ! command -v apt-get >/dev/null 2>&1; then
  echo "chromium: not installed, and no root apt-get to install it; the HTML rendering tests will skip (or fail with CI=true)" >&2
  exit 0
fi
echo "chromium: installing Debian's chromium package"
export DEBIAN_FRONTEND=noninteractive
if ! { apt-get update -qq && apt-get install -y -qq --no-install-recommends chromium; } >/tmp/varve-chromium-install.log 2>&1; then
  echo "chromium: the install failed (log: /tmp/varve-chromium-install.log); the HTML rendering tests will skip (or fail with CI=true)" >&2
fi
exit 0
