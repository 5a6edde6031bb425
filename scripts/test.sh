#!/usr/bin/env bash
# The whole test suite, on a fresh machine or a warm one (README: "Run all tests").
# Installs and starts what the tests need, idempotently: PostgreSQL, the S3 server, Helm, the
# transparency log, the OpenID provider and auth proxy, the test control plane
# (built once per source version, Go build cache kept), and the frontend toolchain; then runs
# every Rust test on SQLite and PostgreSQL (the end-to-end activation tests on both), and the
# API fuzzing.
#
#   scripts/test.sh            everything
#   scripts/test.sh -- ARGS    extra arguments for `cargo test` (e.g. a test name filter)
set -euo pipefail
ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
cd "$ROOT"
export BREAKGLASS_CACHE=${BREAKGLASS_CACHE:-/var/cache/breakglass}
export CARGO_TARGET_DIR=${CARGO_TARGET_DIR:-$BREAKGLASS_CACHE/target}
mkdir -p "$BREAKGLASS_CACHE"
[ "${1:-}" = "--" ] && shift
step() { printf '\n== %s (%s)\n' "$*" "$(date +%T)"; }

step "PostgreSQL"
eval "export $(scripts/postgres.sh start)"

step "S3 server with Object Lock (versitygw; built once) and the asciinema CLI"
scripts/s3.sh install
scripts/asciinema.sh install

step "Helm for the chart tests (helm.sh/helm/v3, pinned; built once)"
scripts/helm.sh install

step "transparency log (Rekor v1 on Trillian + PostgreSQL; built once)"
scripts/rekor.sh install
REKOR_DIR="$BREAKGLASS_CACHE/rekor-test"
if ! rekor_env=$(scripts/rekor.sh start "$REKOR_DIR" 55433); then
  # A log whose database went away (a wiped PostgreSQL directory) cannot be served again:
  # start a new one.
  scripts/rekor.sh destroy "$REKOR_DIR" || true
  rekor_env=$(scripts/rekor.sh start "$REKOR_DIR" 55433)
fi
eval "$rekor_env"

step "OpenID provider and auth proxy for the login tests (ORY Hydra, oauth2-proxy; built once)"
# The tests start Hydra themselves (scripts/hydra.sh start, one per test binary) and
# oauth2-proxy (e2e/src/oauth2_proxy.rs).
scripts/hydra.sh install
scripts/oauth2-proxy.sh install

step "Chromium and chromedriver for the browser tests (Debian packages)"
if ! command -v chromedriver >/dev/null || ! command -v chromium >/dev/null; then
  export DEBIAN_FRONTEND=noninteractive
  apt-get update -qq && apt-get install -y -qq chromium chromium-driver
fi

step "axe-core for the browser tests' accessibility checks (npm, pinned)"
scripts/axe.sh install

step "test control plane (Go; cached per source version)"
export BREAKGLASS_CONTROLPLANE_BIN
BREAKGLASS_CONTROLPLANE_BIN=$(scripts/controlplane.sh build)
ls -la "$BREAKGLASS_CONTROLPLANE_BIN"

# The end-to-end tests run it, and scripts/s3.sh create-bucket / add-user set the recording
# tests' bucket up with its `recordings init-bucket`.
step "server binary for the end-to-end tests and the test bucket"
cargo build -p breakglass-server
export BREAKGLASS_SERVER_BIN="$CARGO_TARGET_DIR/debug/breakglass-server"

if [ ! -f frontend/dist/index.html ]; then
  step "frontend build (the browser tests serve it)"
  scripts/install-tools.sh
  ( source scripts/env.sh && trunk build --release )
fi

step "Rust tests (SQLite + PostgreSQL, S3, control plane, browser)"
cargo test --workspace --exclude breakglass-frontend "$@"

step "end-to-end activation, crash recovery and minted credentials again, on PostgreSQL"
# The same tests, each server on a fresh PostgreSQL database instead of its SQLite file
# (e2e/src/server.rs, BREAKGLASS_E2E_ENGINE); about two minutes here.
BREAKGLASS_E2E_ENGINE=postgres cargo test -p breakglass-e2e --test activation --test minted "$@"

step "frontend logic tests (host: keyframes, cast parsing, formatting)"
cargo test -p breakglass-frontend "$@"

if [ -x scripts/fuzz-api.sh ]; then
  step "API fuzzing (schemathesis against the served OpenAPI document)"
  scripts/fuzz-api.sh
fi
step "all tests passed"
