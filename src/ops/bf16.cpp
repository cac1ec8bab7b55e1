// bf16 conversion and the bf16 GEMM (see bf16.hpp). oneDNN 2.6 has no bf16 BLAS-style call, so
// the native path is its matmul primitive with fixed shapes (the brgemm kernels; a runtime-sized
// matmul falls back to slower kernels), created once per shape and kept in a process-wide cache.
#include "ops/bf16.hpp"

#include <cpuid.h>
#include <immintrin.h>
#include <oneapi/dnnl/dnnl.hpp>

#include <algorithm>
#include <cstdlib>
#include <list>
#include <map>
#include <mutex>
#include <new>
#include <tuple>
#include <unordered_map>
#include <vector>

#include "core/error.hpp"
#include "ops/gemm.hpp"
#include "ops/parallel.hpp"

namespace bertbench::ops {

const char* precision_name(Precision p) { return p == Precision::bf16 ? "bf16" : "fp32"; }

namespace {
bool fp16_matmul_available();
}  // namespace

Precision parse_precision(const std::string& value, const std::string& flag) {
    if (value == "fp32" || value == "float32") return Precision::fp32;
    if (value == "bf16" || value == "bfloat16") return Precision::bf16;
    if (value == "fp16" || value == "float16") {
        if (!fp16_matmul_available())
            fail("--{}={}: this CPU cannot run fp16 matmuls (it multiplies natively: {}; fp16 needs "
                 "AVX512-FP16 or AMX-FP16 and a oneDNN with f16 CPU kernels; Debian's oneDNN 2.6 "
                 "has none); use --{}=bf16 (bfloat16 needs no loss scaling) or fp32",
                 flag, value, native_precisions(), flag);
        fail("--{}={}: fp16 training is not implemented; use --{}=bf16", flag, value, flag);
    }
    fail("--{}: expected fp32, bf16 (or float32, bfloat16; fp16 is refused with its reason), got "
         "\"{}\"", flag, value);
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

// The matmul primitives, one per (shape, layout, beta), the most recently used kCapacity kept.
// On real data the packed token count N and the sequence lengths change from batch to batch, so
// the set of shapes grows without end; each primitive holds JIT code and buffers (a BERT-tiny run
// on real text grew by ~600 MB with an unbounded cache). A step needs ~15 linear-layer shapes
// plus 6 per distinct sequence length; re-creating an evicted one costs under a millisecond.
// Each primitive gets its scratchpad from the calling thread (user scratchpad mode), so the
// attention's per-head products can run the same primitive on several threads at once.
// (M, N, K, trans_b, lda, ldb, ldc, epilogue: 0 C = A·B, 1 C += A·B, 2 C = A·B + bias row)
using Key = std::tuple<int, int, int, bool, int, int, int, int>;
struct Matmul {
    dnnl::matmul prim;
    size_t scratch_bytes = 0;
};
struct Matmuls {
    static constexpr size_t kCapacity = 512;
    std::mutex mu;
    dnnl::engine eng{dnnl::engine::kind::cpu, 0};
    std::list<std::pair<Key, Matmul>> lru;  // most recently used first
    std::map<Key, std::list<std::pair<Key, Matmul>>::iterator> index;
    std::string impl;
};
// Never destroyed: the threads' own caches (below) hold primitives and memory objects of its
// engine, and an OpenMP worker's thread_local objects may outlive static destructors.
Matmuls& matmuls() {
    static Matmuls* m = new Matmuls;
    return *m;
}

dnnl::memory::desc md(int rows, int cols, dnnl::memory::data_type t, int ld, bool transposed) {
    // A logical (rows, cols) matrix stored row-major with leading dimension ld, or transposed:
    // stored (cols, rows) with leading dimension ld.
    using dims = dnnl::memory::dims;
    return transposed ? dnnl::memory::desc(dims{rows, cols}, t, dims{1, ld})
                      : dnnl::memory::desc(dims{rows, cols}, t, dims{ld, 1});
}

Matmul matmul_for(const Key& k) {
    Matmuls& m = matmuls();
    std::lock_guard<std::mutex> lock(m.mu);
    if (auto it = m.index.find(k); it != m.index.end()) {
        m.lru.splice(m.lru.begin(), m.lru, it->second);
        return it->second->second;
    }
    const auto [M, N, K, trans_b, lda, ldb, ldc, epilogue] = k;
    using dt = dnnl::memory::data_type;
    dnnl::primitive_attr attr;
    attr.set_scratchpad_mode(dnnl::scratchpad_mode::user);
    if (epilogue == 1) {
        dnnl::post_ops po;
        po.append_sum(1.0f);
        attr.set_post_ops(po);
    }
    const auto src = md(M, K, dt::bf16, lda, false), wei = md(K, N, dt::bf16, ldb, trans_b),
               dst = md(M, N, dt::f32, ldc, false);
    const dnnl::matmul::desc d = epilogue == 2 ? dnnl::matmul::desc(src, wei, md(1, N, dt::f32, N, false), dst)
                                               : dnnl::matmul::desc(src, wei, dst);
    const dnnl::matmul::primitive_desc pd(d, attr, m.eng);
    if (m.impl.empty()) m.impl = pd.impl_info_str();
    m.lru.emplace_front(k, Matmul{dnnl::matmul(pd), pd.scratchpad_desc().get_size()});
    m.index[k] = m.lru.begin();
    if (m.lru.size() > Matmuls::kCapacity) {  // a copy handed out earlier stays valid
        m.index.erase(m.lru.back().first);
        m.lru.pop_back();
    }
    return m.lru.front().second;
}

// The hit path without the lock: each thread keeps the primitives it ran last in a small
// direct-mapped table, each ready to run (memory objects, argument map and stream made once; a call
// only points them at its operands). A thread's table holds at most kSlots primitives, so the
// memory stays bounded by (kCapacity + kSlots · threads); an entry evicted from the shared cache
// stays valid in a thread that still holds it (primitives are reference-counted handles).
struct Bound {
    Key key{};
    bool used = false;
    Matmul mm;
    dnnl::memory a, b, c, bias, sp;
    std::unordered_map<int, dnnl::memory> args;
};
struct ThreadMatmuls {
    static constexpr size_t kSlots = 64;
    std::vector<Bound> slots = std::vector<Bound>(kSlots);
    dnnl::stream stream{matmuls().eng};
    std::vector<uint8_t> scratch;
};
ThreadMatmuls& thread_matmuls() {
    thread_local ThreadMatmuls t;
    return t;
}
size_t key_slot(const Key& k) {
    const auto [M, N, K, trans_b, lda, ldb, ldc, epilogue] = k;
    uint64_t h = 1469598103934665603ull;
    for (const uint64_t v : {uint64_t(M), uint64_t(N), uint64_t(K), uint64_t(trans_b), uint64_t(lda),
                             uint64_t(ldb), uint64_t(ldc), uint64_t(epilogue)})
        h = (h ^ v) * 1099511628211ull;
    return static_cast<size_t>(h ^ (h >> 29)) % ThreadMatmuls::kSlots;
}

bool g_emulate = [] {
    const char* e = std::getenv("BB_BF16_EMULATE");
    return e && *e && std::string(e) != "0";
}();

// Native means the CPU has bf16 units and oneDNN gives a kernel for them (not its reference code).
bool probe_native() {
    const CpuBf16 c = cpu_bf16();
    if (!c.avx512_bf16 && !c.amx_bf16) return false;
    try {
        (void)matmul_for(Key{64, 64, 64, false, 64, 64, 64, 0});
        const std::string impl = matmuls().impl;
        return impl.find("ref") == std::string::npos;
    } catch (const dnnl::error&) {
        return false;
    }
}

// oneDNN gives an f16 matmul only where it has kernels for it; its reference code does not count.
bool fp16_matmul_available() {
    try {
        using dt = dnnl::memory::data_type;
        const dnnl::matmul::desc d(md(16, 16, dt::f16, 16, false), md(16, 16, dt::f16, 16, false),
                                   md(16, 16, dt::f32, 16, false));
        const dnnl::matmul::primitive_desc pd(d, matmuls().eng);
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

size_t bf16_cached_matmuls() {
    Matmuls& m = matmuls();
    std::lock_guard<std::mutex> lock(m.mu);
    return m.lru.size();
}

bool bf16_native() {
    static const bool native = probe_native();
    return native && !g_emulate;
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
    return matmuls().impl;
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
    try {
        const Key key{M, N, K, trans_b, lda, ldb, ldc, bias ? 2 : beta == 1.f ? 1 : 0};
        ThreadMatmuls& t = thread_matmuls();
        Bound& e = t.slots[key_slot(key)];
        if (!e.used || e.key != key) {
            e.used = false;
            e.mm = matmul_for(key);
            const dnnl::engine& eng = matmuls().eng;
            using dt = dnnl::memory::data_type;
            e.a = dnnl::memory(md(M, K, dt::bf16, lda, false), eng, const_cast<bf16*>(A));
            e.b = dnnl::memory(md(K, N, dt::bf16, ldb, trans_b), eng, const_cast<bf16*>(B));
            e.c = dnnl::memory(md(M, N, dt::f32, ldc, false), eng, C);
            e.args = {{DNNL_ARG_SRC, e.a}, {DNNL_ARG_WEIGHTS, e.b}, {DNNL_ARG_DST, e.c}};
            if (bias) {
                e.bias = dnnl::memory(md(1, N, dt::f32, N, false), eng, const_cast<float*>(bias));
                e.args[DNNL_ARG_BIAS] = e.bias;
            }
            if (e.mm.scratch_bytes > 0) {
                if (t.scratch.size() < e.mm.scratch_bytes) t.scratch.resize(e.mm.scratch_bytes);
                e.sp = dnnl::memory(
                    dnnl::memory::desc({static_cast<dnnl::memory::dim>(e.mm.scratch_bytes)}, dt::u8,
                                       dnnl::memory::format_tag::a),
                    eng, t.scratch.data());
                e.args[DNNL_ARG_SCRATCHPAD] = e.sp;
            }
            e.key = key;
            e.used = true;
        } else {
            e.a.set_data_handle(const_cast<bf16*>(A));
            e.b.set_data_handle(const_cast<bf16*>(B));
            e.c.set_data_handle(C);
            if (bias) e.bias.set_data_handle(const_cast<float*>(bias));
        }
        if (e.mm.scratch_bytes > 0) {
            // Another slot may have grown the thread's scratchpad since (a new address).
            if (t.scratch.size() < e.mm.scratch_bytes) t.scratch.resize(e.mm.scratch_bytes);
            e.sp.set_data_handle(t.scratch.data());
        }
        e.mm.prim.execute(t.stream, e.args);
        t.stream.wait();
    } catch (const dnnl::error& e) {
        if (e.status == dnnl_out_of_memory) throw std::bad_alloc();
        fail("internal error: oneDNN bf16 matmul (M={}, N={}, K={}, trans_b={}, lda={}, ldb={}, "
             "ldc={}, bias={}): {}", M, N, K, trans_b, lda, ldb, ldc, bias != nullptr, e.what());
    }
}

void linear_forward_bf16(float* y, const bf16* xb, const bf16* wb, const float* b, int N, int IN,
                         int OUT) {
    if (N == 0) return;
    // The bias goes into the matmul (added to each row as the product is stored), not first into y
    // for a β = 1 product: that was a write and a read of y more per layer.
    gemm_bf16(false, N, OUT, IN, xb, IN, wb, OUT, 0.f, y, OUT, b);
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
