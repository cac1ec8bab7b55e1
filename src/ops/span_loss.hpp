// The SQuAD span head's loss (run_squad.py compute_loss): a softmax cross-entropy over each
// sequence's rows of one logit column (start or end). Legend: B sequences, sequence b = rows
// [o[b], o[b+1]) of the logits z (z_stride apart), label[b] a row within it.
// forward:  loss[b] = logsumexp(z_b) − z_b[label[b]] (loss_from_sum: double; the sums in T)
// backward: dz_b = coef · (softmax(z_b) − onehot(label[b])), written dz_stride apart (dz may be null).
// A label outside the sequence (run_squad.py writes such positions for an answer of whitespace
// alone) has tf.one_hot's all-zero row: loss[b] = 0 and dz_b = 0, as the reference trains on it.
// Serial in b and in each row's order: the same bits for any thread count.
#pragma once

#include <algorithm>
#include <cmath>
#include <cstddef>
#include <cstdint>

#include "ops/cross_entropy.hpp"  // loss_from_sum

namespace bertbench::ops {

template <typename T>
void segment_cross_entropy(double* loss, T* dz, int dz_stride, const T* z, int z_stride, const int32_t* offsets,
                           const int32_t* labels, int B, T coef) {
    for (int b = 0; b < B; ++b) {
        const int o = offsets[b], n = offsets[b + 1] - o;
        const auto at = [&](int i) { return z[static_cast<size_t>(o + i) * z_stride]; };
        T* d = dz ? dz + static_cast<size_t>(o) * dz_stride : nullptr;
        if (labels[b] < 0 || labels[b] >= n) {
            loss[b] = 0;
            for (int i = 0; d && i < n; ++i) d[static_cast<size_t>(i) * dz_stride] = 0;
            continue;
        }
        T mx = at(0);
        for (int i = 1; i < n; ++i) mx = std::max(mx, at(i));
        T sum = 0;
        for (int i = 0; i < n; ++i) sum += std::exp(at(i) - mx);
        const T lse = mx + std::log(sum);
        loss[b] = loss_from_sum(mx, at(labels[b]), sum);
        if (!dz) continue;
        for (int i = 0; i < n; ++i) d[static_cast<size_t>(i) * dz_stride] = coef * std::exp(at(i) - lse);
        d[static_cast<size_t>(labels[b]) * dz_stride] -= coef;
    }
}

// dst(i) = src(i · stride), i < n
template <typename T>
void strided_copy(T* dst, const T* src, size_t n, int stride) {
    for (size_t i = 0; i < n; ++i) dst[i] = src[i * static_cast<size_t>(stride)];
}

}  // namespace bertbench::ops
