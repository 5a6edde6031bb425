#!/usr/bin/env bash
# Helm v3 (helm.sh/helm/v3, pinned), built from the Go module proxy, for the chart tests
# (e2e/tests/helm_chart.rs: helm lint, helm template applied with a server-side dry run).
#
# Usage:
#   scripts/helm.sh install      build the pinned helm into $BREAKGLASS_CACHE/bin (idempotent)
#   scripts/helm.sh path         print the path of the pinned helm binary (installs first)
#   scripts/helm.sh bin          print that path when installed; exit 1 naming the install command when not
#   scripts/helm.sh ARGS...      run helm ARGS... (installs first), e.g. `lint deploy/helm/breakglass`
#
# Environment:
#   BREAKGLASS_CACHE   cache root (default /var/cache/breakglass); binary in $BREAKGLASS_CACHE/bin
set -euo pipefail
# shellcheck source=scripts/lib.sh
source "$(dirname "${BASH_SOURCE[0]}")/lib.sh"

HELM_MODULE="helm.sh/helm/v3"
HELM_VERSION="v3.22.0"
PINNED_BIN="$BIN_DIR/helm-$HELM_VERSION"

cmd_install() {
    args 0 install "$@"
    [[ -x "$PINNED_BIN" ]] && return 0
    # Test binaries may call this at once; one builds, the others find the pinned binary.
    lock "$BIN_DIR/.helm.lock"
    if [[ -x "$PINNED_BIN" ]]; then
        return 0
    fi
    # -X ...version.version: `helm version` then names the pinned release.
    go_pin helm "$HELM_VERSION" "$HELM_MODULE/cmd/helm@$HELM_VERSION" \
        -ldflags="-s -w -X=$HELM_MODULE/internal/version.version=$HELM_VERSION"
}

cmd_path() { cmd_install; echo "$PINNED_BIN"; }
cmd_bin() { [[ -x "$PINNED_BIN" ]] || die "helm $HELM_VERSION is not installed; run: scripts/helm.sh install"; echo "$PINNED_BIN"; }
# Anything else is a helm command line.
cmd_default() { cmd_install; exec "$PINNED_BIN" "$@"; }

dispatch "$@"
