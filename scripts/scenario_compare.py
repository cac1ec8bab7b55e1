#!/usr/bin/env python3
"""MLPerf Inference scenarios for bertbench and ONNX Runtime under one harness (docs/benchmark.md "Scenarios").

Every SUT runs the same schedules: bertbench (`--dtypes`) runs them itself (`bench --scenario`); the ONNX
Runtime peer (`--ort`: the dynamic-axes SQuAD export of bench/peer/ort_export.py --task=squad, fp32 and/or
quantize_dynamic's int8) runs the schedule bertbench writes (`--schedule_out`, the same seed, rate and
query set) with bench/peer/ort_scenario.js, and bertbench summarizes its raw log (`--summarize_log`): one
statistics implementation for both. Per SUT: singlestream (p90 latency), offline (samples/s, tokens/s) and
server at every rate of --rates (p99 against --latency_bound_ms); the SUTs run interleaved per scenario.
Writes OUT/raw/*.json (reports and raw logs), OUT/server-p99.svg (p99 latency against offered load, one
line per SUT, the bound dashed) and the Markdown report --doc.

  /usr/bin/python3 scripts/scenario_compare.py --features=eval.tf_record --bertbench=build/bertbench \\
      --model=base --seq_len=384 --dtypes=fp32,bf16,int8 --ort=fp32,int8 --rates=0.5,1,2,4 \\
      --latency_bound_ms=1000 --min_duration_s=20 --min_query_count=40 --out=docs/perf-scenarios \\
      --doc=docs/PERFORMANCE-scenarios.md
"""
import argparse
import json
import os
import subprocess
import sys
import time

HERE = os.path.dirname(os.path.abspath(__file__))
PEER = os.path.join(HERE, "..", "bench", "peer")
sys.path.insert(0, PEER)
from squad_real import load_line  # noqa: E402  (scripts/ is on the path: this file's folder)


def die(msg):
    sys.exit("scenario_compare.py: " + msg)


REUSED = []  # reports found in OUT/raw from an earlier invocation


def run(cmd, refusable=False):
    """Runs cmd; dies on failure, except that with `refusable` bertbench's one-line refusal of a target it
    cannot meet (exit status 1 before measuring) is returned as its message."""
    print("+ " + " ".join(cmd), flush=True)
    r = subprocess.run(cmd, stderr=subprocess.PIPE, text=True)
    sys.stderr.write(r.stderr)
    if r.returncode != 0:
        last = r.stderr.strip().splitlines()[-1] if r.stderr.strip() else ""
        if refusable and ("queue would grow without bound" in last or "no rate can meet the bound" in last):
            return last
        die("%s failed with exit status %d" % (cmd[0], r.returncode))
    return None


def scenario_flags(a, scenario, rate):
    f = ["--task=squad", "--model=" + a.model, "--seq_len=%d" % a.seq_len, "--threads=%d" % a.threads,
         "--data=" + a.features, "--scenario=" + scenario, "--min_duration_s=%g" % a.min_duration_s,
         "--min_query_count=%d" % a.min_query_count, "--scenario_seed=%d" % a.seed]
    if scenario != "singlestream":
        f.append("--batch_size=%d" % a.batch_size)
    if scenario == "server":  # (the other scenarios refuse it: they have no bound)
        f.append("--latency_bound_ms=%g" % a.latency_bound_ms)
    if rate is not None:
        f.append("--server_target_qps=%g" % rate)
    return f


def measure(a, sut, scenario, rate, ort_models, expect):
    """Runs one SUT on one scenario (server: at one rate); returns its report's `run` object, or
    {"refused": message} where bertbench refused the target before measuring. A report already in OUT/raw is
    reused (delete it to measure that run again)."""
    tag = "%s-%s%s" % (sut, scenario, "" if rate is None else "-%g" % rate)
    report, log = [os.path.join(a.out, "raw", tag + x) for x in (".json", ".log.json")]
    if os.path.exists(report):
        REUSED.append(report)
        with open(report) as f:
            return json.load(f)["run"]
    flags = scenario_flags(a, scenario, rate)
    if sut.startswith("bertbench-"):
        refused = run([a.bertbench, "bench", "--dtype=" + sut.split("-", 1)[1]] + flags +
                      ["--json=" + report, "--scenario_log=" + log], refusable=scenario == "server")
        if refused:
            return {"refused": refused}
    else:  # the ORT peer: bertbench's schedule, ort_scenario.js, bertbench's statistics
        schedule = os.path.join(a.out, "raw", tag + ".schedule.json")
        # The schedule's length is sized from bertbench's figures for the same dtype, with room (x0.7 the latency,
        # /0.7 the rate) so that a peer up to 1.4x faster still fills --min_duration_s.
        e = expect.get(("bertbench-" + sut.split("-", 1)[1], scenario))
        sized = [] if e is None else ["--expected_latency_ms=%g" % (0.7 * e)] if scenario == "singlestream" else \
            ["--expected_qps=%g" % (e / 0.7)] if scenario == "offline" else []
        run([a.bertbench, "bench"] + flags + sized + ["--schedule_out=" + schedule])
        onnx, verified = ort_models[sut]
        run(["node", os.path.join(PEER, "ort_scenario.js"), "--ort_dir=" + a.ort_dir, "--onnx=" + onnx,
             "--verified=" + verified, "--schedule=" + schedule, "--threads=%d" % a.threads, "--log=" + log])
        run([a.bertbench, "bench", "--summarize_log=" + log, "--min_duration_s=%g" % a.min_duration_s,
             "--min_query_count=%d" % a.min_query_count, "--json=" + report])
        os.remove(schedule)  # bertbench writes it again from the same flags
    with open(report) as f:
        return json.load(f)["run"]


def svg(series, bound, title):
    """p99 latency (ms) against offered load: series = {name: [(rate, p99)]}; log-scaled y."""
    import math
    W, H, L, R, T, B = 720, 420, 70, 160, 40, 50
    xs = [x for pts in series.values() for x, _ in pts]
    ys = [y for pts in series.values() for _, y in pts] + [bound]
    x0, x1 = 0.0, max(xs) * 1.05
    y0, y1 = math.log10(min(ys) * 0.8), math.log10(max(ys) * 1.25)
    px = lambda x: L + (x - x0) / (x1 - x0) * (W - L - R)
    py = lambda y: T + (y1 - math.log10(y)) / (y1 - y0) * (H - T - B)
    colors = ["#1f77b4", "#ff7f0e", "#2ca02c", "#d62728", "#9467bd", "#8c564b"]
    o = ['<svg xmlns="http://www.w3.org/2000/svg" width="%d" height="%d" font-family="sans-serif" font-size="12">' % (W, H),
         '<rect width="100%" height="100%" fill="white"/>',
         '<text x="%d" y="22" font-size="14">%s</text>' % (L, title),
         '<line x1="%d" y1="%d" x2="%d" y2="%d" stroke="black"/>' % (L, H - B, W - R, H - B),
         '<line x1="%d" y1="%d" x2="%d" y2="%d" stroke="black"/>' % (L, T, L, H - B),
         '<text x="%d" y="%d" text-anchor="middle">offered load (Poisson target, queries/s)</text>' % ((L + W - R) / 2, H - 12),
         '<text x="16" y="%d" transform="rotate(-90 16 %d)" text-anchor="middle">99th-percentile latency (ms, log)</text>'
         % ((T + H - B) / 2, (T + H - B) / 2)]
    for e in range(int(math.floor(y0)), int(math.ceil(y1)) + 1):
        for m in (1, 2, 5):
            v = m * 10 ** e
            if y0 <= math.log10(v) <= y1:
                o.append('<line x1="%d" y1="%.1f" x2="%d" y2="%.1f" stroke="#ddd"/><text x="%d" y="%.1f" text-anchor="end">%g</text>'
                         % (L, py(v), W - R, py(v), L - 4, py(v) + 4, v))
    for x in sorted(set(xs)):
        o.append('<text x="%.1f" y="%d" text-anchor="middle">%g</text>' % (px(x), H - B + 16, x))
    o.append('<line x1="%d" y1="%.1f" x2="%d" y2="%.1f" stroke="black" stroke-dasharray="6 4"/>'
             '<text x="%d" y="%.1f">bound %g ms</text>' % (L, py(bound), W - R, py(bound), W - R + 6, py(bound) + 4, bound))
    for i, (name, pts) in enumerate(series.items()):
        c = colors[i % len(colors)]
        pts = sorted(pts)
        o.append('<polyline fill="none" stroke="%s" stroke-width="2" points="%s"/>'
                 % (c, " ".join("%.1f,%.1f" % (px(x), py(y)) for x, y in pts)))
        o += ['<circle cx="%.1f" cy="%.1f" r="3" fill="%s"/>' % (px(x), py(y), c) for x, y in pts]
        o.append('<text x="%d" y="%d" fill="%s">%s</text>' % (W - R + 6, T + 16 * i, c, name))
    return "\n".join(o + ["</svg>"]) + "\n"


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--features", required=True, help="run_squad.py eval features (the query set)")
    ap.add_argument("--bertbench", default="build/bertbench")
    ap.add_argument("--model", default="base")
    ap.add_argument("--seq_len", type=int, default=384)
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--batch_size", type=int, default=8, help="offline/server: most queries per batch")
    ap.add_argument("--dtypes", default="fp32,bf16,int8")
    ap.add_argument("--ort", default="fp32,int8", help="ONNX Runtime SUTs (empty: none)")
    ap.add_argument("--rates", default="0.5,1,2,4", help="server: the offered loads, queries/s")
    ap.add_argument("--latency_bound_ms", type=float, default=1000)
    ap.add_argument("--min_duration_s", type=float, default=20)
    ap.add_argument("--min_query_count", type=int, default=40)
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--out", default="runs/scenarios")
    ap.add_argument("--doc", default="")
    a = ap.parse_args()
    if not os.path.isfile(a.features):
        die("--features=%s: no such file (expected run_squad.py eval features)" % a.features)
    try:
        rates = [float(r) for r in a.rates.split(",") if r]
    except ValueError:
        die("--rates=%s: expected comma-separated numbers" % a.rates)
    if not rates or min(rates) <= 0:
        die("--rates=%s: expected positive rates" % a.rates)
    suts = ["bertbench-" + d for d in a.dtypes.split(",") if d] + ["ort-" + d for d in a.ort.split(",") if d]
    for s in suts:
        if s.split("-", 1)[1] not in (("fp32", "bf16", "int8") if s.startswith("bertbench") else ("fp32", "int8")):
            die("unknown SUT %s (--dtypes: fp32,bf16,int8; --ort: fp32,int8)" % s)
    os.makedirs(os.path.join(a.out, "raw"), exist_ok=True)
    ort_models = {}
    if any(s.startswith("ort-") for s in suts):
        import ort_export as oe
        import ort_squad
        a.ort_dir = oe.setup_ort()
        for s in suts:
            if s.startswith("ort-"):
                ort_models[s] = ort_squad.export_and_verify(a.model, a.threads, a.ort_dir, s.split("-", 1)[1])
    started, load_before = time.time(), load_line()
    runs, expect = {}, {}
    for scenario in ("singlestream", "offline"):
        for s in suts:
            r = runs[(s, scenario, None)] = measure(a, s, scenario, None, ort_models, expect)
            st = r["stats"]
            expect[(s, scenario)] = st["latency_ms"]["p50"] if scenario == "singlestream" else st["samples_per_second"]
    for rate in rates:
        for s in suts:
            runs[(s, "server", rate)] = measure(a, s, "server", rate, ort_models, expect)
    wall, load_after = time.time() - started, load_line()
    series = {s: [(r, runs[(s, "server", r)]["stats"]["latency_ms"]["p99"]) for r in rates
                  if "stats" in runs[(s, "server", r)]] for s in suts}
    with open(os.path.join(a.out, "server-p99.svg"), "w") as f:
        f.write(svg(series, a.latency_bound_ms, "Server: p99 latency against offered load (BERT-%s, seq %d, %d threads)"
                    % (a.model, a.seq_len, a.threads)))
    with open(os.path.join(a.out, "summary.json"), "w") as f:
        json.dump({"args": vars(a), "wall_s": wall, "load_before": load_before, "load_after": load_after,
                   "runs": [{"sut": k[0], "scenario": k[1], "rate": k[2], "run": v} for k, v in runs.items()]}, f, indent=1)
    if a.doc:
        write_doc(a, suts, rates, runs, wall, load_before, load_after)


def write_doc(a, suts, rates, runs, wall, load_before, load_after):
    cpu = subprocess.run(["lscpu"], capture_output=True, text=True).stdout
    model_name = next((l.split(":", 1)[1].strip() for l in cpu.splitlines() if l.startswith("Model name")), "?")
    st = lambda s, sc, r=None: runs[(s, sc, r)]["stats"]
    ok = lambda x: "VALID" if x["result"] == "VALID" else "INVALID (" + "; ".join(x["invalid_reasons"]) + ")"
    L = ["# MLPerf Inference scenarios: bertbench and ONNX Runtime under one harness", "",
         "Generated by `scripts/scenario_compare.py` on %s UTC; every figure comes from the JSON under `%s/raw/`."
         % (time.strftime("%Y-%m-%d %H:%M", time.gmtime()), a.out), "",
         "```sh", "/usr/bin/python3 scripts/scenario_compare.py " + " ".join(
             "--%s=%s" % (k, v) for k, v in vars(a).items() if k not in ("ort_dir",)), "```", "",
         "- CPU: %s (lscpu), %d threads; this invocation: load average before %s, after %s; wall %.0f s; %d of its "
         "%d runs reused from earlier invocations (their reports in `raw/` carry their own system_info)." % (
             model_name, a.threads, load_before, load_after, wall, len(REUSED), len(runs)),
         "- Query set: the features of `%s`, each at its real length; BERT-%s with random weights (timing only), "
         "seq %d. Rules and figures: docs/benchmark.md \"Scenarios\". Validity is judged against this run's "
         "settings (min %g s, %d queries; server p99 ≤ %g ms), not MLPerf's 600 s and its query counts."
         % (a.features, a.model, a.seq_len, a.min_duration_s, a.min_query_count, a.latency_bound_ms),
         "- ORT: the schedule bertbench wrote for the same scenario, seed and rate, run by "
         "`bench/peer/ort_scenario.js` with the same SUT policy, each batch padded to its longest query; "
         "its raw log summarized by `bertbench bench --summarize_log`.", "",
         "## SingleStream and Offline", "",
         "| SUT | singlestream p90 ms | p50 ms | p99 ms | queries | result | offline samples/s | tokens/s | "
         "mean batch | result |", "|---|---:|---:|---:|---:|---|---:|---:|---:|---|"]
    for s in suts:
        ss, off = st(s, "singlestream"), st(s, "offline")
        L.append("| %s | %.1f | %.1f | %.1f | %d | %s | %.2f | %.0f | %.2f | %s |" % (
            s, ss["latency_ms"]["p90"], ss["latency_ms"]["p50"], ss["latency_ms"]["p99"], ss["queries"], ok(ss),
            off["samples_per_second"], off["tokens_per_second"], off["mean_batch_size"], ok(off)))
    L += ["", "## Server (Poisson arrivals; batch up to %d, FIFO, no waiting)" % a.batch_size, "",
          "p99 latency in ms at each offered load (queries/s); **bold**: valid (p99 ≤ %g ms and the minimums met). "
          "Highest valid rate in the list per SUT in the last column." % a.latency_bound_ms, "",
          "| SUT | " + " | ".join("%g q/s" % r for r in rates) + " | highest valid |",
          "|---|" + "---:|" * (len(rates) + 1)]
    for s in suts:
        cells, best = [], None
        for r in rates:
            if "refused" in runs[(s, "server", r)]:
                cells.append("refused¹")
                continue
            x = st(s, "server", r)
            v = x["result"] == "VALID"
            best = max(r, best or r) if v else best  # the highest, whatever the order of --rates
            cells.append(("**%.0f**" if v else "%.0f") % x["latency_ms"]["p99"])
        L.append("| %s | %s | %s |" % (s, " | ".join(cells), "%g q/s" % best if best else "none"))
    if any("refused" in runs[(s, "server", r)] for s in suts for r in rates):
        L += ["", "¹ refused before measuring: the rate is above what the SUT serves with full batches of median-length "
          "queries in its warm-up (bertbench's check; the queue would grow without bound). The ORT peer has no "
          "such check: its runs at those rates are measured and judged by the same rules."]
    L += ["", "Percentiles are LoadGen's: the sorted latencies at index floor(n x p) (results.cc): up to 100 queries "
          "the p99 is the slowest query, so a short server run's p99 is its maximum (MLPerf's minimum query counts "
          "make p99 a tail statistic).",
          "", "![p99 latency against offered load](%s/server-p99.svg)" % os.path.relpath(a.out, os.path.dirname(a.doc) or "."), ""]
    with open(a.doc, "w") as f:
        f.write("\n".join(L))
    print("wrote " + a.doc)


if __name__ == "__main__":
    main()
