// The optimizer's ops on a flat fp32 parameter buffer cut into chunks (optim/chunks.hpp): LAMB
// (MLPerf BERT lamb_optimizer_v1.py; NVIDIA NGC TF's LAMBOptimizer through the adapt flags),
// AdamW (google-research/bert AdamWeightDecayOptimizer) and Keras Adam with decoupled decay
// (MLPerf TF2 / PerfZero AdamWeightDecay) updates in the reference's fp32 order of operations, the per-chunk Σx² of the global norm,
// gradient accumulation and scaling. Every sum over a tensor adds its chunks' partials in chunk
// order, so the results do not depend on the thread count. Formulas: docs/training.md.
#pragma once

#include <cstddef>
#include <cstdint>

namespace bertbench::ops {

// One chunk: [begin, end) (floats) of tensor `tensor`.
struct ParamChunk {
    size_t tensor = 0;
    size_t begin = 0;
    size_t end = 0;
};

// The chunks as the ops read them (in the ops' memory): chunks[0, num_chunks) in tensor order;
// tensor t's are chunks[first_chunk[t], first_chunk[t + 1]); decay[t] != 0 where weight decay
// applies, adapt[t] != 0 where LAMB's layer adaptation (the trust ratio) does. adapt null: the
// same as decay (MLPerf's exclude_from_layer_adaptation defaults to the decay exclusions; NGC
// TF's LAMB adapts every tensor).
struct ChunkTable {
    const ParamChunk* chunks = nullptr;
    size_t num_chunks = 0;
    const size_t* first_chunk = nullptr;  // (num_tensors + 1)
    const uint8_t* decay = nullptr;       // (num_tensors)
    size_t num_tensors = 0;
    const uint8_t* adapt = nullptr;       // (num_tensors) or null
};

// One LAMB step's constants, rounded to fp32 where TF does: bc1 = 1 - beta1_power,
// bc2 = 1 - beta2_power (the bias corrections), wd the weight decay rate.
struct LambConstants {
    float b1, b2, one_minus_b1, one_minus_b2, bc1, bc2, eps, wd;
};
// AdamW's (no bias correction); wd applies only to tensors with decay.
struct AdamConstants {
    float b1, b2, one_minus_b1, one_minus_b2, eps, wd;
};
// Keras Adam's (TF ResourceApplyAdam) for update t: one_minus_b1 = 1 - beta_1 and one_minus_b2
// in fp32, alpha = lr·√(1 - beta_2^t)/(1 - beta_1^t) (the bias-corrected rate, fp32 as TF
// computes it), wd the decoupled weight decay rate (tensors with decay only).
struct KerasAdamConstants {
    float one_minus_b1, one_minus_b2, eps, wd, alpha;
};

// partial[c] = Σ x² over chunk c, in double (fixed order within the chunk).
void chunk_sum_squares(double* partial, const float* x, const ChunkTable& t);
// acc = acc + (g·scale)/n over every chunk.
void chunk_accumulate(float* acc, const float* g, const ChunkTable& t, float scale, float n);
// x(n) *= s; *nonfinite (when not null) = 1 if any x was Inf or NaN before, else 0.
void scale_values(float* x, size_t n, float s, int32_t* nonfinite);
// One LAMB update of w, m, v from g·grad_scale: moments, u = m̂/(√v̂ + eps) (+ wd·w for tensors
// with decay), and for tensors with adaptation the trust ratio r = ‖w‖/‖u‖ (1 where either is 0),
// w -= r·lr·u; without adaptation w -= lr·u. partials: 2·num_chunks doubles of scratch; ratios
// (num_tensors): the step's trust ratios (1 without adaptation).
void lamb_update(float* w, float* m, float* v, const float* g, const ChunkTable& t, float grad_scale,
                 float lr, const LambConstants& k, double* partials, float* ratios);
// One AdamW update: m, v from g·grad_scale, w -= lr·(m/(√v + eps) + wd·w), wd = 0 without decay.
void adamw_update(float* w, float* m, float* v, const float* g, const ChunkTable& t, float grad_scale,
                  float lr, const AdamConstants& k);
// One MLPerf TF2 AdamWeightDecay update: for tensors with decay (and wd != 0) first
// w -= (lr·w)·wd (lr: the schedule's rate, not bias-corrected), then TF's ResourceApplyAdam on
// g·grad_scale: m += (g - m)·(1 - b1), v += (g² - v)·(1 - b2), w -= (m·alpha)/(√v + eps).
void keras_adam_update(float* w, float* m, float* v, const float* g, const ChunkTable& t,
                       float grad_scale, float lr, const KerasAdamConstants& k);

}  // namespace bertbench::ops
