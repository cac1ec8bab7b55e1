// AVX512-VNNI products for the int8 attention (int8_vnni.hpp). Compiled for the baseline like the
// rest of bb_ops; the functions that use AVX-512 carry GCC's target attribute and run only where
// vnni_products() says the CPU has it.
#include "ops/int8_vnni.hpp"

#include <immintrin.h>

#include <algorithm>
#include <cstring>
#include <limits>

#include "ops/kernels.hpp"

#define BB_VNNI_TARGET __attribute__((target("avx512f,avx512bw,avx512vl,avx512vnni")))

namespace bertbench::ops {

namespace {

constexpr int kCols = 64;  // outputs per tile: four vectors of 16 int32
constexpr int kRows = 4;   // rows per tile: 16 accumulators, 4 weight vectors, 1 broadcast

size_t padded_cols(int N) { return (static_cast<size_t>(N) + kCols - 1) / kCols * kCols; }
size_t groups(int K) { return (static_cast<size_t>(K) + 3) / 4; }

// Rows × 64 outputs of C: cols of them written (the rest are B's padding).
template <int R>
BB_VNNI_TARGET void tile(int32_t* C, size_t ldc, const uint8_t* A, size_t lda, const int8_t* B, size_t b_step,
                         size_t G, int cols) {
    __m512i acc[R][4];
#pragma GCC unroll 8
    for (int r = 0; r < R; ++r)
        for (int z = 0; z < 4; ++z) acc[r][z] = _mm512_setzero_si512();
    for (size_t g = 0; g < G; ++g) {
        const int8_t* b = B + g * b_step;
        const __m512i b0 = _mm512_loadu_si512(b), b1 = _mm512_loadu_si512(b + 64), b2 = _mm512_loadu_si512(b + 128),
                      b3 = _mm512_loadu_si512(b + 192);
#pragma GCC unroll 8
        for (int r = 0; r < R; ++r) {
            int32_t four;
            std::memcpy(&four, A + r * lda + 4 * g, 4);
            const __m512i a = _mm512_set1_epi32(four);
            acc[r][0] = _mm512_dpbusd_epi32(acc[r][0], a, b0);
            acc[r][1] = _mm512_dpbusd_epi32(acc[r][1], a, b1);
            acc[r][2] = _mm512_dpbusd_epi32(acc[r][2], a, b2);
            acc[r][3] = _mm512_dpbusd_epi32(acc[r][3], a, b3);
        }
    }
#pragma GCC unroll 8
    for (int r = 0; r < R; ++r)
        for (int z = 0; z < 4; ++z) {
            const int n = cols - 16 * z;
            if (n <= 0) break;
            int32_t* c = C + r * ldc + 16 * z;
            if (n >= 16)
                _mm512_storeu_si512(c, acc[r][z]);
            else
                _mm512_mask_storeu_epi32(c, static_cast<__mmask16>((1u << n) - 1), acc[r][z]);
        }
}

using Tile = void (*)(int32_t*, size_t, const uint8_t*, size_t, const int8_t*, size_t, size_t, int);
constexpr Tile kTiles[kRows + 1] = {nullptr, &tile<1>, &tile<2>, &tile<3>, &tile<4>};

// The lanes below n of 16, as a mask.
__mmask16 lanes16(int n) { return n >= 16 ? 0xFFFF : n <= 0 ? 0 : static_cast<__mmask16>((1u << n) - 1); }

}  // namespace

bool vnni_products() {
    static const bool yes = __builtin_cpu_supports("avx512vnni") && __builtin_cpu_supports("avx512bw") &&
                            __builtin_cpu_supports("avx512vl") && kernels().isa == Isa::avx512;
    return yes;
}

size_t vnni_packed_bytes(int K, int N) { return groups(K) * padded_cols(N) * 4; }

BB_VNNI_TARGET void vnni_pack_transposed(int8_t* packed, const int8_t* src, size_t ld, int K, int N) {
    // packed as int32: word (g, n) = the 4 bytes src[n·ld + 4g ..], a gather of 16 outputs at a time
    const size_t G = groups(K), NP = padded_cols(N);
    int32_t* out = reinterpret_cast<int32_t*>(packed);
    // the gather's byte offsets n·ld are int32
    const bool gather = NP * ld <= static_cast<size_t>(std::numeric_limits<int32_t>::max());
    const __m512i lane = _mm512_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15);
    for (size_t n0 = 0; n0 < NP; n0 += 16) {
        const __mmask16 m = lanes16(N - static_cast<int>(n0));
        const __m512i at = _mm512_mullo_epi32(_mm512_add_epi32(lane, _mm512_set1_epi32(static_cast<int>(n0))),
                                              _mm512_set1_epi32(static_cast<int>(ld)));
        for (size_t g = 0; g < G; ++g) {
            const int left = K - 4 * static_cast<int>(g);  // inputs of this group inside B (1 or more)
            __m512i w = _mm512_setzero_si512();
            if (m && left >= 4 && gather) {
                w = _mm512_mask_i32gather_epi32(w, m, at, src + 4 * g, 1);
            } else if (m) {  // the last, partial group (zeros past K), or offsets past int32: one by one
                alignas(64) int32_t words[16] = {};
                for (int n = 0; n < 16 && n0 + n < static_cast<size_t>(N); ++n)
                    std::memcpy(&words[n], src + (n0 + n) * ld + 4 * g, static_cast<size_t>(std::min(left, 4)));
                w = _mm512_load_si512(words);
            }
            _mm512_storeu_si512(out + g * NP + n0, w);
        }
    }
}

BB_VNNI_TARGET void vnni_pack_rows(int8_t* packed, const int8_t* src, size_t ld, int K, int N) {
    // four rows of 16 outputs interleaved byte by byte into 64 bytes: (k0 k1 k2 k3) per output
    const size_t G = groups(K), NP = padded_cols(N);
    for (size_t g = 0; g < G; ++g)
        for (size_t n0 = 0; n0 < NP; n0 += 16) {
            const __mmask16 m = lanes16(N - static_cast<int>(n0));
            __m128i row[4];
            for (int e = 0; e < 4; ++e) {
                const size_t k = 4 * g + static_cast<size_t>(e);
                row[e] = k < static_cast<size_t>(K) ? _mm_maskz_loadu_epi8(m, src + k * ld + n0) : _mm_setzero_si128();
            }
            const __m128i lo01 = _mm_unpacklo_epi8(row[0], row[1]), hi01 = _mm_unpackhi_epi8(row[0], row[1]);
            const __m128i lo23 = _mm_unpacklo_epi8(row[2], row[3]), hi23 = _mm_unpackhi_epi8(row[2], row[3]);
            __m128i* out = reinterpret_cast<__m128i*>(packed + (g * NP + n0) * 4);
            _mm_storeu_si128(out + 0, _mm_unpacklo_epi16(lo01, lo23));
            _mm_storeu_si128(out + 1, _mm_unpackhi_epi16(lo01, lo23));
            _mm_storeu_si128(out + 2, _mm_unpacklo_epi16(hi01, hi23));
            _mm_storeu_si128(out + 3, _mm_unpackhi_epi16(hi01, hi23));
        }
}

void vnni_product(int32_t* C, size_t ldc, const uint8_t* A, size_t lda, const int8_t* packed, int M, int N, int K) {
    const size_t G = groups(K), step = padded_cols(N) * 4;
    for (int n0 = 0; n0 < N; n0 += kCols) {
        const int cols = std::min(kCols, N - n0);
        for (int i0 = 0; i0 < M; i0 += kRows)
            kTiles[std::min(kRows, M - i0)](C + static_cast<size_t>(i0) * ldc + n0, ldc,
                                             A + static_cast<size_t>(i0) * lda, lda,
                                             packed + static_cast<size_t>(n0) * 4, step, G, cols);
    }
}

}  // namespace bertbench::ops
