"""Per-call overhead and small-fetch latency of unmodified JAX through
`causeway proxy`, against causeway.jit on the same cluster and JAX's local CPU
backend, each in its own process, in the same run (BENCHMARKS.md, "IFRT
proxy").

    .venv/bin/python bench/proxy_bench.py [--causeway build/bin/causeway] [--rounds 3]
        [--before OTHER_TREE/build/bin/causeway]

Starts `causeway cluster --islands 1 --hosts-per-island 2 --devices-per-host 2
--proxy-listen 127.0.0.1:0` (two worker processes of two devices each), then
measures, in rounds that alternate the sides:
  * proxy: jax.jit through the proxy (JAX_PLATFORMS=proxy, pathwaysutils);
  * causeway.jit: the Python client connected to the same head;
  * JAX CPU: jax.jit on JAX's CPU backend with 4 host devices.
Figures, best of 5 repetitions within a side's run:
  * step1: a chained small step (x = f(x), 4-element f32, one device), N calls
    then one block_until_ready: microseconds per call;
  * step4: the same on an f32[8, 128] sharded over all 4 devices
    (PartitionSpec("x")), microseconds per call;
  * fetch: jax.device_get (numpy.asarray for causeway.jit) of a scalar
    result of a fresh call: milliseconds per round trip.
Each side's table row is the median over rounds, with the range. --before
adds a side: jax.jit through the proxy of a second cluster from another
build (the binary of another tree), first in every round, for a
before/after comparison under the same machine load.
"""
import argparse
import contextlib

from proxy_cluster import (add_causeway_argument, base_env, local_env, proxy_cluster, proxy_env,
                           run_side, spread)

# Both sides: microseconds per call of x = f(x), chained, best of 5.
CHAINED = r"""
import time

def chained(f, x, calls):
    for _ in range(50):
        x = f(x)
    x.block_until_ready()
    best = None
    for _ in range(5):
        t = time.perf_counter()
        for _ in range(calls):
            x = f(x)
        x.block_until_ready()
        per = (time.perf_counter() - t) / calls * 1e6
        best = per if best is None else min(best, per)
    return best

"""

JAX_SIDE = CHAINED + r"""
import json, os, time
if os.environ.get("JAX_PLATFORMS") == "proxy":
    import pathwaysutils
    pathwaysutils.initialize()
import jax, jax.numpy as jnp, numpy as np
from jax.sharding import Mesh, NamedSharding, PartitionSpec as P

step = lambda x: x * 1.0001 + 0.5
x1 = jax.device_put(np.ones(4, np.float32), jax.devices()[0])
step1 = chained(jax.jit(step), x1, 500)
mesh = Mesh(np.array(jax.devices()[:4]), ("x",))
shard = NamedSharding(mesh, P("x"))
x4 = jax.device_put(np.ones((8, 128), np.float32), shard)
step4 = chained(jax.jit(step, in_shardings=shard, out_shardings=shard), x4, 500)
s = jax.jit(lambda x: x.sum())
jax.device_get(s(x1))
fetch = None
for _ in range(5):
    t = time.perf_counter()
    for _ in range(50):
        jax.device_get(s(x1))
    per = (time.perf_counter() - t) / 50 * 1e3
    fetch = per if fetch is None else min(fetch, per)
print("RESULT " + json.dumps({"step1": step1, "step4": step4, "fetch": fetch}), flush=True)
"""

CAUSEWAY_SIDE = CHAINED + r"""
import json, sys, time
import numpy as np
import causeway
from jax.sharding import PartitionSpec as P
causeway.connect(sys.argv[1])

step = lambda x: x * 1.0001 + 0.5
client = causeway.current_client()
# One session per slice size: the cluster has 4 devices.
with client.session("one device") as session:
    one = session.make_virtual_device_set().add_slice(devices=1)
    x1 = session.device_put(np.ones(4, np.float32), one)
    step1 = chained(causeway.jit(step, devices=one), x1, 500)
    s = causeway.jit(lambda x: x.sum(), devices=one)
    np.asarray(s(x1))
    fetch = None
    for _ in range(5):
        t = time.perf_counter()
        for _ in range(50):
            np.asarray(s(x1))
        per = (time.perf_counter() - t) / 50 * 1e3
        fetch = per if fetch is None else min(fetch, per)
with client.session("four devices") as session:
    four = session.make_virtual_device_set().add_slice(devices=4, mesh={"x": 4})
    x4 = session.device_put(np.ones((8, 128), np.float32), four, P("x"))
    step4 = chained(causeway.jit(step, devices=four, in_shardings=P("x"),
                                 out_shardings=P("x")), x4, 500)
print("RESULT " + json.dumps({"step1": step1, "step4": step4, "fetch": fetch}), flush=True)
"""


def main():
    parser = argparse.ArgumentParser()
    add_causeway_argument(parser)
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--before", help="the causeway binary of another build, whose "
                        "proxy is one more side of every round")
    args = parser.parse_args()
    results = {"proxy": [], "causeway.jit": [], "JAX CPU": []}
    if args.before:
        results = {"proxy, build --before": [], **results}
    with contextlib.ExitStack() as stack:
        if args.before:
            _, before_proxy = stack.enter_context(
                proxy_cluster(args.before, hosts=2, devices_per_host=2))
        head, proxy = stack.enter_context(
            proxy_cluster(args.causeway, hosts=2, devices_per_host=2))
        for _ in range(args.rounds):
            if args.before:
                results["proxy, build --before"].append(
                    run_side(JAX_SIDE, proxy_env(before_proxy)))
            results["proxy"].append(run_side(JAX_SIDE, proxy_env(proxy)))
            results["causeway.jit"].append(run_side(CAUSEWAY_SIDE, base_env(), (head,)))
            results["JAX CPU"].append(run_side(JAX_SIDE, local_env()))

    def cell(side, key, fmt):
        return spread([r[key] for r in results[side]], fmt)

    print(f"{args.rounds} rounds; median (min–max) of each side's best of 5")
    print("| side | step, 1 device (µs/call) | step, 4 devices (µs/call) | "
          "scalar fetch (ms) |")
    print("|---|---|---|---|")
    for side in results:
        print(f"| {side} | {cell(side, 'step1', '{:.1f}')} | "
              f"{cell(side, 'step4', '{:.1f}')} | {cell(side, 'fetch', '{:.3f}')} |")


if __name__ == "__main__":
    main()
