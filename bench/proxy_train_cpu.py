"""Where a training step through `causeway proxy` spends CPU: the CPU time
per step of every process of the cluster (head, workers, proxy) and of its
busiest threads, read from /proc around the timed steps of
bench/proxy_train_bench.py's side (a process's figure includes threads that
ended meanwhile; the threads listed are those alive at both readings) (BENCHMARKS.md, "IFRT proxy").

    .venv/bin/python bench/proxy_train_cpu.py [--causeway build/bin/causeway] [--steps 30] [--threads 8]

Starts the same `causeway cluster` (1 island x 2 worker processes x 2
devices, with its proxy), runs the side in a fresh JAX process up to its
timed loop, reads the CPU times, runs the --steps steps and reads them
again. Linux only (/proc). Device threads are named devN; the Gloo I/O
thread and gRPC's threads keep the process's name.
"""
import argparse
import json
import os
import subprocess
import sys

from proxy_cluster import add_causeway_argument, proxy_cluster, proxy_env
from proxy_train_bench import EXAMPLES, SIDE

TICKS = os.sysconf("SC_CLK_TCK")


def cpu_seconds(stat_path):
    """utime + stime of a /proc/.../stat file, in seconds."""
    with open(stat_path) as f:
        fields = f.read().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / TICKS


def cluster_processes(root_pid):
    """{name: pid} of the cluster's processes: head, worker0.., proxy."""
    out = subprocess.run(["ps", "-o", "pid=,args=", "--ppid", str(root_pid)],
                         capture_output=True, text=True, check=True).stdout
    found, workers = {}, 0
    for line in out.splitlines():
        pid, args = line.split(None, 1)
        command = args.split()[1] if len(args.split()) > 1 else args
        if command == "worker":
            command, workers = f"worker{workers}", workers + 1
        found[command] = int(pid)
    return found


def thread_times(processes):
    """{(process, tid, thread name): CPU seconds} of every thread."""
    times = {}
    for name, pid in processes.items():
        for tid in os.listdir(f"/proc/{pid}/task"):
            try:
                with open(f"/proc/{pid}/task/{tid}/comm") as f:
                    comm = f.read().strip()
                times[(name, tid, comm)] = cpu_seconds(f"/proc/{pid}/task/{tid}/stat")
            except OSError:
                pass  # The thread ended.
    return times


def main():
    parser = argparse.ArgumentParser()
    add_causeway_argument(parser)
    parser.add_argument("--steps", type=int, default=30)
    parser.add_argument("--threads", type=int, default=8, help="busiest threads shown")
    args = parser.parse_args()
    # The side waits on stdin before its timed loop, so that the counters
    # are read around the timed steps only.
    side = SIDE.replace("began, began_cpu = ",
                        "print('READY', flush=True); sys.stdin.readline()\n"
                        "began, began_cpu = ")
    with proxy_cluster(args.causeway, hosts=2, devices_per_host=2,
                       with_pid=True) as (_, proxy, root_pid):
        jax = subprocess.Popen([sys.executable, "-c", side, EXAMPLES, str(args.steps)],
                               env=proxy_env(proxy), stdin=subprocess.PIPE,
                               stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True)
        for line in jax.stdout:
            if line.startswith("READY"):
                break
        processes = cluster_processes(root_pid)
        before = thread_times(processes)
        before_total = {name: cpu_seconds(f"/proc/{pid}/stat") for name, pid in processes.items()}
        jax.stdin.write("\n")
        jax.stdin.flush()
        out = jax.stdout.read()
        after = thread_times(processes)
        after_total = {name: cpu_seconds(f"/proc/{pid}/stat") for name, pid in processes.items()}
        if jax.wait() != 0 or "RESULT " not in out:
            raise SystemExit(f"the side failed:\n{out}")
    result = json.loads(out.split("RESULT ", 1)[1].splitlines()[0])
    per_step = {key: 1e3 * (after[key] - before.get(key, 0.0)) / args.steps for key in after}
    print(f"{args.steps} steps: {result['tokens_per_s']:,.0f} tokens/s, JAX process "
          f"{result['cpu_ms_per_step']:.2f} CPU ms per step")
    print("| process | CPU ms per step |")
    print("|---|---|")
    for name in processes:
        total = 1e3 * (after_total[name] - before_total[name]) / args.steps
        print(f"| {name} | {total:.1f} |")
    print("| thread | CPU ms per step |")
    print("|---|---|")
    for (process, tid, comm), value in sorted(per_step.items(), key=lambda kv: -kv[1])[
            :args.threads]:
        print(f"| {process} {comm} ({tid}) | {value:.1f} |")


if __name__ == "__main__":
    main()
