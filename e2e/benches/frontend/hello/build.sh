#!/usr/bin/env bash
# Builds the page-weight baseline (this directory: a Leptos page with an xterm.js terminal) with
# our frontend's toolchain, once per hash of its sources and of that toolchain, into
# $BREAKGLASS_CACHE/bench/hello-<hash>/, and prints that directory (the dist to serve).
# e2e/benches/frontend/weight.rs runs it and weighs what it built, every run; a warm run only
# hashes. Needs the tools of scripts/install-tools.sh (Trunk, wasm-bindgen, npm's binaryen,
# xterm.js and terser in frontend/node_modules).
#
#   e2e/benches/frontend/hello/build.sh
#
# Cargo builds into $CARGO_TARGET_DIR (default $BREAKGLASS_CACHE/target, as scripts/test-env.sh),
# next to our frontend's wasm build.
set -euo pipefail
HERE=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
# shellcheck source=../../../../scripts/lib.sh
source "$HERE/../../../../scripts/lib.sh"
export CARGO_TARGET_DIR=${CARGO_TARGET_DIR:-$CACHE/target}
# shellcheck source=../../../../scripts/env.sh
source "$ROOT/scripts/env.sh"
for tool in trunk wasm-bindgen wasm-opt node; do
  command -v "$tool" >/dev/null || die "$tool not found: run scripts/install-tools.sh"
done
[[ -f $ROOT/frontend/node_modules/@xterm/xterm/lib/xterm.mjs ]] \
  || die "xterm.js is not in frontend/node_modules: run scripts/install-tools.sh"

OUT_DIR="$CACHE/bench"
mkdir -p "$OUT_DIR"
# One build at a time, the lock written beside the page's own: two runs share both.
lock "$OUT_DIR/.hello.lock"

# The workspace's versions, pruned to this page's crates (`update --workspace` moves only the
# page itself), so the wasm-bindgen it links is the one scripts/install-tools.sh installed the
# CLI for. Offline first: the workspace's resolution left every index entry in cargo's cache.
cp "$ROOT/Cargo.lock" "$HERE/Cargo.lock"
(cd "$HERE" && { cargo update --workspace --offline --quiet 2>/dev/null \
  || cargo update --workspace --quiet; })

hash=$(
  cd "$ROOT"
  {
    for f in e2e/benches/frontend/hello/{build.sh,Cargo.toml,Cargo.lock,Trunk.toml,index.html} \
             e2e/benches/frontend/hello/src/*.rs .cargo/config.toml rust-toolchain.toml \
             frontend/precompress.mjs frontend/shrink.mjs frontend/package-lock.json; do
      echo "== $f"
      cat "$f"
    done
    rustc -vV
    trunk --version
    wasm-bindgen --version
    wasm-opt --version
    node --version
  } | sha256sum | cut -c1-16
)
out="$OUT_DIR/hello-$hash"
if [[ ! -f $out/index.html ]]; then
  note "building the Leptos + xterm hello page into $out (the first build compiles Leptos for wasm)"
  tmp="$out.tmp.$$"
  rm -rf "$tmp"
  (cd "$HERE" && trunk build --release --dist "$tmp") >&2
  rm -rf "$out"
  mv "$tmp" "$out"
  # Keep the three newest builds.
  ls -1dt "$OUT_DIR"/hello-* 2>/dev/null | grep -v '\.tmp\.' | tail -n +4 | xargs -r rm -rf
fi
echo "$out"
