#!/usr/bin/python3
"""Independent float64 numpy reference for bertbench's optimizers (tests/optim/optimizer_test.cpp).

Implements, directly from the MLPerf BERT reference (mlcommons/training retired_benchmarks/bert:
optimization.py create_optimizer + AdamWeightDecayOptimizer, lamb_optimizer_v1.py,
deferred_grad_optimizer.py) and tf.clip_by_global_norm / tf.train.polynomial_decay:
  * mode "train": S micro-steps of clip-by-global-norm, accumulation over steps_per_update,
    LR schedule on the micro-step counter, LAMB or AdamW; writes params, m, v (float64).
  * mode "schedule": lr(s) for the given steps, in float64 and in float32 with TF's op order.
  * mode "eval_interval": the MLPerf eval interval formula evaluated with Python floats.
Usage: optim_reference.py SPEC.json OUT_DIR   (inputs named in the spec are read from its dir)
"""
import json
import math
import os
import re
import sys

import numpy as np

EXCLUDE = ["LayerNorm", "layer_norm", "bias"]


def excluded(name):
    return any(re.search(r, name) is not None for r in EXCLUDE)


def lr_f64(s, spec):
    lr0, T, W, s0, p = (spec["learning_rate"], spec["num_train_steps"], spec["num_warmup_steps"],
                        spec["start_warmup_step"], spec["poly_power"])
    if W and s - s0 < W:
        return lr0 * (s - s0) / W
    return lr0 * (1.0 - min(s, T) / T) ** p


def lr_f32_tf(s, spec):
    f = np.float32
    lr0 = f(spec["learning_rate"])
    T = f(spec["num_train_steps"])
    step = np.minimum(f(s), T)
    frac = step / T
    # TF's float pow is std::pow(float, float) (glibc powf, correctly rounded); numpy's float32
    # power is not always, so round the double result instead.
    pw = f(float(f(1) - frac) ** float(f(spec["poly_power"])))
    lr = (lr0 - f(0)) * pw + f(0)
    W = spec["num_warmup_steps"]
    if W:
        since = np.int32(s - spec["start_warmup_step"])
        warm = lr0 * (f(since) / f(W))
        is_w = f(1) if since < W else f(0)
        lr = (f(1) - is_w) * lr + is_w * warm
    return float(lr)


def clip_by_global_norm(g, clip):
    norm = math.sqrt(float(np.sum(g * g)))  # tf.global_norm
    scale = clip * min(1.0 / norm if norm > 0 else math.inf, 1.0 / clip)
    return norm, g * scale


def train(spec, base, out_dir):
    names = [t["name"] for t in spec["tensors"]]
    sizes = [t["size"] for t in spec["tensors"]]
    total = sum(sizes)
    bounds = np.cumsum([0] + sizes)
    w = np.fromfile(os.path.join(base, spec["params"]), dtype=np.float32).astype(np.float64)
    S = spec["micro_steps"]
    g_all = np.fromfile(os.path.join(base, spec["grads"]), dtype=np.float32).astype(np.float64)
    assert w.size == total and g_all.size == S * total, (w.size, g_all.size, total)
    g_all = g_all.reshape(S, total)
    n = spec["steps_per_update"]
    # The reference turns its Python-float hyperparameters into fp32 tensors; model exactly that
    # rounding (it moves 1 - beta_2 by 1.3e-5 relative) and nothing else: arithmetic is float64.
    f32 = lambda x: float(np.float32(x))
    b1, b2, eps, wd = (f32(spec["beta_1"]), f32(spec["beta_2"]), f32(spec["epsilon"]),
                       f32(spec["weight_decay_rate"]))
    if spec["optimizer"] == "lamb":  # lamb_optimizer_v1.py: 1 - beta1_t on fp32 tensors
        omb1, omb2 = 1 - b1, 1 - b2
    else:  # AdamWeightDecayOptimizer: tf.multiply(1.0 - self.beta_1, grad), Python-float 1 - beta
        omb1, omb2 = f32(1.0 - spec["beta_1"]), f32(1.0 - spec["beta_2"])
    clip = spec["clip_norm"]
    m = np.zeros(total)
    v = np.zeros(total)
    accum = np.zeros(total)
    t = 0  # LAMB beta powers: beta^(t) with t = updates so far including this one
    lrs, norms, ratios = [], [], []
    for s in range(S):
        g = g_all[s]
        after = spec.get("clip_after_accumulation", False) and n > 1
        if not after:  # create_optimizer: tf.clip_by_global_norm(grads, 1.0) on every micro-batch
            norm, g = clip_by_global_norm(g, clip)
            norms.append(norm)
        accum += g / n  # GradientAggregationOptimizer (n == 1: accum == g)
        lr = lr_f64(s, spec)  # global_step before its increment
        lrs.append(lr)
        if s % n != n - 1:
            if after:
                norms.append(0.0)
            continue
        grad = accum
        if after:  # --clip_by_global_norm_after_gradient_allreduce: LAMB clips what it receives
            norm, grad = clip_by_global_norm(grad, clip)
            norms.append(norm)
        accum = np.zeros(total)
        t += 1
        step_ratios = []
        for i, name in enumerate(names):
            sl = slice(bounds[i], bounds[i + 1])
            gi, wi = grad[sl], w[sl]
            if spec["optimizer"] == "lamb":
                m[sl] = b1 * m[sl] + omb1 * gi
                v[sl] = b2 * v[sl] + omb2 * gi * gi
                mh = m[sl] / (1 - b1 ** t)
                vh = v[sl] / (1 - b2 ** t)
                u = mh / (np.sqrt(vh) + eps)
                if not excluded(name):
                    u = u + wd * wi
                r = 1.0
                if not excluded(name):
                    wn, un = np.linalg.norm(wi), np.linalg.norm(u)
                    r = wn / un if (wn > 0 and un > 0) else 1.0
                step_ratios.append(r)
                w[sl] = wi - r * lr * u
            else:  # AdamWeightDecayOptimizer: no bias correction
                m[sl] = b1 * m[sl] + omb1 * gi
                v[sl] = b2 * v[sl] + omb2 * gi * gi
                u = m[sl] / (np.sqrt(v[sl]) + eps)
                if wd and not excluded(name):
                    u = u + wd * wi
                step_ratios.append(1.0)
                w[sl] = wi - lr * u
        ratios = step_ratios
    np.concatenate([w, m, v]).astype(np.float64).tofile(os.path.join(out_dir, "state.f64"))
    with open(os.path.join(out_dir, "result.json"), "w") as f:
        json.dump({"lrs": lrs, "norms": norms, "last_ratios": ratios, "updates": t}, f)


def main():
    spec_path, out_dir = sys.argv[1], sys.argv[2]
    with open(spec_path) as f:
        spec = json.load(f)
    base = os.path.dirname(os.path.abspath(spec_path))
    mode = spec["mode"]
    if mode == "train":
        train(spec, base, out_dir)
    elif mode == "schedule":
        res = {"f64": [lr_f64(s, spec) for s in spec["steps"]],
               "f32": [lr_f32_tf(s, spec) for s in spec["steps"]]}
        with open(os.path.join(out_dir, "result.json"), "w") as f:
            json.dump(res, f)
    elif mode == "eval_interval":
        res = [math.floor(0.05 * (230.23 * b + 3000000) / 25000) * 25000
               for b in spec["batch_sizes"]]
        with open(os.path.join(out_dir, "result.json"), "w") as f:
            json.dump(res, f)
    else:
        raise SystemExit("unknown mode " + mode)


if __name__ == "__main__":
    main()
