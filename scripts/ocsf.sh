#!/usr/bin/env bash
# The OCSF schema files, to check the audit export's `ocsf` events against: the
# `ocsf-json-schema` package carries schema.ocsf.io's exports of every OCSF version and turns a
# class into a JSON Schema; `jsonschema` validates with it (scripts/ocsf-validate.py). Pinned,
# in their own virtualenv.
#
# Usage:
#   scripts/ocsf.sh install            create the venv (idempotent); prints nothing
#   scripts/ocsf.sh env                install, then print `export BREAKGLASS_TEST_OCSF=...`
#   scripts/ocsf.sh validate FILE      install, then validate FILE (one OCSF event per line)
#
# Environment:
#   BREAKGLASS_CACHE   cache root (default /var/cache/breakglass)
#   PYTHON             interpreter to create the venv with (default python3)
set -euo pipefail

# shellcheck source=scripts/lib.sh
source "$(dirname "${BASH_SOURCE[0]}")/lib.sh"

OCSF_JSON_SCHEMA_VERSION="1.2.0"
JSONSCHEMA_VERSION="4.26.0"
VENV="$CACHE/venv-ocsf-$OCSF_JSON_SCHEMA_VERSION"
HERE=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)

usage() { sed -n '2,14p' "$0" | sed 's/^# \{0,1\}//'; exit 2; }

installed() {
    [[ -x "$VENV/bin/python" ]] && "$VENV/bin/python" -c "
import importlib.metadata as m, sys
sys.exit(m.version('ocsf-json-schema') != '$OCSF_JSON_SCHEMA_VERSION' or m.version('jsonschema') != '$JSONSCHEMA_VERSION')" 2>/dev/null
}

cmd_install() {
    venv_install "$VENV" "ocsf-json-schema==$OCSF_JSON_SCHEMA_VERSION jsonschema==$JSONSCHEMA_VERSION" installed
}

cmd_env() {
    cmd_install
    echo "export BREAKGLASS_TEST_OCSF='$VENV/bin/python $HERE/scripts/ocsf-validate.py'"
}

cmd_validate() { cmd_install; exec "$VENV/bin/python" "$HERE/scripts/ocsf-validate.py" "$@"; }

dispatch "$@"
