#!/usr/bin/env bash
# Install Debian's chromium (and fonts) for the browser test, when it is missing. Needs root (CI runs as root).
set -euo pipefail
command -v chromium >/dev/null && exit 0
if [ "$(id -u)" != 0 ]; then
    echo "tests/test_browser.py needs Debian's chromium: run 'sudo apt-get install -y chromium' first" >&2
    exit 1
fi
export DEBIAN_FRONTEND=noninteractive
for try in 1 2 3; do
    if timeout 900 apt-get update -qq &&
        timeout 900 apt-get install -y -qq --no-install-recommends chromium fonts-dejavu-core fonts-liberation; then
        break
    fi
    echo "apt-get failed (try $try), retrying in 20 s" >&2
    sleep 20
done
command -v chromium >/dev/null || { echo "could not install chromium" >&2; exit 1; }
