"""Where a chained small `jax.jit` call through `causeway proxy` spends CPU:
the CPU time per call of every process (the JAX process, the proxy, the head,
the workers) and of their busiest threads, with their voluntary context
switches, read from /proc around N chained calls (proxy_bench.py's step1 and
step4); and, in the same run, the JAX process alone on JAX's CPU backend with
4 host devices (BENCHMARKS.md, "IFRT proxy"). `--devices fetch` measures
proxy_bench.py's scalar fetch instead: N times `jax.device_get(s(x))` of a
jitted sum on one device.

    .venv/bin/python bench/proxy_call_cpu.py [--causeway build/bin/causeway]
        [--calls 5000] [--devices 1,4,fetch] [--threads 10]

Starts `causeway cluster` (1 island x 2 worker processes x 2 devices, with
its proxy). For each device count, a fresh JAX process warms up (200 calls),
waits on stdin, runs --calls chained calls x = f(x) and blocks on the last;
the counters are read around that loop. Linux only (/proc); a figure in
ticks of 10 ms, so run enough calls.
"""
import argparse
import os
import subprocess
import sys

from proxy_cluster import add_causeway_argument, local_env, proxy_cluster, proxy_env
from proxy_train_cpu import cluster_processes, cpu_seconds

SIDE = r"""
import os, sys, time
if os.environ.get("JAX_PLATFORMS") == "proxy":
    import pathwaysutils
    pathwaysutils.initialize()
import jax, numpy as np
from jax.sharding import Mesh, NamedSharding, PartitionSpec as P
step = lambda x: x * 1.0001 + 0.5
devices, calls = sys.argv[1], int(sys.argv[2])
if devices == "fetch":
    x = jax.device_put(np.ones(4, np.float32), jax.devices()[0])
    s = jax.jit(lambda x: x.sum())
    for _ in range(200):
        jax.device_get(s(x))
    print("READY", flush=True)
    sys.stdin.readline()
    began = time.perf_counter()
    for _ in range(calls):
        jax.device_get(s(x))
    print("PER_CALL_US", (time.perf_counter() - began) / calls * 1e6, flush=True)
    sys.stdin.readline()
    sys.exit(0)
devices = int(devices)
if devices == 1:
    x = jax.device_put(np.ones(4, np.float32), jax.devices()[0])
    f = jax.jit(step)
else:
    shard = NamedSharding(Mesh(np.array(jax.devices()[:devices]), ("x",)), P("x"))
    x = jax.device_put(np.ones((8, 128), np.float32), shard)
    f = jax.jit(step, in_shardings=shard, out_shardings=shard)
for _ in range(200):
    x = f(x)
x.block_until_ready()
print("READY", flush=True)
sys.stdin.readline()
began = time.perf_counter()
for _ in range(calls):
    x = f(x)
x.block_until_ready()
print("PER_CALL_US", (time.perf_counter() - began) / calls * 1e6, flush=True)
sys.stdin.readline()
"""


def threads(pid):
    """{tid: (name, CPU seconds, voluntary context switches)}."""
    found = {}
    for tid in os.listdir(f"/proc/{pid}/task"):
        try:
            with open(f"/proc/{pid}/task/{tid}/comm") as f:
                comm = f.read().strip()
            with open(f"/proc/{pid}/task/{tid}/status") as f:
                switches = int(f.read().split("voluntary_ctxt_switches:")[1].split()[0])
            found[tid] = (comm, cpu_seconds(f"/proc/{pid}/task/{tid}/stat"), switches)
        except (OSError, IndexError):
            pass  # The thread ended.
    return found


def measure(env, devices, calls, processes):
    """Runs the side; {process: (CPU µs per call, {thread name: (count, CPU µs
    per call, switches per call)})} and the wall µs per call."""
    jax = subprocess.Popen([sys.executable, "-c", SIDE, str(devices), str(calls)], env=env,
                           stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                           stderr=subprocess.DEVNULL, text=True)
    for line in jax.stdout:
        if line.startswith("READY"):
            break
    watched = {**processes, "JAX process": jax.pid}
    before = {name: (cpu_seconds(f"/proc/{pid}/stat"), threads(pid))
              for name, pid in watched.items()}
    jax.stdin.write("\n")
    jax.stdin.flush()
    per_call = float(jax.stdout.readline().split()[1])
    after = {name: (cpu_seconds(f"/proc/{pid}/stat"), threads(pid))
             for name, pid in watched.items()}
    jax.stdin.write("\n")
    jax.stdin.flush()
    if jax.wait() != 0:
        raise SystemExit("the JAX side failed")
    result = {}
    for name in watched:
        total = (after[name][0] - before[name][0]) / calls * 1e6
        by_name = {}
        for tid, (comm, cpu, switches) in after[name][1].items():
            _, cpu0, switches0 = before[name][1].get(tid, (comm, 0.0, 0))
            count, cpu_sum, switch_sum = by_name.get(comm, (0, 0.0, 0.0))
            by_name[comm] = (count + 1, cpu_sum + (cpu - cpu0) / calls * 1e6,
                             switch_sum + (switches - switches0) / calls)
        result[name] = (total, by_name)
    return result, per_call


def report(title, result, per_call, top):
    print(f"\n**{title}**: {per_call:.1f} µs per call (wall)\n")
    print("| process | CPU µs per call | busiest threads: name ×count (CPU µs, switches per call) |")
    print("|---|---|---|")
    for name, (total, by_name) in result.items():
        busiest = sorted(by_name.items(), key=lambda kv: -kv[1][1])[:top]
        cells = ", ".join(f"{comm} ×{count} ({cpu:.0f}, {switches:.2f})"
                          for comm, (count, cpu, switches) in busiest
                          if cpu > 0 or switches >= 0.05)
        print(f"| {name} | {total:.0f} | {cells} |")
    print(f"| all | {sum(total for total, _ in result.values()):.0f} | |")


def main():
    parser = argparse.ArgumentParser()
    add_causeway_argument(parser)
    parser.add_argument("--calls", type=int, default=5000)
    parser.add_argument("--devices", default="1,4")
    parser.add_argument("--threads", type=int, default=4, help="busiest threads shown")
    args = parser.parse_args()
    device_counts = args.devices.split(",")
    with proxy_cluster(args.causeway, hosts=2, devices_per_host=2,
                       with_pid=True) as (_, proxy, root_pid):
        processes = cluster_processes(root_pid)
        processes.pop("python", None)  # The proxy's compile worker: idle here.
        for devices in device_counts:
            result, per_call = measure(proxy_env(proxy), devices, args.calls, processes)
            what = "scalar fetch" if devices == "fetch" else f"{devices} device(s)"
            report(f"{what}, through the proxy", result, per_call, args.threads)
            result, per_call = measure(local_env(), devices, args.calls, {})
            report(f"{what}, JAX's CPU backend", result, per_call, args.threads)


if __name__ == "__main__":
    main()
