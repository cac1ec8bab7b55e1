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
torch_bench.py's attention export to graphs they do not match. ExportBert (ort_graph.py) computes the same
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
  - GELU in Hugging Face's tanh spelling with torch.pow(x, 3.0) (gelu_spelled; a float exponent:
    FastGelu's matcher compares the exponent to 3.0f). The PyTorch peer computes the same function
    with F.gelu(approximate="tanh"), one kernel; the export keeps the spelling the matcher wants.
Then ORT's LayerNorm fusion turns the decomposed LayerNorms into LayerNormalization, Attention
fuses each layer's self-attention, SkipLayerNormalization fuses residual + LayerNorm, FastGelu the
GELUs, and (where it matches) EmbedLayerNormalization the embeddings.

--dtype=int8 (the ort-int8 peer): the graph onnxruntime.quantization.quantize_dynamic writes, with its
defaults (weight_type QInt8, per_channel False, reduce_range False, MatMulConstBOnly True, activations
uint8), for this model after ORT's transformer fusions: the deployment ORT documents for BERT on a CPU
(onnxruntime/python/tools/transformers: optimize_model, then quantize_dynamic). There is no onnx or
onnxruntime Python package here, so ExportBertInt8 writes that graph itself through symbolics,
following the quantizer's sources (onnxruntime/python/tools/quantization: registry.py's
IntegerOpsRegistry, operators/matmul.py MatMulInteger, operators/attention.py AttentionQuant,
operators/embed_layernorm.py EmbedLayerNormalizationQuant, quant_utils.py compute_scale_zp):
  - every MatMul with a constant weight: per layer the attention output dense, FFN in and FFN out; and
    the heads' too (pooler, MLM transform, the tied MLM decoder [H, 30522], NSP), as quantize_dynamic
    quantizes every such MatMul -> DynamicQuantizeLinear(x) -> (x_q uint8, x_scale, x_zp),
    MatMulInteger(x_q, W_q, x_zp, 0), Cast to float, Mul by x_scale * W_scale; the bias Add stays. ORT
    fuses each chain into DynamicQuantizeMatMul.
  - the fused Attention (Q, K, V weights as one [H, 3H]) -> DynamicQuantizeLinear + com.microsoft
    QAttention; inside it the scores, softmax and context stay fp32, as in ORT's kernel.
  - the fused EmbedLayerNormalization -> com.microsoft QEmbedLayerNormalization: the word, position
    and segment tables and gamma/beta as uint8, asymmetric, per tensor.
  - weights int8 symmetric per tensor: scale = max|W| / 127, zero point 0, values in [-127, 127];
    activations quantized per tensor at run time (uint8, asymmetric, the range including 0).
  - left fp32, as quantize_dynamic leaves them: LayerNorm and SkipLayerNormalization, FastGelu, tanh,
    the gather of the masked positions (an activation, not an initializer), the bias and residual Adds.
Checks of the int8 graph, in this order, before any timing (each a loud failure, non-zero exit):
  1. ORT's optimized graph holds QEmbedLayerNormalization once, QAttention once per layer and 3 per
     layer + 4 int8 dense nodes (DynamicQuantizeMatMul, or MatMulIntegerToFloat/MatMulInteger where ORT
     fuses less), and no fp32 MatMul, Gemm or Attention.
  2. int8_op_check: ORT's int8 ops against the same int8 arithmetic in PyTorch (the modules' forwards:
     DynamicQuantizeLinear's rounding, the integer product, the scale product), on the graph cut after
     the first layer's attention output projection: relative L2 error <= OPS_TOL (0.2) times that
     arithmetic's own distance from fp32. Measured at seq 128 batch 8: tiny 4.8e-8 (against 3.5e-3),
     BERT-base 6.6e-4 (against 1.2e-2). Not bit-exact at base: QEmbedLayerNormalization's LayerNorm
     differs from PyTorch's in the last bit, which moves a few of the attention input's uint8
     roundings, and attention spreads each over its sequence. Each op alone, fed identical inputs,
     matches bit for bit (DynamicQuantizeMatMul exactly at K = 128 to 3072, QAttention within 1.3e-7).
  3. the whole model against the fp32 PyTorch peer (torch_bench.Bert.logits): MLM logits relative L2
     error <= 0.10 and top-1 agreement >= 85% of the B*P rows; NSP logits relative L2 error <= 0.10
     (their argmax is not judged: B rows of an untrained model's near-tied logits); and the MLM error
     0.8 to 1.25 times that of the same int8 arithmetic in PyTorch (EMU_RATIO), which a kernel that
     rounds or saturates otherwise moves (u8s8 products saturate in int16 on CPUs without VNNI). The
     whole model cannot be held to the arithmetic value by value: see int8_op_check. Measured at seq 128
     batch 8: BERT-base MLM 2.37% (PyTorch's int8 arithmetic 2.38%), top-1 94.4%, NSP 3.4%; tiny 1.43%,
     96.9%, NSP 1.2%. The bounds: per-tensor int8 costs about a percent per product (the weights'
     step max|W|/127 on BERT's truncated-normal(0.02) layers, ~0.5% rms; the uint8 activations ~1%), and
     12 layers add that up to the 2-3% measured; 10% is 4 times that, while a wiring error (a wrong
     scale, a transposed weight, Q/K/V out of order) is of order 100%. Top-1 agreement: an untrained
     model's top logits are near-ties that 2% noise reorders now and then.

Checks of the fp32 graph, in this order, before any timing (each a loud failure, non-zero exit):
  1. the fused op types in the graph ORT saves with `optimizedModelFilePath`: Attention must occur
     once per layer (the fusion silently leaves the plain graph otherwise);
  2. ORT's outputs for a synthetic batch equal PyTorch's (torch_bench.Bert.logits, fp32 eager)
     within |ort - torch| <= ATOL + RTOL * |torch| element-wise.
The exports (int8 ones prefixed int8_), their verification records and nothing else are cached under
${XDG_CACHE_HOME:-~/.cache}/bertbench/ort-models/ (keyed by this file, ort_graph.py, torch_bench.py and
torch's version); ort_bench.js refuses to time a model whose record does not say it passed.

--task=squad: the SQuAD span model with dynamic axes, timed on real-length queries: bench/peer/ort_squad.py.

Usage: ort_export.py --model=tiny --seq_len=128 --batch_size=8 [--threads=2] [--dtype=fp32|int8] [--verify_only]
         [--task=squad --queries=Q.json]
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
warnings.filterwarnings("ignore", category=torch.jit.TracerWarning)  # the int8 ops' tracing-only forwards

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
import torch_bench as tb  # noqa: E402
from squad_queries import varint  # noqa: E402  (the peers' one protobuf varint reader)
from ort_graph import ExportBert, ExportBertInt8  # noqa: E402  (the graphs this file exports, as torch modules)

OPSET = 12
ATOL, RTOL = 1e-4, 1e-4  # fp32 vs fp32 with fused kernels; PERF-NOTES saw max |diff| 3e-6 at tiny
INT8_DENSE = ("DynamicQuantizeMatMul", "MatMulIntegerToFloat", "MatMulInteger")  # what ORT makes of QDense
# int8 tolerances (the docstring derives them): the first layer against the same int8 arithmetic in
# PyTorch; the whole model's MLM error against fp32 over that arithmetic's own; and against fp32 PyTorch
OPS_TOL = 0.2
EMU_RATIO = (0.8, 1.25)
INT8_TOL = {"mlm_logits": {"relative_l2_error": 0.10, "argmax_agreement": 0.85},
            "nsp_logits": {"relative_l2_error": 0.10, "argmax_agreement": 0.0}}
QUANTIZATION = ("onnxruntime.quantization.quantize_dynamic defaults on the fused graph: weights QInt8 symmetric per "
                "tensor, activations uint8 per tensor via DynamicQuantizeLinear; MatMul -> MatMulInteger, Attention -> "
                "QAttention, EmbedLayerNormalization -> QEmbedLayerNormalization (uint8 tables)")
FUSED = ("Attention", "SkipLayerNormalization", "FastGelu", "EmbedLayerNormalization", "LayerNormalization")
CACHE = os.path.join(os.environ.get("XDG_CACHE_HOME") or os.path.expanduser("~/.cache"), "bertbench")


def die(msg):
    sys.exit("ort_export.py: " + msg)


def save_record(path, rec):
    """The verification record, written whole or not at all (tmp + rename)."""
    tmp = path + ".tmp"
    with open(tmp, "w") as f:
        json.dump(rec, f, indent=2)
    os.replace(tmp, path)


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
    for f in ("ort_export.py", "ort_graph.py", "ort_squad.py", "torch_bench.py",
              "setup_ort.sh"):  # setup_ort.sh pins the ORT version
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


def export_onnx(module, inputs, path, names, output_names):
    with torch.no_grad():
        try:
            # torch.onnx.export with torch's own ONNX shape inference off (the private _export is the
            # only way to say so in 1.13): it asserts on a Reshape shape with a 0 and no -1 ("There are
            # no examples for shape_has_zero = true && minus_one_pos == -1"), which ONNX and ORT define
            # (copy the input's dim) and the Attention fusion requires. ORT infers shapes itself.
            torch.onnx.utils._export(module, inputs, path, opset_version=OPSET, input_names=names,
                                     output_names=output_names, do_constant_folding=True,
                                     onnx_shape_inference=False, custom_opsets={"com.microsoft": 1})
        except torch.onnx.errors.CheckerError as e:
            # The file is written before torch runs ONNX's checker, which knows LayerNormalization only
            # from opset 17 on (ORT has it at every opset) and ORT's com.microsoft ops (the int8 graph's
            # QEmbedLayerNormalization, QAttention) not at all. Any other complaint is an error.
            if not any(op in str(e) for op in ("LayerNormalization", "QAttention")) or not os.path.exists(path):
                raise


def int8_op_check(m, B, T, P, inputs, names, io_dir, base, ort_dir, threads):
    """ORT against the same int8 arithmetic in PyTorch (the int8 modules' forwards), op by op: the
    int8 graph cut after the first layer's attention output projection, so that it holds one of each
    int8 op (QEmbedLayerNormalization, DynamicQuantizeLinear + QAttention, DynamicQuantizeMatMul), run
    once. Why not the whole model: a last-bit fp32 difference (ORT's fused LayerNorm, FastGelu or
    softmax against PyTorch's) moves a value across a uint8 rounding boundary now and then; each such
    flip moves every output of the next product a little, which flips more roundings there, and by
    the twelfth layer ORT and PyTorch carry two independent draws of the same rounding noise (MLM
    logits 2.6% apart at BERT-base, as far as each is from fp32; after one full layer already 0.1%,
    a third of the token rows touched by a flip in the FFN's 3072-wide products). Returns
    {relative_l2_error, max_abs_diff, count}."""
    em1 = ExportBertInt8(m, B, T, P, cut=True).eval()
    ids, seg = inputs[0], inputs[1]
    with torch.no_grad():
        want = em1(*inputs).double().numpy().reshape(-1)
        # the same cut in fp32 (torch_bench's layer; the check batch has no padding): int8's own error there
        x = m.ln(m.word(ids) + m.pos(torch.arange(T).unsqueeze(0)) + m.tok_type(seg))
        layer = m.layers[0]
        split = lambda t: t.view(B, T, layer.A, layer.hs).permute(0, 2, 1, 3)
        q, k, v = split(layer.q(x)), split(layer.k(x)), split(layer.v(x))
        p = torch.softmax(torch.matmul(q, k.transpose(-1, -2)) / math.sqrt(layer.hs), -1)
        fp32 = layer.o(torch.matmul(p, v).permute(0, 2, 1, 3).reshape(B, T, -1)).double().numpy().reshape(-1)
    path = base + ".opcheck.onnx"
    export_onnx(em1, inputs, path + ".tmp", names, ["attention_output"])
    os.replace(path + ".tmp", path)
    r = subprocess.run(node_cmd(ort_dir, "--onnx=" + path, "--threads=%d" % threads, "--check_dir=" + io_dir,
                                "--optimized=" + path + ".opt"))
    if r.returncode != 0:
        die("%s: node ort_bench.js --check_dir failed (exit status %d)" % (path, r.returncode))
    for f in (path, path + ".opt"):
        os.remove(f)
    got = np.fromfile(os.path.join(io_dir, "attention_output.out.bin"), dtype="<f4").astype(np.float64)
    if got.size != want.size:
        die("%s: ORT's attention_output has %d values, expected %d" % (path, got.size, want.size))
    return {"relative_l2_error": float(np.linalg.norm(got - want) / np.linalg.norm(want)),
            "max_abs_diff": float(np.abs(got - want).max()), "count": int(want.size),
            "int8_vs_fp32_relative_l2_error": float(np.linalg.norm(want - fp32) / np.linalg.norm(fp32))}


def remove_stale(base, prefix):
    """Removes the cached exports named prefix* other than base*: this point exported by other versions of
    these files."""
    for f in os.listdir(os.path.dirname(base)):
        if f.startswith(prefix) and not f.startswith(os.path.basename(base)):
            p = os.path.join(os.path.dirname(base), f)
            if os.path.isdir(p):
                for g in os.listdir(p):
                    os.remove(os.path.join(p, g))
                os.rmdir(p)
            else:
                os.remove(p)


def export_and_verify(name, B, T, threads, ort_dir, dtype="fp32"):
    """Returns (onnx path, verification record path); exports and verifies unless a passing record
    for this exact export exists. dtype int8: the quantize_dynamic graph (ExportBertInt8)."""
    tag = "int8_" if dtype == "int8" else ""  # fp32 files keep their names; neither prefix matches the other's
    base = os.path.join(CACHE, "ort-models", "%s%s_s%d_b%d_%s" % (tag, name, T, B, cache_key()))
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
    em = (ExportBertInt8 if dtype == "int8" else ExportBert)(m, B, T, P).eval()
    inputs = (ids, seg, mask, pos2d)
    names = ["input_ids", "token_type_ids", "attention_mask", "masked_lm_positions"]
    with torch.no_grad():
        want_mlm, want_nsp = m.logits(ids, seg, mask, mpos)  # the PyTorch peer's own forward
        got_mlm, got_nsp = em(*inputs)
    # the rewrite itself must compute what the peer computes (fp32, different op order)
    d_export = max((want_mlm - got_mlm).abs().max().item(), (want_nsp - got_nsp).abs().max().item())
    t0 = time.time()
    tmp = onnx_path + ".tmp.%d" % os.getpid()
    export_onnx(em, inputs, tmp, names, ["mlm_logits", "nsp_logits"])
    os.replace(tmp, onnx_path)
    remove_stale(base, "%s%s_s%d_b%d_" % (tag, name, T, B))
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
    if dtype == "int8":
        rec["int8_ops_vs_pytorch"] = int8_op_check(m, B, T, P, inputs, names, io_dir, base, ort_dir, threads)
        return verify_int8(rec, record_path, counts, io_dir, (want_mlm, want_nsp), (got_mlm, got_nsp))
    if fused["Attention"] != L:
        rec["passed"] = False
        save_record(record_path, rec)
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
            save_record(record_path, rec)
            die("%s: ORT's %s differs from PyTorch's at %d of %d values (tolerance %g + %g*|torch|); worst at flat "
                "index %d: ort %.7g, torch %.7g" % (onnx_path, n, int(bad.sum()), a.size, ATOL, RTOL, i, a[i], w[i]))
    rec.update({"passed": True, "outputs": got, "tolerance": {"atol": ATOL, "rtol": RTOL},
                "verified_at": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())})
    save_record(record_path, rec)
    print("ort_export.py: verified %s: fused %s; max |ort - torch| mlm %.2g (|logit| <= %.2g), nsp %.2g"
          % (os.path.basename(onnx_path), ", ".join("%s %d" % kv for kv in fused.items()),
             got["mlm_logits"]["max_abs_diff"], got["mlm_logits"]["max_abs_value"], got["nsp_logits"]["max_abs_diff"]),
          file=sys.stderr)
    return onnx_path, record_path


def int8_dense_count(counts):
    return sum(counts.get(k, 0) for k in INT8_DENSE)


def verify_int8(rec, record_path, counts, io_dir, fp32, emulated):
    """The int8 graph's checks (see the docstring): its int8 ops in ORT's optimized graph; its outputs
    against the same int8 arithmetic in PyTorch (ExportBertInt8's forward) within EMU_TOL; and against
    the fp32 PyTorch peer's within INT8_TOL."""
    L, onnx_path = rec["layers"], rec["onnx"]
    rec["pytorch_int8_vs_fp32_max_abs_diff"] = rec.pop("export_vs_peer_max_abs_diff")  # ExportBertInt8 is int8
    rec.update({"dtype": "int8", "quantization": QUANTIZATION, "int8_op_counts": {
        k: counts.get(k, 0) for k in ("QEmbedLayerNormalization", "QAttention") + INT8_DENSE}})

    def fail(msg):
        rec["passed"] = False
        save_record(record_path, rec)
        die("%s: %s" % (onnx_path, msg))

    first = rec["int8_ops_vs_pytorch"]
    if first["relative_l2_error"] > OPS_TOL * first["int8_vs_fp32_relative_l2_error"]:
        fail("ORT's int8 ops (embeddings, attention, its output projection) are %.3g (relative L2) from the same int8 "
             "arithmetic in PyTorch, expected at most %g times that arithmetic's own distance from fp32, %.3g "
             "(max |diff| %.3g): ORT does not compute quantize_dynamic's graph" % (
                 first["relative_l2_error"], OPS_TOL, first["int8_vs_fp32_relative_l2_error"], first["max_abs_diff"]))
    want_ops = {"QAttention": L, "QEmbedLayerNormalization": 1}
    for op, n in want_ops.items():
        if counts.get(op, 0) != n:
            fail("%d %s nodes in ORT's optimized graph, expected %d; op counts: %s" % (
                counts.get(op, 0), op, n, json.dumps(counts, sort_keys=True)))
    if int8_dense_count(counts) != 3 * L + 4:
        fail("%d int8 dense nodes (%s) in ORT's optimized graph, expected %d (3 per layer + pooler, MLM transform, "
             "decoder, NSP); op counts: %s" % (int8_dense_count(counts), "/".join(INT8_DENSE), 3 * L + 4,
                                              json.dumps(counts, sort_keys=True)))
    left = {k: counts[k] for k in ("MatMul", "Gemm", "FusedGemm", "Attention", "FusedMatMul") if counts.get(k)}
    if left:
        fail("fp32 matrix products left in ORT's optimized graph: %s (every weight's product should be int8)" % left)
    got = {}
    for n, want, emu in zip(("mlm_logits", "nsp_logits"), fp32, emulated):
        a = np.fromfile(os.path.join(io_dir, n + ".out.bin"), dtype="<f4").astype(np.float64)
        if a.size != want.numel():
            fail("ORT's %s has %d values, expected %d (shape %s)" % (n, a.size, want.numel(), list(want.shape)))
        w = want.double().numpy().reshape(want.shape)
        a = a.reshape(want.shape)
        rel = float(np.linalg.norm(a - w) / np.linalg.norm(w))
        agree = float(np.mean(a.argmax(-1) == w.argmax(-1)))
        e = emu.double().numpy().reshape(want.shape)
        emu_rel = float(np.linalg.norm(a - e) / np.linalg.norm(e))
        got[n] = {"relative_l2_error": rel, "argmax_agreement": agree, "max_abs_diff": float(np.abs(a - w).max()),
                  "max_abs_value": float(np.abs(w).max()), "count": int(a.size), "rows": int(w.shape[0]),
                  "vs_emulation_relative_l2_error": emu_rel, "vs_emulation_max_abs_diff": float(np.abs(a - e).max()),
                  "emulation_vs_fp32_relative_l2_error": float(np.linalg.norm(e - w) / np.linalg.norm(w))}
        ratio = rel / got[n]["emulation_vs_fp32_relative_l2_error"]
        if n == "mlm_logits" and not EMU_RATIO[0] <= ratio <= EMU_RATIO[1]:
            rec["outputs"] = got
            fail("ORT int8's MLM logits are %.3g from fp32 (relative L2) where the same int8 arithmetic in PyTorch is "
                 "%.3g: %.2f times it, expected %g to %g times (ORT's int8 graph rounds differently from quantize_dynamic's)"
                 % (rel, got[n]["emulation_vs_fp32_relative_l2_error"], ratio, EMU_RATIO[0], EMU_RATIO[1]))
        tol = INT8_TOL[n]
        if rel > tol["relative_l2_error"] or agree < tol["argmax_agreement"]:
            rec["outputs"] = got
            fail("ORT int8's %s is further from the fp32 peer's than int8 rounding explains: relative L2 error %.3g "
                 "(at most %g), argmax agreement %.1f%% of %d rows (at least %.0f%%)" % (
                     n, rel, tol["relative_l2_error"], 100 * agree, w.shape[0], 100 * tol["argmax_agreement"]))
    rec.update({"passed": True, "outputs": got, "tolerance": dict(INT8_TOL, int8_ops_vs_pytorch=OPS_TOL,
                                                                   mlm_error_over_emulation_error=EMU_RATIO),
                "verified_at": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())})
    save_record(record_path, rec)
    print("ort_export.py: verified %s: %s; int8 ops vs the same arithmetic in PyTorch: relative L2 error "
          "%.2g (%.2g from fp32); mlm error vs fp32 %.3f times that arithmetic's; vs fp32 PyTorch: mlm relative L2 error %.3g, top-1 "
          "agreement %.1f%%, max |diff| %.2g (|logit| <= %.2g); nsp relative L2 error %.3g, argmax agreement %.1f%%" % (
              os.path.basename(onnx_path), ", ".join("%s %d" % kv for kv in rec["int8_op_counts"].items() if kv[1]),
              first["relative_l2_error"], first["int8_vs_fp32_relative_l2_error"], got["mlm_logits"]["relative_l2_error"] /
              got["mlm_logits"]["emulation_vs_fp32_relative_l2_error"],
              got["mlm_logits"]["relative_l2_error"], 100 * got["mlm_logits"]["argmax_agreement"],
              got["mlm_logits"]["max_abs_diff"], got["mlm_logits"]["max_abs_value"],
              got["nsp_logits"]["relative_l2_error"], 100 * got["nsp_logits"]["argmax_agreement"]), file=sys.stderr)
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
    ap.add_argument("--task", default="pretraining", choices=["pretraining", "squad"],
                    help="squad: bench/peer/ort_squad.py (dynamic axes, timed on --queries)")
    ap.add_argument("--queries", default="", help="--task=squad: bench/peer/squad_queries.py's file to time on")
    a = ap.parse_args()
    if a.mode != "infer":
        die("--mode=%s: the ORT peer times inference only (expected --mode=infer)" % a.mode)
    if a.dtype not in ("fp32", "int8"):
        die("--dtype=%s: expected fp32 or int8 (onnxruntime.quantization.quantize_dynamic's graph); the ORT peer has "
            "no bf16 (its CPU kernels have no bf16 path for this graph)" % a.dtype)
    if a.model not in tb.PRESETS:
        die("--model=%s: expected one of %s" % (a.model, ", ".join(tb.PRESETS)))
    if a.batch_size < 1 or not 2 <= a.seq_len <= tb.MAXPOS:
        die("--batch_size=%d --seq_len=%d: expected batch >= 1 and 2 <= seq_len <= %d" % (a.batch_size, a.seq_len, tb.MAXPOS))
    torch.set_num_threads(a.threads)
    if a.task == "squad":
        import ort_squad  # noqa: E402 - imports this module
        return ort_squad.main(a)
    ort_dir = setup_ort()
    onnx_path, record = export_and_verify(a.model, a.batch_size, a.seq_len, a.threads, ort_dir, a.dtype)
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
