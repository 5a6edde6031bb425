#!/usr/bin/env bash
# PostgreSQL for the tests: installs Debian's server when missing, then starts a private
# cluster on 127.0.0.1 (idempotent). Prints the admin URL the tests use.
#   scripts/postgres.sh start   -> prints BREAKGLASS_TEST_POSTGRES_URL=...
#   scripts/postgres.sh stop
#   scripts/postgres.sh prune HOURS  -> drops the tests' databases made more than HOURS ago
set -euo pipefail
# shellcheck source=scripts/lib.sh
source "$(dirname "${BASH_SOURCE[0]}")/lib.sh"
DIR=${BREAKGLASS_PG_DIR:-$CACHE/postgres}
PORT=${BREAKGLASS_PG_PORT:-55432}

pg_bin() {
  local d
  for d in /usr/lib/postgresql/*/bin; do
    [ -x "$d/initdb" ] && { echo "$d"; return 0; }
  done
  return 1
}

if ! BIN=$(pg_bin); then
  note "installing PostgreSQL (Debian package)..."
  export DEBIAN_FRONTEND=noninteractive
  apt-get update -qq >&2
  apt-get install -y -qq postgresql >&2
  BIN=$(pg_bin) || die "the PostgreSQL install did not provide initdb"
fi

# initdb and postgres refuse to run as root: use the postgres system user when we are root.
as_pg() {
  if [ "$(id -u)" = 0 ]; then
    id postgres >/dev/null 2>&1 || useradd --system --home-dir "$DIR" --shell /bin/sh postgres
    runuser -u postgres -- "$@"
  else
    "$@"
  fi
}

cmd_start() {
    mkdir -p "$DIR"
    [ "$(id -u)" = 0 ] && { id postgres >/dev/null 2>&1 || useradd --system --home-dir "$DIR" --shell /bin/sh postgres; chown postgres "$DIR"; }
    if [ ! -f "$DIR/data/PG_VERSION" ]; then
      as_pg "$BIN/initdb" -D "$DIR/data" -U postgres --auth=trust -E UTF8 >/dev/null
    fi
    if ! as_pg "$BIN/pg_ctl" -D "$DIR/data" status >/dev/null 2>&1; then
      as_pg "$BIN/pg_ctl" -D "$DIR/data" -l "$DIR/server.log" -w -t 60 \
        -o "-c listen_addresses=127.0.0.1 -c port=$PORT -c unix_socket_directories=$DIR -c max_connections=300 -c fsync=off" start >/dev/null
    fi
    for _ in $(seq 1 60); do
      "$BIN/pg_isready" -h 127.0.0.1 -p "$PORT" -q && break
      sleep 0.5
    done
    "$BIN/pg_isready" -h 127.0.0.1 -p "$PORT" -q || die "PostgreSQL did not start; see $DIR/server.log"
    echo "BREAKGLASS_TEST_POSTGRES_URL=postgres://postgres@127.0.0.1:$PORT/postgres"
}

# Every test makes its own database (bg_test_<uuidv7>, bg_e2e_<uuidv7>) and none drops it: a
# run leaves hundreds, gigabytes on a small disk. A UUIDv7 starts with its creation time in
# milliseconds, so databases older than any run can be told apart from a run still going on
# beside this one; one in use is left (DROP refuses it).
cmd_prune() {
    local hours=${1:?hours}
    local cutoff=$(( ($(date +%s) - hours * 3600) * 1000 ))
    local url="postgres://postgres@127.0.0.1:$PORT/postgres"
    local name ms dropped=0
    while read -r name; do
      ms=$((16#${name: -32:12}))
      if [ "$ms" -lt "$cutoff" ] && "$BIN/psql" "$url" -qAtc "DROP DATABASE \"$name\"" >/dev/null 2>&1; then
        dropped=$((dropped + 1))
      fi
    done < <("$BIN/psql" "$url" -Atc "SELECT datname FROM pg_database WHERE datname ~ '^bg_(test|e2e)_[0-9a-f]{32}$'")
    note "dropped $dropped test database(s) older than $hours hours"
}

cmd_stop() {
    as_pg "$BIN/pg_ctl" -D "$DIR/data" -m fast stop >/dev/null 2>&1 || true
}

dispatch "${@:-start}"
