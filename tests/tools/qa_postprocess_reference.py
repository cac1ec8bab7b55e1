#!/usr/bin/env python3
"""An independent reference for bertbench's run_qa.py decoding (src/train/squad_qa_predict.hpp),
written from transformers' utils_qa.postprocess_qa_predictions (v4.10, with Intel's offset check)
as the specification, on numpy itself: numpy's argsort for the n-best indices (its tie order),
float32 score sums, np.exp and ndarray.sum for the probabilities, Python's stable sort, str slices
and json.dumps for the files. tests/train/squad_qa_predict_test.cpp runs it.

  qa_postprocess_reference.py INPUT.json OUT_DIR

INPUT.json: {"options": {"n_best_size", "max_answer_length", "version_2_with_negative",
"null_score_diff_threshold"}, "examples": [{"id", "context"}], "features": [{"example_index",
"context_begin", "begin": [...], "end": [...], "start_logits": [...], "end_logits": [...]}]}
(logits are float32 values). Writes predictions.json, nbest_predictions.json (and null_odds.json).
"""
import collections
import json
import os
import sys

import numpy as np


def candidates(feature, n_best, max_len):
    start = np.asarray(feature["start_logits"], dtype=np.float32)
    end = np.asarray(feature["end_logits"], dtype=np.float32)
    first, count = feature["context_begin"], len(feature["begin"])
    top_start = np.argsort(start)[::-1][:n_best]
    top_end = np.argsort(end)[::-1][:n_best]
    found = []
    for s in top_start.tolist():
        for e in top_end.tolist():
            if not (first <= s < first + count and first <= e < first + count):
                continue
            if e < s or e - s + 1 > max_len:
                continue
            found.append({"span": (feature["begin"][s - first], feature["end"][e - first]),
                          "score": start[s] + end[e], "start_logit": start[s], "end_logit": end[e]})
    null = {"span": (0, 0), "score": start[0] + end[0], "start_logit": start[0],
            "end_logit": end[0]}
    return found, null


def main(path, out_dir):
    spec = json.load(open(path))
    opt = spec["options"]
    v2 = opt["version_2_with_negative"]
    windows = collections.defaultdict(list)
    for f in spec["features"]:
        windows[f["example_index"]].append(f)
    answers = collections.OrderedDict()
    nbest_all = collections.OrderedDict()
    odds = collections.OrderedDict()
    for index, example in enumerate(spec["examples"]):
        found, best_null = [], None
        for f in windows[index]:
            more, null = candidates(f, opt["n_best_size"], opt["max_answer_length"])
            found += more
            if best_null is None or null["score"] < best_null["score"]:
                best_null = null
        if v2:
            found.append(best_null)
        ranked = sorted(found, key=lambda c: c["score"], reverse=True)[:opt["n_best_size"]]
        if v2 and all(c["span"] != (0, 0) for c in ranked):
            ranked.append(best_null)
        entries = [{"start_logit": c["start_logit"], "end_logit": c["end_logit"],
                    "text": example["context"][c["span"][0]:c["span"][1]], "score": c["score"]}
                   for c in ranked]
        if not entries or (len(entries) == 1 and entries[0]["text"] == ""):
            entries.insert(0, {"text": "empty", "start_logit": 0.0, "end_logit": 0.0, "score": 0.0})
        scores = np.array([e.pop("score") for e in entries])
        weights = np.exp(scores - np.max(scores))
        for e, p in zip(entries, weights / weights.sum()):
            e["probability"] = p
        if v2:
            best = next(e for e in entries if e["text"] != "")
            diff = best_null["score"] - best["start_logit"] - best["end_logit"]
            odds[example["id"]] = float(diff)
            answers[example["id"]] = "" if diff > opt["null_score_diff_threshold"] else best["text"]
        else:
            answers[example["id"]] = entries[0]["text"]
        nbest_all[example["id"]] = [
            {k: float(v) if isinstance(v, (np.float32, np.float64)) else v for k, v in e.items()}
            for e in entries]
    files = [("predictions.json", answers), ("nbest_predictions.json", nbest_all)]
    if v2:
        files.append(("null_odds.json", odds))
    for name, obj in files:
        with open(os.path.join(out_dir, name), "w") as w:
            w.write(json.dumps(obj, indent=4) + "\n")


if __name__ == "__main__":
    main(sys.argv[1], sys.argv[2])
