#!/usr/bin/env bash
# `make bench`: the evaluator against XLA's CPU backend (JAX), same modules,
# same inputs, both pinned to one core, in one run. Prints a markdown table
# and writes it to BENCHMARKS.md between the evaluator-vs-XLA markers.
# ROUNDS (default 5) alternating rounds; the table has medians of the
# per-round ratios.
set -euo pipefail
build=${1:-build}
cd "$(dirname "$0")/.."
dir=$build/bench-programs
core=$(python3 -c 'import os; print(sorted(os.sched_getaffinity(0))[-1])')
# Regenerated whenever the generator changed since the last time.
if [ ! -f "$dir/.generated" ] || [ tools/gen_corpus.py -nt "$dir/.generated" ]; then
  .venv/bin/python tools/gen_corpus.py --bench-only --out "$dir" >/dev/null
  touch "$dir/.generated"
fi
# Alternate the two sides so that a noisy neighbour hurts both alike.
rounds=${ROUNDS:-5}
for round in $(seq 1 "$rounds"); do
  taskset -c "$core" .venv/bin/python bench/xla_baseline.py "$dir" \
    > "$build/bench-xla-$round.json"
  taskset -c "$core" "$build/bin/evaluator_bench" "$dir" \
    --benchmark_format=json > "$build/bench-cw-$round.json" 2>/dev/null
done
.venv/bin/python bench/compare.py "$build" "$rounds" --update BENCHMARKS.md
