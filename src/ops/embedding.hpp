// BERT embeddings (modeling.py embedding_lookup + embedding_postprocessor), before LayerNorm:
// e(N,H) = word[ids[i]] + pos[i - o[b]] + type[seg[i]]. Backward accumulates (+=) only into the
// rows used (sparse), over column blocks in parallel with tokens in order: deterministic for any
// thread count, and no dense V×H zero-fill.
#pragma once

#include <algorithm>
#include <cstddef>
#include <cstdint>

#include "ops/isa.hpp"
#include "ops/parallel.hpp"

namespace bertbench::ops {

struct EmbeddingIndex {
    const int32_t* ids = nullptr;       // (N)
    const int32_t* segments = nullptr;  // (N)
    const int32_t* offsets = nullptr;   // (B+1)
    int B = 0;
};

}  // namespace bertbench::ops

BB_OPS_ISA_BEGIN

template <typename T>
void embedding_forward(T* e, const T* word, const T* pos, const T* type, const EmbeddingIndex& x,
                       int H) {
#pragma omp parallel for schedule(static) if (worth_parallel(static_cast<size_t>(x.offsets[x.B]) * H))
    for (int b = 0; b < x.B; ++b) {
        for (int i = x.offsets[b]; i < x.offsets[b + 1]; ++i) {
            const T* w = word + static_cast<size_t>(x.ids[i]) * H;
            const T* p = pos + static_cast<size_t>(i - x.offsets[b]) * H;
            const T* t = type + static_cast<size_t>(x.segments[i]) * H;
            T* ei = e + static_cast<size_t>(i) * H;
            for (int c = 0; c < H; ++c) ei[c] = w[c] + p[c] + t[c];
        }
    }
}

// dword, dpos, dtype +=  <-  de(N,H)
template <typename T>
void embedding_backward(T* dword, T* dpos, T* dtype, const T* de, const EmbeddingIndex& x, int H) {
    constexpr int kBlock = 64;
    const int nblocks = (H + kBlock - 1) / kBlock;
#pragma omp parallel for schedule(dynamic) if (worth_parallel(static_cast<size_t>(x.offsets[x.B]) * H))
    for (int blk = 0; blk < nblocks; ++blk) {
        const int c0 = blk * kBlock, c1 = std::min(H, c0 + kBlock);
        for (int b = 0; b < x.B; ++b) {
            for (int i = x.offsets[b]; i < x.offsets[b + 1]; ++i) {
                const T* d = de + static_cast<size_t>(i) * H;
                T* w = dword + static_cast<size_t>(x.ids[i]) * H;
                T* p = dpos + static_cast<size_t>(i - x.offsets[b]) * H;
                T* t = dtype + static_cast<size_t>(x.segments[i]) * H;
                for (int c = c0; c < c1; ++c) {
                    w[c] += d[c];
                    p[c] += d[c];
                    t[c] += d[c];
                }
            }
        }
    }
}

BB_OPS_ISA_END
