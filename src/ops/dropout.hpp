// Dropout with a counter-based RNG: element e of stream (seed, step, site) is kept iff
// u < keep_prob, u = (word >> 8)·2⁻²⁴, word = Philox-4x32-10(block e/4)[e%4]; kept values are
// scaled by 1/keep_prob (TF tf.nn.dropout semantics). Masks are a pure function of the stream and
// e, so any thread count and any work split produce the same bits.
#pragma once

#include <cmath>
#include <cstddef>
#include <cstdint>

#include "core/philox.hpp"

#include "ops/parallel.hpp"

namespace bertbench::ops {

struct DropoutStream {
    uint64_t seed = 0, step = 0;
    uint32_t site = 0;
    double keep_prob = 1.0;
    uint32_t threshold() const {  // keep iff (word >> 8) < threshold
        return static_cast<uint32_t>(std::ceil(keep_prob * 16777216.0));
    }
};

// mask[i] = keep(element `first + i`), i in [0, n)
inline void dropout_fill_mask(uint8_t* mask, const DropoutStream& s, size_t first, size_t n) {
    const uint32_t thr = s.threshold();
    size_t i = 0;
    while (i < n) {
        const uint64_t e = first + i;
        const philox::Counter w = philox::block(s.seed, s.step, s.site, e / 4);
        for (size_t j = e % 4; j < 4 && i < n; ++j, ++i) mask[i] = (w[j] >> 8) < thr ? 1 : 0;
    }
}

// mask(n) for elements [0, n), in parallel chunks
inline void dropout_fill_mask_parallel(uint8_t* mask, const DropoutStream& s, size_t n) {
    constexpr size_t kChunk = 16384;  // multiple of 4
    const long long nchunks = static_cast<long long>((n + kChunk - 1) / kChunk);
#pragma omp parallel for schedule(dynamic) if (worth_parallel(n * 4))
    for (long long c = 0; c < nchunks; ++c) {
        const size_t b = static_cast<size_t>(c) * kChunk;
        dropout_fill_mask(mask + b, s, b, n - b < kChunk ? n - b : kChunk);
    }
}

// y(n) = x · mask / keep + residual   (mask null: no dropout; residual null: none). y may alias x.
template <typename T>
void dropout_add_forward(T* y, const T* x, const uint8_t* mask, T keep_prob, const T* residual,
                         size_t n) {
    const T scale = T(1) / keep_prob;
#pragma omp parallel for schedule(static) if (worth_parallel(n))
    for (size_t i = 0; i < n; ++i) {
        T v = mask ? (mask[i] ? x[i] * scale : T(0)) : x[i];
        y[i] = residual ? v + residual[i] : v;
    }
}

// dx(n) = dy · mask / keep (mask null: dx = dy). dx may alias dy.
template <typename T>
void dropout_backward(T* dx, const T* dy, const uint8_t* mask, T keep_prob, size_t n) {
    const T scale = T(1) / keep_prob;
#pragma omp parallel for schedule(static) if (worth_parallel(n))
    for (size_t i = 0; i < n; ++i) dx[i] = mask ? (mask[i] ? dy[i] * scale : T(0)) : dy[i];
}

}  // namespace bertbench::ops
