#!/usr/bin/env bash
# Takes the console's screenshots that docs/screenshots holds and README
# shows: runs the console's browser tests (headless Chromium; see
# scripts/chromium.sh), which save a screenshot at each step, and copies
# the ones the docs use. Run it from the repository's root after a change
# to the console.
set -euo pipefail
shots=$(mktemp -d)
trap 'rm -rf "$shots"' EXIT
VARVE_SCREENSHOTS="$shots" go test -count=1 -run 'TestConsole' ./server/
mkdir -p docs/screenshots
for name in dashboard dashboard-390-dark streams stream lifecycle-confirm log-filtered find event \
  tail-filtered projections projection subscriptions parked layout-dark; do
  cp "$shots/$name.png" "docs/screenshots/$name.png"
done
echo "docs/screenshots: $(ls docs/screenshots | wc -l) screenshots"
