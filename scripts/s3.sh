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
#                                              tower-breakglass-v2) with Object Lock + versioning and a
#                                              default retention of GOVERNANCE 365 days (idempotent)
#   scripts/s3.sh add-user DIR ACCESS SECRET [BUCKET]
#                                              create a role-"user" account that may only put and get
#                                              objects (incl. versions and retention) in BUCKET
#
# Typical use in a test script:
#   scripts/s3.sh install
#   eval "$(scripts/s3.sh start "$tmp/s3" 9000)"
#   scripts/s3.sh create-bucket "$tmp/s3"
#   ...; scripts/s3.sh stop "$tmp/s3"
#
# Environment:
#   BREAKGLASS_CACHE                       cache root (default /var/cache/breakglass); binary in $BREAKGLASS_CACHE/bin
#   TOWER_BREAKGLASS_MINIO_ACCESS_KEY      root access key (default breakglass-test)
#   TOWER_BREAKGLASS_MINIO_SECRET_KEY      root secret key (default breakglass-test-secret)
#   TOWER_BREAKGLASS_MINIO_REGION          region the server reports and signs with (default us-east-1)
#   S3_START_TIMEOUT                       seconds to wait for the server to answer (default 30)
set -euo pipefail

VERSITYGW_MODULE="github.com/versity/versitygw"
VERSITYGW_VERSION="v1.8.0"

CACHE="${BREAKGLASS_CACHE:-/var/cache/breakglass}"
BIN_DIR="$CACHE/bin"
PINNED_BIN="$BIN_DIR/versitygw-$VERSITYGW_VERSION"

ACCESS_KEY="${TOWER_BREAKGLASS_MINIO_ACCESS_KEY:-breakglass-test}"
SECRET_KEY="${TOWER_BREAKGLASS_MINIO_SECRET_KEY:-breakglass-test-secret}"
REGION="${TOWER_BREAKGLASS_MINIO_REGION:-us-east-1}"
DEFAULT_BUCKET="${TOWER_BREAKGLASS_MINIO_BUCKET:-tower-breakglass-v2}"
START_TIMEOUT="${S3_START_TIMEOUT:-30}"

die() { echo "s3.sh: error: $*" >&2; exit 1; }
note() { echo "s3.sh: $*" >&2; }

usage() {
    sed -n '2,/^set -euo/p' "$0" | sed -e '$d' -e 's/^# \{0,1\}//' >&2
    exit 2
}

# ---------------------------------------------------------------- install

cmd_install() {
    if [[ -x "$PINNED_BIN" ]]; then
        note "versitygw $VERSITYGW_VERSION already installed: $PINNED_BIN"
        return 0
    fi
    command -v go >/dev/null 2>&1 || die "'go' is not on PATH; it is needed to build versitygw (go install $VERSITYGW_MODULE/cmd/versitygw@$VERSITYGW_VERSION)"
    mkdir -p "$BIN_DIR" || die "cannot create $BIN_DIR (set BREAKGLASS_CACHE to a writable directory)"
    # Build into a private GOBIN first, then rename: an interrupted build never leaves
    # a half-written binary under the pinned name, and two concurrent installs don't clash.
    local stage
    stage="$(mktemp -d "$BIN_DIR/.install.XXXXXX")"
    note "building $VERSITYGW_MODULE/cmd/versitygw@$VERSITYGW_VERSION (a cold build takes a few minutes) ..."
    local start=$SECONDS
    # Only cmd/versitygw: `cmd/...` also contains RDMA/CUDA tools that need vendor libraries.
    # CGO off: a static binary, no C toolchain needed. GOTOOLCHAIN defaults to the local Go.
    # -X main.Version: `versitygw --version` then names the pinned release instead of "git".
    if ! GOBIN="$stage" CGO_ENABLED=0 GOTOOLCHAIN="${GOTOOLCHAIN:-local}" \
        go install -trimpath -ldflags="-s -w -X=main.Version=$VERSITYGW_VERSION" \
        "$VERSITYGW_MODULE/cmd/versitygw@$VERSITYGW_VERSION" >&2; then
        rm -rf "$stage"
        die "go install of versitygw $VERSITYGW_VERSION failed (needs the Go module proxy and Go >= 1.25)"
    fi
    [[ -x "$stage/versitygw" ]] || { rm -rf "$stage"; die "go install succeeded but produced no versitygw binary"; }
    mv -f "$stage/versitygw" "$PINNED_BIN"
    rm -rf "$stage"
    ln -sfn "versitygw-$VERSITYGW_VERSION" "$BIN_DIR/versitygw"
    note "installed $PINNED_BIN in $((SECONDS - start))s"
}

require_bin() {
    [[ -x "$PINNED_BIN" ]] || die "versitygw $VERSITYGW_VERSION is not installed at $PINNED_BIN; run: $0 install"
}

# ---------------------------------------------------------------- helpers

# 0 when something accepts TCP connections on 127.0.0.1:$1.
port_open() {
    (exec 3<>"/dev/tcp/127.0.0.1/$1") >/dev/null 2>&1
}

# Pid from DIR/s3.pid when that process is alive and is a versitygw; empty otherwise.
running_pid() {
    local dir="$1" pid
    [[ -f "$dir/s3.pid" ]] || return 0
    pid="$(<"$dir/s3.pid")"
    [[ "$pid" =~ ^[0-9]+$ ]] || return 0
    kill -0 "$pid" 2>/dev/null || return 0
    # Guard against a recycled pid: only ever signal our own server.
    if [[ -r "/proc/$pid/cmdline" ]] && ! tr '\0' ' ' <"/proc/$pid/cmdline" | grep -q versitygw; then
        return 0
    fi
    echo "$pid"
}

healthy() {
    local port="$1" code
    if command -v curl >/dev/null 2>&1; then
        code="$(curl -s -o /dev/null -m 2 -w '%{http_code}' "http://127.0.0.1:$port/health" 2>/dev/null || true)"
        [[ "$code" == 200 ]]
    else
        port_open "$port"
    fi
}

print_env() {
    local port="$1"
    cat <<EOF
export TOWER_BREAKGLASS_MINIO_ENDPOINT=http://127.0.0.1:$port
export TOWER_BREAKGLASS_MINIO_ACCESS_KEY=$ACCESS_KEY
export TOWER_BREAKGLASS_MINIO_SECRET_KEY=$SECRET_KEY
export TOWER_BREAKGLASS_MINIO_REGION=$REGION
export TOWER_BREAKGLASS_MINIO_BUCKET=$DEFAULT_BUCKET
EOF
}

abs_dir() {
    mkdir -p "$1" || die "cannot create directory $1"
    (cd "$1" && pwd)
}

# ---------------------------------------------------------------- start / stop

cmd_start() {
    [[ $# -eq 2 ]] || die "usage: $0 start DIR PORT"
    local dir port
    dir="$(abs_dir "$1")"
    port="$2"
    if ! [[ "$port" =~ ^[1-9][0-9]{0,4}$ ]] || ((port > 65535)); then
        die "PORT must be a number 1-65535, got '$port'"
    fi
    require_bin

    local pid
    pid="$(running_pid "$dir")"
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
    ROOT_ACCESS_KEY_ID="$ACCESS_KEY" ROOT_SECRET_ACCESS_KEY="$SECRET_KEY" \
        setsid "$PINNED_BIN" \
        --port "127.0.0.1:$port" \
        --region "$REGION" \
        --health /health \
        --iam-dir "$dir/iam" \
        --quiet \
        posix \
        --versioning-dir "$dir/versions" \
        "$dir/data" \
        >>"$dir/s3.log" 2>&1 </dev/null &
    pid=$!
    echo "$pid" >"$dir/s3.pid"
    echo "$port" >"$dir/s3.port"

    local waited=0
    until healthy "$port"; do
        if ! kill -0 "$pid" 2>/dev/null; then
            rm -f "$dir/s3.pid"
            echo "----- last lines of $dir/s3.log -----" >&2
            tail -n 20 "$dir/s3.log" >&2 || true
            die "versitygw exited during start-up (see $dir/s3.log)"
        fi
        if ((waited >= START_TIMEOUT * 10)); then
            kill "$pid" 2>/dev/null || true
            rm -f "$dir/s3.pid"
            tail -n 20 "$dir/s3.log" >&2 || true
            die "versitygw did not answer on 127.0.0.1:$port within ${START_TIMEOUT}s (see $dir/s3.log)"
        fi
        sleep 0.1
        waited=$((waited + 1))
    done
    note "versitygw $VERSITYGW_VERSION running (pid $pid) on http://127.0.0.1:$port, data in $dir"
    print_env "$port"
}

cmd_stop() {
    [[ $# -eq 1 ]] || die "usage: $0 stop DIR"
    local dir="$1" pid
    [[ -d "$dir" ]] || { note "no directory $dir; nothing to stop"; return 0; }
    pid="$(running_pid "$dir")"
    if [[ -z "$pid" ]]; then
        rm -f "$dir/s3.pid"
        note "no running server for $dir"
        return 0
    fi
    kill -TERM "$pid" 2>/dev/null || true
    local i
    for ((i = 0; i < 100; i++)); do
        kill -0 "$pid" 2>/dev/null || break
        sleep 0.1
    done
    if kill -0 "$pid" 2>/dev/null; then
        note "pid $pid did not exit after SIGTERM; sending SIGKILL"
        kill -KILL "$pid" 2>/dev/null || true
    fi
    rm -f "$dir/s3.pid"
    note "stopped (pid $pid)"
}

cmd_status() {
    [[ $# -eq 1 ]] || die "usage: $0 status DIR"
    local pid
    pid="$(running_pid "$1")"
    if [[ -n "$pid" ]]; then
        echo "running pid=$pid endpoint=http://127.0.0.1:$(cat "$1/s3.port" 2>/dev/null || echo '?')"
    else
        echo "not running"
        return 1
    fi
}

cmd_env() {
    [[ $# -eq 1 ]] || die "usage: $0 env DIR"
    [[ -n "$(running_pid "$1")" ]] || die "no running server for $1"
    print_env "$(<"$1/s3.port")"
}

# ---------------------------------------------------------------- bucket / user setup (curl + SigV4)

# s3req DIR METHOD PATH [BODY [extra curl args...]] -> prints "HTTP_CODE\nBODY"
s3req() {
    local dir="$1" method="$2" path="$3" body="${4-}"
    shift 4 || shift $#
    command -v curl >/dev/null 2>&1 || die "curl is needed for this subcommand"
    local port sha
    port="$(cat "$dir/s3.port" 2>/dev/null)" || die "no server state in $dir (run $0 start first)"
    [[ -n "$(running_pid "$dir")" ]] || die "no running server for $dir"
    sha="$(printf '%s' "$body" | sha256sum | cut -d' ' -f1)"
    local args=(-sS -m 30 -o - -w '\n%{http_code}' -X "$method"
        --aws-sigv4 "aws:amz:$REGION:s3" --user "$ACCESS_KEY:$SECRET_KEY"
        -H "x-amz-content-sha256: $sha")
    if [[ -n "$body" ]]; then
        local md5
        md5="$(printf '%s' "$body" | openssl dgst -md5 -binary | base64)"
        args+=(-H "Content-MD5: $md5" -H 'Content-Type: application/xml' --data-binary "$body")
    fi
    curl "${args[@]}" "$@" "http://127.0.0.1:$port$path"
}

# expect DESCRIPTION OK_CODES... <<< "$(s3req ...)"
check_resp() {
    local what="$1" resp="$2"
    shift 2
    local code="${resp##*$'\n'}" text="${resp%$'\n'*}" ok
    for ok in "$@"; do
        [[ "$code" == "$ok" ]] && return 0
    done
    die "$what failed: HTTP $code: $text"
}

cmd_create_bucket() {
    [[ $# -ge 1 && $# -le 2 ]] || die "usage: $0 create-bucket DIR [BUCKET]"
    local dir="$1" bucket="${2:-$DEFAULT_BUCKET}" resp code
    resp="$(s3req "$dir" PUT "/$bucket" "" -H 'x-amz-bucket-object-lock-enabled: true')"
    code="${resp##*$'\n'}"
    if [[ "$code" == 409 ]]; then
        note "bucket $bucket already exists"
    else
        check_resp "create bucket $bucket" "$resp" 200
    fi
    resp="$(s3req "$dir" GET "/$bucket?versioning=" "")"
    check_resp "get versioning of $bucket" "$resp" 200
    if [[ "$resp" != *"<Status>Enabled</Status>"* ]]; then
        resp="$(s3req "$dir" PUT "/$bucket?versioning=" \
            '<VersioningConfiguration xmlns="http://s3.amazonaws.com/doc/2006-03-01/"><Status>Enabled</Status></VersioningConfiguration>')"
        check_resp "enable versioning on $bucket" "$resp" 200
    fi
    resp="$(s3req "$dir" PUT "/$bucket?object-lock=" \
        '<ObjectLockConfiguration xmlns="http://s3.amazonaws.com/doc/2006-03-01/"><ObjectLockEnabled>Enabled</ObjectLockEnabled><Rule><DefaultRetention><Mode>GOVERNANCE</Mode><Days>365</Days></DefaultRetention></Rule></ObjectLockConfiguration>')"
    check_resp "put object-lock configuration on $bucket" "$resp" 200
    note "bucket $bucket: versioning Enabled, Object Lock default retention GOVERNANCE 365 days"
}

cmd_add_user() {
    [[ $# -ge 3 && $# -le 4 ]] || die "usage: $0 add-user DIR ACCESS SECRET [BUCKET]"
    local dir="$1" access="$2" secret="$3" bucket="${4:-$DEFAULT_BUCKET}" port out
    require_bin
    [[ -n "$(running_pid "$dir")" ]] || die "no running server for $dir"
    port="$(<"$dir/s3.port")"
    if ! out="$("$PINNED_BIN" admin --access "$ACCESS_KEY" --secret "$SECRET_KEY" --region "$REGION" \
        --endpoint-url "http://127.0.0.1:$port" create-user --access "$access" --secret "$secret" --role user 2>&1)"; then
        [[ "$out" == *"already exists"* || "$out" == *"UserAlreadyExists"* ]] || die "create user $access failed: $out"
        note "user $access already exists"
    fi
    # Put and get only (the retention actions let it stamp/read per-version retention
    # on its own puts; shortening a GOVERNANCE retention still needs the bypass permission).
    local policy
    policy="$(printf '{"Version":"2012-10-17","Statement":[{"Effect":"Allow","Principal":{"AWS":["%s"]},"Action":["s3:PutObject","s3:PutObjectRetention","s3:GetObject","s3:GetObjectVersion","s3:GetObjectRetention"],"Resource":["arn:aws:s3:::%s/*"]}]}' "$access" "$bucket")"
    check_resp "put bucket policy on $bucket" "$(s3req "$dir" PUT "/$bucket?policy=" "$policy")" 200 204
    note "user $access (role user) may put/get objects in $bucket; delete, list and bucket settings are denied"
}

# ---------------------------------------------------------------- main

[[ $# -ge 1 ]] || usage
sub="$1"
shift
case "$sub" in
    install) [[ $# -eq 0 ]] || die "usage: $0 install"; cmd_install ;;
    start) cmd_start "$@" ;;
    stop) cmd_stop "$@" ;;
    status) cmd_status "$@" ;;
    env) cmd_env "$@" ;;
    create-bucket) cmd_create_bucket "$@" ;;
    add-user) cmd_add_user "$@" ;;
    -h | --help | help) usage ;;
    *) echo "s3.sh: unknown subcommand '$sub'" >&2; usage ;;
esac
