#!/usr/bin/env bash
# Install the frontend toolchain (idempotent; safe to re-run). Used by CI on a fresh machine and
# by developers. Afterwards:   source scripts/env.sh && trunk build --release
#
#   - rustup target wasm32-unknown-unknown
#   - trunk 0.21.14                        -> $BREAKGLASS_CACHE/tools/bin   (cargo install --locked)
#   - wasm-bindgen-cli == wasm-bindgen in Cargo.lock -> same bin dir   (cargo install, NOT --locked:
#     its own lockfile pins a crate version our registry lacks)
#   - wasm-split-cli 0.2.4 (crate wasm_split_cli_support) -> same bin dir   (cargo install --locked)
#   - npm ci in frontend/: binaryen 132 (wasm-opt), terser 5 (frontend/shrink.mjs), @xterm/xterm 6,
#     @xterm/addon-fit 0.11
#
# Trunk must never download tools (no network to GitHub here): it uses the binaries on PATH when
# their versions match (see Trunk.toml [tools]).
#
# Environment: BREAKGLASS_CACHE (default /var/cache/breakglass), CARGO_BUILD_JOBS (optional).
set -euo pipefail

TRUNK_VERSION=0.21.14

REPO_ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
CACHE_DIR="${BREAKGLASS_CACHE:-/var/cache/breakglass}"
TOOLS_ROOT="$CACHE_DIR/tools"
TOOLS_BIN="$TOOLS_ROOT/bin"
# Separate target dirs: never contend for the workspace's build lock, and keep artifacts so a
# version bump rebuilds incrementally.
TOOLS_BUILD="$CACHE_DIR/tools-build"
FRONTEND_DIR="$REPO_ROOT/frontend"

# shellcheck source=scripts/lib.sh
source "$REPO_ROOT/scripts/lib.sh"
log() { note "$*"; }
timed() { # timed LABEL CMD... : run CMD, log its wall time
  local label=$1 start end; shift
  start=$(date +%s)
  "$@"
  end=$(date +%s)
  log "$label done in $((end - start))s"
}

command -v cargo >/dev/null || die "cargo not found (install rustup: https://rustup.rs)"
command -v rustup >/dev/null || die "rustup not found"
command -v npm >/dev/null || die "npm not found (Debian: apt-get install -y nodejs npm)"
mkdir -p "$TOOLS_BIN" "$TOOLS_BUILD"

cd "$REPO_ROOT" # so rustup/cargo see rust-toolchain.toml and the workspace

# --- 1. wasm target ---------------------------------------------------------------------------
if rustup target list --installed | grep -qx wasm32-unknown-unknown; then
  log "rust target wasm32-unknown-unknown: present"
else
  timed "rustup target add wasm32-unknown-unknown" rustup target add wasm32-unknown-unknown
fi

# version_of BIN : prints the second word of `BIN --version` ("trunk 0.21.14" -> 0.21.14), or nothing
version_of() {
  [ -x "$1" ] || return 0
  "$1" --version 2>/dev/null | awk 'NR==1 {print $2}'
}

# --- 2. trunk --------------------------------------------------------------------------------
have=$(version_of "$TOOLS_BIN/trunk")
if [ "$have" = "$TRUNK_VERSION" ]; then
  log "trunk $TRUNK_VERSION: present"
else
  log "trunk: installing $TRUNK_VERSION (found: ${have:-none}); takes ~7 min cold"
  # Trunk's release profile links with fat LTO in one codegen unit, the longest part of a cold
  # run's toolchain; here it only copies and minifies a page's HTML and CSS (the wasm is
  # frontend/wasm.mjs's), so it is built without them: 449 s against 649 s on 2 cores, the
  # same dist byte for byte (frontend/README.md, "Building Trunk").
  timed "cargo install trunk@$TRUNK_VERSION" \
    env CARGO_PROFILE_RELEASE_LTO=off CARGO_PROFILE_RELEASE_CODEGEN_UNITS=16 \
    cargo install --locked "trunk@$TRUNK_VERSION" --force \
      --root "$TOOLS_ROOT" --target-dir "$TOOLS_BUILD/trunk"
fi

# --- 3. wasm-bindgen-cli, exactly the version in Cargo.lock ------------------------------------
lock_wasm_bindgen_version() {
  [ -f "$REPO_ROOT/Cargo.lock" ] || return 0
  awk '$1 == "name" && $3 == "\"wasm-bindgen\"" { found = 1; next }
       found && $1 == "version" { gsub(/"/, "", $3); print $3; exit }
       /^\[\[package\]\]/ { found = 0 }' "$REPO_ROOT/Cargo.lock"
}
WASM_BINDGEN_VERSION=$(lock_wasm_bindgen_version)
if [ -z "$WASM_BINDGEN_VERSION" ]; then
  # No lockfile (or it predates the frontend): let cargo resolve and write it, then read again.
  log "Cargo.lock has no wasm-bindgen entry; resolving the workspace (cargo metadata)"
  cargo metadata --format-version 1 >/dev/null
  WASM_BINDGEN_VERSION=$(lock_wasm_bindgen_version)
fi
[ -n "$WASM_BINDGEN_VERSION" ] || die "could not read the wasm-bindgen version from Cargo.lock"

have=$(version_of "$TOOLS_BIN/wasm-bindgen")
if [ "$have" = "$WASM_BINDGEN_VERSION" ]; then
  log "wasm-bindgen-cli $WASM_BINDGEN_VERSION: present"
else
  log "wasm-bindgen-cli: installing $WASM_BINDGEN_VERSION (found: ${have:-none})"
  timed "cargo install wasm-bindgen-cli@$WASM_BINDGEN_VERSION" \
    cargo install "wasm-bindgen-cli@$WASM_BINDGEN_VERSION" --force \
      --root "$TOOLS_ROOT" --target-dir "$TOOLS_BUILD/wasm-bindgen"
fi

# --- 3b. wasm-split-cli (cuts the wasm into chunks loaded on first use, frontend/wasm.mjs) ------
# Its binary has no --version; a stamp beside it records the version installed.
WASM_SPLIT_VERSION=0.2.4
stamp="$TOOLS_ROOT/wasm-split-cli.version"
if [ -x "$TOOLS_BIN/wasm-split-cli" ] && [ "$(cat "$stamp" 2>/dev/null)" = "$WASM_SPLIT_VERSION" ]; then
  log "wasm-split-cli $WASM_SPLIT_VERSION: present"
else
  log "wasm-split-cli: installing $WASM_SPLIT_VERSION"
  timed "cargo install wasm_split_cli_support@$WASM_SPLIT_VERSION" \
    cargo install --locked "wasm_split_cli_support@$WASM_SPLIT_VERSION" --features build-binary --force \
      --root "$TOOLS_ROOT" --target-dir "$TOOLS_BUILD/wasm-split"
  echo "$WASM_SPLIT_VERSION" >"$stamp"
fi

# --- 4. npm packages (wasm-opt, xterm.js) -----------------------------------------------------
stamp="$FRONTEND_DIR/node_modules/.breakglass-lock.sha256"
want=$(sha256sum "$FRONTEND_DIR/package-lock.json" | awk '{print $1}')
if [ -f "$stamp" ] && [ "$(cat "$stamp")" = "$want" ] \
   && [ -x "$FRONTEND_DIR/node_modules/.bin/wasm-opt" ]; then
  log "npm packages: up to date with frontend/package-lock.json"
else
  timed "npm ci" npm ci --prefix "$FRONTEND_DIR" --no-audit --no-fund
  echo "$want" >"$stamp"
fi

# --- 5. check what Trunk will find -------------------------------------------------------------
# shellcheck source=env.sh
source "$REPO_ROOT/scripts/env.sh"
log "trunk:        $(command -v trunk) -> $(trunk --version)"
log "wasm-bindgen: $(command -v wasm-bindgen) -> $(wasm-bindgen --version)"
log "wasm-opt:     $(command -v wasm-opt) -> $(wasm-opt --version)"
log "wasm-split:   $(command -v wasm-split-cli) -> $(cat "$TOOLS_ROOT/wasm-split-cli.version")"
[ "$(wasm-opt --version | awk '{print $3}')" = 132 ] || die "wasm-opt on PATH is not binaryen 132"

cat <<MSG

Tools ready. Put them on PATH (npm's wasm-opt must come before any system one):

  source scripts/env.sh
  # i.e. export PATH="$FRONTEND_DIR/node_modules/.bin:$TOOLS_BIN:\$PATH"

then: trunk build --release   (output in frontend/dist/)
MSG
