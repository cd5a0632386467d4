#!/usr/bin/env python3
"""The paper's Figure 5: single controller (Causeway) against multi-controller
(JAX), the same programs on the same machine in the same run.

  .venv/bin/python bench/figure5_bench.py [--workers 2,4]
      [--lengths 0.1,0.3,1,3,10] [--repeats 3] [--seconds 1.0] [--n 128]

The program (bench/figure5_jax.py): a scalar all-reduce (max) over N devices
plus an add, with a compute knob: K products of 128x128 f32 matrices in a
fori_loop, fed by the all-reduced value and feeding the add, so a program
takes about L ms on one device. K is calibrated for each L first (XLA:CPU's
CPU time per program on one device, one process). Programs are fed output to
input; both sides check the final value.

For each N (2, 4) it starts one `causeway cluster` of N single-device worker
processes, then alternates, every round:
  JAX      N processes, jax.distributed on localhost, Gloo CPU collectives,
           one Python call per program (multi-controller's only mode). On
           the first round process 0 writes the module XLA compiled for each
           K: the one Causeway runs.
  Causeway build/bin/figure5_bench: one client (client::Connect) drives the
           N-device slice: "chained" (ProgramTraces of 128, Pathways -C) and
           "opbyop" (one Execute per program).
Throughput is programs/s; the ratio Causeway/JAX is taken within each round,
and the table gives medians over the rounds. Prints JSON lines as it goes and
markdown tables last.
"""

import argparse
import json
import os
import signal
import socket
import statistics
import subprocess
import sys
import tempfile
import threading
import time

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)
JAX_SCRIPT = os.path.join(HERE, "figure5_jax.py")
CALIBRATION_KS = [1, 4, 16, 64]


def floats(text):
    return [float(v) for v in text.split(",") if v]


def ints(text):
    return [int(v) for v in text.split(",") if v]


def load():
    return "%.2f %.2f %.2f" % os.getloadavg()


def json_lines(text):
    return [json.loads(line) for line in text.splitlines() if line.startswith("{")]


def calibrate(n, lengths):
    """K per length from XLA:CPU's CPU time per program on one device."""
    out = subprocess.run([sys.executable, JAX_SCRIPT, "calibrate", "--n", str(n),
                          "--ks", ",".join(map(str, CALIBRATION_KS))],
                         check=True, capture_output=True, text=True, timeout=600).stdout
    points = [(r["k"], r["cpu_ms"]) for r in json_lines(out)]
    for r in json_lines(out):
        print(json.dumps(dict(r, bench="figure5", mode="calibrate")), flush=True)
    # Least squares: cpu_ms = a + b * k.
    mk = statistics.mean(k for k, _ in points)
    mc = statistics.mean(c for _, c in points)
    b = sum((k - mk) * (c - mc) for k, c in points) / sum((k - mk) ** 2 for k, _ in points)
    a = mc - b * mk
    return {length: max(1, round((length - a) / b)) for length in lengths}, (a, b)


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def stop(procs):
    for p in procs:
        if p.poll() is None:
            p.kill()
    for p in procs:
        p.wait()


def run_jax(workers, ks, programs, hlo_dir):
    coordinator = f"127.0.0.1:{free_port()}"
    procs = []
    try:
        for i in range(workers):
            cmd = [sys.executable, JAX_SCRIPT, "run", "--coordinator", coordinator,
                   "--num-processes", str(workers), "--process-id", str(i),
                   "--ks", ",".join(map(str, ks)), "--programs", ",".join(map(str, programs))]
            if hlo_dir:
                cmd += ["--hlo-dir", hlo_dir]
            procs.append(subprocess.Popen(cmd, stdout=subprocess.PIPE,
                                          stderr=subprocess.PIPE, text=True))
        outs = []
        for p in procs:
            out, err = p.communicate(timeout=900)
            if p.returncode != 0:
                raise RuntimeError(f"JAX process failed ({p.returncode}): {err[-2000:]}")
            outs.append(json_lines(out))
    finally:
        stop(procs)
    # A program ends when every process has it: the slowest process's time.
    result = {}
    for k in ks:
        rows = [r for out in outs for r in out if r["k"] == k]
        result[k] = {"seconds": max(r["seconds"] for r in rows),
                     "cpu_s": sum(r["cpu_s"] for r in rows),
                     "programs": rows[0]["programs"]}
    return result


def run_causeway(binary, address, workers, files, programs):
    cmd = [binary, f"--cluster={address}", f"--devices={workers}",
           "--programs=" + ",".join(f"{f}:{p}" for f, p in zip(files, programs)),
           "--modes=chained,opbyop"]
    out = subprocess.run(cmd, check=True, capture_output=True, text=True, timeout=1800).stdout
    return json_lines(out)


class Cluster:
    """`causeway cluster` of `workers` single-device workers, stopped on exit."""

    def __init__(self, causeway, workers):
        self.proc = subprocess.Popen(
            [causeway, "cluster", "--islands", "1", "--hosts-per-island", str(workers),
             "--devices-per-host", "1", "--memory-per-device", "1G"],
            stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True,
            start_new_session=True)
        deadline = time.monotonic() + 60
        self.address = None
        while time.monotonic() < deadline:
            line = self.proc.stdout.readline()
            if not line:
                break
            if line.startswith("head listening on "):
                self.address = line.split()[-1]
                break
        if self.address is None:
            self.close()
            raise RuntimeError("causeway cluster did not print its address")
        # Whatever it prints later is read and dropped, so that a full pipe
        # never blocks it.
        threading.Thread(target=self.proc.stdout.read, daemon=True).start()

    def close(self):
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
            try:
                self.proc.wait(timeout=30)
            except subprocess.TimeoutExpired:
                os.killpg(self.proc.pid, signal.SIGKILL)
                self.proc.wait()


def median(values):
    return statistics.median(values) if values else float("nan")


def main():
    signal.signal(signal.SIGTERM, lambda *_: sys.exit("figure5_bench: terminated"))
    parser = argparse.ArgumentParser(description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--workers", default="2,4")
    parser.add_argument("--lengths", default="0.1,0.3,1,3,10", help="ms per program")
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--seconds", type=float, default=1.0,
                        help="about how long one side runs one length (one device per core)")
    parser.add_argument("--n", type=int, default=128)
    parser.add_argument("--build", default=os.path.join(ROOT, "build"))
    args = parser.parse_args()
    lengths = sorted(floats(args.lengths))
    binary = os.path.join(args.build, "bin", "figure5_bench")
    causeway = os.path.join(args.build, "bin", "causeway")
    print(f"# load average at start: {load()}", flush=True)

    ks, (a, b) = calibrate(args.n, lengths)
    print(f"# calibration: XLA:CPU cpu ms per program = {a:.4f} + {b:.4f} * K; "
          f"K per length: {ks}", flush=True)
    order = [ks[length] for length in lengths]
    # Programs per length: about --seconds of compute, a multiple of 128.
    programs = [max(128, min(8192, round(args.seconds * 1e3 / length / 128) * 128))
                for length in lengths]

    tables = []
    with tempfile.TemporaryDirectory(prefix="figure5-") as hlo_dir:
        for workers in ints(args.workers):
            files = [os.path.join(hlo_dir, f"step_n{workers}_k{k}.hlo") for k in order]
            # rounds[r][(side, k)] = programs/s
            rounds = []
            cluster = Cluster(causeway, workers)
            try:
                for r in range(args.repeats):
                    row = {}
                    jax = run_jax(workers, order, programs, hlo_dir if r == 0 else None)
                    for k, v in jax.items():
                        row[("jax", k)] = v["programs"] / v["seconds"]
                        print(json.dumps({"bench": "figure5", "side": "jax", "workers": workers,
                                          "round": r, "k": k, **v}), flush=True)
                    for rec in run_causeway(binary, cluster.address, workers, files, programs):
                        k = order[files.index(rec["file"])]
                        row[(rec["mode"], k)] = rec["programs"] / rec["seconds"]
                        print(json.dumps(dict(rec, side="causeway", workers=workers, round=r,
                                              k=k)), flush=True)
                    rounds.append(row)
            finally:
                cluster.close()
            tables.append((workers, rounds))

    print(f"\n# load average at end: {load()}\n")
    for workers, rounds in tables:
        print(f"N = {workers} (medians of {len(rounds)} rounds; programs/s)\n")
        print("| length (K) | XLA:CPU ms/program, 1 device | JAX multi-controller | "
              "Causeway chained | ratio | Causeway op-by-op | ratio |")
        print("|---|---|---|---|---|---|---|")
        # The smallest length from which on every longer one reaches 0.95x
        # (a dip at a longer length moves it past the dip).
        reached = {"chained": None, "opbyop": None}
        for length, k in zip(lengths, order):
            def med(mode):
                return median([row[(mode, k)] for row in rounds])

            def ratio(mode):
                return median([row[(mode, k)] / row[("jax", k)] for row in rounds])

            for mode in reached:
                if ratio(mode) < 0.95:
                    reached[mode] = None
                elif reached[mode] is None:
                    reached[mode] = length
            print(f"| {length:g} ms ({k}) | {a + b * k:.3f} | {med('jax'):.0f} | "
                  f"{med('chained'):.0f} | {ratio('chained'):.2f}x | {med('opbyop'):.0f} | "
                  f"{ratio('opbyop'):.2f}x |")
        for mode, length in reached.items():
            print(f"\nN = {workers}, {mode}: smallest length from which on Causeway reaches 0.95x JAX: "
                  + (f"{length:g} ms" if length is not None else "none of those measured"))
        print()


if __name__ == "__main__":
    main()
