#!/usr/bin/env bash
# axe-core (npm, pinned) for the browser tests, which inject axe.min.js into every page and fail
# on any WCAG 2 A/AA violation. Fetched into the cache at test-setup time, never committed.
#
# Usage:
#   scripts/axe.sh install    fetch axe-core into $BREAKGLASS_CACHE/axe-core-VERSION (idempotent)
#   scripts/axe.sh path       print the path of axe.min.js (installs first)
#
# Environment:
#   BREAKGLASS_CACHE   cache root (default /var/cache/breakglass)
# The tests read BREAKGLASS_AXE_JS, else $BREAKGLASS_CACHE/axe-core-4.14.1/axe.min.js.
set -euo pipefail

# shellcheck source=scripts/lib.sh
source "$(dirname "${BASH_SOURCE[0]}")/lib.sh"

AXE_VERSION="4.14.1"
DIR="$CACHE/axe-core-$AXE_VERSION"
JS="$DIR/axe.min.js"

install() {
    [[ -s "$JS" ]] && return 0
    need npm "to fetch axe-core"
    local tmp
    tmp=$(mktemp -d)
    trap 'rm -rf "$tmp"' RETURN
    (cd "$tmp" && npm pack --silent "axe-core@$AXE_VERSION" >/dev/null)
    tar -xzf "$tmp"/axe-core-*.tgz -C "$tmp"
    mkdir -p "$DIR"
    # Written under a temporary name first: a half-copied file must not look installed.
    cp "$tmp/package/axe.min.js" "$JS.part"
    cp "$tmp/package/LICENSE" "$DIR/LICENSE"
    mv "$JS.part" "$JS"
    note "axe-core $AXE_VERSION installed in $DIR"
}

[[ $# -ge 1 ]] || usage
case "$1" in
    install) install ;;
    path) install; echo "$JS" ;;
    *) usage ;;
esac
