"""The pieces of scripts/bench-compare.py's doc (docs/PERFORMANCE*.md) that are not its tables:
each variant's description for the Method section, the machine (its CPU, and the other work it did
while the runs were made), the benchmark goals checked on the figures, who wins where, and the
throughput plot (SVG)."""
import os
import resource
import statistics

from bench_compare_runs import VARIANTS, sh  # scripts/, beside this file


VARIANT_DOC = {  # the Method section's description of each variant ({LIB} is filled in)
    "bertbench": "`bertbench bench`, one process per run; a training step includes the LAMB update.",
    "bertbench-int8": "`bertbench bench --dtype=int8`: the encoder's and the MLM head's dense layers and the attention's two "
                      "products in int8 (weights per output channel, activations per token, and per token and head in the "
                      "attention; int32 accumulation on oneDNN's VNNI/AMX kernels), the rest (pooler, classifiers, LayerNorm, "
                      "softmax) in fp32 as bertbench (docs/engine.md \"int8 inference\").",
    "torch-default": "`bench/peer/torch_bench.py`, `torch.set_num_threads(threads)`, OpenBLAS pthreads "
                     "(`LD_LIBRARY_PATH={LIB}/openblas-pthread`), default OpenMP wait policy. Training step = forward + "
                     "backward + global-norm clip + LAMB written in tensor ops (torch has no LAMB).",
    "torch-tuned": "the same with `OMP_WAIT_POLICY=PASSIVE` and the OpenMP OpenBLAS "
                   "(`LD_LIBRARY_PATH={LIB}/openblas-openmp`), the fastest PyTorch configuration measured on these CPUs (the project's notes, kept outside this repository).",
    "ort": "ONNX Runtime, inference only, fp32: `bench/peer/ort_export.py` exports torch_bench.py's model (same "
           "weights; opset 12, static shapes), checks that ORT fused Attention (once per layer), "
           "SkipLayerNormalization, FastGelu and EmbedLayerNormalization and that its outputs equal PyTorch's, then "
           "`bench/peer/ort_bench.js` times `session.run` (onnxruntime-node 1.30.0, CPU provider, all graph "
           "optimisations, intra-op threads = threads, sequential execution). No training: ORT's CPU package has none.",
    "ort-int8": "ONNX Runtime, inference only, int8: `bench/peer/ort_export.py --dtype=int8` writes the graph "
                "`onnxruntime.quantization.quantize_dynamic` makes of the fused model (QEmbedLayerNormalization, "
                "QAttention, MatMulInteger chains that ORT fuses into DynamicQuantizeMatMul; int8 weights symmetric per "
                "tensor, uint8 activations quantized per tensor at run time), checks those ops in ORT's optimized graph "
                "and its outputs against PyTorch fp32 (relative error and top-1 agreement), then times it as `ort`.",
    "torch-tuned-jit": "torch-tuned's environment, inference through `torch.jit.trace` + `torch.jit.freeze` + "
                       "`torch.jit.optimize_for_inference` (`torch_bench.py --jit`; outputs checked against eager "
                       "before timing).",
    "bertbench-bf16": "`bertbench bench --dtype=bf16` (bf16 GEMM inputs, fp32 accumulation, master weights and "
                      "optimizer); MFU against the bf16 GEMM ceiling.",
    "torch-default-bf16": "torch-default under `torch.autocast(\"cpu\", dtype=torch.bfloat16)` (`torch_bench.py "
                          "--dtype=bf16`: the forward autocast, the backward following it; fp32 parameters and LAMB; "
                          "LayerNorm inputs cast to fp32, which PyTorch 1.13 needs).",
    "torch-tuned-bf16": "torch-tuned under the same autocast.",
}


def cpu_facts():
    model, flags = "", set()
    with open("/proc/cpuinfo") as f:
        for line in f:
            if line.startswith("model name") and not model:
                model = line.split(":", 1)[1].strip()
            if line.startswith("flags") and not flags:
                flags = set(line.split(":", 1)[1].split())
    fam = {}
    with open("/proc/cpuinfo") as f:
        for line in f:
            k, _, v = line.partition(":")
            if k.strip() in ("cpu family", "model", "stepping") and k.strip() not in fam:
                fam[k.strip()] = v.strip()
    model += " (CPUID family %s model %s stepping %s as the guest sees them)" % (
        fam.get("cpu family", "?"), fam.get("model", "?"), fam.get("stepping", "?"))
    if "amx_tile" in flags:  # AMX first shipped with 4th-gen Xeon Scalable
        model += ", an AMX-capable Intel Xeon: Sapphire Rapids or later"
    isa = [x for x in ("avx2", "fma", "avx512f", "avx512_bf16", "avx512_vnni", "amx_tile", "amx_bf16") if x in flags]
    mem = sh("awk '/MemTotal/ {printf \"%.1f GiB\", $2/1048576}' /proc/meminfo")
    return model, isa, len(os.sched_getaffinity(0)), mem


def cpu_seconds():
    """(busy, steal, total) CPU seconds of the whole machine from /proc/stat (all CPUs), and the CPU
    seconds used by this script and its finished children."""
    with open("/proc/stat") as f:
        v = [int(x) for x in f.readline().split()[1:9]]  # user nice system idle iowait irq softirq steal
    hz = os.sysconf("SC_CLK_TCK")
    ours = sum(getattr(resource.getrusage(w), k) for w in (resource.RUSAGE_SELF, resource.RUSAGE_CHILDREN)
               for k in ("ru_utime", "ru_stime"))
    return (v[0] + v[1] + v[2] + v[5] + v[6]) / hz, v[7] / hz, sum(v) / hz, ours


def other_work_line(start, end, span):
    """How much of the machine other processes (and the hypervisor, as steal) took while this
    invocation made its runs (span: when): busy CPU time not spent by this script or its children,
    as a share of all CPU time. The load average cannot say this: it counts the benchmark's own
    threads."""
    busy, steal, total, ours = (e - s for s, e in zip(start, end))
    other = max(0.0, busy - ours) / total if total > 0 else 0.0
    stolen = steal / total if total > 0 else 0.0
    quiet = other <= 0.05 and stolen <= 0.05
    return ("- Other work while the runs of %s were made: %.1f%% of the machine's CPU time went to other processes, "
            "%.1f%% was stolen by the hypervisor%s" % (span, 100 * other, 100 * stolen, " (quiet)" if quiet else
            " — **WARNING: the machine was busy with other work; these figures are not representative "
            "of this machine (rerun on a quiet machine)**"))


GOAL_RATIO = {"train": 1.5, "infer": 2.0}  # issue 5: bertbench / PyTorch at every point
GOAL_MFU = {"train": 0.70, "infer": 0.80}  # issue 5: BERT-base, seq 128, batch 32, 2 threads


def goals_md(keys, results, runs, repeats, ceilings, ceilings_start, ceiling_end, variants=VARIANTS):
    """The benchmark goals, checked on this run's figures (points this run did not measure are not
    judged). Where a ratio goal against a PyTorch variant is missed, the MFU bertbench would need to
    meet it says whether it is reachable on this machine at all (above 100% of the sgemm ceiling it
    is not)."""
    out = ["## Goals, checked on these figures", ""]
    for peer in [p for p in ("torch-default", "torch-tuned") if p in variants]:
        misses, lows = [], {}
        for key in keys:
            r = results.get(key, {})
            if not (r.get("bertbench") and r.get(peer)):
                continue
            mode = key[0]
            ratio = r["bertbench"] / r[peer]
            if mode not in lows or ratio < lows[mode][0]:
                lows[mode] = (ratio, key)
            if ratio < GOAL_RATIO[mode]:
                mfu = statistics.median(p["mfu"] for p in runs[key]["bertbench"])
                need = mfu * GOAL_RATIO[mode] / ratio if mfu else None
                misses.append("%s %s s%d b%d t%d: %.2f× (%.2f× would need %s of the sgemm ceiling; "
                              "bertbench runs at %s)" % (key + (ratio, GOAL_RATIO[mode],
                              "%.0f%%" % (100 * need) if need else "?", "%.1f%%" % (100 * mfu) if mfu else "?")))
        unjudged = ["%s %s s%d b%d t%d" % key for key in keys
                    if results.get(key, {}).get("bertbench") and not results.get(key, {}).get(peer)]
        if unjudged:
            out.append("- Not judged against %s, which has no figure there (its run failed; see \"Runs that "
                       "failed\" below): %s." % (peer, ", ".join(unjudged)))
        if not lows:
            continue
        low = ", ".join("%s %.2f× at %s s%d b%d t%d" % ((m, v[0]) + v[1][1:]) for m, v in sorted(lows.items()))
        verdict = "**met** at every point" if not misses else "**not met** at " + "; ".join(misses)
        out.append("- Training ≥ 1.5× and inference ≥ 2× %s (lowest: %s): %s." % (peer, low, verdict))
    for mode in ("train", "infer"):
        key = (mode, "base", 128, 32, 2)
        if key in runs and runs[key].get("bertbench"):
            mfu = statistics.median(p["mfu"] for p in runs[key]["bertbench"])
            if mfu:
                out.append("- BERT-base %s MFU at seq 128, batch 32, 2 threads ≥ %.0f%%: %.1f%% — **%s**." % (
                    mode, 100 * GOAL_MFU[mode], 100 * mfu, "met" if mfu >= GOAL_MFU[mode] else "not met"))
    def spread_line(what, values_of):
        spreads = []
        for key in keys:
            vals = values_of(key)
            if len(vals) >= 2:
                spreads.append(((max(vals) - min(vals)) / statistics.median(vals), key))
        if spreads:
            worst = max(spreads)
            out.append("- Repeatability, %s (goal ≤ 5%% on a quiet machine): largest spread %.1f%% (%s %s s%d b%d t%d), "
                       "%d of %d points within 5%%." % ((what, 100 * worst[0]) + worst[1] + (
                           sum(1 for v, _ in spreads if v <= 0.05), len(spreads))))
        return bool(spreads)

    spread_line("bertbench run back to back (each point %d times in a row after the rounds; spread = (max − min) / median "
                "of the runs' sequences/s)" % max((len(v) for v in repeats.values()), default=0), lambda key: repeats.get(key, []))
    if spread_line("across the rounds (the same runs as the ratios above, minutes apart, so the host's drift is in it)",
                   lambda key: [p["sequences_per_second"] for p in runs.get(key, {}).get("bertbench", [])]):
        # How fast the host itself drifted: the same fixed GEMM workload at the start and the end.
        for t in sorted(set(ceilings_start) & set(ceiling_end)):
            s, e = ceilings_start[t][0], ceiling_end[t][0]
            out.append("  The host's own drift over this invocation: the sgemm ceiling (a fixed workload) measured "
                       "%.1f GFLOP/s at the start and %.1f at the end with %d thread(s), %.1f%% apart%s." % (
                           s, e, t, 100 * abs(s - e) / min(s, e),
                           " — more than the 5% goal, so the spread across rounds cannot show it" if abs(s - e) / min(s, e) > 0.05 else ""))
    # An MFU above 100% is never printed without its cause (issue 15, §5).
    over = ["%s %s %s s%d b%d t%d %.1f%%" % ((v,) + key + (100 * statistics.median(p["mfu"] for p in ps),))
            for key in keys for v, ps in sorted(runs.get(key, {}).items())
            if v in ("bertbench", "bertbench-bf16") and ps and statistics.median(p.get("mfu") or 0 for p in ps) > 1]
    if over:
        out.append("- **MFU above 100%%** at %s: the point's GEMMs ran faster than the ceiling probe did at the start "
                   "and at the end of the invocation (or of the one whose files it resumed), so the host was faster "
                   "while the point ran than while the probe ran; the ceiling is a sample of a drifting host, not a "
                   "bound, and these MFUs overstate by that drift." % "; ".join(over))
    return "\n".join(out) + "\n"


GOAL15_RATIO, GOAL15_LATENCY = 1.25, 0.85  # issue 15: bertbench / ORT throughput; bertbench p50 / ORT p50 at base b1
GOAL11_PEER = 2.0  # issue 11: bertbench bf16 / PyTorch bf16 autocast
GOAL11_SELF = {("train", "base"): 1.7, ("infer", "base"): 1.8, ("train", "mini"): 1.4, ("infer", "mini"): 1.4}
GOAL11_MFU = {"train": 0.60, "infer": 0.70}  # against the bf16 GEMM ceiling, BERT-base b32


def fmt_key(key):
    return "%s %s s%d b%d t%d" % key


def judge_ratio(out, what, required, results, num, den, goal, keys, mfu_of=None, ceiling=""):
    """One goal line: results[key][num] / results[key][den] >= goal at every required point this
    run measured (the points it did not sweep, or whose run failed, are named, not judged). With
    mfu_of(key, variant), a miss also says what MFU num would need to meet the goal (above 100% of
    `ceiling` it cannot be met on this machine)."""
    judged, misses, missing, unswept = [], [], [], []
    for key in required:
        r = results.get(key, {})
        if key not in keys:
            unswept.append(fmt_key(key))
        elif r.get(num) and r.get(den):
            ratio = r[num] / r[den]
            judged.append((ratio, key))
            if ratio < goal:
                mfu = mfu_of(key, num) if mfu_of else None
                misses.append("%s %.2f×" % (fmt_key(key), ratio) + (
                    " (%.2f× would need %.0f%% of the %s; %s runs at %.1f%%)" % (
                        goal, 100 * mfu * goal / ratio, ceiling, num, 100 * mfu) if mfu else ""))
        else:
            missing.append("%s (no %s figure: see \"Runs that failed\")" % (fmt_key(key), " and no ".join(
                v for v in (num, den) if not r.get(v))))
    if judged:
        low = min(judged)
        verdict = "**met** at all %d points measured" % len(judged) if not misses else \
            "**not met** at %d of %d: %s" % (len(misses), len(judged), "; ".join(misses))
        out.append("- %s ≥ %.2f× (lowest %.2f× at %s): %s." % (what, goal, low[0], fmt_key(low[1]), verdict))
    else:
        out.append("- %s ≥ %.2f×: not judged (no point measured)." % (what, goal))
    if missing:
        out.append("  Not judged: %s." % ", ".join(missing))
    if unswept:
        out.append("  Not in this sweep: %s." % ", ".join(unswept))


def peer_goals_md(keys, results, lat, mfu_of, variants):
    judge = lambda *args, **kw: judge_ratio(*args, keys=keys, **kw)
    """Issue 15 (bertbench vs ONNX Runtime, fp32 inference) and issue 11 (bf16) goals, checked on
    this run's figures at seq 128, 2 threads. Returns '' when neither peer ran."""
    out = []
    if "ort" in variants and "bertbench" in variants:
        out += ["", "### Issue 15: inference against ONNX Runtime (fp32, seq 128, 2 threads)", ""]
        req = [("infer", m, 128, b, 2) for m in ("tiny", "mini", "base") for b in (1, 8, 32)]
        judge(out, "bertbench ÷ ORT throughput, every tiny/mini/base × batch 1/8/32 point", req, results,
                    "bertbench", "ort", GOAL15_RATIO, mfu_of=mfu_of, ceiling="sgemm ceiling")
        key = ("infer", "base", 128, 1, 2)
        b, o = lat.get(key, {}).get("bertbench"), lat.get(key, {}).get("ort")
        if b and o:
            ok = b["p50"] <= GOAL15_LATENCY * o["p50"]
            out.append("- BERT-base batch-1 latency p50 ≤ %.2f× ORT's: bertbench %.2f ms, ORT %.2f ms = %.2f× — **%s** "
                       "(p90 %.2f vs %.2f ms, p99 %.2f vs %.2f ms)." % (
                           GOAL15_LATENCY, b["p50"], o["p50"], b["p50"] / o["p50"], "met" if ok else "not met",
                           b["p90"], o["p90"], b["p99"], o["p99"]))
        else:
            out.append("- BERT-base batch-1 latency p50 ≤ %.2f× ORT's: not judged (%s not measured in this run)."
                       % (GOAL15_LATENCY, fmt_key(key)))
    if "bertbench-bf16" in variants:
        out += ["", "### Issue 11: bf16 (seq 128, 2 threads)", ""]
        req = [(m_, mo, 128, b, 2) for m_ in ("train", "infer") for mo in ("tiny", "mini", "base") for b in (8, 32)]
        for peer in ("torch-default-bf16", "torch-tuned-bf16"):
            if peer in variants:
                judge(out, "bertbench bf16 ÷ PyTorch autocast bf16 (%s), tiny/mini/base × batch 8/32, training and "
                            "inference" % peer, req, results, "bertbench-bf16", peer, GOAL11_PEER,
                      mfu_of=mfu_of, ceiling="bf16 GEMM ceiling")
        if "bertbench" in variants:
            for (mode, model), goal in GOAL11_SELF.items():
                judge(out, "bertbench bf16 ÷ bertbench fp32, %s %s batch 32" % (model, mode),
                            [(mode, model, 128, 32, 2)], results, "bertbench-bf16", "bertbench", goal)
        for mode, goal in GOAL11_MFU.items():
            key = (mode, "base", 128, 32, 2)
            mfu = mfu_of(key, "bertbench-bf16")
            if mfu:
                out.append("- BERT-base %s MFU against the bf16 GEMM ceiling at batch 32 ≥ %.0f%%: %.1f%% — **%s**." % (
                    mode, 100 * goal, 100 * mfu, "met" if mfu >= goal else "not met"))
            else:
                out.append("- BERT-base %s MFU against the bf16 GEMM ceiling at batch 32 ≥ %.0f%%: not judged (no bf16 "
                           "figure or no bf16 ceiling at %s)." % (mode, 100 * goal, fmt_key(key)))
    return "\n".join(out) + "\n" if out else ""


GOAL10_RATIO = {"train": 1.5, "infer": 2.0}  # issue 10: bertbench / PyTorch, SQuAD, BERT-base seq 384


def squad_goals_md(keys, results, variants):
    """Issue 10's SQuAD goal, checked on this run's figures: bertbench >= 1.5x (training) and >= 2x
    (inference) PyTorch at BERT-base seq 384, batch 1/8/32, at every thread count swept; in fp32
    against torch-* and in bf16 against torch-*-bf16 (autocast)."""
    out = ["", "### Issue 10: SQuAD against PyTorch (BERT-base, seq 384, batch 1/8/32)", ""]
    threads = sorted({k[4] for k in keys}) or [1]
    for mine, suffix in (("bertbench", ""), ("bertbench-bf16", "-bf16")):
        if mine not in variants:
            continue
        for peer in ("torch-default" + suffix, "torch-tuned" + suffix):
            if peer not in variants:
                continue
            for mode, goal in GOAL10_RATIO.items():
                req = [(mode, "base", 384, b, t) for b in (1, 8, 32) for t in threads]
                judge_ratio(out, "%s ÷ %s, SQuAD %s" % (mine, peer, "training" if mode == "train" else "inference"),
                            req, results, mine, peer, goal, keys=keys)
    return "\n".join(out) + "\n"


def winners_md(keys, results, variants, dtype_label):
    """Which variant is fastest where, in plain words (one line per winner)."""
    wins = {}
    for key in keys:
        r = {v: x for v, x in results.get(key, {}).items() if v in variants and x}
        if len(r) < 2:
            continue
        order = sorted(r, key=r.get, reverse=True)
        wins.setdefault(order[0], []).append("%s (%.2f× %s)" % (fmt_key(key), r[order[0]] / r[order[1]], order[1]))
    if not wins:
        return ""
    n = sum(len(w) for w in wins.values())
    lines = ["**Who wins where (%s)**: the fastest variant per point and its lead over the runner-up.\n" % dtype_label]
    for v in sorted(wins, key=lambda v: -len(wins[v])):
        lines.append("- **%s** is fastest at %d of %d points: %s." % (v, len(wins[v]), n, "; ".join(wins[v])))
    return "\n".join(lines) + "\n"


# ---- SVG (hand-written) --------------------------------------------------------------------
COLOURS = {"bertbench": "#0072b2", "torch-default": "#d55e00", "torch-tuned": "#009e73", "ort": "#cc79a7",
           "ort-int8": "#f0e442", "torch-tuned-jit": "#999999",
           "bertbench-bf16": "#56b4e9", "torch-default-bf16": "#e69f00", "torch-tuned-bf16": "#000000",
           "bertbench-int8": "#332288"}
DASH = ["", "6,3", "2,3", "8,3,2,3"]


def esc(s):
    return s.replace("&", "&amp;").replace("<", "&lt;").replace(">", "&gt;")


def nice_max(v):
    if v <= 0:
        return 1.0
    import math
    e = 10 ** math.floor(math.log10(v))
    for m in (1, 2, 2.5, 5, 10):
        if m * e >= v:
            return m * e
    return 10 * e


def throughput_svg(results, modes, models, title):
    """One panel per mode (log y): sequences/s vs batch size, a line per (model, variant)."""
    import math
    W, PH, x0, x1 = 900, 330, 80, 640
    svg = ['<svg xmlns="http://www.w3.org/2000/svg" width="%d" height="%d" font-family="sans-serif">'
           % (W, 40 + PH * len(modes)), '<rect width="100%" height="100%" fill="white"/>',
           '<text x="%d" y="24" text-anchor="middle" font-size="15">%s</text>' % ((x0 + x1) // 2, esc(title))]
    for k, mode in enumerate(modes):
        top = 50 + k * PH
        y0, y1 = top + 20, top + PH - 60
        pts = {key: v for key, v in results.items() if key[0] == mode}
        vals = [s for v in pts.values() for s in v.values() if s]
        batches = sorted({key[3] for key in pts})
        if not vals or not batches:
            continue
        lo, hi = math.floor(math.log10(min(vals))), math.ceil(math.log10(max(vals)))
        hi = max(hi, lo + 1)
        bx = lambda b: x0 + (batches.index(b) + 0.5) / len(batches) * (x1 - x0)
        sy = lambda v: y1 - (math.log10(v) - lo) / (hi - lo) * (y1 - y0)
        svg.append('<text x="%d" y="%d" font-size="14" font-weight="bold">%s</text>' % (x0, top + 10, mode))
        for e in range(lo, hi + 1):
            svg.append('<line x1="%d" y1="%.1f" x2="%d" y2="%.1f" stroke="#ddd"/>' % (x0, sy(10 ** e), x1, sy(10 ** e)))
            svg.append('<text x="%d" y="%.1f" text-anchor="end" font-size="11">%g</text>' % (x0 - 6, sy(10 ** e) + 4, 10 ** e))
        for b in batches:
            svg.append('<text x="%.1f" y="%d" text-anchor="middle" font-size="11">batch %d</text>' % (bx(b), y1 + 16, b))
        svg.append('<rect x="%d" y="%d" width="%d" height="%d" fill="none" stroke="#333"/>' % (x0, y0, x1 - x0, y1 - y0))
        svg.append('<text transform="translate(%d,%d) rotate(-90)" text-anchor="middle" font-size="12">sequences/s (log)</text>'
                   % (x0 - 50, (y0 + y1) // 2))
        ly = y0
        for mi, model in enumerate(models):
            for variant in VARIANTS:
                line = sorted((key[3], v.get(variant)) for key, v in pts.items() if key[1] == model and v.get(variant))
                if not line:
                    continue
                d = " ".join("%s%.1f,%.1f" % ("M" if i == 0 else "L", bx(b), sy(s)) for i, (b, s) in enumerate(line))
                dash = DASH[mi % len(DASH)]
                svg.append('<path d="%s" fill="none" stroke="%s" stroke-width="2"%s/>'
                           % (d, COLOURS[variant], ' stroke-dasharray="%s"' % dash if dash else ""))
                for b, s in line:
                    svg.append('<circle cx="%.1f" cy="%.1f" r="3" fill="%s"/>' % (bx(b), sy(s), COLOURS[variant]))
                svg.append('<line x1="%d" y1="%d" x2="%d" y2="%d" stroke="%s" stroke-width="2"%s/>'
                           % (x1 + 12, ly, x1 + 40, ly, COLOURS[variant], ' stroke-dasharray="%s"' % dash if dash else ""))
                svg.append('<text x="%d" y="%d" font-size="11">%s %s</text>' % (x1 + 46, ly + 4, esc(model), variant))
                ly += 16
    svg.append("</svg>")
    return "\n".join(svg) + "\n"
