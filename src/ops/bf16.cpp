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
inline void to_bf16_8(uint16_t* dst, const float* src) {
    const __m256i u = _mm256_castps_si256(_mm256_loadu_ps(src));
    const __m256i lsb = _mm256_and_si256(_mm256_srli_epi32(u, 16), _mm256_set1_epi32(1));
    __m256i r = _mm256_srli_epi32(_mm256_add_epi32(u, _mm256_add_epi32(_mm256_set1_epi32(0x7fff), lsb)), 16);
    const __m256i mag = _mm256_and_si256(u, _mm256_set1_epi32(0x7fffffff));
    const __m256i nan = _mm256_cmpgt_epi32(mag, _mm256_set1_epi32(0x7f800000));
    const __m256i quiet = _mm256_or_si256(_mm256_srli_epi32(u, 16), _mm256_set1_epi32(0x40));
    r = _mm256_blendv_epi8(r, quiet, nan);
    const __m256i packed = _mm256_permute4x64_epi64(_mm256_packus_epi32(r, r), 0x08);
    _mm_storeu_si128(reinterpret_cast<__m128i*>(dst), _mm256_castsi256_si128(packed));
}

void to_bf16_serial(bf16* dst, const float* src, size_t n) {
    size_t i = 0;
    for (; i + 8 <= n; i += 8) to_bf16_8(&dst[i].bits, src + i);
    for (; i < n; ++i) dst[i] = to_bf16(src[i]);
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
using Key = std::tuple<int, int, int, bool, int, int, int, bool>;
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
Matmuls& matmuls() {
    static Matmuls m;
    return m;
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
    const auto [M, N, K, trans_b, lda, ldb, ldc, accumulate] = k;
    using dt = dnnl::memory::data_type;
    dnnl::primitive_attr attr;
    attr.set_scratchpad_mode(dnnl::scratchpad_mode::user);
    if (accumulate) {
        dnnl::post_ops po;
        po.append_sum(1.0f);
        attr.set_post_ops(po);
    }
    const dnnl::matmul::desc d(md(M, K, dt::bf16, lda, false), md(K, N, dt::bf16, ldb, trans_b),
                               md(M, N, dt::f32, ldc, false));
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

bool g_emulate = [] {
    const char* e = std::getenv("BB_BF16_EMULATE");
    return e && *e && std::string(e) != "0";
}();

// Native means the CPU has bf16 units and oneDNN gives a kernel for them (not its reference code).
bool probe_native() {
    const CpuBf16 c = cpu_bf16();
    if (!c.avx512_bf16 && !c.amx_bf16) return false;
    try {
        (void)matmul_for(Key{64, 64, 64, false, 64, 64, 64, false});
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
    // 32×32 tiles: reads rows of a tile, writes columns; both stay in L1.
    constexpr int kT = 32;
    const int tiles_c = (cols + kT - 1) / kT;
#pragma omp parallel for schedule(static) if (worth_parallel(static_cast<size_t>(rows) * cols))
    for (int tc = 0; tc < tiles_c; ++tc) {
        const int c0 = tc * kT, c1 = std::min(cols, c0 + kT);
        for (int r0 = 0; r0 < rows; r0 += kT) {
            const int r1 = std::min(rows, r0 + kT);
            for (int c = c0; c < c1; ++c) {
                bf16* d = dst + static_cast<size_t>(c) * rows;
                for (int r = r0; r < r1; ++r) d[r] = to_bf16(src[static_cast<size_t>(r) * ld + c]);
            }
        }
    }
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
               float beta, float* C, int ldc) {
    if (beta != 0.f && beta != 1.f) fail("internal error: gemm_bf16 takes beta 0 or 1, got {}", beta);
    if (M == 0 || N == 0) return;
    if (K == 0 || !bf16_native()) {
        // Emulation: the bf16 operands are exact in fp32, so sgemm computes the same products.
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
        const Matmul mm = matmul_for(Key{M, N, K, trans_b, lda, ldb, ldc, beta == 1.f});
        Matmuls& m = matmuls();
        using dt = dnnl::memory::data_type;
        dnnl::memory am(md(M, K, dt::bf16, lda, false), m.eng, const_cast<bf16*>(A));
        dnnl::memory bm(md(K, N, dt::bf16, ldb, trans_b), m.eng, const_cast<bf16*>(B));
        dnnl::memory cm(md(M, N, dt::f32, ldc, false), m.eng, C);
        std::unordered_map<int, dnnl::memory> args = {
            {DNNL_ARG_SRC, am}, {DNNL_ARG_WEIGHTS, bm}, {DNNL_ARG_DST, cm}};
        thread_local std::vector<uint8_t> scratch;
        if (mm.scratch_bytes > 0) {
            if (scratch.size() < mm.scratch_bytes) scratch.resize(mm.scratch_bytes);
            args[DNNL_ARG_SCRATCHPAD] = dnnl::memory(
                dnnl::memory::desc({static_cast<dnnl::memory::dim>(mm.scratch_bytes)}, dt::u8,
                                   dnnl::memory::format_tag::a),
                m.eng, scratch.data());
        }
        dnnl::stream s(m.eng);
        mm.prim.execute(s, args);
        s.wait();
    } catch (const dnnl::error& e) {
        if (e.status == dnnl_out_of_memory) throw std::bad_alloc();
        fail("internal error: oneDNN bf16 matmul (M={}, N={}, K={}, trans_b={}, lda={}, ldb={}, "
             "ldc={}): {}", M, N, K, trans_b, lda, ldb, ldc, e.what());
    }
}

void linear_forward_bf16(float* y, const bf16* xb, const bf16* wb, const float* b, int N, int IN,
                         int OUT) {
    if (N == 0) return;
    if (b) bias_rows(y, b, N, OUT);
    gemm_bf16(false, N, OUT, IN, xb, IN, wb, OUT, b ? 1.f : 0.f, y, OUT);
}

void linear_backward_bf16(float* dx, float* dw, float* db, const float* dy, const float* x,
                          const bf16* wb, int N, int IN, int OUT, bool accumulate_dx,
                          bf16* scratch) {
    if (N == 0) return;
    bf16* dyb = scratch;                                // (N, OUT)
    bf16* xt = scratch + static_cast<size_t>(N) * OUT;  // (IN, N)
    to_bf16(dyb, dy, static_cast<size_t>(N) * OUT);
    if (dx) gemm_bf16(true, N, IN, OUT, dyb, OUT, wb, OUT, accumulate_dx ? 1.f : 0.f, dx, IN);
    if (dw) {
        // xᵀ·dy with xᵀ formed while converting: oneDNN's bf16 kernels are fastest with a
        // non-transposed A.
        to_bf16_transposed(xt, x, N, IN, IN);
        gemm_bf16(false, IN, OUT, N, xt, N, dyb, OUT, 1.f, dw, OUT);
    }
    if (db) bias_backward(db, dy, N, OUT);
}

}  // namespace bertbench::ops
