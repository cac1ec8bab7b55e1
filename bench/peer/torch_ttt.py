#!/usr/bin/python3
"""PyTorch peer of `bertbench pretrain` for time to train (issue 27 §2): the same recipe, the same
TFRecords in the same order, the same evaluation, so that the two runs can be compared by samples
and by time to the same held-out masked-LM accuracy.

    torch_ttt.py --bert_config_file=cfg.json --input_file='rec/train-*.tfrecord' \
        --eval_input_file=rec/eval.tfrecord --train_batch_size=32 --max_seq_length=128 \
        --max_predictions_per_seq=52 --learning_rate=1e-2 --num_warmup_steps=72 --num_train_steps=5800 \
        --eval_every_samples=3200 --eval_batch_size=32 --max_eval_steps=8 --target_mlm_accuracy=0.3 \
        --seed=12345 --threads=2 --dtype=fp32 --output_dir=runs/torch-ttt

What is the same as bertbench (docs/training.md, docs/time-to-train.md):
- model: bench/peer/torch_bench.Bert (BERT with the pretraining heads, F.gelu in one kernel) shaped
  by the bert_config.json, its dropout rates included; fp32, or the forward under
  torch.autocast("cpu", bfloat16) with LayerNorm inputs, the losses and the optimizer in fp32;
- initial weights: --init_checkpoint (a safetensors file with the TensorFlow names, e.g. one written
  by --write_init, which bertbench reads with its own --init_checkpoint), or PyTorch's draw of
  modeling.py's initialisation (truncated normal, std initializer_range) from --seed;
- data order: bertbench's PretrainReader (src/data/pretrain_reader.cpp) ported: files sorted as
  glob(3) sorts them, shuffled per epoch, then --shuffle_buffer records, all draws from the same
  splitmix64-keyed mt19937_64; batches of --train_batch_size consecutive records, running on across
  epochs. The records are decoded before run_start (bertbench decodes during the run);
- optimizer: gradients clipped to global norm 1.0 (tf.clip_by_global_norm), then LAMB (MLPerf's
  lamb_optimizer_v1: bias-corrected, trust ratio per tensor) or AdamW (google-research/bert: no bias
  correction), no decay and no trust ratio for LayerNorm and bias tensors; the learning rate of
  docs/training.md (linear warm-up from 0, then polynomial decay to 0 at --num_train_steps);
- evaluation: every --eval_every_samples training samples, the first --max_eval_steps batches of
  --eval_batch_size records of the eval files in file order; masked-LM accuracy = sum over masked
  positions of weight * (argmax == label) / sum of weights; the run stops at the first evaluation at
  or above --target_mlm_accuracy, and the time to target runs from run_start (after loading) to the
  end of that evaluation, evaluations included (MLPerf's definition).
Not the same: dropout masks (PyTorch's RNG), the batch layout (padded to --max_seq_length with the
additive -10000 mask, as run_pretraining.py does; bertbench packs real tokens).

Output in --output_dir: eval_log.jsonl and train_log.jsonl (bertbench's keys where they exist),
results.json (status, time_to_target_s, samples_to_target, best accuracy, sequences/s, the CPU).
--selftest checks the mt19937_64 port against the C++ standard's check value.
Exit status 0 when the target was reached; 1 when it was not, or on bad input (one line naming it)."""
import argparse
import glob
import json
import os
import platform
import struct
import sys
import time

import numpy as np
import torch
import torch.nn.functional as F

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
sys.path.insert(0, os.path.join(HERE, "..", "..", "tests", "tools"))
import squad_queries as sq  # noqa: E402  TFRecord and tf.train.Example readers
import torch_bench as tb  # noqa: E402  the model
import torch_bert  # noqa: E402  safetensors reader and writer
from optim_reference import excluded  # noqa: E402  no decay, no trust ratio: LayerNorm and bias tensors

M64 = (1 << 64) - 1


def splitmix64(x):
    x = (x + 0x9E3779B97F4A7C15) & M64
    x = ((x ^ (x >> 30)) * 0xBF58476D1CE4E5B9) & M64
    x = ((x ^ (x >> 27)) * 0x94D049BB133111EB) & M64
    return x ^ (x >> 31)


class MT19937_64:
    """std::mt19937_64 (C++11 [rand.predef]) seeded with one value."""

    def __init__(self, seed):
        mt = [seed & M64]
        for i in range(1, 312):
            mt.append((6364136223846793005 * (mt[-1] ^ (mt[-1] >> 62)) + i) & M64)
        self.mt, self.i = mt, 312

    def _twist(self):
        mt = self.mt
        for k in range(312):
            y = (mt[k] & 0xFFFFFFFF80000000) | (mt[(k + 1) % 312] & 0x7FFFFFFF)
            mt[k] = mt[(k + 156) % 312] ^ (y >> 1) ^ (0xB5026F5AA96619E9 if y & 1 else 0)
        self.i = 0

    def __call__(self):
        if self.i >= 312:
            self._twist()
        y = self.mt[self.i]
        self.i += 1
        y ^= (y >> 29) & 0x5555555555555555
        y ^= (y << 17) & 0x71D67FFFEDA60000
        y ^= (y << 37) & 0xFFF7EEE000000000
        return y ^ (y >> 43)


class ReaderRng:
    """pretrain_reader.cpp's Rng: keyed by (seed, epoch, rank, purpose); below(n) by rejection."""

    def __init__(self, seed, epoch, rank, purpose):
        self.gen = MT19937_64(splitmix64(splitmix64(splitmix64(splitmix64(seed) ^ epoch) ^ rank) ^ purpose))

    def below(self, n):
        limit = M64 - M64 % n
        while True:
            x = self.gen()
            if x < limit:
                return x % n


def record_order(counts, seed, shuffle_buffer, epoch):
    """The (file, record) pairs of one epoch in the order bertbench's single-rank training reader
    yields them: files shuffled by Fisher-Yates, then the record shuffle buffer."""
    order = list(range(len(counts)))
    rng = ReaderRng(seed, epoch, 0, 1)
    for i in range(len(order), 1, -1):
        j = rng.below(i)
        order[i - 1], order[j] = order[j], order[i - 1]
    source = ((f, r) for f in order for r in range(counts[f]))
    if shuffle_buffer == 0:
        return list(source)
    buf, out, brng, done = [], [], ReaderRng(seed, epoch, 0, 2), False
    while True:
        while not done and len(buf) < shuffle_buffer:
            nxt = next(source, None)
            if nxt is None:
                done = True
            else:
                buf.append(nxt)
        if not buf:
            return out
        j = brng.below(len(buf))
        buf[j], buf[-1] = buf[-1], buf[j]
        out.append(buf.pop())


def read_records(path, T, P):
    """The pretraining records of one TFRecord file as arrays: ids, mask, seg (N,T) int64; mpos, mids
    (N,P) int64, mw (N,P) float32; nsp (N,). SystemExit naming the file on anything else."""
    cols = {k: [] for k in ("input_ids", "input_mask", "segment_ids", "masked_lm_positions", "masked_lm_ids",
                            "masked_lm_weights", "next_sentence_labels")}
    want = {"input_ids": T, "input_mask": T, "segment_ids": T, "masked_lm_positions": P, "masked_lm_ids": P,
            "masked_lm_weights": P, "next_sentence_labels": 1}
    try:
        for n, payload in enumerate(sq.tfrecords(path)):
            f = sq.example_features(payload)
            for k, size in want.items():
                if len(f.get(k, ())) != size:
                    raise sq.BadFile("record %d: feature %s: expected %d values, got %d (--max_seq_length=%d, "
                                     "--max_predictions_per_seq=%d)" % (n, k, size, len(f.get(k, ())), T, P))
                cols[k].append(f[k])
    except (sq.BadFile, OSError) as e:
        sys.exit("torch_ttt.py: %s: %s" % (path, e))
    if not cols["input_ids"]:
        sys.exit("torch_ttt.py: %s: expected pretraining records, got none" % path)
    arr = {k: np.asarray(v, dtype=np.float32 if k == "masked_lm_weights" else np.int64) for k, v in cols.items()}
    return (arr["input_ids"], arr["input_mask"], arr["segment_ids"], arr["masked_lm_positions"],
            arr["masked_lm_ids"], arr["masked_lm_weights"], arr["next_sentence_labels"][:, 0])


def to_batch(recs, T):
    """Torch tensors of a list of record tuples, masked positions as flat indices into B*T."""
    ids, mask, seg, mpos, mids, mw, nsp = (torch.from_numpy(np.stack(c)) for c in zip(*recs))
    B = ids.shape[0]
    flat = (mpos + torch.arange(B).unsqueeze(1) * T).reshape(-1)
    return ids, seg, mask, flat, mids.reshape(-1), mw.reshape(-1), nsp


def tf_map(model):
    """[(TensorFlow name, parameter, transposed)]: kernels are [in, out] in TF, nn.Linear's [out, in]."""
    m = [("bert/embeddings/word_embeddings", model.word.weight, False),
         ("bert/embeddings/token_type_embeddings", model.tok_type.weight, False),
         ("bert/embeddings/position_embeddings", model.pos.weight, False)]

    def dense(name, lin):
        return [(name + "/kernel", lin.weight, True), (name + "/bias", lin.bias, False)]

    def ln(name, mod):
        return [(name + "/gamma", mod.weight, False), (name + "/beta", mod.bias, False)]

    m += ln("bert/embeddings/LayerNorm", model.ln)
    for i, l in enumerate(model.layers):
        p = "bert/encoder/layer_%d/" % i
        m += dense(p + "attention/self/query", l.q) + dense(p + "attention/self/key", l.k)
        m += dense(p + "attention/self/value", l.v) + dense(p + "attention/output/dense", l.o)
        m += ln(p + "attention/output/LayerNorm", l.ln1) + dense(p + "intermediate/dense", l.i)
        m += dense(p + "output/dense", l.out) + ln(p + "output/LayerNorm", l.ln2)
    m += dense("bert/pooler/dense", model.pool) + dense("cls/predictions/transform/dense", model.t)
    m += ln("cls/predictions/transform/LayerNorm", model.tln)
    m += [("cls/predictions/output_bias", model.out_bias, False),
          ("cls/seq_relationship/output_weights", model.nsp.weight, False),
          ("cls/seq_relationship/output_bias", model.nsp.bias, False)]
    return m


class Optimizer:
    """LAMB or AdamW as docs/training.md states them, after clipping to global norm 1.0."""

    def __init__(self, named, kind, b1, b2, eps, wd):
        self.named, self.kind = named, kind
        self.b1, self.b2, self.eps, self.wd = np.float32(b1), np.float32(b2), eps, wd
        self.m = [torch.zeros_like(p) for _, p in named]
        self.v = [torch.zeros_like(p) for _, p in named]
        self.b1p = self.b2p = np.float32(1.0)

    @torch.no_grad()
    def step(self, lr):
        grads = [p.grad for _, p in self.named]
        norm = float(torch.sqrt(sum((g.double() ** 2).sum() for g in grads)))
        if not np.isfinite(norm):
            raise FloatingPointError("gradient norm %r" % norm)
        scale = min(1.0 / norm, 1.0) if norm > 0 else 1.0
        self.b1p, self.b2p = self.b1p * self.b1, self.b2p * self.b2
        c1, c2 = float(1 - self.b1), float(1 - self.b2)
        for (name, p), g, m, v in zip(self.named, grads, self.m, self.v):
            g = g * scale
            m.mul_(float(self.b1)).add_(g, alpha=c1)
            v.mul_(float(self.b2)).addcmul_(g, g, value=c2)
            if self.kind == "lamb":
                u = (m / float(1 - self.b1p)) / ((v / float(1 - self.b2p)).sqrt() + self.eps)
            else:
                u = m / (v.sqrt() + self.eps)
            if not excluded(name) and self.wd:
                u.add_(p, alpha=self.wd)
            ratio = 1.0
            if self.kind == "lamb" and not excluded(name):
                wn, un = float(p.norm()), float(u.norm())
                ratio = wn / un if wn > 0 and un > 0 else 1.0
            p.sub_(u, alpha=ratio * lr)
        return norm


def learning_rate(s, a):
    if a.num_warmup_steps > 0 and s - a.start_warmup_step < a.num_warmup_steps:
        return a.learning_rate * (s - a.start_warmup_step) / a.num_warmup_steps
    return a.learning_rate * (1.0 - min(s, a.num_train_steps) / a.num_train_steps) ** a.poly_power


@torch.no_grad()
def evaluate(model, eval_batches, autocast):
    model.eval()
    correct = weight = loss = nsp_correct = examples = 0.0
    for ids, seg, mask, mpos, mids, mw, nsp in eval_batches:
        with torch.autocast("cpu", dtype=torch.bfloat16, enabled=autocast):
            logits, nsp_logits = model.logits(ids, seg, mask, mpos)
        logits = logits.float()
        ce = F.cross_entropy(logits, mids, reduction="none")
        correct += float(((logits.argmax(-1) == mids).float() * mw).sum())
        weight += float(mw.sum())
        loss += float((ce * mw).sum())
        nsp_correct += float((nsp_logits.float().argmax(-1) == nsp).sum())
        examples += ids.shape[0]
    model.train()
    return {"masked_lm_accuracy": correct / weight if weight else 0.0,
            "masked_lm_loss": loss / weight if weight else 0.0,
            "next_sentence_accuracy": nsp_correct / examples, "examples": int(examples)}


def cpu_name():
    try:
        for line in open("/proc/cpuinfo"):
            if line.startswith("model name"):
                return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor()


def parse_args(argv):
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    a = p.add_argument
    a("--bert_config_file"), a("--input_file"), a("--eval_input_file"), a("--output_dir")
    a("--init_checkpoint", default="", help="safetensors with TF names (e.g. from --write_init)")
    a("--write_init", default="", help="write the initial weights here (safetensors, TF names) and exit")
    a("--train_batch_size", type=int, default=32), a("--max_seq_length", type=int, default=128)
    a("--max_predictions_per_seq", type=int, default=20)
    a("--optimizer", choices=("lamb", "adamw"), default="lamb")
    a("--learning_rate", type=float, default=1e-2), a("--num_warmup_steps", type=int, default=0)
    a("--start_warmup_step", type=int, default=0), a("--num_train_steps", type=int, default=1000)
    a("--poly_power", type=float, default=1.0), a("--stop_steps", type=int, default=0)
    a("--lamb_beta_1", type=float, default=0.9), a("--lamb_beta_2", type=float, default=0.999)
    a("--lamb_weight_decay_rate", type=float, default=0.01), a("--log_epsilon", type=float, default=-6)
    a("--eval_every_samples", type=int, default=3200), a("--eval_batch_size", type=int, default=32)
    a("--max_eval_steps", type=int, default=8), a("--target_mlm_accuracy", type=float, default=0.72)
    a("--seed", type=int, default=12345), a("--shuffle_buffer", type=int, default=100)
    a("--threads", type=int, default=2), a("--dtype", choices=("fp32", "bf16"), default="fp32")
    a("--max_seconds", type=float, default=0, help="stop after this many seconds after run_start (0: no limit)")
    a("--log_every", type=int, default=10, help="train_log.jsonl every N steps")
    a("--selftest", action="store_true")
    args = p.parse_args(argv)
    if not args.selftest:
        for need in ("bert_config_file", "output_dir") + (() if args.write_init else ("input_file", "eval_input_file")):
            if not getattr(args, need):
                p.error("--%s: expected a value, got none" % need)
    return args


def build_model(args):
    try:
        cfg = json.load(open(args.bert_config_file))
        shape = [cfg[k] for k in ("num_hidden_layers", "hidden_size", "num_attention_heads", "intermediate_size")]
        extra = dict(vocab=cfg["vocab_size"], maxpos=cfg["max_position_embeddings"], types=cfg["type_vocab_size"],
                     drop=cfg["hidden_dropout_prob"], attn_drop=cfg["attention_probs_dropout_prob"],
                     std=cfg.get("initializer_range", 0.02))
    except (OSError, ValueError, KeyError) as e:
        sys.exit("torch_ttt.py: --bert_config_file=%s: expected a bert_config.json, got %s" % (args.bert_config_file, e))
    if cfg.get("hidden_act", "gelu") not in ("gelu", "gelu_new"):
        sys.exit("torch_ttt.py: --bert_config_file=%s: hidden_act: expected gelu (tanh form), got %r"
                 % (args.bert_config_file, cfg["hidden_act"]))
    torch.manual_seed(args.seed)
    model = tb.Bert(*shape, **extra)
    names = tf_map(model)
    if args.init_checkpoint:
        tensors, _ = torch_bert.read_safetensors(args.init_checkpoint)
        with torch.no_grad():
            for name, p, tr in names:
                if name not in tensors:
                    sys.exit("torch_ttt.py: --init_checkpoint=%s: expected tensor %s, got none" % (args.init_checkpoint, name))
                t = torch.from_numpy(tensors[name].astype(np.float32))
                t = t.t() if tr else t
                if tuple(t.shape) != tuple(p.shape):
                    sys.exit("torch_ttt.py: --init_checkpoint=%s: %s: expected shape %s, got %s"
                             % (args.init_checkpoint, name, list(p.shape), list(t.shape)))
                p.copy_(t)
    return cfg, model, names


def write_init(path, cfg, names):
    tensors = {n: (p.detach().t() if tr else p.detach()).contiguous().numpy() for n, p, tr in names}
    tmp = path + ".tmp"
    torch_bert.write_safetensors(tmp, tensors, {"bert_config": json.dumps(cfg)})
    os.replace(tmp, path)


def main(argv):
    args = parse_args(argv)
    if args.selftest:
        g = MT19937_64(5489)
        for _ in range(9999):
            g()
        got = g()
        if got != 9981545732273789042:
            sys.exit("torch_ttt.py: selftest: mt19937_64's 10000th value: expected 9981545732273789042, got %d" % got)
        print("torch_ttt.py selftest: ok")
        return 0
    torch.set_num_threads(args.threads)
    t_init = time.time()
    cfg, model, names = build_model(args)
    if args.write_init:
        write_init(args.write_init, cfg, names)
        print("torch_ttt.py: wrote %s" % args.write_init)
        return 0
    T, P, B = args.max_seq_length, args.max_predictions_per_seq, args.train_batch_size
    files = sorted(f for pat in args.input_file.split(",") for f in glob.glob(pat))
    if not files:
        sys.exit("torch_ttt.py: --input_file=%s: matches no file" % args.input_file)
    eval_files = sorted(f for pat in args.eval_input_file.split(",") for f in glob.glob(pat))
    if not eval_files:
        sys.exit("torch_ttt.py: --eval_input_file=%s: matches no file" % args.eval_input_file)
    print("torch_ttt.py: reading %d training files ..." % len(files), flush=True)
    train = [list(zip(*read_records(f, T, P))) for f in files]
    eval_recs = [r for f in eval_files for r in zip(*read_records(f, T, P))]
    eval_recs = eval_recs[:args.eval_batch_size * args.max_eval_steps]
    eval_batches = [to_batch(eval_recs[i:i + args.eval_batch_size], T)
                    for i in range(0, len(eval_recs), args.eval_batch_size)]
    counts = [len(x) for x in train]
    os.makedirs(args.output_dir, exist_ok=True)
    opt = Optimizer([(n, p) for n, p, _ in names], args.optimizer, args.lamb_beta_1, args.lamb_beta_2,
                    10.0 ** args.log_epsilon, args.lamb_weight_decay_rate)
    autocast = args.dtype == "bf16"
    stop = min(args.num_train_steps, args.stop_steps) if args.stop_steps else args.num_train_steps
    epoch, order, pos = 0, record_order(counts, args.seed, args.shuffle_buffer, 0), 0
    init_s = time.time() - t_init
    tlog = open(os.path.join(args.output_dir, "train_log.jsonl"), "w")
    elog = open(os.path.join(args.output_dir, "eval_log.jsonl"), "w")
    best, reached, next_eval, step, train_s = None, None, args.eval_every_samples, 0, 0.0
    model.train()
    run_start = time.time()
    while step < stop:
        recs = []
        while len(recs) < B:
            if pos == len(order):
                epoch, pos = epoch + 1, 0
                order = record_order(counts, args.seed, args.shuffle_buffer, epoch)
            f, r = order[pos]
            recs.append(train[f][r])
            pos += 1
        t0 = time.time()
        ids, seg, mask, mpos, mids, mw, nsp = to_batch(recs, T)
        for p in model.parameters():
            p.grad = None
        with torch.autocast("cpu", dtype=torch.bfloat16, enabled=autocast):
            logits, nsp_logits = model.logits(ids, seg, mask, mpos)
        ce = F.cross_entropy(logits.float(), mids, reduction="none")
        mlm = (ce * mw).sum() / (mw.sum() + 1e-5)
        nspl = F.cross_entropy(nsp_logits.float(), nsp)
        (mlm + nspl).backward()
        lr = learning_rate(step, args)
        norm = opt.step(lr)
        step += 1
        train_s += time.time() - t0
        samples = step * B
        if step % args.log_every == 0 or step == 1:
            tlog.write(json.dumps({"step": step, "samples": samples, "loss": float(mlm + nspl), "mlm_loss": float(mlm),
                                   "nsp_loss": float(nspl), "learning_rate": lr, "grad_norm": norm}) + "\n")
        out_of_time = args.max_seconds and time.time() - run_start >= args.max_seconds
        if samples >= next_eval or step == stop or out_of_time:
            e0 = time.time()
            ev = evaluate(model, eval_batches, autocast)
            ev.update(step=step, samples=samples, elapsed_s=time.time() - run_start, eval_seconds=time.time() - e0)
            elog.write(json.dumps(ev) + "\n")
            elog.flush()
            print("step %d samples %d: masked-LM accuracy %.4f loss %.3f (%.0f s, %.1f seq/s training)"
                  % (step, samples, ev["masked_lm_accuracy"], ev["masked_lm_loss"], ev["elapsed_s"],
                     samples / train_s), flush=True)
            if best is None or ev["masked_lm_accuracy"] > best["masked_lm_accuracy"]:
                best = ev
            while next_eval <= samples:
                next_eval += args.eval_every_samples
            if ev["masked_lm_accuracy"] >= args.target_mlm_accuracy:
                reached = ev
                break
        if out_of_time:
            break
    wall = time.time() - run_start
    res = {"status": "success" if reached else "target not reached", "target_mlm_accuracy": args.target_mlm_accuracy,
           "target_reached": bool(reached), "time_to_target_s": reached["elapsed_s"] if reached else None,
           "samples_to_target": reached["samples"] if reached else None,
           "best_masked_lm_accuracy": best["masked_lm_accuracy"] if best else None,
           "best_masked_lm_accuracy_samples": best["samples"] if best else None,
           "best_masked_lm_accuracy_time_s": best["elapsed_s"] if best else None,
           "samples": step * B, "steps": step, "wall_time_s": wall, "initialization_s": init_s,
           "train_sequences_per_second": step * B / train_s if train_s else None,
           "dtype": args.dtype, "threads": args.threads, "torch": torch.__version__, "cpu": cpu_name(),
           "flags": vars(args)}
    tmp = os.path.join(args.output_dir, "results.json.tmp")
    with open(tmp, "w") as f:
        json.dump(res, f, indent=1)
    os.replace(tmp, os.path.join(args.output_dir, "results.json"))
    print("torch_ttt.py: %s; best masked-LM accuracy %.4f at %d samples; %d samples in %.0f s"
          % (res["status"], res["best_masked_lm_accuracy"] or 0, res["best_masked_lm_accuracy_samples"] or 0,
             step * B, wall))
    return 0 if reached else 1


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
