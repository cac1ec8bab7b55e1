#!/usr/bin/python3
"""The query set of the SQuAD peers and of the scenario schedules: run_squad.py's eval features
(eval.tf_record: unique_ids, input_ids, input_mask, segment_ids, each feature max_seq_length long,
padded with input_mask 0) reduced to their real tokens (the leading input_mask == 1 positions).

  squad_queries.py FEATURES.tf_record --out=queries.json [--max_queries=N]

writes {"format": "bertbench-queries/1", "source": FEATURES, "max_seq_length": T,
        "queries": [{"id": i, "unique_id": u, "input_ids": [...real...], "segment_ids": [...]}]}
in file order (the same "queries" array as a bertbench-scenario-schedule/1 file). Read in plain
Python: TFRecord framing (length, masked CRC-32C of the length, payload, masked CRC-32C of the
payload, both CRCs checked) and the tf.train.Example protobuf; no TensorFlow. A malformed file is
one line naming the file, the record and what was expected, exit status 1, and no output written.
Also a module: read_queries(path) is how torch_bench.py reads the output back, stream_batches how it
forms batches from it (bench/peer/ort_bench.js does the same in node)."""
import argparse
import json
import os
import struct
import sys

FORMAT = "bertbench-queries/1"


def _crc_table():
    poly, table = 0x82F63B78, []  # CRC-32C (Castagnoli), reflected
    for i in range(256):
        c = i
        for _ in range(8):
            c = (c >> 1) ^ poly if c & 1 else c >> 1
        table.append(c)
    return table


_TABLE = _crc_table()


def crc32c(data):
    c = 0xFFFFFFFF
    for b in data:
        c = _TABLE[(c ^ b) & 0xFF] ^ (c >> 8)
    return c ^ 0xFFFFFFFF


def masked_crc(data):  # TFRecord's masking of the CRC (tensorflow/core/lib/hash/crc32c.h Mask)
    c = crc32c(data)
    return (((c >> 15) | (c << 17)) + 0xA282EAD8) & 0xFFFFFFFF


MAX_BATCHES = 256  # as bench/runner.cpp: min(warmup + steps, 256) batches are read, then cycled


def stream_batches(n, B, count):
    """The first `count` batches of B consecutive queries of the query stream as bench/runner.cpp
    read_squad_batches forms them: each pass over the n queries in file order gives n // B full batches,
    the partial last one is dropped and the next pass starts over at query 0: [[query index, ...], ...].
    Step i of a timing run uses batch i % count. Raises ValueError where n < B."""
    per_pass = n // B
    if per_pass == 0:
        raise ValueError("%d queries, fewer than one batch of %d" % (n, B))
    return [[(k % per_pass) * B + r for r in range(B)] for k in range(count)]


class BadFile(Exception):
    pass


def tfrecords(path):
    """The payloads of a TFRecord file, both CRCs checked."""
    with open(path, "rb") as f:
        buf = f.read()
    i, n = 0, 0
    while i < len(buf):
        if len(buf) - i < 12:
            raise BadFile("record %d at byte %d: %d trailing bytes, expected a 12-byte record header" % (n, i, len(buf) - i))
        head = buf[i:i + 8]
        (length,), (hcrc,) = struct.unpack("<Q", head), struct.unpack("<I", buf[i + 8:i + 12])
        if masked_crc(head) != hcrc:
            raise BadFile("record %d at byte %d: length CRC mismatch (not a TFRecord file, or corrupt)" % (n, i))
        if i + 12 + length + 4 > len(buf):
            raise BadFile("record %d at byte %d: length %d runs past the end of the file (%d bytes)" % (n, i, length, len(buf)))
        data = buf[i + 12:i + 12 + length]
        (dcrc,) = struct.unpack("<I", buf[i + 12 + length:i + 16 + length])
        if masked_crc(data) != dcrc:
            raise BadFile("record %d at byte %d: payload CRC mismatch" % (n, i))
        yield data
        i += 16 + length
        n += 1


def varint(b, i):
    """(value, next offset) of the protobuf varint at b[i]; BadFile if b ends inside it."""
    v = s = 0
    while True:
        if i >= len(b):
            raise BadFile("truncated varint")
        c = b[i]
        i += 1
        v |= (c & 0x7F) << s
        s += 7
        if c < 0x80:
            return v, i


def _fields(b):
    """(field number, wire type, value) of one protobuf message: ints for varints, bytes otherwise."""
    i = 0
    while i < len(b):
        key, i = varint(b, i)
        num, wt = key >> 3, key & 7
        if wt == 0:
            v, i = varint(b, i)
        elif wt == 2:
            n, i = varint(b, i)
            if i + n > len(b):
                raise BadFile("field %d: length %d past the message's end" % (num, n))
            v, i = b[i:i + n], i + n
        elif wt in (1, 5):
            w = 8 if wt == 1 else 4
            v, i = b[i:i + w], i + w
        else:
            raise BadFile("unsupported protobuf wire type %d" % wt)
        yield num, wt, v


def _int64_list(b):
    out = []
    for num, wt, v in _fields(b):  # Int64List.value = 1, packed or not
        if num != 1:
            continue
        if wt == 0:
            out.append(v)
        else:
            j = 0
            while j < len(v):
                x, j = varint(v, j)
                out.append(x)
    return [x - (1 << 64) if x >= 1 << 63 else x for x in out]


def _float_list(b):
    out = []
    for num, wt, v in _fields(b):  # FloatList.value = 1, packed (wire type 2) or one fixed32
        if num == 1:
            if len(v) % 4:
                raise BadFile("float_list: %d bytes, expected a multiple of 4" % len(v))
            out += struct.unpack("<%df" % (len(v) // 4), v)
    return out


def example_features(payload):
    """{name: [values]} of a tf.train.Example's int64_list (ints) and float_list (floats) features."""
    return example_ints(payload, floats=True)


def example_ints(payload, floats=False):
    """{name: [int64...]} of a tf.train.Example's int64_list features (Example.features = 1,
    Features.feature = 1 map<string, Feature>, Feature.float_list = 2, Feature.int64_list = 3);
    float_list features too (as floats) when floats is set."""
    feats = {}
    for num, _, features in _fields(payload):
        if num != 1:
            continue
        for n2, _, entry in _fields(features):
            if n2 != 1:
                continue
            key, value = None, None
            for n3, _, v in _fields(entry):
                if n3 == 1:
                    key = v.decode("utf-8", "replace")
                elif n3 == 2:
                    value = v
            for n4, _, v in _fields(value or b""):
                if n4 == 3:
                    feats[key] = _int64_list(v)
                elif n4 == 2 and floats:
                    feats[key] = _float_list(v)
    return feats


def read_features(path, max_queries=0):
    """(max_seq_length, queries) of an eval feature file; raises BadFile naming the record."""
    queries, T = [], None
    for n, payload in enumerate(tfrecords(path)):
        if max_queries and len(queries) >= max_queries:
            break
        try:
            f = example_ints(payload)
        except BadFile as e:
            raise BadFile("record %d: not a tf.train.Example (%s)" % (n, e))
        for name in ("unique_ids", "input_ids", "input_mask", "segment_ids"):
            if name not in f:
                raise BadFile("record %d: no int64 feature %r, expected run_squad.py's eval features (unique_ids, "
                              "input_ids, input_mask, segment_ids)" % (n, name))
        ids, mask, seg = f["input_ids"], f["input_mask"], f["segment_ids"]
        T = T or len(ids)
        if not len(ids) == len(mask) == len(seg) == T or len(f["unique_ids"]) != 1:
            raise BadFile("record %d: input_ids/input_mask/segment_ids have %d/%d/%d values and unique_ids %d, expected "
                          "%d each (the first record's max_seq_length) and 1" % (n, len(ids), len(mask), len(seg),
                                                                                 len(f["unique_ids"]), T))
        k = 0
        while k < T and mask[k] == 1:
            k += 1
        if k == 0 or any(m != 0 for m in mask[k:]):
            raise BadFile("record %d: input_mask is not ones then zeros with at least one real token" % n)
        queries.append({"id": len(queries), "unique_id": f["unique_ids"][0], "input_ids": ids[:k], "segment_ids": seg[:k]})
    if not queries:
        raise BadFile("no records, expected run_squad.py eval features")
    return T, queries


def read_queries(path):
    """(max_seq_length, queries) of a bertbench-queries/1 or bertbench-scenario-schedule/1 file; exits
    with one line on a malformed one."""
    try:
        with open(path) as f:
            d = json.load(f)
        qs = d["queries"]
        for i, q in enumerate(qs):
            if q["id"] != i or len(q["input_ids"]) != len(q["segment_ids"]) or not q["input_ids"]:
                raise ValueError("query %d: id %r, %d input_ids, %d segment_ids (expected id %d and equal, non-zero "
                                 "lengths)" % (i, q["id"], len(q["input_ids"]), len(q["segment_ids"]), i))
        T = d.get("max_seq_length") or max(len(q["input_ids"]) for q in qs)
    except (OSError, ValueError, KeyError, TypeError) as e:
        sys.exit("--queries=%s: expected a %s file (bench/peer/squad_queries.py): %s" % (path, FORMAT, e))
    if not qs:
        sys.exit("--queries=%s: no queries" % path)
    return T, qs


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("features")
    ap.add_argument("--out", required=True)
    ap.add_argument("--max_queries", type=int, default=0, help="the first N features only (0: all)")
    a = ap.parse_args()
    if a.max_queries < 0:
        sys.exit("squad_queries.py: --max_queries=%d: expected >= 0" % a.max_queries)
    try:
        T, queries = read_features(a.features, a.max_queries)
    except OSError as e:
        sys.exit("squad_queries.py: %s: cannot read it (%s)" % (a.features, e.strerror))
    except BadFile as e:
        sys.exit("squad_queries.py: %s: %s" % (a.features, e))
    tmp = a.out + ".tmp.%d" % os.getpid()
    with open(tmp, "w") as f:
        json.dump({"format": FORMAT, "source": a.features, "max_seq_length": T, "queries": queries}, f)
    os.replace(tmp, a.out)
    real = sum(len(q["input_ids"]) for q in queries)
    print("squad_queries.py: %d queries from %s, max_seq_length %d, %d real tokens (%.1f%% of %d padded)"
          % (len(queries), a.features, T, real, 100.0 * real / (T * len(queries)), T * len(queries)), file=sys.stderr)


if __name__ == "__main__":
    main()
