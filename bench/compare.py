#!/usr/bin/env python3
"""Turns the JSON of bench/run_bench.sh into a markdown table.

Usage: compare.py BUILD ROUNDS [--update BENCHMARKS.md]

For each program and round: XLA's mean seconds per step
(bench/xla_baseline.py) and Causeway's (executor_bench, real time). The
ratio is XLA time / Causeway time (throughput relative to XLA: 1.0 = equal,
higher is better), per round; the table shows the median round.
"""
import argparse
import datetime
import json
import os
import statistics

BEGIN = "<!-- executor-vs-xla:begin -->"
END = "<!-- executor-vs-xla:end -->"
TARGETS = {"mlp_train_step_1": 0.5, "transformer_train_step_1": 0.5,
           "matmul_1024": 0.9}


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("build")
    ap.add_argument("rounds", type=int)
    ap.add_argument("--update")
    args = ap.parse_args()
    rows = {}
    for r in range(1, args.rounds + 1):
        with open(os.path.join(args.build, f"bench-xla-{r}.json")) as f:
            xla = json.load(f)["programs"]
        with open(os.path.join(args.build, f"bench-cw-{r}.json")) as f:
            cw = {b["name"].split("/")[0]: b["real_time"] / 1e3
                  for b in json.load(f)["benchmarks"]}  # ms -> s
        for name, x in xla.items():
            rows.setdefault(name, []).append((x["mean_s"], cw[name]))
    lines = [
        f"Measured {datetime.date.today()} by `make bench` "
        f"({args.rounds} alternating rounds, both sides pinned to one core; "
        "median round shown).",
        "",
        "| program | XLA:CPU ms/step | Causeway ms/step | throughput vs XLA "
        "(median, [min–max]) | target |",
        "|---|---|---|---|---|",
    ]
    for name in sorted(rows):
        ratios = [x / c for x, c in rows[name]]
        med = statistics.median(ratios)
        x, c = rows[name][ratios.index(med)] if med in ratios else rows[name][0]
        lines.append(
            f"| {name} | {x*1e3:.3f} | {c*1e3:.3f} | {med:.2f}× "
            f"[{min(ratios):.2f}–{max(ratios):.2f}] | "
            + (f"≥ {TARGETS[name]:.1f}×" if name in TARGETS else "none set")
            + " |")
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
