#!/usr/bin/python3
"""Test of bench/peer/squad_queries.py on the run_squad.py goldens (../shared/golden/squad_pipeline):
  - the queries of features_384_eval.tf_record equal run_squad.py's own features (features_384_eval.jsonl):
    unique_id, and input_ids/segment_ids up to the input_mask's count of ones;
  - stream_batches forms bench/runner.cpp read_squad_batches's batches (n // B per pass, partial dropped);
  - a flipped payload byte, a truncated file and a non-TFRecord file are each refused with one line
    naming the file, exit status 1, no output written.
Usage: /usr/bin/python3 bench/peer/squad_queries_test.py [GOLDEN_DIR]"""
import json
import os
import subprocess
import sys
import tempfile

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
import squad_queries as sq  # noqa: E402


def main():
    golden = sys.argv[1] if len(sys.argv) > 1 else os.path.join(HERE, "..", "..", "..", "shared", "golden", "squad_pipeline")
    tfr, jsl = os.path.join(golden, "features_384_eval.tf_record"), os.path.join(golden, "features_384_eval.jsonl")
    if not os.path.isfile(tfr):
        sys.exit("squad_queries_test.py: %s: not found (pass the golden squad_pipeline directory)" % tfr)
    failures = []
    T, qs = sq.read_features(tfr)
    with open(jsl) as f:
        want = [json.loads(line) for line in f]
    if T != 384 or len(qs) != len(want):
        failures.append("max_seq_length %d, %d queries; expected 384 and %d" % (T, len(qs), len(want)))
    for q, w in zip(qs, want):
        n = sum(w["input_mask"])
        if (q["unique_id"], q["input_ids"], q["segment_ids"]) != (w["unique_id"], w["input_ids"][:n], w["segment_ids"][:n]):
            failures.append("query %d differs from run_squad.py's feature %s" % (q["id"], w["unique_id"]))
            break
    b = sq.stream_batches(97, 8, 14)
    if b[11] != list(range(88, 96)) or b[12] != list(range(8)) or b[13] != list(range(8, 16)):
        failures.append("stream_batches(97, 8): batches 11..13 %s, expected 88..95, then 0..7, 8..15" % b[11:14])
    with open(tfr, "rb") as f:
        data = f.read()
    with tempfile.TemporaryDirectory() as d:
        cases = {"flipped": data[:100] + bytes([data[100] ^ 1]) + data[101:], "truncated": data[:len(data) - 10],
                 "not-tfrecord": open(jsl, "rb").read()[:4096]}
        for name, blob in cases.items():
            path, out = os.path.join(d, name + ".tf_record"), os.path.join(d, name + ".json")
            with open(path, "wb") as f:
                f.write(blob)
            r = subprocess.run(["/usr/bin/python3", os.path.join(HERE, "squad_queries.py"), path, "--out=" + out],
                               stderr=subprocess.PIPE, text=True)
            msg = r.stderr.strip()
            if r.returncode != 1 or path not in msg or len(msg.splitlines()) != 1 or os.path.exists(out):
                failures.append("%s file: exit %d, stderr %r, output written: %s" % (name, r.returncode, msg, os.path.exists(out)))
            else:
                print("ok   %s file refused: %s" % (name, msg))
    for f in failures:
        print("FAIL " + f)
    print("squad_queries_test.py: %s (%d queries checked against run_squad.py's features)" % (
        "PASS" if not failures else "%d FAILED" % len(failures), len(qs)))
    sys.exit(1 if failures else 0)


if __name__ == "__main__":
    main()
