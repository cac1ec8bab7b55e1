#!/usr/bin/env bash
# Issue 12's data-parallel measurements, written to docs/perf-mpi/ (JSON per run) and summarised by
# scripts/mpi-bench-report.py into docs/PERFORMANCE-mpi.md:
#   1. one machine: BERT-base seq 128, global batch $BATCH, one process with 2 threads against
#      `mpirun -np 2` with 1 thread per rank, interleaved ($ROUNDS rounds, A B A B ...);
#   2. two network-namespace "hosts" (scripts/mpi-netns.sh, TCP through a bridge), one rank with
#      1 thread each: BERT-mini and BERT-base, with the 1-rank baseline, the bytes all-reduced per
#      step, the achieved bus bandwidth and the exposed-communication fraction.
# Needs root for the namespaces (part 2 is skipped with the reason otherwise). Run on a quiet
# machine: every figure is a ratio of runs made minutes apart.
# Environment: BUILD (build), OUT (docs/perf-mpi), ROUNDS (3), BATCH (32), STEPS (3).
set -euo pipefail
case "${1:-}" in -h | --help) sed -n '2,/^set /{/^set /d;s/^# \{0,1\}//;p}' "$0"; exit 0 ;; esac
[[ $# -eq 0 ]] || { echo "mpi-bench: takes no arguments (its settings are environment variables, --help), got $1" >&2; exit 2; }
HERE=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
ROOT=$(cd "$HERE/.." && pwd)
cd "$ROOT"
abs() { case "$1" in /*) printf '%s' "$1" ;; *) printf '%s/%s' "$ROOT" "$1" ;; esac; }  # relative: to the checkout
BB=$(abs "${BUILD:-build}/bertbench")
OUT=$(abs "${OUT:-docs/perf-mpi}")
ROUNDS=${ROUNDS:-3}
BATCH=${BATCH:-32}
STEPS=${STEPS:-3}
[[ -x "$BB" ]] || { echo "mpi-bench: $BB not found (hint: make build)" >&2; exit 1; }
command -v mpirun >/dev/null || { echo "mpi-bench: mpirun not found (bash scripts/setup.sh)" >&2; exit 1; }
# this run's files beside the previous ones until it has finished, then in their place
NEW="$OUT.new.$$"
rm -rf "$NEW"
mkdir -p "$NEW"
trap 'rm -rf "$NEW"' EXIT
MPI=(mpirun --allow-run-as-root --oversubscribe --bind-to none --mca btl_vader_single_copy_mechanism none)
COMMON=(bench --mode=train --seq_len=128 --warmup=1 --steps="$STEPS" --format=json --noceiling)

for r in $(seq 1 "$ROUNDS"); do
  echo "== round $r/$ROUNDS: one process x 2 threads"
  "$BB" "${COMMON[@]}" --model=base --batch_size="$BATCH" --threads=2 --json="$NEW/local-1proc-r$r.json" >/dev/null
  echo "== round $r/$ROUNDS: mpirun -np 2 x 1 thread"
  "${MPI[@]}" -np 2 -x OMP_NUM_THREADS=1 "$BB" "${COMMON[@]}" --model=base --batch_size="$BATCH" \
    --threads=1 --scaling_baseline=false --json="$NEW/local-2ranks-r$r.json" >/dev/null
done

if bash "$HERE/mpi-netns.sh" --check; then
  for model in mini base; do
    echo "== two namespace hosts: $model"
    bash "$HERE/mpi-netns.sh" --hosts=2 --timeout=1200 -- -x OMP_NUM_THREADS=1 \
      "$BB" "${COMMON[@]}" --model="$model" --batch_size="$BATCH" --threads=1 \
      --json="$NEW/netns-$model.json" >/dev/null
  done
else
  echo "mpi-bench: network namespaces unavailable; the two-host part is skipped"
fi
mkdir -p "$OUT"
rm -f "$OUT"/*.json
mv "$NEW"/*.json "$OUT"/
/usr/bin/python3 "$HERE/mpi-bench-report.py" "$OUT"
