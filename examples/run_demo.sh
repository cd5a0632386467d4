#!/usr/bin/env bash
# `make demo`: JAX writes the reference run (program, data, its loss curve)
# once; Causeway then trains the same program on four local CPU devices.
set -euo pipefail
build=${1:-build}
cd "$(dirname "$0")/.."
dir=$build/demo/mlp
if [ ! -f "$dir/loss.npy" ]; then
  echo "JAX: compiling the train step and recording its reference run..."
  .venv/bin/python tools/mlp_demo_reference.py "$dir" --steps 300
fi
"$build/bin/mlp_demo" "$dir"
