#!/usr/bin/env bash
# Local Rekor v1 transparency log for tests: rekor-server (sigstore/rekor) on top of a
# Trillian log server + log signer (google/trillian) storing the tree in PostgreSQL.
# Everything listens on 127.0.0.1 only. See docs/rekor.md for versions and caveats.
#
# Usage:
#   scripts/rekor.sh install            build the pinned rekor-server, trillian_log_server,
#                                       trillian_log_signer and createtree into $BREAKGLASS_CACHE/bin
#                                       (idempotent)
#   scripts/rekor.sh start DIR PORT     start the three servers in the background (logs, pids,
#                                       tree id and signing key under DIR; the log itself in a
#                                       PostgreSQL database named after DIR); waits until
#                                       GET /api/v1/log answers 200; prints `export ...` lines
#   scripts/rekor.sh stop DIR           stop the servers started with DIR (the log is kept)
#   scripts/rekor.sh status DIR         exit 0 when all three run (prints pids and URL), 1 when not
#   scripts/rekor.sh env DIR            print the `export ...` lines again for a running log
#   scripts/rekor.sh destroy DIR        stop, drop the log's PostgreSQL database and remove the
#                                       state files from DIR (the next start begins a new log)
#
# State: the log lives in DIR plus its PostgreSQL database (rekor_<hash of DIR's path>).
# `start` with a DIR that has no tree yet (re)creates that database from scratch; `start` with
# the same DIR again serves the same log (same tree, signing key and entries). `stop` keeps both;
# `destroy` (or removing DIR, which leaves the database behind until that path is reused)
# starts over.
#
# Typical use in a test script:
#   scripts/rekor.sh install
#   eval "$(scripts/rekor.sh start "$tmp/rekor" 3000)"
#   ...; scripts/rekor.sh stop "$tmp/rekor"
#
# Environment:
#   BREAKGLASS_CACHE          cache root (default /var/cache/breakglass); binaries in $BREAKGLASS_CACHE/bin
#   REKOR_POSTGRES_URL        admin URL of the PostgreSQL server to keep the log in (a superuser or a
#                             role that may create databases). Default: BREAKGLASS_TEST_POSTGRES_URL,
#                             else the test cluster of scripts/postgres.sh on 127.0.0.1:55432
#                             (started with scripts/postgres.sh start when it does not answer)
#   REKOR_START_TIMEOUT       seconds to wait for each server to answer (default 60)
set -euo pipefail
# shellcheck source=scripts/lib.sh
source "$(dirname "${BASH_SOURCE[0]}")/lib.sh"

REKOR_MODULE="github.com/sigstore/rekor"
REKOR_VERSION="v1.5.4"          # v1.5.5+ need a newer Go than 1.26
TRILLIAN_MODULE="github.com/google/trillian"
TRILLIAN_VERSION="v1.7.3"       # the Trillian that rekor v1.5.4 itself requires
# Only the PostgreSQL storage/quota providers and the etcd election code (unused: the signer
# runs with --force_master): leaves out MySQL, CockroachDB, Cloud Spanner and Kubernetes,
# which roughly halves build time and binary size.
TRILLIAN_TAGS="postgresql,etcd"

SHARE_DIR="$CACHE/share/trillian-$TRILLIAN_VERSION"
REKOR_BIN="$BIN_DIR/rekor-server-$REKOR_VERSION"
TLOG_SERVER_BIN="$BIN_DIR/trillian_log_server-$TRILLIAN_VERSION"
TLOG_SIGNER_BIN="$BIN_DIR/trillian_log_signer-$TRILLIAN_VERSION"
CREATETREE_BIN="$BIN_DIR/createtree-$TRILLIAN_VERSION"
SCHEMA="$SHARE_DIR/storage.sql"

START_TIMEOUT="${REKOR_START_TIMEOUT:-60}"
# Name the log uses in its checkpoints ("<origin> - <tree id>"); fixed so restarts agree.
CHECKPOINT_HOSTNAME="breakglass-test-rekor"

# ---------------------------------------------------------------- install

# build_trillian NAME: go install one Trillian command into STAGE.
build_trillian() {
    local name="$1" start=$SECONDS
    note "building $TRILLIAN_MODULE/cmd/$name@$TRILLIAN_VERSION (tags $TRILLIAN_TAGS) ..."
    go_install "$STAGE" -tags "$TRILLIAN_TAGS" -ldflags="-s -w" "$TRILLIAN_MODULE/cmd/$name@$TRILLIAN_VERSION" \
        || die "go install of $name $TRILLIAN_VERSION failed (needs the Go module proxy and Go >= 1.25)"
    note "built $name in $((SECONDS - start))s"
}

# rekor-server is built from a copy of the released module with one change: its Prometheus
# listener is hard-coded to ":2112" (all interfaces, no flag to move or disable it); the copy
# binds it to 127.0.0.1:2112 instead. Nothing else differs from the release.
build_rekor() {
    local start=$SECONDS src dir
    note "building $REKOR_MODULE/cmd/rekor-server@$REKOR_VERSION (a cold build takes several minutes) ..."
    dir="$(module_dir "$REKOR_MODULE@$REKOR_VERSION")"
    src="$STAGE/rekor-src"
    cp -R "$dir" "$src"
    chmod -R u+w "$src"
    local serve="$src/cmd/rekor-server/app/serve.go"
    [[ "$(grep -c 'Addr:[[:space:]]*":2112",' "$serve")" == 1 ]] \
        || die "cannot find the metrics listener (Addr: \":2112\") in $REKOR_MODULE@$REKOR_VERSION cmd/rekor-server/app/serve.go; the loopback patch needs updating"
    sed -i 's/Addr:\([[:space:]]*\)":2112",/Addr:\1"127.0.0.1:2112",/' "$serve"
    local v="sigs.k8s.io/release-utils/version"
    (cd "$src" && go_install "$STAGE" \
        -ldflags="-s -w -X $v.gitVersion=$REKOR_VERSION -X $v.gitTreeState=metrics-on-loopback" \
        ./cmd/rekor-server) \
        || die "go build of rekor-server $REKOR_VERSION failed (needs the Go module proxy and Go >= 1.25.11)"
    note "built rekor-server in $((SECONDS - start))s"
}

installed() {
    [[ -x "$REKOR_BIN" && -x "$TLOG_SERVER_BIN" && -x "$TLOG_SIGNER_BIN" && -x "$CREATETREE_BIN" && -s "$SCHEMA" ]]
}

cmd_install() {
    args 0 install "$@"
    if installed; then
        note "rekor-server $REKOR_VERSION and trillian $TRILLIAN_VERSION already installed in $BIN_DIR"
        return 0
    fi
    go_bin >/dev/null
    mkdir -p "$SHARE_DIR" || die "cannot create $SHARE_DIR (set BREAKGLASS_CACHE to a writable directory)"
    make_stage rekor
    local start=$SECONDS name

    if [[ ! -s "$SCHEMA" ]]; then
        local tdir
        tdir="$(module_dir "$TRILLIAN_MODULE@$TRILLIAN_VERSION")"
        [[ -s "$tdir/storage/postgresql/schema/storage.sql" ]] \
            || die "$TRILLIAN_MODULE@$TRILLIAN_VERSION has no storage/postgresql/schema/storage.sql"
        cp "$tdir/storage/postgresql/schema/storage.sql" "$STAGE/storage.sql"
        chmod 644 "$STAGE/storage.sql"
        mv -f "$STAGE/storage.sql" "$SCHEMA"
    fi
    for name in trillian_log_server trillian_log_signer createtree; do
        [[ -x "$BIN_DIR/$name-$TRILLIAN_VERSION" ]] && continue
        build_trillian "$name"
        pin "$STAGE" "$name" "$TRILLIAN_VERSION"
    done
    if [[ ! -x "$REKOR_BIN" ]]; then
        build_rekor
        pin "$STAGE" rekor-server "$REKOR_VERSION"
    fi
    note "installed rekor-server $REKOR_VERSION and trillian $TRILLIAN_VERSION in $BIN_DIR in $((SECONDS - start))s"
}

require_bin() {
    installed || die "rekor-server $REKOR_VERSION / trillian $TRILLIAN_VERSION are not (all) installed in $BIN_DIR; run: $0 install"
}

# ---------------------------------------------------------------- helpers

PROCS=(trillian_log_server trillian_log_signer rekor-server)

# server_pid DIR NAME: the pid of NAME started with DIR, when it runs; empty otherwise.
server_pid() {
    running_pid "$1/$2.pid" "$2"
}

print_env() {
    echo "export BREAKGLASS_TEST_REKOR_URL=http://127.0.0.1:$1"
}

# The admin URL of the PostgreSQL server (REKOR_POSTGRES_URL overrides the test cluster's).
rekor_admin_url() {
    postgres_admin_url "${REKOR_POSTGRES_URL:-}"
}

# start_one DIR NAME BIN ARGS...: starts NAME, logging to DIR/NAME.log; prints the pid.
start_one() {
    local dir="$1" name="$2"
    shift 2
    spawn "$dir/$name.log" "$dir/$name.pid" "$@"
}

# wait_for DIR NAME PID URL: waits until URL answers 200; stops everything when it never does.
wait_for() {
    wait_ready "$2" "$3" "$4" "$1/$2.log" "$START_TIMEOUT" stop_all "$1"
}

# rpc_port DIR NAME: the gRPC port NAME was started with (from DIR/ports), or empty.
rpc_port() {
    sed -n "s/^$2 rpc=\([0-9]*\).*/\1/p" "$1/ports" 2>/dev/null || true
}

# 0 when nothing listens on port $1 any more (also when no port is known).
closed() {
    [[ -n "${1:-}" ]] && ! port_open "$1"
}

stop_one() {
    local dir="$1" name="$2" pid rpc
    pid="$(server_pid "$dir" "$name")"
    rm -f "$dir/$name.pid"
    [[ -n "$pid" ]] || return 1
    rpc="$(rpc_port "$dir" "$name")"
    # The Trillian servers sleep 5-10 s after a clean shutdown ("give things time to tidy
    # up"). Once their gRPC listener is closed (GracefulStop done, no request in flight;
    # every write is a committed PostgreSQL transaction) the rest is that sleep: cut it short.
    terminate "$pid" "$name" 15 closed "$rpc"
}

# Stop in reverse start order: rekor first, then the signer, then the log server.
stop_all() {
    local dir="$1" i stopped=0
    for ((i = ${#PROCS[@]} - 1; i >= 0; i--)); do
        stop_one "$dir" "${PROCS[i]}" && stopped=1
    done
    ((stopped))
}

# ---------------------------------------------------------------- start / stop

cmd_start() {
    [[ $# -eq 2 ]] || die "usage: $0 start DIR PORT"
    local dir port
    dir="$(abs_dir "$1")"
    port="$2"
    valid_port "$port" || die "PORT must be a number 1-65535, got '$port'"
    require_bin
    need curl "to wait for the servers"
    need openssl "to create the log's signing key"

    local n alive=0 all=1
    for n in "${PROCS[@]}"; do
        if [[ -n "$(server_pid "$dir" "$n")" ]]; then alive=1; else all=0; fi
    done
    if ((all)); then
        local old_port
        old_port="$(cat "$dir/rekor.port" 2>/dev/null || true)"
        [[ "$old_port" == "$port" ]] || die "a Rekor log for $dir is already running on port ${old_port:-?}; run: $0 stop $dir"
        note "already running on 127.0.0.1:$port"
        print_env "$port"
        return 0
    fi
    if ((alive)); then
        note "some servers for $dir are running but not all; restarting them"
        stop_all "$dir" || true
    fi
    port_open "$port" && die "port $port on 127.0.0.1 is already in use by another process"

    # ---- PostgreSQL database for this DIR
    local admin_url db db_url psql
    psql="$(pg_tool psql)"
    admin_url="$(rekor_admin_url)"
    "$psql" "$admin_url" -qAtc 'select 1' >/dev/null 2>&1 \
        || die "cannot connect to PostgreSQL at $admin_url (start it with scripts/postgres.sh start, or set REKOR_POSTGRES_URL)"
    # One database per DIR, so several logs can share one PostgreSQL server.
    db="rekor_$(printf '%s' "$dir" | sha256sum | cut -c1-16)"
    db_url="$(with_db "$admin_url" "$db")"
    local exists
    exists="$("$psql" "$admin_url" -qAtc "select 1 from pg_database where datname = '$db'")"
    if [[ ! -s "$dir/tree_id" ]]; then
        note "new log: (re)creating PostgreSQL database $db and loading the Trillian $TRILLIAN_VERSION schema"
        fresh_db "$admin_url" "$db"
        "$psql" "$db_url" -q -v ON_ERROR_STOP=1 -f "$SCHEMA" >/dev/null \
            || die "loading $SCHEMA into database $db failed"
        echo "$db" >"$dir/postgres.db"
    elif [[ "$exists" != 1 ]]; then
        die "$dir holds Trillian tree $(<"$dir/tree_id") but its database $db is gone from $admin_url; run: $0 destroy $dir (or remove $dir) to start a new log"
    fi

    # ---- signing key for checkpoints (kept, so restarts keep the same public key)
    if [[ ! -s "$dir/signer.pem" ]]; then
        (umask 077 && openssl genpkey -algorithm EC -pkeyopt ec_paramgen_curve:P-256 -out "$dir/signer.pem" 2>/dev/null) \
            || die "openssl could not create an ECDSA P-256 key in $dir/signer.pem"
    fi

    # ---- ports for the internal Trillian endpoints (rekor-server reaches the log server over gRPC)
    local ts_rpc ts_http sg_rpc sg_http
    ts_rpc="$(free_port "$port")"
    ts_http="$(free_port "$port" "$ts_rpc")"
    sg_rpc="$(free_port "$port" "$ts_rpc" "$ts_http")"
    sg_http="$(free_port "$port" "$ts_rpc" "$ts_http" "$sg_rpc")"
    printf 'trillian_log_server rpc=%s http=%s\ntrillian_log_signer rpc=%s http=%s\nrekor-server http=%s\n' \
        "$ts_rpc" "$ts_http" "$sg_rpc" "$sg_http" "$port" >"$dir/ports"
    echo "$port" >"$dir/rekor.port"

    local t0 pid
    t0="$(date +%s%N)"
    local storage=(--storage_system=postgresql --quota_system=noop --postgresql_uri="$db_url")
    pid="$(start_one "$dir" trillian_log_server "$TLOG_SERVER_BIN" "${storage[@]}" \
        --rpc_endpoint="127.0.0.1:$ts_rpc" --http_endpoint="127.0.0.1:$ts_http")"
    wait_for "$dir" trillian_log_server "$pid" "http://127.0.0.1:$ts_http/healthz"

    if [[ ! -s "$dir/tree_id" ]]; then
        local tree
        if ! tree="$("$CREATETREE_BIN" --admin_server="127.0.0.1:$ts_rpc" --display_name=breakglass-test \
            2>>"$dir/createtree.log")"; then
            tail -n 20 "$dir/createtree.log" >&2 || true
            stop_all "$dir" || true
            die "createtree failed (see $dir/createtree.log)"
        fi
        [[ "$tree" =~ ^[0-9]+$ ]] || { stop_all "$dir" || true; die "createtree printed '$tree' instead of a tree id"; }
        echo "$tree" >"$dir/tree_id"
        note "created Trillian tree $tree"
    fi

    pid="$(start_one "$dir" trillian_log_signer "$TLOG_SIGNER_BIN" "${storage[@]}" \
        --force_master --sequencer_interval=100ms \
        --rpc_endpoint="127.0.0.1:$sg_rpc" --http_endpoint="127.0.0.1:$sg_http")"
    wait_for "$dir" trillian_log_signer "$pid" "http://127.0.0.1:$sg_http/healthz"

    # No search index (it needs Redis or MySQL): the retrieve API and the searchIndex endpoint
    # are off; every other v1 endpoint and every entry type (hashedrekord included) is on.
    pid="$(start_one "$dir" rekor-server "$REKOR_BIN" serve \
        --rekor_server.address=127.0.0.1 --port="$port" \
        --rekor_server.hostname="$CHECKPOINT_HOSTNAME" \
        --rekor_server.signer="$dir/signer.pem" \
        --trillian_log_server.address=127.0.0.1 --trillian_log_server.port="$ts_rpc" \
        --trillian_log_server.tlog_id="$(<"$dir/tree_id")" \
        --enable_retrieve_api=false \
        --enabled_api_endpoints=getLogInfo,getPublicKey,getLogProof,createLogEntry,getLogEntryByIndex,getLogEntryByUUID,searchLogQuery \
        --log_type=prod)"
    wait_for "$dir" rekor-server "$pid" "http://127.0.0.1:$port/api/v1/log"

    note "rekor-server $REKOR_VERSION (trillian $TRILLIAN_VERSION, tree $(<"$dir/tree_id"), database $db) ready on http://127.0.0.1:$port after $((($(date +%s%N) - t0) / 1000000))ms; state in $dir"
    print_env "$port"
}

cmd_stop() {
    [[ $# -eq 1 ]] || die "usage: $0 stop DIR"
    local dir="$1"
    [[ -d "$dir" ]] || { note "no directory $dir; nothing to stop"; return 0; }
    stop_all "$dir" || note "no running servers for $dir"
}

cmd_status() {
    [[ $# -eq 1 ]] || die "usage: $0 status DIR"
    local n pid line="" ok=1
    for n in "${PROCS[@]}"; do
        pid="$(server_pid "$1" "$n")"
        [[ -n "$pid" ]] || { ok=0; pid=-; }
        line+="$n=$pid "
    done
    if ((ok)); then
        echo "running ${line}url=http://127.0.0.1:$(cat "$1/rekor.port" 2>/dev/null || echo '?') tree=$(cat "$1/tree_id" 2>/dev/null || echo '?')"
    else
        echo "not running ($line)"
        return 1
    fi
}

cmd_env() {
    [[ $# -eq 1 ]] || die "usage: $0 env DIR"
    local n
    for n in "${PROCS[@]}"; do
        [[ -n "$(server_pid "$1" "$n")" ]] || die "no running Rekor log for $1 ($n is not running)"
    done
    print_env "$(<"$1/rekor.port")"
}

cmd_destroy() {
    [[ $# -eq 1 ]] || die "usage: $0 destroy DIR"
    local dir="$1" db admin_url
    [[ -d "$dir" ]] || { note "no directory $dir; nothing to destroy"; return 0; }
    dir="$(cd "$dir" && pwd)"
    stop_all "$dir" || true
    if [[ -s "$dir/postgres.db" ]]; then
        db="$(<"$dir/postgres.db")"
        [[ "$db" =~ ^rekor_[0-9a-f]{16}$ ]] || die "$dir/postgres.db names '$db', not a database this script created"
        admin_url="$(rekor_admin_url)"
        drop_db "$admin_url" "$db"
        note "dropped database $db"
    fi
    rm -f "$dir"/{tree_id,postgres.db,signer.pem,ports,rekor.port,createtree.log} "$dir"/{trillian_log_server,trillian_log_signer,rekor-server}.{pid,log}
    note "removed the log state in $dir"
}

# ---------------------------------------------------------------- main

dispatch "$@"
