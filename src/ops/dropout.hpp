// Dropout with a counter-based RNG: element e of stream (seed, step, site) is kept iff
// u < keep_prob, u = (word >> 8)·2⁻²⁴, word = Philox-4x32-10(block e/4)[e%4]; kept values are
// scaled by 1/keep_prob (TF tf.nn.dropout semantics). Masks are a pure function of the stream and
// e, so any thread count and any work split produce the same bits.
// bf16 engines: forward and backward can also write the bf16 copy of their output that the next
// GEMM reads, chunk by chunk in the same pass (same bits as a separate to_bf16).
#pragma once

#include <algorithm>
#include <cmath>
#include <cstddef>
#include <cstdint>
#include <type_traits>

#include "core/philox.hpp"

#ifdef __AVX2__
#include <immintrin.h>
#endif

#include "ops/bf16.hpp"
#include "ops/bias_grad.hpp"
#include "ops/isa.hpp"
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

}  // namespace bertbench::ops

BB_OPS_ISA_BEGIN

#ifdef __AVX2__
// Philox-4x32-10 on 8 consecutive blocks blk .. blk+7 at once (AVX2; lane i = block blk+i), then
// mask[4i + j] = keep(word j of block blk+i) for the 32 elements 4·blk .. 4·blk+31. Same bits as
// philox::block (test DropoutSimd.*). Requires uint32(blk) + 7 not to wrap (the caller checks).
inline void dropout_mask_8blocks(uint8_t* mask, const DropoutStream& s, uint64_t blk, uint32_t thr) {
    const __m256i m0 = _mm256_set1_epi64x(0xD2511F53u), m1 = _mm256_set1_epi64x(0xCD9E8D57u);
    __m256i c0 = _mm256_add_epi32(_mm256_set1_epi32(static_cast<int>(uint32_t(blk))),
                                  _mm256_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7));
    __m256i c1 = _mm256_set1_epi32(static_cast<int>(uint32_t(blk >> 32)));
    __m256i c2 = _mm256_set1_epi32(static_cast<int>(s.site));
    __m256i c3 = _mm256_set1_epi32(static_cast<int>(uint32_t(s.step)));
    uint32_t k0 = uint32_t(s.seed), k1 = uint32_t(s.seed >> 32) ^ uint32_t(s.step >> 32);
    // (hi, lo) 32-bit halves of the 8 products m · x
    const auto mulhilo = [](__m256i x, __m256i m, __m256i& hi, __m256i& lo) {
        const __m256i pe = _mm256_mul_epu32(x, m);                         // even lanes, 64-bit
        const __m256i po = _mm256_mul_epu32(_mm256_srli_epi64(x, 32), m);  // odd lanes, 64-bit
        lo = _mm256_blend_epi32(pe, _mm256_slli_epi64(po, 32), 0xAA);
        hi = _mm256_blend_epi32(_mm256_srli_epi64(pe, 32), po, 0xAA);
    };
    for (int round = 0; round < 10; ++round) {
        __m256i hi0, lo0, hi1, lo1;
        mulhilo(c0, m0, hi0, lo0);
        mulhilo(c2, m1, hi1, lo1);
        const __m256i vk0 = _mm256_set1_epi32(static_cast<int>(k0));
        const __m256i vk1 = _mm256_set1_epi32(static_cast<int>(k1));
        c0 = _mm256_xor_si256(_mm256_xor_si256(hi1, c1), vk0);
        c1 = lo1;
        c2 = _mm256_xor_si256(_mm256_xor_si256(hi0, c3), vk1);
        c3 = lo0;
        k0 += 0x9E3779B9u;
        k1 += 0xBB67AE85u;
    }
    // keep iff (w >> 8) < thr; both sides < 2^25, so the signed compare is exact. k_j lane i =
    // block blk+i word j (-1 or 0); transpose to bytes in element order 4i + j and pack.
    const __m256i t = _mm256_set1_epi32(static_cast<int>(thr));
    const __m256i k0v = _mm256_cmpgt_epi32(t, _mm256_srli_epi32(c0, 8));
    const __m256i k1v = _mm256_cmpgt_epi32(t, _mm256_srli_epi32(c1, 8));
    const __m256i k2v = _mm256_cmpgt_epi32(t, _mm256_srli_epi32(c2, 8));
    const __m256i k3v = _mm256_cmpgt_epi32(t, _mm256_srli_epi32(c3, 8));
    const __m256i a = _mm256_unpacklo_epi32(k0v, k1v), b = _mm256_unpacklo_epi32(k2v, k3v);
    const __m256i c = _mm256_unpackhi_epi32(k0v, k1v), d = _mm256_unpackhi_epi32(k2v, k3v);
    // per 128-bit half: blocks (0,4), (1,5), (2,6), (3,7), each as 4 words
    const __m256i b04 = _mm256_unpacklo_epi64(a, b), b15 = _mm256_unpackhi_epi64(a, b);
    const __m256i b26 = _mm256_unpacklo_epi64(c, d), b37 = _mm256_unpackhi_epi64(c, d);
    const __m256i bytes = _mm256_packs_epi16(_mm256_packs_epi32(b04, b15), _mm256_packs_epi32(b26, b37));
    _mm256_storeu_si256(reinterpret_cast<__m256i*>(mask), _mm256_and_si256(bytes, _mm256_set1_epi8(1)));
}
#endif

#ifdef BB_OPS_AVX512
// The same on 16 blocks blk .. blk+15 (64 elements), for the AVX-512 copy of the kernels: the
// keep bits of word j are a 16-bit mask over blocks, spread to bit 4i + j of a 64-bit mask by
// pdep, which writes the bytes (same bits as dropout_mask_8blocks; test KernelsIsa.Dropout*).
// Requires uint32(blk) + 15 not to wrap.
inline void dropout_mask_16blocks(uint8_t* mask, const DropoutStream& s, uint64_t blk, uint32_t thr) {
    const __m512i m0 = _mm512_set1_epi64(0xD2511F53u), m1 = _mm512_set1_epi64(0xCD9E8D57u);
    __m512i c0 = _mm512_add_epi32(_mm512_set1_epi32(static_cast<int>(uint32_t(blk))),
                                  _mm512_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15));
    __m512i c1 = _mm512_set1_epi32(static_cast<int>(uint32_t(blk >> 32)));
    __m512i c2 = _mm512_set1_epi32(static_cast<int>(s.site));
    __m512i c3 = _mm512_set1_epi32(static_cast<int>(uint32_t(s.step)));
    uint32_t k0 = uint32_t(s.seed), k1 = uint32_t(s.seed >> 32) ^ uint32_t(s.step >> 32);
    const auto mulhilo = [](__m512i x, __m512i m, __m512i& hi, __m512i& lo) {
        const __m512i pe = _mm512_mul_epu32(x, m);
        const __m512i po = _mm512_mul_epu32(_mm512_srli_epi64(x, 32), m);
        lo = _mm512_mask_blend_epi32(0xAAAA, pe, _mm512_slli_epi64(po, 32));
        hi = _mm512_mask_blend_epi32(0xAAAA, _mm512_srli_epi64(pe, 32), po);
    };
    for (int round = 0; round < 10; ++round) {
        __m512i hi0, lo0, hi1, lo1;
        mulhilo(c0, m0, hi0, lo0);
        mulhilo(c2, m1, hi1, lo1);
        const __m512i vk0 = _mm512_set1_epi32(static_cast<int>(k0));
        const __m512i vk1 = _mm512_set1_epi32(static_cast<int>(k1));
        c0 = _mm512_xor_si512(_mm512_xor_si512(hi1, c1), vk0);
        c1 = lo1;
        c2 = _mm512_xor_si512(_mm512_xor_si512(hi0, c3), vk1);
        c3 = lo0;
        k0 += 0x9E3779B9u;
        k1 += 0xBB67AE85u;
    }
    const __m512i t = _mm512_set1_epi32(static_cast<int>(thr));
    const uint64_t b0 = _mm512_cmplt_epu32_mask(_mm512_srli_epi32(c0, 8), t);
    const uint64_t b1 = _mm512_cmplt_epu32_mask(_mm512_srli_epi32(c1, 8), t);
    const uint64_t b2 = _mm512_cmplt_epu32_mask(_mm512_srli_epi32(c2, 8), t);
    const uint64_t b3 = _mm512_cmplt_epu32_mask(_mm512_srli_epi32(c3, 8), t);
    const uint64_t bits = _pdep_u64(b0, 0x1111111111111111ull) | _pdep_u64(b1, 0x2222222222222222ull) |
                          _pdep_u64(b2, 0x4444444444444444ull) | _pdep_u64(b3, 0x8888888888888888ull);
    _mm512_storeu_si512(mask, _mm512_maskz_set1_epi8(bits, 1));
}
#endif

// mask[i] = keep(element `first + i`), i in [0, n)
inline void dropout_fill_mask(uint8_t* mask, const DropoutStream& s, size_t first, size_t n) {
    const uint32_t thr = s.threshold();
    size_t i = 0;
#ifdef __AVX2__
    // scalar up to a block boundary, then 8 blocks (32 elements) at a time, scalar tail below
    for (; i < n && (first + i) % 4 != 0; ++i) {
        const uint64_t e = first + i;
        mask[i] = (philox::block(s.seed, s.step, s.site, e / 4)[e % 4] >> 8) < thr ? 1 : 0;
    }
#ifdef BB_OPS_AVX512
    while (n - i >= 64) {
        const uint64_t blk = (first + i) / 4;
        if (uint32_t(blk) > 0xFFFFFFF0u) break;  // the low counter word would wrap inside the 16
        dropout_mask_16blocks(mask + i, s, blk, thr);
        i += 64;
    }
#endif
    while (n - i >= 32) {
        const uint64_t blk = (first + i) / 4;
        if (uint32_t(blk) > 0xFFFFFFF8u) break;  // the low counter word would wrap inside the 8
        dropout_mask_8blocks(mask + i, s, blk, thr);
        i += 32;
    }
#endif
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

// y[i] = (mask[i] ? x[i]·scale : 0) + (residual ? residual[i] : 0), serial (y may alias x).
template <typename T>
inline void masked_scale(T* y, const T* x, const uint8_t* mask, T scale, size_t n,
                         const T* residual = nullptr) {
    size_t i = 0;
#ifdef __AVX2__
    if constexpr (std::is_same_v<T, float>) {
#ifdef BB_OPS_AVX512
        const __m512 s16 = _mm512_set1_ps(scale);
        for (; i + 16 <= n; i += 16) {
            const __mmask16 keep = _mm512_cmpneq_epi32_mask(
                _mm512_cvtepu8_epi32(_mm_loadu_si128(reinterpret_cast<const __m128i*>(mask + i))),
                _mm512_setzero_si512());
            __m512 v = _mm512_maskz_mul_ps(keep, _mm512_loadu_ps(x + i), s16);
            if (residual) v = _mm512_add_ps(v, _mm512_loadu_ps(residual + i));
            _mm512_storeu_ps(y + i, v);
        }
#endif
        const __m256 s = _mm256_set1_ps(scale);
        for (; i + 8 <= n; i += 8) {
            const __m256i m = _mm256_cvtepu8_epi32(_mm_loadl_epi64(reinterpret_cast<const __m128i*>(mask + i)));
            const __m256 keep = _mm256_castsi256_ps(_mm256_cmpgt_epi32(m, _mm256_setzero_si256()));
            __m256 v = _mm256_and_ps(keep, _mm256_mul_ps(_mm256_loadu_ps(x + i), s));
            if (residual) v = _mm256_add_ps(v, _mm256_loadu_ps(residual + i));
            _mm256_storeu_ps(y + i, v);
        }
    }
#endif
    for (; i < n; ++i) {
        const T v = mask[i] ? x[i] * scale : T(0);
        y[i] = residual ? v + residual[i] : v;
    }
}

// y(n) = x · mask / keep + residual   (mask null: no dropout; residual null: none). y may alias x.
// yb(n) = bf16(y) too when not null.
template <typename T>
void dropout_add_forward(T* y, const T* x, const uint8_t* mask, T keep_prob, const T* residual,
                         size_t n, bf16* yb = nullptr) {
    const T scale = T(1) / keep_prob;
    constexpr size_t kChunk = 4096;
    const long long chunks = static_cast<long long>((n + kChunk - 1) / kChunk);
#pragma omp parallel for schedule(static) if (worth_parallel(n))
    for (long long c = 0; c < chunks; ++c) {
        const size_t b = static_cast<size_t>(c) * kChunk, len = n - b < kChunk ? n - b : kChunk;
        if (mask) {
            masked_scale(y + b, x + b, mask + b, scale, len, residual ? residual + b : nullptr);
        } else {
            for (size_t i = b; i < b + len; ++i) y[i] = residual ? x[i] + residual[i] : x[i];
        }
        if (yb) to_bf16_serial(yb + b, y + b, len);
    }
}

// dx(n) = dy · mask / keep (mask null: dx = dy). dx may alias dy. dxb(n) = bf16(dx) too when not
// null; then dx may be null (a bf16 engine's GEMMs read only dxb). bg: dx's bias gradient too
// (bias_grad.hpp).
template <typename T>
void dropout_backward(T* dx, const T* dy, const uint8_t* mask, T keep_prob, size_t n,
                      bf16* dxb = nullptr, const BiasGrad<T>* bg = nullptr) {
    if (!mask && !dxb && !bg) {
        if (dx != dy) std::copy(dy, dy + n, dx);
        return;
    }
    const T scale = T(1) / keep_prob;
    const auto values = [&](size_t b, size_t e, T* tmp) -> const T* {
        const size_t len = e - b;
        const T* out = dy + b;  // no mask: dx = dy
        if (mask) {
            T* o = dx ? dx + b : tmp;
            masked_scale(o, dy + b, mask + b, scale, len);
            out = o;
        } else if (dx && dx != dy) {
            std::copy(dy + b, dy + e, dx + b);
        }
        if (dxb) to_bf16_serial(dxb + b, out, len);
        return out;
    };
    if (bg) return for_each_row_summing(n, n, *bg, values);
    for_each_chunk(n, 4096, n, [&](size_t b, size_t e) {
        alignas(64) T tmp[4096];
        values(b, e, tmp);
    });
}

BB_OPS_ISA_END
