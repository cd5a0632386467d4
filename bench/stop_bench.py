"""How long `causeway cluster` (a head and two worker processes) takes to
stop on SIGTERM: with no client; with a Python client that connected, took
a slice, disconnected and still holds the slice (so its gRPC connection to
the head stays open, idle); and with the cluster's proxy serving a JAX
process (jaxlib's proxy client) that holds an array, idle. Rounds
alternate between the cases, and between two builds' binaries with
--baseline.

  .venv/bin/python bench/stop_bench.py [--rounds 5] [--baseline OLD_CAUSEWAY]
"""

import argparse
import re
import subprocess
import sys
import time

from proxy_cluster import add_causeway_argument, proxy_env, spread

# The client: connects, takes a slice, disconnects, keeps the slice, says
# so, and waits for its stdin to close.
CLIENT = """
import sys
import causeway
causeway.connect(sys.argv[1], connect_timeout=60)
held = causeway.make_virtual_device_set().add_slice(devices=2, island=0)
held.ready(timeout=60)
causeway.disconnect()
print("disconnected", flush=True)
sys.stdin.read()
"""

# A JAX process through the proxy, as the other proxy benchmarks reach it:
# holds an array, says so, waits for its stdin to close.
JAX_CLIENT = """
import sys
import pathwaysutils
pathwaysutils.initialize()
import jax.numpy as jnp
held = jnp.arange(8.0) * 2
held.block_until_ready()
print("holding", flush=True)
sys.stdin.read()
"""

CASES = {"none": "none", "python": "a Python client, disconnected, holds a slice",
         "jax": "a JAX process through the proxy, holds an array"}


def stop_time(causeway, case):
    """Seconds from SIGTERM to the cluster's exit."""
    proxy_flags = (["--proxy-listen", "127.0.0.1:0", "--proxy-python", sys.executable]
                   if case == "jax" else [])
    cluster = subprocess.Popen(
        [causeway, "cluster", "--islands", "1", "--hosts-per-island", "2",
         "--devices-per-host", "1", *proxy_flags],
        stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True)
    client = None
    try:
        address = proxy = None
        workers = 0
        for line in cluster.stdout:
            if m := re.match(r"head listening on (\S+)", line):
                address = m.group(1)
            if m := re.match(r"proxy listening on (\S+)", line):
                proxy = m.group(1)
            if re.search(r"worker host \d+ ready", line):
                workers += 1
            if address and workers >= 2 and (proxy or not proxy_flags):
                break
        if address is None:
            raise SystemExit("the cluster did not start")
        if case != "none":
            argv, env, said = (([sys.executable, "-c", CLIENT, address], None, "disconnected")
                               if case == "python" else
                               ([sys.executable, "-c", JAX_CLIENT], proxy_env(proxy), "holding"))
            client = subprocess.Popen(argv, env=env, stdin=subprocess.PIPE,
                                      stdout=subprocess.PIPE, stderr=subprocess.DEVNULL,
                                      text=True)
            if client.stdout.readline().strip() != said:
                raise SystemExit(f"the client ({case}) did not start")
        start = time.monotonic()
        cluster.terminate()
        cluster.wait(60)
        return time.monotonic() - start
    finally:
        if cluster.poll() is None:
            cluster.kill()
            cluster.wait()
        if client is not None:
            client.stdin.close()
            client.wait(60)


def main():
    parser = argparse.ArgumentParser()
    add_causeway_argument(parser)
    parser.add_argument("--baseline", help="another build's causeway binary, measured alike")
    parser.add_argument("--rounds", type=int, default=5)
    args = parser.parse_args()
    binaries = [("this build", args.causeway)]
    if args.baseline:
        binaries.append(("baseline", args.baseline))
    times = {}
    for _ in range(args.rounds):
        for name, binary in binaries:
            for case in CASES:
                times.setdefault((name, case), []).append(stop_time(binary, case))
    print("| binary | client | stop, s: median (min–max) |")
    print("|---|---|---|")
    for (name, case), values in times.items():
        print(f"| {name} | {CASES[case]} | {spread(values, '{:.3f}')} |")


if __name__ == "__main__":
    main()
