"""The proxy's compile cache: how long a JAX process waits for a compile
request the proxy has answered before, for another JAX process
(BENCHMARKS.md, "IFRT proxy").

    .venv/bin/python bench/proxy_compile_bench.py [--causeway build/bin/causeway] [--processes 4]

Starts `causeway cluster --islands 1 --hosts-per-island 2 --devices-per-host 2
--proxy-listen 127.0.0.1:0`, then runs --processes JAX processes one after
another (JAX_PLATFORMS=proxy, pathwaysutils, which turns JAX's own
compilation cache off). Each lowers the same two programs, examples/python/
train_lm.py's training step on a 2 x 2 mesh and a small elementwise one, and
times `lowered.compile()` alone (not JAX's tracing or lowering) and, within
it, the backend's compile call (jax._src.compiler.backend_compile_and_load:
for the proxy, the client's serialization, the Compile request and the
proxy's answer). The first process
compiles (the compile worker partitions the program with XLA); the later ones
find it in the proxy's cache. In the same run, for scale: the same
`lowered.compile()` on JAX's own CPU backend with 4 host devices, in a fresh
process (no cache). Then the same processes again with the head keeping no
program once its last executable is gone (`--program-cache-bytes 0`), as
before the head kept any: later processes then find the program in the
proxy's cache but the head parses its HLO again. 'proxy' is the proxy's own
answer, from the Compile request to the executable loaded on the workers,
read from the line it logs for each compile. Milliseconds.
"""
import argparse
import collections
import os
import re
import tempfile

from proxy_cluster import (ROOT, add_causeway_argument, local_env, proxy_cluster, proxy_env,
                           run_side, spread)

EXAMPLES = os.path.join(ROOT, "examples", "python")

SIDE = r"""
import json, os, sys, time
if os.environ.get("JAX_PLATFORMS") == "proxy":
    import pathwaysutils
    pathwaysutils.initialize()
import jax, jax.numpy as jnp, numpy as np
from jax.sharding import Mesh, NamedSharding, PartitionSpec as P
sys.path.insert(0, sys.argv[1])
import train_lm

config = train_lm.Config()
corpus_vocab = 96
params = train_lm.init_params(config, corpus_vocab)
opt = train_lm.init_opt(params)
mesh = Mesh(np.array(jax.devices()[:4]).reshape(2, 2), ("data", "model"))
named = lambda specs: jax.tree.map(lambda s: NamedSharding(mesh, s), specs,
                                   is_leaf=lambda s: isinstance(s, P))
specs = train_lm.param_specs(params)
shardings = (named(specs), named(train_lm.opt_specs(specs)), NamedSharding(mesh, P("data", None)))
step = jax.jit(train_lm.make_step(config), in_shardings=shardings,
               out_shardings=(shardings[0], shardings[1], NamedSharding(mesh, P())))
batch = np.zeros((config.batch, config.seq_len + 1), np.int32)
# The backend's own compile call (for the proxy: the Compile request and its
# answer, with the program's serialization in the client), timed apart from
# what JAX does around it.
from jax._src import compiler
backend_ms = []
_compile_and_load = compiler.backend_compile_and_load
def _timed(*args, **kwargs):
    t = time.perf_counter()
    try:
        return _compile_and_load(*args, **kwargs)
    finally:
        backend_ms.append((time.perf_counter() - t) * 1e3)
compiler.backend_compile_and_load = _timed
lowered_step = step.lower(params, opt, batch)
lowered_small = jax.jit(lambda x: jnp.tanh(x) * 2 + 1).lower(np.ones((8, 8), np.float32))
result = {}
for name, lowered in (("step", lowered_step), ("small", lowered_small)):
    t = time.perf_counter()
    lowered.compile()
    result[name] = (time.perf_counter() - t) * 1e3
    result[name + "_backend"] = backend_ms[-1]
print("RESULT " + json.dumps(result), flush=True)
"""


def main():
    parser = argparse.ArgumentParser()
    add_causeway_argument(parser)
    parser.add_argument("--processes", type=int, default=4)
    args = parser.parse_args()
    runs = {}
    for label, flags in (("kept (64 MiB)", ()), ("none kept", ("--program-cache-bytes", "0"))):
        with tempfile.TemporaryFile("w+") as log:
            with proxy_cluster(args.causeway, hosts=2, devices_per_host=2,
                               flags=flags, log=log) as (_, proxy):
                runs[label] = [run_side(SIDE, proxy_env(proxy), (EXAMPLES,))
                               for _ in range(args.processes)]
            log.seek(0)
            add_proxy_answers(log.read(), runs[label])
    local = run_side(SIDE, local_env(), (EXAMPLES,))
    print("ms, each JAX process fresh; 'backend' is the backend's compile call alone "
          "(through the proxy: the Compile request answered), 'compile()' all of "
          "lowered.compile()")
    print("| program | figure | head keeps | proxy, first process (compiles) | proxy, later "
          "processes (cache; median, range) | JAX CPU backend, fresh process |")
    print("|---|---|---|---|---|---|")
    for name, label in (("step", "train_lm step, 2x2 mesh"), ("small", "tanh(x)*2+1, f32[8,8]")):
        for key, figure in ((name + "_proxy", "proxy"), (name + "_backend", "backend"),
                            (name, "compile()")):
            for kept, proxied in runs.items():
                later = [p[key] for p in proxied[1:]]
                baseline = f"{local[key]:.1f}" if key in local else "–"
                print(f"| {label} | {figure} | {kept} | {proxied[0][key]:.1f} | {spread(later)} "
                      f"| {baseline} |")


def add_proxy_answers(log, processes):
    """The proxy's own time for each process's two compiles, from its log:
    each JAX process is one proxy session, and the step and the small
    program are the last two it compiles."""
    by_session = collections.defaultdict(list)
    for session, ms in re.findall(r"proxy: session (\d+) compiled .* in ([\d.]+) ms", log):
        by_session[int(session)].append(float(ms))
    sessions = sorted(by_session)
    if len(sessions) != len(processes):
        raise SystemExit(f"the proxy logged compiles of {len(sessions)} sessions, "
                         f"not {len(processes)}")
    for process, session in zip(processes, sessions):
        process["step_proxy"], process["small_proxy"] = by_session[session][-2:]


if __name__ == "__main__":
    main()
