// A dense layer's bias gradient db(C) += Σ_rows dy(N, C), summed by the pass that produces dy
// (dropout or GELU backward) instead of a pass of its own over dy (bias_backward): dy is read
// once, and a bf16 engine, whose GEMMs read only bf16(dy), need not write fp32 dy at all.
// Rows go in chunks of kBiasRowChunk, shared statically among the threads; each chunk sums its
// rows into its own row of `part`, then the partials are added to db in chunk order. So db does
// not depend on the thread count; it may differ from bias_backward's in the last bits (another
// summation order).
#pragma once

#include <algorithm>
#include <cstddef>

#include "ops/isa.hpp"
#include "ops/parallel.hpp"

namespace bertbench::ops {

constexpr int kBiasRowChunk = 64;

// Where a producer adds the bias gradient of its output, viewed as rows of C values.
template <typename T>
struct BiasGrad {
    T* db = nullptr;    // (C), added to
    T* part = nullptr;  // bias_grad_part_size(N, C) values of scratch
    int C = 0;          // the producer's element count must be a multiple of C
};

inline size_t bias_grad_part_size(int N, int C) {
    return static_cast<size_t>((N + kBiasRowChunk - 1) / kBiasRowChunk) * static_cast<size_t>(C);
}

}  // namespace bertbench::ops

BB_OPS_ISA_BEGIN

// db(C) += Σ_ch part[ch](C), the chunks' partial sums added in chunk order for every column
// (column blocks shared among the threads when par).
template <typename T>
void add_partials(T* db, const T* part, size_t chunks, size_t C, bool par) {
    constexpr size_t kBlock = 256;
    const long long blocks = static_cast<long long>((C + kBlock - 1) / kBlock);
#pragma omp parallel for schedule(static) if (par)
    for (long long blk = 0; blk < blocks; ++blk) {
        const size_t c0 = static_cast<size_t>(blk) * kBlock, c1 = std::min(C, c0 + kBlock);
        for (size_t ch = 0; ch < chunks; ++ch) {
            const T* p = part + ch * C;
            for (size_t c = c0; c < c1; ++c) db[c] += p[c];
        }
    }
}

// Runs values(b, e, tmp) over [0, n) in pieces of at most kSeg values that never cross a row of
// bg.C; it must return a pointer to the piece's values (dy[b, e)), in its own output or in tmp
// (room for kSeg values). Those values are summed into bg as above. `work`: as for_each_chunk.
template <typename T, typename F>
void for_each_row_summing(size_t n, size_t work, const BiasGrad<T>& bg, F&& values) {
    constexpr size_t kSeg = 2048;
    const size_t C = static_cast<size_t>(bg.C), rows = n / C;
    const long long chunks = static_cast<long long>((rows + kBiasRowChunk - 1) / kBiasRowChunk);
    const bool par = worth_parallel(work);
#pragma omp parallel for schedule(static) if (par)
    for (long long ch = 0; ch < chunks; ++ch) {
        T* part = bg.part + static_cast<size_t>(ch) * C;
        std::fill_n(part, C, T(0));
        alignas(64) T tmp[kSeg];
        const size_t r1 = std::min(rows, static_cast<size_t>(ch + 1) * kBiasRowChunk);
        for (size_t r = static_cast<size_t>(ch) * kBiasRowChunk; r < r1; ++r)
            for (size_t s0 = 0; s0 < C; s0 += kSeg) {
                const size_t len = std::min(kSeg, C - s0), b = r * C + s0;
                const T* v = values(b, b + len, tmp);
                T* p = part + s0;
                for (size_t j = 0; j < len; ++j) p[j] += v[j];
            }
    }
    add_partials(bg.db, bg.part, static_cast<size_t>(chunks), C, par);
}

BB_OPS_ISA_END
