#!/usr/bin/python3
"""Checks an MLPerf Training log of a BERT run against the rules of mlcommons/logging's compliance
checker, ruleset training_5.0.0 (common.yaml, then {division}_common.yaml, then
{division}_bert.yaml, as `python3 -m mlperf_logging.compliance_checker --ruleset 5.0.0 FILE` chains
them), for machines without that package (the GPU machine, CI). Written from the rules' text
(docs/training.md lists them); it also checks the line layout mllog writes (field order, the
metadata's file and lineno, each key's event type), which the checker itself does not.

    scripts/mlperf_log_check.py [--division=closed|open] [--werror] MLPERF_LOG

Prints one line per violation, then FAIL, and exits 1; or one line saying the log passes, exit 0.
What the checker only warns about (an EXACTLY_ONE key logged more than once, always with the same
value) is a "warning:" line, and a violation with --werror, as with the checker's --werror.
--division: also require the log to declare that division. A file that cannot be read: one line,
exit 2. The closed division needs an eval_accuracy in [0.720, 1.0); the open one (bertbench's runs)
only one below 1.0, and none of closed_bert.yaml's hyperparameter keys.

Beyond the checker's rules, as its result summarizer times run_stop - run_start: a time_ms going
backwards, a second run_start or run_stop (the checker only warns; the summarizer would time from the
later run_start or to the first run_stop), and bertbench's own `bertbench_resume` line (a new
process continued the run there, so run_stop - run_start includes the time none ran; MLPerf times
one uninterrupted process) are violations."""
import argparse
import json
import sys

TOKEN = ":::MLLOG "
FIELDS = ["namespace", "time_ms", "event_type", "key", "value", "metadata"]
BENCHMARKS = {"retinanet", "stable_diffusion", "dlrm_dcnv2", "bert", "rgat", "llama2_70b_lora", "llama31_405b"}
STARTS = {"init_start", "run_start", "block_start", "eval_start", "epoch_start"}
STOPS = {"init_stop", "run_stop", "block_stop", "eval_stop", "epoch_stop"}
# closed_bert.yaml: logged exactly once by a closed BERT run
CLOSED_BERT_ONCE = ["global_batch_size", "opt_base_learning_rate", "opt_lamb_epsilon",
                    "opt_learning_rate_training_steps", "opt_learning_rate_warmup_steps", "num_warmup_steps",
                    "start_warmup_step", "opt_lamb_beta_1", "opt_lamb_beta_2", "opt_lamb_weight_decay_rate"]


def parse(text):
    """(lines, problems): lines as dicts with their line number in the file."""
    lines, bad = [], []
    for no, raw in enumerate(text.splitlines(), 1):
        at = raw.find(TOKEN)
        if at < 0:
            continue
        try:
            j = json.loads(raw[at + len(TOKEN):], object_pairs_hook=lambda kv: kv)
        except ValueError as e:
            bad.append("line %d: not JSON after %r: %s" % (no, TOKEN.strip(), e))
            continue
        order = [k for k, _ in j] if isinstance(j, list) else []
        d = dict(j) if isinstance(j, list) else {}
        if order != FIELDS:
            bad.append("line %d: fields %s, expected %s (mllog's layout)" % (no, order, FIELDS))
            if not all(k in d for k in ("time_ms", "key", "value", "metadata")):
                continue
        md = dict(d["metadata"]) if isinstance(d["metadata"], list) else None
        if md is None or "file" not in md or "lineno" not in md:
            bad.append("line %d: %s: metadata without file and lineno" % (no, d["key"]))
            md = md or {}
        value = d["value"]
        if isinstance(value, list) and all(isinstance(p, tuple) for p in value):
            value = dict(value)
        try:
            ts = float(d["time_ms"])
        except (TypeError, ValueError):
            bad.append("line %d: time_ms %r is not a number" % (no, d["time_ms"]))
            continue
        lines.append({"no": no, "key": d["key"], "event_type": d.get("event_type"), "value": value, "md": md, "ts": ts})
    return lines, bad


def number(v):
    return isinstance(v, (int, float)) and not isinstance(v, bool)


def check(lines):
    """Violations of the training_5.0.0 BERT rules, in log order, then the counts; the division."""
    bad, warn, count = [], [], {}
    division = next((l["value"] for l in lines if l["key"] == "submission_division"), None)
    benchmark = next((l["value"] for l in lines if l["key"] == "submission_benchmark"), None)
    s = dict(init_started=False, init_stopped=False, run_started=False, first_init=float("inf"), compile_mins=0)
    seen_submission = set()
    reached = False  # the division's ATLEAST_ONE_CHECK on eval_accuracy
    last_ts = float("-inf")  # the latest time_ms so far
    for l in lines:
        key, v, md = l["key"], l["value"], l["md"]
        count[key] = count.get(key, 0) + 1

        def rule(ok, what):
            if not ok:
                bad.append("line %d: %s: %s" % (l["no"], key, what))

        rule(l["ts"] >= last_ts, "time_ms %.0f is %.0f ms before the line above's (time going backwards)"
             % (l["ts"], last_ts - l["ts"]))
        last_ts = max(last_ts, l["ts"])
        if key == "bertbench_resume":
            rule(False, "a new process resumed the run here (at %s samples): run_stop - run_start includes the time "
                        "between its processes, where MLPerf times one uninterrupted process" % (v,))
        want = "INTERVAL_START" if key in STARTS else "INTERVAL_END" if key in STOPS else "POINT_IN_TIME"
        rule(l["event_type"] == want, "event_type %s, expected %s (mllog's layout)" % (l["event_type"], want))
        if key.startswith("submission_"):  # the checker runs a submission_ key's rule on its first line only
            if key in seen_submission:
                continue
            seen_submission.add(key)
        if key == "submission_division":
            rule(v in ("closed", "open"), "value %r, expected closed or open" % (v,))
            s["compile_mins"] = 240 if v == "open" else 30
        elif key == "submission_benchmark":
            rule(v in BENCHMARKS, "value %r is not a training_5.0.0 benchmark" % (v,))
        elif key == "init_start":
            rule(not s["init_stopped"] and not s["run_started"], "after init_stop or run_start")
            s["init_started"] = True
            s["first_init"] = min(s["first_init"], l["ts"])
        elif key == "init_stop":
            rule(s["init_started"] and not s["run_started"], "before init_start or after run_start")
            rule(l["ts"] - s["first_init"] < s["compile_mins"] * 60e3,
                 "%.0f s after the first init_start, more than the %s division's %d min"
                 % ((l["ts"] - s["first_init"]) / 1e3, division, s["compile_mins"]))
            s["init_stopped"] = True
        elif key == "run_start":
            rule(s["init_stopped"], "before init_stop")
            s["run_started"] = True
        elif key == "run_stop":
            rule(s["run_started"], "before run_start")
            rule("status" in md, "no status in its metadata")
        elif key == "block_start":
            rule(s["run_started"], "before run_start")
            rule("epoch_count" in md or "samples_count" in md, "neither epoch_count nor samples_count")
            if "epoch_count" in md:
                rule("first_epoch_num" in md, "epoch_count without first_epoch_num")
                rule(number(md["epoch_count"]) and md["epoch_count"] > 0, "epoch_count not > 0")
            if "samples_count" in md:
                rule(number(md["samples_count"]) and md["samples_count"] >= 0, "samples_count not >= 0")
        elif key == "block_stop":
            rule("first_epoch_num" in md or "samples_count" in md, "neither first_epoch_num nor samples_count")
        elif key in ("epoch_start", "epoch_stop"):
            rule("epoch_num" in md, "no epoch_num")
        elif key in ("eval_start", "eval_stop"):
            rule("epoch_num" in md or "samples_count" in md, "neither epoch_num nor samples_count")
        elif key == "eval_accuracy":
            rule("epoch_num" in md, "no epoch_num ({}_bert.yaml)".format(division))
            if number(v):
                reached |= v < 1.0 and (division != "closed" or v >= 0.720)
            else:
                rule(False, "value %r is not a number" % (v,))
        elif key in ("train_samples", "eval_samples"):
            rule(v != "", "empty value")
        elif key == "gradient_accumulation_steps" and division == "closed":
            rule(number(v) and v > 0, "value %r, expected > 0" % (v,))

    once = ["submission_division", "init_stop", "run_start", "run_stop", "train_samples", "eval_samples",
            "submission_benchmark"]
    if division == "closed":
        once += ["gradient_accumulation_steps"] + CLOSED_BERT_ONCE
    for k in once:
        values = [l["value"] for l in lines if l["key"] == k]
        if len(values) > 1 and k in ("run_start", "run_stop"):  # the time the summarizer reads
            bad.append("%s: expected exactly one, found %d (the checker only warns; the result summarizer would "
                       "time the run from the last run_start to the first run_stop)" % (k, len(values)))
        elif len(values) > 1 and all(v == values[0] for v in values):
            # the checker's all_same: a warning (put_warning), an error only under its --werror
            warn.append("%s: expected exactly one, found %d (all with the value %r)" % (k, len(values), values[0]))
        elif len(values) != 1:
            bad.append("%s: expected exactly one, found %d" % (k, len(values)))
    for k in ("cache_clear", "init_start", "eval_accuracy"):
        if count.get(k, 0) < 1:
            bad.append("%s: expected at least one, found none" % k)
    for a, b in (("block_start", "epoch_start"), ("block_stop", "epoch_stop"), ("eval_start", "block_start"),
                 ("eval_stop", "block_stop")):
        if count.get(a, 0) + count.get(b, 0) < 1:
            bad.append("expected at least one %s or %s, found neither" % (a, b))
    if count.get("eval_accuracy") and not reached:
        bad.append("eval_accuracy: no value %s" % ("in [0.720, 1.0) (closed_bert.yaml)" if division == "closed"
                                                   else "below 1.0 (open_bert.yaml)"))
    if benchmark is not None and benchmark != "bert":
        bad.append("submission_benchmark: %r; this script knows the bert rules only" % (benchmark,))
    return bad, warn, division


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("log")
    ap.add_argument("--division", choices=("closed", "open"))
    ap.add_argument("--werror", action="store_true", help="warnings are errors, as the checker's --werror")
    a = ap.parse_args()
    try:
        with open(a.log, encoding="latin-1") as f:  # as the checker reads it
            text = f.read()
    except OSError as e:
        print("mlperf_log_check.py: %s: cannot read it: %s" % (a.log, e.strerror))
        return 2
    lines, bad = parse(text)
    if not lines:
        bad.append("no %r lines" % TOKEN.strip())
    more, warn, division = check(lines)
    bad += more
    if a.werror:
        bad += warn
    else:
        for w in warn:
            print("%s: warning: %s" % (a.log, w))
    if a.division and division != a.division:
        bad.append("submission_division: %r, expected %r (--division)" % (division, a.division))
    for b in bad:
        print("%s: %s" % (a.log, b))
    if bad:
        print("FAIL")
        return 1
    print("%s: passes MLPerf Training 5.0.0's rules for bert, %s division (%d lines)" % (a.log, division, len(lines)))
    return 0


if __name__ == "__main__":
    sys.exit(main())
