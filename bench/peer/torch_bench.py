#!/usr/bin/python3
"""The PyTorch peer of `bertbench bench`: the same BERT pretraining model (encoder + pooler + MLM
head on the gathered masked positions with the decoder tied to the word embeddings + NSP head;
dropout 0.1, tanh GELU as F.gelu(approximate="tanh"), one kernel), the same synthetic full-length
batch shapes (max_predictions_per_seq 20 at seq 128, 76 at 512, proportional), the same
warm-up/timed steps (--steps at least, and past them until --min_time seconds are timed) and the
same JSON point schema.
PyTorch 1.13 eager (Debian python3-torch), torch.set_num_threads(threads).
Training step = forward + backward + global-norm clip (1.0) + a LAMB update written in tensor ops
(torch has no LAMB; moments, bias-free update u = m/(sqrt(v)+eps) + wd*w, trust ratio |w|/|u|,
no decay or adaptation for LayerNorm/bias, as the reference). Inference = forward under
torch.inference_mode() (no autograd bookkeeping at all, which no_grad still does).
--jit: inference instead through torch.jit.trace + torch.jit.freeze + torch.jit.optimize_for_inference
(jit_model), the traced outputs checked against eager before timing; the point's "graph" says what
was applied. Training always runs eager.
--dtype=bf16: the forward (and so, by autocast's semantics, the backward) under
torch.autocast("cpu", dtype=torch.bfloat16), the peer a CPU user switches on; parameters, gradients
and the optimizer stay fp32. PyTorch 1.13's CPU autocast does not keep layer_norm in fp32 (BERT's
LayerNorm then fails with "expected scalar type BFloat16 but found Float"), so every LayerNorm's
input is cast to fp32 first, as newer PyTorch does itself (a no-op in fp32).

--task=squad (`bertbench bench --task=squad`): the SQuAD span model instead, i.e. the same encoder
and a Linear(H, 2) span head (run_squad.py's cls/squad/output_weights), no pooler, no pretraining
heads; synthetic full-length batches laid out like a feature ([CLS] query [SEP] document [SEP],
the same shapes as bench/runner.cpp's synthetic_squad_batch) with a start/end span in the
document; loss = run_squad.py's (mean over the batch of the start and the end cross-entropies over
the sequence, averaged); training step = forward + backward + global-norm clip (1.0) +
optimization.py's AdamWeightDecayOptimizer written in tensor ops (no bias correction, weight decay
0.01 except LayerNorm and biases, eps 1e-6, lr 5e-5); inference = encoder + span head (and the loss)
under inference_mode.

--queries=Q.json (with --task=squad --mode=infer): the real-length queries of bench/peer/squad_queries.py's
file instead of synthetic batches: step i computes batch i of the feature stream as bench/runner.cpp
read_squad_batches forms it (squad_queries.stream_batches), padded to its longest query (attention mask 0
on the padding), the encoder and span head only (eval features carry no labels); the point reports real,
padded (batch x max_seq_length) and computed tokens/s (docs/benchmark.md, "--squad_data").

Usage: /usr/bin/python3 bench/peer/torch_bench.py --mode=train,infer --model=tiny --seq_len=128
         --batch_size=8,32 --threads=2 --warmup=2 --steps=10 [--min_time=0] [--json=PATH]
         [--optimizer=lamb|adamw|none] [--dtype=fp32,bf16] [--task=pretraining|squad] [--jit]
         [--task=squad --mode=infer --queries=Q.json --seq_len=<its max_seq_length>]
Old positional form (engine helper): torch_bench.py [model] [batch] [seq] [iters] [mode] [threads]."""
import argparse
import contextlib
import json
import math
import os
import platform
import resource
import sys
import time

import torch
import torch.nn as nn
import torch.nn.functional as F

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import squad_queries as sq  # noqa: E402

PRESETS = {  # L, H, A, I
    "tiny": (2, 128, 2, 512), "mini": (4, 256, 4, 1024), "small": (4, 512, 8, 2048),
    "medium": (8, 512, 8, 2048), "base": (12, 768, 12, 3072), "large": (24, 1024, 16, 4096),
}
VOCAB, MAXPOS, DROP = 30522, 512, 0.1


def default_max_predictions(seq):  # as bench/runner.cpp
    return max(1, 20 * seq // 128) if seq <= 128 else max(20, 76 * seq // 512)


def gelu(x):
    """BERT's tanh GELU, 0.5x(1 + tanh(sqrt(2/pi)(x + 0.044715x^3))), as a PyTorch user writes it:
    one kernel (torch >= 1.12). check_gelu() holds it to that formula. The ONNX export spells the
    formula out instead (bench/peer/ort_export.py gelu_spelled: ORT's FastGelu fusion matches that)."""
    return F.gelu(x, approximate="tanh")


GELU_ATOL, GELU_RTOL = 1e-6, 1e-6  # fp32 rounding of values of order 1 (eps 1.2e-7): a few ulps


def check_gelu():
    """F.gelu(approximate="tanh") in fp32 against the formula evaluated in float64 on the same fp32
    inputs (x in [-12, 12], 240,001 points): |got - want| <= GELU_ATOL + GELU_RTOL*|want| everywhere,
    or the program stops. Returns the largest |got - want| (4.3e-7 with torch 1.13, the same as the
    spelled-out fp32 formula)."""
    x = torch.linspace(-12.0, 12.0, 240001)
    xd = x.double()
    want = 0.5 * xd * (1.0 + torch.tanh(math.sqrt(2.0 / math.pi) * (xd + 0.044715 * xd ** 3)))
    diff = (gelu(x).double() - want).abs()
    bad = diff > GELU_ATOL + GELU_RTOL * want.abs()
    if bad.any():
        i = int(diff.argmax())
        sys.exit("torch_bench.py: F.gelu(approximate='tanh') is not BERT's tanh GELU in this torch (%s): %d of %d "
                 "points off by more than %g + %g*|want|; worst at x = %.7g: got %.9g, want %.9g"
                 % (torch.__version__, int(bad.sum()), x.numel(), GELU_ATOL, GELU_RTOL, float(x[i]), float(gelu(x)[i]),
                    float(want[i])))
    return float(diff.max())


class Layer(nn.Module):
    def __init__(self, H, A, I, drop=DROP, attn_drop=DROP):
        super().__init__()
        self.A, self.hs, self.drop, self.attn_drop = A, H // A, drop, attn_drop
        self.q, self.k, self.v, self.o = (nn.Linear(H, H) for _ in range(4))
        self.ln1, self.ln2 = nn.LayerNorm(H, eps=1e-12), nn.LayerNorm(H, eps=1e-12)
        self.i, self.out = nn.Linear(H, I), nn.Linear(I, H)

    def forward(self, x, mask):  # x (B,T,H), mask (B,1,1,T) additive
        B, T, H = x.shape
        split = lambda t: t.view(B, T, self.A, self.hs).permute(0, 2, 1, 3)
        q, k, v = split(self.q(x)), split(self.k(x)), split(self.v(x))
        s = torch.matmul(q, k.transpose(-1, -2)) / math.sqrt(self.hs) + mask
        p = F.dropout(torch.softmax(s, -1), self.attn_drop, self.training)
        c = torch.matmul(p, v).permute(0, 2, 1, 3).reshape(B, T, H)
        x = self.ln1((F.dropout(self.o(c), self.drop, self.training) + x).float())  # fp32 LN input: see --dtype
        return self.ln2((F.dropout(self.out(gelu(self.i(x))), self.drop, self.training) + x).float())


class Bert(nn.Module):
    """BERT with the pretraining heads; the defaults are bert-base-uncased's vocabulary and positions
    with dropout 0.1. Weights: truncated normal (std, cut at 2 std; modeling.py's initializer_range)
    as modeling.py; biases and LayerNorm beta 0, gamma 1."""

    def __init__(self, L, H, A, I, vocab=VOCAB, maxpos=MAXPOS, types=2, drop=DROP, attn_drop=DROP, std=0.02):
        super().__init__()
        self.drop = drop
        self.word, self.pos, self.tok_type = nn.Embedding(vocab, H), nn.Embedding(maxpos, H), nn.Embedding(types, H)
        self.ln = nn.LayerNorm(H, eps=1e-12)
        self.layers = nn.ModuleList(Layer(H, A, I, drop, attn_drop) for _ in range(L))
        self.pool, self.t, self.tln = nn.Linear(H, H), nn.Linear(H, H), nn.LayerNorm(H, eps=1e-12)
        self.out_bias = nn.Parameter(torch.zeros(vocab))
        self.nsp = nn.Linear(H, 2)
        for name, p in self.named_parameters():
            if p.dim() > 1:
                nn.init.trunc_normal_(p, std=std, a=-2 * std, b=2 * std)
            elif name.endswith("bias"):
                nn.init.zeros_(p)

    def logits(self, ids, seg, mask, mpos):
        """MLM logits at the gathered positions (mpos: flat indices into B*T) and NSP logits."""
        B, T = ids.shape
        x = self.word(ids) + self.pos(torch.arange(T).unsqueeze(0)) + self.tok_type(seg)
        x = F.dropout(self.ln(x), self.drop, self.training)
        add = (1.0 - mask[:, None, None, :].float()) * -10000.0
        for layer in self.layers:
            x = layer(x, add)
        pooled = torch.tanh(self.pool(x[:, 0]))
        g = x.reshape(B * T, -1).index_select(0, mpos)  # gathered masked positions (P,H)
        h = self.tln(gelu(self.t(g)).float())
        return h @ self.word.weight.t() + self.out_bias, self.nsp(pooled)

    def forward(self, ids, seg, mask, mpos, mids, mw, nsp_labels):
        return self.outputs(ids, seg, mask, mpos, mids, mw, nsp_labels)[0]

    def outputs(self, ids, seg, mask, mpos, mids, mw, nsp_labels):
        """(loss, MLM logits, NSP logits): the forward's work with every output it computes."""
        logits, nsp_logits = self.logits(ids, seg, mask, mpos)
        ce = F.cross_entropy(logits.float(), mids, reduction="none")
        mlm = (ce * mw).sum() / (mw.sum() + 1e-5)
        return mlm + F.cross_entropy(nsp_logits.float(), nsp_labels), logits, nsp_logits


class Lamb:
    """LAMB as in the reference (google-research/bert optimization.py AdamWeightDecay + trust
    ratio, MLPerf): no bias correction; decay and adaptation skipped for LayerNorm and biases."""

    def __init__(self, model, lr=1e-4, b1=0.9, b2=0.999, eps=1e-6, wd=0.01):
        self.lr, self.b1, self.b2, self.eps, self.wd = lr, b1, b2, eps, wd
        self.groups = []
        for name, p in model.named_parameters():
            adapt = p.dim() > 1 and "ln" not in name  # weights; not LayerNorm gamma/beta, not biases
            self.groups.append((p, torch.zeros_like(p), torch.zeros_like(p), adapt))

    @torch.no_grad()
    def step(self):
        for p, m, v, adapt in self.groups:
            g = p.grad
            m.mul_(self.b1).add_(g, alpha=1 - self.b1)
            v.mul_(self.b2).addcmul_(g, g, value=1 - self.b2)
            u = m / (v.sqrt() + self.eps)
            ratio = 1.0
            if adapt:
                u.add_(p, alpha=self.wd)
                wn, un = p.norm(), u.norm()
                ratio = torch.where((wn > 0) & (un > 0), wn / un, torch.ones_like(wn))
            p.sub_(u * (self.lr * ratio))


class SquadBert(nn.Module):
    """run_squad.py's create_model: the BERT encoder's sequence output through a dense H -> 2
    (start, end logits per position). Same embeddings and layers as Bert, no pooler."""

    def __init__(self, L, H, A, I):
        super().__init__()
        self.word, self.pos, self.tok_type = nn.Embedding(VOCAB, H), nn.Embedding(MAXPOS, H), nn.Embedding(2, H)
        self.ln = nn.LayerNorm(H, eps=1e-12)
        self.layers = nn.ModuleList(Layer(H, A, I) for _ in range(L))
        self.qa = nn.Linear(H, 2)
        for p in self.parameters():
            if p.dim() > 1:
                nn.init.trunc_normal_(p, std=0.02, a=-0.04, b=0.04)
        nn.init.zeros_(self.qa.bias)

    def logits(self, ids, seg, mask):
        B, T = ids.shape
        x = self.word(ids) + self.pos(torch.arange(T).unsqueeze(0)) + self.tok_type(seg)
        x = F.dropout(self.ln(x), DROP, self.training)
        add = (1.0 - mask[:, None, None, :].float()) * -10000.0
        for layer in self.layers:
            x = layer(x, add)
        se = self.qa(x)  # (B, T, 2)
        return se[..., 0], se[..., 1]

    def forward(self, ids, seg, mask, start, end):
        """run_squad.py compute_loss: -mean(sum(one_hot(pos) * log_softmax(logits over T))), for the
        start and the end, averaged."""
        return self.outputs(ids, seg, mask, start, end)[0]

    def outputs(self, ids, seg, mask, start, end):
        """(loss, start logits, end logits)."""
        s, e = self.logits(ids, seg, mask)
        loss = lambda logits, pos: -(F.one_hot(pos, logits.shape[1]).float()
                                     * F.log_softmax(logits.float(), -1)).sum(-1).mean()
        return (loss(s, start) + loss(e, end)) / 2, s, e


class AdamWeightDecay:
    """optimization.py's AdamWeightDecayOptimizer: m, v moments without bias correction,
    update = m / (sqrt(v) + eps) (+ wd * w for weights other than LayerNorm and biases),
    w -= lr * update."""

    def __init__(self, model, lr=5e-5, b1=0.9, b2=0.999, eps=1e-6, wd=0.01):
        self.lr, self.b1, self.b2, self.eps, self.wd = lr, b1, b2, eps, wd
        self.groups = [(p, torch.zeros_like(p), torch.zeros_like(p), p.dim() > 1 and "ln" not in name)
                       for name, p in model.named_parameters()]

    @torch.no_grad()
    def step(self):
        for p, m, v, decay in self.groups:
            g = p.grad
            m.mul_(self.b1).add_(g, alpha=1 - self.b1)
            v.mul_(self.b2).addcmul_(g, g, value=1 - self.b2)
            u = m / (v.sqrt() + self.eps)
            if decay:
                u.add_(p, alpha=self.wd)
            p.sub_(u, alpha=self.lr)


def synthetic_squad_batch(B, T, gen):
    """As bench/runner.cpp synthetic_squad_batch: [CLS] query (min(64, T/4 - 2) tokens, segment 0)
    [SEP] document (segment 1) [SEP], every position real; an answer of 1..30 tokens in the document."""
    query = min(64, max(0, T // 4 - 2))
    doc_begin, doc_len = query + 2, max(1, T - query - 3)
    ids = torch.randint(0, VOCAB, (B, T), generator=gen)
    ids[:, 0], ids[:, query + 1], ids[:, T - 1] = 101, 102, 102
    seg = (torch.arange(T) > query + 1).long().expand(B, T).contiguous()
    mask = torch.ones(B, T, dtype=torch.long)
    start = doc_begin + torch.randint(0, doc_len, (B,), generator=gen)
    length = 1 + torch.randint(0, 30, (B,), generator=gen)
    end = torch.minimum(start + length - 1, torch.full((B,), min(doc_begin + doc_len - 1, T - 1)))
    return ids, seg, mask, torch.clamp(start, max=T - 1), end


def squad_forward_flops(L, H, I, B, T):  # as model::forward_flops(c, b, Heads::squad) (src/model/cost.cpp)
    n = B * T
    return L * (2.0 * n * (4 * H * H + 2 * H * I) + B * 4.0 * T * T * H) + 2.0 * n * H * 2


def synthetic_batch(B, T, P, gen):
    ids = torch.randint(0, VOCAB, (B, T), generator=gen)
    seg = (torch.arange(T) >= T // 2).long().expand(B, T).contiguous()
    mask = torch.ones(B, T, dtype=torch.long)
    pos = []
    for b in range(B):
        pick = torch.randperm(T - 2, generator=gen)[:P] + 1
        pos += (b * T + pick.sort().values).tolist()
    mpos = torch.tensor(pos)
    mids = torch.randint(0, VOCAB, (len(pos),), generator=gen)
    mw = torch.ones(len(pos))
    nsp = torch.randint(0, 2, (B,), generator=gen)
    return ids, seg, mask, mpos, mids, mw, nsp


def forward_flops(L, H, I, B, T, P):  # as model::forward_flops (matmuls, real tokens)
    n = B * T
    per_layer = 2.0 * n * (4 * H * H + 2 * H * I) + B * 4.0 * T * T * H
    return L * per_layer + 2.0 * B * H * H + 4.0 * B * H + 2.0 * B * P * H * H + 2.0 * B * P * H * VOCAB


def percentile(sorted_ms, q):  # nearest rank, as bench/runner.cpp
    rank = math.ceil(q * len(sorted_ms))
    return sorted_ms[min(len(sorted_ms) - 1, max(rank, 1) - 1)]


AUTOCAST = {"fp32": None, "bf16": torch.bfloat16}
JIT_TOL = {"fp32": (1e-4, 1e-4), "bf16": (3e-2, 3e-2)}  # (atol, rtol): traced vs eager, see jit_model


class Outputs(nn.Module):
    """model.outputs as a module's forward: what torch.jit.trace takes."""

    def __init__(self, model):
        super().__init__()
        self.model = model

    def forward(self, *args):
        return self.model.outputs(*args)


def jit_model(model, args, dtype):
    """The inference step as PyTorch 1.13 deploys it on a CPU: torch.jit.trace of the eval model's
    forward (loss and every logit), torch.jit.freeze (weights folded in as constants), then
    torch.jit.optimize_for_inference (oneDNN fusions; kept only where it accepts the graph).
    Checked before any timing: each output of the traced module equals eager's within
    |jit - eager| <= atol + rtol*|eager| (JIT_TOL: fp32 1e-4 + 1e-4, as the ORT peer's check: the same
    maths through other kernels; bf16 3e-2 + 3e-2, two bf16 roundings apart), or the program stops.
    Returns (module, what was applied, {output: max |jit - eager|})."""
    model.eval()
    wrapper = Outputs(model).eval()
    autocast = (lambda: torch.autocast("cpu", dtype=AUTOCAST[dtype])) if AUTOCAST[dtype] else contextlib.nullcontext
    with torch.no_grad(), autocast():
        want = wrapper(*args)
        traced = torch.jit.trace(wrapper, args, check_trace=False)  # traced under autocast: the casts are in the graph
    module = torch.jit.freeze(traced)
    graph = "torch.jit.trace + torch.jit.freeze"
    try:
        module = torch.jit.optimize_for_inference(module)
        graph += " + torch.jit.optimize_for_inference"
    except Exception as e:  # noqa: BLE001 - recorded in the point, the frozen module is timed instead
        graph += " (optimize_for_inference refused the graph: %s)" % str(e).strip().splitlines()[0][:160]
    with torch.inference_mode():
        module(*args)  # the first calls of a traced module run the profiling executor's passes
        got = module(*args)
    atol, rtol = JIT_TOL[dtype]
    diffs = {}
    for name, g, w in zip(("loss", "logits_a", "logits_b"), got, want):
        g, w = g.float(), w.float()
        diff = (g - w).abs()
        diffs[name] = float(diff.max())
        bad = diff > atol + rtol * w.abs()
        if g.shape != w.shape or bad.any():
            i = int(diff.reshape(-1).argmax())
            sys.exit("torch_bench.py: --jit: the traced model's %s differs from eager's at %d of %d values (tolerance "
                     "%g + %g*|eager|; shapes %s vs %s); worst at flat index %d: jit %.7g, eager %.7g"
                     % (name, int(bad.sum()), w.numel(), atol, rtol, list(g.shape), list(w.shape), i,
                        float(g.reshape(-1)[i]), float(w.reshape(-1)[i])))
    return module, graph, diffs


def query_batches(queries, B, count):
    """The first `count` batches of the query stream (squad_queries.stream_batches), each padded to its longest
    query: [(ids, seg, mask, real tokens)]."""
    out = []
    if len(queries) < B:
        sys.exit("torch_bench.py: --batch_size=%d: the queries hold only %d, fewer than one batch" % (B, len(queries)))
    for idx in sq.stream_batches(len(queries), B, count):
        Tb = max(len(queries[i]["input_ids"]) for i in idx)
        ids, seg, mask = (torch.zeros(B, Tb, dtype=torch.long) for _ in range(3))
        for r, i in enumerate(idx):
            n = len(queries[i]["input_ids"])
            ids[r, :n], seg[r, :n], mask[r, :n] = torch.tensor(queries[i]["input_ids"]), torch.tensor(queries[i]["segment_ids"]), 1
        out.append((ids, seg, mask, int(mask.sum())))
    return out


def run_point(mode, name, T, B, threads, warmup, steps, optimizer, min_time=0.0, dtype="fp32", task="pretraining",
              jit=False, queries=None):
    torch.set_num_threads(threads)
    torch.manual_seed(0)
    L, H, A, I = PRESETS[name]
    squad = task == "squad"
    if optimizer == "":
        optimizer = "adamw" if squad else "lamb"
    model = SquadBert(L, H, A, I) if squad else Bert(L, H, A, I)
    P = 0 if squad else default_max_predictions(T)
    gen = torch.Generator().manual_seed(7)
    args = synthetic_squad_batch(B, T, gen) if squad else synthetic_batch(B, T, P, gen)
    qb = query_batches(queries, B, min(warmup + steps, sq.MAX_BATCHES)) if queries else None
    opt = None
    if mode == "train" and optimizer != "none":
        opt = (AdamWeightDecay if optimizer == "adamw" else Lamb)(model)
    times, real, computed = [], 0, 0
    it = 0
    autocast = (lambda: torch.autocast("cpu", dtype=AUTOCAST[dtype])) if AUTOCAST[dtype] else contextlib.nullcontext
    graph, jit_diffs, traced = "eager", None, None
    if mode == "infer" and jit:
        traced, graph, jit_diffs = jit_model(model, args, dtype)
    while it < warmup or len(times) < steps or sum(times) < 1e3 * min_time:
        it += 1
        t0 = time.perf_counter()
        if mode == "train":
            model.train()
            model.zero_grad(set_to_none=True)
            with autocast():  # the backward follows the forward's dtypes (autocast semantics)
                loss = model(*args)
            loss.backward()
            if opt is not None:
                torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
                opt.step()
        elif qb is not None:  # real lengths: the span logits of one query batch, padded to its longest
            ids, seg, mask, n_real = qb[(it - 1) % len(qb)]
            model.eval()
            with torch.inference_mode(), autocast():
                model.logits(ids, seg, mask)
        elif traced is not None:
            with torch.inference_mode():  # the casts autocast made are in the traced graph
                traced(*args)
        else:
            model.eval()
            with torch.inference_mode(), autocast():
                model(*args)
        dt = (time.perf_counter() - t0) * 1e3
        if it > warmup:
            times.append(dt)
            real += n_real if qb is not None else B * T
            computed += ids.numel() if qb is not None else B * T
    s = sorted(times)
    n = len(s)
    med = s[n // 2] if n % 2 else 0.5 * (s[n // 2 - 1] + s[n // 2])
    flops = (squad_forward_flops(L, H, I, B, T) if squad else forward_flops(L, H, I, B, T, P)) * (3 if mode == "train" else 1)
    per_s = 1e3 / med / n  # per timed step: the mean over the steps (real lengths vary), as bench/runner.cpp
    if qb is not None:  # FLOPs of what was computed: each batch at its padded length
        flops = sum(squad_forward_flops(L, H, I, B, qb[k % len(qb)][0].shape[1]) for k in range(warmup, it)) / n
    point = {"task": task, "mode": mode, "model": name, "dtype": dtype, "seq_len": T, "batch_size": B, "threads": torch.get_num_threads(),
            "steps_per_update": 1, "warmup_steps": warmup, "timed_steps": len(times), "min_time_s": min_time,
            "data": "queries" if qb is not None else "synthetic",
            "sequences_per_second": B * n * per_s, "tokens_per_second": real * per_s,
            "padded_tokens_per_second": B * T * n * per_s, "computed_tokens_per_second": computed * per_s,
            "real_token_fraction": real / (B * T * n),
            "step_ms_median": med, "step_ms_min": s[0], "step_ms_max": s[-1],
            "latency_ms_p50": percentile(s, 0.5), "latency_ms_p90": percentile(s, 0.9),
            "latency_ms_p99": percentile(s, 0.99), "step_ms": times,
            "gflops": flops / (med / 1e3) / 1e9, "ceiling_gflops": None, "mfu": None,
            "optimizer_included": opt is not None, "optimizer": optimizer if opt is not None else "none",
            "graph": graph if mode == "infer" else "eager", "jit_vs_eager_max_abs_diff": jit_diffs,
            "peak_rss_mb": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024.0}
    if squad:  # as bertbench's SQuAD points: synthetic = full length; queries = each batch padded to its longest
        point["squad_layout"] = "batch_padded" if qb is not None else "full"
    return point


def blas_library():
    """The BLAS shared object this process actually loaded (from /proc/self/maps)."""
    try:
        with open("/proc/self/maps") as f:
            libs = sorted({line.split()[-1] for line in f if "blas" in line.split()[-1]})
        return [os.path.realpath(p) for p in libs]
    except OSError:
        return []


def main():
    argv = sys.argv[1:]
    if argv and not argv[0].startswith("--"):  # old positional form
        keys = ["model", "batch_size", "seq_len", "steps", "mode", "threads"]
        argv = ["--%s=%s" % (k, v) for k, v in zip(keys, argv)]
        argv = [a.replace("--mode=both", "--mode=train,infer") for a in argv] + ["--warmup=1"]
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--mode", default="train")
    ap.add_argument("--model", default="base")
    ap.add_argument("--seq_len", default="128")
    ap.add_argument("--batch_size", default="8")
    ap.add_argument("--threads", default=str(len(os.sched_getaffinity(0))))
    ap.add_argument("--warmup", type=int, default=2)
    ap.add_argument("--steps", type=int, default=10)
    ap.add_argument("--min_time", type=float, default=0.0)
    ap.add_argument("--task", default="pretraining", choices=["pretraining", "squad"])
    ap.add_argument("--optimizer", default="", choices=["", "lamb", "adamw", "none"],
                    help="default: lamb for --task=pretraining, adamw (optimization.py) for --task=squad")
    ap.add_argument("--dtype", default="fp32", help="fp32, bf16 (torch.autocast on the CPU) or a comma list")
    ap.add_argument("--jit", action="store_true", help="inference through torch.jit.trace + freeze + "
                    "optimize_for_inference, checked against eager first (training points stay eager)")
    ap.add_argument("--queries", default="", help="--task=squad --mode=infer on the real-length queries of this "
                    "bench/peer/squad_queries.py file: batches of --batch_size consecutive queries, each padded to its longest")
    ap.add_argument("--json", default="")
    a = ap.parse_args(argv)
    queries = None
    if a.queries:
        if a.task != "squad" or a.mode != "infer" or a.jit:
            sys.exit("torch_bench.py: --queries=%s: expected --task=squad --mode=infer without --jit (got --task=%s --mode=%s%s)"
                     % (a.queries, a.task, a.mode, " --jit" if a.jit else ""))
        qT, queries = sq.read_queries(a.queries)
        if a.seq_len != str(qT):
            sys.exit("torch_bench.py: --seq_len=%s: expected the queries' max_seq_length, %d (%s)" % (a.seq_len, qT, a.queries))
    gelu_max_diff = check_gelu()
    ints = lambda s: [int(x) for x in s.split(",") if x]
    points = []
    t_start = time.time()
    dtypes = a.dtype.split(",")
    for d in dtypes:
        if d not in AUTOCAST:
            sys.exit("torch_bench.py: --dtype=%s: expected fp32 or bf16 (a comma list of them)" % d)
    for mode, dtype in ((m, d) for m in a.mode.split(",") for d in dtypes):
        for name in a.model.split(","):
            for T in ints(a.seq_len):
                for B in ints(a.batch_size):
                    for th in ints(a.threads):
                        p = run_point(mode, name, T, B, th, a.warmup, a.steps, a.optimizer, a.min_time, dtype, a.task,
                                      a.jit, queries)
                        points.append(p)
                        print(json.dumps({k: (round(v, 3) if isinstance(v, float) else v)
                                          for k, v in p.items() if k != "step_ms"}), flush=True)
    if a.json:
        out = {"peer": "torch", "points": points,
               "system_info": {"cpu_model": next((l.split(":", 1)[1].strip() for l in open("/proc/cpuinfo")
                                                  if l.startswith("model name")), platform.processor()),
                               "cpu_cores": len(os.sched_getaffinity(0))},
               "build_info": {"torch": torch.__version__, "python": platform.python_version(),
                              "gelu": "F.gelu(approximate='tanh'); max |it - the tanh formula in float64| = %.2g "
                                      "over x in [-12, 12]" % gelu_max_diff,
                              "blas_loaded": blas_library(),
                              "env": {k: os.environ.get(k, "") for k in ("OMP_WAIT_POLICY", "LD_LIBRARY_PATH",
                                                                          "OMP_NUM_THREADS")}},
               "benchmark_result": {"name": "torch_bench", "wall_time": time.time() - t_start}}
        tmp = a.json + ".tmp.%d" % os.getpid()
        with open(tmp, "w") as f:
            json.dump(out, f, indent=2)
        os.replace(tmp, a.json)


if __name__ == "__main__":
    main()
