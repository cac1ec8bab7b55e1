// Row softmax with a pre-scale, forward and backward. Legend: R rows, C columns.
// forward:  p = softmax(scale · s) per row (max-subtracted; in place allowed)
// backward: ds = p ⊙ (dp − Σ_c dp·p)  (gradient w.r.t. the scaled input; multiply by scale for s)
#pragma once

#include <algorithm>
#include <cmath>
#include <cstddef>

#include "ops/isa.hpp"
#include "ops/parallel.hpp"
#include "ops/vmath.hpp"

BB_OPS_ISA_BEGIN

template <typename T>
inline void softmax_row(T* p, const T* s, int C, T scale) {
    const size_t n = static_cast<size_t>(C);
    const T m = array_max(s, n) * scale;  // = max(s·scale) exactly, scale > 0
    const T inv = T(1) / exp_affine_sum(p, s, n, scale, m);
    for (size_t c = 0; c < n; ++c) p[c] *= inv;
}

template <typename T>
inline void softmax_row_backward(T* ds, const T* dp, const T* p, int C) {
    const size_t n = static_cast<size_t>(C);
    const T dot = sum_lanes8<T>(n, [&](size_t c) { return dp[c] * p[c]; });
    for (size_t c = 0; c < n; ++c) ds[c] = p[c] * (dp[c] - dot);
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

BB_OPS_ISA_END
