# shellcheck shell=bash
# Source me: puts the frontend toolchain (scripts/install-tools.sh) first on PATH.
#   source scripts/env.sh
# npm's binaryen (wasm-opt 132) must shadow any system wasm-opt (Debian's 108 breaks the wasm),
# so both dirs are moved to the front even if already on PATH. Safe to source repeatedly.
_bg_repo="$(cd "$(dirname "${BASH_SOURCE[0]:-$0}")/.." && pwd)"
for _bg_dir in "${BREAKGLASS_CACHE:-/var/cache/breakglass}/tools/bin" "$_bg_repo/frontend/node_modules/.bin"; do
  _bg_path=":$PATH:"
  while [[ $_bg_path == *":$_bg_dir:"* ]]; do _bg_path="${_bg_path/":$_bg_dir:"/:}"; done
  _bg_path="${_bg_path#:}"
  PATH="$_bg_dir${_bg_path:+:${_bg_path%:}}"
done
export PATH
unset _bg_repo _bg_dir _bg_path
