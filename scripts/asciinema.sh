#!/usr/bin/env bash
# The stock asciinema CLI (PyPI `asciinema`, pinned), in its own virtualenv, for tests that check
# our recordings play in the real tool.
#
# Usage:
#   scripts/asciinema.sh install      create the venv and install asciinema (idempotent)
#   scripts/asciinema.sh path         print the path of the asciinema binary (installs first)
#   scripts/asciinema.sh ARGS...      run asciinema ARGS... (installs first), e.g. `cat FILE`
#
# Environment:
#   BREAKGLASS_CACHE   cache root (default /var/cache/breakglass); venv in $BREAKGLASS_CACHE/venv-asciinema
#   PYTHON             interpreter to create the venv with (default python3)
set -euo pipefail

# shellcheck source=scripts/lib.sh
source "$(dirname "${BASH_SOURCE[0]}")/lib.sh"

ASCIINEMA_VERSION="2.4.0"
VENV="$CACHE/venv-asciinema"
BIN="$VENV/bin/asciinema"

installed() {
    [[ -x "$BIN" ]] && "$VENV/bin/python" -c "import importlib.metadata as m, sys; sys.exit(m.version('asciinema') != '$ASCIINEMA_VERSION')" 2>/dev/null
}

cmd_install() {
    venv_install "$VENV" "asciinema==$ASCIINEMA_VERSION" installed
}

cmd_path() { cmd_install; echo "$BIN"; }
# Anything else is an asciinema command line.
cmd_default() { cmd_install; exec "$BIN" "$@"; }

dispatch "$@"
