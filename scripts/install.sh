#!/usr/bin/env bash
# Installs everything Berth needs, idempotently: Debian packages (when root), npm packages, the build.
set -euo pipefail
cd "$(dirname "$0")/.."

DEBS=(bubblewrap iproute2 nftables util-linux)
if [ "$(id -u)" = 0 ] && command -v apt-get >/dev/null; then
  missing=()
  for p in "${DEBS[@]}"; do dpkg -s "$p" >/dev/null 2>&1 || missing+=("$p"); done
  if [ ${#missing[@]} -gt 0 ]; then
    echo "installing Debian packages: ${missing[*]}"
    apt-get update -qq
    DEBIAN_FRONTEND=noninteractive apt-get install -y -qq "${missing[@]}" >/dev/null
  fi
else
  echo "not root: skipping Debian packages (${DEBS[*]}); sandboxes need them" >&2
fi

stamp=node_modules/.berth-install-stamp
if [ ! -f "$stamp" ] || [ package-lock.json -nt "$stamp" ]; then
  # `npm install`, not `npm ci`: npm 11 leaves other platforms' optional packages (biome's binaries) out of the
  # lock file it writes, and `npm ci` then refuses that lock as out of sync. The lock still pins every version.
  npm install --no-audit --no-fund
  touch "$stamp"
fi
npm run --silent build
