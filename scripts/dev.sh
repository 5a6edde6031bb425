#!/usr/bin/env bash
# Start the whole system on embedded defaults (README: "Start it"): builds the frontend
# (installing its toolchain the first time, ~10 minutes cold) and runs the server in dev mode
# with SQLite in ./.breakglass and the dev login's demo users. Prints the URL to open.
#   scripts/dev.sh [server flags...]     e.g. scripts/dev.sh --listen 0.0.0.0:8080
set -euo pipefail
ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
cd "$ROOT"
export BREAKGLASS_CACHE=${BREAKGLASS_CACHE:-/var/cache/breakglass}
export CARGO_TARGET_DIR=${CARGO_TARGET_DIR:-$BREAKGLASS_CACHE/target}
scripts/install-tools.sh
# shellcheck source=env.sh
source scripts/env.sh
echo "building the frontend (trunk build --release)..." >&2
trunk build --release >&2
exec cargo run --release -p breakglass-server -- --dev --static-dir frontend/dist "$@"
