#!/usr/bin/env bash
# The whole test suite from a clean clone: install, lint, type-check, then every test. Every failure ends with one
# line saying what to do.
set -euo pipefail
cd "$(dirname "$0")/.."

die() {
  printf 'test.sh: %s\n' "$*" >&2
  exit 1
}

bash scripts/install.sh || die "the install failed: its last line above says what to do, then run this again"

# --- Debian packages only the tests use (a real registry and image tools for the image tests; chromium for the
# console's and the OAuth flow's browser tests, driven by playwright-core: no browser is downloaded; PostgreSQL 15
# for the store's tests on PostgreSQL and the cluster tests, which start their own cluster with initdb) ----------
TEST_DEBS=(docker-registry skopeo umoci busybox-static openssl chromium postgresql-15)
if [ "$(id -u)" = 0 ] && command -v apt-get >/dev/null; then
  missing=()
  for p in "${TEST_DEBS[@]}"; do dpkg -s "$p" >/dev/null 2>&1 || missing+=("$p"); done
  if [ ${#missing[@]} -gt 0 ]; then
    echo "test.sh: installing Debian packages the tests use: ${missing[*]}"
    apt-get update -qq || die "apt-get update failed (output above): check the network and /etc/apt/sources.list"
    DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null ||
      die "apt-get install ${missing[*]} failed (output above): fix apt, or install them yourself"
  fi
fi

# The MCP conformance suite needs Node >= 22: both from npm, installed apart so Node 22 never shadows the project's.
# Installed from inside its directory, not with `--prefix`: that flag also moves npm's global configuration to
# <prefix>/etc/npmrc, which would drop a cafile or proxy the machine's own global npmrc sets.
conformance=packages/server/test/mcp-conformance
if [ ! -d "$conformance/node_modules" ]; then
  log=$(mktemp "${TMPDIR:-/tmp}/berth-conformance-ci.XXXXXX")
  if ! (cd "$conformance" && npm ci --no-audit --no-fund --no-update-notifier) >"$log" 2>&1; then
    tail -n 20 "$log" >&2
    if grep -Eq 'SELF_SIGNED_CERT|UNABLE_TO_GET_ISSUER_CERT|CERT_' "$log"; then
      die "npm ci in $conformance could not verify the registry's certificate (full log: $log): set cafile in npm's configuration (npm config set cafile <bundle>)"
    elif grep -Eq 'ENOTFOUND|ECONNREFUSED|ETIMEDOUT|EAI_AGAIN|ECONNRESET' "$log"; then
      die "npm ci in $conformance could not reach $(npm config get registry 2>/dev/null) (full log: $log): check the network or point npm_config_registry at a mirror"
    fi
    die "npm ci in $conformance failed (full log: $log): the lines above say why"
  fi
  rm -f "$log"
fi

npx --no-install biome check . || die "lint or format errors above: npx biome check --write <files> fixes the formatting"
npx --no-install tsc -p tsconfig.json || die "type errors above: fix them, then run this again"
node scripts/run-tests.mjs "$@" ||
  die "tests failed: each failure is above with its output (the full TAP is in .test-results/tap.log); run one file again with bash scripts/test.sh <part of its path>"
