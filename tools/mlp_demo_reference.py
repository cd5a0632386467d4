#!/usr/bin/env python3
"""Writes the reference for the data-parallel MLP training demo.

Usage:
  .venv/bin/python tools/mlp_demo_reference.py DIR [--steps 300]

Writes into DIR:
  program.hlo      the 4-partition data-parallel MLP train step (the same
                   module as tests/corpus/mlp_train_step_dp4): entry
                   parameters w1,b1,w2,b2,w3,b3 (replicated), x, y (batch
                   sharded over the 4 partitions); root tuple: new
                   w1..b3 (replicated) and the loss (replicated f32[]).
  manifest.txt     the corpus manifest of that program (docs/corpus.md).
  param<i>.npy     the initial parameters, global (unsharded) arrays, i = 0..5.
  x.npy, y.npy     the dataset: x f32[steps, 64, 64], y s32[steps, 64]; step s
                   trains on batch s, rows 16p..16p+15 going to partition p.
  loss.npy         f32[steps]: JAX's loss at each step (before its update).
  final_param<i>.npy  the parameters after the last step.

The task: 64-d Gaussian inputs labelled by a fixed random linear teacher
into 10 classes; model 64 -> 128 -> 128 -> 10 with ReLU, softmax
cross-entropy, SGD with learning rate 0.1.
"""

import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import gen_corpus  # noqa: E402  (sets XLA_FLAGS before jax is imported)

import argparse  # noqa: E402

import jax  # noqa: E402
import numpy as np  # noqa: E402
from jax.sharding import NamedSharding  # noqa: E402


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("dir")
    ap.add_argument("--steps", type=int, default=300)
    args = ap.parse_args()

    program = gen_corpus.mlp_train_step_dp4()
    built = gen_corpus.build(program)
    os.makedirs(args.dir, exist_ok=True)
    with open(os.path.join(args.dir, "program.hlo"), "w") as f:
        f.write(built.text)
    with open(os.path.join(args.dir, "manifest.txt"), "w") as f:
        f.write(gen_corpus.manifest_text(built))

    num_params = len(gen_corpus.MLP_SIZES) * 2 - 2
    params = gen_corpus.mlp_params(60, gen_corpus.MLP_SIZES)
    batch = program.args[num_params].shape[0]
    x, y = gen_corpus.mlp_dataset(1000, args.steps, batch)
    for i, p in enumerate(params):
        np.save(os.path.join(args.dir, f"param{i}.npy"), p)
    np.save(os.path.join(args.dir, "x.npy"), x)
    np.save(os.path.join(args.dir, "y.npy"), y)

    _, compiled, _ = gen_corpus.compile_program(program)
    mesh = gen_corpus._mesh_for(program)
    shardings = [NamedSharding(mesh, s) for s in program.in_specs]
    state = [jax.device_put(p, s) for p, s in zip(params, shardings)]
    losses = []
    for step in range(args.steps):
        xb = jax.device_put(x[step], shardings[num_params])
        yb = jax.device_put(y[step], shardings[num_params + 1])
        *state, loss = compiled(*state, xb, yb)
        losses.append(float(loss))
    np.save(os.path.join(args.dir, "loss.npy"), np.array(losses, np.float32))
    for i, p in enumerate(state):
        np.save(os.path.join(args.dir, f"final_param{i}.npy"), np.asarray(p))
    print(f"wrote {args.dir}: {args.steps} steps, loss {losses[0]:.4f} -> {losses[-1]:.4f}")


if __name__ == "__main__":
    main()
