#!/usr/bin/env bash
# Install Debian's Chromium (headless) for tests/nightly/test_nightly_chromium.py, which is skipped without it.
#   bash .ci/chromium-setup.sh      # idempotent; about 1 minute and 300 MB the first time
# Debian's package, not a browser download: the machines reach only the package registries.
# fonts-dejavu-core gives the screenshots real glyphs (chromium's hard dependencies do not include a font).
set -euo pipefail
if command -v chromium >/dev/null 2>&1 && fc-list 2>/dev/null | grep -qi dejavu; then
    echo "chromium-setup.sh: $(chromium --version 2>/dev/null | head -1) already installed" >&2
    exit 0
fi
sudo=""
if [ "$(id -u)" -ne 0 ]; then sudo="sudo"; fi
export DEBIAN_FRONTEND=noninteractive
$sudo apt-get update -qq
$sudo apt-get install -y -qq --no-install-recommends chromium fonts-dejavu-core >/dev/null
echo "chromium-setup.sh: installed $(chromium --version 2>/dev/null | head -1)" >&2
