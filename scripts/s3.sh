#!/usr/bin/env bash
# Local S3-protocol server for tests: Versity S3 Gateway (versitygw, Apache-2.0),
# posix backend with bucket versioning and Object Lock (enforced), on 127.0.0.1 only.
# See docs/s3-server.md for why this server, what it enforces and its caveats.
#
# Usage:
#   scripts/s3.sh install                      build the pinned versitygw into $BREAKGLASS_CACHE/bin (idempotent)
#   scripts/s3.sh start DIR PORT               start it in the background, data under DIR; prints `export ...` lines
#   scripts/s3.sh stop DIR                     stop the server started with DIR
#   scripts/s3.sh status DIR                   exit 0 when running (prints pid and endpoint), 1 when not
#   scripts/s3.sh env DIR                      print the `export ...` lines again for a running server
#   scripts/s3.sh create-bucket DIR [BUCKET]   create BUCKET (default $TOWER_BREAKGLASS_MINIO_BUCKET or
#                                              tower-breakglass-v2) as an operator does, with the server's
#                                              `recordings init-bucket`: Object Lock + versioning and a
#                                              default retention of GOVERNANCE 365 days (idempotent)
#   scripts/s3.sh add-user DIR ACCESS SECRET [BUCKET]
#                                              create a role-"user" account and give it the bucket policy
#                                              `recordings init-bucket --server-access-key ACCESS` prints:
#                                              put and get recordings, read the bucket's two settings
#
# Typical use in a test script:
#   scripts/s3.sh install
#   eval "$(scripts/s3.sh start "$tmp/s3" 9000)"
#   scripts/s3.sh create-bucket "$tmp/s3"
#   ...; scripts/s3.sh stop "$tmp/s3"
#
# Environment:
#   BREAKGLASS_CACHE                       cache root (default /var/cache/breakglass); binary in $BREAKGLASS_CACHE/bin
#   BREAKGLASS_SERVER_BIN                  the breakglass-server binary for create-bucket and add-user (default:
#                                          the one `cargo test` built for the server's tests, else
#                                          `cargo build -p breakglass-server`)
#   TOWER_BREAKGLASS_MINIO_ACCESS_KEY      root access key (default breakglass-test)
#   TOWER_BREAKGLASS_MINIO_SECRET_KEY      root secret key (default breakglass-test-secret)
#   TOWER_BREAKGLASS_MINIO_REGION          region the server reports and signs with (default us-east-1)
#   S3_START_TIMEOUT                       seconds to wait for the server to answer (default 30)
set -euo pipefail
# shellcheck source=scripts/lib.sh
source "$(dirname "${BASH_SOURCE[0]}")/lib.sh"

VERSITYGW_MODULE="github.com/versity/versitygw"
VERSITYGW_VERSION="v1.8.0"
PINNED_BIN="$BIN_DIR/versitygw-$VERSITYGW_VERSION"

ACCESS_KEY="${TOWER_BREAKGLASS_MINIO_ACCESS_KEY:-breakglass-test}"
SECRET_KEY="${TOWER_BREAKGLASS_MINIO_SECRET_KEY:-breakglass-test-secret}"
REGION="${TOWER_BREAKGLASS_MINIO_REGION:-us-east-1}"
DEFAULT_BUCKET="${TOWER_BREAKGLASS_MINIO_BUCKET:-tower-breakglass-v2}"
START_TIMEOUT="${S3_START_TIMEOUT:-30}"

# ---------------------------------------------------------------- install

cmd_install() {
    args 0 install "$@"
    if [[ -x "$PINNED_BIN" ]]; then
        note "versitygw $VERSITYGW_VERSION already installed: $PINNED_BIN"
        return 0
    fi
    # Only cmd/versitygw: `cmd/...` also contains RDMA/CUDA tools that need vendor libraries.
    # -X main.Version: `versitygw --version` then names the pinned release instead of "git".
    # It needs Go >= 1.25.
    go_pin versitygw "$VERSITYGW_VERSION" "$VERSITYGW_MODULE/cmd/versitygw@$VERSITYGW_VERSION" \
        -ldflags="-s -w -X=main.Version=$VERSITYGW_VERSION"
}

require_bin() {
    [[ -x "$PINNED_BIN" ]] || die "versitygw $VERSITYGW_VERSION is not installed at $PINNED_BIN; run: $0 install"
}

# ---------------------------------------------------------------- helpers

# The pid of the server started with DIR, when it runs; empty otherwise.
server_pid() {
    running_pid "$1/s3.pid" versitygw
}

# The port of the running server started with DIR; dies when there is none.
server_port() {
    [[ -n "$(server_pid "$1")" ]] || die "no running server for $1 (run $0 start first)"
    cat "$1/s3.port"
}

# The settings a client of the server on port $1 uses, for BUCKET $2.
s3_vars() {
    cat <<VARS
TOWER_BREAKGLASS_MINIO_ENDPOINT=http://127.0.0.1:$1
TOWER_BREAKGLASS_MINIO_ACCESS_KEY=$ACCESS_KEY
TOWER_BREAKGLASS_MINIO_SECRET_KEY=$SECRET_KEY
TOWER_BREAKGLASS_MINIO_REGION=$REGION
TOWER_BREAKGLASS_MINIO_BUCKET=${2:-$DEFAULT_BUCKET}
VARS
}

print_env() {
    s3_vars "$1" | sed 's/^/export /'
}

# The breakglass-server binary: BREAKGLASS_SERVER_BIN (scripts/test.sh sets it), else the one
# cargo built for the server's integration tests (cargo sets CARGO_BIN_EXE_<name> while they
# run, so the recording tests use the server they were built with), else built here.
server_bin() {
    local bin="${BREAKGLASS_SERVER_BIN:-}"
    [[ -n "$bin" ]] || bin="$(printenv CARGO_BIN_EXE_breakglass-server || true)"
    if [[ -z "$bin" ]]; then
        need cargo "to build breakglass-server (or set BREAKGLASS_SERVER_BIN)"
        note "building breakglass-server for its recordings init-bucket command ..."
        (cd "$ROOT" && cargo build -q -p breakglass-server >&2) \
            || die "cargo build -p breakglass-server failed (or set BREAKGLASS_SERVER_BIN)"
        bin="${CARGO_TARGET_DIR:-$ROOT/target}/debug/breakglass-server"
    fi
    [[ -x "$bin" ]] || die "$bin is not an executable breakglass-server (set BREAKGLASS_SERVER_BIN)"
    echo "$bin"
}

# init_bucket DIR BUCKET [ARGS...]: `breakglass-server recordings init-bucket ARGS` against the
# server of DIR with the root key; prints what it printed.
init_bucket() {
    local port bin out
    port="$(server_port "$1")"
    bin="$(server_bin)"
    local vars
    mapfile -t vars < <(s3_vars "$port" "$2")
    shift 2
    out="$(env "${vars[@]}" "$bin" recordings init-bucket "$@")" \
        || die "breakglass-server recordings init-bucket failed: $out"
    echo "$out"
}

# put_bucket_policy DIR BUCKET POLICY: the one setting init-bucket only prints, signed by curl.
put_bucket_policy() {
    local port sha md5 resp code
    port="$(server_port "$1")"
    need curl "to set the bucket policy"
    need openssl "to set the bucket policy (Content-MD5)"
    sha="$(printf '%s' "$3" | sha256sum | cut -d' ' -f1)"
    md5="$(printf '%s' "$3" | openssl dgst -md5 -binary | base64)"
    # versitygw wants the payload hash explicitly (curl's SigV4 does not send it).
    resp="$(curl -sS -m 30 -o - -w '\n%{http_code}' -X PUT \
        --aws-sigv4 "aws:amz:$REGION:s3" --user "$ACCESS_KEY:$SECRET_KEY" \
        -H "x-amz-content-sha256: $sha" -H "Content-MD5: $md5" -H 'Content-Type: application/json' \
        --data-binary "$3" "http://127.0.0.1:$port/$2?policy=")"
    code="${resp##*$'\n'}"
    [[ "$code" == 200 || "$code" == 204 ]] || die "put bucket policy on $2 failed: HTTP $code: ${resp%$'\n'*}"
}

# ---------------------------------------------------------------- start / stop

cmd_start() {
    [[ $# -eq 2 ]] || die "usage: $0 start DIR PORT"
    local dir port
    dir="$(abs_dir "$1")"
    port="$2"
    valid_port "$port" || die "PORT must be a number 1-65535, got '$port'"
    require_bin
    need curl "to wait for the server"

    local pid
    pid="$(server_pid "$dir")"
    if [[ -n "$pid" ]]; then
        local old_port
        old_port="$(cat "$dir/s3.port" 2>/dev/null || true)"
        [[ "$old_port" == "$port" ]] || die "a server for $dir is already running (pid $pid) on port ${old_port:-?}; run: $0 stop $dir"
        note "already running (pid $pid) on 127.0.0.1:$port"
        print_env "$port"
        return 0
    fi
    rm -f "$dir/s3.pid"
    port_open "$port" && die "port $port on 127.0.0.1 is already in use by another process"

    mkdir -p "$dir/data" "$dir/versions" "$dir/iam"
    [[ ${#SECRET_KEY} -ge 8 ]] || note "warning: a secret key shorter than 8 characters may be refused by S3 clients"

    # Credentials go through the environment, not argv (not visible in ps).
    # Flags given explicitly override any VGW_* variables the caller may have set.
    pid="$(ROOT_ACCESS_KEY_ID="$ACCESS_KEY" ROOT_SECRET_ACCESS_KEY="$SECRET_KEY" \
        spawn "$dir/s3.log" "$dir/s3.pid" "$PINNED_BIN" \
        --port "127.0.0.1:$port" \
        --region "$REGION" \
        --health /health \
        --iam-dir "$dir/iam" \
        --quiet \
        posix \
        --versioning-dir "$dir/versions" \
        "$dir/data")"
    echo "$port" >"$dir/s3.port"
    wait_ready versitygw "$pid" "http://127.0.0.1:$port/health" "$dir/s3.log" "$START_TIMEOUT" \
        stop_server "$dir"
    note "versitygw $VERSITYGW_VERSION running (pid $pid) on http://127.0.0.1:$port, data in $dir"
    print_env "$port"
}

# Stops the server of DIR; 1 when none was running.
stop_server() {
    local pid
    pid="$(server_pid "$1")"
    rm -f "$1/s3.pid"
    [[ -n "$pid" ]] || return 1
    terminate "$pid" versitygw 10
}

cmd_stop() {
    [[ $# -eq 1 ]] || die "usage: $0 stop DIR"
    [[ -d "$1" ]] || { note "no directory $1; nothing to stop"; return 0; }
    stop_server "$1" || note "no running server for $1"
}

cmd_status() {
    [[ $# -eq 1 ]] || die "usage: $0 status DIR"
    local pid
    pid="$(server_pid "$1")"
    if [[ -n "$pid" ]]; then
        echo "running pid=$pid endpoint=http://127.0.0.1:$(cat "$1/s3.port" 2>/dev/null || echo '?')"
    else
        echo "not running"
        return 1
    fi
}

cmd_env() {
    [[ $# -eq 1 ]] || die "usage: $0 env DIR"
    print_env "$(server_port "$1")"
}

# ---------------------------------------------------------------- bucket / user setup

cmd_create_bucket() {
    [[ $# -ge 1 && $# -le 2 ]] || die "usage: $0 create-bucket DIR [BUCKET]"
    init_bucket "$1" "${2:-$DEFAULT_BUCKET}" >&2
}

cmd_add_user() {
    [[ $# -ge 3 && $# -le 4 ]] || die "usage: $0 add-user DIR ACCESS SECRET [BUCKET]"
    local dir="$1" access="$2" secret="$3" bucket="${4:-$DEFAULT_BUCKET}" port out policy
    require_bin
    port="$(server_port "$dir")"
    if ! out="$("$PINNED_BIN" admin --access "$ACCESS_KEY" --secret "$SECRET_KEY" --region "$REGION" \
        --endpoint-url "http://127.0.0.1:$port" create-user --access "$access" --secret "$secret" --role user 2>&1)"; then
        [[ "$out" == *"already exists"* || "$out" == *"UserAlreadyExists"* ]] || die "create user $access failed: $out"
        note "user $access already exists"
    fi
    # The bucket policy an operator copies from init-bucket's output: everything after its
    # "The same as a bucket policy for principal ..." line.
    out="$(init_bucket "$dir" "$bucket" --server-access-key "$access")"
    policy="$(printf '%s\n' "$out" | sed -n '/^The same as a bucket policy for principal /,$p' | tail -n +2)"
    [[ "$policy" == "{"* ]] || die "recordings init-bucket --server-access-key printed no bucket policy: $out"
    put_bucket_policy "$dir" "$bucket" "$policy"
    note "user $access (role user) may put/get recordings in $bucket and read its versioning and Object Lock settings; delete, list and other bucket settings are denied"
}

# ---------------------------------------------------------------- main

dispatch "$@"
