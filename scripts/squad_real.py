"""scripts/bench-compare.py --squad_data=FEATURES (issue 26 §2): bertbench and its peers on the same
real-length SQuAD queries, interleaved per round, and a Markdown table.

FEATURES is run_squad.py's eval feature file (eval.tf_record). bench/peer/squad_queries.py turns it into
the peers' query file (written under --out); every variant then runs SQuAD inference on the same
stream of features, in file order, n // B full batches per pass, the partial last one dropped (bench/runner.cpp
read_squad_batches; squad_queries.stream_batches), the same warm-up/steps/min_time, so that step i of
every variant computes the same batch; --steps is raised per point to floor(queries / batch size) where it
is lower, so that the timed steps cover one pass over the features:
  bertbench-real[-DT]    `bertbench bench --task=squad --data=FEATURES --squad_layout=real`: the real tokens
                         only, no padding computed
  bertbench-padded[-DT]  the same with --squad_layout=padded: every feature at max_seq_length
                         (run_squad.py's computation)
  torch-tuned[-bf16]     bench/peer/torch_bench.py --task=squad --queries (the torch-tuned environment;
                         bf16: autocast), each batch padded to its longest query
  ort, ort-int8          bench/peer/ort_export.py --task=squad --queries (dynamic axes; int8: quantize_dynamic's
                         graph, run when --dtypes has int8), each batch padded to its longest query;
                         --peers='' runs none
DT is each of --dtypes other than fp32 (bf16, int8). Figures per variant and point: the median over
rounds of sequences/s and real tokens/s (docs/benchmark.md), plus each run's computed tokens/s
(what it actually pushed through the encoder). Results under --out (default docs/perf-squad-real/),
reused when present (--fresh starts over); the doc (default docs/PERFORMANCE-squad-real.md) names the
command, the CPU and the machine's load while it ran."""
import json
import os
import statistics
import subprocess
import sys
import time

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
PEER = os.path.join(ROOT, "bench", "peer")
PEERS = ("torch-tuned", "ort", "ort-int8")


def variants_of(dtypes, peers):
    out = []
    for d in dtypes:
        sfx = "" if d == "fp32" else "-" + d
        out += ["bertbench-real" + sfx, "bertbench-padded" + sfx]
    if "torch-tuned" in peers:
        out += ["torch-tuned" + ("" if d == "fp32" else "-bf16") for d in dtypes if d in ("fp32", "bf16")]
    out += [p for p in ("ort", "ort-int8") if p in peers and (p == "ort" or "int8" in dtypes)]
    return out


def steps_of(a, B, n):
    """--steps, raised where needed so that the timed batches cover the n // B full batches of one pass over
    the n queries (every query but the partial last batch's) at least once."""
    return max(a.steps, n // B)


def command(v, a, key, out, queries, steps):
    model, T, B, t = key
    common = ["--task=squad", "--mode=infer", "--model=" + model, "--seq_len=%d" % T, "--batch_size=%d" % B,
              "--threads=%d" % t, "--warmup=%d" % a.warmup, "--steps=%d" % steps, "--min_time=%g" % a.min_time,
              "--json=" + out]
    if v.startswith("bertbench-"):
        layout, _, dtype = v[len("bertbench-"):].partition("-")
        return [a.bertbench, "bench", "--noceiling", "--data=" + a.squad_data, "--squad_layout=" + layout,
                "--dtype=" + (dtype or "fp32")] + common
    if v.startswith("torch-tuned"):
        return ["/usr/bin/python3", os.path.join(PEER, "torch_bench.py"), "--queries=" + queries,
                "--dtype=" + ("bf16" if v.endswith("-bf16") else "fp32")] + common
    return ["/usr/bin/python3", os.path.join(PEER, "ort_export.py"), "--queries=" + queries] + common + (
        ["--dtype=int8"] if v == "ort-int8" else [])


def check_point(v, j):
    """Why a run's JSON cannot stand for variant v, or None."""
    p = next((p for p in j.get("points", []) if p.get("mode") == "infer"), None)
    if not p or p.get("task") != "squad":
        return "no SQuAD inference point in it"
    want = ("real" if "-real" in v else "padded") if v.startswith("bertbench-") else "batch_padded"
    return None if p.get("squad_layout") == want else "its point's squad_layout is %r, expected %r" % (p.get("squad_layout"), want)


def load_line():
    with open("/proc/loadavg") as f:
        return " ".join(f.read().split()[:3])


def main(a, bc):
    """a: bench-compare's parsed flags; bc: the bench-compare module (run, VARIANTS' environments, cpu_facts)."""
    if not os.path.isfile(a.squad_data):
        sys.exit("bench-compare: --squad_data=%s: not a file (expected run_squad.py's eval.tf_record)" % a.squad_data)
    dtypes = a.dtypes.split(",")
    peers = [p for p in a.peers.split(",") if p] if a.peers is not None else list(PEERS)  # '' = none
    for p in peers:
        if p not in PEERS:
            sys.exit("bench-compare: --squad_data: --peers=%s: expected a comma list of %s" % (p, ", ".join(PEERS)))
    variants = variants_of(dtypes, peers)
    out_dir = a.out or os.path.join(ROOT, "docs", "perf-squad-real")
    doc = a.doc or os.path.join(ROOT, "docs", "PERFORMANCE-squad-real.md")
    raw = os.path.join(out_dir, "raw")
    if a.fresh and os.path.isdir(raw):
        for f in os.listdir(raw):
            os.remove(os.path.join(raw, f))
    os.makedirs(raw, exist_ok=True)
    queries = os.path.join(out_dir, "queries.json")
    r = subprocess.run(["/usr/bin/python3", os.path.join(PEER, "squad_queries.py"), a.squad_data, "--out=" + queries])
    if r.returncode:
        sys.exit("bench-compare: --squad_data=%s: squad_queries.py failed (above)" % a.squad_data)
    with open(queries) as f:
        qd = json.load(f)
    T = qd["max_seq_length"]
    if a.seq_len and int(a.seq_len) != T:
        sys.exit("bench-compare: --seq_len=%s: expected the features' max_seq_length, %d (%s)" % (a.seq_len, T, a.squad_data))
    models = (a.models or "base").split(",")
    batches = [int(b) for b in (a.batch_sizes or "1,8").split(",")]
    threads = [int(t) for t in a.threads.split(",")]
    keys = [(m, T, b, t) for m in models for b in batches for t in threads]
    load_before, t0 = load_line(), time.time()
    runs = {}
    for key in keys:
        for rnd in range(a.rounds):
            for v in variants:
                steps = steps_of(a, key[2], len(qd["queries"]))
                out = os.path.join(raw, "%s__%s_s%d_b%d_t%d_w%d_n%d_m%g__r%d.json" % ((v,) + key + (a.warmup, steps, a.min_time, rnd)))
                env = bc.VARIANTS.get(v, {}) if v.startswith("torch") else {}
                j = bc.run(command(v, a, key, out, queries, steps), env, out, a.timeout, check=lambda j, v=v: check_point(v, j))
                if j:
                    runs.setdefault(key, {}).setdefault(v, []).append(next(p for p in j["points"] if p.get("mode") == "infer"))
    write_doc(a, doc, out_dir, keys, variants, runs, qd, load_before, load_line(), time.time() - t0, bc)
    bc.log("wrote %s (%d runs, %d reused)" % (doc, bc.COUNTS["ran"], bc.COUNTS["reused"]))


def write_doc(a, doc, out_dir, keys, variants, runs, qd, load_before, load_after, wall, bc):
    med = lambda pts, f: statistics.median(p.get(f, 0.0) for p in pts)
    qs = qd["queries"]
    real = sum(len(q["input_ids"]) for q in qs)
    model, isa, cores, mem = bc.cpu_facts()
    L = ["# SQuAD inference on real-length queries: bertbench and its peers", "",
         "Generated by `scripts/bench-compare.py --squad_data` (scripts/squad_real.py) on %s UTC. Every figure below "
         "comes from the JSON files under `%s/raw/`." % (time.strftime("%Y-%m-%d %H:%M", time.gmtime()),
                                                          os.path.relpath(out_dir, ROOT)), "",
         "```sh", " ".join(["/usr/bin/python3", "scripts/bench-compare.py"] + sys.argv[1:]), "```", "",
         "- Queries: %d features of `%s` (max_seq_length %d), %d real tokens: %.1f%% of the %d a padded layout "
         "computes." % (len(qs), os.path.relpath(a.squad_data, ROOT) if a.squad_data.startswith(ROOT) else a.squad_data,
                        qd["max_seq_length"], real, 100.0 * real / (len(qs) * qd["max_seq_length"]), len(qs) * qd["max_seq_length"]),
         "- CPU: %s; %d CPUs for this process; ISA %s; memory %s." % (model, cores, ", ".join(isa), mem),
         "- Load average (1/5/15 min) before: %s; after: %s (a run's own threads, --threads=%s, add about that "
         "many); wall %.0f s." % (load_before, load_after, a.threads, wall),
         "- Rounds %d (variants interleaved per round), warm-up %d, steps %s, min_time %g s; the figure is the median "
         "over rounds. Step i of every variant computes the same batch of the feature stream (see scripts/squad_real.py)."
         % (a.rounds, a.warmup, ", ".join("%d at batch %d" % (steps_of(a, b, len(qs)), b) for b in sorted({k[2] for k in keys})),
            a.min_time), "",
         "seq/s and tok/s: sequences and **real** tokens per second (docs/benchmark.md); computed tok/s: the token rows "
         "the variant actually ran through the encoder (bertbench-padded: max_seq_length per feature; bertbench-real: "
         "the real tokens; the peers: each batch padded to its longest query). ×: seq/s over bertbench-real's "
         "(fp32) seq/s.", ""]
    for key in keys:
        got = runs.get(key, {})
        base = med(got["bertbench-real"], "sequences_per_second") if got.get("bertbench-real") else None
        L += ["## %s, seq %d, batch %d, %d threads" % key, "",
              "| variant | dtype | seq/s | tok/s (real) | computed tok/s | real fraction of computed | p50 ms | p90 ms | runs | × bertbench-real |",
              "|---|---|---:|---:|---:|---:|---:|---:|---:|---:|"]
        for v in variants:
            pts = got.get(v)
            if not pts:
                L.append("| %s | | failed or not run | | | | | | 0 | |" % v)
                continue
            sps, tps = med(pts, "sequences_per_second"), med(pts, "tokens_per_second")
            cps = med(pts, "computed_tokens_per_second") if "computed_tokens_per_second" in pts[0] else (
                tps if "-real" in v else med(pts, "padded_tokens_per_second"))
            L.append("| %s | %s | %.2f | %.0f | %.0f | %.1f%% | %.1f | %.1f | %d | %s |" % (
                v, pts[0].get("dtype", "fp32"), sps, tps, cps, 100.0 * tps / cps if cps else 0, med(pts, "latency_ms_p50"),
                med(pts, "latency_ms_p90"), len(pts), "%.2f×" % (sps / base) if base else "—"))
        L.append("")
    if bc.FAILURES:
        L += ["## Runs that failed", ""] + ["- `%s`: %s" % f for f in bc.FAILURES] + [""]
    with open(doc + ".tmp", "w") as f:
        f.write("\n".join(L))
    os.replace(doc + ".tmp", doc)
