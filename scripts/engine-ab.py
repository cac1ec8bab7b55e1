#!/usr/bin/python3
"""Interleaved A/B of two bertbench binaries' `bench` throughput (issue 23's "no slower" check).

For every round and every point (model x batch x mode x dtype), runs `bench` with binary A and then
binary B (the order alternates between rounds), reads sequences/s from each JSON report, and prints
per point the median of the per-round ratios B/A with their spread (min..max), then the geometric
mean of the medians and the lowest median. Writes the table as Markdown with --markdown=FILE.

  scripts/engine-ab.py --a=build-regress-base/bertbench --b=build/bertbench \
      --models=tiny,mini,base --batches=1,8,32 --rounds=5
"""
import argparse
import json
import math
import os
import statistics
import subprocess
import sys
import tempfile


def run_point(binary, point, args, tmp):
    model, batch, mode, dtype = point
    out = os.path.join(tmp, "r.json")
    cmd = [binary, "bench", f"--model={model}", f"--batch_size={batch}", f"--mode={mode}",
           f"--dtype={dtype}", f"--seq_len={args.seq_len}", f"--threads={args.threads}",
           f"--steps={args.steps}", f"--warmup={args.warmup}", f"--min_time={args.min_time}",
           "--noceiling", f"--json={out}"]
    r = subprocess.run(cmd, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
    if r.returncode != 0:
        sys.exit(f"engine-ab: {' '.join(cmd)} exited {r.returncode}: {r.stderr.strip()[-400:]}")
    with open(out) as f:
        return json.load(f)["points"][0]["sequences_per_second"]


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--a", required=True, help="the baseline bertbench binary")
    ap.add_argument("--b", required=True, help="the bertbench binary under test")
    ap.add_argument("--models", default="tiny,mini,base")
    ap.add_argument("--batches", default="1,8,32")
    ap.add_argument("--modes", default="train,infer")
    ap.add_argument("--dtypes", default="fp32,bf16")
    ap.add_argument("--seq_len", type=int, default=128)
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--rounds", type=int, default=5)
    ap.add_argument("--steps", type=int, default=5)
    ap.add_argument("--warmup", type=int, default=2)
    ap.add_argument("--min_time", type=float, default=1.0)
    ap.add_argument("--markdown", default="", help="also write the table here")
    args = ap.parse_args()
    for b in (args.a, args.b):
        if not os.access(b, os.X_OK):
            sys.exit(f"engine-ab: {b}: not an executable bertbench")
    points = [(m, int(b), mode, d) for m in args.models.split(",") for b in args.batches.split(",")
              for mode in args.modes.split(",") for d in args.dtypes.split(",")]
    ratios = {p: [] for p in points}
    with tempfile.TemporaryDirectory() as tmp:
        for rnd in range(args.rounds):
            for i, p in enumerate(points):
                order = [("a", args.a), ("b", args.b)]
                if (rnd + i) % 2:
                    order.reverse()
                got = {side: run_point(binary, p, args, tmp) for side, binary in order}
                ratios[p].append(got["b"] / got["a"])
                print(f"round {rnd + 1}/{args.rounds} {p[0]} b{p[1]} {p[2]} {p[3]}: "
                      f"A {got['a']:.2f} B {got['b']:.2f} seq/s, B/A {ratios[p][-1]:.3f}", file=sys.stderr)
    lines = ["| model | batch | mode | dtype | median B/A | min..max |", "|---|---|---|---|---|---|"]
    medians = []
    for p in points:
        med = statistics.median(ratios[p])
        medians.append(med)
        lines.append(f"| {p[0]} | {p[1]} | {p[2]} | {p[3]} | {med:.3f} | "
                     f"{min(ratios[p]):.3f}..{max(ratios[p]):.3f} |")
    geo = math.exp(sum(math.log(m) for m in medians) / len(medians))
    lines.append("")
    lines.append(f"geometric mean of the {len(medians)} medians: {geo:.3f}; lowest median: {min(medians):.3f} "
                 f"({args.rounds} rounds, seq {args.seq_len}, {args.threads} threads)")
    print("\n".join(lines))
    if args.markdown:
        with open(args.markdown, "w") as f:
            f.write("\n".join(lines) + "\n")


if __name__ == "__main__":
    main()
