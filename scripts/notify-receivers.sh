#!/usr/bin/env bash
# Real receivers for the notification tests (e2e/receivers/receiver.py): a Standard Webhooks
# endpoint verified by the `standardwebhooks` package, a Slack-shaped endpoint that checks the
# Block Kit JSON, and an SMTP server (`aiosmtpd`); webhook payloads are also checked against the
# server's JSON Schema with `jsonschema`; all pinned, in their own virtualenv.
#
# Usage:
#   scripts/notify-receivers.sh install           create the venv (idempotent)
#   scripts/notify-receivers.sh run --secret S --ca-out FILE
#                                                 install, then run the receivers (prints their ports)
#
# Environment:
#   BREAKGLASS_CACHE   cache root (default /var/cache/breakglass); venv in $BREAKGLASS_CACHE/venv-receivers
#   PYTHON             interpreter to create the venv with (default python3)
set -euo pipefail

# shellcheck source=scripts/lib.sh
source "$(dirname "${BASH_SOURCE[0]}")/lib.sh"

STANDARDWEBHOOKS_VERSION="1.3.0"
AIOSMTPD_VERSION="1.4.6"
JSONSCHEMA_VERSION="4.26.0"
TRUSTME_VERSION="1.2.1"
VENV="$CACHE/venv-receivers"
HERE=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)

installed() {
    [[ -x "$VENV/bin/python" ]] && "$VENV/bin/python" -c "
import importlib.metadata as m, sys
sys.exit(m.version('standardwebhooks') != '$STANDARDWEBHOOKS_VERSION' or m.version('aiosmtpd') != '$AIOSMTPD_VERSION' or m.version('jsonschema') != '$JSONSCHEMA_VERSION' or m.version('trustme') != '$TRUSTME_VERSION')" 2>/dev/null
}

cmd_install() {
    venv_install "$VENV" "standardwebhooks==$STANDARDWEBHOOKS_VERSION aiosmtpd==$AIOSMTPD_VERSION jsonschema==$JSONSCHEMA_VERSION trustme==$TRUSTME_VERSION" installed
}

cmd_run() { cmd_install; exec "$VENV/bin/python" "$HERE/e2e/receivers/receiver.py" "$@"; }

dispatch "$@"
