#!/usr/bin/env python3
"""The paper's Figures 5/6 at scale, on sim devices: one head drives H hosts of
4 simulated devices (docs/sim_devices.md), and one client runs the scalar
all-reduce + add microbenchmark on a slice of all 4H devices.

  .venv/bin/python bench/scale_bench.py [--hosts 1,4,16,64,128,256,512]
      [--lengths 0.1,0.3,1,3,10,30,100] [--modes chained,opbyop]
      [--plot bench/scale_utilisation.png] [--json FILE] [--log FILE]

For each H it starts `causeway cluster --device-kind sim --islands 1
--hosts-per-island H --devices-per-host 4` (one sim worker process serving
the H hosts, each with its own stream, heartbeats and data plane) and runs
build/bin/figure5_bench --sim on it: for each program length L, a program
whose modelled time is L (the frontend attribute causeway_sim_us), fed
output to input, "chained" (ProgramTraces of 128 programs, Pathways -C) and
"opbyop" (one Execute per program).

Per (H, L, mode) it reports:
  utilisation  programs x L / wall seconds: the devices' busy time over the
               wall time (1.0 is a device never idle);
  head CPU     the head process's CPU seconds (from /proc) per program, and
               per program per host;
  sim CPU      the sim worker process's CPU seconds per program: what the
               simulator itself costs on this machine (it shares the cores
               with the head).
and per (H, mode) the smallest L at which utilisation is at least 0.95.
Prints JSON lines as it goes, then markdown tables; --plot writes a PNG of
utilisation against L (matplotlib).
"""

import argparse
import json
import os
import signal
import subprocess
import sys
import tempfile
import threading
import time

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)
DEVICES_PER_HOST = 4


def floats(text):
    return [float(v) for v in text.split(",") if v]


def ints(text):
    return [int(v) for v in text.split(",") if v]


def program(n, micros):
    """The Figure 5 program on n partitions, modelled at `micros` us. Its
    second parameter (f32[1,1], unused) is figure5_bench's weights."""
    mesh = f"devices=[{n}]<=[{n}]"
    return f"""HloModule ar_add_{micros}us, num_partitions={n}
max {{
  a = f32[] parameter(0)
  b = f32[] parameter(1)
  ROOT m = f32[] maximum(a, b)
}}
ENTRY main {{
  x = f32[1] parameter(0), sharding={{{mesh}}}
  w = f32[1,1] parameter(1), sharding={{replicated}}
  r = f32[1] all-reduce(x), channel_id=1, replica_groups=[1,{n}]<=[{n}], use_global_device_ids=true, to_apply=max
  one = f32[1] constant({{1}})
  ROOT y = f32[1] add(r, one), sharding={{{mesh}}}, frontend_attributes={{causeway_sim_us="{micros}"}}
}}
"""


def programs_for(length_ms):
    """Enough programs for about 1 s of modelled time, 20 to 200."""
    return max(20, min(200, int(1000 / length_ms)))


def children(pid):
    try:
        with open(f"/proc/{pid}/task/{pid}/children") as f:
            return [int(p) for p in f.read().split()]
    except OSError:
        return []


def cmdline(pid):
    try:
        with open(f"/proc/{pid}/cmdline", "rb") as f:
            return f.read().split(b"\0")
    except OSError:
        return []


class SimCluster:
    """`causeway cluster --device-kind sim` of `hosts` hosts, stopped on exit."""

    def __init__(self, causeway, hosts, worker_timeout=30, timeout=600,
                 log=None, extra=(), keepalive_timeout=None):
        """`log`: a file for the head's and workers' stderr (why a host
        was lost is there); `extra`: more flags for `causeway cluster`.
        `keepalive_timeout` (s): the cluster's `--keepalive-timeout`, and
        what its clients should use; by default 2 s (the commands') up to
        64 hosts, hosts / 32 beyond: one sim process answers the keepalive
        pings of all its hosts' connections on cores it shares with the
        head, and at 512 hosts answers came later than 2 s (BENCHMARKS.md,
        "512 hosts again ...; keepalive breaks it")."""
        if keepalive_timeout is None:
            keepalive_timeout = max(2.0, hosts / 32)
        self.keepalive_timeout = keepalive_timeout
        self.proc = subprocess.Popen(
            [causeway, "cluster", "--device-kind", "sim", "--islands", "1",
             "--hosts-per-island", str(hosts), "--devices-per-host",
             str(DEVICES_PER_HOST), "--memory-per-device", "1G",
             "--http-listen", "127.0.0.1:0",
             "--worker-timeout", str(worker_timeout),
             "--keepalive-timeout", str(keepalive_timeout),
             # A client waiting on a long chain makes no call meanwhile.
             "--session-lease", "600", *extra],
            stdout=subprocess.PIPE,
            stderr=open(log, "w") if log else subprocess.DEVNULL, text=True,
            start_new_session=True)
        self.address = None
        self.http = None
        self.worker_pids = set()
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            line = self.proc.stdout.readline()
            if not line:
                break
            if line.startswith("pid "):
                self.worker_pids.add(int(line.split()[1].rstrip(":")))
            if line.startswith("http listening on "):
                self.http = line.split()[-1]
            if line.startswith("head listening on "):
                self.address = line.split()[-1]
                break
        if self.address is None:
            self.close()
            raise RuntimeError(f"causeway cluster of {hosts} sim hosts did not start")
        threading.Thread(target=self.proc.stdout.read, daemon=True).start()
        self.head_pid = next(p for p in children(self.proc.pid)
                             if b"head" in cmdline(p)[1:2])

    def close(self):
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
            try:
                self.proc.wait(timeout=60)
            except subprocess.TimeoutExpired:
                os.killpg(self.proc.pid, signal.SIGKILL)
                self.proc.wait()


def cpu_seconds(pid):
    with open(f"/proc/{pid}/stat") as f:
        fields = f.read().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def idle_and_status(cluster, hosts, seconds=3.0, fetches=5):
    """The head's CPU while idle (heartbeats, membership) and how long its
    HTTP status view and /metrics take, at this size."""
    import urllib.request
    before, start = cpu_seconds(cluster.head_pid), time.monotonic()
    time.sleep(seconds)  # Measuring an idle period, not waiting for an event.
    idle = (cpu_seconds(cluster.head_pid) - before) / (time.monotonic() - start)
    row = {"bench": "scale_idle", "hosts": hosts, "head_idle_cpu_fraction": idle}
    for path in ("/api/status", "/metrics"):
        times = []
        for _ in range(fetches):
            t = time.monotonic()
            with urllib.request.urlopen(f"http://{cluster.http}{path}", timeout=60) as r:
                size = len(r.read())
            times.append(time.monotonic() - t)
        times.sort()
        row[path + " ms"] = round(1000 * times[len(times) // 2], 2)
        row[path + " bytes"] = size
    print(json.dumps(row), flush=True)
    return row


def run(binary, cluster, hosts, lengths, modes, workdir):
    n = hosts * DEVICES_PER_HOST
    jobs = []
    for length in lengths:
        micros = int(round(length * 1000))
        path = os.path.join(workdir, f"ar_add_{n}_{micros}us.hlo")
        with open(path, "w") as f:
            f.write(program(n, micros))
        jobs.append((path, length))
    cmd = [binary, f"--cluster={cluster.address}", f"--devices={n}",
           "--programs=" + ",".join(f"{p}:{programs_for(l)}" for p, l in jobs),
           "--modes=" + ",".join(modes), "--warmup=16", "--sim",
           f"--keepalive-timeout={cluster.keepalive_timeout}",
           f"--head-pid={cluster.head_pid}",
           "--worker-pids=" + ",".join(map(str, sorted(cluster.worker_pids)))]
    done = subprocess.run(cmd, capture_output=True, text=True, timeout=7200)
    out = done.stdout
    if done.returncode != 0:
        # What it measured before it failed still counts; why it failed is
        # part of the result at this size.
        print(json.dumps({"bench": "scale_error", "hosts": hosts,
                          "error": done.stderr.strip()[-1500:]}), flush=True)
    by_file = {p: l for p, l in jobs}
    rows = []
    for line in out.splitlines():
        if not line.startswith("{"):
            continue
        r = json.loads(line)
        length = by_file[r["file"]]
        programs = r["programs"]
        row = {"bench": "scale", "hosts": hosts, "devices": n, "mode": r["mode"],
               "length_ms": length, "programs": programs, "seconds": r["seconds"],
               "utilisation": programs * length / 1000 / r["seconds"],
               "head_cpu_ms_per_program": 1000 * r["head_cpu_s"] / programs,
               "head_cpu_us_per_program_per_host": 1e6 * r["head_cpu_s"] / programs / hosts,
               "sim_cpu_ms_per_program": 1000 * r["worker_cpu_s"] / programs,
               "client_cpu_ms_per_program": 1000 * r["client_cpu_s"] / programs,
               "load": "%.2f %.2f %.2f" % os.getloadavg()}
        print(json.dumps(row), flush=True)
        rows.append(row)
    return rows


def tables(rows, hosts_list, lengths, modes):
    out = []
    for mode in modes:
        out.append(f"\n**{mode}**: utilisation (busy/wall) per program length; "
                   "the smallest length at >= 95%; CPU per program at the "
                   "shortest length\n")
        out.append("| hosts × 4 | " + " | ".join(f"{l:g} ms" for l in lengths) +
                   " | ≥95% at | head CPU ms/program | head CPU µs/program/host | sim CPU ms/program |")
        out.append("|---" * (len(lengths) + 5) + "|")
        for hosts in hosts_list:
            mine = {r["length_ms"]: r for r in rows
                    if r["hosts"] == hosts and r["mode"] == mode}
            if not mine:
                continue
            cells = [f"{mine[l]['utilisation']:.2f}" if l in mine else "–"
                     for l in lengths]
            good = [l for l in lengths if l in mine and mine[l]["utilisation"] >= 0.95]
            ninety = f"{min(good):g} ms" if good else "none"
            # Head CPU at the shortest length: where dispatch matters most.
            shortest = mine[min(mine)]
            out.append(f"| {hosts} | " + " | ".join(cells) + f" | {ninety} | "
                       f"{shortest['head_cpu_ms_per_program']:.3f} | "
                       f"{shortest['head_cpu_us_per_program_per_host']:.2f} | "
                       f"{shortest['sim_cpu_ms_per_program']:.2f} |")
    return "\n".join(out)


def plot(rows, hosts_list, modes, path):
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    fig, axes = plt.subplots(1, len(modes), figsize=(6 * len(modes), 4.5),
                             sharey=True, squeeze=False)
    for ax, mode in zip(axes[0], modes):
        for hosts in hosts_list:
            mine = sorted((r["length_ms"], r["utilisation"]) for r in rows
                          if r["bench"] == "scale" and r["hosts"] == hosts
                          and r["mode"] == mode)
            if mine:
                ax.plot([m[0] for m in mine], [m[1] for m in mine], marker="o",
                        label=f"{hosts} hosts × 4")
        ax.axhline(0.95, color="grey", linestyle=":", linewidth=1)
        ax.set_xscale("log")
        ax.set_xlabel("program length (ms, modelled)")
        ax.set_title(f"sim devices, {mode}")
        ax.grid(True, which="both", alpha=0.3)
    axes[0][0].set_ylabel("device utilisation (busy / wall)")
    axes[0][0].set_ylim(0, 1.05)
    axes[0][-1].legend(fontsize=8)
    fig.tight_layout()
    fig.savefig(path, dpi=120)


def main():
    signal.signal(signal.SIGTERM, lambda *_: sys.exit("scale_bench: terminated"))
    parser = argparse.ArgumentParser(description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--hosts", default="1,4,16,64,128,256,512")
    parser.add_argument("--lengths", default="0.1,0.3,1,3,10,30,100", help="ms per program")
    parser.add_argument("--modes", default="chained,opbyop")
    parser.add_argument("--worker-timeout", type=float, default=30,
                        help="the head's (s): one sim process answers the "
                        "pings of all its hosts, on cores it shares with the "
                        "head, so the default 3 s declares loaded hosts dead")
    parser.add_argument("--build", default=os.path.join(ROOT, "build"))
    parser.add_argument("--log", help="the head's and workers' stderr, for each host count "
                        "FILE.HOSTS (why a host was lost is there)")
    parser.add_argument("--plot", help="write a PNG of utilisation here")
    parser.add_argument("--json", help="also write every row here, or read them "
                        "from here with --replot")
    parser.add_argument("--replot", action="store_true",
                        help="only redo the tables and the plot from --json")
    args = parser.parse_args()
    hosts_list, lengths, modes = ints(args.hosts), floats(args.lengths), args.modes.split(",")
    if args.replot:
        with open(args.json) as f:
            rows = [json.loads(line) for line in f if line.startswith("{")]
    else:
        binary = os.path.join(args.build, "bin", "figure5_bench")
        causeway = os.path.join(args.build, "bin", "causeway")
        rows = []
        with tempfile.TemporaryDirectory() as workdir:
            for hosts in hosts_list:
                started = time.monotonic()
                cluster = SimCluster(causeway, hosts, args.worker_timeout,
                                     log=f"{args.log}.{hosts}" if args.log else None)
                print(json.dumps({"bench": "scale", "hosts": hosts, "started_s":
                                  round(time.monotonic() - started, 2)}), flush=True)
                try:
                    rows.append(idle_and_status(cluster, hosts))
                    rows += run(binary, cluster, hosts, lengths, modes, workdir)
                finally:
                    cluster.close()
        if args.json:
            with open(args.json, "w") as f:
                for row in rows:
                    f.write(json.dumps(row) + "\n")
    print(tables([r for r in rows if r["bench"] == "scale"], hosts_list, lengths, modes))
    print("\n| hosts × 4 | head CPU idle (heartbeats) | /api/status ms (bytes) | /metrics ms (bytes) |")
    print("|---|---|---|---|")
    for r in rows:
        if r["bench"] == "scale_idle":
            print(f"| {r['hosts']} | {100 * r['head_idle_cpu_fraction']:.1f}% of a core | "
                  f"{r['/api/status ms']} ({r['/api/status bytes']}) | "
                  f"{r['/metrics ms']} ({r['/metrics bytes']}) |")
    if args.plot:
        plot(rows, hosts_list, modes, args.plot)


if __name__ == "__main__":
    main()
