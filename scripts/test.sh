#!/usr/bin/env bash
# The whole test suite, on a fresh machine or a warm one (README: "Run all tests").
# Installs and starts what the tests need, idempotently: PostgreSQL, the S3 server, Helm, the
# transparency log, the OpenID provider and auth proxy, the test control plane
# (built once per source version, Go build cache kept), and the frontend toolchain; then runs
# every Rust test on SQLite and PostgreSQL (the end-to-end suite on both, the second time
# recording to the S3 server), and the API fuzzing.
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

source scripts/test-env.sh

step "Rust tests (SQLite + PostgreSQL, S3, control plane, browser)"
cargo test --workspace --exclude breakglass-frontend "$@"

step "the end-to-end suite again, on PostgreSQL with the S3 server as the store"
# The same tests, each server on a fresh PostgreSQL database instead of its SQLite file
# (e2e/src/server.rs, BREAKGLASS_E2E_ENGINE) and recording into a versitygw bucket with Object
# Lock (e2e/src/s3.rs, BREAKGLASS_E2E_STORE); tests that open stored files themselves, or that
# are about one engine, keep theirs. Every test file but the demo's, which checks dev.sh's
# embedded defaults (SQLite, a local store) by definition. About ten minutes here.
E2E_AGAIN=()
for f in e2e/tests/*.rs; do
  name=$(basename "$f" .rs)
  [ "$name" = demo ] || E2E_AGAIN+=(--test "$name")
done
BREAKGLASS_E2E_ENGINE=postgres BREAKGLASS_E2E_STORE=s3 cargo test -p breakglass-e2e "${E2E_AGAIN[@]}" "$@"

step "benchmarks in their short mode (every figure still produced; no time is judged)"
BENCH_ENV_READY=1 scripts/bench.sh --short

step "frontend logic tests (host: keyframes, cast parsing, formatting)"
cargo test -p breakglass-frontend "$@"

if [ -x scripts/fuzz-api.sh ]; then
  step "API fuzzing (schemathesis against the served OpenAPI document)"
  scripts/fuzz-api.sh
fi
step "all tests passed"
