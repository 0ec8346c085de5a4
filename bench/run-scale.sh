#!/usr/bin/env bash
# bench/run-scale.sh — the scale scenarios at full size (make bench-scale):
#   1. `bench scale`: a million suspended runs in Postgres against an empty database;
#   2. `bench multi`: one and two `engine serve` processes on one Postgres, side by side.
# Run it under a throwaway PostgreSQL: scripts/with-postgres.sh bench/run-scale.sh
# Knobs: BENCH_SCALE_SUSPENDED (1000000), BENCH_SCALE_FRESH (20000), BENCH_SCALE_PARKED (5000),
# BENCH_MULTI_RUNS (2000), BENCH_MULTI_ROUNDS (2).
set -euo pipefail

BENCH_DIR=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
ROOT=$(cd "$BENCH_DIR/.." && pwd)
if [ -z "${TEST_DATABASE_URL:-}" ]; then
  echo "bench/run-scale.sh: TEST_DATABASE_URL is not set; run it as scripts/with-postgres.sh bench/run-scale.sh" >&2
  exit 2
fi
echo "bench/run-scale.sh: building" >&2
(cd "$BENCH_DIR" && go build -o bin/bench ./cmd/bench)
(cd "$ROOT" && go build -o "$BENCH_DIR/bin/engine" ./cmd/engine)
mkdir -p "$BENCH_DIR/out"
"$BENCH_DIR/bin/bench" scale -suspended "${BENCH_SCALE_SUSPENDED:-1000000}" -fresh "${BENCH_SCALE_FRESH:-20000}" \
  -parked "${BENCH_SCALE_PARKED:-5000}" -rounds "${BENCH_SCALE_ROUNDS:-3}" -out "$BENCH_DIR/out/scale.md"
"$BENCH_DIR/bin/bench" multi -engine "$BENCH_DIR/bin/engine" -runs "${BENCH_MULTI_RUNS:-2000}" \
  -rounds "${BENCH_MULTI_ROUNDS:-2}" -out "$BENCH_DIR/out/multi.md"
