#!/usr/bin/env python3
"""The JAX side of the Figure 5 benchmark (bench/figure5_bench.py runs it).

The program: one step of the paper's microbenchmark with a compute knob, on
N devices (one per process):

  r = all-reduce(max) of the scalar x       (each device holds x: f32[1])
  m = r * w                                 (w: f32[n, n], all 1/n)
  m = m @ w, K times (lax.fori_loop)        (the knob: K sets the length)
  y = m[0, 0] * n + 1

Every element of m stays r / n exactly (n a power of two, r a small
integer), so after P programs fed output to input x == P exactly: both
sides check it.

Modes:
  calibrate --n N --ks K1,K2,...
      one process, one device: prints {"k": K, "cpu_ms": ...} per K, the CPU
      time one program's compute takes on XLA:CPU (no collective).
  run --coordinator HOST:PORT --num-processes N --process-id I
      --n N --ks K1,... --programs P1,... [--hlo-dir DIR]
      one of N multi-controller processes (jax.distributed with Gloo CPU
      collectives): for each K, compiles the step over the N processes'
      devices, runs a warm-up, then P programs back to back from Python
      (JAX's only mode: one call per program, dispatched asynchronously),
      and prints {"k", "programs", "seconds", "cpu_s"} per K. With
      --hlo-dir, process 0 writes the optimized, partitioned module XLA
      compiled for each K (step_n<N>_k<K>.hlo): what Causeway runs.
"""

import os
import sys

os.environ["JAX_PLATFORMS"] = "cpu"
os.environ.pop("XLA_FLAGS", None)  # One CPU device per process.

import argparse  # noqa: E402
import json  # noqa: E402
import time  # noqa: E402

WARMUP = 16


def parse_ints(text):
    return [int(v) for v in text.split(",") if v]


def make_step(jax, jnp, lax, mesh, n, k, P):
    def body(x, w):
        r = lax.pmax(x, "x")  # f32[1] on each device
        m = r.reshape(1, 1) * w
        m = lax.fori_loop(0, k, lambda i, m: m @ w, m)
        return m[0, 0:1] * n + 1

    return jax.jit(jax.shard_map(body, mesh=mesh, in_specs=(P("x"), P()),
                                 out_specs=P("x")))


def with_output_sharding(text, sharding):
    """The module with its root annotated with the output's sharding: XLA
    prints the parameters' shardings in a partitioned module but not the
    root's, which Causeway reads from the text (as the causeway package's
    jit does, python/causeway/_compile.py)."""
    lines = text.split("\n")
    entry = next(i for i, line in enumerate(lines) if line.startswith("ENTRY "))
    root = next(i for i in range(entry, len(lines)) if lines[i].lstrip().startswith("ROOT "))
    lines[root] += f", sharding={sharding}"
    return "\n".join(lines)


def timed(fn, x, w, count):
    """Feeds x = fn(x, w) WARMUP times, then `count` times timed; returns
    the last x, the timed part's wall seconds and this process's CPU
    seconds."""
    for _ in range(WARMUP):
        x = fn(x, w)
    x.block_until_ready()
    c0 = time.process_time()
    t0 = time.perf_counter()
    for _ in range(count):
        x = fn(x, w)
    x.block_until_ready()
    return x, time.perf_counter() - t0, time.process_time() - c0


def calibrate(args):
    import jax
    import jax.numpy as jnp
    import numpy as np
    from jax import lax

    n = args.n
    w = jnp.full((n, n), 1.0 / n, jnp.float32)
    for k in parse_ints(args.ks):
        @jax.jit
        def compute(x, w, k=k):
            m = x.reshape(1, 1) * w
            m = lax.fori_loop(0, k, lambda i, m: m @ w, m)
            return m[0, 0:1] * n + 1

        steps = max(20, int(2000 / max(k, 1)))
        x, wall, cpu = timed(compute, jnp.zeros((1,), jnp.float32), w, steps)
        if float(np.asarray(x)[0]) != WARMUP + steps:
            sys.exit(f"calibrate: k={k}: got {np.asarray(x)[0]}, want {WARMUP + steps}")
        print(json.dumps({"k": k, "cpu_ms": cpu * 1e3 / steps,
                          "wall_ms": wall * 1e3 / steps}), flush=True)


def run(args):
    import jax

    jax.config.update("jax_cpu_collectives_implementation", "gloo")
    jax.distributed.initialize(coordinator_address=args.coordinator,
                               num_processes=args.num_processes,
                               process_id=args.process_id,
                               initialization_timeout=120)
    import jax.numpy as jnp  # noqa: F401
    import jaxlib._hlo as hlo_lib
    import numpy as np
    from jax import lax
    from jax.sharding import Mesh, NamedSharding
    from jax.sharding import PartitionSpec as P

    devices = jax.devices()
    if len(devices) != args.num_processes or len(jax.local_devices()) != 1:
        sys.exit(f"want one device per process, got {len(devices)} global, "
                 f"{len(jax.local_devices())} local")
    mesh = Mesh(np.array(devices), ("x",))
    n = args.n
    x_sharding = NamedSharding(mesh, P("x"))
    w = jax.make_array_from_callback(
        (n, n), NamedSharding(mesh, P()),
        lambda idx: np.full((n, n), 1.0 / n, np.float32)[idx])
    options = hlo_lib.HloPrintOptions()
    options.print_large_constants = True
    for k, programs in zip(parse_ints(args.ks), parse_ints(args.programs)):
        step = make_step(jax, None, lax, mesh, n, k, P)
        x = jax.make_array_from_callback(
            (args.num_processes,), x_sharding,
            lambda idx: np.zeros((1,), np.float32))
        compiled = step.lower(x, w).compile()
        if args.hlo_dir and args.process_id == 0:
            modules = compiled.runtime_executable().hlo_modules()
            if len(modules) != 1:
                sys.exit(f"k={k}: expected one module, got {len(modules)}")
            text = with_output_sharding(
                modules[0].to_string(options),
                str(compiled.output_shardings._to_xla_hlo_sharding(1)))
            path = os.path.join(args.hlo_dir, f"step_n{args.num_processes}_k{k}.hlo")
            with open(path, "w") as f:
                f.write(text)
        x, seconds, cpu = timed(step, x, w, programs)
        got = float(np.asarray(x.addressable_shards[0].data)[0])
        if got != WARMUP + programs:
            sys.exit(f"k={k}: got {got}, want {WARMUP + programs}")
        print(json.dumps({"process": args.process_id, "k": k, "programs": programs,
                          "seconds": seconds, "cpu_s": cpu}), flush=True)
    jax.distributed.shutdown()


def main():
    parser = argparse.ArgumentParser(description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("mode", choices=["calibrate", "run"])
    parser.add_argument("--n", type=int, default=128)
    parser.add_argument("--ks", required=True)
    parser.add_argument("--programs", default="")
    parser.add_argument("--coordinator")
    parser.add_argument("--num-processes", type=int)
    parser.add_argument("--process-id", type=int)
    parser.add_argument("--hlo-dir")
    args = parser.parse_args()
    if args.n < 1 or args.n & (args.n - 1):
        sys.exit("--n must be a power of two (the check relies on exact sums)")
    if args.mode == "calibrate":
        calibrate(args)
    else:
        if len(parse_ints(args.ks)) != len(parse_ints(args.programs)):
            sys.exit("--ks and --programs need the same number of entries")
        run(args)


if __name__ == "__main__":
    main()
