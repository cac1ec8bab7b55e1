// LayerNorm over the last dim: y = (x - mean) * rstd * gamma + beta, rstd = 1/sqrt(var + eps),
// biased variance, eps 1e-12 (BERT modeling.py layer_norm). Legend: N rows, C channels.
// dx is overwritten (or += with accumulate; dx may alias dy); dgamma/dbeta accumulate (+=), summed
// over rows in order within column blocks, so results do not depend on the thread count.
// bf16 engines: the forward also writes yb = bf16(y) row by row (the next GEMM's input).
#pragma once

#include <algorithm>
#include <cmath>

#include "ops/bf16.hpp"
#include "ops/isa.hpp"
#include "ops/parallel.hpp"
#include "ops/vmath.hpp"

BB_OPS_ISA_BEGIN

constexpr double kLayerNormEps = 1e-12;  // BERT's

// y(N,C), mean(N), rstd(N)  <-  x(N,C), gamma(C), beta(C); yb(N,C) = bf16(y) too when not null
// (each row converted while in cache: one pass fewer than a separate to_bf16; same bits)
template <typename T>
void layernorm_forward(T* y, T* mean, T* rstd, const T* x, const T* gamma, const T* beta, int N,
                       int C, double eps = kLayerNormEps, bf16* yb = nullptr) {
#pragma omp parallel for schedule(static) if (worth_parallel(static_cast<size_t>(N) * C))
    for (int i = 0; i < N; ++i) {
        const T* xi = x + static_cast<size_t>(i) * C;
        T* yi = y + static_cast<size_t>(i) * C;
        const size_t n = static_cast<size_t>(C);
        const T m = sum_lanes8<T>(n, [&](size_t c) { return xi[c]; }) / T(C);
        const T v = sum_lanes8<T>(n, [&](size_t c) { return (xi[c] - m) * (xi[c] - m); }) / T(C);
        const T r = T(1) / std::sqrt(v + T(eps));
        for (int c = 0; c < C; ++c) yi[c] = (xi[c] - m) * r * gamma[c] + beta[c];
        if (yb) to_bf16_serial(yb + static_cast<size_t>(i) * C, yi, n);
        mean[i] = m;
        rstd[i] = r;
    }
}

// dx(N,C) (= or +=), dgamma(C) +=, dbeta(C) +=  <-  dy(N,C), x(N,C), gamma, mean, rstd
template <typename T>
void layernorm_backward(T* dx, T* dgamma, T* dbeta, const T* dy, const T* x, const T* gamma,
                        const T* mean, const T* rstd, int N, int C, bool accumulate_dx = false) {
    constexpr int kBlock = 64;
    const int nblocks = (C + kBlock - 1) / kBlock;
#pragma omp parallel for schedule(dynamic) if (worth_parallel(static_cast<size_t>(N) * C))
    for (int blk = 0; blk < nblocks; ++blk) {
        const int c0 = blk * kBlock, c1 = std::min(C, c0 + kBlock);
        T ag[kBlock] = {}, ab[kBlock] = {};
        for (int i = 0; i < N; ++i) {
            const T* xi = x + static_cast<size_t>(i) * C;
            const T* dyi = dy + static_cast<size_t>(i) * C;
            const T m = mean[i], r = rstd[i];
            for (int c = c0; c < c1; ++c) {
                ag[c - c0] += dyi[c] * (xi[c] - m) * r;
                ab[c - c0] += dyi[c];
            }
        }
        for (int c = c0; c < c1; ++c) {
            dgamma[c] += ag[c - c0];
            dbeta[c] += ab[c - c0];
        }
    }
#pragma omp parallel for schedule(static) if (worth_parallel(static_cast<size_t>(N) * C))
    for (int i = 0; i < N; ++i) {
        const T* xi = x + static_cast<size_t>(i) * C;
        const T* dyi = dy + static_cast<size_t>(i) * C;
        T* dxi = dx + static_cast<size_t>(i) * C;
        const T m = mean[i], r = rstd[i];
        const size_t n = static_cast<size_t>(C);  // means of dxhat and dxhat·xhat
        const T sum_g = sum_lanes8<T>(n, [&](size_t c) { return dyi[c] * gamma[c]; }) / T(C);
        const T sum_gx =
            sum_lanes8<T>(n, [&](size_t c) { return dyi[c] * gamma[c] * (xi[c] - m) * r; }) / T(C);
        for (int c = 0; c < C; ++c) {
            const T xhat = (xi[c] - m) * r;
            const T d = r * (dyi[c] * gamma[c] - sum_g - xhat * sum_gx);
            dxi[c] = accumulate_dx ? dxi[c] + d : d;
        }
    }
}

BB_OPS_ISA_END
