// Softmax cross-entropy over rows of logits. Legend: R rows, V classes.
// forward: loss[r] = logsumexp(logits[r]) − logits[r][label[r]] (double), argmax[r] (ties -> lowest
// index), lse[r] saved. backward: dlogits[r] = coef[r] · (softmax(logits[r]) − onehot(label[r])).
// The MLM loss uses coef = w_r/(Σw + 1e-5) (run_pretraining.py); NSP uses coef = 1/B (mean).
#pragma once

#include <cmath>
#include <cstddef>
#include <cstdint>

#include "ops/isa.hpp"
#include "ops/parallel.hpp"
#include "ops/vmath.hpp"

BB_OPS_ISA_BEGIN

template <typename T>
void cross_entropy_forward(double* loss, int32_t* argmax, T* lse, const T* logits,
                           const int32_t* labels, int R, int V) {
#pragma omp parallel for schedule(dynamic) if (worth_parallel(static_cast<size_t>(R) * V))
    for (int r = 0; r < R; ++r) {
        const T* z = logits + static_cast<size_t>(r) * V;
        const int best = static_cast<int>(array_argmax(z, static_cast<size_t>(V)));
        const T m = z[best];
        T sum = 0, buf[256];
        for (int c0 = 0; c0 < V; c0 += 256) {  // exp into a small buffer, summed (vectorised)
            const int c1 = c0 + 256 < V ? c0 + 256 : V;
            sum += exp_affine_sum(buf, z + c0, static_cast<size_t>(c1 - c0), T(1), m);
        }
        const T l = m + std::log(sum);
        lse[r] = l;
        argmax[r] = best;
        loss[r] = static_cast<double>(l) - static_cast<double>(z[labels[r]]);
    }
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

BB_OPS_ISA_END
