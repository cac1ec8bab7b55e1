// Softmax cross-entropy over rows of logits. Legend: R rows, V classes.
// forward: loss[r] = logsumexp(logits[r]) − logits[r][label[r]] (loss_from_sum), argmax[r]
// (ties -> lowest index), lse[r] saved.
// backward: dlogits[r] = coef[r] · (softmax(logits[r]) − onehot(label[r])).
// The MLM loss uses coef = w_r/(Σw + 1e-5) (run_pretraining.py); NSP uses coef = 1/B (mean).
// The MLM decoder's logits are large (P·V, 78 MB at 640 × 30,522), so its head uses the fused
// forms below: the bias added in the loss pass (fp32), and in bf16 one backward pass that writes
// the bf16 gradient the decoder GEMMs read and the bias gradient, never the fp32 gradient.
#pragma once

#include <algorithm>
#include <cmath>
#include <cstddef>
#include <cstdint>

#include "ops/bf16.hpp"
#include "ops/bias_grad.hpp"
#include "ops/isa.hpp"
#include "ops/parallel.hpp"
#include "ops/vmath.hpp"

namespace bertbench::ops {

// A softmax cross-entropy from the row's max m, the label's logit and sum = Σ exp(z − m):
// (m − z) + log(sum) in double, the difference exact. Not lse − z: lse = m + log(sum) rounded to T
// at m's size (ulp 4.8e-7 at m = 6) swamped losses below ~1e-5 (found by QA against a float64
// reference); now the sum's rounding alone, as in TF's and torch's fp32 log_softmax. lse itself
// (the backward's) is unchanged.
template <typename T>
inline double loss_from_sum(T m, T z_label, T sum) {
    return (static_cast<double>(m) - static_cast<double>(z_label)) + std::log(static_cast<double>(sum));
}

}  // namespace bertbench::ops

BB_OPS_ISA_BEGIN

// One row of cross_entropy_forward.
template <typename T>
inline void cross_entropy_row(double* loss, int32_t* argmax, T* lse, const T* z, int32_t label,
                              int V) {
    const int best = static_cast<int>(array_argmax(z, static_cast<size_t>(V)));
    const T m = z[best];
    T sum = 0, buf[256];
    for (int c0 = 0; c0 < V; c0 += 256) {  // exp into a small buffer, summed (vectorised)
        const int c1 = c0 + 256 < V ? c0 + 256 : V;
        sum += exp_affine_sum(buf, z + c0, static_cast<size_t>(c1 - c0), T(1), m);
    }
    *lse = m + std::log(sum);
    *argmax = best;
    *loss = loss_from_sum(m, z[label], sum);
}

template <typename T>
void cross_entropy_forward(double* loss, int32_t* argmax, T* lse, const T* logits,
                           const int32_t* labels, int R, int V) {
#pragma omp parallel for schedule(dynamic) if (worth_parallel(static_cast<size_t>(R) * V))
    for (int r = 0; r < R; ++r)
        cross_entropy_row(loss + r, argmax + r, lse + r, logits + static_cast<size_t>(r) * V,
                          labels[r], V);
}

// dlogits(R,V) overwritten; may alias logits.
template <typename T>
void cross_entropy_backward(T* dlogits, const T* logits, const T* lse, const int32_t* labels,
                            const T* coef, int R, int V) {
#pragma omp parallel for schedule(dynamic) if (worth_parallel(static_cast<size_t>(R) * V))
    for (int r = 0; r < R; ++r) {
        const T* z = logits + static_cast<size_t>(r) * V;
        T* d = dlogits + static_cast<size_t>(r) * V;
        const T c = coef[r], l = lse[r];
        exp_affine(d, z, static_cast<size_t>(V), T(1), l);
        for (int j = 0; j < V; ++j) d[j] *= c;
        d[labels[r]] -= c;
    }
}

// cross_entropy_forward with a bias: logits[r] += bias first (in place, so the caller keeps the
// biased logits), in the same pass over each row (the row stays in L1/L2 between the two).
template <typename T>
void cross_entropy_forward_bias(double* loss, int32_t* argmax, T* lse, T* logits, const T* bias,
                                const int32_t* labels, int R, int V) {
#pragma omp parallel for schedule(dynamic) if (worth_parallel(static_cast<size_t>(R) * V))
    for (int r = 0; r < R; ++r) {
        T* z = logits + static_cast<size_t>(r) * V;
        for (int j = 0; j < V; ++j) z[j] += bias[j];
        cross_entropy_row(loss + r, argmax + r, lse + r, z, labels[r], V);
    }
}

// cross_entropy_backward fused with the bias gradient and the bf16 conversion, for the bf16 MLM
// decoder: one streaming pass over logits (R,V), d = coef[r]·(softmax − onehot) computed in fp32
// as cross_entropy_backward computes it, held only in a small buffer, then
//   dlb(R,V) = bf16(d)     db(V) += Σ_rows d
// The rows go in fixed chunks of kCeRowChunk: each chunk sums its rows into its own partial
// (db_part, cross_entropy_db_part_size values), and the partials are added to db in chunk order,
// so db does not depend on the thread count. (Column blocks walking down the rows would need no
// partials, but they read the logits a short segment per row, and measured slower.)
constexpr int kCeRowChunk = 16;
inline size_t cross_entropy_db_part_size(int R, int V) {
    return static_cast<size_t>((R + kCeRowChunk - 1) / kCeRowChunk) * static_cast<size_t>(V);
}

inline void cross_entropy_backward_bf16(bf16* dlb, float* db, float* db_part, const float* logits,
                                        const float* lse, const int32_t* labels,
                                        const float* coef, int R, int V) {
    constexpr int kSeg = 2048;
    const int nchunks = (R + kCeRowChunk - 1) / kCeRowChunk;
    const bool par = worth_parallel(static_cast<size_t>(R) * V);
#pragma omp parallel for schedule(dynamic) if (par)
    for (int ch = 0; ch < nchunks; ++ch) {
        float* part = db_part + static_cast<size_t>(ch) * V;
        std::fill_n(part, V, 0.f);
        alignas(64) float d[kSeg];
        const int r1 = std::min(R, (ch + 1) * kCeRowChunk);
        for (int r = ch * kCeRowChunk; r < r1; ++r) {
            const float c = coef[r], l = lse[r];
            const size_t row = static_cast<size_t>(r) * V;
            for (int s0 = 0; s0 < V; s0 += kSeg) {  // s0 % 8 == 0: exp_affine's lanes as for the row
                const int n = std::min(V - s0, kSeg);
                exp_affine(d, logits + row + s0, static_cast<size_t>(n), 1.f, l);
                for (int j = 0; j < n; ++j) d[j] *= c;
                const int lab = labels[r] - s0;
                if (lab >= 0 && lab < n) d[lab] -= c;
                float* p = part + s0;
                for (int j = 0; j < n; ++j) p[j] += d[j];
                bf16* o = dlb + row + s0;
                for (int j = 0; j < n; ++j) o[j] = to_bf16(d[j]);
            }
        }
    }
    add_partials(db, db_part, static_cast<size_t>(nchunks), static_cast<size_t>(V), par);
}

BB_OPS_ISA_END
