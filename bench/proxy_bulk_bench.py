"""Bulk transfers of unmodified JAX through `causeway proxy`: jax.device_put
and jax.device_get of 256 MiB sharded over 4 worker processes, against raw
TCP on loopback moving the same bytes in the same run (BENCHMARKS.md, "IFRT
proxy").

    .venv/bin/python bench/proxy_bulk_bench.py [--causeway build/bin/causeway] [--rounds 3] [--mib 256]

Starts `causeway cluster --islands 1 --hosts-per-island 4 --devices-per-host 1
--proxy-listen 127.0.0.1:0` (four worker processes of one device each), then
in rounds that alternate the sides:
  * proxy: a JAX process (JAX_PLATFORMS=proxy, pathwaysutils) that puts an
    f32 array of --mib MiB with NamedSharding(P("x")) over the 4 devices
    (device_put + block_until_ready) and gets it back (numpy.asarray of that
    fresh array), best of 3 each;
  * TCP: one process sends the same number of bytes to another over a
    loopback socket (sendall of one buffer, recv_into a preallocated one;
    the receiver answers one byte once it has them all), best of 3.
Prints GB/s per side (median over rounds, with the range) and each proxy
figure as a share of TCP's from the same round.
"""
import argparse
import json
import sys

from proxy_cluster import add_causeway_argument, base_env, proxy_cluster, proxy_env, run_side, spread

PROXY_SIDE = r"""
import json, sys, time
import pathwaysutils
pathwaysutils.initialize()
import jax, numpy as np
from jax.sharding import Mesh, NamedSharding, PartitionSpec as P

nbytes = int(sys.argv[1])
x = np.random.default_rng(0).standard_normal(nbytes // 4, dtype=np.float32).reshape(-1, 4096)
sharding = NamedSharding(Mesh(np.array(jax.devices()[:4]), ("x",)), P("x"))
put = get = None
for i in range(4):  # The first one warms up.
    t = time.perf_counter()
    y = jax.device_put(x, sharding)
    y.block_until_ready()
    t_put = time.perf_counter() - t
    t = time.perf_counter()
    back = np.asarray(y)
    t_get = time.perf_counter() - t
    assert back.shape == x.shape and back[-1, -1] == x[-1, -1]
    if i > 0:
        put = t_put if put is None else min(put, t_put)
        get = t_get if get is None else min(get, t_get)
    del y, back
print("RESULT " + json.dumps({"put": nbytes / put / 1e9, "get": nbytes / get / 1e9}), flush=True)
"""

TCP_SIDE = r"""
import json, socket, subprocess, sys, time

nbytes = int(sys.argv[1])
RECEIVER = '''
import socket, sys
nbytes = int(sys.argv[1])
listener = socket.socket()
listener.bind(("127.0.0.1", 0))
listener.listen(1)
print(listener.getsockname()[1], flush=True)
buffer = bytearray(nbytes)
view = memoryview(buffer)
while True:
    conn, _ = listener.accept()
    if conn.recv(1) != b"g":
        break
    got = 0
    while got < nbytes:
        got += conn.recv_into(view[got:], nbytes - got)
    conn.sendall(b"k")
    conn.close()
'''
receiver = subprocess.Popen([sys.executable, "-c", RECEIVER, str(nbytes)],
                            stdout=subprocess.PIPE, text=True)
port = int(receiver.stdout.readline())
data = bytearray(nbytes)
best = None
try:
    for i in range(4):
        s = socket.create_connection(("127.0.0.1", port))
        t = time.perf_counter()
        s.sendall(b"g")
        s.sendall(data)
        assert s.recv(1) == b"k"
        elapsed = time.perf_counter() - t
        s.close()
        if i > 0:
            best = elapsed if best is None else min(best, elapsed)
finally:
    s = socket.create_connection(("127.0.0.1", port))
    s.sendall(b"q")
    s.close()
    receiver.wait()
print("RESULT " + json.dumps({"tcp": nbytes / best / 1e9}), flush=True)
"""


def main():
    parser = argparse.ArgumentParser()
    add_causeway_argument(parser)
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--mib", type=int, default=256)
    args = parser.parse_args()
    nbytes = args.mib << 20
    rounds = []
    with proxy_cluster(args.causeway, hosts=4, devices_per_host=1) as (_, proxy):
        for _ in range(args.rounds):
            result = run_side(PROXY_SIDE, proxy_env(proxy), (nbytes,))
            result.update(run_side(TCP_SIDE, base_env(), (nbytes,)))
            rounds.append(result)
            print(json.dumps(result), file=sys.stderr, flush=True)

    def row(name, values):
        return f"| {name} | {spread(values)} |"

    print(f"{args.mib} MiB, f32 sharded P('x') over 4 worker processes; GB/s, "
          f"median of {args.rounds} rounds (range)")
    print("| side | GB/s |")
    print("|---|---|")
    print(row("raw TCP on loopback", [r["tcp"] for r in rounds]))
    print(row("proxy device_put", [r["put"] for r in rounds]))
    print(row("proxy device_get", [r["get"] for r in rounds]))
    print(row("device_put / TCP, same round (%)", [100 * r["put"] / r["tcp"] for r in rounds]))
    print(row("device_get / TCP, same round (%)", [100 * r["get"] / r["tcp"] for r in rounds]))


if __name__ == "__main__":
    main()
