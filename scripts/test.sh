#!/usr/bin/env bash
# The whole test suite from a clean clone: install, lint, type-check, then every test.
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/install.sh

# --- Debian packages only the tests use (a real registry and image tools for the image tests; chromium for the
# console's browser test, driven by playwright-core: no browser is downloaded) ---------------------------------
TEST_DEBS=(docker-registry skopeo umoci busybox-static openssl chromium)
if [ "$(id -u)" = 0 ] && command -v apt-get >/dev/null; then
  missing=()
  for p in "${TEST_DEBS[@]}"; do dpkg -s "$p" >/dev/null 2>&1 || missing+=("$p"); done
  if [ ${#missing[@]} -gt 0 ]; then
    echo "test.sh: installing Debian packages the tests use: ${missing[*]}"
    apt-get update -qq
    DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
  fi
fi
# The MCP conformance suite needs Node >= 22: both from npm, installed apart so Node 22 never shadows the project's.
[ -d packages/server/test/mcp-conformance/node_modules ] ||
  npm ci --prefix packages/server/test/mcp-conformance --no-audit --no-fund
npx --no-install biome check .
npx --no-install tsc -p tsconfig.json
node scripts/run-tests.mjs "$@"
