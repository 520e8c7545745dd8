#!/usr/bin/env bash
# One command: install everything, then start `berth serve` with embedded defaults.
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/install.sh
exec node packages/cli/bin/berth.mjs serve "$@"
