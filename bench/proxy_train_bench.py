"""Training through `causeway proxy`: examples/python/train_lm.py's model
written as plain JAX (jax.jit of its Adam step on a 2 x 2 "data" x "model"
mesh), run unmodified through the proxy and on JAX's own CPU backend with 4
host devices, in the same run (BENCHMARKS.md, "IFRT proxy").

    .venv/bin/python bench/proxy_train_bench.py [--causeway build/bin/causeway] [--rounds 3] [--steps 30]
        [--before OTHER_TREE/build/bin/causeway]

Starts `causeway cluster --islands 1 --hosts-per-island 2 --devices-per-host 2
--proxy-listen 127.0.0.1:0` (the mesh over two worker processes), then runs
rounds that alternate the sides, each side in a fresh process: one compiling
step, then --steps steps timed (each step's batch uploaded, the loss of the
last one fetched), as bench/python_bench.py's `lm` side does. Reports
tokens/s per side (median over rounds, range), the ratio proxy / JAX of each
round, and the process CPU time per step of the JAX process (for the proxy
side: the client's alone; the cluster's processes run beside it).

--before runs a second cluster from another build (the binary of another
tree, whose python/causeway/_proxy_compile.py its proxy uses) as one more
side of every round, before this build's: a before/after comparison under
the same machine load.
"""
import argparse
import contextlib
import json
import os
import sys

from proxy_cluster import (ROOT, add_causeway_argument, local_env, proxy_cluster, proxy_env,
                           run_side, spread)

EXAMPLES = os.path.join(ROOT, "examples", "python")

SIDE = r"""
import json, os, sys, time
if os.environ.get("JAX_PLATFORMS") == "proxy":
    import pathwaysutils
    pathwaysutils.initialize()
import jax, numpy as np
from jax.sharding import Mesh, NamedSharding, PartitionSpec as P
sys.path.insert(0, sys.argv[1])
import train_lm as lm

steps = int(sys.argv[2])
config = lm.Config()
corpus = lm.Corpus(lm.stdlib_text(1 << 20))
params = lm.init_params(config, corpus.vocab_size)
mesh = Mesh(np.array(jax.devices()[:4]).reshape(2, 2), ("data", "model"))
named = lambda specs: jax.tree.map(lambda s: NamedSharding(mesh, s), specs,
                                   is_leaf=lambda s: isinstance(s, P))
specs = lm.param_specs(params)
shardings = (named(specs), named(lm.opt_specs(specs)), NamedSharding(mesh, P("data", None)))
step = jax.jit(lm.make_step(config), in_shardings=shardings,
               out_shardings=(shardings[0], shardings[1], NamedSharding(mesh, P())))
state = [jax.device_put(params, shardings[0]), jax.device_put(lm.init_opt(params), shardings[1])]

def run(k):
    state[0], state[1], loss = step(state[0], state[1], corpus.batch(config, k))
    return loss

first = float(run(0))  # Compiles.
began, began_cpu = time.perf_counter(), time.process_time()
for k in range(1, steps + 1):
    loss = run(k)
final = float(loss)
elapsed = time.perf_counter() - began
print("RESULT " + json.dumps({
    "tokens_per_s": steps * config.batch * config.seq_len / elapsed,
    "cpu_ms_per_step": 1e3 * (time.process_time() - began_cpu) / steps,
    "first_loss": first, "loss": final}), flush=True)
"""


def main():
    parser = argparse.ArgumentParser()
    add_causeway_argument(parser)
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--steps", type=int, default=30)
    parser.add_argument("--before", help="the causeway binary of another build, run as a "
                        "baseline side in every round")
    args = parser.parse_args()
    proxied, local, before = [], [], []
    with contextlib.ExitStack() as stack:
        if args.before:
            _, before_proxy = stack.enter_context(
                proxy_cluster(args.before, hosts=2, devices_per_host=2))
        _, proxy = stack.enter_context(
            proxy_cluster(args.causeway, hosts=2, devices_per_host=2))
        for _ in range(args.rounds):
            if args.before:
                before.append(run_side(SIDE, proxy_env(before_proxy), (EXAMPLES, args.steps)))
            proxied.append(run_side(SIDE, proxy_env(proxy), (EXAMPLES, args.steps)))
            local.append(run_side(SIDE, local_env(), (EXAMPLES, args.steps)))
            print(json.dumps({"before": before[-1:], "proxy": proxied[-1], "jax": local[-1]}),
                  file=sys.stderr, flush=True)
    print(f"train_lm's model, {args.steps} steps after the compiling one, median of "
          f"{args.rounds} rounds (range)")
    print("| side | tokens/s | JAX process CPU ms per step | final loss |")
    print("|---|---|---|---|")
    if before:
        print(f"| proxy, build --before | {spread([r['tokens_per_s'] for r in before])} | "
              f"{spread([r['cpu_ms_per_step'] for r in before])} | {before[-1]['loss']:.6f} |")
    print(f"| proxy (2 worker processes x 2 devices) | "
          f"{spread([r['tokens_per_s'] for r in proxied])} | "
          f"{spread([r['cpu_ms_per_step'] for r in proxied])} | {proxied[-1]['loss']:.6f} |")
    print(f"| JAX CPU backend (4 host devices) | {spread([r['tokens_per_s'] for r in local])} | "
          f"{spread([r['cpu_ms_per_step'] for r in local])} | {local[-1]['loss']:.6f} |")
    print(f"| ratio proxy / JAX, same round | "
          f"{spread([p['tokens_per_s'] / l['tokens_per_s'] for p, l in zip(proxied, local)])} | | |")
    if before:
        print(f"| ratio proxy --before / JAX, same round | "
              f"{spread([b['tokens_per_s'] / l['tokens_per_s'] for b, l in zip(before, local)])} | | |")


if __name__ == "__main__":
    main()
