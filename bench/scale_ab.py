#!/usr/bin/env python3
"""Two builds of Causeway against each other on sim devices, in one run:
alternating rounds, each a fresh sim cluster of HOSTS hosts x 4 devices
(bench/scale_bench.py's), 3 s idle (the head's idle CPU), then PROGRAMS
chained 0.1 ms programs of the Figure 5 microbenchmark.

  .venv/bin/python bench/scale_ab.py BEFORE_BUILD AFTER_BUILD HOSTS ROUNDS PROGRAMS

Each build directory needs bin/causeway and bin/figure5_bench. Prints one
JSON line per round and build.
"""
import json, os, subprocess, sys, tempfile, time
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import scale_bench as sb
builds = {"before": sys.argv[1], "after": sys.argv[2]}
hosts, rounds, programs = int(sys.argv[3]), int(sys.argv[4]), int(sys.argv[5])
for rnd in range(rounds):
    for name, build in builds.items():
        t = time.monotonic()
        c = sb.SimCluster(os.path.join(build, "bin", "causeway"), hosts)
        started = time.monotonic() - t
        try:
            b = sb.cpu_seconds(c.head_pid); t0 = time.monotonic()
            time.sleep(3)
            idle = (sb.cpu_seconds(c.head_pid) - b) / (time.monotonic() - t0)
            with tempfile.TemporaryDirectory() as d:
                p = os.path.join(d, "p.hlo"); open(p, "w").write(sb.program(hosts * 4, 100))
                r = subprocess.run([os.path.join(build, "bin", "figure5_bench"), f"--cluster={c.address}",
                                    f"--devices={hosts*4}", f"--programs={p}:{programs}", "--modes=chained",
                                    "--warmup=16", "--sim", f"--head-pid={c.head_pid}",
                                    "--worker-pids=" + ",".join(map(str, c.worker_pids))],
                                   capture_output=True, text=True, timeout=600)
            rows = [json.loads(l) for l in r.stdout.splitlines() if l.startswith("{")]
            row = rows[0] if rows else {}
            print(json.dumps({"round": rnd, "build": name, "hosts": hosts, "started_s": round(started, 2),
                              "head_idle_cpu_fraction": round(idle, 3),
                              "head_cpu_ms_per_program": round(1000 * row.get("head_cpu_s", float("nan")) / programs, 2),
                              "sim_cpu_ms_per_program": round(1000 * row.get("worker_cpu_s", float("nan")) / programs, 2),
                              "ms_per_program": round(1000 * row.get("seconds", float("nan")) / programs, 2),
                              "error": r.stderr.strip()[-300:] if r.returncode else ""}), flush=True)
        finally:
            c.close()
