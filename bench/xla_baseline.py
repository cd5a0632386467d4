#!/usr/bin/env python3
"""Times XLA:CPU, single-threaded, on the benchmark programs.

Usage:
  .venv/bin/python tools/gen_corpus.py --bench-only --out /tmp/cw-bench
  .venv/bin/python bench/xla_baseline.py /tmp/cw-bench [--steps N]

For every program directory under DIR (as written by gen_corpus.py
--bench-only), compiles program.mlir (the StableHLO that JAX lowered; XLA
compiles it to the module in program.hlo), runs it on the in<i>.npy inputs,
checks the results against out<i>.npy, and prints one JSON object:

  {"threads": 1, "programs": {"mlp_train_step_1": {"mean_s": ..., "min_s": ...,
   "steps": N, "cpu_s": ..., "cpu_over_wall": ..., "same_module": true}, ...}}

(cpu_s: the process's CPU time per step, all threads).

(each program runs at least --steps steps and at least half a second).

Single-threaded means: the process is pinned to one core before XLA starts
(os.sched_setaffinity, like `taskset -c 0`), so however many threads XLA:CPU
starts, they share one core. The script checks that the process's CPU time
does not exceed its wall time by more than 10%. It does not pass
--xla_cpu_multi_thread_eigen=false: in JAX 0.10.2 that flag changes the
compiled module itself (other dot and transpose fusions), and the point is to
time the module in program.hlo ("same_module" in the output checks this).
"""

import os
import sys

# Pin before XLA creates its thread pools.
os.sched_setaffinity(0, {sorted(os.sched_getaffinity(0))[0]})
os.environ.pop("XLA_FLAGS", None)
os.environ["JAX_PLATFORMS"] = "cpu"

import argparse  # noqa: E402
import json  # noqa: E402
import time  # noqa: E402

import jax  # noqa: E402
import jaxlib._hlo as hlo_lib  # noqa: E402
import ml_dtypes  # noqa: E402
import numpy as np  # noqa: E402
from jax._src import xla_bridge  # noqa: E402
from jax._src.lib import xla_client  # noqa: E402


def load_npy(path):
    a = np.load(path)
    if a.dtype == np.dtype("V2"):
        a = a.view(ml_dtypes.bfloat16)
    return a


def read_manifest(path):
    inputs, outputs, partitions = [], [], 1
    with open(path) as f:
        for line in f:
            fields = line.split()
            if not fields or fields[0].startswith("#"):
                continue
            if fields[0] == "partitions":
                partitions = int(fields[1])
            elif fields[0] == "input":
                inputs.append(fields[1])
            elif fields[0] == "output":
                outputs.append((fields[1], float(fields[4]), float(fields[5])))
    return partitions, inputs, outputs


def time_program(directory, steps):
    partitions, inputs, outputs = read_manifest(os.path.join(directory, "manifest.txt"))
    if partitions != 1:
        raise SystemExit(f"{directory}: only single-partition programs are timed (got {partitions})")
    backend = xla_bridge.get_backend("cpu")
    device = backend.local_devices()[0]
    with open(os.path.join(directory, "program.mlir")) as f:
        mlir = f.read()
    executable = backend.compile_and_load(mlir, [device], xla_client.CompileOptions())
    # Stacked arrays: slice 0 is the one partition's buffer.
    args = [jax.device_put(load_npy(os.path.join(directory, name))[0], device) for name in inputs]

    def run():
        results = executable.execute_sharded(args)
        arrays = results.disassemble_into_single_device_arrays()
        for per_device in arrays:
            per_device[0].block_until_ready()
        return [per_device[0] for per_device in arrays]

    got = run()  # warm-up, and the check
    for (name, rtol, atol), value in zip(outputs, got):
        want = load_npy(os.path.join(directory, name))[0]
        value = np.asarray(value)
        if want.dtype.kind == "f" or want.dtype == ml_dtypes.bfloat16:
            ok = np.allclose(value.astype(np.float64), want.astype(np.float64), rtol=rtol, atol=atol, equal_nan=True)
        else:
            ok = np.array_equal(value, want)
        if not ok:
            raise SystemExit(f"{directory}: output {name} differs from the reference")
    times = []
    cpu0 = time.process_time()
    wall0 = time.perf_counter()
    # At least `steps` steps and half a second, so that CPU time is measurable.
    while len(times) < steps or time.perf_counter() - wall0 < 0.5:
        t0 = time.perf_counter()
        run()
        times.append(time.perf_counter() - t0)
    wall = time.perf_counter() - wall0
    cpu = time.process_time() - cpu0
    return {"mean_s": sum(times) / len(times), "min_s": min(times), "steps": len(times),
            "cpu_s": cpu / len(times),
            "cpu_over_wall": round(cpu / wall, 3),
            "same_module": same_module(executable, os.path.join(directory, "program.hlo"))}


def opcode_counts(module):
    counts = {}
    for computation in module.computations():
        for instruction in computation.instructions():
            key = str(instruction.opcode)
            counts[key] = counts.get(key, 0) + 1
    return counts


def same_module(executable, hlo_path):
    """Whether XLA compiled program.mlir to the module in program.hlo (by
    opcode counts; names and metadata may differ)."""
    with open(hlo_path) as f:
        written = hlo_lib.hlo_module_from_text(f.read())
    return opcode_counts(executable.hlo_modules()[0]) == opcode_counts(written)


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("dir")
    ap.add_argument("--steps", type=int, default=20)
    ap.add_argument("--only", nargs="*")
    args = ap.parse_args()
    names = args.only or sorted(d for d in os.listdir(args.dir)
                                if os.path.exists(os.path.join(args.dir, d, "program.mlir")))
    programs = {}
    for name in names:
        programs[name] = time_program(os.path.join(args.dir, name), args.steps)
        if programs[name]["cpu_over_wall"] > 1.1:
            raise SystemExit(f"{name}: used {programs[name]['cpu_over_wall']}x CPU per wall second; "
                             "XLA is not single-threaded")
    print(json.dumps({"threads": 1, "jax": jax.__version__, "programs": programs}, indent=1))


if __name__ == "__main__":
    main()
