#!/usr/bin/python3
"""Time to train, bertbench against PyTorch (issue 27 §2): the same recipe, the same initial weights,
the same records in the same order, the same evaluation, run to the same target.

    /usr/bin/python3 scripts/ttt_compare.py --bertbench=build/bertbench --out=runs/ttt-compare \\
        --seeds=1,2,3 --impls=bertbench-fp32,bertbench-bf16,torch-fp32,torch-bf16 \\
        [--doc=docs/PERFORMANCE-ttt.md] -- <pretrain flags both take>

For every seed, bench/peer/torch_ttt.py --write_init draws the initial weights (modeling.py's
initialisation from that seed) and every implementation starts from them (--init_checkpoint), with
--seed=<seed> for the data order. The implementations run one after another, their order rotated
from seed to seed (interleaved, so a change in the machine's load spreads over all of them);
PyTorch runs in the environment where it is fastest for each precision (TORCH_ENV below).
The flags after `--` go to both programs unchanged: the recipe (bert_config_file, input_file,
eval_input_file, batch, sequence, optimizer, schedule, evaluation cadence, target, threads).
bertbench's own extras (checkpoint cadence) are added here; torch_ttt.py refuses a flag it does
not know, so a recipe cannot silently differ.

Writes OUT/<impl>/seed-<s>/ (each run's results.json and logs), OUT/summary.json, OUT/curves.svg
(held-out masked-LM accuracy against samples and against seconds, every run) and, with --doc,
the Markdown table: per implementation the median and range of the time and the samples to target
over the seeds, its training sequences/s, and the ratio of PyTorch's median time to bertbench's."""
import argparse
import json
import math
import os
import platform
import shlex
import statistics
import subprocess
import sys
import time

import openblas_env  # scripts/, beside this file

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
PEER = os.path.join(ROOT, "bench", "peer", "torch_ttt.py")
IMPLS = ("bertbench-fp32", "bertbench-bf16", "torch-fp32", "torch-bf16")
# PyTorch at its strongest here, per precision (measured on this recipe, 2 threads): the OpenMP
# OpenBLAS for both, with OpenMP's default (active) waiting. On a Zen 5 with AVX-512, 2026-12-02
# (700-step runs, sequences/s): fp32 715-734 (with the AVX-512 kernels below), 590-600 with passive
# waiting, 162 with Debian's default pthread OpenBLAS; bf16 autocast 842, 763-775 with the default
# OpenBLAS (its GEMMs are oneDNN's; the fp32 rest is BLAS's). Runs before 2026-12-02 used passive
# waiting for fp32 and the default environment for bf16, chosen on another host.
# Where Debian's OpenBLAS does not know the CPU, its AVX-512 kernels by name (scripts/openblas_env.py).
TORCH_ENV = {impl: openblas_env.with_core_override({"LD_LIBRARY_PATH": "/usr/lib/x86_64-linux-gnu/openblas-openmp"})
             for impl in ("torch-fp32", "torch-bf16")}
COLORS = {"bertbench-fp32": "#1f77b4", "bertbench-bf16": "#2ca02c", "torch-fp32": "#d62728", "torch-bf16": "#ff7f0e"}


def die(msg):
    sys.exit("ttt_compare.py: " + msg)


def command(a, impl, seed, init, out):
    kind, dtype = impl.split("-")
    if kind == "bertbench":
        cmd = [a.bertbench, "pretrain", "--save_checkpoints_steps=100000000", "--keep_checkpoint_max=1"]
        cmd += shlex.split(a.bertbench_flags)
    else:
        cmd = [sys.executable, PEER]
    return cmd + a.flags + ["--dtype=" + dtype, "--seed=%d" % seed, "--init_checkpoint=" + init, "--output_dir=" + out]


def status_of(out):
    """OUT/results.json's status (None without a readable one), and whether it is of a run that
    ended (at the target, short of it, or failed after run_start); a run paused by a signal or
    --stop_steps is resumed by running it again."""
    try:
        status = str(json.load(open(os.path.join(out, "results.json"))).get("status", ""))
    except (OSError, ValueError, AttributeError):
        return None, False
    return status, not (status == "interrupted" or status.startswith("stopped"))


def read_run(out):
    try:
        res = json.load(open(os.path.join(out, "results.json")))
        curve = [json.loads(l) for l in open(os.path.join(out, "eval_log.jsonl"))]
    except (OSError, ValueError) as e:
        die("%s: expected results.json and eval_log.jsonl of a finished run, got %s" % (out, e))
    sps = res.get("train_sequences_per_second")
    return {"reached": bool(res.get("target_reached")), "resumed": res.get("resumed_from") is not None, "time_to_target_s": res.get("time_to_target_s"),
            "samples_to_target": res.get("samples_to_target"), "best": res.get("best_masked_lm_accuracy"),
            "sequences_per_second": sps, "curve": [(r["samples"], r["elapsed_s"], r["masked_lm_accuracy"]) for r in curve]}


def nice_step(x):
    """The smallest of 1, 2, 5 times a power of ten that is >= x (> 0)."""
    e = 10 ** math.floor(math.log10(x))
    return next(m * e for m in (1, 2, 5, 10) if m * e >= x)


def svg(runs, target):
    """Two panels: accuracy against samples and against seconds; one line per run."""
    W, H, L, T, B, gap, pw = 1060, 400, 60, 40, 50, 70, 360
    pts = [p for r in runs for p in r["curve"]]
    if not pts:
        return ""
    ymax = max(max(p[2] for p in pts), target) * 1.1
    o = ['<svg xmlns="http://www.w3.org/2000/svg" width="%d" height="%d" font-family="sans-serif" font-size="12">' % (W, H),
         '<rect width="100%" height="100%" fill="white"/>',
         '<text x="%d" y="22" font-size="14">held-out masked-LM accuracy: bertbench and PyTorch, same recipe, same initial weights '
         'and data order</text>' % L]
    for k, (xi, label) in enumerate(((0, "training samples"), (1, "seconds after run_start"))):
        x0 = L + k * (pw + gap)
        xstep = nice_step(max(p[xi] for p in pts) / 5)
        xmax = xstep * math.ceil(max(p[xi] for p in pts) / xstep)
        px = lambda v, x0=x0, xmax=xmax: x0 + v / xmax * pw
        py = lambda v: T + (1 - v / ymax) * (H - T - B)
        o.append('<line x1="%d" y1="%d" x2="%d" y2="%d" stroke="black"/><line x1="%d" y1="%d" x2="%d" y2="%d" stroke="black"/>'
                 % (x0, H - B, x0 + pw, H - B, x0, T, x0, H - B))
        o.append('<text x="%d" y="%d" text-anchor="middle">%s</text>' % (x0 + pw / 2, H - 12, label))
        for i in range(6):
            v = ymax * i / 5
            o.append('<text x="%d" y="%.1f" text-anchor="end">%.2f</text>' % (x0 - 4, py(v) + 4, v))
        for i in range(int(round(xmax / xstep)) + 1):
            o.append('<text x="%.1f" y="%d" text-anchor="middle">%g</text>' % (px(i * xstep), H - B + 16, i * xstep))
        o.append('<line x1="%d" y1="%.1f" x2="%d" y2="%.1f" stroke="black" stroke-dasharray="6 4"/>'
                 % (x0, py(target), x0 + pw, py(target)))
        for r in runs:
            c = COLORS.get(r["impl"], "#555")
            o.append('<polyline fill="none" stroke="%s" stroke-width="1.5" points="%s"/>'
                     % (c, " ".join("%.1f,%.1f" % (px(p[xi]), py(p[2])) for p in r["curve"])))
    lx = L + 2 * pw + gap + 24
    for i, impl in enumerate(sorted({r["impl"] for r in runs})):
        o.append('<text x="%d" y="%d" fill="%s">%s</text>' % (lx, T + 16 * i, COLORS.get(impl, "#555"), impl))
    o.append('<text x="%d" y="%d" fill="#555">dashed: target</text>' % (lx, T + 16 * 5))
    return "\n".join(o + ["</svg>"]) + "\n"


def summarize(runs, impls):
    out = {}
    for impl in impls:
        rs = [r for r in runs if r["impl"] == impl]
        ok = [r for r in rs if r["reached"]]
        t = [r["time_to_target_s"] for r in ok]
        s = [r["samples_to_target"] for r in ok]
        sps = [r["sequences_per_second"] for r in rs if r["sequences_per_second"]]
        out[impl] = {"runs": len(rs), "reached": len(ok),
                     "time_median_s": statistics.median(t) if t else None, "time_min_s": min(t) if t else None,
                     "time_max_s": max(t) if t else None, "samples_median": statistics.median(s) if s else None,
                     "samples_min": min(s) if s else None, "samples_max": max(s) if s else None,
                     "sequences_per_second_median": statistics.median(sps) if sps else None}
    return out


def table(summary, impls):
    def f(v, fmt):
        return "—" if v is None else fmt % v
    rows = ["| implementation | runs reaching the target | time to target, median (min–max) s | samples to target, median (min–max) | training sequences/s | PyTorch time ÷ this |",
            "|---|---:|---:|---:|---:|---:|"]
    for impl in impls:
        s = summary[impl]
        ratios = []
        for peer in ("torch-fp32", "torch-bf16"):
            if impl.startswith("bertbench") and peer in summary and summary[peer]["time_median_s"] and s["time_median_s"]:
                ratios.append("%s %.2f×" % (peer, summary[peer]["time_median_s"] / s["time_median_s"]))
        rows.append("| %s | %d of %d | %s (%s–%s) | %s (%s–%s) | %s | %s |" % (
            impl, s["reached"], s["runs"], f(s["time_median_s"], "%.0f"), f(s["time_min_s"], "%.0f"), f(s["time_max_s"], "%.0f"),
            f(s["samples_median"], "%d"), f(s["samples_min"], "%d"), f(s["samples_max"], "%d"),
            f(s["sequences_per_second_median"], "%.1f"), ", ".join(ratios) or "—"))
    return "\n".join(rows) + "\n"


def main(argv):
    if "--" not in argv and not {"-h", "--help"} & set(argv):  # --help alone: argparse's help
        die("expected `-- <pretrain flags>` after the options (the recipe both programs run)")
    k = argv.index("--") if "--" in argv else len(argv)
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--bertbench", default=os.path.join(ROOT, "build", "bertbench"))
    p.add_argument("--out", required=True)
    p.add_argument("--seeds", default="1,2,3")
    p.add_argument("--impls", default=",".join(IMPLS))
    p.add_argument("--doc", default="", help="write the table and the command into this Markdown file")
    p.add_argument("--bertbench_flags", default="",
                   help="more pretrain flags for bertbench's runs only: how it computes, not what "
                        "(e.g. --last_layer_subset); the recipe after -- is both programs'")
    a = p.parse_args(argv[:k])
    a.flags = argv[k + 1:]
    for bad in ("--seed", "--init_checkpoint", "--output_dir", "--dtype"):
        for x in a.flags:
            name = x.split("=", 1)[0]
            if name in (bad, bad[1:]):  # pretrain reads one dash as two (absl)
                die("%s: set by this script for every run; remove it from the recipe" % name)
    impls = [x for x in a.impls.split(",") if x]
    for impl in impls:
        if impl not in IMPLS:
            die("--impls: expected some of %s, got %r" % (",".join(IMPLS), impl))
    try:
        seeds = [int(x) for x in a.seeds.split(",") if x]
    except ValueError:
        die("--seeds: expected comma-separated integers, got %r" % a.seeds)
    if any(i.startswith("bertbench") for i in impls) and not os.access(a.bertbench, os.X_OK):
        die("--bertbench=%s: expected the bertbench binary, got no executable file" % a.bertbench)
    os.makedirs(a.out, exist_ok=True)
    runs, t0 = [], time.time()
    for si, seed in enumerate(seeds):
        init = os.path.join(a.out, "init-seed-%d.safetensors" % seed)
        cfg = [x for x in a.flags if x.startswith("--bert_config_file")]
        if not os.path.exists(init) and subprocess.run(
                [sys.executable, PEER] + cfg + ["--seed=%d" % seed, "--write_init=" + init, "--output_dir=" + a.out]).returncode:
            die("seed %d: torch_ttt.py --write_init failed (its message above)" % seed)
        order = impls[si % len(impls):] + impls[:si % len(impls)]
        for impl in order:
            out = os.path.join(a.out, impl, "seed-%d" % seed)
            if not status_of(out)[1]:  # a bertbench run paused earlier resumes
                print("ttt_compare.py: seed %d, %s ..." % (seed, impl), flush=True)
                env = dict(os.environ, **TORCH_ENV.get(impl, {}))
                rc = subprocess.run(command(a, impl, seed, init, out), env=env).returncode
                sig = -rc if rc < 0 else rc - 128 if rc > 128 else 0
                if sig:
                    die("%s, seed %d: stopped by signal %d; run this script again to %s (%s)" % (
                        impl, seed, sig, "resume it" if impl.startswith("bertbench") else "run it again", out))
                status, done = status_of(out)
                if rc in (0, 1) and status is not None and not done:
                    die("%s, seed %d: paused (%s: status %r); run this script again to resume it" % (
                        impl, seed, os.path.join(out, "results.json"), status))
                if rc not in (0, 1) or not done:
                    die("%s, seed %d: exited %d without the results.json of a finished run (see %s)" % (impl, seed, rc, out))
            r = read_run(out)
            r.update(impl=impl, seed=seed)
            runs.append(r)
            print("ttt_compare.py: seed %d %s: %s%s" % (seed, impl, "%.0f s, %d samples to target" % (
                r["time_to_target_s"], r["samples_to_target"]) if r["reached"] else "target not reached (best %.4f)" % (r["best"] or 0),
                " (resumed: its time sums the segments of more than one process)" if r["resumed"] else ""))
    summary = summarize(runs, impls)
    resumed = ["%s seed %d" % (r["impl"], r["seed"]) for r in runs if r["resumed"]]
    note = ("Resumed (ran in more than one process; MLPerf times one uninterrupted process, so rerun them in a new "
            "--out for figures to quote): %s.\n" % ", ".join(resumed)) if resumed else ""
    target = next((float(x.split("=", 1)[1]) for x in a.flags if x.startswith("--target_mlm_accuracy=")), 0.72)
    cpu = next((l.split(":", 1)[1].strip() for l in open("/proc/cpuinfo") if l.startswith("model name")), platform.processor())
    cmd = shlex.join(["scripts/ttt_compare.py"] + argv)
    write(os.path.join(a.out, "curves.svg"), svg(runs, target))
    write(os.path.join(a.out, "summary.json"), json.dumps(
        {"summary": summary, "runs": runs, "resumed": resumed, "seeds": seeds, "cpu": cpu, "wall_s": time.time() - t0, "torch_env": TORCH_ENV,
         "command": cmd}, indent=1))
    print(table(summary, impls) + note)
    if a.doc:
        write(a.doc, "<!-- written by scripts/ttt_compare.py -->\n%s\nCPU: %s. Command:\n\n```sh\n/usr/bin/python3 %s\n```\n"
              % (table(summary, impls) + note, cpu, cmd))
    return 0


def write(path, text):
    """text into path through a temporary file: never a half-written file under its name."""
    with open(path + ".tmp", "w") as f:
        f.write(text)
    os.replace(path + ".tmp", path)


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
