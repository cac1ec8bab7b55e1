#!/usr/bin/python3
"""bertbench vs its peers (PyTorch, ONNX Runtime), side by side, and docs/PERFORMANCE.md from the
results (`make bench-compare`).

For every point (mode x model x seq_len x batch_size x threads) and dtype (--dtypes) it runs,
interleaved per round so that machine drift cancels (A B C A B C ...):
  bertbench      build/bertbench bench (one point per process; MFU against the sgemm ceiling of
                 `bertbench bench --mode=gemm`, measured per thread count before and after the
                 points; the doc uses the higher of the two)
  torch-default  bench/peer/torch_bench.py, Debian PyTorch eager, BLAS = OpenBLAS pthreads
                 (LD_LIBRARY_PATH=/usr/lib/x86_64-linux-gnu/openblas-pthread), default OpenMP policy
  torch-tuned    same with OMP_WAIT_POLICY=PASSIVE and the OpenMP OpenBLAS (.../openblas-openmp)
  ort            inference only: bench/peer/ort_export.py (export of torch_bench.py's model, ORT's
                 fusions checked, outputs checked against PyTorch) + bench/peer/ort_bench.js
                 (onnxruntime-node 1.30.0, installed by bench/peer/setup_ort.sh), fp32
  ort-int8       (only when --peers names it) the same with --dtype=int8: quantize_dynamic's graph,
                 its int8 ops and its error against PyTorch fp32 checked before timing
  torch-tuned-jit  (only when --peers names it) torch-tuned, inference through torch_bench.py --jit
                 (torch.jit.trace + freeze + optimize_for_inference, checked against eager)
With --dtypes including bf16, each point also runs in bf16:
  bertbench-bf16      `bertbench bench --dtype=bf16`; MFU against `bench --mode=gemm --dtype=bf16`
  torch-*-bf16        torch_bench.py --dtype=bf16 (torch.autocast on the CPU), both environments
  and ort (fp32: the peer an ORT user has) for inference points.
Per point and variant the figure is the median over rounds of each run's sequences/s (each run
itself reports the median step time of its timed steps). Every run's JSON is kept under --out;
an existing one is reused, so an interrupted run resumes where it stopped (--fresh starts over).
Then it writes a per-op profile of bertbench (base seq 128 by default), the tables and SVG plots,
and --doc (docs/PERFORMANCE.md). Every figure in that file comes from this command's files.

--task=squad times the SQuAD span model instead (`bertbench bench --task=squad`, `torch_bench.py
--task=squad`: encoder + span head, run_squad.py's loss, optimization.py's AdamW): defaults BERT-base,
seq 384, batch 1/8/32, results in docs/perf-squad/ and the doc docs/PERFORMANCE-squad.md, so a SQuAD
run never touches the pretraining files; no ORT peer (its export is of the pretraining model).
Every other option means what it means for pretraining.

--squad_data=eval.tf_record: SQuAD inference on those real-length features instead, bertbench's real and
padded layouts against the peers padded per batch (scripts/squad_real.py says what runs).

This file is the command line and the doc's tables; scripts/bench_compare_runs.py makes the runs (the
variants, their environments, run()), scripts/bench_compare_report.py writes the doc's other pieces
(the machine, the goals, who wins where, the throughput plot)."""
import argparse
import datetime
import json
import os
import shlex
import statistics
import subprocess
import sys
import time

# the rest of bench-compare, in scripts/ beside this file (scripts/squad_real.py reaches run, log, COUNTS,
# FAILURES, VARIANTS and cpu_facts through this module)
from bench_compare_runs import (COUNTS, DEFAULT_PEERS, DTYPE_OF, FAILURES, LIB, NO_BF16, PEERS, ROOT, TASK,
                                VARIANTS, log, point_dtype_problem, run, sh, variant_runs)
from bench_compare_report import (VARIANT_DOC, cpu_facts, cpu_seconds, goals_md, other_work_line, peer_goals_md,
                                  squad_goals_md, throughput_svg, winners_md)


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--task", default="pretraining", choices=["pretraining", "squad"],
                    help="pretraining (the pretraining model; docs/perf, docs/PERFORMANCE.md) or squad (the SQuAD span "
                    "model; defaults: --models=base --seq_len=384 --batch_sizes=1,8,32 --profile=base:384:8 "
                    "--out=docs/perf-squad --doc=docs/PERFORMANCE-squad.md, no ORT)")
    ap.add_argument("--modes", default="train,infer")
    ap.add_argument("--models", default=None, help="default tiny,mini,base (squad: base)")
    ap.add_argument("--seq_len", default=None, help="default 128 (squad: 384)")
    ap.add_argument("--batch_sizes", default=None, help="default 8,32 (squad: 1,8,32)")
    ap.add_argument("--threads", default="2")
    ap.add_argument("--warmup", type=int, default=1)
    ap.add_argument("--steps", type=int, default=3)
    ap.add_argument("--min_time", type=float, default=2.0,
                    help="seconds: both programs keep timing past --steps until this much is timed")
    ap.add_argument("--rounds", type=int, default=1, help="rounds per point, variants interleaved A/B/C A/B/C (use 3+ on a quiet machine)")
    ap.add_argument("--repeats", type=int, default=5,
                    help="after the rounds, run bertbench this many times in a row per point (repeatability without the drift of a long invocation; 0 = none)")
    ap.add_argument("--dtypes", default="fp32", help="comma list of fp32, bf16, int8 (bf16: bertbench --dtype=bf16 "
                    "against PyTorch autocast bf16 and ORT fp32; int8, inference only: bertbench --dtype=int8 against "
                    "ORT's dynamic int8, ort-int8)")
    ap.add_argument("--peers", default=None, help="peers to run besides bertbench, from %s (default: %s; squad: "
                    "torch-default,torch-tuned)" % (", ".join(PEERS), ",".join(DEFAULT_PEERS)))
    ap.add_argument("--no_bertbench", action="store_true", help="run the peers only")
    ap.add_argument("--profile", default=None, help="model:seq:batch profiled per-op ('' = none; default base:128:8, "
                    "squad: base:384:8)")
    ap.add_argument("--bertbench", default=os.path.join(ROOT, "build", "bertbench"))
    ap.add_argument("--out", default=None, help="results, plots (kept: the doc links them); default docs/perf "
                    "(squad: docs/perf-squad)")
    ap.add_argument("--doc", default=None, help="default docs/PERFORMANCE.md (squad: docs/PERFORMANCE-squad.md)")
    ap.add_argument("--timeout", type=int, default=1800, help="seconds per run")
    ap.add_argument("--fresh", action="store_true", help="discard earlier results in --out")
    ap.add_argument("--squad_data", default="", help="run_squad.py eval features: bertbench (--squad_layout=real and "
                    "padded) and the peers on the same real-length queries (scripts/squad_real.py; models, batch_sizes, "
                    "threads, dtypes, peers, rounds, warmup, steps, min_time, out, doc apply)")
    a = ap.parse_args()
    # bertbench runs from the repository root: paths given relative to where this was started
    for k in ("bertbench", "out", "doc", "squad_data"):
        if getattr(a, k):
            setattr(a, k, os.path.abspath(getattr(a, k)))
    if a.squad_data:
        sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
        import squad_real  # noqa: E402
        return squad_real.main(a, sys.modules[__name__])
    squad = a.task == "squad"
    TASK["name"] = a.task
    defaults = {  # option: (pretraining, squad)
        "models": ("tiny,mini,base", "base"), "seq_len": ("128", "384"), "batch_sizes": ("8,32", "1,8,32"),
        "peers": (",".join(DEFAULT_PEERS), "torch-default,torch-tuned"), "profile": ("base:128:8", "base:384:8"),
        "out": (os.path.join(ROOT, "docs", "perf"), os.path.join(ROOT, "docs", "perf-squad")),
        "doc": (os.path.join(ROOT, "docs", "PERFORMANCE.md"), os.path.join(ROOT, "docs", "PERFORMANCE-squad.md"))}
    for k, (pre, sq) in defaults.items():
        if getattr(a, k) is None:
            setattr(a, k, sq if squad else pre)
    if squad and {"ort", "ort-int8"} & set(a.peers.split(",")):
        sys.exit("bench-compare: --task=squad: the ort peer exports the pretraining model and has no SQuAD "
                 "variant (hint: --peers=torch-default,torch-tuned)")
    task_flag = ["--task=squad"] if squad else []
    ints = lambda s: [int(x) for x in s.split(",") if x]
    modes, models, seqs = a.modes.split(","), a.models.split(","), ints(a.seq_len)
    batches, threads = ints(a.batch_sizes), ints(a.threads)
    dtypes, peers = [d for d in a.dtypes.split(",") if d], [p for p in a.peers.split(",") if p]
    for d in dtypes:
        if d not in ("fp32", "bf16", "int8"):
            sys.exit("bench-compare: --dtypes: unknown dtype %r (expected a comma list of fp32, bf16, int8)" % d)
    if "int8" in dtypes and "train" in modes:
        sys.exit("bench-compare: --dtypes=int8 is inference only (hint: --modes=infer)")
    for p in peers:
        if p not in PEERS:
            sys.exit("bench-compare: --peers: unknown peer %r (expected a comma list of %s)" % (p, ", ".join(PEERS)))
    if not dtypes:
        sys.exit("bench-compare: --dtypes is empty (expected fp32, bf16 or fp32,bf16)")
    variants = []  # in run (interleaving) order
    if "fp32" in dtypes:  # (ort-int8 goes to the int8 comparison when --dtypes has int8)
        variants += ([] if a.no_bertbench else ["bertbench"]) + [p for p in peers if p != "ort-int8" or "int8" not in dtypes]
    if "bf16" in dtypes:
        variants += ([] if a.no_bertbench else ["bertbench-bf16"]) + [p + "-bf16" for p in peers if p not in NO_BF16]
        variants += [p for p in peers if p in NO_BF16 and p not in variants]
    if "int8" in dtypes:  # against ORT's int8, the peer an int8 user picks
        variants += ([] if a.no_bertbench else ["bertbench-int8"]) + ([] if "ort-int8" in variants else ["ort-int8"])
    if not a.no_bertbench and not os.access(a.bertbench, os.X_OK):
        sys.exit("bench-compare: --bertbench=%s: not an executable (hint: make build)" % a.bertbench)
    if {"ort", "ort-int8"} & set(variants):  # install (or find) the pinned onnxruntime-node before any run
        r = subprocess.run(["bash", os.path.join(ROOT, "bench", "peer", "setup_ort.sh")], cwd=ROOT)
        if r.returncode != 0:
            sys.exit("bench-compare: bench/peer/setup_ort.sh failed (above); the ORT peer cannot run "
                     "(hint: --peers=torch-default,torch-tuned leaves it out)")
    raw = os.path.join(a.out, "raw")
    load_file = os.path.join(a.out, "other_work.txt")  # the machine's other work during the runs (below)
    if a.fresh and os.path.isdir(raw):
        for f in os.listdir(raw):
            os.remove(os.path.join(raw, f))
        if os.path.exists(load_file):
            os.remove(load_file)
    os.makedirs(raw, exist_ok=True)
    t_start = time.time()
    cpu_start = cpu_seconds()

    # 1. ceilings per thread count, measured now and again after the points (step 3); the bf16
    # GEMM ceiling too when bf16 points run (`bench --mode=gemm --dtype=bf16`)
    def measure_ceilings(when, dtype="fp32"):
        found = {}
        if a.no_bertbench:
            return found
        for t in threads:
            if dtype == "fp32":
                out = os.path.join(raw, "ceiling_t%d_%s.json" % (t, when))
                j = run([a.bertbench, "bench", "--mode=gemm", "--model=base", "--threads=%d" % t, "--gemm_reps=5",
                         "--json=" + out], {}, out, a.timeout)
                if j:
                    g = [p for p in j["points"] if p.get("mode") == "gemm"][0]
                    found[t] = (g["sgemm_gflops"], g["fma_peak_gflops"])
                continue
            out = os.path.join(raw, "ceiling-%s_t%d_%s.json" % (dtype, t, when))

            def bf16_gemm(j):  # the dtype's GEMM point and its GFLOP/s, whatever the field's name
                for g in j.get("points", []):
                    if g.get("mode") == "gemm" and g.get("dtype") == dtype:
                        for f in ("bf16_gemm_gflops", "gemm_gflops", "sgemm_gflops", "gflops"):
                            if g.get(f):
                                return g, g[f]
                return None, None

            j = run([a.bertbench, "bench", "--mode=gemm", "--dtype=" + dtype, "--model=base", "--threads=%d" % t,
                     "--gemm_reps=5", "--json=" + out], {}, out, a.timeout,
                    check=lambda j: None if bf16_gemm(j)[0] else "no gemm point with \"dtype\": \"%s\" and a GFLOP/s figure in it" % dtype)
            if j:
                g, gf = bf16_gemm(j)
                found[t] = (gf, g.get("fma_peak_gflops", 0.0))
        return found

    ceilings = measure_ceilings("start")
    ceilings_bf16 = measure_ceilings("start", "bf16") if "bertbench-bf16" in variants else {}
    ceilings_int8 = measure_ceilings("start", "int8") if "bertbench-int8" in variants else {}

    # 2. the points, interleaved per round
    results, runs = {}, {}  # key -> {variant: median seq/s}; key -> {variant: [point json]}
    round_sps = {}  # key -> {variant: {round: seq/s}} (the rounds' ratios pair runs minutes apart)
    keys = [(m, mo, s, b, t) for m in modes for mo in models for s in seqs for b in batches for t in threads]
    # a point's file tag (results are reused only from like runs) and the flags both programs take
    tag_of = lambda key: ("squad_" if squad else "") + "%s_%s_s%d_b%d_t%d" % key + "_w%d_n%d_m%g" % (
        a.warmup, a.steps, a.min_time)
    point_flags = lambda key, out: task_flag + [
        "--mode=" + key[0], "--model=" + key[1], "--seq_len=%d" % key[2], "--batch_size=%d" % key[3],
        "--threads=%d" % key[4], "--warmup=%d" % a.warmup, "--steps=%d" % a.steps, "--min_time=%g" % a.min_time,
        "--json=" + out]
    for key in keys:
        t = key[4]
        for r in range(a.rounds):
            for v in variants:
                if not variant_runs(v, key[0]):
                    continue
                out = os.path.join(raw, "%s__%s__r%d.json" % (v, tag_of(key), r))
                common = point_flags(key, out)
                if v == "bertbench":
                    cmd = [a.bertbench, "bench"] + common + (["--ceiling_gflops=%g" % ceilings[t][0]] if t in ceilings else ["--noceiling"])
                elif v == "bertbench-bf16":
                    cmd = [a.bertbench, "bench", "--dtype=bf16"] + common + (
                        ["--ceiling_gflops=%g" % ceilings_bf16[t][0]] if t in ceilings_bf16 else ["--noceiling"])
                elif v == "bertbench-int8":
                    cmd = [a.bertbench, "bench", "--dtype=int8"] + common + (
                        ["--ceiling_gflops=%g" % ceilings_int8[t][0]] if t in ceilings_int8 else ["--noceiling"])
                elif v in ("ort", "ort-int8"):
                    cmd = ["/usr/bin/python3", os.path.join(ROOT, "bench", "peer", "ort_export.py")] + common + (
                        ["--dtype=int8"] if v == "ort-int8" else [])
                elif v == "torch-tuned-jit":
                    cmd = ["/usr/bin/python3", os.path.join(ROOT, "bench", "peer", "torch_bench.py")] + common + ["--jit"]
                else:
                    cmd = ["/usr/bin/python3", os.path.join(ROOT, "bench", "peer", "torch_bench.py")] + common + (
                        ["--dtype=bf16"] if DTYPE_OF[v] == "bf16" else [])
                j = run(cmd, VARIANTS[v], out, a.timeout, check=lambda j, v=v: point_dtype_problem(v, j))
                pts = [p for p in (j or {}).get("points", []) if p.get("mode") in ("train", "infer")]
                if pts:
                    runs.setdefault(key, {}).setdefault(v, []).append(pts[0])
                    round_sps.setdefault(key, {}).setdefault(v, {})[r] = pts[0]["sequences_per_second"]
        for v, pts in runs.get(key, {}).items():
            results.setdefault(key, {})[v] = statistics.median(p["sequences_per_second"] for p in pts)

    # 2b. repeatability: each point's bertbench run again --repeats times in a row. The rounds
    # above are minutes apart, so their spread includes the host's drift over the invocation;
    # back-to-back runs show the benchmark's own run-to-run agreement.
    repeats = {}  # key -> [seq/s] of bertbench fp32; repeats_bf16 the same for bertbench-bf16
    repeats_bf16 = {}
    for v, reps_of, extra in (("bertbench", repeats, []), ("bertbench-bf16", repeats_bf16, ["--dtype=bf16"])):
        for key in keys if v in variants else []:
            for k in range(a.repeats):
                out = os.path.join(raw, "%s__%s__rep%d.json" % (v, tag_of(key), k))
                j = run([a.bertbench, "bench", "--noceiling"] + extra + point_flags(key, out), {}, out, a.timeout,
                        check=lambda j, v=v: point_dtype_problem(v, j))
                pts = [p for p in (j or {}).get("points", []) if p.get("mode") in ("train", "infer")]
                if pts:
                    reps_of.setdefault(key, []).append(pts[0]["sequences_per_second"])

    # 3. the ceilings again: a shared host's speed drifts over a long run, and a ceiling measured
    # in a slow minute would overstate MFU; the doc uses the higher of the two measurements
    ceilings_start = dict(ceilings)
    ceiling_end = measure_ceilings("end")
    for t, c in ceiling_end.items():
        ceilings[t] = tuple(max(x, y) for x, y in zip(c, ceilings.get(t, c)))
    ceilings_bf16_start = dict(ceilings_bf16)
    ceiling_bf16_end = measure_ceilings("end", "bf16") if "bertbench-bf16" in variants else {}
    for t, c in ceiling_bf16_end.items():
        ceilings_bf16[t] = tuple(max(x, y) for x, y in zip(c, ceilings_bf16.get(t, c)))
    ceilings_int8_start = dict(ceilings_int8)
    ceiling_int8_end = measure_ceilings("end", "int8") if "bertbench-int8" in variants else {}
    for t, c in ceiling_int8_end.items():
        ceilings_int8[t] = tuple(max(x, y) for x, y in zip(c, ceilings_int8.get(t, c)))
    for key, by_variant in runs.items():
        for v, ceil in (("bertbench", ceilings), ("bertbench-bf16", ceilings_bf16), ("bertbench-int8", ceilings_int8)):
            for p in by_variant.get(v, []):
                p["mfu"] = p["gflops"] / ceil[key[4]][0] if key[4] in ceil and p.get("gflops") else 0.0

    def mfu_of(key, v):  # median over rounds of a bertbench variant's MFU (None when not measured)
        ps = runs.get(key, {}).get(v, [])
        return statistics.median(p.get("mfu") or 0.0 for p in ps) if ps else None

    # latency percentiles per inference point and variant: median over rounds
    lat = {key: {v: {q: statistics.median(p["latency_ms_" + q] for p in ps) for q in ("p50", "p90", "p99")}
                 for v, ps in by_v.items() if ps and all("latency_ms_p50" in p for p in ps)}
           for key, by_v in runs.items() if key[0] == "infer"}

    # 4. per-op profile of bertbench
    prof_md, prof_svg = "", ""
    if a.profile and "bertbench" in variants:
        pm, ps, pb = a.profile.split(":")
        pj = os.path.join(raw, "%sprofile_%s_s%s_b%s.json" % ("squad_" if squad else "", pm, ps, pb))
        prof_svg = os.path.join(a.out, "profile.svg")
        j = run([a.bertbench, "bench"] + task_flag + ["--mode=train,infer", "--model=" + pm, "--seq_len=" + ps, "--batch_size=" + pb,
                 "--threads=%d" % threads[-1], "--warmup=1", "--steps=2", "--profile", "--profile_steps=2",
                 "--profile_svg=" + prof_svg, "--noceiling", "--json=" + pj], {}, pj, a.timeout)
        if j:
            for pr in j.get("profiles", []):
                prof_md += "**%s %s seq %d batch %d threads %d: %.1f ms per step**\n\n" % (
                    ("squad " if pr.get("task") == "squad" else "") + pr["mode"], pr["model"], pr["seq_len"], pr["batch_size"], pr["threads"], pr["step_ms"])
                prof_md += "| op | ms/step | share | GFLOP/s | GB/s |\n|---|---:|---:|---:|---:|\n"
                for op in pr["ops"]:
                    prof_md += "| %s | %.2f | %.1f%% | %.1f | %.1f |\n" % (
                        op["op"], op["ms_per_step"], 100 * op["share"], op["gflops"], op["gbytes_per_s"])
                prof_md += "\n"

    # 5. tables, plot, summary JSON, doc
    def make_table(base, cols, mfu_label, not_contending=()):
        """Rows per point: seq/s of each column variant, base's MFU, base ÷ each other column, and
        the fastest variant of the row."""
        cols = [v for v in cols if v in variants]
        others = [v for v in cols if v != base]
        rows = ["| mode | model | seq | batch | threads | " + " | ".join("%s seq/s" % v for v in cols)
                + " | %s | " % mfu_label + " | ".join("%s / %s" % (base, v) for v in others) + " | fastest |",
                "|---|---|---:|---:|---:|" + "---:|" * (len(cols) + 1 + len(others)) + "---|"]
        for key in keys:
            r = results.get(key, {})
            bb, mfu = r.get(base), mfu_of(key, base)
            cells = ["%.2f" % r[v] if r.get(v) else ("n/a" if not variant_runs(v, key[0]) else "–") for v in cols]
            ratios = ["**%.2f×**" % (bb / r[v]) if bb and r.get(v) else "–" for v in others]
            measured = {v: r[v] for v in cols if r.get(v) and v not in not_contending}
            fastest = max(measured, key=measured.get) if len(measured) > 1 else "–"
            rows.append("| %s | %s | %d | %d | %d | " % key + " | ".join(cells) + " | %s | " % ("%.1f%%" % (100 * mfu) if mfu else "–")
                        + " | ".join(ratios) + (" | " if ratios else "") + fastest + " |")
        return "\n".join(rows) + "\n"

    def rounds_md(base, cols):
        """Per point, base ÷ each other column in every round where both ran (interleaved, so the
        two runs of a ratio are minutes apart, not the whole invocation) and those ratios' median:
        the tables' ratio of medians beside the host's round-to-round swing."""
        others = [v for v in cols if v in variants and v != base]
        rows = []
        for key in keys:
            mine, cells = round_sps.get(key, {}).get(base, {}), []
            for v in others:
                theirs = round_sps.get(key, {}).get(v, {})
                ratios = [mine[r] / theirs[r] for r in sorted(mine) if theirs.get(r)]
                cells.append("%s (median %.2f×)" % (" ".join("%.2f" % x for x in ratios), statistics.median(ratios))
                             if ratios else "–")
            if any(c != "–" for c in cells):
                rows.append("| %s | %s | %d | %d | %d | " % key + " | ".join(cells) + " |")
        if a.rounds < 2 or not rows:
            return ""
        return "\n".join(["Each round's ratio, in round order, and their median:\n",
                          "| mode | model | seq | batch | threads | " + " | ".join(
                              "%s / %s per round" % (base, v) for v in others) + " |",
                          "|---|---|---:|---:|---:|" + "---|" * len(others)] + rows) + "\n"

    fp32_cols = ["bertbench"] + list(PEERS)
    bf16_cols = ["bertbench-bf16", "torch-default-bf16", "torch-tuned-bf16", "ort", "bertbench"]
    if "int8" in dtypes:
        fp32_cols.remove("ort-int8")
    table = make_table("bertbench", fp32_cols, "bertbench MFU") if "fp32" in dtypes else ""
    table_bf16 = make_table("bertbench-bf16", bf16_cols, "bertbench-bf16 MFU (bf16 ceiling)",
                            not_contending=("bertbench",)) if "bf16" in dtypes else ""
    int8_cols = ["bertbench-int8", "ort-int8"] + [v for v in ("bertbench-bf16", "bertbench") if v in variants]
    table_int8 = make_table("bertbench-int8", int8_cols, "bertbench-int8 MFU (int8 ceiling)",
                            not_contending=("bertbench-bf16", "bertbench")) if "int8" in dtypes else ""
    rounds_int8 = rounds_md("bertbench-int8", int8_cols) if "int8" in dtypes else ""
    wins = (winners_md(keys, results, [v for v in fp32_cols if v in variants], "fp32") if "fp32" in dtypes else "")
    wins_bf16 = (winners_md(keys, results, [v for v in bf16_cols if v in variants and v != "bertbench"],
                            "bf16 against the peers a user has: PyTorch autocast bf16" + (", ORT fp32" if "ort" in variants else ""))
                 if "bf16" in dtypes else "")
    lat_rows = []
    lat_variants = [v for v in variants if any(v in lat.get(k, {}) for k in keys)]
    if lat_variants:
        lat_rows = ["| model | seq | batch | threads | " + " | ".join("%s p50 / p90 / p99 ms" % v for v in lat_variants) + " |",
                    "|---|---:|---:|---:|" + "---:|" * len(lat_variants)]
        for key in keys:
            if key[0] != "infer":
                continue
            cells = ["%.2f / %.2f / %.2f" % (l["p50"], l["p90"], l["p99"]) if l else "–"
                     for l in (lat.get(key, {}).get(v) for v in lat_variants)]
            lat_rows.append("| %s | %d | %d | %d | " % key[1:] + " | ".join(cells) + " |")
    lat_table = "\n".join(lat_rows) + "\n" if lat_rows else ""
    summary = []
    for key in keys:
        r = results.get(key, {})
        summary.append({"mode": key[0], "model": key[1], "seq_len": key[2], "batch_size": key[3], "threads": key[4],
                        "sequences_per_second": r, "bertbench_mfu": mfu_of(key, "bertbench") if r.get("bertbench") else None,
                        "bertbench_bf16_mfu": mfu_of(key, "bertbench-bf16") if r.get("bertbench-bf16") else None,
                        "latency_ms": lat.get(key, {}),
                        "runs": {v: [p["sequences_per_second"] for p in ps] for v, ps in runs.get(key, {}).items()},
                        "bertbench_back_to_back": repeats.get(key, []),
                        "bertbench_bf16_back_to_back": repeats_bf16.get(key, [])})
    goals = goals_md(keys, results, runs, repeats, ceilings, ceilings_start, ceiling_end, variants) if "bertbench" in variants else \
        "## Goals, checked on these figures\n"
    goals += squad_goals_md(keys, results, variants) if squad else peer_goals_md(keys, results, lat, mfu_of, variants)
    failed_md = ""
    if FAILURES:
        failed_md = "## Runs that failed\n\n" + "".join("- `%s`: %s\n" % f for f in FAILURES)
    # NVIDIA-style reproduction table of bertbench: rows threads, columns model/seq x batch
    repro = ""
    for m in modes:
        cols = [(mo, s, b) for mo in models for s in seqs for b in batches]
        repro += "**bertbench %s, sequences/s**\n\n| threads | " % m + " | ".join("%s s%d b%d" % c for c in cols) + " |\n"
        repro += "|---:|" + "---:|" * len(cols) + "\n"
        for t in threads:
            repro += "| %d | " % t + " | ".join(
                "%.2f" % results[(m,) + c[:2] + (c[2], t)]["bertbench"] if results.get((m,) + c[:2] + (c[2], t), {}).get("bertbench") else "–"
                for c in cols) + " |\n"
        repro += "\n"
    plot = os.path.join(a.out, "throughput.svg")
    model_name, isa, ncpu, mem = cpu_facts()
    with open(plot + ".tmp", "w") as f:
        f.write(throughput_svg(results, modes, models, "sequences/s, %s, %s thread(s)" % (model_name, a.threads)))
    os.replace(plot + ".tmp", plot)
    with open(os.path.join(a.out, "summary.json.tmp"), "w") as f:
        json.dump({"points": summary, "ceilings": {str(t): c for t, c in ceilings.items()},
                   "ceilings_bf16": {str(t): c for t, c in ceilings_bf16.items()},
                   "ceilings_int8": {str(t): c for t, c in ceilings_int8.items()}, "variants": variants,
                   "args": vars(a)}, f, indent=2)
    os.replace(os.path.join(a.out, "summary.json.tmp"), os.path.join(a.out, "summary.json"))

    torch_v = sh("/usr/bin/python3 -c 'import torch; print(torch.__version__)'")
    alt = sh("update-alternatives --display libblas.so.3-x86_64-linux-gnu | head -3")
    # What was measured: the build_info of the bertbench binaries whose results are in --out
    # (several builds when an interrupted run was resumed after a rebuild). The commit is stamped
    # at build time, with a flag for uncommitted changes to what builds bertbench.
    commits, builds = [], []
    for name in sorted(os.listdir(raw)):
        if name.startswith(("bertbench__", "bertbench-bf16__")) and name.endswith(".json"):
            with open(os.path.join(raw, name)) as f:
                made = json.load(f)
            bi = made.get("build_info", {})
            c = bi.get("git_commit", "unknown") + (" (+ uncommitted changes)" if bi.get("git_dirty") else "")
            d = "%s, %s, %s; GEMM: %s (%s)" % (bi.get("build_type"), bi.get("compiler"), bi.get("cxx_flags"),
                                               bi.get("gemm_library"), bi.get("gemm_config"))
            wait = made.get("system_info", {}).get("openmp_wait")  # absent in runs before it was recorded
            d += "; OpenMP wait: %s" % wait if wait else ""
            commits += [c] if c not in commits else []
            builds += [d] if d not in builds else []
    commit = ", ".join(commits) or "none measured"
    bb_build = "; ".join(builds)
    # The machine's other work is known only to an invocation that made runs; each such invocation
    # adds its line to other_work.txt beside the raw files (a resumed run keeps the lines of those
    # whose files it reused; --fresh removed it with them), so that the document reports every
    # measuring invocation's, and one that only re-renders (0 runs made) not its own idle second.
    earlier = []
    if os.path.exists(load_file):
        with open(load_file) as f:
            earlier = [l.rstrip("\n") for l in f if l.strip()]
    if COUNTS["ran"] > 0:
        span = "%s–%s UTC" % (
            datetime.datetime.fromtimestamp(t_start, datetime.timezone.utc).strftime("%Y-%m-%d %H:%M"),
            datetime.datetime.now(datetime.timezone.utc).strftime("%H:%M"))
        lines = (earlier if COUNTS["reused"] else []) + [other_work_line(cpu_start, cpu_seconds(), span)]
        with open(load_file + ".tmp", "w") as f:
            f.write("\n".join(lines) + "\n")
        os.replace(load_file + ".tmp", load_file)
        load_line = "\n".join(lines)
    elif earlier:
        load_line = "\n".join(earlier) + "\n  (from `other_work.txt` beside the raw files: this invocation made no runs)"
    else:
        load_line = "- Other work during the runs: not known (this invocation made no runs and found no record of it)"
    rel = lambda p: os.path.relpath(p, os.path.dirname(os.path.abspath(a.doc)))
    argv = " ".join(shlex.quote(x) for x in sys.argv[1:])
    ceil_lines = "\n".join(
        "- %d thread(s): sgemm ceiling %.1f GFLOP/s (BERT-base linear-layer shapes, 4096 tokens, best of 5 per shape; "
        "the higher of the measurements at the start, %.1f, and at the end, %.1f; MFU below is against it); FMA peak %.1f GFLOP/s"
        % (t, c[0], ceilings_start.get(t, (0,))[0], c_end, c[1])
        for t, c, c_end in ((t, c, ceiling_end.get(t, (0.0,))[0]) for t, c in sorted(ceilings.items()))) or "- (not measured)"
    if "bertbench-bf16" in variants:
        ceil_lines += "\n" + ("\n".join(
            "- %d thread(s): bf16 GEMM ceiling %.1f GFLOP/s (`bertbench bench --mode=gemm --dtype=bf16`, the higher of "
            "%.1f at the start and %.1f at the end; bertbench-bf16 MFU is against it)"
            % (t, c[0], ceilings_bf16_start.get(t, (0,))[0], ceiling_bf16_end.get(t, (0.0,))[0])
            for t, c in sorted(ceilings_bf16.items())) or "- bf16 GEMM ceiling: not measured (its run failed; "
                                                          "bertbench-bf16 MFU is not stated)")
    if "bertbench-int8" in variants:
        ceil_lines += "\n" + ("\n".join(
            "- %d thread(s): int8 GEMM ceiling %.1f GOP/s (`bertbench bench --mode=gemm --dtype=int8`: the forward "
            "products on the packed int8 kernels, int32 results; the higher of %.1f at the start and %.1f at the end; "
            "bertbench-int8 MFU is against it)"
            % (t, c[0], ceilings_int8_start.get(t, (0,))[0], ceiling_int8_end.get(t, (0.0,))[0])
            for t, c in sorted(ceilings_int8.items())) or "- int8 GEMM ceiling: not measured (its run failed; "
                                                          "bertbench-int8 MFU is not stated)")
    # The ORT peer as run: package, node, and per exported model what its verification found.
    ort_lines = []
    for name in sorted(os.listdir(raw)):
        if name.startswith("ort__") and name.endswith(".json"):
            with open(os.path.join(raw, name)) as f:
                bi = json.load(f).get("build_info", {})
            ver = bi.get("verification", {})
            line = "%s b%s s%s: fused %s; max |ORT − PyTorch| %.1e on MLM logits (tolerance %g + %g·|x|)" % (
                ver.get("model"), ver.get("batch_size"), ver.get("seq_len"),
                ", ".join("%s %d" % kv for kv in ver.get("fused_op_counts", {}).items() if kv[1]),
                ver.get("outputs", {}).get("mlm_logits", {}).get("max_abs_diff", float("nan")),
                ver.get("tolerance", {}).get("atol", 0), ver.get("tolerance", {}).get("rtol", 0))
            head = "onnxruntime-node %s on node %s" % (bi.get("onnxruntime_node"), bi.get("node"))
            ort_lines += [(head, line)] if (head, line) not in ort_lines else []
    forced = sorted({v for v in variants if "OPENBLAS_CORETYPE" in VARIANTS[v]})
    coretype_md = ("\n  Debian's OpenBLAS falls back to its SSE3 \"Prescott\" kernels on this AVX-512 CPU, so %s ran "
                   "with `OPENBLAS_CORETYPE=SkylakeX` (scripts/openblas_env.py)." % ", ".join(forced)) if forced else ""
    ort_md = ""
    if ort_lines:
        ort_md = "- ONNX Runtime: %s; CPU execution provider, all graph optimisations, intra-op threads = the point's " \
                 "threads. Exported graphs, as verified before timing:\n" % "; ".join(sorted({h for h, _ in ort_lines}))
        ort_md += "".join("  - %s\n" % l for _, l in ort_lines)
    variant_md = "".join("- **%s**: %s\n" % (v, VARIANT_DOC[v].format(LIB=LIB)) for v in variants)
    if squad:  # the same programs with --task=squad: the span model, AdamW instead of LAMB
        variant_md = variant_md.replace("includes the LAMB update", "includes the AdamW update (optimization.py's "
                                        "AdamWeightDecayOptimizer)").replace(
            "LAMB written in tensor ops (torch has no LAMB)", "optimization.py's AdamWeightDecayOptimizer written in tensor "
            "ops").replace("fp32 parameters and LAMB", "fp32 parameters and AdamW")
        variant_md = "All programs run with `--task=squad`.\n" + variant_md
    batches_md = ("Synthetic full-length batches, identical shapes in every program (max_predictions_per_seq 20 at seq "
                  "128; MLM head on the gathered positions).") if not squad else (
        "The SQuAD span model (encoder + dense H→2, run_squad.py's loss: the mean of the start and end cross-entropies); "
        "synthetic full-length batches laid out like a run_squad.py feature ([CLS] query [SEP] document [SEP], every "
        "position a real token), identical shapes in every program. MFU counts the encoder's FLOPs plus the span "
        "head's 2·N·H·2.")
    tables_md = ""
    if table:
        tables_md += "## bertbench vs the peers, fp32\n\n" + table + "\n" + wins + "\n"
    if table_bf16:
        tables_md += ("## bf16: bertbench bf16 vs PyTorch autocast bf16%s\n\n" % (" and ORT fp32" if "ort" in variants else "")
                      + table_bf16
                      + ("\n`bertbench-bf16 / bertbench` is bf16's speed-up over bertbench's own fp32.\n" if "bertbench" in variants else "")
                      + "\n" + wins_bf16 + "\n")
    if table_int8:
        tables_md += ("## int8: bertbench int8 vs ONNX Runtime's dynamic int8\n\n" + table_int8
                      + "\n`bertbench-int8 / bertbench-bf16` and `/ bertbench` are int8's speed-up over bertbench's own bf16 "
                        "and fp32 (same process layout, interleaved rounds).\n\n" + (rounds_int8 + "\n" if rounds_int8 else ""))
    if lat_table:
        tables_md += ("## Inference latency (one step = one batch; nearest-rank percentiles of each run's timed steps, "
                      "median over rounds)\n\n" + lat_table + "\n")
    doc = f"""# bertbench performance{": the SQuAD span model (`--task=squad`)" if squad else ""}

Generated by {"`/usr/bin/python3 scripts/bench-compare.py " + argv + "`" if squad else "`make bench-compare` (`/usr/bin/python3 scripts/bench-compare.py " + argv + "`)"} on
{datetime.datetime.now(datetime.timezone.utc).strftime("%Y-%m-%d %H:%M UTC")} in {time.time() - t_start:.0f} s ({COUNTS["ran"]} runs made, {COUNTS["reused"]} reused from earlier). Every figure below comes from the
files under `{rel(a.out)}/` written by that command; rerun it to reproduce (it resumes from the files it
finds there; `--fresh` starts over). Definitions of every figure: [benchmark.md](benchmark.md).

## Machine and build

- CPU: {model_name}; {ncpu} CPUs available to the process; ISA: {", ".join(isa)}; memory {mem}
- bertbench commit {commit}; build: {bb_build}
- PyTorch {torch_v} (Debian python3-torch), eager. `libblas.so.3` alternative at run time:
  `{alt.splitlines()[0] if alt else "?"}` / `{alt.splitlines()[2].strip() if len(alt.splitlines()) > 2 else "?"}` — not relied upon: each
  peer variant sets `LD_LIBRARY_PATH` explicitly (below), and each run's JSON records the BLAS it loaded.{coretype_md}
{ort_md}{ceil_lines}
{load_line}

## Method

Points: modes {a.modes}; models {a.models}; seq_len {a.seq_len}; batch sizes {a.batch_sizes}; threads {a.threads};
{a.warmup} warm-up steps (excluded) + at least {a.steps} timed steps per run, more until {a.min_time:g} s are timed
(`--min_time`, every program: a median of three 50 ms steps moves with every hiccup of the host); {a.rounds} rounds per point, variants interleaved
({", ".join(variants)}, then again) so that machine drift cancels. Figure per variant = median
over rounds of sequences/s (each run: batch / median step time). {batches_md}

{variant_md}
{tables_md}![throughput]({rel(plot)})

{goals}
{failed_md}
## bertbench reproduction table

{repro}
## Where the time goes (bertbench `--profile`)

{prof_md or "(not run)"}
{"![profile](" + rel(prof_svg) + ")" if prof_md else ""}
"""
    os.makedirs(os.path.dirname(os.path.abspath(a.doc)), exist_ok=True)
    with open(a.doc + ".tmp", "w") as f:
        f.write(doc)
    os.replace(a.doc + ".tmp", a.doc)
    print(table + table_bf16 + table_int8)
    log("wrote %s, %s, %s" % (a.doc, plot, os.path.join(a.out, "summary.json")))


if __name__ == "__main__":
    main()
