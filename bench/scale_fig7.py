#!/usr/bin/env python3
"""The paper's Figure 7 on sim devices: parallel against sequential
dispatch of a chain of S stages, each a program on another host's 4
devices, its output copied to the next stage.

  .venv/bin/python bench/scale_fig7.py [--stages 1,4,16,64,128,256,512]
      [--length-ms 0.1] [--programs 256] [--plot bench/scale_fig7.png]
      [--json FILE] [--replot]

For each S it starts a sim cluster of S hosts x 4 devices
(bench/scale_bench.py's SimCluster) and runs build/bin/figure7_bench on it:
S slices of 4 devices, the stage program (a 4-device all-reduce + add,
modelled at --length-ms), max(3, programs / S) chains per mode after one
of warm-up.
Reports programs per second (S x chains / wall seconds) and the head's CPU
per program.
"""

import argparse
import json
import os
import signal
import subprocess
import sys
import tempfile
import time

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
import scale_bench as sb  # noqa: E402


def stage_program(micros):
    """One stage: f32[4] over 4 devices, all-reduce (max), plus one."""
    mesh = "devices=[4]<=[4]"
    return f"""HloModule stage_{micros}us, num_partitions=4
max {{
  a = f32[] parameter(0)
  b = f32[] parameter(1)
  ROOT m = f32[] maximum(a, b)
}}
ENTRY main {{
  x = f32[1] parameter(0), sharding={{{mesh}}}
  r = f32[1] all-reduce(x), channel_id=1, replica_groups=[1,4]<=[4], use_global_device_ids=true, to_apply=max
  one = f32[1] constant({{1}})
  ROOT y = f32[1] add(r, one), sharding={{{mesh}}}, frontend_attributes={{causeway_sim_us="{micros}"}}
}}
"""


def run(binary, cluster, stages, micros, chains, workdir):
    path = os.path.join(workdir, f"stage_{micros}us.hlo")
    with open(path, "w") as f:
        f.write(stage_program(micros))
    done = subprocess.run(
        [binary, f"--cluster={cluster.address}", f"--stages={stages}",
         f"--program={path}", f"--chains={chains}", "--warmup=1",
         f"--head-pid={cluster.head_pid}",
         f"--keepalive-timeout={cluster.keepalive_timeout}"],
        capture_output=True, text=True, timeout=3600)
    rows = []
    for line in done.stdout.splitlines():
        if line.startswith("{"):
            r = json.loads(line)
            r.update({"bench": "scale_fig7", "length_ms": micros / 1000,
                      "head_cpu_ms_per_program": 1000 * r["head_cpu_s"] / r["programs"],
                      "load": "%.2f %.2f %.2f" % os.getloadavg()})
            print(json.dumps(r), flush=True)
            rows.append(r)
    if done.returncode != 0:
        print(json.dumps({"bench": "scale_fig7_error", "stages": stages,
                          "error": done.stderr.strip()[-1500:]}), flush=True)
    return rows


def plot(rows, path):
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    fig, ax = plt.subplots(figsize=(6, 4.5))
    for mode in ("parallel", "sequential"):
        mine = sorted((r["stages"], r["programs_per_second"]) for r in rows
                      if r["mode"] == mode)
        if mine:
            ax.plot([m[0] for m in mine], [m[1] for m in mine], marker="o",
                    label=f"{mode} dispatch")
    ax.set_xscale("log", base=2)
    ax.set_yscale("log")
    ax.set_xlabel("pipeline stages (one host x 4 sim devices each)")
    ax.set_ylabel("programs per second")
    ax.set_title("Figure 7 on sim devices")
    ax.grid(True, which="both", alpha=0.3)
    ax.legend()
    fig.tight_layout()
    fig.savefig(path, dpi=120)


def main():
    signal.signal(signal.SIGTERM, lambda *_: sys.exit("scale_fig7: terminated"))
    parser = argparse.ArgumentParser(description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--stages", default="1,4,16,64,128,256,512")
    parser.add_argument("--length-ms", type=float, default=0.1)
    parser.add_argument("--programs", type=int, default=256,
                        help="about this many programs per mode and S: "
                        "max(3, programs / S) chains")
    parser.add_argument("--build", default=os.path.join(sb.ROOT, "build"))
    parser.add_argument("--plot")
    parser.add_argument("--json")
    parser.add_argument("--replot", action="store_true")
    args = parser.parse_args()
    if args.replot:
        with open(args.json) as f:
            rows = [json.loads(l) for l in f if l.startswith("{")]
    else:
        rows = []
        binary = os.path.join(args.build, "bin", "figure7_bench")
        causeway = os.path.join(args.build, "bin", "causeway")
        micros = int(round(args.length_ms * 1000))
        with tempfile.TemporaryDirectory() as workdir:
            for stages in sb.ints(args.stages):
                cluster = sb.SimCluster(causeway, stages)
                try:
                    chains = max(3, args.programs // stages)
                    rows += run(binary, cluster, stages, micros, chains, workdir)
                finally:
                    cluster.close()
        if args.json:
            with open(args.json, "w") as f:
                for r in rows:
                    f.write(json.dumps(r) + "\n")
    rows = [r for r in rows if r.get("bench") == "scale_fig7"]
    print("\n| stages | parallel programs/s | sequential programs/s | parallel ÷ sequential | head CPU ms/program (parallel / sequential) | hosts per stage | load |")
    print("|---|---|---|---|---|---|---|")
    for stages in sorted({r["stages"] for r in rows}):
        by = {r["mode"]: r for r in rows if r["stages"] == stages}
        p, s = by.get("parallel"), by.get("sequential")
        ratio = f"{p['programs_per_second'] / s['programs_per_second']:.1f}" if p and s else "–"
        print(f"| {stages} | {p['programs_per_second']:.1f} | " if p else f"| {stages} | – | ", end="")
        print(f"{s['programs_per_second']:.1f} | " if s else "– | ", end="")
        print(f"{ratio} | {p['head_cpu_ms_per_program'] if p else float('nan'):.2f} / "
              f"{s['head_cpu_ms_per_program'] if s else float('nan'):.2f} | "
              f"{(p or s).get('hosts_per_stage', '–')} | {(p or s)['load']} |")
    if args.plot:
        plot(rows, args.plot)


if __name__ == "__main__":
    main()
