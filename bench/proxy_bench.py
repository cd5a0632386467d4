"""Per-call overhead of unmodified JAX through `causeway proxy`, against JAX's
local CPU backend in the same run (BENCHMARKS.md, "IFRT proxy").

    .venv/bin/python bench/proxy_bench.py [--causeway build/bin/causeway]

Starts `causeway cluster --islands 1 --hosts-per-island 2 --devices-per-host 2
--proxy-listen 127.0.0.1:0`, then runs the same measurement in two JAX
processes: one on the proxy (JAX_PLATFORMS=proxy, through pathwaysutils),
one on JAX's CPU backend with 4 host devices. Measures
  * a chained small jax.jit step (x = f(x), 4-element f32, one device),
    N calls then one block_until_ready: microseconds per call;
  * jax.device_get of a scalar jit result: milliseconds per round trip.
"""
import argparse
import json
import os
import re
import subprocess
import sys
import time

CHILD = r"""
import json, os, time
if os.environ.get("JAX_PLATFORMS") == "proxy":
    import pathwaysutils
    pathwaysutils.initialize()
import jax, jax.numpy as jnp, numpy as np
f = jax.jit(lambda x: x * 1.0001 + 0.5)
x = jax.device_put(np.ones(4, np.float32), jax.devices()[0])
for _ in range(50):
    x = f(x)
x.block_until_ready()
best = None
for _ in range(5):
    t = time.perf_counter()
    for _ in range(500):
        x = f(x)
    x.block_until_ready()
    per = (time.perf_counter() - t) / 500 * 1e6
    best = per if best is None else min(best, per)
s = jax.jit(lambda x: x.sum())
v = s(x); jax.device_get(v)
fetch = None
for _ in range(5):
    t = time.perf_counter()
    for _ in range(50):
        jax.device_get(s(x))
    per = (time.perf_counter() - t) / 50 * 1e3
    fetch = per if fetch is None else min(fetch, per)
print("RESULT " + json.dumps({"jit_us": best, "fetch_ms": fetch}), flush=True)
"""


def run_child(env):
    out = subprocess.run([sys.executable, "-c", CHILD], env=env, capture_output=True,
                         text=True, timeout=600)
    for line in out.stdout.splitlines():
        if line.startswith("RESULT "):
            return json.loads(line[7:])
    raise SystemExit(f"measurement failed:\n{out.stdout}\n{out.stderr[-4000:]}")


def main():
    root = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
    parser = argparse.ArgumentParser()
    parser.add_argument("--causeway", default=os.path.join(root, "build", "bin", "causeway"))
    args = parser.parse_args()
    cluster = subprocess.Popen(
        [args.causeway, "cluster", "--islands", "1", "--hosts-per-island", "2",
         "--devices-per-host", "2", "--proxy-listen", "127.0.0.1:0",
         "--proxy-python", sys.executable],
        stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True)
    try:
        address = None
        for line in cluster.stdout:
            m = re.match(r"proxy listening on (\S+)", line)
            if m:
                address = m.group(1)
                break
        if address is None:
            raise SystemExit("the cluster's proxy did not start")
        base = dict(os.environ)
        base.pop("XLA_FLAGS", None)
        proxy = run_child(dict(base, JAX_PLATFORMS="proxy",
                               JAX_BACKEND_TARGET=f"grpc://{address}",
                               IFRT_PROXY_USE_INSECURE_GRPC_CREDENTIALS="true"))
        local = run_child(dict(base, JAX_PLATFORMS="cpu",
                               XLA_FLAGS="--xla_force_host_platform_device_count=4"))
    finally:
        cluster.terminate()
        cluster.wait(30)
    print(f"chained jit step, per call:  proxy {proxy['jit_us']:.1f} us   "
          f"JAX CPU backend {local['jit_us']:.1f} us")
    print(f"device_get of a scalar:      proxy {proxy['fetch_ms']:.3f} ms   "
          f"JAX CPU backend {local['fetch_ms']:.3f} ms")


if __name__ == "__main__":
    main()
