#!/usr/bin/env bash
# The whole product on one machine (README: "Start it"): two test control planes (environment
# `dev`, Ground, and `prod`, Flight; each a real kube-apiserver with a simulated node whose
# containers are real shells), their guardrails applied by the server's own
# `policies apply`, the demo workloads of scripts/demo/, a transparency log when one is
# already built, and the server (SQLite, local recordings, dev login) serving the frontend.
# Prints the URL, the demo users and what to try; Ctrl-C stops everything it started.
#
#   scripts/dev.sh                 start (builds what is missing; a warm start takes seconds)
#   scripts/dev.sh --reset         wipe the demo's data (database, recordings, cluster state)
#
# Options (environment variables in brackets):
#   --port P               server port on 127.0.0.1, 0 for any free one      [BREAKGLASS_DEMO_PORT, 8080]
#   --listen ADDR          server address instead, e.g. 0.0.0.0:8080
#   --dev-cluster-port P   API server port of `dev`, 0 for a free one        [BREAKGLASS_DEMO_DEV_CLUSTER_PORT, 0]
#   --prod-cluster-port P  API server port of `prod`, 0 for a free one       [BREAKGLASS_DEMO_PROD_CLUSTER_PORT, 0]
#   --data-dir DIR         where the demo's data lives                       [BREAKGLASS_DEMO_DIR, ./.breakglass]
#   --no-log               no transparency log even when one is built
#   -- ARGS                more flags for the server
# Prebuilt binaries are used when named: BREAKGLASS_SERVER_BIN, BREAKGLASS_CONTROLPLANE_BIN.
# Build caches: BREAKGLASS_CACHE (default /var/cache/breakglass), CARGO_TARGET_DIR.
set -euo pipefail
ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
cd "$ROOT"
export BREAKGLASS_CACHE=${BREAKGLASS_CACHE:-/var/cache/breakglass}
export CARGO_TARGET_DIR=${CARGO_TARGET_DIR:-$BREAKGLASS_CACHE/target}
# shellcheck source=scripts/lib.sh
source "$ROOT/scripts/lib.sh"

PORT=${BREAKGLASS_DEMO_PORT:-8080}
LISTEN=
CLUSTER_PORT_dev=${BREAKGLASS_DEMO_DEV_CLUSTER_PORT:-0}
CLUSTER_PORT_prod=${BREAKGLASS_DEMO_PROD_CLUSTER_PORT:-0}
DIR=${BREAKGLASS_DEMO_DIR:-$ROOT/.breakglass}
RESET=0
WITH_LOG=1
SERVER_ARGS=()
usage() { sed -n '2,/^set -euo/p' "$0" | sed -e '$d' -e 's/^# \{0,1\}//'; exit "${1:-2}"; }
while (($#)); do
  case "$1" in
    --port) PORT=${2:?--port needs a value}; shift ;;
    --listen) LISTEN=${2:?--listen needs a value}; shift ;;
    --dev-cluster-port) CLUSTER_PORT_dev=${2:?}; shift ;;
    --prod-cluster-port) CLUSTER_PORT_prod=${2:?}; shift ;;
    --data-dir) DIR=${2:?--data-dir needs a value}; shift ;;
    --reset) RESET=1 ;;
    --no-log) WITH_LOG=0 ;;
    -h|--help) usage 0 ;;
    --) shift; SERVER_ARGS=("$@"); break ;;
    *) echo "dev.sh: unknown option $1 (server flags go after --)" >&2; usage ;;
  esac
  shift
done
[[ -n $LISTEN ]] || LISTEN=127.0.0.1:$PORT
mkdir -p "$DIR"
DIR=$(cd "$DIR" && pwd)
STATE=$DIR/demo            # config, logs and pids of this demo
PIDS=$STATE/pids
ENVS=(dev prod)
declare -A TIER=([dev]=ground [prod]=flight)

T0=$(date +%s%N)
say() { printf '%s\n' "$*"; }

# One demo per data directory. The lock is held by this script and inherited by the server
# and the control planes, so leftovers of a killed demo keep it too.
exec 8>>"$DIR/.demo.lock"
if ! flock -n 8; then
  script_pid=$(awk '$1 == "dev.sh" {print $2}' "$PIDS" 2>/dev/null || true)
  if [[ -n $script_pid ]] && kill -0 "$script_pid" 2>/dev/null; then
    die "a demo already runs with data in $DIR (scripts/dev.sh, pid $script_pid): use it, stop it with Ctrl-C in its terminal, or start another beside it with --data-dir DIR --port P"
  fi
  left=$(awk '$1 != "dev.sh" {print $2}' "$PIDS" 2>/dev/null | xargs -r ps -o pid= -p 2>/dev/null | xargs || true)
  die "processes of a demo that was killed still run with data in $DIR (pids: ${left:-unknown}); stop them with: kill ${left:-PID}"
fi

if ((RESET)); then
  [[ $DIR == "$ROOT/.breakglass" || -f $STATE/server.toml ]] \
    || die "$DIR does not look like a demo data directory (no demo/server.toml); not wiping it"
  if [[ -d $DIR/rekor ]]; then scripts/rekor.sh destroy "$DIR/rekor" >/dev/null 2>&1 || true; fi
  find "$DIR" -mindepth 1 -maxdepth 1 ! -name .demo.lock -exec rm -rf {} +
  say "wiped the demo's data in $DIR (database, recordings, cluster state); scripts/dev.sh starts afresh"
  exit 0
fi

port_busy() { (exec 3<>"/dev/tcp/127.0.0.1/$1") 2>/dev/null; }
server_port=${LISTEN##*:}
if [[ $server_port != 0 ]] && port_busy "$server_port"; then
  die "port $server_port is in use by another program; pick another with --port P"
fi
for env in "${ENVS[@]}"; do
  p=CLUSTER_PORT_$env
  if [[ ${!p} != 0 ]] && port_busy "${!p}"; then die "port ${!p} (cluster $env) is in use; pick another with --$env-cluster-port P"; fi
done

mkdir -p "$STATE"
: >"$PIDS"
echo "dev.sh $$" >>"$PIDS"
declare -A PID=()
STARTED_POSTGRES=0
started() { PID[$1]=$2; echo "$1 $2" >>"$PIDS"; }
alive() { [[ -n ${1:-} ]] && kill -0 "$1" 2>/dev/null; }
# stop_pids SECONDS PID...: SIGTERM, then SIGKILL for whoever is still there after SECONDS.
stop_pids() {
  local wait_s=$1 pid i; shift
  for pid in "$@"; do kill -TERM "$pid" 2>/dev/null || true; done
  for ((i = 0; i < wait_s * 10; i++)); do
    local any=0
    for pid in "$@"; do alive "$pid" && any=1; done
    ((any)) || break
    sleep 0.1
  done
  for pid in "$@"; do
    if alive "$pid"; then say "    pid $pid did not stop within ${wait_s}s: killing it"; kill -KILL "$pid" 2>/dev/null || true; fi
    wait "$pid" 2>/dev/null || true
  done
}
CLEANED=0
cleanup() {
  ((CLEANED)) && return
  CLEANED=1
  trap '' INT TERM
  local t pids=()
  t=$(date +%s%N)
  say ""
  say "==> stopping the demo"
  if alive "${PID[server]:-}"; then stop_pids 10 "${PID[server]}"; fi
  for env in "${ENVS[@]}"; do alive "${PID[cluster-$env]:-}" && pids+=("${PID[cluster-$env]}"); done
  ((${#pids[@]})) && stop_pids 20 "${pids[@]}"
  if [[ -n ${PID[log]:-} ]]; then scripts/rekor.sh stop "$DIR/rekor" >/dev/null 2>&1 || true; fi
  if ((STARTED_POSTGRES)); then scripts/postgres.sh stop 8>&- || true; fi
  : >"$PIDS"
  say "    stopped everything in $(secs_since "$t"); the data stays in $DIR (scripts/dev.sh --reset wipes it)"
}
trap 'cleanup; exit 130' INT
trap 'cleanup; exit 143' TERM
trap cleanup EXIT

# --- builds (each skipped when its output is up to date) -------------------------------------

step "test control plane binary (Go; cached per source version)"
CP_BIN=${BREAKGLASS_CONTROLPLANE_BIN:-}
[[ -n $CP_BIN ]] || CP_BIN=$(scripts/controlplane.sh build)
step_done

# The control planes boot (about 10 s, little CPU) while the Rust builds are checked.
for env in "${ENVS[@]}"; do
  kube=$DIR/clusters/$env/kube
  mkdir -p "$kube"
  rm -f "$kube/ready"
  p=CLUSTER_PORT_$env
  "$CP_BIN" --data-dir "$DIR/clusters/$env/data" --kubeconfig-dir "$kube" --cluster-name "$env" \
    --port "${!p}" --keep-data --exit-with-parent </dev/null >"$kube/ready" 2>>"$kube/controlplane.err" &
  started "cluster-$env" $!
done
CP_T=$(date +%s%N)

# The frontend is rebuilt only when one of its inputs is newer than the last build.
frontend_inputs=(frontend/src frontend/index.html frontend/Cargo.toml frontend/package-lock.json
  frontend/wasm.mjs frontend/post-build.mjs frontend/shrink.mjs frontend/precompress.mjs style shared/src shared/Cargo.toml Cargo.lock Trunk.toml rust-toolchain.toml)
step "frontend (trunk build --release)"
if [[ -f frontend/dist/index.html ]] \
   && [[ -z $(find "${frontend_inputs[@]}" -newer frontend/dist/index.html -print -quit 2>/dev/null) ]]; then
  step_done "up to date"
else
  tools_t=$(date +%s%N)
  say "    toolchain: scripts/install-tools.sh (first time ~10 min; log: $STATE/toolchain.log)"
  scripts/install-tools.sh 2>&1 | tee "$STATE/toolchain.log" | sed -n 's/^\[install-tools\]/   /p' \
    || { tail -n 30 "$STATE/toolchain.log" >&2; die "installing the frontend toolchain failed (log: $STATE/toolchain.log)"; }
  say "    toolchain ready in $(secs_since "$tools_t")"
  say "    trunk build --release (log: $STATE/frontend-build.log)"
  # shellcheck source=env.sh
  (source scripts/env.sh && trunk build --release) >"$STATE/frontend-build.log" 2>&1 \
    || { tail -n 30 "$STATE/frontend-build.log" >&2; die "the frontend build failed (log: $STATE/frontend-build.log)"; }
  step_done "built"
fi

step "server (cargo build -p breakglass-server)"
SERVER_BIN=${BREAKGLASS_SERVER_BIN:-}
if [[ -z $SERVER_BIN ]]; then
  # The dev profile: half the cold compile time of --release, shared with scripts/test.sh,
  # and fast enough for a demo.
  cargo build -p breakglass-server || die "cargo build -p breakglass-server failed (above)"
  SERVER_BIN=$CARGO_TARGET_DIR/debug/breakglass-server
fi
step_done

# --- clusters ------------------------------------------------------------------------------

step "control planes dev and prod (etcd, kube-apiserver, controllers, simulated node)"
WAIT_T=$_STEP_AT
_STEP_AT=$CP_T
declare -A SERVER_URL=()
for env in "${ENVS[@]}"; do
  kube=$DIR/clusters/$env/kube
  for ((i = 0; ; i++)); do
    line=$(head -n1 "$kube/ready" 2>/dev/null || true)
    [[ $line == READY* || $line == FAILED* ]] && break
    alive "${PID[cluster-$env]}" || break
    ((i < 1200)) || die "cluster $env not ready after 120 s (log: $kube/controlplane.log)"
    sleep 0.1
  done
  if [[ $line != READY* ]]; then
    tail -n 20 "$kube/controlplane.log" >&2 2>/dev/null || true
    die "cluster $env did not start: ${line:-it exited} (log: $kube/controlplane.log; scripts/dev.sh --reset starts its state afresh)"
  fi
  SERVER_URL[$env]=$(sed -n 's/.*"server":"\([^"]*\)".*/\1/p' <<<"$line")
done
# "done in" counts from their start, which ran beside the builds; the wait here is what they
# added to the run.
step_done "dev at ${SERVER_URL[dev]}, prod at ${SERVER_URL[prod]} (booted beside the builds; waited $(secs_since "$WAIT_T") here)"

# The server's configuration: the two environments, each reached with the server's own
# service account of its cluster; everything else on the embedded defaults.
CONFIG=$STATE/server.toml
{
  echo "# Written by scripts/dev.sh on every start (edit the script, not this file)."
  echo "[dev_login]"
  echo "enabled = true"
  for env in "${ENVS[@]}"; do
    cat <<TOML

[[environments]]
name = "$env"
tier = "${TIER[$env]}"
cluster = { kind = "kubeconfig", path = "$DIR/clusters/$env/kube/breakglass-sa.kubeconfig" }
[environments.permissions]
"tower.breakglass.request" = { groups = ["engineers", "sre", "admins"] }
"tower.breakglass.approve" = { groups = ["sre", "admins"] }
"tower.breakglass.terminate" = { groups = ["admins"] }
"tower.breakglass.self" = { groups = ["admins"] }
TOML
  done
} >"$CONFIG"

step "guardrails (breakglass-server policies apply) and demo workloads (scripts/demo)"
# apply_manifest ENV FILE: server-side apply of one object as the cluster's admin (curl: no
# kubectl needed). The URL comes from the file's kind, name and namespace.
apply_manifest() {
  local env=$1 file=$2 kube=$DIR/clusters/$1/kube kind name ns path token code
  kind=$(awk '$1 == "kind:" {print $2; exit}' "$file")
  name=$(awk '/^metadata:/ {m = 1; next} m && /^  name:/ {print $2; exit}' "$file")
  ns=$(awk '/^metadata:/ {m = 1; next} m && /^  namespace:/ {print $2; exit} m && /^[^ ]/ {exit}' "$file")
  case "$kind" in
    Namespace) path=/api/v1/namespaces/$name ;;
    Pod) path=/api/v1/namespaces/$ns/pods/$name ;;
    Deployment) path=/apis/apps/v1/namespaces/$ns/deployments/$name ;;
    *) die "$file: kind $kind is not one dev.sh knows how to apply" ;;
  esac
  token=$(awk '$1 == "token:" {print $2; exit}' "$kube/admin.kubeconfig")
  code=$(curl -sS -o "$STATE/apply.out" -w '%{http_code}' --cacert "$kube/ca.crt" \
    -H "Authorization: Bearer $token" -H 'Content-Type: application/apply-patch+yaml' \
    -X PATCH --data-binary "@$file" "${SERVER_URL[$env]}$path?fieldManager=breakglass-demo&force=true")
  [[ $code == 20? ]] || die "applying $file to $env: HTTP $code $(cat "$STATE/apply.out")"
}
apply_pids=()
for env in "${ENVS[@]}"; do
  "$SERVER_BIN" policies apply --cluster "$env" --config "$CONFIG" \
    --kubeconfig "$DIR/clusters/$env/kube/admin.kubeconfig" >"$STATE/guardrails-$env.txt" 2>&1 &
  apply_pids+=($!)
done
n=0
for env in "${ENVS[@]}"; do
  for f in scripts/demo/*.yaml; do apply_manifest "$env" "$f"; n=$((n + 1)); done
done
for i in "${!ENVS[@]}"; do
  wait "${apply_pids[i]}" || { cat "$STATE/guardrails-${ENVS[i]}.txt" >&2; die "policies apply for ${ENVS[i]} failed"; }
done
step_done "$(grep -h -o '^applied [0-9]* objects' "$STATE"/guardrails-*.txt | awk '{s += $2} END {print s}') guardrail objects, doctor: all in place; $n workload objects"

# --- transparency log (only when already built: never a build for the demo) -----------------
LOG_URL=
if ((WITH_LOG)) && [[ -x $BREAKGLASS_CACHE/bin/rekor-server && -x $BREAKGLASS_CACHE/bin/trillian_log_server ]] \
   && compgen -G '/usr/lib/postgresql/*/bin/initdb' >/dev/null; then
  step "transparency log (Rekor, built before; its tree in PostgreSQL)"
  pg=${BREAKGLASS_PG_PORT:-55432}
  if ! port_busy "$pg"; then
    if scripts/postgres.sh start >/dev/null 2>"$STATE/postgres.err" 8>&-; then
      STARTED_POSTGRES=1
      started postgres "$(head -n1 "${BREAKGLASS_PG_DIR:-$BREAKGLASS_CACHE/postgres}/data/postmaster.pid")"
    fi
  fi
  log_port=
  for p in $(shuf -i 20000-40000 -n 50); do port_busy "$p" || { log_port=$p; break; }; done
  if out=$(scripts/rekor.sh start "$DIR/rekor" "$log_port" 2>"$STATE/rekor.err" 8>&-); then
    LOG_URL=${out##*=}
    for n in trillian_log_server trillian_log_signer rekor-server; do started "log-$n" "$(cat "$DIR/rekor/$n.pid")"; done
    PID[log]=1
    printf '\n[recording.transparency_log]\nurl = "%s"\n' "$LOG_URL" >>"$CONFIG"
    step_done "$LOG_URL"
  else
    step_done "not started: $(tail -n1 "$STATE/rekor.err"); recordings are kept without it"
  fi
fi

# --- the server ------------------------------------------------------------------------------
step "break-glass server (SQLite and recordings in $DIR)"
# The log exists before the server does: the redirection below is opened by the background
# child, which may run after the first read of the loop.
: >"$STATE/server.log"
"$SERVER_BIN" --dev --config "$CONFIG" --data-dir "$DIR" --listen "$LISTEN" \
  --static-dir "$ROOT/frontend/dist" "${SERVER_ARGS[@]}" </dev/null >"$STATE/server.log" 2>&1 &
started server $!
URL=
for ((i = 0; i < 600; i++)); do
  URL=$(sed -n 's|^break-glass is listening: open \(.*\)/$|\1|p' "$STATE/server.log" 2>/dev/null | head -n1 || true)
  [[ -n $URL ]] && break
  alive "${PID[server]}" || { tail -n 20 "$STATE/server.log" >&2; die "the server exited (log: $STATE/server.log)"; }
  sleep 0.1
done
[[ -n $URL ]] || die "the server did not listen within 60 s (log: $STATE/server.log)"
step_done

cat <<EOF

break-glass is listening: open $URL/
DEV MODE: anyone can sign in as a demo user without a password. Never use this in production.

  environments  dev   Ground: approved at once      cluster ${SERVER_URL[dev]}
                prod  Flight: a second person approves   cluster ${SERVER_URL[prod]}
  demo users    alice  (engineers) may ask for access
                bob    (sre)       may ask, and approve others' requests
                carol  (admins)    all of that, plus breaking the glass and terminating sessions
  pods          namespace shop: web (2 replicas), checkout (containers app + envoy), inventory-sync;
                namespace payments: payments-worker (1 replica). Same in both clusters.

Try this:
  1. As alice, open $URL/env/prod/ns/shop/pod/checkout and ask for a live session (give a reason).
  2. As bob (in a private window), approve it from the queue strip on the home page.
  3. As alice, type in the terminal that appears; end it, then bob opens its recording from the session page.

Ready in $(secs_since "$T0"). Logs: $STATE/server.log, $DIR/clusters/*/kube/controlplane.log.
Kubectl: KUBECONFIG=$DIR/clusters/prod/kube/admin.kubeconfig kubectl get pods -A
Ctrl-C stops everything this started; the data stays in $DIR (--reset wipes it).
EOF

# Until Ctrl-C, SIGTERM, or one of the parts dying (then the rest is stopped too).
watched=("${PID[server]}")
for env in "${ENVS[@]}"; do watched+=("${PID[cluster-$env]}"); done
set +e
wait -n "${watched[@]}"
status=$?
set -e
for who in server cluster-dev cluster-prod; do
  alive "${PID[$who]}" || say "dev.sh: $who stopped unexpectedly (exit $status); stopping the rest"
done
exit 1
