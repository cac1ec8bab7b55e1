// Row softmax with a pre-scale, forward and backward. Legend: R rows, C columns.
// forward:  p = softmax(scale · s) per row (max-subtracted; in place allowed)
// backward: ds = p ⊙ (dp − Σ_c dp·p)  (gradient w.r.t. the scaled input; multiply by scale for s)
#pragma once

#include <algorithm>
#include <cmath>
#include <cstddef>

#include "ops/parallel.hpp"
#include "ops/vmath.hpp"

namespace bertbench::ops {

template <typename T>
inline void softmax_row(T* p, const T* s, int C, T scale) {
    T m = s[0] * scale;
    for (int c = 1; c < C; ++c) m = std::max(m, s[c] * scale);
    exp_affine(p, s, static_cast<size_t>(C), scale, m);  // vectorised
    T sum = 0;
    for (int c = 0; c < C; ++c) sum += p[c];
    const T inv = T(1) / sum;
    for (int c = 0; c < C; ++c) p[c] *= inv;
}

template <typename T>
inline void softmax_row_backward(T* ds, const T* dp, const T* p, int C) {
    T dot = 0;
    for (int c = 0; c < C; ++c) dot += dp[c] * p[c];
    for (int c = 0; c < C; ++c) ds[c] = p[c] * (dp[c] - dot);
}

template <typename T>
void softmax_forward(T* p, const T* s, int R, int C, T scale = T(1)) {
#pragma omp parallel for schedule(static) if (worth_parallel(static_cast<size_t>(R) * C))
    for (int r = 0; r < R; ++r)
        softmax_row(p + static_cast<size_t>(r) * C, s + static_cast<size_t>(r) * C, C, scale);
}

template <typename T>
void softmax_backward(T* ds, const T* dp, const T* p, int R, int C) {
#pragma omp parallel for schedule(static) if (worth_parallel(static_cast<size_t>(R) * C))
    for (int r = 0; r < R; ++r)
        softmax_row_backward(ds + static_cast<size_t>(r) * C, dp + static_cast<size_t>(r) * C,
                             p + static_cast<size_t>(r) * C, C);
}

}  // namespace bertbench::ops
