"""The graphs bench/peer/ort_export.py exports, as torch modules whose ONNX export is that graph
(ort_export.py's docstring says what each graph is and why it is spelled so):
  - fp32: ExportBert (ExportLayer per layer), torch_bench.Bert.logits spelled for ORT's fusions
    (Attention, SkipLayerNormalization, FastGelu, EmbedLayerNormalization, LayerNormalization);
  - int8: ExportBertInt8 (ExportLayerInt8 per layer), the graph onnxruntime.quantization.quantize_dynamic
    writes of the fused model, through symbolics (QDense, QAttention, QEmbedLayerNorm), whose forwards
    compute the same int8 arithmetic in PyTorch (the reference ORT's int8 ops are checked against).
bench/peer/ort_squad.py builds the SQuAD graphs from the same pieces."""
import math

import numpy as np
import torch


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


def gelu_spelled(x):
    """BERT's tanh GELU in Hugging Face's spelling, the form ORT's FastGelu fusion matches (the PyTorch
    peer computes the same function with F.gelu(approximate="tanh"), one kernel)."""
    return 0.5 * x * (1.0 + torch.tanh(math.sqrt(2.0 / math.pi) * (x + 0.044715 * torch.pow(x, 3.0))))


# ---- int8: the graph onnxruntime.quantization.quantize_dynamic writes (see ort_export.py's docstring) ----
def quantize_s8(w):
    """quantize_dynamic's weight quantization (QuantType.QInt8, per tensor, symmetric): absmax over
    the tensor (with 0 in the range), scale = 2*absmax / (127 - (-127)), zero point 0, q = round half
    to even (numpy rint) of w/scale clipped to [-127, 127] (quant_utils.compute_scale_zp,
    quantize_nparray). Returns (int8 tensor, scale)."""
    absmax = max(float(w.max()), 0.0, -float(w.min()))
    scale = float(np.float32(2.0 * absmax / 254.0)) if absmax > 0 else 1.0
    return torch.clamp(torch.round(w.double() / scale), -127, 127).to(torch.int8).contiguous(), scale


def quantize_u8(t):
    """quantize_dynamic's quantization of an initializer that feeds an activation input
    (EmbedLayerNormalizationQuant: QUInt8, asymmetric, per tensor): rmin = min(t, 0),
    rmax = max(t, 0), scale = (rmax - rmin) / 255 (1 when rmax == rmin), zero point =
    round(-rmin / scale), q = clip(round(t / scale) + zero point, 0, 255). Returns (uint8, scale, zp)."""
    rmin, rmax = min(float(t.min()), 0.0), max(float(t.max()), 0.0)
    scale = float(np.float32((rmax - rmin) / 255.0)) if rmax != rmin else 1.0
    zp = int(round(-rmin / scale))
    q = torch.clamp(torch.round(t.double() / scale) + zp, 0, 255).to(torch.uint8).contiguous()
    return q, scale, zp


def dynamic_quantize(x):
    """ONNX DynamicQuantizeLinear: the range [min(x, 0), max(x, 0)] over the whole tensor onto uint8;
    scale = range / 255 (fp32), zero point = saturate(round(-min / scale)), q = saturate(round(x /
    scale) + zero point), rounding half to even. Returns (q - zero point as float64, scale)."""
    lo, hi = torch.clamp(x.min(), max=0.0), torch.clamp(x.max(), min=0.0)
    scale = ((hi - lo) / 255.0).float()
    zp = torch.clamp(torch.round(-lo / scale), 0, 255)
    return (torch.clamp(torch.round(x / scale) + zp, 0, 255) - zp).double(), scale


def int8_matmul(x, wq, w_scale):
    """What DynamicQuantizeMatMul computes: x quantized by dynamic_quantize, the integer product
    accumulated exactly (int32 in ORT, float64 here: |sum| < 2^53), then times x_scale * w_scale in fp32."""
    xq, xs = dynamic_quantize(x)
    return torch.matmul(xq, wq.double()).float() * (xs * torch.tensor(w_scale, dtype=torch.float32))


def const(g, value, dtype):
    return g.op("Constant", value_t=torch.tensor(value, dtype=dtype))


class QDense(torch.autograd.Function):
    """x @ W + bias as quantize_dynamic rewrites a MatMul with a constant B (MatMulInteger.quantize):
    DynamicQuantizeLinear(x) -> (x_q uint8, x_scale, x_zp); MatMulInteger(x_q, W_q int8, x_zp, 0);
    Cast to float; Mul by (x_scale * W_scale); the bias Add kept. ORT's optimizer fuses the chain
    into DynamicQuantizeMatMul (or MatMulIntegerToFloat). Forward: the same arithmetic in PyTorch
    (int8_matmul), the reference ORT's int8 graph is checked against."""

    @staticmethod
    def forward(ctx, x, wq, bias, scale):
        return int8_matmul(x, wq, scale) + bias

    @staticmethod
    def symbolic(g, x, wq, bias, scale):
        xq, xs, xzp = g.op("DynamicQuantizeLinear", x, outputs=3)
        y = g.op("Cast", g.op("MatMulInteger", xq, wq, xzp, const(g, 0, torch.int8)), to_i=1)  # 1: FLOAT
        return g.op("Add", g.op("Mul", y, g.op("Mul", xs, const(g, scale, torch.float32))), bias)


class QAttention(torch.autograd.Function):
    """The fused self-attention as quantize_dynamic rewrites an Attention node (AttentionQuant):
    DynamicQuantizeLinear(x), then com.microsoft QAttention(x_q, W_qkv int8 [H, 3H], bias [3H],
    x_scale, W_scale, mask_index, x_zp, W_zp=0; num_heads). mask_index: int32 [B], the number of
    leading real tokens of each sequence, as the fp32 graph's fused Attention gets it from
    EmbedLayerNormalization. Forward: the same arithmetic in PyTorch (the QKV product as int8_matmul,
    the rest fp32; keys past mask_index get -10000 added, as ORT's mask filter value)."""

    @staticmethod
    def forward(ctx, x, wq, bias, mask_index, scale, num_heads):
        B, T, H = x.shape
        hs = H // num_heads
        q, k, v = (t.reshape(B, T, num_heads, hs).permute(0, 2, 1, 3)
                   for t in (int8_matmul(x, wq, scale) + bias).split(H, dim=-1))
        keep = torch.arange(T).unsqueeze(0) < mask_index.long().unsqueeze(1)  # (B, T) keys
        s = torch.matmul(q, k.transpose(-1, -2)) / math.sqrt(hs) + (~keep).float()[:, None, None, :] * -10000.0
        return torch.matmul(torch.softmax(s, dim=-1), v).permute(0, 2, 1, 3).reshape(B, T, H)

    @staticmethod
    def symbolic(g, x, wq, bias, mask_index, scale, num_heads):
        xq, xs, xzp = g.op("DynamicQuantizeLinear", x, outputs=3)
        return g.op("com.microsoft::QAttention", xq, wq, bias, xs, const(g, scale, torch.float32), mask_index, xzp,
                    const(g, 0, torch.int8), num_heads_i=num_heads)


class QEmbedLayerNorm(torch.autograd.Function):
    """The embeddings + LayerNorm as quantize_dynamic rewrites a fused EmbedLayerNormalization
    (EmbedLayerNormalizationQuant): com.microsoft QEmbedLayerNormalization over int32 ids, the word,
    position and segment tables and gamma/beta each quantized to uint8 (quantize_u8), with their
    scales and zero points; outputs the normalised embeddings and mask_index (int32 [B], the mask's
    row sums). Forward: the same arithmetic in PyTorch (dequantized tables, LayerNorm in fp32)."""

    @staticmethod
    def forward(ctx, ids, seg, mask, word_q, pos_q, seg_q, gamma_q, beta_q, ws, wz, ps, pz, ss, sz, gs, gz, bs, bz, eps):
        deq = lambda q, s_, z: (q.float() - z) * s_
        emb = torch.nn.functional.embedding
        x = emb(ids, deq(word_q, ws, wz)) + emb(torch.arange(ids.shape[1]), deq(pos_q, ps, pz)) + emb(seg, deq(seg_q, ss, sz))
        mean = x.mean(-1, keepdim=True)
        var = ((x - mean) ** 2).mean(-1, keepdim=True)
        y = (x - mean) / torch.sqrt(var + eps) * deq(gamma_q, gs, gz) + deq(beta_q, bs, bz)
        return y, mask.sum(1).to(torch.int32)

    @staticmethod
    def symbolic(g, ids, seg, mask, word_q, pos_q, seg_q, gamma_q, beta_q, ws, wz, ps, pz, ss, sz, gs, gz, bs, bz, eps):
        i32 = lambda t: g.op("Cast", t, to_i=6)  # 6: INT32
        scales = [const(g, s_, torch.float32) for s_ in (ws, ps, ss, gs, bs)]
        zps = [const(g, int(z), torch.uint8) for z in (wz, pz, sz, gz, bz)]
        return g.op("com.microsoft::QEmbedLayerNormalization", i32(ids), i32(seg), word_q, pos_q, seg_q, gamma_q, beta_q,
                    i32(mask), *scales, *zps, epsilon_f=eps, outputs=2)


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
        f = gelu_spelled(torch.matmul(x, self.wi) + self.bi)
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
        h = layer_norm(self.tln, gelu_spelled(torch.matmul(g, self.wt) + self.bt))
        return torch.matmul(h, self.wdec) + self.out_bias, torch.matmul(pooled, self.wnsp) + self.bnsp


class Int8Dense(torch.nn.Module):
    """A linear layer's weight as quantize_dynamic stores it: W^T [in, out] in int8 and one scale."""

    def __init__(self, weight_t, bias):
        super().__init__()
        q, self.scale = quantize_s8(weight_t.detach())
        self.register_buffer("wq", q)
        self.bias = torch.nn.Parameter(bias.detach().clone())

    def forward(self, x):
        return QDense.apply(x, self.wq, self.bias, self.scale)


class ExportLayerInt8(torch.nn.Module):
    """ExportLayer after ORT's fusions and quantize_dynamic: QAttention (Q, K and V weights as one
    [H, 3H] int8 tensor, as the fused Attention's), then the output dense and the FFN as QDense; the
    residual Adds, LayerNorms and the spelled GELU stay fp32 (ORT fuses them as in the fp32 graph)."""

    def __init__(self, layer):
        super().__init__()
        self.A = layer.A
        w = torch.cat([lin.weight.detach().t() for lin in (layer.q, layer.k, layer.v)], dim=1)  # (H, 3H)
        q, self.scale = quantize_s8(w)
        self.register_buffer("wqkv", q)
        self.bqkv = torch.nn.Parameter(torch.cat([layer.q.bias, layer.k.bias, layer.v.bias]).detach().clone())
        self.o, self.i, self.out = (Int8Dense(lin.weight.t(), lin.bias) for lin in (layer.o, layer.i, layer.out))
        self.ln1, self.ln2 = layer.ln1, layer.ln2

    def forward(self, x, mask_index, cut=False):
        c = QAttention.apply(x, self.wqkv, self.bqkv, mask_index, self.scale, self.A)
        if cut:  # the check graph's output (int8_op_check)
            return self.o(c)
        x = layer_norm(self.ln1, self.o(c) + x)
        return layer_norm(self.ln2, self.out(gelu_spelled(self.i(x))) + x)


class ExportBertInt8(torch.nn.Module):
    """torch_bench.Bert.logits (eval) as quantize_dynamic leaves the fused graph (ort_export.py's docstring):
    QEmbedLayerNormalization, QAttention + three QDense per layer, and every head's MatMul as QDense
    too (pooler, MLM transform, the tied decoder [H, 30522], NSP); the gather of the masked
    positions, the transform's GELU and LayerNorm, and tanh stay fp32."""

    def __init__(self, m, B, T, P, cut=False):
        super().__init__()
        self.B, self.T, self.P, self.eps = B, T, P, m.ln.eps
        self.cut = cut  # the check graph: the first layer's attention output projection only (int8_op_check)
        tables, params = [], []
        for t in (m.word.weight, m.pos.weight, m.tok_type.weight, m.ln.weight, m.ln.bias):
            q, sc, zp = quantize_u8(t.detach())
            tables.append(q)
            params.append((sc, zp))
        for n, q in zip(("word_q", "pos_q", "seg_q", "gamma_q", "beta_q"), tables):
            self.register_buffer(n, q)
        # scale, zero point of each, in input order; the zero points as floats: torch 1.13's exporter fails
        # ("Argument passed to at() was not in the map") on an autograd.Function given the int 0
        self.emb_params = [float(v) for pair in params for v in pair]
        self.layers = torch.nn.ModuleList(ExportLayerInt8(l) for l in m.layers)
        self.pool, self.t = Int8Dense(m.pool.weight.t(), m.pool.bias), Int8Dense(m.t.weight.t(), m.t.bias)
        self.tln = m.tln
        self.dec = Int8Dense(m.word.weight.t(), m.out_bias)  # tied decoder: its own quantized copy, transposed
        self.nsp = Int8Dense(m.nsp.weight.t(), m.nsp.bias)
        self.register_buffer("offsets", (torch.arange(B) * T).unsqueeze(1))

    def forward(self, input_ids, token_type_ids, attention_mask, masked_lm_positions):
        B, T, P = self.B, self.T, self.P
        x, mask_index = QEmbedLayerNorm.apply(input_ids, token_type_ids, attention_mask, self.word_q, self.pos_q,
                                              self.seg_q, self.gamma_q, self.beta_q, *self.emb_params, self.eps)
        if self.cut:
            return self.layers[0](x, mask_index, cut=True)
        for layer in self.layers:
            x = layer(x, mask_index)
        pooled = torch.tanh(self.pool(x[:, 0]))
        flat = (masked_lm_positions + self.offsets).reshape(B * P)
        g = x.reshape(B * T, -1).index_select(0, flat)
        h = layer_norm(self.tln, gelu_spelled(self.t(g)))
        return self.dec(h), self.nsp(pooled)
