#!/usr/bin/env bash
# The whole test suite, on a fresh machine or a warm one (README: "Run all tests").
# Installs and starts what the tests need, idempotently: PostgreSQL, the S3 server, Helm, the
# transparency log, the OpenID provider and auth proxy, the test control plane
# (built once per source version, Go build cache kept), and the frontend toolchain; then runs
# every Rust test on SQLite and PostgreSQL (the end-to-end suite on both, the second time
# recording to the S3 server; the browser tests on the second only), the test control plane's own Go test, the benchmarks' short
# check and the API fuzzing. Each step's time is printed, and all of them at the end.
#
#   scripts/test.sh            everything
#   scripts/test.sh -- ARGS    arguments for every test binary (e.g. a test name filter)
#
# The shared and server tests run under cargo-nextest (a process per test, four at a time);
# the end-to-end binaries two at a time, each whole in one process (scripts/run-binaries.py).
# E2E_JOBS and NEXTEST_TEST_THREADS change those counts.
set -euo pipefail
ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
cd "$ROOT"
export BREAKGLASS_CACHE=${BREAKGLASS_CACHE:-/var/cache/breakglass}
export CARGO_TARGET_DIR=${CARGO_TARGET_DIR:-$BREAKGLASS_CACHE/target}
mkdir -p "$BREAKGLASS_CACHE"
[ "${1:-}" = "--" ] && shift
# shellcheck source=scripts/lib.sh
source scripts/lib.sh
trap steps_summary EXIT

source scripts/test-env.sh

step "shared and server tests, unit and integration, SQLite + PostgreSQL (cargo-nextest)"
cargo nextest run --workspace --exclude breakglass-frontend --exclude breakglass-e2e \
  --no-fail-fast "$@"

step "end-to-end tests: each binary on SQLite, then on PostgreSQL with the S3 server as the store (the browser's on the second only)"
# The second pass gives each server a fresh PostgreSQL database instead of its SQLite file
# (e2e/src/server.rs, BREAKGLASS_E2E_ENGINE) and records into a versitygw bucket with Object
# Lock (e2e/src/s3.rs, BREAKGLASS_E2E_STORE); tests that open stored files themselves, or that
# are about one engine, keep theirs. Every binary but the demo's, which checks dev.sh's
# embedded defaults (SQLite, a local store) by definition, and the library's unit tests, which
# start no server. The browser binary runs once, on the second pass's engine and store: it
# checks what the pages show and how they behave (and each page's accessibility and width),
# which no engine changes, while the engines' and stores' own behaviour under the same flows is
# what every other binary runs twice for; a second browser pass cost 400 s of the warm run's
# two cores (Chromium takes most of them) for nothing the other binaries do not check.
cargo test -p breakglass-e2e --no-run --message-format=json 2>/dev/null \
  | python3 -c '
import json, sys
for line in sys.stdin:
    m = json.loads(line)
    if m.get("reason") != "compiler-artifact" or not m.get("executable") or not m["profile"]["test"]:
        continue
    name, kind = m["target"]["name"], m["target"]["kind"][0]
    print(name, kind, m["executable"])
' >"$BREAKGLASS_CACHE/e2e-binaries.txt"
[[ -s $BREAKGLASS_CACHE/e2e-binaries.txt ]] || die "cargo test -p breakglass-e2e --no-run listed no test binary"
while read -r name kind exe; do
  [[ $name == browser ]] || printf '%s (SQLite, local store)\t-\t%s\n' "$name" "$exe"
  if [[ $name != demo && $kind == test ]]; then
    printf '%s (PostgreSQL, S3 store)\tBREAKGLASS_E2E_ENGINE=postgres BREAKGLASS_E2E_STORE=s3\t%s\n' "$name" "$exe"
  fi
done <"$BREAKGLASS_CACHE/e2e-binaries.txt" \
  | CARGO_MANIFEST_DIR="$ROOT/e2e" scripts/run-binaries.py --jobs "${E2E_JOBS:-2}" --cwd "$ROOT/e2e" -- "$@"

step "the test control plane's own Go test (e2e/controlplane: the simulated kubelet's streams, a runtime's process rules, the debug image's supervisor run in them)"
# The settings of `scripts/controlplane.sh build` (cgo as Go defaults it), so a cold run
# compiles k8s.io/kubernetes once for both, not once per setting.
(cd e2e/controlplane && GOTOOLCHAIN=local "$(go_bin)" test -count=1 ./...)

step "benchmarks in their short mode (every figure still produced; no time is judged)"
BENCH_ENV_READY=1 scripts/bench.sh --short

step "frontend logic tests (host: keyframes, cast parsing, formatting)"
cargo test -p breakglass-frontend "$@"

if [ -x scripts/fuzz-api.sh ]; then
  step "API fuzzing (schemathesis against the served OpenAPI document)"
  scripts/fuzz-api.sh
fi
step_done
echo "all tests passed"
