#!/usr/bin/env bash
# Every benchmark of DESIGN.md section 13, each figure against a baseline measured in the same
# run, gathered into one table (BENCHMARKS.md holds a run of it and says how to read it).
# Installs and starts what the benchmarks need, like scripts/test.sh.
#
#   scripts/bench.sh            the full sizes (tens of minutes on two cores)
#   scripts/bench.sh --short    small sizes: checks that every figure is still produced, judges
#                               no time (scripts/test.sh runs this)
#
# The figures go to $BENCH_REPORT (JSON lines, default under $BREAKGLASS_CACHE/bench/) and the
# table to stdout; `scripts/bench-table.py FILE` renders it again. Either mode then fails, naming
# the row, when a row registered in scripts/bench-table.py (FIGURES) is missing or one not
# registered appears, or when a baseline, a value or a ratio is zero, infinite or NaN: a figure
# that measured nothing, or a baseline that was not measured.
set -euo pipefail
ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
cd "$ROOT"
step() { printf '\n== %s (%s)\n' "$*" "$(date +%T)"; }
if [ "${1:-}" = "--short" ]; then
  export BENCH_SHORT=1
  shift
fi

# The check the table gets at the end, tested before anything is measured.
python3 scripts/bench-table.py --self-test

# scripts/test.sh calls the short mode with everything already installed and started.
if [ -z "${BENCH_ENV_READY:-}" ]; then
  source scripts/test-env.sh
fi

mkdir -p "$BREAKGLASS_CACHE/bench"
export BENCH_REPORT=${BENCH_REPORT:-$BREAKGLASS_CACHE/bench/report-$(date +%Y%m%d-%H%M%S).jsonl}
: > "$BENCH_REPORT"
# The full run builds the benchmarks with optimisations (cargo's bench profile) and starts the
# release server binary, so the relay is measured as it is shipped. The short mode only checks
# that the harness still works: it reuses the test build (dev profile, debug server binary) so
# it adds no second compilation of every dependency to the test run.
if [ -n "${BENCH_SHORT:-}" ]; then
  PROFILE=(--profile dev)
else
  PROFILE=()
  step "release server binary for the benchmarks"
  cargo build --release -p breakglass-server
  export BREAKGLASS_SERVER_BIN="$CARGO_TARGET_DIR/release/breakglass-server"
fi

# The bench targets (package:name); the rows each must produce are registered in
# scripts/bench-table.py (FIGURES).
BENCHES=(
  "breakglass-e2e:relay"
  "breakglass-e2e:activation"
  "breakglass-e2e:store"
  "breakglass-e2e:sse"
  "breakglass-e2e:frontend"
  "breakglass-e2e:notify"
  "breakglass-e2e:export"
  "breakglass-e2e:sweep"
  "breakglass-e2e:search"
)
for b in "${BENCHES[@]}"; do
  pkg=${b%%:*} name=${b#*:}
  step "bench $name"
  cargo bench "${PROFILE[@]}" -p "$pkg" --bench "$name"
done

step "figures (from $BENCH_REPORT)"
python3 scripts/bench-table.py "$BENCH_REPORT" --check
