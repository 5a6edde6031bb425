#!/usr/bin/env bash
# oauth2-proxy (the trusted auth proxy the server accepts X-Auth-Request-User / -Groups from)
# for the proxy tests. The tests write its configuration and start it themselves
# (e2e/src/oauth2_proxy.rs); this script builds the pinned binary.
#
# Usage:
#   scripts/oauth2-proxy.sh install     build the pinned oauth2-proxy into $BREAKGLASS_CACHE/bin
#                                       (idempotent)
#   scripts/oauth2-proxy.sh path        print the pinned binary's path (exit 1 when missing)
#
# Environment:
#   BREAKGLASS_CACHE   cache root (default /var/cache/breakglass)
set -euo pipefail
# shellcheck source=scripts/lib.sh
source "$(dirname "${BASH_SOURCE[0]}")/lib.sh"

PROXY_MODULE="github.com/oauth2-proxy/oauth2-proxy/v7"
PROXY_VERSION="v7.15.6"
PROXY_BIN="$BIN_DIR/oauth2-proxy-$PROXY_VERSION"

cmd_install() {
    args 0 install "$@"
    if [[ -x "$PROXY_BIN" ]]; then
        note "oauth2-proxy $PROXY_VERSION already installed: $PROXY_BIN"
        return 0
    fi
    go_bin >/dev/null
    lock "$BIN_DIR/.oauth2-proxy.lock"
    [[ -x "$PROXY_BIN" ]] && return 0
    make_stage oauth2-proxy
    local start=$SECONDS
    note "building $PROXY_MODULE@$PROXY_VERSION (a cold build takes a few minutes) ..."
    go_install "$STAGE" -ldflags="-s -w -X $PROXY_MODULE/pkg/version.VERSION=$PROXY_VERSION" \
        "$PROXY_MODULE@$PROXY_VERSION" \
        || die "go install of oauth2-proxy $PROXY_VERSION failed (needs the Go module proxy)"
    pin "$STAGE" oauth2-proxy "$PROXY_VERSION"
    note "built oauth2-proxy $PROXY_VERSION in $((SECONDS - start))s: $PROXY_BIN"
}

cmd_path() { [[ -x "$PROXY_BIN" ]] || exit 1; echo "$PROXY_BIN"; }

dispatch "$@"
