#!/usr/bin/python3
"""Bit-for-bit comparison of two engine-regression run sets (scripts/engine-regression.sh).

usage: compare.py BASE_DIR CUR_DIR RUN [RUN ...]

BASE_DIR/RUN and CUR_DIR/RUN are the output directories of the same command run by the baseline
and by the current binary. Every file the baseline wrote is compared with the current one:
  *.safetensors   every tensor: name, dtype, shape and data bytes; the metadata (JSON values
                  parsed) except the timing fields below
  *.jsonl, *.json every value, numbers by their exact double (float.hex: -0.0 != 0.0, NaN == NaN),
                  except the timing fields below; the run's own output path reads as <OUT>
  mlperf.log      event type, key, value and metadata of every :::MLLOG line, except time_ms,
                  the metadata's source file/lineno (they move with the code, not the numerics)
                  and submission_platform's value (the machine's name, as the log writes it);
                  each baseline event is matched with the current log's next event of its key
  anything else   bytes
Files not compared at all (they hold timings, paths or the build, not numerics): config.json,
curves.svg, predict_speed.json. A file or field the baseline wrote and the current binary did not
is a difference; one only the current binary writes is reported as a note. CUR_DIR/RUN.failed
(written by scripts/engine-regression.sh) means the current binary failed RUN: its content is shown.
Prints one verdict line per run (PASS/FAIL) and the differences under it; exit 0 when all runs are
identical, 1 when any differs, 2 on an error (a file that cannot be read).
"""
import json
import math
import mmap
import os
import struct
import sys

import numpy as np

SKIP_FILES = {"config.json", "curves.svg", "predict_speed.json"}
# Timing and memory fields: they change from run to run of the same binary (checked by running one
# binary twice; README.md, "What differs run to run").
VOLATILE = {
    "train_log.jsonl": {"sequences_per_second", "tokens_per_second"},
    "eval_log.jsonl": {"elapsed_s", "eval_seconds"},
    # results.json: also the prose of its *_definition fields (wording, not numerics)
    "results.json": {"peak_rss_mb", "wall_time_s", "time_to_target_s", "train_sequences_per_second",
                     "train_sequences_per_second_including_warmup", "train_tokens_per_second",
                     "train_throughput_definition", "wall_time_definition", "initialization_s",
                     "best_masked_lm_accuracy_time_s", "time_to_target_definition"},
    # checkpoint metadata, as "key.field" (the value of the key is itself JSON)
    "safetensors": {"train_state.elapsed_s", "train_state.timed_s", "train_state.best_elapsed_s",
                    "train_state.time_to_target_s"},
}
MAX_SHOWN = 5  # differences printed per file


class Diff:
    def __init__(self):
        self.lines = []   # differences (each a failure)
        self.notes = []   # additions in the current output (not failures)
        self.checked = 0  # things compared (files, tensors, lines), for the verdict line
        self.count = 0    # differences not listed in `lines` (beyond MAX_SHOWN in a file)

    def add(self, msg):
        self.lines.append(msg)


def canon(v, out_dirs):
    """JSON value -> comparable value: numbers as float.hex (ints too, so 1 and 1.0 agree), the
    run's output directory replaced by <OUT> in strings."""
    if isinstance(v, bool) or v is None:
        return v
    if isinstance(v, int) and abs(v) > 2**53:
        return str(v)  # exactly, beyond what a double holds
    if isinstance(v, (int, float)):
        f = float(v)
        return "nan" if math.isnan(f) else f.hex()
    if isinstance(v, str):
        for d in out_dirs:
            v = v.replace(d, "<OUT>")
        return v
    if isinstance(v, list):
        return [canon(x, out_dirs) for x in v]
    if isinstance(v, dict):
        return {k: canon(x, out_dirs) for k, x in v.items()}
    return v


def show(v):
    s = json.dumps(v) if not isinstance(v, str) else v
    return s if len(s) <= 120 else s[:117] + "..."


def show_num(v):
    """A canonical value back in decimal for the message (float.hex strings -> repr)."""
    if isinstance(v, str):
        try:
            return repr(float.fromhex(v))
        except ValueError:
            return show(v)
    return show(v)


def compare_values(d, where, base, cur, drop=frozenset()):
    """Recursive compare of canonical JSON values; fields in `drop` (top level of a dict) skipped."""
    if isinstance(base, dict) and isinstance(cur, dict):
        for k in base:
            if k in drop:
                continue
            if k not in cur:
                d.add(f"{where}: field '{k}' missing in the current output (baseline: {show(base[k])})")
                continue
            compare_values(d, f"{where}.{k}", base[k], cur[k])
        extra = [k for k in cur if k not in base and k not in drop]
        if extra:
            d.notes.append(f"{where}: new field(s) {', '.join(extra)}")
        return
    if isinstance(base, list) and isinstance(cur, list):
        if len(base) != len(cur):
            d.add(f"{where}: {len(cur)} elements, baseline {len(base)}")
            return
        bad = [i for i in range(len(base)) if base[i] != cur[i]]
        if not bad:
            return
        if all(not isinstance(base[i], (dict, list)) for i in bad):
            i = bad[0]
            d.add(f"{where}: {len(bad)} of {len(base)} elements differ, first [{i}]: "
                  f"{show_num(cur[i])} != baseline {show_num(base[i])}")
        else:
            for i in bad:
                compare_values(d, f"{where}[{i}]", base[i], cur[i])
        return
    if base != cur:
        d.add(f"{where}: {show_num(cur)} != baseline {show_num(base)}")


def load_json(path):
    with open(path, "rb") as f:
        return json.loads(f.read())


def compare_json(d, name, bpath, cpath, out_dirs):
    drop = VOLATILE.get(name, set())
    compare_values(d, name, canon(load_json(bpath), out_dirs[0]), canon(load_json(cpath), out_dirs[1]),
                   drop)
    d.checked += 1


def compare_jsonl(d, name, bpath, cpath, out_dirs):
    drop = VOLATILE.get(name, set())
    with open(bpath, "rb") as f:
        blines = f.read().splitlines()
    with open(cpath, "rb") as f:
        clines = f.read().splitlines()
    if len(blines) != len(clines):
        d.add(f"{name}: {len(clines)} lines, baseline {len(blines)}")
    for i, (bl, cl) in enumerate(zip(blines, clines), 1):
        if bl == cl:
            continue  # byte-identical line (no timing field, or the same timings)
        compare_values(d, f"{name} line {i}", canon(json.loads(bl), out_dirs[0]),
                       canon(json.loads(cl), out_dirs[1]), drop)
    d.checked += len(blines)


def mllog_events(path):
    events = []
    with open(path, "r", encoding="utf-8") as f:
        for line in f:
            if not line.startswith(":::MLLOG "):
                continue
            e = json.loads(line[len(":::MLLOG "):])
            e.pop("time_ms", None)
            if e.get("key") == "submission_platform":
                e.pop("value", None)
            md = e.get("metadata")
            if isinstance(md, dict):
                md.pop("file", None)
                md.pop("lineno", None)
            events.append(e)
    return events


def compare_mllog(d, name, bpath, cpath, out_dirs):
    """Each baseline event against the current log's next event of the same key, in order; an event
    the baseline has and the current log lacks is a difference, one only the current log has a note
    (a new key the log gained, as a new field of a JSON file is)."""
    b = canon(mllog_events(bpath), out_dirs[0])
    c = canon(mllog_events(cpath), out_dirs[1])

    # A block_start followed at once by its block_stop trains nothing (older logs opened one after
    # an evaluation at the run's last step): not part of what either run computed.
    def drop_empty_blocks(events, who):
        out = []
        for e in events:
            if (e.get("key") == "block_stop" and out and out[-1].get("key") == "block_start"
                    and (out[-1].get("metadata") or {}).get("first_epoch_num")
                    == (e.get("metadata") or {}).get("first_epoch_num")):
                out.pop()
                d.notes.append(f"{name}: the {who} log's empty block (block_start then block_stop) left out")
                continue
            out.append(e)
        return out

    b, c = drop_empty_blocks(b, "baseline"), drop_empty_blocks(c, "current")
    j = 0
    for i, be in enumerate(b, 1):
        k = j
        while k < len(c) and c[k].get("key") != be.get("key"):
            k += 1
        if k == len(c):
            d.add(f"{name} event {i} ({be.get('key')}): missing in the current log")
            continue
        for extra in c[j:k]:
            d.notes.append(f"{name}: new event {extra.get('key')}")
        if be != c[k]:
            compare_values(d, f"{name} event {i} ({be.get('key')})", be, c[k])
        j = k + 1
    for extra in c[j:]:
        d.notes.append(f"{name}: new event {extra.get('key')}")
    d.checked += len(b)


def read_safetensors(path):
    """-> (header dict without __metadata__, metadata dict, mmap of the file, data start offset)."""
    f = open(path, "rb")
    m = mmap.mmap(f.fileno(), 0, access=mmap.ACCESS_READ)
    f.close()
    if len(m) < 8:
        raise ValueError(f"{path}: {len(m)} bytes, not a safetensors file")
    (n,) = struct.unpack("<Q", m[:8])
    if 8 + n > len(m):
        raise ValueError(f"{path}: header of {n} bytes runs past the end of the file ({len(m)} bytes)")
    header = json.loads(m[8:8 + n])
    meta = header.pop("__metadata__", None) or {}
    return header, meta, m, 8 + n


NP_DTYPES = {"F32": np.float32, "F64": np.float64, "BF16": np.uint16, "F16": np.float16,
             "I64": np.int64, "I32": np.int32, "U8": np.uint8, "I8": np.int8}


def tensor_diff_detail(dtype, bb, cb):
    if dtype not in NP_DTYPES:
        i = next(k for k in range(len(bb)) if bb[k] != cb[k])
        return f"first differing byte {i}"
    t = NP_DTYPES[dtype]
    b = np.frombuffer(bb, dtype=t)
    c = np.frombuffer(cb, dtype=t)
    bits = f"u{b.itemsize}"
    bad = np.flatnonzero(b.view(bits) != c.view(bits))  # by bits: -0.0 != 0.0, NaN == same NaN
    i = int(bad[0])
    msg = f"{len(bad)} of {len(b)} elements differ, first [{i}]: {c[i]!r} != baseline {b[i]!r}"
    if t in (np.float32, np.float64):
        with np.errstate(invalid="ignore"):
            worst = float(np.nanmax(np.abs(b[bad].astype(np.float64) - c[bad].astype(np.float64))))
        msg += f", largest |difference| {worst:.3g}"
    return msg


def compare_safetensors(d, name, bpath, cpath, out_dirs):
    bh, bmeta, bm, bstart = read_safetensors(bpath)
    ch, cmeta, cm, cstart = read_safetensors(cpath)
    # Metadata: values that are JSON are compared parsed, without the timing fields.
    drop = VOLATILE["safetensors"]
    for k, bv in bmeta.items():
        if k not in cmeta:
            d.add(f"{name}: metadata '{k}' missing in the current checkpoint")
            continue
        cv = cmeta[k]
        try:
            bj, cj = json.loads(bv), json.loads(cv)
        except (ValueError, TypeError):
            bj, cj = bv, cv
        if isinstance(bj, dict) and isinstance(cj, dict):
            inner = {x.split(".", 1)[1] for x in drop if x.startswith(k + ".")}
            compare_values(d, f"{name} metadata {k}", canon(bj, out_dirs[0]), canon(cj, out_dirs[1]),
                           inner)
        elif canon(bj, out_dirs[0]) != canon(cj, out_dirs[1]):
            d.add(f"{name}: metadata '{k}': {show(cv)} != baseline {show(bv)}")
    extra = [k for k in cmeta if k not in bmeta]
    if extra:
        d.notes.append(f"{name}: new metadata {', '.join(extra)}")
    # Tensors, in the baseline's order.
    for t, bi in bh.items():
        ci = ch.get(t)
        if ci is None:
            d.add(f"{name}: tensor '{t}' missing in the current checkpoint")
        elif ci["dtype"] != bi["dtype"] or ci["shape"] != bi["shape"]:
            d.add(f"{name}: tensor '{t}': {ci['dtype']}{ci['shape']} != baseline {bi['dtype']}{bi['shape']}")
        else:
            b0, b1 = bi["data_offsets"]
            c0, c1 = ci["data_offsets"]
            bb = bm[bstart + b0:bstart + b1]
            cb = cm[cstart + c0:cstart + c1]
            if bb != cb:
                detail = tensor_diff_detail(bi["dtype"], bb, cb) if len(bb) == len(cb) else \
                    f"{len(cb)} bytes, baseline {len(bb)}"
                d.add(f"{name}: tensor '{t}' {bi['dtype']}{bi['shape']}: {detail}")
        d.checked += 1
    extra = [t for t in ch if t not in bh]
    if extra:
        d.notes.append(f"{name}: new tensor(s) {', '.join(extra[:5])}{' ...' if len(extra) > 5 else ''}")
    bm.close()
    cm.close()


def compare_bytes(d, name, bpath, cpath, out_dirs):
    with open(bpath, "rb") as f:
        b = f.read()
    with open(cpath, "rb") as f:
        c = f.read()
    if b != c:
        if len(b) != len(c):
            d.add(f"{name}: {len(c)} bytes, baseline {len(b)}")
        else:
            i = next(k for k in range(len(b)) if b[k] != c[k])
            d.add(f"{name}: bytes differ from offset {i} on")
    d.checked += 1


def comparer(name):
    if name.endswith(".safetensors"):
        return compare_safetensors
    if name.endswith(".jsonl"):
        return compare_jsonl
    if name.endswith(".json"):
        return compare_json
    if name == "mlperf.log":
        return compare_mllog
    return compare_bytes


def file_order(name):
    """Earliest evidence first: the loss lines, then evals and logits, checkpoints by step, the rest."""
    first = ["train_log.jsonl", "eval_log.jsonl", "eval.json", "raw_results.jsonl"]
    if name in first:
        return (0, first.index(name), 0, name)
    if name.startswith("model.ckpt-") and name.endswith(".safetensors"):
        step = name[len("model.ckpt-"):-len(".safetensors")]
        return (1, 0, int(step) if step.isdigit() else 0, name)
    return (2, 0, 0, name)


def compare_run(base_root, cur_root, run):
    bdir, cdir = os.path.join(base_root, run), os.path.join(cur_root, run)
    d = Diff()
    out_dirs = ([os.path.abspath(bdir), bdir], [os.path.abspath(cdir), cdir])
    bfiles = sorted((f for f in os.listdir(bdir) if os.path.isfile(os.path.join(bdir, f))), key=file_order)
    cfiles = set(os.listdir(cdir)) if os.path.isdir(cdir) else set()
    compared = 0
    for name in bfiles:
        if name in SKIP_FILES:
            continue
        if name not in cfiles:
            d.add(f"{name}: not written by the current binary")
            continue
        before = len(d.lines)
        comparer(name)(d, name, os.path.join(bdir, name), os.path.join(cdir, name), out_dirs)
        compared += 1
        found = len(d.lines) - before
        if found > MAX_SHOWN:  # the first few of a file, then how many more
            del d.lines[before + MAX_SHOWN:]
            d.lines.append(f"{name}: {found - MAX_SHOWN} more difference(s)")
            d.count += found - MAX_SHOWN - 1
    extra = sorted(f for f in cfiles if f not in bfiles and f not in SKIP_FILES)
    if extra:
        d.notes.append(f"new file(s) in the current output: {', '.join(extra)}")
    return d, compared


def main(argv):
    if len(argv) < 4:
        print(__doc__.split("\n\n")[1], file=sys.stderr)
        return 2
    base_root, cur_root, runs = argv[1], argv[2], argv[3:]
    failed = []
    for run in runs:
        failed_note = os.path.join(cur_root, run + ".failed")  # written by the script: exit status
        if os.path.exists(failed_note):
            with open(failed_note, encoding="utf-8", errors="replace") as f:
                print(f"FAIL {run}: the current binary {f.read().strip()}")
            failed.append(run)
            continue
        try:
            d, files = compare_run(base_root, cur_root, run)
        except (OSError, ValueError, KeyError) as e:
            print(f"ERROR {run}: {e}")
            return 2
        verdict = "PASS" if not d.lines else "FAIL"
        print(f"{verdict} {run}: {files} file{'s' if files != 1 else ''} compared "
              f"({d.checked} tensors, log lines and JSON files)"
              + ("" if not d.lines else f", {len(d.lines) + d.count} difference(s)"))
        for line in d.lines:
            print(f"    {line}")
        for note in d.notes:
            print(f"    note: {note}")
        if d.lines:
            failed.append(run)
    if failed:
        print(f"engine-regression: {len(failed)} of {len(runs)} runs differ from the baseline: "
              f"{' '.join(failed)}")
        return 1
    print(f"engine-regression: all {len(runs)} runs bit-identical to the baseline")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
