#!/usr/bin/env bash
# The whole test suite from a clean clone: install, lint, type-check, then every test.
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/install.sh
npx --no-install biome check .
npx --no-install tsc -p tsconfig.json
node scripts/run-tests.mjs "$@"
