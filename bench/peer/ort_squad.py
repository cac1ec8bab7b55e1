"""ort_export.py --task=squad: the ONNX Runtime peer of `bertbench bench --task=squad --mode=infer` on
real-length queries. Exports torch_bench.SquadBert (the same encoder, weights from the same seed, and
the Linear(H, 2) span head) with DYNAMIC batch and sequence axes, as the model is deployed for
variable-length queries, checks it against PyTorch at two different (batch, length) shapes with
padding in them, and times it with bench/peer/ort_bench.js --queries (batches of --batch_size
consecutive queries, each padded to its longest; attention_mask 0 on the padding).

The graph (opset 12, ort_export.OPSET):
  inputs  input_ids, token_type_ids, attention_mask: int64 [batch, sequence] (both axes dynamic)
  output  logits: float [batch, sequence, 2] (start, end), run_squad.py's cls/squad/output_weights
fp32: ort_export.ExportLayer per layer (the spelling ORT's Attention, SkipLayerNormalization and
FastGelu fusions match), the embeddings' positions sliced to the input's length, the span head as
MatMul + Add. int8 (--dtype=int8): ort_export.ExportLayerInt8 and QEmbedLayerNorm (quantize_dynamic's
graph, see ort_export.py's docstring) and the span head as its DynamicQuantizeMatMul.
Checks, before any timing (each a loud failure, non-zero exit, and a record saying passed: false):
  fp32: Attention fused once per layer in ORT's optimized graph; at both shapes ORT's logits at the
        real positions equal PyTorch's (SquadBert.logits, eval) within ort_export.ATOL + RTOL*|torch|.
  int8: QEmbedLayerNormalization once, QAttention once per layer, 3 per layer + 1 int8 dense nodes and
        no fp32 MatMul/Gemm/Attention in ORT's optimized graph; at both shapes the logits at the real
        positions within SPAN_INT8_TOL (relative L2) of fp32 PyTorch's and within ort_export.EMU_RATIO
        times the distance of the same int8 arithmetic in PyTorch (ExportSquadInt8's forward) from fp32.
Only the logits at real positions are compared: those are what prediction reads (the padding rows'
logits are computed but are the model's output for pad tokens, which nothing uses)."""
import json
import os
import subprocess
import sys
import time
import warnings

import numpy as np
import torch

import ort_export as oe
import ort_graph as og
import torch_bench as tb

SPAN_INT8_TOL = 0.10  # relative L2 of the int8 span logits from fp32: ort_export.INT8_TOL's reasoning
CHECK_SHAPES = ((2, 96), (3, 160))  # (batch, length) of the two verification batches; row 1 padded in each


class ExportSquad(torch.nn.Module):
    """torch_bench.SquadBert.logits (eval) from the same weights, spelled for ORT's fusions; B, T only
    shape the trace (the exported Reshapes copy the input's dims)."""

    def __init__(self, m, B, T):
        super().__init__()
        self.word, self.pos, self.tok_type, self.ln = m.word, m.pos, m.tok_type, m.ln
        self.layers = torch.nn.ModuleList(og.ExportLayer(l, B, T) for l in m.layers)
        self.wqa, self.bqa = torch.nn.Parameter(m.qa.weight.detach().t().contiguous()), m.qa.bias
        self.register_buffer("positions", torch.arange(tb.MAXPOS).unsqueeze(0))

    def forward(self, input_ids, token_type_ids, attention_mask):
        pos = self.positions[:, :input_ids.shape[1]].expand_as(input_ids)
        x = og.layer_norm(self.ln, self.word(input_ids) + self.pos(pos) + self.tok_type(token_type_ids))
        mask_add = (1.0 - attention_mask.unsqueeze(1).unsqueeze(2).float()) * -10000.0
        for layer in self.layers:
            x = layer(x, mask_add)
        return torch.matmul(x, self.wqa) + self.bqa


class ExportSquadInt8(torch.nn.Module):
    """ExportSquad as quantize_dynamic leaves the fused graph: QEmbedLayerNormalization, QAttention + three
    QDense per layer, the span head as QDense (ort_export.ExportBertInt8's pieces)."""

    def __init__(self, m):
        super().__init__()
        self.eps = m.ln.eps
        tables, self.emb_params = [], []
        for t in (m.word.weight, m.pos.weight, m.tok_type.weight, m.ln.weight, m.ln.bias):
            q, sc, zp = og.quantize_u8(t.detach())
            tables.append(q)
            self.emb_params += [float(sc), float(zp)]  # floats: see ExportBertInt8.emb_params
        for n, q in zip(("word_q", "pos_q", "seg_q", "gamma_q", "beta_q"), tables):
            self.register_buffer(n, q)
        self.layers = torch.nn.ModuleList(og.ExportLayerInt8(l) for l in m.layers)
        self.qa = og.Int8Dense(m.qa.weight.t(), m.qa.bias)

    def forward(self, input_ids, token_type_ids, attention_mask):
        x, mask_index = og.QEmbedLayerNorm.apply(input_ids, token_type_ids, attention_mask, self.word_q, self.pos_q,
                                                 self.seg_q, self.gamma_q, self.beta_q, *self.emb_params, self.eps)
        for layer in self.layers:
            x = layer(x, mask_index)
        return self.qa(x)


def check_batch(B, T, seed):
    """A synthetic feature batch (torch_bench.synthetic_squad_batch) whose row 1 is padded after 2T/3 tokens."""
    ids, seg, mask, _, _ = tb.synthetic_squad_batch(B, T, torch.Generator().manual_seed(seed))
    n = 2 * T // 3
    ids[1, n:], seg[1, n:], mask[1, n:] = 0, 0, 0
    ids[1, n - 1] = 102  # [SEP] ends the shortened row
    return ids, seg, mask


def run_ort(ort_dir, onnx_path, threads, inputs, io_dir, optimized):
    """ORT's logits for inputs (node ort_bench.js --check_dir), and its optimized graph's op counts."""
    names = ["input_ids", "token_type_ids", "attention_mask"]
    os.makedirs(io_dir, exist_ok=True)
    for n, t in zip(names, inputs):
        t.numpy().astype("<i8").tofile(os.path.join(io_dir, n + ".bin"))
    with open(os.path.join(io_dir, "shapes.json"), "w") as f:
        json.dump({n: list(t.shape) for n, t in zip(names, inputs)}, f)
    r = subprocess.run(oe.node_cmd(ort_dir, "--onnx=" + onnx_path, "--threads=%d" % threads, "--check_dir=" + io_dir,
                                   "--optimized=" + optimized))
    if r.returncode != 0:
        oe.die("%s: node ort_bench.js --check_dir failed (exit status %d)" % (onnx_path, r.returncode))
    counts = oe.onnx_op_types(optimized)
    os.remove(optimized)
    got = np.fromfile(os.path.join(io_dir, "logits.out.bin"), dtype="<f4").astype(np.float64)
    return got, counts


def export_and_verify(name, threads, ort_dir, dtype):
    """(onnx path, verification record path) of the dynamic-axes SQuAD export; exports and verifies unless
    a passing record for this exact export exists."""
    tag = "int8_" if dtype == "int8" else ""
    base = os.path.join(oe.CACHE, "ort-models", "squad_%s%s_dyn_%s" % (tag, name, oe.cache_key()))
    onnx_path, record_path = base + ".onnx", base + ".verified.json"
    if os.path.exists(record_path) and os.path.exists(onnx_path):
        with open(record_path) as f:
            if json.load(f).get("passed"):
                return onnx_path, record_path
    os.makedirs(os.path.dirname(base), exist_ok=True)
    torch.manual_seed(0)  # the weights torch_bench.run_point's SquadBert gets
    m = tb.SquadBert(*tb.PRESETS[name]).eval()
    L = tb.PRESETS[name][0]
    B0, T0 = CHECK_SHAPES[0]
    em = (ExportSquadInt8(m) if dtype == "int8" else ExportSquad(m, B0, T0)).eval()
    names = ["input_ids", "token_type_ids", "attention_mask"]
    axes = {n: {0: "batch", 1: "sequence"} for n in names}
    axes["logits"] = {0: "batch", 1: "sequence"}
    t0 = time.time()
    tmp = onnx_path + ".tmp.%d" % os.getpid()
    # as ort_export.export_onnx, with the dynamic axes; torch's ONNX shape inference stays off for fp32 (its
    # Reshape assert, see export_onnx) but is on for int8, which has no such Reshape: without it the traced
    # shapes stay on the int8 graph's output (ORT then warns at every other shape). It cannot infer the
    # com.microsoft ops' shapes (ORT does); its warning that it cannot is expected.
    warnings.filterwarnings("ignore", message="The shape inference of com.microsoft::")
    with torch.no_grad():
        try:
            torch.onnx.utils._export(em, check_batch(B0, T0, 11), tmp, opset_version=oe.OPSET, input_names=names,
                                     output_names=["logits"], dynamic_axes=axes, do_constant_folding=True,
                                     onnx_shape_inference=dtype == "int8",
                                     custom_opsets={"com.microsoft": 1} if dtype == "int8" else None)
        except torch.onnx.errors.CheckerError as e:
            if not any(op in str(e) for op in ("LayerNormalization", "QAttention")) or not os.path.exists(tmp):
                raise
    os.replace(tmp, onnx_path)
    oe.remove_stale(base, "squad_%s%s_dyn_" % (tag, name))
    print("ort_export.py: exported %s (%.0f MB, %.1f s, dynamic batch and sequence axes)" % (
        onnx_path, os.path.getsize(onnx_path) / 2**20, time.time() - t0), file=sys.stderr)
    rec = {"onnx": onnx_path, "task": "squad", "model": name, "dtype": dtype, "dynamic_axes": axes, "opset": oe.OPSET,
           "layers": L, "torch": torch.__version__, "checks": []}

    def fail(msg):
        rec["passed"] = False
        oe.save_record(record_path, rec)
        oe.die("%s: %s" % (onnx_path, msg))

    for k, (B, T) in enumerate(CHECK_SHAPES):
        inputs = check_batch(B, T, 11 + k)
        got, counts = run_ort(ort_dir, onnx_path, threads, inputs, base + ".check", base + ".ort-optimized.onnx")
        with torch.no_grad():
            s, e = m.logits(*inputs)
            want = torch.stack([s, e], -1).double().numpy()
            emu = em(*inputs).double().numpy() if dtype == "int8" else None
        if got.size != want.size:
            fail("ORT's logits have %d values at batch %d length %d, expected %d" % (got.size, B, T, want.size))
        real = inputs[2].numpy().astype(bool)  # the real positions: what prediction reads
        g, w = got.reshape(want.shape)[real], want[real]
        check = {"batch_size": B, "length": T, "real_tokens": int(real.sum()), "max_abs_diff": float(np.abs(g - w).max()),
                 "relative_l2_error": float(np.linalg.norm(g - w) / np.linalg.norm(w))}
        rec["checks"].append(check)
        rec["optimized_op_counts"] = counts
        if dtype == "int8":
            rec["int8_op_counts"] = {k_: counts.get(k_, 0) for k_ in ("QEmbedLayerNormalization", "QAttention") + oe.INT8_DENSE}
            for op, n in (("QAttention", L), ("QEmbedLayerNormalization", 1)):
                if counts.get(op, 0) != n:
                    fail("%d %s nodes in ORT's optimized graph, expected %d; op counts: %s" % (
                        counts.get(op, 0), op, n, json.dumps(counts, sort_keys=True)))
            if oe.int8_dense_count(counts) != 3 * L + 1:
                fail("%d int8 dense nodes in ORT's optimized graph, expected %d (3 per layer + the span head); op counts: "
                     "%s" % (oe.int8_dense_count(counts), 3 * L + 1, json.dumps(counts, sort_keys=True)))
            left = {k_: counts[k_] for k_ in ("MatMul", "Gemm", "FusedGemm", "Attention", "FusedMatMul") if counts.get(k_)}
            if left:
                fail("fp32 matrix products left in ORT's optimized graph: %s" % left)
            em_rel = float(np.linalg.norm(emu[real] - w) / np.linalg.norm(w))
            check["emulation_vs_fp32_relative_l2_error"] = em_rel
            ratio = check["relative_l2_error"] / em_rel
            if check["relative_l2_error"] > SPAN_INT8_TOL or not oe.EMU_RATIO[0] <= ratio <= oe.EMU_RATIO[1]:
                fail("ORT int8's span logits at batch %d length %d are %.3g from fp32 PyTorch's (relative L2, at most %g) "
                     "where the same int8 arithmetic in PyTorch is %.3g: %.2f times it, expected %g to %g times"
                     % (B, T, check["relative_l2_error"], SPAN_INT8_TOL, em_rel, ratio, *oe.EMU_RATIO))
        else:
            rec["fused_op_counts"] = {k_: counts.get(k_, 0) for k_ in oe.FUSED}
            if counts.get("Attention", 0) != L:
                fail("ORT's Attention fusion did not apply: %d fused Attention nodes, expected %d; op counts: %s"
                     % (counts.get("Attention", 0), L, json.dumps(counts, sort_keys=True)))
            bad = np.abs(g - w) > oe.ATOL + oe.RTOL * np.abs(w)
            check["mismatches"] = int(bad.sum())
            if bad.any():
                fail("ORT's logits differ from PyTorch's at %d of %d real-position values at batch %d length %d "
                     "(tolerance %g + %g*|torch|, max |diff| %.3g)" % (int(bad.sum()), g.size, B, T, oe.ATOL, oe.RTOL,
                                                                     check["max_abs_diff"]))
    rec.update({"passed": True, "verified_at": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())})
    oe.save_record(record_path, rec)
    print("ort_export.py: verified %s at (batch, length) %s: %s" % (
        os.path.basename(onnx_path), list(CHECK_SHAPES), "; ".join(
            "max |ort - torch| %.2g, relative L2 %.2g" % (c["max_abs_diff"], c["relative_l2_error"]) for c in rec["checks"])),
        file=sys.stderr)
    return onnx_path, record_path


def main(a):
    """ort_export.py's flags, --task=squad: export + verify, then time on --queries."""
    ort_dir = oe.setup_ort()
    onnx_path, record = export_and_verify(a.model, a.threads, ort_dir, a.dtype)
    if a.verify_only:
        return
    if not a.queries or not a.json:
        oe.die("--task=squad: --queries=Q.json (bench/peer/squad_queries.py) and --json=PATH are required for timing "
               "(or --verify_only)")
    r = subprocess.run(oe.node_cmd(ort_dir, "--onnx=" + onnx_path, "--verified=" + record,
                                   "--queries=" + a.queries, "--batch_size=%d" % a.batch_size, "--seq_len=%d" % a.seq_len,
                                   "--threads=%d" % a.threads, "--warmup=%d" % a.warmup, "--steps=%d" % a.steps,
                                   "--min_time=%g" % a.min_time, "--json=" + a.json))
    if r.returncode != 0:
        oe.die("%s: node ort_bench.js (timing) failed, exit status %d" % (onnx_path, r.returncode))
