#!/usr/bin/env bash
# The test control plane (e2e/controlplane): a real kube-apiserver + etcd +
# the controllers tests need + a simulated node, in one Go binary.
#
#   scripts/controlplane.sh build
#       Builds the binary once per source version into
#       ${BREAKGLASS_CACHE:-/var/cache/breakglass}/controlplane/controlplane-<hash>
#       (reused when present) and prints its path on stdout. Beside it,
#       <binary>.image holds the debug image's files (debug-image/: the
#       supervisor, built static, and profile.sh) laid out as in the image;
#       the simulated node shows them in every debug container.
#   scripts/controlplane.sh start [controlplane flags...]
#       Builds if needed, then runs one instance in the foreground for manual
#       use. Defaults: --kubeconfig-dir .breakglass/controlplane, a temporary
#       --data-dir. Prints `READY {json}` once serving; Ctrl-C stops it.
#       Then e.g.: KUBECONFIG=.breakglass/controlplane/admin.kubeconfig kubectl get pods -A
set -euo pipefail

# shellcheck source=scripts/lib.sh
source "$(dirname "${BASH_SOURCE[0]}")/lib.sh"
SRC="$ROOT/e2e/controlplane"
IMAGE_SRC="$ROOT/debug-image"
OUT_DIR="$CACHE/controlplane"
GO=$(go_bin)

k8s_version() {
  awk '$1 == "k8s.io/kubernetes" && $2 ~ /^v/ { print $2; exit }' "$SRC/go.mod"
}

cmd_build() {
  local version hash out ldflags tmp
  version=$(k8s_version)
  ldflags="-s -w"
  for pkg in k8s.io/component-base/version k8s.io/client-go/pkg/version; do
    ldflags+=" -X $pkg.gitVersion=$version -X $pkg.gitMajor=1 -X $pkg.gitMinor=$(echo "$version" | cut -d. -f2)"
    ldflags+=" -X $pkg.gitTreeState=clean"
  done
  ldflags+=" -X main.kubeVersion=$version"
  hash=$(
    cd "$SRC"
    {
      for f in $(ls ./*.go go.mod go.sum | LC_ALL=C sort); do echo "== $f"; cat "$f"; done
      for f in $(cd "$IMAGE_SRC" && ls supervisor/*.go supervisor/go.mod profile.sh | LC_ALL=C sort); do
        echo "== debug-image/$f"; cat "$IMAGE_SRC/$f"
      done
      "$GO" version
      echo "$ldflags"
    } | sha256sum | cut -c1-16
  )
  out="$OUT_DIR/controlplane-$hash"
  if [[ -x "$out" ]]; then echo "$out"; return; fi
  # One build at a time (parallel test binaries may all ask).
  lock "$OUT_DIR/.build.lock"
  if [[ ! -x "$out" ]]; then
    note "building $out (first build of k8s.io/kubernetes takes several minutes)"
    tmp="$out.tmp.$$"
    (cd "$SRC" && "$GO" build -buildvcs=false -o "$tmp" -ldflags "$ldflags" .) >&2
    rm -rf "$tmp.image" "$out.image"
    mkdir -p "$tmp.image/usr/local/bin" "$tmp.image/etc/breakglass"
    (cd "$IMAGE_SRC/supervisor" && go_env "$GO" build -buildvcs=false -trimpath -ldflags "-s -w" \
      -o "$tmp.image/usr/local/bin/breakglass-supervisor" .) >&2
    cp "$IMAGE_SRC/profile.sh" "$tmp.image/etc/breakglass/profile.sh"
    mv -f "$tmp.image" "$out.image"
    mv -f "$tmp" "$out"
    # Keep the three newest builds (each is ~120 MB).
    ls -1t "$OUT_DIR"/controlplane-* 2>/dev/null | grep -v -e '\.tmp\.' -e '\.image$' | tail -n +4 \
      | while read -r old; do rm -rf "$old" "$old.image"; done
  fi
  flock -u 9
  echo "$out"
}

cmd_start() {
  local bin data_dir_set=0 kube_dir_set=0 arg
  bin=$(cmd_build)
  for arg in "$@"; do
    case "$arg" in
      --data-dir|--data-dir=*) data_dir_set=1 ;;
      --kubeconfig-dir|--kubeconfig-dir=*) kube_dir_set=1 ;;
    esac
  done
  local extra=()
  if [[ $data_dir_set == 0 ]]; then extra+=(--data-dir "$(mktemp -d -t breakglass-controlplane.XXXXXX)"); fi
  if [[ $kube_dir_set == 0 ]]; then extra+=(--kubeconfig-dir "$ROOT/.breakglass/controlplane"); fi
  exec "$bin" "${extra[@]}" "$@"
}

dispatch "$@"
