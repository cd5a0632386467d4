#!/usr/bin/env python3
"""Turns the JSON of bench/run_bench.sh into a markdown table.

Usage: compare.py BUILD ROUNDS [--update BENCHMARKS.md]

For each program and round: XLA's mean wall seconds per step and its
process CPU seconds per step (bench/xla_baseline.py), and Causeway's
(evaluator_bench: real time, and process CPU time over every thread). Each
ratio is XLA time / Causeway time (throughput relative to XLA: 1.0 = equal,
higher is better), taken per round, so both sides of a ratio ran minutes
apart at most; the table shows the median over the rounds and the range.
On a shared machine the CPU-time ratio is the steadier one: a neighbour
that takes the core away stretches wall time, not CPU time.
"""
import argparse
import datetime
import json
import os
import statistics

BEGIN = "<!-- evaluator-vs-xla:begin -->"
END = "<!-- evaluator-vs-xla:end -->"
TARGET = 0.9  # Every program (issue #9).


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("build")
    ap.add_argument("rounds", type=int)
    ap.add_argument("--update")
    ap.add_argument("--note", default="", help="appended to the table's first line")
    args = ap.parse_args()
    rows = {}
    isa = None
    for r in range(1, args.rounds + 1):
        with open(os.path.join(args.build, f"bench-xla-{r}.json")) as f:
            xla = json.load(f)["programs"]
        with open(os.path.join(args.build, f"bench-cw-{r}.json")) as f:
            cw_json = json.load(f)
        isa = cw_json.get("context", {}).get("cpu_isa", isa)
        # ms -> s
        cw = {b["name"].split("/")[0]: (b["real_time"] / 1e3, b["cpu_time"] / 1e3)
              for b in cw_json["benchmarks"]}
        for name, x in xla.items():
            rows.setdefault(name, []).append((x["mean_s"], x["cpu_s"], *cw[name]))
    lines = [
        f"Measured {datetime.date.today()} by `make bench` "
        f"({args.rounds} alternating rounds, both sides pinned to one core"
        + (f"; Causeway's kernels on {isa}" if isa else "") + "). "
        "ms per step of the median round by wall time; ratios are medians "
        "over the rounds [min–max]." + (" " + args.note if args.note else ""),
        "",
        "| program | XLA:CPU ms/step (wall, CPU) | Causeway ms/step (wall, CPU) "
        "| throughput vs XLA, wall | throughput vs XLA, CPU time | target |",
        "|---|---|---|---|---|---|",
    ]
    for name in sorted(rows):
        wall = [xw / cw for xw, _, cw, _ in rows[name]]
        cpu = [xc / cc for _, xc, _, cc in rows[name]]
        med = statistics.median(wall)
        # The round whose wall ratio is the median (the lower middle one for
        # an even count).
        order = sorted(range(len(wall)), key=lambda i: wall[i])
        xw, xc, cw, cc = rows[name][order[(len(order) - 1) // 2]]
        lines.append(
            f"| {name} | {xw*1e3:.3f}, {xc*1e3:.3f} | {cw*1e3:.3f}, {cc*1e3:.3f} "
            f"| {med:.2f}× [{min(wall):.2f}–{max(wall):.2f}] "
            f"| {statistics.median(cpu):.2f}× [{min(cpu):.2f}–{max(cpu):.2f}] "
            f"| ≥ {TARGET:.1f}× |")
    table = "\n".join(lines)
    print(table)
    if args.update:
        text = open(args.update).read() if os.path.exists(args.update) else ""
        block = f"{BEGIN}\n{table}\n{END}"
        if BEGIN in text:
            head, rest = text.split(BEGIN, 1)
            text = head + block + rest.split(END, 1)[1]
        else:
            text += "\n" + block + "\n"
        with open(args.update, "w") as f:
            f.write(text)


if __name__ == "__main__":
    main()
