# shellcheck shell=bash
# The toolkit every script shares (the service scripts s3.sh, rekor.sh, hydra.sh,
# oauth2-proxy.sh, controlplane.sh, postgres.sh, asciinema.sh, helm.sh, hadolint.sh, and the
# drivers test.sh, test-env.sh, bench.sh, dev.sh, install-tools.sh, fuzz-api.sh, .ci/run):
# messages, timed steps, subcommand dispatch, the cache layout, pinned Go builds from the Go
# module proxy, pinned Python tools in virtualenvs, PostgreSQL databases, background servers
# with pid files, waiting for them, stopping them.
# Source it:
#   source "$(dirname "${BASH_SOURCE[0]}")/lib.sh"
# Messages name the sourcing script ($0); everything but a command's result goes to stderr,
# so `eval "$(scripts/X.sh start ...)"` stays safe.

# Sourced twice in one shell (test.sh, then test-env.sh), it keeps the first one's state.
[[ -n ${_BREAKGLASS_LIB:-} ]] && return 0
_BREAKGLASS_LIB=1

# The repository (for the scripts that source this file).
# shellcheck disable=SC2034
ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
CACHE="${BREAKGLASS_CACHE:-/var/cache/breakglass}"
# Pinned builds live here as NAME-VERSION, with a NAME symlink to the newest install.
BIN_DIR="$CACHE/bin"

die() { echo "$(basename "$0"): error: $*" >&2; exit 1; }
note() { echo "$(basename "$0"): $*" >&2; }

# ---------------------------------------------------------------- steps

# step NAME...: begins a step of a long script, closing the one before with its time, so every
# step's time is printed (CI's budget is read from these lines). step_done [NOTE] closes the
# current step now, with a note on what it did. steps_summary, at the end (or from an EXIT
# trap), closes the last step and lists them all with the total. Wall-clock time.
_STEP_T0=$(date +%s%N)
_STEP_NAME=""
_STEP_AT=0
_STEP_TIMES=()
# secs_since NANOS: the time since NANOS (from `date +%s%N`) as seconds with one decimal.
secs_since() {
    local ms=$((($(date +%s%N) - $1) / 1000000))
    printf '%d.%ds' $((ms / 1000)) $((ms % 1000 / 100))
}
step() {
    step_done
    _STEP_NAME="$*"
    _STEP_AT=$(date +%s%N)
    printf '\n==> %s (at %s)\n' "$*" "$(secs_since "$_STEP_T0")" >&2
}
step_done() {
    [[ -n $_STEP_NAME ]] || return 0
    local took
    took=$(secs_since "$_STEP_AT")
    _STEP_TIMES+=("$(printf '%8s  %s' "$took" "$_STEP_NAME")")
    printf '    done in %s%s\n' "$took" "${1:+: $1}" >&2
    _STEP_NAME=""
}
steps_summary() {
    step_done
    ((${#_STEP_TIMES[@]} > 0)) || return 0
    printf '\n==> %s: step times (total %s)\n' "$(basename "$0")" "$(secs_since "$_STEP_T0")" >&2
    printf '%s\n' "${_STEP_TIMES[@]}" >&2
}

# dispatch ARGS...: the service scripts' command line: runs cmd_SUB (dashes as underscores)
# with the remaining arguments. No subcommand, `help` or `-h` prints the usage; an unknown one
# goes to cmd_default with every argument where the script wraps a tool (helm.sh ARGS runs
# helm), else prints the usage.
dispatch() {
    (($# > 0)) || usage
    local sub="$1"
    case "$sub" in -h | --help | help) usage ;; esac
    if declare -F "cmd_${sub//-/_}" >/dev/null; then
        shift
        "cmd_${sub//-/_}" "$@"
    elif declare -F cmd_default >/dev/null; then
        cmd_default "$@"
    else
        note "unknown subcommand '$sub'"
        usage
    fi
}

# args N USAGE ARGS...: dies with "usage: $0 USAGE" unless exactly N arguments follow.
args() {
    local n="$1" use="$2"
    shift 2
    (($# == n)) || die "usage: $0 $use"
}

# The comment block at the top of the script (up to `set -euo`), as its usage; exits 2.
usage() {
    sed -n '2,/^set -euo/p' "$0" | sed -e '$d' -e 's/^# \{0,1\}//' >&2
    exit 2
}

# need CMD [WHY]: dies unless CMD is on PATH.
need() {
    command -v "$1" >/dev/null 2>&1 || die "'$1' is not on PATH${2:+; it is needed $2}"
}

# Takes the exclusive lock FILE on fd 9 until the script exits (or `flock -u 9`), so parallel
# callers (test binaries) build or install one at a time.
lock() {
    mkdir -p "$(dirname "$1")" || die "cannot create $(dirname "$1") (set BREAKGLASS_CACHE to a writable directory)"
    exec 9>"$1"
    flock 9
}

# ---------------------------------------------------------------- Python tools

# venv_install VENV SPEC CHECK...: a virtualenv VENV (made with $PYTHON, default python3)
# with the pip requirements SPEC (pinned, space-separated, e.g. `asciinema==2.4.0`), unless the command CHECK
# already succeeds. One installer at a time (tests run in parallel); CHECK after the install
# makes a re-run after an interrupted install finish the job.
venv_install() {
    local venv="$1" spec="$2" py="${PYTHON:-python3}"
    shift 2
    "$@" && return 0
    need "$py" "for the venv $venv"
    lock "$(dirname "$venv")/.$(basename "$venv").lock"
    "$@" && return 0
    note "installing $spec into $venv ..."
    "$py" -m venv "$venv" >&2 || die "cannot create a venv with $py (is python3-venv installed?)"
    local specs
    read -ra specs <<<"$spec"
    "$venv/bin/pip" install -q --disable-pip-version-check "${specs[@]}" >&2 \
        || die "pip install $spec failed (needs PyPI)"
    "$@" || die "$spec installed but does not run from $venv"
    note "installed $spec into $venv"
}

# ---------------------------------------------------------------- Go builds

# The Go toolchain: $GO, else `go` on PATH, else the official tarball's /usr/local/go.
go_bin() {
    if [[ -n "${GO:-}" ]]; then
        echo "$GO"
    elif command -v go >/dev/null 2>&1; then
        echo go
    elif [[ -x /usr/local/go/bin/go ]]; then
        echo /usr/local/go/bin/go
    else
        die "no Go toolchain found (put go on PATH or set GO=...)"
    fi
}

# go_env CMD...: CMD with CGO off (static binaries, no C toolchain) and GOTOOLCHAIN=local
# (never fetch another Go).
go_env() {
    env CGO_ENABLED=0 GOTOOLCHAIN="${GOTOOLCHAIN:-local}" "$@"
}

# go_install STAGE GO-INSTALL-ARGS...: `go install -trimpath ARGS` into the directory STAGE.
go_install() {
    local stage="$1"
    shift
    GOBIN="$stage" go_env "$(go_bin)" install -trimpath "$@" >&2
}

# module_dir MODULE@VERSION: downloads it through the Go module proxy into the module cache
# and prints its directory.
module_dir() {
    local json dir
    json="$(go_env "$(go_bin)" mod download -json "$1")" || die "go mod download $1 failed: $json"
    dir="$(printf '%s\n' "$json" | sed -n 's/^[[:space:]]*"Dir": "\(.*\)",\{0,1\}$/\1/p' | head -n1)"
    [[ -n "$dir" && -d "$dir" ]] || die "go mod download $1 reported no module directory: $json"
    echo "$dir"
}

# A fresh staging directory under BIN_DIR, removed when the script exits. Builds go there
# first and are then renamed into place: an interrupted build never leaves a half-written
# binary under a pinned name, and two concurrent installs don't clash.
STAGE=""
make_stage() {
    mkdir -p "$BIN_DIR" || die "cannot create $BIN_DIR (set BREAKGLASS_CACHE to a writable directory)"
    STAGE="$(mktemp -d "$BIN_DIR/.install-$1.XXXXXX")"
    # Module copies are read-only; make them removable first.
    # shellcheck disable=SC2064
    trap "chmod -R u+w '$STAGE' 2>/dev/null; rm -rf '$STAGE'" EXIT
}

# pin STAGE NAME VERSION: moves STAGE/NAME to BIN_DIR/NAME-VERSION and points BIN_DIR/NAME at it.
pin() {
    local stage="$1" name="$2" version="$3"
    [[ -x "$stage/$name" ]] || die "the build succeeded but produced no $name binary"
    mv -f "$stage/$name" "$BIN_DIR/$name-$version"
    ln -sfn "$name-$version" "$BIN_DIR/$name"
}

# go_pin NAME VERSION PACKAGE@VERSION [GO-INSTALL-FLAGS...]: builds NAME with
# `go install -trimpath FLAGS PACKAGE@VERSION` in a fresh stage and pins it as
# BIN_DIR/NAME-VERSION, saying how long it took.
go_pin() {
    local name="$1" version="$2" package="$3" start=$SECONDS
    shift 3
    go_bin >/dev/null
    make_stage "$name"
    note "building $package (a cold build takes minutes) ..."
    go_install "$STAGE" "$@" "$package" \
        || die "go install of $package failed (needs the Go module proxy and a Go new enough for its go.mod)"
    pin "$STAGE" "$name" "$version"
    note "installed $BIN_DIR/$name-$version in $((SECONDS - start))s"
}

# ---------------------------------------------------------------- PostgreSQL

# pg_tool NAME: the path of PostgreSQL client tool NAME (psql, ...).
pg_tool() {
    local tool="$1" d
    command -v "$tool" >/dev/null 2>&1 && { command -v "$tool"; return 0; }
    for d in /usr/lib/postgresql/*/bin; do
        [[ -x "$d/$tool" ]] && { echo "$d/$tool"; return 0; }
    done
    die "'$tool' (PostgreSQL client) not found; install the postgresql-client package"
}

# postgres_admin_url [URL]: the admin URL of the PostgreSQL server to keep a service's data in:
# URL when given, else BREAKGLASS_TEST_POSTGRES_URL, else the test cluster of
# scripts/postgres.sh (started here when it does not answer yet).
postgres_admin_url() {
    local url="${1:-${BREAKGLASS_TEST_POSTGRES_URL:-}}" out
    if [[ -n "$url" ]]; then
        echo "$url"
        return 0
    fi
    url="postgres://postgres@127.0.0.1:${BREAKGLASS_PG_PORT:-55432}/postgres"
    if "$(pg_tool psql)" "$url" -qAtc 'select 1' >/dev/null 2>&1; then
        echo "$url"
        return 0
    fi
    out="$("$ROOT/scripts/postgres.sh" start)" || die "scripts/postgres.sh start failed"
    out="$(printf '%s\n' "$out" | sed -n 's/^BREAKGLASS_TEST_POSTGRES_URL=//p' | tail -n1)"
    [[ -n "$out" ]] || die "scripts/postgres.sh start printed no BREAKGLASS_TEST_POSTGRES_URL"
    echo "$out"
}

# with_db URL DB: URL with its database name replaced by DB (query string kept).
with_db() {
    printf '%s\n' "$1" | sed -E "s#^(postgres(ql)?://[^/?]*)(/[^?]*)?#\\1/$2#"
}

# fresh_db ADMIN-URL DB: drops database DB when it exists and creates it empty.
fresh_db() {
    PGOPTIONS="-c client_min_messages=warning" "$(pg_tool psql)" "$1" -q -v ON_ERROR_STOP=1 \
        -c "drop database if exists $2 with (force)" -c "create database $2" >/dev/null \
        || die "cannot create database $2 at $1"
}

# drop_db ADMIN-URL DB: drops database DB when it exists.
drop_db() {
    PGOPTIONS="-c client_min_messages=warning" "$(pg_tool psql)" "$1" -q -v ON_ERROR_STOP=1 \
        -c "drop database if exists $2 with (force)" >/dev/null || die "cannot drop database $2 at $1"
}

# ---------------------------------------------------------------- ports and processes

# 0 when something accepts TCP connections on 127.0.0.1:$1.
port_open() {
    (exec 3<>"/dev/tcp/127.0.0.1/$1") >/dev/null 2>&1
}

valid_port() {
    [[ "$1" =~ ^[1-9][0-9]{0,4}$ ]] && (($1 <= 65535))
}

# A port on 127.0.0.1 nobody listens on, other than those in "$@". Taken from below the
# kernel's ephemeral range, so an outgoing connection cannot grab it before the server binds it.
free_port() {
    local p i q taken lo=32768 hi=10000
    read -r lo _ </proc/sys/net/ipv4/ip_local_port_range 2>/dev/null || true
    ((lo > hi + 1000)) || die "the ephemeral port range starts at $lo; no room for internal ports"
    for ((i = 0; i < 200; i++)); do
        p=$((hi + RANDOM % (lo - hi)))
        taken=0
        for q in "$@"; do [[ "$p" == "$q" ]] && taken=1; done
        ((taken)) && continue
        port_open "$p" || { echo "$p"; return 0; }
    done
    die "found no free port on 127.0.0.1"
}

# The absolute path of directory $1, created if missing.
abs_dir() {
    mkdir -p "$1" || die "cannot create directory $1"
    (cd "$1" && pwd)
}

# 0 when process $1 exists and is not a zombie (a killed server whose parent, after setsid
# usually init, has not reaped it yet still answers kill -0).
alive() {
    kill -0 "$1" 2>/dev/null || return 1
    local state
    state="$(sed -n 's/^State:[[:space:]]*\([A-Z]\).*/\1/p' "/proc/$1/status" 2>/dev/null || true)"
    [[ "$state" != Z ]]
}

# running_pid PIDFILE PATTERN: the pid in PIDFILE when that process is alive and its command
# line contains PATTERN (a recycled pid is never signalled); empty otherwise.
running_pid() {
    local file="$1" pattern="$2" pid
    [[ -f "$file" ]] || return 0
    pid="$(<"$file")"
    [[ "$pid" =~ ^[0-9]+$ ]] || return 0
    alive "$pid" || return 0
    if [[ -r "/proc/$pid/cmdline" ]] && ! tr '\0' ' ' <"/proc/$pid/cmdline" | grep -q -- "$pattern"; then
        return 0
    fi
    echo "$pid"
}

# spawn LOG PIDFILE BIN ARGS...: starts BIN in its own session (so the caller's terminal and
# process group do not reach it), appending to LOG; writes and prints its pid.
spawn() {
    local log="$1" pidfile="$2" bin="$3" pid
    shift 3
    echo "----- $(date -u +%Y-%m-%dT%H:%M:%SZ) start" >>"$log"
    setsid "$bin" "$@" >>"$log" 2>&1 </dev/null &
    pid=$!
    echo "$pid" >"$pidfile"
    echo "$pid"
}

# The HTTP status URL answers with (000 when it does not answer).
http_code() {
    curl -s -o /dev/null -m 3 -w '%{http_code}' "$1" 2>/dev/null || true
}

# wait_ready NAME PID URL LOG SECONDS [CLEANUP...]: polls URL until it answers 200 while PID
# lives. When PID exits, keeps answering something else for 10 s (broken, e.g. a wrong
# setting) or SECONDS pass, prints the end of LOG, runs CLEANUP and dies.
wait_ready() {
    local name="$1" pid="$2" url="$3" log="$4" seconds="$5" waited=0 wrong=0 code why=""
    shift 5
    while :; do
        code="$(http_code "$url")"
        [[ "$code" == 200 ]] && return 0
        if [[ "$code" =~ ^[1-9] ]]; then wrong=$((wrong + 1)); else wrong=0; fi
        if ! alive "$pid"; then
            why="$name exited during start-up"
        elif ((wrong >= 50)); then
            why="$name answers HTTP $code instead of 200 on $url"
        elif ((waited >= seconds * 5)); then
            why="$name did not answer 200 on $url within ${seconds}s"
        fi
        if [[ -n "$why" ]]; then
            echo "----- last lines of $log -----" >&2
            tail -n 15 "$log" | cut -c1-400 >&2 || true
            (($# == 0)) || "$@" || true
            die "$why (see $log)"
        fi
        sleep 0.2
        waited=$((waited + 1))
    done
}

# terminate PID NAME SECONDS [SETTLED...]: SIGTERM, then SIGKILL when PID still runs after
# SECONDS. SETTLED, a command, tells when the process has finished everything worth waiting
# for (e.g. its listener closed): half a second later it is killed without complaint.
terminate() {
    local pid="$1" name="$2" seconds="$3" i settled=-1
    shift 3
    kill -TERM "$pid" 2>/dev/null || true
    for ((i = 0; i < seconds * 10; i++)); do
        alive "$pid" || break
        if (($# > 0)) && ((settled < 0)) && "$@"; then settled=$i; fi
        ((settled >= 0 && i - settled >= 5)) && break
        sleep 0.1
    done
    if alive "$pid"; then
        ((settled >= 0)) || note "$name (pid $pid) did not exit after SIGTERM; sending SIGKILL"
        kill -KILL "$pid" 2>/dev/null || true
        for ((i = 0; i < 50; i++)); do alive "$pid" || break; sleep 0.1; done
    fi
    note "stopped $name (pid $pid)"
}
