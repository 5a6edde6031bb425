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

ASCIINEMA_VERSION="2.4.0"
CACHE="${BREAKGLASS_CACHE:-/var/cache/breakglass}"
VENV="$CACHE/venv-asciinema"
BIN="$VENV/bin/asciinema"

die() { echo "asciinema.sh: error: $*" >&2; exit 1; }

installed() {
    [[ -x "$BIN" ]] && "$VENV/bin/python" -c "import importlib.metadata as m, sys; sys.exit(m.version('asciinema') != '$ASCIINEMA_VERSION')" 2>/dev/null
}

install() {
    installed && return 0
    local py="${PYTHON:-python3}"
    command -v "$py" >/dev/null 2>&1 || die "'$py' is not on PATH (needed for the asciinema venv)"
    mkdir -p "$CACHE" || die "cannot create $CACHE (set BREAKGLASS_CACHE to a writable directory)"
    # One installer at a time (tests run in parallel); the version check makes a re-run after an
    # interrupted install finish the job.
    exec 9>"$CACHE/.venv-asciinema.lock"
    flock 9
    installed && return 0
    echo "asciinema.sh: installing asciinema $ASCIINEMA_VERSION into $VENV ..." >&2
    "$py" -m venv "$VENV" >&2 || die "cannot create a venv with $py (is python3-venv installed?)"
    "$VENV/bin/pip" install -q --disable-pip-version-check "asciinema==$ASCIINEMA_VERSION" >&2 \
        || die "pip install asciinema==$ASCIINEMA_VERSION failed (needs PyPI)"
    installed || die "asciinema installed but does not run from $VENV"
    echo "asciinema.sh: installed $BIN" >&2
}

[[ $# -ge 1 ]] || { sed -n '2,/^set -euo/p' "$0" | sed -e '$d' -e 's/^# \{0,1\}//' >&2; exit 2; }
case "$1" in
    install) install ;;
    path) install; echo "$BIN" ;;
    *) install; exec "$BIN" "$@" ;;
esac
