#!/usr/bin/env bash
# Every benchmark of DESIGN.md section 13, each figure against a baseline measured in the same
# run, gathered into one table (BENCHMARKS.md holds a run of it and says how to read it).
# Installs and starts what the benchmarks need, like scripts/test.sh.
#
#   scripts/bench.sh            the full sizes, each bench repeated until two runs agree within
#                               5 % (an hour or more on two cores)
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
  "breakglass-e2e:replicas"
)
# BENCH_TARGETS="activation frontend" runs only those (the table is then not checked whole).
if [ -n "${BENCH_TARGETS:-}" ]; then
  picked=()
  for b in "${BENCHES[@]}"; do
    for t in $BENCH_TARGETS; do [ "${b#*:}" = "$t" ] && picked+=("$b"); done
  done
  [ ${#picked[@]} -gt 0 ] || { echo "BENCH_TARGETS names no bench: $BENCH_TARGETS" >&2; exit 2; }
  BENCHES=("${picked[@]}")
fi

# The full run repeats each bench until two runs in a row agree within 5 % on every row's
# ratio (scripts/bench-table.py --agree), at most BENCH_RUNS_MAX times (default 4); the last
# run goes into the report with the runs it took and its spread from the run before, and a row
# that never settled says so in the table ("unstable"). The short mode runs each bench once.
# Each run's figures are kept in REPORT.runs/NAME-N.jsonl.
RUNS_MAX=${BENCH_RUNS_MAX:-4}
# Every run's own figures stay beside the report, to compare runs afterwards.
RUNS_DIR=${BENCH_REPORT%.jsonl}.runs
[ -n "${BENCH_SHORT:-}" ] || { rm -rf "$RUNS_DIR" && mkdir -p "$RUNS_DIR"; }
for b in "${BENCHES[@]}"; do
  pkg=${b%%:*} name=${b#*:}
  if [ -n "${BENCH_SHORT:-}" ]; then
    step "bench $name"
    cargo bench "${PROFILE[@]}" -p "$pkg" --bench "$name"
    continue
  fi
  run=0
  while :; do
    run=$((run + 1))
    step "bench $name, run $run"
    BENCH_REPORT="$RUNS_DIR/$name-$run.jsonl" cargo bench "${PROFILE[@]}" -p "$pkg" --bench "$name"
    [ "$run" -ge 2 ] || continue
    if python3 scripts/bench-table.py --agree "$RUNS_DIR/$name-$((run - 1)).jsonl" "$RUNS_DIR/$name-$run.jsonl"; then
      echo "bench $name: runs $((run - 1)) and $run agree within 5 % on every row"
      break
    fi
    if [ "$run" -ge "$RUNS_MAX" ]; then
      echo "bench $name: no two runs in a row agreed within 5 % in $run runs; the last is reported with its spread"
      break
    fi
  done
  python3 scripts/bench-table.py --annotate "$RUNS_DIR/$name-$((run - 1)).jsonl" \
    "$RUNS_DIR/$name-$run.jsonl" --runs "$run" >>"$BENCH_REPORT"
done

step "figures (from $BENCH_REPORT)"
if [ -n "${BENCH_TARGETS:-}" ]; then
  python3 scripts/bench-table.py "$BENCH_REPORT"
else
  python3 scripts/bench-table.py "$BENCH_REPORT" --check
fi
