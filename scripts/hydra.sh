#!/usr/bin/env bash
# ORY Hydra (a certified OpenID Connect provider) for the OIDC login tests, on PostgreSQL.
# It listens on 127.0.0.1 only; the login, consent and logout pages are the tests' own
# (e2e/src/hydra.rs).
#
# Usage:
#   scripts/hydra.sh install                    build the pinned hydra into $BREAKGLASS_CACHE/bin
#                                               (idempotent)
#   scripts/hydra.sh start DIR PUBLIC ADMIN     start a new provider (its database, named after DIR,
#                                               is created afresh and migrated; logs and pid in DIR)
#                                               with the public API on port PUBLIC and the admin API
#                                               on ADMIN; waits until both are ready; prints
#                                               `export ...` lines
#   scripts/hydra.sh stop DIR                   stop it and drop its database
#   scripts/hydra.sh path                       print the pinned binary's path (exit 1 when missing)
#
# Environment for start:
#   HYDRA_ISSUER_URL     the issuer it names (default http://127.0.0.1:PUBLIC/); set it when the
#                        public API is reached through something in front of it
#   HYDRA_LOGIN_URL, HYDRA_CONSENT_URL, HYDRA_LOGOUT_URL
#                        the login/consent/logout pages (required)
#   HYDRA_POSTGRES_URL   admin URL of the PostgreSQL server (default BREAKGLASS_TEST_POSTGRES_URL,
#                        else scripts/postgres.sh's cluster, started when it does not answer)
#   HYDRA_START_TIMEOUT  seconds to wait for it to answer (default 60)
#   BREAKGLASS_CACHE     cache root (default /var/cache/breakglass)
set -euo pipefail
# shellcheck source=scripts/lib.sh
source "$(dirname "${BASH_SOURCE[0]}")/lib.sh"

HYDRA_MODULE="github.com/ory/hydra/v2"
HYDRA_VERSION="v2.3.0"
HYDRA_BIN="$BIN_DIR/hydra-$HYDRA_VERSION"
START_TIMEOUT="${HYDRA_START_TIMEOUT:-60}"

# Built from a copy of the released module, not with `go install MODULE@VERSION` or
# `go get -tool`: Hydra's go.mod replaces gobuffalo/pop with ORY's fork, and replace directives
# only apply to the main module (see also the hydra-client-go note below). No `sqlite` tag (that driver needs cgo): PostgreSQL only.
cmd_install() {
    args 0 install "$@"
    if [[ -x "$HYDRA_BIN" ]]; then
        note "hydra $HYDRA_VERSION already installed: $HYDRA_BIN"
        return 0
    fi
    go_bin >/dev/null
    lock "$BIN_DIR/.hydra.lock"
    [[ -x "$HYDRA_BIN" ]] && return 0
    make_stage hydra
    local start=$SECONDS src dir
    note "building $HYDRA_MODULE@$HYDRA_VERSION (a cold build takes several minutes) ..."
    dir="$(module_dir "$HYDRA_MODULE@$HYDRA_VERSION")"
    src="$STAGE/src"
    cp -R "$dir" "$src"
    chmod -R u+w "$src"
    # internal/httpclient, the admin API client its CLI commands use, is a module of its own and
    # so not in the module's zip: use the published copy of it instead (-mod=mod below records
    # its checksum).
    (cd "$src" && go_env "$(go_bin)" mod edit -dropreplace github.com/ory/hydra-client-go/v2) \
        || die "cannot edit the go.mod of the hydra copy"
    (cd "$src" && go_env "$(go_bin)" build -mod=mod -trimpath \
        -ldflags="-s -w -X github.com/ory/hydra/v2/driver/config.Version=$HYDRA_VERSION" \
        -o "$STAGE/hydra" . >&2) \
        || die "go build of hydra $HYDRA_VERSION failed (needs the Go module proxy)"
    pin "$STAGE" hydra "$HYDRA_VERSION"
    note "built hydra $HYDRA_VERSION in $((SECONDS - start))s: $HYDRA_BIN"
}

require_bin() {
    [[ -x "$HYDRA_BIN" ]] || die "hydra $HYDRA_VERSION is not installed; run: $0 install"
}

db_name() {
    echo "hydra_$(printf '%s' "$1" | sha256sum | cut -c1-16)"
}

cmd_start() {
    [[ $# -eq 3 ]] || die "usage: $0 start DIR PUBLIC-PORT ADMIN-PORT"
    local dir public="$2" admin="$3"
    dir="$(abs_dir "$1")"
    valid_port "$public" || die "PUBLIC-PORT must be a number 1-65535, got '$public'"
    valid_port "$admin" || die "ADMIN-PORT must be a number 1-65535, got '$admin'"
    require_bin
    need curl "to wait for hydra"
    local v
    for v in HYDRA_LOGIN_URL HYDRA_CONSENT_URL HYDRA_LOGOUT_URL; do
        [[ -n "${!v:-}" ]] || die "$v is not set (the login, consent and logout pages hydra sends browsers to)"
    done
    [[ -z "$(running_pid "$dir/hydra.pid" hydra)" ]] || die "a hydra for $dir already runs; run: $0 stop $dir"
    port_open "$public" && die "port $public on 127.0.0.1 is already in use"
    port_open "$admin" && die "port $admin on 127.0.0.1 is already in use"

    local admin_url db
    admin_url="$(postgres_admin_url "${HYDRA_POSTGRES_URL:-}")"
    db="$(db_name "$dir")"
    fresh_db "$admin_url" "$db"
    echo "$db" >"$dir/postgres.db"
    export DSN
    DSN="$(with_db "$admin_url" "$db")?sslmode=disable"
    "$HYDRA_BIN" migrate sql up -e --yes >>"$dir/hydra.log" 2>&1 \
        || { tail -n 20 "$dir/hydra.log" >&2; die "hydra migrate failed (see $dir/hydra.log)"; }

    local t0 pid secret
    t0="$(date +%s%N)"
    secret="$(head -c 24 /dev/urandom | od -An -tx1 | tr -d ' \n')"
    # A fresh system secret per start: every start is a new provider, nothing outlives it.
    pid="$(
        export URLS_SELF_ISSUER="${HYDRA_ISSUER_URL:-http://127.0.0.1:$public/}" \
            URLS_LOGIN="$HYDRA_LOGIN_URL" URLS_CONSENT="$HYDRA_CONSENT_URL" URLS_LOGOUT="$HYDRA_LOGOUT_URL" \
            SECRETS_SYSTEM="$secret" \
            SERVE_PUBLIC_HOST=127.0.0.1 SERVE_PUBLIC_PORT="$public" \
            SERVE_ADMIN_HOST=127.0.0.1 SERVE_ADMIN_PORT="$admin" \
            STRATEGIES_ACCESS_TOKEN=opaque LOG_LEVEL=info
        spawn "$dir/hydra.log" "$dir/hydra.pid" "$HYDRA_BIN" serve all --dev
    )"
    wait_ready hydra "$pid" "http://127.0.0.1:$admin/health/ready" "$dir/hydra.log" "$START_TIMEOUT" cmd_stop "$dir"
    wait_ready hydra "$pid" "http://127.0.0.1:$public/health/ready" "$dir/hydra.log" "$START_TIMEOUT" cmd_stop "$dir"
    note "hydra $HYDRA_VERSION (database $db) ready after $((($(date +%s%N) - t0) / 1000000))ms; state in $dir"
    echo "export BREAKGLASS_TEST_HYDRA_PUBLIC_URL=http://127.0.0.1:$public"
    echo "export BREAKGLASS_TEST_HYDRA_ADMIN_URL=http://127.0.0.1:$admin"
}

cmd_stop() {
    [[ $# -eq 1 ]] || die "usage: $0 stop DIR"
    local dir="$1" pid db
    [[ -d "$dir" ]] || { note "no directory $dir; nothing to stop"; return 0; }
    pid="$(running_pid "$dir/hydra.pid" hydra)"
    rm -f "$dir/hydra.pid"
    [[ -n "$pid" ]] && terminate "$pid" hydra 10
    if [[ -s "$dir/postgres.db" ]]; then
        db="$(<"$dir/postgres.db")"
        [[ "$db" =~ ^hydra_[0-9a-f]{16}$ ]] || die "$dir/postgres.db names '$db', not a database this script created"
        drop_db "$(postgres_admin_url "${HYDRA_POSTGRES_URL:-}")" "$db"
        rm -f "$dir/postgres.db"
    fi
}

cmd_path() { [[ -x "$HYDRA_BIN" ]] || exit 1; echo "$HYDRA_BIN"; }

dispatch "$@"
