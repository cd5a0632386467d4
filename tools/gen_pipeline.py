#!/usr/bin/env python3
"""Writes the data and the one-device JAX reference for examples/pipeline_training.

The model: an MLP of four layers (sizes 8 -> 16 -> 16 -> 16 -> 4), tanh after
the first three, mean squared error against the targets, plain SGD. Each step
trains on one batch of B rows (the C++ example cuts it into M micro-batches
and accumulates their gradients, which gives the same update).

Files (all float32 .npy) in the output directory (default
examples/data/pipeline):
  init_w{s}.npy, init_b{s}.npy   initial parameters of stage s = 0..3
  inputs.npy [steps, B, 8], targets.npy [steps, B, 4]
  lr.npy []                      the learning rate
  final_w{s}.npy, final_b{s}.npy JAX's parameters after all steps, on one device
  losses.npy [steps]             JAX's loss of each step, before its update

Usage: .venv/bin/python tools/gen_pipeline.py [out_dir] [--steps 5] [--batch 32]
"""
import argparse
import os

os.environ.setdefault("JAX_PLATFORMS", "cpu")

import jax  # noqa: E402
import jax.numpy as jnp  # noqa: E402
import numpy as np  # noqa: E402

SIZES = [8, 16, 16, 16, 4]
LR = 0.1


def mlp(params, x):
    for s, (w, b) in enumerate(params):
        x = x @ w + b
        if s < len(params) - 1:
            x = jnp.tanh(x)
    return x


def loss_fn(params, x, t):
    return jnp.mean((mlp(params, x) - t) ** 2)


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("out", nargs="?", default="examples/data/pipeline")
    parser.add_argument("--steps", type=int, default=5)
    parser.add_argument("--batch", type=int, default=32)
    args = parser.parse_args()
    os.makedirs(args.out, exist_ok=True)

    rng = np.random.default_rng(20220301)
    params = []
    for din, dout in zip(SIZES[:-1], SIZES[1:]):
        w = (rng.standard_normal((din, dout)) / np.sqrt(din)).astype(np.float32)
        b = (0.1 * rng.standard_normal(dout)).astype(np.float32)
        params.append((w, b))
    inputs = rng.standard_normal((args.steps, args.batch, SIZES[0])).astype(np.float32)
    mix = rng.standard_normal((SIZES[0], SIZES[-1])).astype(np.float32)
    targets = np.sin(inputs @ mix).astype(np.float32)

    def save(name, array):
        np.save(os.path.join(args.out, name), np.asarray(array, dtype=np.float32))

    for s, (w, b) in enumerate(params):
        save(f"init_w{s}.npy", w)
        save(f"init_b{s}.npy", b)
    save("inputs.npy", inputs)
    save("targets.npy", targets)
    save("lr.npy", np.float32(LR))

    step = jax.jit(jax.value_and_grad(loss_fn))
    current = [(jnp.asarray(w), jnp.asarray(b)) for w, b in params]
    losses = []
    for i in range(args.steps):
        loss, grads = step(current, inputs[i], targets[i])
        losses.append(float(loss))
        current = [(w - LR * gw, b - LR * gb)
                   for (w, b), (gw, gb) in zip(current, grads)]
    for s, (w, b) in enumerate(current):
        save(f"final_w{s}.npy", w)
        save(f"final_b{s}.npy", b)
    save("losses.npy", np.array(losses))
    print("losses:", " ".join(f"{l:.6f}" for l in losses))


if __name__ == "__main__":
    main()
