#!/usr/bin/python3
"""The ONNX Runtime peer of `bertbench bench` (inference only): exports the PyTorch peer's model
(bench/peer/torch_bench.py: BERT for pretraining, tanh GELU, MLM head on the gathered positions,
weights from the same seed) with torch.onnx.export, checks that ORT's built-in fusions applied and
that ORT computes what PyTorch computes, and only then times it (bench/peer/ort_bench.js, node,
onnxruntime-node 1.30.0 installed by bench/peer/setup_ort.sh).

The exported graph (static shapes, opset 12):
  inputs  input_ids, token_type_ids, attention_mask: int64 [B, T]
          masked_lm_positions: int64 [B, P], positions within each sequence (as the reference's
          gather_indexes; P = max_predictions_per_seq, 20 at seq 128)
  outputs mlm_logits: float [B*P, 30522] at the gathered positions; nsp_logits: float [B, 2]

ORT's fusions are pattern matchers (onnxruntime/core/optimizer/*_fusion.cc); nn.Linear and
torch_bench.py's attention export to graphs they do not match. ExportBert below computes the same
function from the same weights, written so that they do:
  - opset 12: the Attention fusion accepts Add/Unsqueeze/Softmax only at their opset <= 12 versions
    (Unsqueeze with an `axes` attribute, Add version 7).
  - every linear layer as MatMul(x, W^T) followed by Add(matmul, bias): nn.Linear exports
    Add(bias, matmul), and the fusion wants the MatMul as the Add's first input.
  - K transposed once with perm (0,2,3,1) (not permute + transpose(-1,-2)); scores = Div(QK^T,
    sqrt(head size)) + mask as Add(div, mask); Softmax over axis 3; context Transpose (0,2,1,3)
    and Reshape to a constant [B, T, H]; the residual as Add(output dense, layer input).
  - the additive mask as (1 - float(mask.unsqueeze(1).unsqueeze(2))) * -10000 (Unsqueeze axes 1,
    then 2; Cast; Sub(1, .); Mul(., -10000)): the only mask form the fusion recognises.
  - GELU in Hugging Face's tanh spelling with torch.pow(x, 3.0) (a float exponent: FastGelu's
    matcher compares the exponent to 3.0f).
Then ORT's LayerNorm fusion turns the decomposed LayerNorms into LayerNormalization, Attention
fuses each layer's self-attention, SkipLayerNormalization fuses residual + LayerNorm, FastGelu the
GELUs, and (where it matches) EmbedLayerNormalization the embeddings.

Checks, in this order, before any timing (each a loud failure, non-zero exit):
  1. the fused op types in the graph ORT saves with `optimizedModelFilePath`: Attention must occur
     once per layer (the fusion silently leaves the plain graph otherwise);
  2. ORT's outputs for a synthetic batch equal PyTorch's (torch_bench.Bert.logits, fp32 eager)
     within |ort - torch| <= ATOL + RTOL * |torch| element-wise.
The export, its verification record and nothing else are cached under
${XDG_CACHE_HOME:-~/.cache}/bertbench/ort-models/ (keyed by this file, torch_bench.py and torch's
version); ort_bench.js refuses to time a model whose record does not say it passed.

Usage: ort_export.py --model=tiny --seq_len=128 --batch_size=8 [--threads=2] [--verify_only]
         [--mode=infer --warmup=2 --steps=10 --min_time=0 --json=PATH]   (timing, as torch_bench.py)"""
import argparse
import hashlib
import json
import math
import os
import subprocess
import sys
import time

import warnings

import numpy as np
import torch

# g.op() in a symbolic is how torch 1.13 documents custom symbolics; its deprecation note is noise here
warnings.filterwarnings("ignore", message=".*_graph_op' is deprecated")

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
import torch_bench as tb  # noqa: E402

OPSET = 12
ATOL, RTOL = 1e-4, 1e-4  # fp32 vs fp32 with fused kernels; PERF-NOTES saw max |diff| 3e-6 at tiny
FUSED = ("Attention", "SkipLayerNormalization", "FastGelu", "EmbedLayerNormalization", "LayerNormalization")
CACHE = os.path.join(os.environ.get("XDG_CACHE_HOME") or os.path.expanduser("~/.cache"), "bertbench")


def die(msg):
    sys.exit("ort_export.py: " + msg)


class OrtLayerNorm(torch.autograd.Function):
    """nn.LayerNorm that exports as ONE LayerNormalization node (ORT's own onnx-domain op, which it
    accepts at any opset) instead of torch's decomposition into ReduceMean/Sub/Pow/Sqrt/Div."""

    @staticmethod
    def forward(ctx, x, weight, bias, eps):
        return torch.nn.functional.layer_norm(x, weight.shape, weight, bias, eps)

    @staticmethod
    def symbolic(g, x, weight, bias, eps):
        return g.op("LayerNormalization", x, weight, bias, axis_i=-1, epsilon_f=eps)


class OrtReshape(torch.autograd.Function):
    """x.reshape(shape) that exports as Reshape to onnx_shape, where 0 copies the input's dim (ONNX
    semantics; the Attention fusion wants the reshapes around attention as (0, 0, N, H) and (0, 0, W))."""

    @staticmethod
    def forward(ctx, x, shape, onnx_shape):
        return x.reshape(shape)

    @staticmethod
    def symbolic(g, x, shape, onnx_shape):
        return g.op("Reshape", x, g.op("Constant", value_t=torch.tensor(onnx_shape, dtype=torch.int64)))


def heads(x, B, T, A, hs):
    return OrtReshape.apply(x, (B, T, A, hs), (0, 0, A, hs))


def layer_norm(ln, x):
    return OrtLayerNorm.apply(x, ln.weight, ln.bias, ln.eps)


class ExportLayer(torch.nn.Module):
    def __init__(self, layer, B, T):
        super().__init__()
        self.B, self.T, self.A, self.hs = B, T, layer.A, layer.hs
        wt = lambda lin: torch.nn.Parameter(lin.weight.detach().t().contiguous())
        b = lambda lin: torch.nn.Parameter(lin.bias.detach().clone())
        self.wq, self.wk, self.wv, self.wo, self.wi, self.wout = map(wt, (layer.q, layer.k, layer.v, layer.o, layer.i, layer.out))
        self.bq, self.bk, self.bv, self.bo, self.bi, self.bout = map(b, (layer.q, layer.k, layer.v, layer.o, layer.i, layer.out))
        self.ln1, self.ln2 = layer.ln1, layer.ln2

    def forward(self, x, mask_add):
        B, T, A, hs = self.B, self.T, self.A, self.hs
        q = heads(torch.matmul(x, self.wq) + self.bq, B, T, A, hs).permute(0, 2, 1, 3)
        k = heads(torch.matmul(x, self.wk) + self.bk, B, T, A, hs).permute(0, 2, 3, 1)
        v = heads(torch.matmul(x, self.wv) + self.bv, B, T, A, hs).permute(0, 2, 1, 3)
        s = torch.matmul(q, k) / math.sqrt(hs) + mask_add
        c = torch.matmul(torch.softmax(s, dim=3), v).permute(0, 2, 1, 3)
        c = OrtReshape.apply(c, (B, T, A * hs), (0, 0, A * hs))
        x = layer_norm(self.ln1, torch.matmul(c, self.wo) + self.bo + x)
        f = tb.gelu(torch.matmul(x, self.wi) + self.bi)
        return layer_norm(self.ln2, torch.matmul(f, self.wout) + self.bout + x)


class ExportBert(torch.nn.Module):
    """torch_bench.Bert.logits (eval) from the same weights, spelled for ORT's fusions."""

    def __init__(self, m, B, T, P):
        super().__init__()
        self.B, self.T, self.P = B, T, P
        self.word, self.pos, self.tok_type, self.ln = m.word, m.pos, m.tok_type, m.ln
        self.layers = torch.nn.ModuleList(ExportLayer(l, B, T) for l in m.layers)
        self.wpool, self.bpool = torch.nn.Parameter(m.pool.weight.detach().t().contiguous()), m.pool.bias
        self.wt, self.bt, self.tln = torch.nn.Parameter(m.t.weight.detach().t().contiguous()), m.t.bias, m.tln
        self.wdec = torch.nn.Parameter(m.word.weight.detach().t().contiguous())  # tied decoder, transposed once
        self.out_bias = m.out_bias
        self.wnsp, self.bnsp = torch.nn.Parameter(m.nsp.weight.detach().t().contiguous()), m.nsp.bias
        self.register_buffer("offsets", (torch.arange(B) * T).unsqueeze(1))
        self.register_buffer("positions", torch.arange(T).unsqueeze(0))

    def forward(self, input_ids, token_type_ids, attention_mask, masked_lm_positions):
        B, T, P = self.B, self.T, self.P
        x = layer_norm(self.ln, self.word(input_ids) + self.pos(self.positions.expand_as(input_ids)) + self.tok_type(token_type_ids))
        mask_add = (1.0 - attention_mask.unsqueeze(1).unsqueeze(2).float()) * -10000.0
        for layer in self.layers:
            x = layer(x, mask_add)
        pooled = torch.tanh(torch.matmul(x[:, 0], self.wpool) + self.bpool)
        flat = (masked_lm_positions + self.offsets).reshape(B * P)
        g = x.reshape(B * T, -1).index_select(0, flat)
        h = layer_norm(self.tln, tb.gelu(torch.matmul(g, self.wt) + self.bt))
        return torch.matmul(h, self.wdec) + self.out_bias, torch.matmul(pooled, self.wnsp) + self.bnsp


def build(name, B, T):
    """The peer model exactly as torch_bench.run_point builds it (same seed), its batch, P."""
    torch.manual_seed(0)
    m = tb.Bert(*tb.PRESETS[name]).eval()
    P = tb.default_max_predictions(T)
    ids, seg, mask, mpos, _, _, _ = tb.synthetic_batch(B, T, P, torch.Generator().manual_seed(7))
    return m, P, (ids, seg, mask, mpos)


def onnx_op_types(path):
    """{op_type: count} of the main graph of an ONNX file, read with a minimal protobuf walker
    (ModelProto.graph = field 7, GraphProto.node = 1, NodeProto.op_type = 4), so that no onnx
    Python package is needed."""
    with open(path, "rb") as f:
        buf = f.read()

    def varint(b, i):
        v = s = 0
        while True:
            c = b[i]
            i += 1
            v |= (c & 0x7F) << s
            s += 7
            if c < 0x80:
                return v, i

    def fields(b, lo, hi):
        i = lo
        while i < hi:
            key, i = varint(b, i)
            num, wt = key >> 3, key & 7
            if wt == 0:
                _, i = varint(b, i)
            elif wt == 1:
                i += 8
            elif wt == 5:
                i += 4
            elif wt == 2:
                n, i = varint(b, i)
                yield num, i, i + n
                i += n
            else:
                raise ValueError("%s: unsupported protobuf wire type %d at byte %d" % (path, wt, i))

    counts = {}
    graph = [(lo, hi) for num, lo, hi in fields(buf, 0, len(buf)) if num == 7]
    if not graph:
        raise ValueError("%s: no graph in the model" % path)
    for num, lo, hi in fields(buf, *graph[0]):
        if num == 1:
            for n2, l2, h2 in fields(buf, lo, hi):
                if n2 == 4:
                    op = buf[l2:h2].decode()
                    counts[op] = counts.get(op, 0) + 1
    return counts


def cache_key():
    h = hashlib.sha256()
    for f in ("ort_export.py", "torch_bench.py", "setup_ort.sh"):  # setup_ort.sh pins the ORT version
        with open(os.path.join(HERE, f), "rb") as fh:
            h.update(fh.read())
    h.update(torch.__version__.encode())
    return h.hexdigest()[:12]


def setup_ort():
    r = subprocess.run(["bash", os.path.join(HERE, "setup_ort.sh")], stdout=subprocess.PIPE, text=True)
    if r.returncode != 0:
        die("bench/peer/setup_ort.sh failed (its message is above)")
    return r.stdout.strip().splitlines()[-1]


def node_cmd(ort_dir, *args):
    return ["node", os.path.join(HERE, "ort_bench.js"), "--ort_dir=" + ort_dir] + list(args)


def export_and_verify(name, B, T, threads, ort_dir):
    """Returns (onnx path, verification record path); exports and verifies unless a passing record
    for this exact export exists."""
    base = os.path.join(CACHE, "ort-models", "%s_s%d_b%d_%s" % (name, T, B, cache_key()))
    onnx_path, record_path = base + ".onnx", base + ".verified.json"
    if os.path.exists(record_path) and os.path.exists(onnx_path):
        with open(record_path) as f:
            rec = json.load(f)
        if rec.get("passed"):
            return onnx_path, record_path
    os.makedirs(os.path.dirname(base), exist_ok=True)
    m, P, batch = build(name, B, T)
    L = tb.PRESETS[name][0]
    ids, seg, mask, mpos = batch
    pos2d = (mpos.view(B, P) - (torch.arange(B) * T).unsqueeze(1)).contiguous()  # per-sequence positions
    em = ExportBert(m, B, T, P).eval()
    inputs = (ids, seg, mask, pos2d)
    names = ["input_ids", "token_type_ids", "attention_mask", "masked_lm_positions"]
    with torch.no_grad():
        want_mlm, want_nsp = m.logits(ids, seg, mask, mpos)  # the PyTorch peer's own forward
        got_mlm, got_nsp = em(*inputs)
    # the rewrite itself must compute what the peer computes (fp32, different op order)
    d_export = max((want_mlm - got_mlm).abs().max().item(), (want_nsp - got_nsp).abs().max().item())
    t0 = time.time()
    tmp = onnx_path + ".tmp.%d" % os.getpid()
    with torch.no_grad():
        try:
            # torch.onnx.export with torch's own ONNX shape inference off (the private _export is the
            # only way to say so in 1.13): it asserts on a Reshape shape with a 0 and no -1 ("There are
            # no examples for shape_has_zero = true && minus_one_pos == -1"), which ONNX and ORT define
            # (copy the input's dim) and the Attention fusion requires. ORT infers shapes itself.
            torch.onnx.utils._export(em, inputs, tmp, opset_version=OPSET, input_names=names,
                                     output_names=["mlm_logits", "nsp_logits"], do_constant_folding=True,
                                     onnx_shape_inference=False)
        except torch.onnx.errors.CheckerError as e:
            # The file is written before torch runs ONNX's checker, which knows LayerNormalization only
            # from opset 17 on; ORT has it at every opset. Any other complaint is an error.
            if "LayerNormalization" not in str(e) or not os.path.exists(tmp):
                raise
    os.replace(tmp, onnx_path)
    prefix = "%s_s%d_b%d_" % (name, T, B)  # exports of this point by other versions of these files: stale
    for f in os.listdir(os.path.dirname(base)):
        if f.startswith(prefix) and not f.startswith(os.path.basename(base)):
            p = os.path.join(os.path.dirname(base), f)
            if os.path.isdir(p):
                for g in os.listdir(p):
                    os.remove(os.path.join(p, g))
                os.rmdir(p)
            else:
                os.remove(p)
    print("ort_export.py: exported %s (%.0f MB, %.1f s)" % (onnx_path, os.path.getsize(onnx_path) / 2**20,
                                                              time.time() - t0), file=sys.stderr)
    io_dir = base + ".check"
    os.makedirs(io_dir, exist_ok=True)
    for n, t in zip(names, inputs):
        t.numpy().astype("<i8").tofile(os.path.join(io_dir, n + ".bin"))
    with open(os.path.join(io_dir, "shapes.json"), "w") as f:
        json.dump({n: list(t.shape) for n, t in zip(names, inputs)}, f)
    optimized = base + ".ort-optimized.onnx"
    r = subprocess.run(node_cmd(ort_dir, "--onnx=" + onnx_path, "--threads=%d" % threads, "--check_dir=" + io_dir,
                                "--optimized=" + optimized))
    if r.returncode != 0:
        die("%s: node ort_bench.js --check_dir failed (exit status %d)" % (onnx_path, r.returncode))
    counts = onnx_op_types(optimized)
    os.remove(optimized)  # as large as the model; its op counts are in the record
    fused = {k: counts.get(k, 0) for k in FUSED}
    rec = {"onnx": onnx_path, "model": name, "seq_len": T, "batch_size": B, "max_predictions": P, "opset": OPSET,
           "layers": L, "fused_op_counts": fused, "optimized_op_counts": counts, "torch": torch.__version__,
           "export_vs_peer_max_abs_diff": d_export}
    if fused["Attention"] != L:
        rec["passed"] = False
        with open(record_path, "w") as f:
            json.dump(rec, f, indent=2)
        die("%s: ORT's Attention fusion did not apply: %d fused Attention nodes in its optimized graph, expected %d "
            "(one per layer); op counts: %s (hint: the export no longer matches onnxruntime's attention_fusion.cc "
            "pattern; see this file's docstring)" % (onnx_path, fused["Attention"], L, json.dumps(counts, sort_keys=True)))
    got = {}
    for n, want in (("mlm_logits", want_mlm), ("nsp_logits", want_nsp)):
        a = np.fromfile(os.path.join(io_dir, n + ".out.bin"), dtype="<f4")
        if a.size != want.numel():
            die("%s: ORT's %s has %d values, expected %d (shape %s)" % (onnx_path, n, a.size, want.numel(), list(want.shape)))
        w = want.numpy().reshape(-1)
        diff = np.abs(a - w)
        bad = diff > ATOL + RTOL * np.abs(w)
        got[n] = {"max_abs_diff": float(diff.max()), "max_abs_value": float(np.abs(w).max()),
                  "mismatches": int(bad.sum()), "count": int(a.size)}
        if bad.any():
            i = int(np.argmax(diff))
            rec["passed"], rec["outputs"] = False, got
            with open(record_path, "w") as f:
                json.dump(rec, f, indent=2)
            die("%s: ORT's %s differs from PyTorch's at %d of %d values (tolerance %g + %g*|torch|); worst at flat "
                "index %d: ort %.7g, torch %.7g" % (onnx_path, n, int(bad.sum()), a.size, ATOL, RTOL, i, a[i], w[i]))
    rec.update({"passed": True, "outputs": got, "tolerance": {"atol": ATOL, "rtol": RTOL},
                "verified_at": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())})
    tmp = record_path + ".tmp"
    with open(tmp, "w") as f:
        json.dump(rec, f, indent=2)
    os.replace(tmp, record_path)
    print("ort_export.py: verified %s: fused %s; max |ort - torch| mlm %.2g (|logit| <= %.2g), nsp %.2g"
          % (os.path.basename(onnx_path), ", ".join("%s %d" % kv for kv in fused.items()),
             got["mlm_logits"]["max_abs_diff"], got["mlm_logits"]["max_abs_value"], got["nsp_logits"]["max_abs_diff"]),
          file=sys.stderr)
    return onnx_path, record_path


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--mode", default="infer")
    ap.add_argument("--model", default="tiny")
    ap.add_argument("--seq_len", type=int, default=128)
    ap.add_argument("--batch_size", type=int, default=8)
    ap.add_argument("--threads", type=int, default=len(os.sched_getaffinity(0)))
    ap.add_argument("--warmup", type=int, default=2)
    ap.add_argument("--steps", type=int, default=10)
    ap.add_argument("--min_time", type=float, default=0.0)
    ap.add_argument("--dtype", default="fp32")
    ap.add_argument("--json", default="")
    ap.add_argument("--verify_only", action="store_true", help="export and verify; no timing")
    a = ap.parse_args()
    if a.mode != "infer":
        die("--mode=%s: the ORT peer times inference only (expected --mode=infer)" % a.mode)
    if a.dtype != "fp32":
        die("--dtype=%s: the ORT peer runs fp32 only (its CPU kernels have no bf16 path for this graph)" % a.dtype)
    if a.model not in tb.PRESETS:
        die("--model=%s: expected one of %s" % (a.model, ", ".join(tb.PRESETS)))
    if a.batch_size < 1 or not 2 <= a.seq_len <= tb.MAXPOS:
        die("--batch_size=%d --seq_len=%d: expected batch >= 1 and 2 <= seq_len <= %d" % (a.batch_size, a.seq_len, tb.MAXPOS))
    torch.set_num_threads(a.threads)
    ort_dir = setup_ort()
    onnx_path, record = export_and_verify(a.model, a.batch_size, a.seq_len, a.threads, ort_dir)
    if a.verify_only:
        return
    if not a.json:
        die("--json=PATH is required for timing (or --verify_only)")
    r = subprocess.run(node_cmd(ort_dir, "--onnx=" + onnx_path, "--verified=" + record, "--threads=%d" % a.threads,
                                "--warmup=%d" % a.warmup, "--steps=%d" % a.steps, "--min_time=%g" % a.min_time,
                                "--json=" + a.json))
    if r.returncode != 0:
        die("%s: node ort_bench.js (timing) failed, exit status %d" % (onnx_path, r.returncode))


if __name__ == "__main__":
    main()
