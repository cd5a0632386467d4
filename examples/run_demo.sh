#!/usr/bin/env bash
# `make demo`:
#  1. the paper's Figure 2: three programs on three 2-device virtual slices,
#     traced as one program graph;
#  2. pipeline training: an MLP in 4 stages on 4 islands (GPipe), with a live
#     progress line, the status view once mid-run, and a Perfetto trace;
#  3. the JAX-compiled data-parallel MLP train step on 4 local CPU devices for
#     300 steps, against JAX's own loss curve (JAX writes the reference once).
set -euo pipefail
build=${1:-build}
cd "$(dirname "$0")/.."

mkdir -p "$build/demo"
echo "== Figure 2 (Pathways paper): f(v) = (b(a(v)), a(c(a(v)))) on three slices"
"$build/bin/figure2"
echo
echo "== Pipeline training: 4 stages x 2 devices on 4 islands"
"$build/bin/pipeline_training" --status --trace="$build/demo/pipeline_trace.json"
echo
echo "== Data-parallel MLP: the JAX-compiled train step on 4 CPU devices"
dir=$build/demo/mlp
if [ ! -f "$dir/loss.npy" ]; then
  echo "JAX: compiling the train step and recording its reference run..."
  .venv/bin/python tools/mlp_demo_reference.py "$dir" --steps 300
fi
"$build/bin/mlp_demo" "$dir"
