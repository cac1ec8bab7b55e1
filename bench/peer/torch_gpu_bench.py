#!/usr/bin/env python3
"""The PyTorch GPU peer of bertbench's CUDA backend: Hugging Face `BertForPreTraining` built from a
BertConfig (never downloaded; attn_implementation "sdpa", hidden_act "gelu_pytorch_tanh" = the
reference's tanh GELU as one fused kernel, the peer's strongest ordinary form (--gelu=new: HF's
spelled-out gelu_new, several elementwise kernels in eager; --gelu=erf), dropout 0.1, layer_norm_eps 1e-12, vocab 30522, fp32 parameters) on one
CUDA device, eager and torch.compile(model) (--variant; default mode unless --compile_mode;
--compile_scope=layers compiles each BertLayer instead, for short compiles).
Batches: synthetic, full length (as torch_bench.py): random ids, token_type 0 then 1 from T/2,
attention_mask all ones (--attention_mask=none: no mask, the same attention), labels -100 except
max_predictions_per_seq distinct positions in 1..T-2 (20 at seq 128, 76 at 512, proportional)
holding random ids, a random next_sentence_label.
  train   = forward under torch.autocast("cuda", bfloat16) (--dtype=bf16; fp32: no autocast and
            TF32 off for matmul and cuDNN unless --tf32) with the model's own loss (MLM + NSP),
            backward, clip_grad_norm_(1.0), torch.optim.AdamW(fused=True; lr 1e-4, eps 1e-6, weight
            decay 0.01 but none on biases/LayerNorm) step, zero_grad(set_to_none=True).
  infer   = forward only (no labels) under torch.inference_mode() and the same autocast.
  latency = infer at batch 1, per query: synchronize, perf_counter, forward, synchronize (inputs
            already on the device); emitted as mode "infer", batch_size 1, "query_latency": true.
Timing: --warmup untimed steps (compile happens in the first: its wall time is compile_s, outside
throughput), then --steps timed steps (--latency_queries for latency), more until --min_time s.
train/infer steps are timed by CUDA events recorded between consecutive steps, no synchronize in
between, so they tile the GPU timeline. sequences/s = batch / median step time; tokens/s = that
* seq_len (all tokens real); spread = step_ms_min/max/stdev; latency_ms_p50/p90/p99 nearest rank.
FLOPs: matmuls only (biases, LayerNorm, softmax, GELU, loss not counted), per sequence of T tokens
  F_fwd = L*(2*T*(4*H^2 + 2*H*I) + 4*T^2*H)     encoder: QKV+output, FFN; QK^T and PV
        + 2*H^2 + 2*2*H                          pooler ([CLS]) + NSP classifier
        + 2*T*H^2 + 2*T*H*V                      MLM transform + decoder (tied to word embeddings)
  i.e. 2*N*T + attention, N = the matmul weights outside the embeddings (decoder included).
  HF computes the MLM head on all T positions (the loss then ignores the -100 ones): F_fwd counts
  what HF computes. flops_per_sequence = 3*F_fwd for train (backward = 2x forward: 6*N*T +
  12*L*T^2*H + ...), F_fwd for infer; flops_per_sequence_masked_head counts the MLM head on the P
  masked positions only (bertbench's / torch_bench.py's count). TFLOP/s = flops_per_sequence *
  sequences/s; mfu = that / nominal dense peak: 989 bf16, 67 fp32, 494.5 with --tf32 (H100/H200
  SXM; --peak_tflops overrides). peak_memory_mb = torch.cuda.max_memory_allocated over the point.
--find_max_batch: instead of the sweep, per train point double the batch from --batch_size until a
step raises torch.OutOfMemoryError; reports the largest that fits (mode "train_max_batch").
Output: one JSON object per point on stdout (torch_bench.py's fields plus GPU ones), all of them in
--json (rewritten after every point); progress on stderr. A failed point logs one line, is kept
with "error", and the exit status is then 1.

Usage: python3 bench/peer/torch_gpu_bench.py [--mode=train,infer,latency] [--model=base,large]
         [--seq_len=128,512] [--batch_size=auto|N,..] [--variant=eager,compile] [--dtype=bf16]
         [--warmup=3] [--steps=10] [--min_time=0] [--latency_queries=100] [--json=PATH]
         [--compile_mode=max-autotune-no-cudagraphs] [--compile_scope=model|layers]
         [--gelu=new|tanh|erf] [--tf32] [--find_max_batch]
Smoke test, no GPU: python3 bench/peer/torch_gpu_bench.py --device=cpu --model=tiny --seq_len=32
         --batch_size=4 --steps=3 --latency_queries=10 --variant=eager --dtype=fp32,bf16"""
import argparse
import contextlib
import gc
import json
import math
import os
import platform
import resource
import statistics
import sys
import time
import warnings

PROG = "torch_gpu_bench"
PRESETS = {  # L, H, A, I (as torch_bench.py)
    "tiny": (2, 128, 2, 512), "mini": (4, 256, 4, 1024), "small": (4, 512, 8, 2048),
    "medium": (8, 512, 8, 2048), "base": (12, 768, 12, 3072), "large": (24, 1024, 16, 4096),
}
VOCAB, MAXPOS, DROP = 30522, 512, 0.1
PEAK_TFLOPS = {"bf16": 989.0, "fp32": 67.0, "tf32": 494.5}
GELU = {"new": "gelu_new", "tanh": "gelu_pytorch_tanh", "erf": "gelu"}
MODES, VARIANTS, DTYPES = ("train", "infer", "latency"), ("eager", "compile"), ("fp32", "bf16")
COMPILE_MODES = ("default", "reduce-overhead", "max-autotune", "max-autotune-no-cudagraphs")


def log(msg):
    print("%s: %s" % (PROG, msg), file=sys.stderr, flush=True)


def die(msg, rc=1):
    log(msg)
    sys.exit(rc)


def default_max_predictions(seq):  # as bench/runner.cpp and torch_bench.py
    return max(1, 20 * seq // 128) if seq <= 128 else max(20, 76 * seq // 512)


def flops_per_sequence(L, H, I, T, head_positions, V=VOCAB):
    """Forward matmul FLOPs of one sequence (see the docstring); head_positions = T for HF."""
    encoder = L * (2.0 * T * (4 * H * H + 2 * H * I) + 4.0 * T * T * H)
    return encoder + 2.0 * H * H + 4.0 * H + 2.0 * head_positions * H * H + 2.0 * head_positions * H * V


def default_batch(mode, T):  # train: 32 at seq 128, 8 at 512 (4096 tokens); infer: twice that
    return 1 if mode == "latency" else max(1, 32 * 128 // T) * (1 if mode == "train" else 2)


def percentile(sorted_ms, q):  # nearest rank, as bench/runner.cpp
    rank = math.ceil(q * len(sorted_ms))
    return sorted_ms[min(len(sorted_ms) - 1, max(rank, 1) - 1)]


def set_tf32(torch, on):
    """TF32 for fp32 matmuls (set_float32_matmul_precision keeps PyTorch >= 2.9's legacy and new TF32
    states consistent: setting only torch.backends.cuda.matmul.fp32_precision can make a later legacy
    read, e.g. inductor's, raise "mix of the legacy and new APIs") and for cuDNN (no convs here)."""
    torch.set_float32_matmul_precision("high" if on else "highest")
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        torch.backends.cudnn.allow_tf32 = on


def build_model(torch, tf, name, dev, gelu):
    L, H, A, I = PRESETS[name]
    kw = dict(vocab_size=VOCAB, hidden_size=H, num_hidden_layers=L, num_attention_heads=A,
              intermediate_size=I, hidden_act=GELU[gelu], hidden_dropout_prob=DROP,
              attention_probs_dropout_prob=DROP, max_position_embeddings=MAXPOS, type_vocab_size=2,
              layer_norm_eps=1e-12, initializer_range=0.02)
    try:
        config = tf.BertConfig(attn_implementation="sdpa", **kw)
    except TypeError:
        config = tf.BertConfig(**kw)
    with contextlib.suppress(Exception):
        config._attn_implementation = "sdpa"
    model = None
    if dev.type == "cuda":  # initialise on the device (fast for large); else on the CPU and copy
        try:
            with dev:
                model = tf.BertForPreTraining(config)
        except Exception as e:  # noqa: BLE001
            log("building on %s failed (%s: %s); building on the CPU" % (dev, type(e).__name__, e))
    if model is None:
        model = tf.BertForPreTraining(config)
    if getattr(model.config, "_attn_implementation", None) != "sdpa" and hasattr(model, "set_attn_implementation"):
        with contextlib.suppress(Exception):
            model.set_attn_implementation("sdpa")
    model = model.to(device=dev, dtype=torch.float32)
    impl = str(getattr(model.config, "_attn_implementation", "unknown"))
    if impl != "sdpa":
        log("warning: attention implementation is %r, not 'sdpa'" % impl)
    return model, impl


def synthetic_batch(torch, B, T, P, dev, labels, mask="ones"):
    gen = torch.Generator().manual_seed(7)
    ids = torch.randint(0, VOCAB, (B, T), generator=gen)
    seg = (torch.arange(T) >= T // 2).long().expand(B, T).contiguous()
    batch = {"input_ids": ids, "token_type_ids": seg}
    if mask == "ones":  # "none": no attention_mask, the same attention for full-length rows
        batch["attention_mask"] = torch.ones(B, T, dtype=torch.long)
    if labels:
        pick = torch.rand(B, T - 2, generator=gen).argsort(dim=1)[:, :P] + 1  # distinct positions in 1..T-2
        lab = torch.full((B, T), -100, dtype=torch.long)
        lab.scatter_(1, pick, torch.randint(0, VOCAB, (B, P), generator=gen))
        batch["labels"] = lab
        batch["next_sentence_label"] = torch.randint(0, 2, (B,), generator=gen)
    return {k: v.to(dev) for k, v in batch.items()}


def make_optimizer(torch, model, dev):
    decay = [p for p in model.parameters() if p.dim() >= 2]
    no_decay = [p for p in model.parameters() if p.dim() < 2]  # biases, LayerNorm
    groups = [{"params": decay, "weight_decay": 0.01}, {"params": no_decay, "weight_decay": 0.0}]
    try:
        return torch.optim.AdamW(groups, lr=1e-4, betas=(0.9, 0.999), eps=1e-6, fused=True), "adamw_fused"
    except (RuntimeError, TypeError, ValueError) as e:
        if dev.type == "cuda":
            raise
        log("fused AdamW unavailable on %s (%s); using the default AdamW" % (dev, e))
        return torch.optim.AdamW(groups, lr=1e-4, betas=(0.9, 0.999), eps=1e-6), "adamw"


class Setup:
    """One model + optimizer + batch + step function for a (mode, size, seq, batch, dtype, variant)."""

    def __init__(self, torch, tf, a, dev, mode, name, T, B, dtype, variant):
        self.torch, self.dev, self.mode = torch, dev, mode
        torch.manual_seed(0)
        self.model, self.attn = build_model(torch, tf, name, dev, a.gelu)
        train = mode == "train"
        self.model.train(train)
        self.fn = self.model
        if variant == "compile":
            if not hasattr(torch, "compile"):
                raise RuntimeError("torch.compile is not available in PyTorch %s" % torch.__version__)
            kw = {} if a.compile_mode == "default" else {"mode": a.compile_mode}
            if a.compile_scope == "model":
                self.fn = torch.compile(self.model, **kw)
            else:  # regional: each BertLayer (one code object, compiled once and reused by every layer)
                for layer in self.model.bert.encoder.layer:
                    layer.compile(**kw)
        self.opt, self.opt_name = make_optimizer(torch, self.model, dev) if train else (None, "none")
        self.params = list(self.model.parameters())
        self.batch = synthetic_batch(torch, B, T, default_max_predictions(T), dev, train, a.attention_mask)
        self.autocast = (lambda: torch.autocast(dev.type, dtype=torch.bfloat16)) if dtype == "bf16" else contextlib.nullcontext

    def step(self):
        if self.mode != "train":
            with self.torch.inference_mode(), self.autocast():
                return self.fn(**self.batch)
        with self.autocast():
            loss = self.fn(**self.batch).loss
        loss.backward()
        self.torch.nn.utils.clip_grad_norm_(self.params, 1.0)
        self.opt.step()
        self.opt.zero_grad(set_to_none=True)


def sync(torch, dev):
    if dev.type == "cuda":
        torch.cuda.synchronize(dev)


def cleanup(torch, dev):
    gc.collect()
    if dev.type == "cuda":
        torch.cuda.empty_cache()
    if hasattr(torch, "_dynamo"):
        with contextlib.suppress(Exception):
            torch._dynamo.reset()  # a fresh cache per point: every model shares forward's code object
            torch._dynamo.utils.counters.clear()


def timed_steps(torch, dev, s, a, n_steps, per_query):
    """Warm-up, then per-step ms. Returns (first_step_s, warmup_s, [ms])."""
    sync(torch, dev)
    t0 = time.perf_counter()
    s.step()
    sync(torch, dev)
    first = time.perf_counter() - t0
    for _ in range(a.warmup - 1):
        s.step()
    sync(torch, dev)
    warm = time.perf_counter() - t0
    ms, start = [], time.perf_counter()
    if per_query or dev.type != "cuda":
        while len(ms) < n_steps or time.perf_counter() - start < a.min_time:
            sync(torch, dev)
            t = time.perf_counter()
            s.step()
            sync(torch, dev)
            ms.append((time.perf_counter() - t) * 1e3)
        return first, warm, ms
    ev = [torch.cuda.Event(enable_timing=True)]
    ev[0].record()
    while len(ev) - 1 < n_steps or time.perf_counter() - start < a.min_time:
        s.step()
        ev.append(torch.cuda.Event(enable_timing=True))
        ev[-1].record()
    sync(torch, dev)
    return first, warm, [ev[i].elapsed_time(ev[i + 1]) for i in range(len(ev) - 1)]


def base_point(torch, a, dev, mode, name, T, B, dtype, variant):
    return {"task": "pretraining", "mode": "infer" if mode == "latency" else mode, "model": name, "dtype": dtype,
            "seq_len": T, "batch_size": B, "threads": torch.get_num_threads(), "steps_per_update": 1,
            "data": "synthetic", "peer": "torch_gpu", "variant": variant,
            "compile_mode": a.compile_mode if variant == "compile" else None,
            "compile_scope": a.compile_scope if variant == "compile" else None, "attention_mask": a.attention_mask,
            "device": torch.cuda.get_device_name(dev) if dev.type == "cuda" else "cpu",
            "tf32": bool(a.tf32 and dtype == "fp32"), "gelu": GELU[a.gelu]}


def run_point(torch, tf, a, dev, mode, name, T, B, dtype, variant):
    L, H, A, I = PRESETS[name]
    P = default_max_predictions(T)
    cleanup(torch, dev)
    if dev.type == "cuda":
        torch.cuda.reset_peak_memory_stats(dev)
    s = Setup(torch, tf, a, dev, mode, name, T, B, dtype, variant)
    n = max(a.steps, a.latency_queries) if mode == "latency" else a.steps
    first, warm, times = timed_steps(torch, dev, s, a, n, mode == "latency")
    p = base_point(torch, a, dev, mode, name, T, B, dtype, variant)
    if variant == "compile":  # one graph and no breaks expected for the whole model
        with contextlib.suppress(Exception):
            c = torch._dynamo.utils.counters
            p.update(dynamo_unique_graphs=int(c["stats"]["unique_graphs"]),
                     dynamo_graph_breaks=int(sum(c["graph_break"].values())))
    srt, med = sorted(times), statistics.median(times)
    mult = 3 if mode == "train" else 1
    f_seq = mult * flops_per_sequence(L, H, I, T, T)
    f_masked = mult * flops_per_sequence(L, H, I, T, P)
    sps = B / (med / 1e3)
    peak = a.peak_tflops or (PEAK_TFLOPS["tf32" if p["tf32"] else dtype] if dev.type == "cuda" else 0.0)
    gflops = f_seq * sps / 1e9
    n_params = sum(x.numel() for x in s.model.parameters())  # the tied decoder weight once
    n_emb = sum(x.numel() for nm, x in s.model.named_parameters() if ".embeddings." in "." + nm)
    p.update({"query_latency": mode == "latency", "warmup_steps": a.warmup, "timed_steps": len(times),
              "min_time_s": a.min_time, "max_predictions_per_seq": P,
              "sequences_per_second": sps, "tokens_per_second": sps * T, "padded_tokens_per_second": sps * T,
              "real_token_fraction": 1.0, "step_ms_median": med, "step_ms_min": srt[0], "step_ms_max": srt[-1],
              "step_ms_stdev": statistics.stdev(times) if len(times) > 1 else 0.0,
              "latency_ms_p50": percentile(srt, 0.5), "latency_ms_p90": percentile(srt, 0.9),
              "latency_ms_p99": percentile(srt, 0.99), "step_ms": times,
              "first_step_s": first, "warmup_s": warm, "compile_s": first if variant == "compile" else 0.0,
              "flops_per_sequence": f_seq, "flops_per_sequence_masked_head": f_masked,
              "gflops": gflops, "tflops": gflops / 1e3, "ceiling_gflops": peak * 1e3,
              "mfu": gflops / (peak * 1e3) if peak else 0.0,
              "optimizer_included": s.opt is not None, "optimizer": s.opt_name, "attn_implementation": s.attn,
              "params": n_params, "params_non_embedding": n_params - n_emb,
              "peak_memory_mb": torch.cuda.max_memory_allocated(dev) / 2**20 if dev.type == "cuda" else 0.0,
              "peak_reserved_mb": torch.cuda.max_memory_reserved(dev) / 2**20 if dev.type == "cuda" else 0.0,
              "peak_rss_mb": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024.0})
    del s
    cleanup(torch, dev)
    return p


def is_oom(torch, e):
    oom = getattr(torch, "OutOfMemoryError", None) or getattr(torch.cuda, "OutOfMemoryError", None)
    return (oom is not None and isinstance(e, oom)) or "out of memory" in str(e).lower()


def find_max_batch(torch, tf, a, dev, name, T, B0, dtype, variant):
    """Double the training batch from B0 until a step runs out of memory."""
    cleanup(torch, dev)
    s = Setup(torch, tf, a, dev, "train", name, T, B0, dtype, variant)
    best, peak, B, failed_at = 0, 0.0, B0, None
    while B <= a.max_batch_cap:
        s.batch = synthetic_batch(torch, B, T, default_max_predictions(T), dev, True, a.attention_mask)
        if dev.type == "cuda":
            torch.cuda.reset_peak_memory_stats(dev)
        try:
            for _ in range(2):  # the second step has the optimizer's state too
                s.step()
            sync(torch, dev)
        except Exception as e:  # noqa: BLE001
            if not is_oom(torch, e):
                raise
            failed_at = B
        if failed_at:  # outside the except block: its traceback (and tensors) are gone
            s.batch = None
            s.opt.zero_grad(set_to_none=True)
            break
        best = B
        peak = torch.cuda.max_memory_allocated(dev) / 2**20 if dev.type == "cuda" else 0.0
        log("  batch %d fits (peak %.0f MiB)" % (B, peak))
        B *= 2
    del s
    cleanup(torch, dev)
    p = base_point(torch, a, dev, "train_max_batch", name, T, best, dtype, variant)
    p.update({"max_batch_size": best, "oom_at_batch_size": failed_at, "peak_memory_mb": peak,
              "max_batch_cap": a.max_batch_cap})
    return p


def parse(argv):
    ap = argparse.ArgumentParser(prog=PROG, description=__doc__.split("\n")[0])
    ap.error = lambda message: die(message, 2)  # one line, exit status 2
    ap.add_argument("--mode", default="train,infer,latency")
    ap.add_argument("--model", default="base,large")
    ap.add_argument("--seq_len", default="128,512")
    ap.add_argument("--batch_size", default="auto", help="auto: train 32 at seq 128 / 8 at 512, infer twice that")
    ap.add_argument("--variant", default="eager,compile")
    ap.add_argument("--compile_mode", default="default", choices=COMPILE_MODES)
    ap.add_argument("--compile_scope", default="model", choices=["model", "layers"],
                    help="layers: compile each BertLayer only (regional; far shorter compiles)")
    ap.add_argument("--attention_mask", default="ones", choices=["ones", "none"])
    ap.add_argument("--dtype", default="bf16", help="bf16 (autocast), fp32 or a comma list")
    ap.add_argument("--tf32", action="store_true", help="allow TF32 matmuls in fp32 points")
    ap.add_argument("--gelu", default="tanh", choices=sorted(GELU))
    ap.add_argument("--warmup", type=int, default=3)
    ap.add_argument("--steps", type=int, default=10)
    ap.add_argument("--min_time", type=float, default=0.0)
    ap.add_argument("--latency_queries", type=int, default=100)
    ap.add_argument("--peak_tflops", type=float, default=0.0, help="MFU ceiling; 0: nominal H100/H200 SXM")
    ap.add_argument("--find_max_batch", action="store_true")
    ap.add_argument("--max_batch_cap", type=int, default=4096)
    ap.add_argument("--device", default="cuda", choices=["cuda", "cpu"])
    ap.add_argument("--json", default="")
    a = ap.parse_args(argv)

    def lst(flag, value, allowed=None, conv=str):
        try:
            out = [conv(x) for x in value.split(",")]
        except ValueError:
            die("--%s=%s: expected a comma list of integers" % (flag, value), 2)
        for v in out:
            if allowed is not None and v not in allowed:
                die("--%s=%s: %r is not one of %s" % (flag, value, v, ",".join(allowed)), 2)
        return out
    a.modes, a.models = lst("mode", a.mode, MODES), lst("model", a.model, tuple(PRESETS))
    a.variants, a.dtypes = lst("variant", a.variant, VARIANTS), lst("dtype", a.dtype, DTYPES)
    a.seqs = lst("seq_len", a.seq_len, conv=int)
    a.batches = None if a.batch_size == "auto" else lst("batch_size", a.batch_size, conv=int)
    for flag, vals, lo, hi in (("seq_len", a.seqs, 8, MAXPOS), ("batch_size", a.batches or [1], 1, 1 << 20),
                               ("warmup", [a.warmup], 1, 10**6), ("steps", [a.steps], 1, 10**7),
                               ("latency_queries", [a.latency_queries], 1, 10**7)):
        for v in vals:
            if not lo <= v <= hi:
                die("--%s=%d: expected %d..%d" % (flag, v, lo, hi), 2)
    if a.min_time < 0:
        die("--min_time=%g: expected >= 0" % a.min_time, 2)
    return a


def main():
    a = parse(sys.argv[1:])
    try:
        import torch
    except ImportError as e:
        die("PyTorch is not installed (import torch: %s)" % e)
    if a.device == "cuda" and not torch.cuda.is_available():
        die("no CUDA device (torch.cuda.is_available() is False)")
    try:
        import transformers as tf
        tf.BertConfig, tf.BertForPreTraining  # noqa: B018
    except (ImportError, AttributeError) as e:
        die("transformers is not installed or has no BertForPreTraining (%s)" % e)
    dev = torch.device(a.device, 0) if a.device == "cuda" else torch.device("cpu")
    if dev.type == "cuda":
        torch.cuda.set_device(dev)
        set_tf32(torch, a.tf32)
    with contextlib.suppress(Exception):
        tf.logging.set_verbosity_error()
    t_start, points, failed = time.time(), [], 0
    combos = [(m, n, T, d, v) for v in a.variants for m in (["train"] if a.find_max_batch else a.modes)
              for n in a.models for T in a.seqs for d in a.dtypes]  # eager first: the quick half
    for mode, name, T, dtype, variant in combos:
        for B in ([1] if mode == "latency" else a.batches or [default_batch(mode, T)]):
            what = "%s %s s%d b%d %s %s" % ("max-batch" if a.find_max_batch else mode, name, T, B, dtype, variant)
            log("%s ..." % what)
            t0 = time.time()
            try:
                if a.find_max_batch:
                    p = find_max_batch(torch, tf, a, dev, name, T, B, dtype, variant)
                else:
                    p = run_point(torch, tf, a, dev, mode, name, T, B, dtype, variant)
            except Exception as e:  # noqa: BLE001 -- one line, the point recorded, the sweep goes on
                failed += 1
                msg = ("%s: %s" % (type(e).__name__, e)).strip().splitlines()[0][:400]
                log("%s failed: %s" % (what, msg))
                p = base_point(torch, a, dev, "train_max_batch" if a.find_max_batch else mode, name, T, B, dtype, variant)
                p["error"] = msg
                cleanup(torch, dev)
            p["point_wall_s"] = time.time() - t0
            points.append(p)
            if "error" not in p:
                log("%s: %s in %.1f s" % (what, "max batch %d" % p["max_batch_size"] if a.find_max_batch else
                                          "%.1f seq/s, %.1f TFLOP/s, %.1f%% MFU, compile %.1f s, peak %.0f MiB"
                                          % (p["sequences_per_second"], p["tflops"], 100 * p["mfu"],
                                             p["compile_s"], p["peak_memory_mb"]), p["point_wall_s"]))
            print(json.dumps({k: (round(v, 4) if isinstance(v, float) else v) for k, v in p.items() if k != "step_ms"}),
                  flush=True)
            write_json(torch, tf, a, dev, points, t_start, failed)  # after every point: a killed run keeps them
    log("%d points, %d failed, %.0f s" % (len(points), failed, time.time() - t_start))
    sys.exit(1 if failed else 0)


def write_json(torch, tf, a, dev, points, t_start, failed):
    if a.json:
        gpu = {}
        if dev.type == "cuda":
            pr = torch.cuda.get_device_properties(dev)
            gpu = {"gpu_name": pr.name, "gpu_memory_mb": pr.total_memory / 2**20, "gpu_sm_count": pr.multi_processor_count,
                   "gpu_capability": "%d.%d" % (pr.major, pr.minor)}
        out = {"peer": "torch_gpu", "points": points,
               "system_info": dict(gpu, cpu_model=next((l.split(":", 1)[1].strip() for l in open("/proc/cpuinfo")
                                                        if l.startswith("model name")), platform.processor()),
                                   cpu_cores=len(os.sched_getaffinity(0))),
               "build_info": {"torch": torch.__version__, "transformers": getattr(tf, "__version__", "?"),
                              "cuda": torch.version.cuda, "cudnn": torch.backends.cudnn.version() if dev.type == "cuda" else None,
                              "python": platform.python_version()},
               "benchmark_result": {"name": PROG, "wall_time": time.time() - t_start, "failed_points": failed,
                                    "argv": sys.argv[1:]}}
        tmp = a.json + ".tmp.%d" % os.getpid()
        with open(tmp, "w") as f:
            json.dump(out, f, indent=2)
        os.replace(tmp, a.json)


if __name__ == "__main__":
    main()
