#!/usr/bin/env bash
# bench/run.sh — builds and runs the benchmark suite, writes BENCHMARKS.md at the repository root.
#
# Run it under a throwaway PostgreSQL, which is what `make bench` does:
#     scripts/with-postgres.sh bench/run.sh
# A smoke test of the whole pipeline (tiny counts, one run, a few minutes):
#     BENCH_QUICK=1 scripts/with-postgres.sh bench/run.sh
#
# Knobs (environment): BENCH_QUICK, BENCH_RUNS, BENCH_NOOP_JOBS, BENCH_TENSTEP_RUNS,
# BENCH_CONCURRENCY, BENCH_POOL, BENCH_PGBENCH_SECONDS, BENCH_PGBENCH_CLIENTS,
# BENCH_SQLITE_SECONDS, BENCH_SQLITE_SYNC, BENCH_SYSTEMS (comma-separated keys),
# BENCH_SCENARIOS, BENCH_REPLAY_EVENTS, BENCH_RESUME_EVENTS, BENCH_TIMERS, BENCH_TIMER_WINDOW,
# BENCH_BACKFILL_ROWS, BENCH_BACKFILL_PAGES, BENCH_BULK_JOBS, BENCH_TX_COUNT, BENCH_RELAY_ROWS,
# BENCH_DRAIN_JOBS, BENCH_TIMER_LEAD, BENCH_RUN_TIMEOUT, BENCH_OUT, BENCH_JSON, PGBENCH, BENCH_SCALE_SUSPENDED,
# BENCH_SCALE_FRESH, BENCH_SCALE_PARKED. `bench/bin/bench -h` describes each.
set -euo pipefail

BENCH_DIR=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
ROOT=$(cd "$BENCH_DIR/.." && pwd)

if [ -z "${TEST_DATABASE_URL:-}" ]; then
  echo "bench/run.sh: TEST_DATABASE_URL is not set; run it as scripts/with-postgres.sh bench/run.sh" >&2
  exit 2
fi

# pgbench comes with the PostgreSQL client packages; with-postgres.sh installs the server.
PGBENCH=${PGBENCH:-$(command -v pgbench || echo /usr/lib/postgresql/15/bin/pgbench)}
export PGBENCH

# bench/ is a module of its own so that no peer's dependencies reach the engine's go.mod.
echo "bench/run.sh: building" >&2
(cd "$BENCH_DIR" && go build -o bin/bench ./cmd/bench)

# The engine revision measured, for the report (read-only git queries).
if rev=$(git -C "$ROOT" rev-parse --short HEAD 2>/dev/null); then
  if [ -n "$(git -C "$ROOT" status --porcelain 2>/dev/null)" ]; then
    rev="$rev (with uncommitted changes)"
  fi
  export BENCH_JOBS_REV=${BENCH_JOBS_REV:-$rev}
fi

export BENCH_OUT=${BENCH_OUT:-$ROOT/BENCHMARKS.md}
export BENCH_JSON=${BENCH_JSON:-$BENCH_DIR/out/results.json}
"$BENCH_DIR/bin/bench" "$@"

# Section 11, suspended runs at scale, at a size that fits the suite (make bench-scale runs the
# million): its report is appended to BENCH_OUT.
if [ -z "${BENCH_SCENARIOS:-}" ] || [[ ",$BENCH_SCENARIOS," == *",scale,"* ]]; then
  if [ -n "${BENCH_QUICK:-}" ]; then
    export BENCH_SCALE_SUSPENDED=${BENCH_SCALE_SUSPENDED:-10000} BENCH_SCALE_FRESH=${BENCH_SCALE_FRESH:-2000} BENCH_SCALE_PARKED=${BENCH_SCALE_PARKED:-500}
  fi
  mkdir -p "$BENCH_DIR/out"
  "$BENCH_DIR/bin/bench" scale -suspended "${BENCH_SCALE_SUSPENDED:-100000}" -fresh "${BENCH_SCALE_FRESH:-5000}" \
    -rounds "${BENCH_SCALE_ROUNDS:-1}" -out "$BENCH_DIR/out/scale.md"
  { echo; echo "## 11. Suspended runs at scale"; cat "$BENCH_DIR/out/scale.md"; } >> "$BENCH_OUT"
fi
