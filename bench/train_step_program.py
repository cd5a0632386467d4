"""Writes the training step of bench/proxy_train_bench.py (train_lm's model
as plain JAX, jax.jit of its Adam step on a 2 x 2 "data" x "model" mesh) as
the partitioned module XLA compiles for 4 CPU devices, with the compile
options the proxy's compile worker adds (python/causeway/_proxy_compile.py),
and its inputs after one step, in evaluator_bench's format:

    .venv/bin/python bench/train_step_program.py --out DIR
    build/bin/evaluator_bench DIR          # DIR/train_lm_step_4/...

DIR/train_lm_step_4/program.hlo and in<i>.npy, each input stacked with a
leading partition axis (row p is partition p's shard), so that
evaluator_bench runs one step as 4 partitions on 4 threads with in-process
collectives: what a step costs the executor, without the cluster around
it (BENCHMARKS.md, "IFRT proxy").
"""
import argparse
import os
import sys

os.environ["JAX_PLATFORMS"] = "cpu"
os.environ["XLA_FLAGS"] = "--xla_force_host_platform_device_count=4"

import jax  # noqa: E402
import jaxlib._hlo as hlo_lib  # noqa: E402
import numpy as np  # noqa: E402
from jax.sharding import Mesh, NamedSharding, PartitionSpec as P  # noqa: E402

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, os.path.join(ROOT, "examples", "python"))
import train_lm as lm  # noqa: E402

# What _proxy_compile.py adds to the client's options.
PROXY_OPTIONS = {"xla_backend_optimization_level": 0,
                 "xla_llvm_disable_expensive_passes": True}


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--out", required=True)
    args = parser.parse_args()
    config = lm.Config()
    corpus = lm.Corpus(lm.stdlib_text(1 << 20))
    params = lm.init_params(config, corpus.vocab_size)
    mesh = Mesh(np.array(jax.devices()[:4]).reshape(2, 2), ("data", "model"))
    named = lambda specs: jax.tree.map(lambda s: NamedSharding(mesh, s), specs,  # noqa: E731
                                       is_leaf=lambda s: isinstance(s, P))
    specs = lm.param_specs(params)
    shardings = (named(specs), named(lm.opt_specs(specs)),
                 NamedSharding(mesh, P("data", None)))
    step = jax.jit(lm.make_step(config), in_shardings=shardings,
                   out_shardings=(shardings[0], shardings[1], NamedSharding(mesh, P())),
                   keep_unused=True)
    state = [jax.device_put(params, shardings[0]),
             jax.device_put(lm.init_opt(params), shardings[1])]
    state[0], state[1], _ = step(state[0], state[1], corpus.batch(config, 0))
    inputs = (state[0], state[1], jax.device_put(corpus.batch(config, 1), shardings[2]))
    compiled = step.lower(*inputs).compile(PROXY_OPTIONS)
    runtime = compiled.runtime_executable()
    (module,) = runtime.hlo_modules()
    options = hlo_lib.HloPrintOptions()
    options.print_large_constants = True
    text = module.to_string(options)
    order = [d.id for d in runtime.local_devices()]  # partition p runs on order[p]
    leaves = jax.tree.leaves(inputs)
    entry = text[text.index("\nENTRY "):]
    entry = entry[:entry.index("\n}")]
    if entry.count(" parameter(") != len(leaves):
        raise SystemExit(f"the module's entry has {entry.count(' parameter(')} parameters, "
                         f"the step {len(leaves)} inputs")
    out = os.path.join(args.out, "train_lm_step_4")
    os.makedirs(out, exist_ok=True)
    with open(os.path.join(out, "program.hlo"), "w") as f:
        f.write(text)
    for i, leaf in enumerate(leaves):
        shards = {s.device.id: np.asarray(s.data) for s in leaf.addressable_shards}
        np.save(os.path.join(out, f"in{i}.npy"), np.stack([shards[d] for d in order]),
                allow_pickle=False)
    print(f"wrote {out}: {len(leaves)} inputs, {len(text.splitlines())} lines")


if __name__ == "__main__":
    main()
