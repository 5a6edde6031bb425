#!/usr/bin/env bash
# The dependency tree's checks and the server's SBOM, with pinned cargo-deny and
# cargo-cyclonedx (crates.io, built once per version into $BREAKGLASS_CACHE/bin).
#
# Usage:
#   scripts/supply-chain.sh install    build both tools (idempotent; a few minutes cold)
#   scripts/supply-chain.sh deny       cargo deny: licences, bans (duplicate versions, wildcards)
#                                      and sources against deny.toml; advisories too when
#                                      BREAKGLASS_ADVISORY_DB names a clone of the RustSec database
#   scripts/supply-chain.sh sbom [OUT] the server's CycloneDX SBOM (JSON) into OUT (default
#                                      $BREAKGLASS_CACHE/sbom/breakglass-server.cdx.json), checked
#                                      to name the server and its dependencies with their purls
#
# Environment:
#   BREAKGLASS_CACHE        cache root (default /var/cache/breakglass)
#   BREAKGLASS_ADVISORY_DB  a local copy of github.com/rustsec/advisory-db (none here: no git host
#                           is reachable from this project's machines, so advisories are skipped)
set -euo pipefail
# shellcheck source=scripts/lib.sh
source "$(dirname "${BASH_SOURCE[0]}")/lib.sh"

DENY_VERSION="0.20.2"
CYCLONEDX_VERSION="0.5.9"
DENY="$BIN_DIR/cargo-deny-$DENY_VERSION"
CYCLONEDX="$BIN_DIR/cargo-cyclonedx-$CYCLONEDX_VERSION"

# install_crate NAME VERSION DEST: `cargo install --locked` of NAME@VERSION, its binary copied
# to DEST. A debug build: both are checks that run for seconds, and cargo-deny's release profile
# (fat LTO, one codegen unit) would cost minutes of every cold CI run.
install_crate() {
    local name="$1" version="$2" dest="$3"
    [[ -x "$dest" ]] && return 0
    lock "$BIN_DIR/.$name.lock"
    [[ -x "$dest" ]] && return 0
    note "building $name $version (cold: a few minutes)"
    local root="$CACHE/tools-build/$name-$version"
    cargo install --locked --debug --quiet "$name@$version" \
        --root "$root" --target-dir "$CACHE/tools-build/target-$name" >&2 \
        || die "cargo install $name@$version failed (needs crates.io)"
    install -D -m 0755 "$root/bin/$name" "$dest"
    rm -rf "$CACHE/tools-build/target-$name"
    flock -u 9
}

cmd_install() {
    args 0 install "$@"
    install_crate cargo-deny "$DENY_VERSION" "$DENY"
    install_crate cargo-cyclonedx "$CYCLONEDX_VERSION" "$CYCLONEDX"
}

cmd_deny() {
    args 0 deny "$@"
    cmd_install
    cd "$ROOT"
    local checks=(licenses bans sources)
    if [[ -n "${BREAKGLASS_ADVISORY_DB:-}" ]]; then
        [[ -d "$BREAKGLASS_ADVISORY_DB" ]] || die "BREAKGLASS_ADVISORY_DB=$BREAKGLASS_ADVISORY_DB is not a directory"
        local config
        config=$(mktemp)
        sed "s|^db-path = .*|db-path = \"$BREAKGLASS_ADVISORY_DB\"|" deny.toml >"$config"
        "$DENY" deny check --config "$config" --disable-fetch advisories
        rm -f "$config"
    else
        note "advisories: skipped (no RustSec database here; set BREAKGLASS_ADVISORY_DB to a clone of it)"
    fi
    "$DENY" deny --all-features check "${checks[@]}"
}

cmd_sbom() {
    (($# <= 1)) || die "usage: $0 sbom [OUT]"
    local out="${1:-$CACHE/sbom/breakglass-server.cdx.json}"
    cmd_install
    cd "$ROOT"
    # cargo-cyclonedx writes next to the manifest; the file is moved out at once (and ignored
    # by git meanwhile).
    "$CYCLONEDX" cyclonedx --manifest-path server/Cargo.toml --format json \
        --spec-version 1.5 --override-filename breakglass-server.cdx >&2
    mkdir -p "$(dirname "$out")"
    mv server/breakglass-server.cdx.json "$out"
    python3 - "$out" <<'PY'
import json, sys
bom = json.load(open(sys.argv[1]))
assert bom.get("bomFormat") == "CycloneDX", "not a CycloneDX document"
top = bom["metadata"]["component"]
assert top["name"] == "breakglass-server", f"the SBOM is of {top['name']}"
components = bom.get("components", [])
names = {c["name"] for c in components}
for dep in ("axum", "kube", "sqlx", "tokio"):
    assert dep in names, f"{dep} is missing from the SBOM"
missing = [c["name"] for c in components if not c.get("purl", "").startswith("pkg:cargo/")]
assert not missing, f"components without a cargo purl: {missing[:5]}"
print(f"{sys.argv[1]}: breakglass-server {top.get('version')}, {len(components)} components")
PY
}

dispatch "$@"
