#!/usr/bin/env python3
"""The head's CPU per message against the number of worker connections, at a
fixed message rate (issue 18: does gRPC's cost per message grow with the
connections?).

  .venv/bin/python bench/scale_message_cost.py [--hosts 64,128,256,512]
      [--rate 1000] [--seconds 5] [--rounds 2] [--build build]

For each H it starts `causeway cluster --device-kind sim` of H hosts twice
(alternating, --rounds times): once with the heartbeat interval H/rate, so
that the head sends `rate` pings a second in all (each a write to one
worker's stream and a pong read back from it), and once with an interval of
1000 s (no pings: what the H idle connections cost by themselves: gRPC's
keepalives, the head's own timers). The difference between the head's CPU
rates of the two, over `seconds` of an idle cluster, divided by the rate, is
the head's CPU per ping and pong; the same for the sim process. Prints JSON
lines, then a table.
"""

import argparse
import json
import os
import sys
import time

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
import scale_bench  # noqa: E402


def cpu_rate(cluster, seconds):
    sim = sorted(cluster.worker_pids)[0]
    head0, sim0 = (scale_bench.cpu_seconds(cluster.head_pid),
                   scale_bench.cpu_seconds(sim))
    start = time.monotonic()
    time.sleep(seconds)  # Measuring an idle period, not waiting for an event.
    wall = time.monotonic() - start
    return ((scale_bench.cpu_seconds(cluster.head_pid) - head0) / wall,
            (scale_bench.cpu_seconds(sim) - sim0) / wall)


def measure(causeway, hosts, interval, seconds):
    cluster = scale_bench.SimCluster(
        causeway, hosts, worker_timeout=max(60, 4 * interval),
        extra=("--heartbeat-interval", f"{interval:g}"))
    try:
        time.sleep(2)  # Registration's own work settles first.
        return cpu_rate(cluster, seconds)
    finally:
        cluster.close()


def main():
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--hosts", default="64,128,256,512")
    parser.add_argument("--rate", type=float, default=1000,
                        help="pings per second, over all hosts")
    parser.add_argument("--seconds", type=float, default=5)
    parser.add_argument("--rounds", type=int, default=2)
    parser.add_argument("--build", default=os.path.join(os.path.dirname(HERE), "build"))
    args = parser.parse_args()
    causeway = os.path.join(args.build, "bin", "causeway")
    rows = []
    for hosts in scale_bench.ints(args.hosts):
        for round_ in range(args.rounds):
            busy = measure(causeway, hosts, hosts / args.rate, args.seconds)
            quiet = measure(causeway, hosts, 1000, args.seconds)
            row = {"bench": "scale_message_cost", "hosts": hosts, "round": round_,
                   "rate": args.rate,
                   "head_cores_pinging": busy[0], "head_cores_quiet": quiet[0],
                   "head_us_per_ping": 1e6 * (busy[0] - quiet[0]) / args.rate,
                   "sim_cores_pinging": busy[1], "sim_cores_quiet": quiet[1],
                   "sim_us_per_ping": 1e6 * (busy[1] - quiet[1]) / args.rate,
                   "load": "%.1f" % os.getloadavg()[0]}
            print(json.dumps(row), flush=True)
            rows.append(row)
    print("\n| hosts | round | load | head cores, pinging / quiet | head µs per ping | "
          "sim cores, pinging / quiet | sim µs per ping |")
    print("|---|---|---|---|---|---|---|")
    for r in rows:
        print(f"| {r['hosts']} | {r['round']} | {r['load']} | "
              f"{r['head_cores_pinging']:.3f} / {r['head_cores_quiet']:.3f} | "
              f"{r['head_us_per_ping']:.1f} | "
              f"{r['sim_cores_pinging']:.3f} / {r['sim_cores_quiet']:.3f} | "
              f"{r['sim_us_per_ping']:.1f} |")


if __name__ == "__main__":
    main()
