// bf16 conversion and the bf16 GEMM (see bf16.hpp). oneDNN 2.6 has no bf16 BLAS-style call, so
// the native path is its matmul primitive (the cached fixed-shape primitives of matmul.hpp).
#include "ops/bf16.hpp"

#include <cpuid.h>
#include <immintrin.h>
#include <oneapi/dnnl/dnnl.hpp>

#include <algorithm>
#include <cstdlib>
#include <cstring>
#include <string>
#include <vector>

#include "core/error.hpp"
#include "ops/gemm.hpp"
#include "ops/matmul.hpp"
#include "ops/parallel.hpp"

namespace bertbench::ops {

const char* precision_name(Precision p) {
    return p == Precision::bf16 ? "bf16" : p == Precision::int8 ? "int8" : "fp32";
}

namespace {
bool fp16_matmul_available();
}  // namespace

Precision parse_precision(const std::string& value, const std::string& flag) {
    if (value == "fp32" || value == "float32") return Precision::fp32;
    if (value == "bf16" || value == "bfloat16") return Precision::bf16;
    if (value == "int8") return Precision::int8;
    if (value == "fp16" || value == "float16") {
        if (!fp16_matmul_available())
            fail("--{}={}: this CPU cannot run fp16 matmuls (it multiplies natively: {}; fp16 needs "
                 "AVX512-FP16 or AMX-FP16 and a oneDNN with f16 CPU kernels; Debian's oneDNN 2.6 "
                 "has none); use --{}=bf16 (bfloat16 needs no loss scaling) or fp32",
                 flag, value, native_precisions(), flag);
        fail("--{}={}: fp16 training is not implemented; use --{}=bf16", flag, value, flag);
    }
    fail("--{}: expected fp32, bf16, int8 (or float32, bfloat16; int8 for inference only; fp16 is "
         "refused with its reason), got \"{}\"", flag, value);
}

namespace {

// 8 floats -> 8 bf16 (round to nearest even; NaN -> quiet NaN), AVX2.
inline __m128i to_bf16_8v(const float* src) {
    const __m256i u = _mm256_castps_si256(_mm256_loadu_ps(src));
    const __m256i lsb = _mm256_and_si256(_mm256_srli_epi32(u, 16), _mm256_set1_epi32(1));
    __m256i r = _mm256_srli_epi32(_mm256_add_epi32(u, _mm256_add_epi32(_mm256_set1_epi32(0x7fff), lsb)), 16);
    const __m256i mag = _mm256_and_si256(u, _mm256_set1_epi32(0x7fffffff));
    const __m256i nan = _mm256_cmpgt_epi32(mag, _mm256_set1_epi32(0x7f800000));
    const __m256i quiet = _mm256_or_si256(_mm256_srli_epi32(u, 16), _mm256_set1_epi32(0x40));
    r = _mm256_blendv_epi8(r, quiet, nan);
    const __m256i packed = _mm256_permute4x64_epi64(_mm256_packus_epi32(r, r), 0x08);
    return _mm256_castsi256_si128(packed);
}
inline void to_bf16_8(uint16_t* dst, const float* src) {
    _mm_storeu_si128(reinterpret_cast<__m128i*>(dst), to_bf16_8v(src));
}

void to_bf16_serial_avx2(bf16* dst, const float* src, size_t n) {
    size_t i = 0;
    for (; i + 8 <= n; i += 8) to_bf16_8(&dst[i].bits, src + i);
    for (; i < n; ++i) dst[i] = to_bf16(src[i]);
}

// The same rounding 16 at a time with AVX-512 (integer arithmetic, as above: the AVX512-BF16
// instruction vcvtneps2bf16 flushes denormal inputs to zero, which round to nearest even does not).
// Compiled for AVX-512 by attribute only and called only where CPUID reports AVX512F and BW.
__attribute__((target("avx512f,avx512bw"))) void to_bf16_serial_avx512(bf16* dst, const float* src,
                                                                         size_t n) {
    const __m512i one = _mm512_set1_epi32(1), round = _mm512_set1_epi32(0x7fff),
                  absm = _mm512_set1_epi32(0x7fffffff), inf = _mm512_set1_epi32(0x7f800000),
                  qbit = _mm512_set1_epi32(0x40);
    const __mmask16 all = 0xffff;
    size_t i = 0;
    for (; i + 16 <= n; i += 16) {
        const __m512i u = _mm512_castps_si512(_mm512_loadu_ps(src + i));
        // (the maskz forms: GCC 12 warns about the unmasked ones' undefined pass-through operand)
        const __m512i hi = _mm512_maskz_srli_epi32(all, u, 16);
        const __m512i r = _mm512_maskz_srli_epi32(
            all, _mm512_add_epi32(u, _mm512_add_epi32(round, _mm512_and_si512(hi, one))), 16);
        const __mmask16 nan = _mm512_cmpgt_epi32_mask(_mm512_and_si512(u, absm), inf);
        const __m512i v = _mm512_mask_or_epi32(r, nan, hi, qbit);
        _mm256_storeu_si256(reinterpret_cast<__m256i*>(&dst[i].bits), _mm512_maskz_cvtepi32_epi16(all, v));
    }
    for (; i < n; ++i) dst[i] = to_bf16(src[i]);
}

bool cpu_avx512bw() {
    static const bool yes = [] {
        __builtin_cpu_init();
        return __builtin_cpu_supports("avx512f") && __builtin_cpu_supports("avx512bw");
    }();
    return yes;
}

// Tests force the AVX2 path (set_bf16_conversion_avx512(false)) to check both on an AVX-512 CPU.
bool g_conv_avx512 = true;


// 8×8 transpose of 16-bit values held in r[0..7] (row i in r[i]), SSE2.
inline void transpose_8x8_epi16(__m128i r[8]) {
    const __m128i a0 = _mm_unpacklo_epi16(r[0], r[1]), a1 = _mm_unpackhi_epi16(r[0], r[1]);
    const __m128i a2 = _mm_unpacklo_epi16(r[2], r[3]), a3 = _mm_unpackhi_epi16(r[2], r[3]);
    const __m128i a4 = _mm_unpacklo_epi16(r[4], r[5]), a5 = _mm_unpackhi_epi16(r[4], r[5]);
    const __m128i a6 = _mm_unpacklo_epi16(r[6], r[7]), a7 = _mm_unpackhi_epi16(r[6], r[7]);
    const __m128i b0 = _mm_unpacklo_epi32(a0, a2), b1 = _mm_unpackhi_epi32(a0, a2);
    const __m128i b2 = _mm_unpacklo_epi32(a1, a3), b3 = _mm_unpackhi_epi32(a1, a3);
    const __m128i b4 = _mm_unpacklo_epi32(a4, a6), b5 = _mm_unpackhi_epi32(a4, a6);
    const __m128i b6 = _mm_unpacklo_epi32(a5, a7), b7 = _mm_unpackhi_epi32(a5, a7);
    r[0] = _mm_unpacklo_epi64(b0, b4);
    r[1] = _mm_unpackhi_epi64(b0, b4);
    r[2] = _mm_unpacklo_epi64(b1, b5);
    r[3] = _mm_unpackhi_epi64(b1, b5);
    r[4] = _mm_unpacklo_epi64(b2, b6);
    r[5] = _mm_unpackhi_epi64(b2, b6);
    r[6] = _mm_unpacklo_epi64(b3, b7);
    r[7] = _mm_unpackhi_epi64(b3, b7);
}

// dst(cols, rows) = f(src)ᵀ over the tile [r0, r1) × [c0, c1): 8×8 blocks through registers (load
// or convert 8 rows of 8, transpose, store 8 rows of 8), the ragged edges one value at a time.
template <typename Src, typename Load8, typename Load1>
inline void transpose_tile(bf16* dst, const Src* src, int rows, int ld, int r0, int r1, int c0,
                           int c1, Load8 load8, Load1 load1) {
    int r = r0;
    for (; r + 8 <= r1; r += 8) {
        int c = c0;
        for (; c + 8 <= c1; c += 8) {
            __m128i v[8];
            for (int i = 0; i < 8; ++i) v[i] = load8(src + static_cast<size_t>(r + i) * ld + c);
            transpose_8x8_epi16(v);
            for (int j = 0; j < 8; ++j)
                _mm_storeu_si128(reinterpret_cast<__m128i*>(dst + static_cast<size_t>(c + j) * rows + r), v[j]);
        }
        for (; c < c1; ++c)
            for (int i = 0; i < 8; ++i)
                dst[static_cast<size_t>(c) * rows + r + i] = load1(src[static_cast<size_t>(r + i) * ld + c]);
    }
    for (; r < r1; ++r)
        for (int c = c0; c < c1; ++c)
            dst[static_cast<size_t>(c) * rows + r] = load1(src[static_cast<size_t>(r) * ld + c]);
}

// Tiles of 64×64 values, parallel over tiles. A destination row stride that is a multiple of 1 KB
// (4,096 tokens: 8 KB) maps the 64 destination rows a tile writes onto a few L1 sets; there the tiles
// are 256 rows × 8 columns, the columns innermost, so a tile writes 8 runs of 512 bytes while its
// band of source rows stays in L2. (Scratch measurements, 1 thread: 4,096×768 2.4 -> 0.6-0.8 ms;
// at 640×30,522, the MLM decoder's, 64×64 stays the better.)
template <typename Src, typename Load8, typename Load1>
void transpose_tiled(bf16* dst, const Src* src, int rows, int cols, int ld, Load8 load8, Load1 load1) {
    const bool aliasing = rows % 512 == 0;
    const int kR = aliasing ? 256 : 64, kC = aliasing ? 8 : 64;
    const int tiles_r = (rows + kR - 1) / kR, tiles_c = (cols + kC - 1) / kC;
    const int tiles = tiles_r * tiles_c;
#pragma omp parallel for schedule(static) if (worth_parallel(static_cast<size_t>(rows) * cols))
    for (int t = 0; t < tiles; ++t) {
        const int r0 = (t / tiles_c) * kR, c0 = (t % tiles_c) * kC;
        transpose_tile(dst, src, rows, ld, r0, std::min(rows, r0 + kR), c0, std::min(cols, c0 + kC),
                       load8, load1);
    }
}

struct CpuBf16 {
    bool avx512_bf16 = false, amx_bf16 = false, avx512_fp16 = false, amx_fp16 = false;
};
CpuBf16 cpu_bf16() {
    CpuBf16 c;
    unsigned a, b, cx, d;
    if (__get_cpuid_count(7, 0, &a, &b, &cx, &d)) {
        c.amx_bf16 = (d >> 22) & 1;
        c.avx512_fp16 = (d >> 23) & 1;
        const unsigned max_sub = a;
        if (max_sub >= 1 && __get_cpuid_count(7, 1, &a, &b, &cx, &d)) {
            c.avx512_bf16 = (a >> 5) & 1;
            c.amx_fp16 = (a >> 21) & 1;
        }
    }
    return c;
}

bool g_emulate = [] {
    const char* e = std::getenv("BB_BF16_EMULATE");
    return e && *e && std::string(e) != "0";
}();

// Native means the CPU has bf16 units and oneDNN gives a kernel for them (not its reference code).
bool probe_native() {
    const CpuBf16 c = cpu_bf16();
    if (!c.avx512_bf16 && !c.amx_bf16) return false;
    const std::string impl = matmul_impl(MatmulType::bf16);
    return !impl.empty() && impl.find("ref") == std::string::npos;
}

// oneDNN gives an f16 matmul only where it has kernels for it; its reference code does not count.
bool fp16_matmul_available() {
    try {
        using dt = dnnl::memory::data_type;
        const dnnl::memory::desc h({16, 16}, dt::f16, dnnl::memory::format_tag::ab),
            f({16, 16}, dt::f32, dnnl::memory::format_tag::ab);
        const dnnl::engine eng(dnnl::engine::kind::cpu, 0);
        const dnnl::matmul::primitive_desc pd(dnnl::matmul::desc(h, h, f), eng);
        return std::string(pd.impl_info_str()).find("ref") == std::string::npos;
    } catch (const dnnl::error&) {
        return false;
    }
}

void widen(std::vector<float>& out, const bf16* src, int rows, int cols, int ld) {
    out.resize(static_cast<size_t>(rows) * cols);
    for (int r = 0; r < rows; ++r)
        for (int c = 0; c < cols; ++c)
            out[static_cast<size_t>(r) * cols + c] = to_float(src[static_cast<size_t>(r) * ld + c]);
}

}  // namespace

void to_bf16(bf16* dst, const float* src, size_t n) {
    constexpr size_t kChunk = size_t(1) << 14;
    for_each_chunk(n, kChunk, n, [&](size_t b, size_t e) { to_bf16_serial(dst + b, src + b, e - b); });
}

void to_bf16_transposed(bf16* dst, const float* src, int rows, int cols, int ld) {
    transpose_tiled(dst, src, rows, cols, ld, [](const float* p) { return to_bf16_8v(p); },
                    [](float f) { return to_bf16(f); });
}

void transpose_bf16(bf16* dst, const bf16* src, int rows, int cols, int ld) {
    transpose_tiled(
        dst, src, rows, cols, ld,
        [](const bf16* p) { return _mm_loadu_si128(reinterpret_cast<const __m128i*>(p)); },
        [](bf16 h) { return h; });
}

void set_bf16_conversion_avx512(bool use) { g_conv_avx512 = use; }
bool bf16_conversion_avx512() { return g_conv_avx512 && cpu_avx512bw(); }

void to_bf16_serial(bf16* dst, const float* src, size_t n) {
    if (g_conv_avx512 && cpu_avx512bw())
        to_bf16_serial_avx512(dst, src, n);
    else
        to_bf16_serial_avx2(dst, src, n);
}

bool bf16_native() {
    static const bool native = probe_native();
    return native && !g_emulate;
}

bool bf16_emulation_forced() { return g_emulate; }

bool bf16_fast() {
    if (!bf16_native()) return false;
    static const bool fast = [] {
        if (bf16_gemm_impl().find("amx") != std::string::npos) return true;
        unsigned a, b, c, d;  // the vendor string: EBX, EDX, ECX of leaf 0
        if (!__get_cpuid(0, &a, &b, &c, &d)) return false;
        char vendor[13] = {};
        std::memcpy(vendor, &b, 4);
        std::memcpy(vendor + 4, &d, 4);
        std::memcpy(vendor + 8, &c, 4);
        return std::string(vendor) == "AuthenticAMD";
    }();
    return fast;
}

void set_bf16_emulation(bool emulate) { g_emulate = emulate; }

std::string native_precisions() {
    const CpuBf16 c = cpu_bf16();
    std::string s = "fp32";
    if (c.avx512_bf16 || c.amx_bf16) s += ",bf16";
    if (c.avx512_fp16 || c.amx_fp16) s += ",fp16";
    return s;
}

std::string bf16_gemm_impl() {
    if (!bf16_native()) return "emulated (bf16 operands widened to fp32, oneDNN sgemm)";
    return matmul_impl(MatmulType::bf16);
}

void gemm_bf16(bool trans_b, int M, int N, int K, const bf16* A, int lda, const bf16* B, int ldb,
               float beta, float* C, int ldc, const float* bias) {
    if (beta != 0.f && beta != 1.f) fail("internal error: gemm_bf16 takes beta 0 or 1, got {}", beta);
    if (bias && beta != 0.f) fail("internal error: gemm_bf16 takes a bias only with beta 0");
    if (M == 0 || N == 0) return;
    if (K == 0 || !bf16_native()) {
        // Emulation: the bf16 operands are exact in fp32, so sgemm computes the same products.
        if (bias) {
            for (int i = 0; i < M; ++i) std::copy(bias, bias + N, C + static_cast<size_t>(i) * ldc);
            beta = 1.f;
        }
        thread_local std::vector<float> a, b;
        widen(a, A, M, K, lda);
        if (trans_b)
            widen(b, B, N, K, ldb);
        else
            widen(b, B, K, N, ldb);
        gemm(false, trans_b, M, N, K, 1.f, a.data(), K, b.data(), trans_b ? K : N, beta, C, ldc);
        return;
    }
    matmul(MatmulType::bf16, trans_b, M, N, K, A, lda, B, ldb, beta, C, ldc, bias);
}

void linear_forward_bf16(float* y, const bf16* xb, const bf16* wb, const float* b, int N, int IN,
                         int OUT) {
    if (N == 0) return;
    // The bias goes into the matmul (added to each row as the product is stored), not first into y
    // for a β = 1 product: that was a write and a read of y more per layer.
    gemm_bf16(false, N, OUT, IN, xb, IN, wb, OUT, 0.f, y, OUT, b);
}

void linear_forward_bf16(bf16* yb, const bf16* xb, const bf16* wb, const float* b, int N, int IN,
                         int OUT) {
    if (N == 0) return;
    if (!bf16_native()) {  // emulation: the fp32 product, then the same rounding
        thread_local std::vector<float> y;
        y.resize(static_cast<size_t>(N) * OUT);
        linear_forward_bf16(y.data(), xb, wb, b, N, IN, OUT);
        return to_bf16(yb, y.data(), y.size());
    }
    matmul(MatmulType::bf16, false, N, OUT, IN, xb, IN, wb, OUT, 0.f, yb, OUT, b, MatmulType::bf16);
}

void linear_backward_bf16(float* dx, float* dw, float* db, const float* dy, const bf16* dyb,
                          const bf16* xt, const bf16* wb, int N, int IN, int OUT,
                          bool accumulate_dx) {
    if (N == 0) return;
    if (dx) gemm_bf16(true, N, IN, OUT, dyb, OUT, wb, OUT, accumulate_dx ? 1.f : 0.f, dx, IN);
    // xᵀ·dy with xᵀ stored: oneDNN's bf16 kernels are fastest with a non-transposed A.
    if (dw) gemm_bf16(false, IN, OUT, N, xt, N, dyb, OUT, 1.f, dw, OUT);
    if (db) bias_backward(db, dy, N, OUT);
}

void linear_backward_bf16(float* dx, float* dw, float* db, const float* dy, const float* x,
                          const bf16* wb, int N, int IN, int OUT, bool accumulate_dx,
                          bf16* scratch) {
    if (N == 0) return;
    bf16* dyb = scratch;                                // (N, OUT)
    bf16* xt = scratch + static_cast<size_t>(N) * OUT;  // (IN, N)
    to_bf16(dyb, dy, static_cast<size_t>(N) * OUT);
    if (dw) to_bf16_transposed(xt, x, N, IN, IN);
    linear_backward_bf16(dx, dw, db, dy, dyb, dw ? xt : nullptr, wb, N, IN, OUT, accumulate_dx);
}

}  // namespace bertbench::ops
