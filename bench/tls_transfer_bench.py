#!/usr/bin/env python3
"""Uploads and fetches through the head, with and without TLS, in the same
run (issue 19: transfers with encryption on, against the same run without).

  .venv/bin/python bench/tls_transfer_bench.py [--mib 64] [--rounds 5]
      [--repeats 3] [--build build]

Starts two `causeway cluster`s of one worker with one device: one in clear,
one with mutual TLS (one self-signed certificate, made here with openssl,
serves as the CA and as the head's, the worker's and the client's
certificate). Each round, for the two clusters in alternation, a fresh
client process connects and times `device_put` + `block_until_ready` of a
MIB MiB f32 array, and `to_numpy` of it, best of REPEATS each. An upload
crosses client -> head (gRPC: TLS or not) -> worker (the data plane, in
clear in both: no token); a fetch the reverse. Prints a JSON line per
(round, side) and a table of medians with the TLS / clear ratio per round.
"""

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)

CLIENT = r"""
import json, sys, time
import numpy as np
import causeway
address, mib, repeats, tls = sys.argv[1], int(sys.argv[2]), int(sys.argv[3]), sys.argv[4:]
kwargs = dict(tls_ca_file=tls[0], tls_cert_file=tls[0], tls_key_file=tls[1]) if tls else {}
causeway.connect(address, connect_timeout=60, **kwargs)
s = causeway.make_virtual_device_set().add_slice(devices=1)
x = np.random.default_rng(0).random((mib << 20) // 4, dtype=np.float32)
put = get = float("inf")
for _ in range(repeats):
    t = time.perf_counter()
    a = causeway.device_put(x, s).block_until_ready(timeout=600)
    put = min(put, time.perf_counter() - t)
    t = time.perf_counter()
    y = a.to_numpy(timeout=600)
    get = min(get, time.perf_counter() - t)
    assert np.array_equal(x, y)
    a.delete()
causeway.disconnect()
print(json.dumps({"put_gbps": x.nbytes / put / 1e9, "get_gbps": x.nbytes / get / 1e9}))
"""


class Cluster:
    def __init__(self, causeway, extra):
        self.proc = subprocess.Popen(
            [causeway, "cluster", "--islands", "1", "--hosts-per-island", "1",
             "--devices-per-host", "1", "--memory-per-device", "4G", *extra],
            stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True)
        self.address = None
        for line in self.proc.stdout:
            if line.startswith("head listening on "):
                self.address = line.split()[-1]
                break
        if self.address is None:
            raise RuntimeError(f"causeway cluster {' '.join(extra)} did not start")

    def close(self):
        self.proc.terminate()
        self.proc.wait(60)


def self_signed(folder):
    cert, key = os.path.join(folder, "cert.pem"), os.path.join(folder, "key.pem")
    subprocess.run(["openssl", "req", "-x509", "-newkey", "rsa:2048", "-nodes", "-days", "1",
                    "-subj", "/CN=127.0.0.1", "-addext", "subjectAltName=IP:127.0.0.1",
                    "-addext", "basicConstraints=critical,CA:TRUE",
                    "-keyout", key, "-out", cert], check=True, capture_output=True, timeout=60)
    return cert, key


def main():
    parser = argparse.ArgumentParser(description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--mib", type=int, default=64)
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--build", default=os.path.join(ROOT, "build"))
    args = parser.parse_args()
    causeway = os.path.join(args.build, "bin", "causeway")
    with tempfile.TemporaryDirectory() as folder:
        cert, key = self_signed(folder)
        clusters = {"clear": Cluster(causeway, []),
                    "tls": Cluster(causeway, ["--tls-cert", cert, "--tls-key", key,
                                              "--tls-ca", cert])}
        try:
            rows = []
            for r in range(args.rounds):
                for side in (("clear", "tls") if r % 2 == 0 else ("tls", "clear")):
                    cmd = [sys.executable, "-c", CLIENT, clusters[side].address,
                           str(args.mib), str(args.repeats)]
                    if side == "tls":
                        cmd += [cert, key]
                    done = subprocess.run(cmd, capture_output=True, text=True, timeout=1800,
                                          check=True)
                    row = dict(json.loads(done.stdout.strip().splitlines()[-1]),
                               round=r, side=side, mib=args.mib,
                               load=os.getloadavg()[0])
                    rows.append(row)
                    print(json.dumps(row), flush=True)
        finally:
            for cluster in clusters.values():
                cluster.close()
    print(f"\n| {args.mib} MiB | clear GB/s | TLS GB/s | TLS / clear (median of rounds) |")
    print("|---|---|---|---|")
    for what in ("put", "get"):
        clear = [x[f"{what}_gbps"] for x in rows if x["side"] == "clear"]
        tls = [x[f"{what}_gbps"] for x in rows if x["side"] == "tls"]
        ratios = [t / c for t, c in zip(tls, clear)]
        print(f"| {what} | {statistics.median(clear):.3f} | {statistics.median(tls):.3f} | "
              f"{statistics.median(ratios):.2f} ({min(ratios):.2f}-{max(ratios):.2f}) |")


if __name__ == "__main__":
    main()
