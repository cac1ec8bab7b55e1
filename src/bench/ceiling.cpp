#include "bench/ceiling.hpp"

#include <immintrin.h>
#include <omp.h>

#include <algorithm>
#include <chrono>
#include <random>

#include "core/log.hpp"
#include "core/timing.hpp"
#include "ops/gemm.hpp"
#include "ops/int8.hpp"
#include "ops/matmul.hpp"

namespace bertbench::bench {
namespace {

double median(std::vector<double> v) {
    std::sort(v.begin(), v.end());
    const size_t n = v.size();
    return n % 2 ? v[n / 2] : 0.5 * (v[n / 2 - 1] + v[n / 2]);
}

// 12 independent accumulators cover the FMA latency (4-5 cycles) on 2 ports.
__attribute__((noinline)) float fma_loop(long iters, float seed) {
    __m256 acc[12];
    for (int j = 0; j < 12; ++j) acc[j] = _mm256_set1_ps(seed + static_cast<float>(j));
    const __m256 a = _mm256_set1_ps(0.999999f), b = _mm256_set1_ps(1e-7f);
    for (long it = 0; it < iters; ++it) {
        for (int j = 0; j < 12; ++j) acc[j] = _mm256_fmadd_ps(acc[j], a, b);
    }
    __m256 s = acc[0];
    for (int j = 1; j < 12; ++j) s = _mm256_add_ps(s, acc[j]);
    float out[8];
    _mm256_storeu_ps(out, s);
    return out[0];
}

// The same with 512-bit vectors, used when the CPU has AVX-512 (the sgemm then uses it too).
__attribute__((noinline, target("avx512f"))) float fma_loop_512(long iters, float seed) {
    __m512 acc[12];
    for (int j = 0; j < 12; ++j) acc[j] = _mm512_set1_ps(seed + static_cast<float>(j));
    const __m512 a = _mm512_set1_ps(0.999999f), b = _mm512_set1_ps(1e-7f);
    for (long it = 0; it < iters; ++it) {
        for (int j = 0; j < 12; ++j) acc[j] = _mm512_fmadd_ps(acc[j], a, b);
    }
    __m512 s = acc[0];
    for (int j = 1; j < 12; ++j) s = _mm512_add_ps(s, acc[j]);
    float out[16];
    _mm512_storeu_ps(out, s);
    return out[0];
}

}  // namespace

std::vector<GemmShape> bert_linear_shapes(int t, int h, int i) {
    // Forward: Y[t,out] = X[t,in] W[in,out]. Backward-data: dX[t,in] = dY[t,out] W^T.
    // Backward-weight: dW[in,out] = X^T[in,t] dY[t,out].
    struct Proj { const char* name; int in, out, count; };
    const Proj projs[] = {{"qkv+attn-out", h, h, 4}, {"ffn-in", h, i, 1}, {"ffn-out", i, h, 1}};
    std::vector<GemmShape> shapes;
    for (const auto& p : projs) {
        shapes.push_back({std::string(p.name) + " fwd", t, p.out, p.in, false, false, p.count});
        shapes.push_back({std::string(p.name) + " bwd-data", t, p.in, p.out, false, true, p.count});
        shapes.push_back({std::string(p.name) + " bwd-weight", p.in, p.out, t, true, false, p.count});
    }
    return shapes;
}

int fma_vector_width() { return __builtin_cpu_supports("avx512f") ? 16 : 8; }

double measure_fma_peak(int threads, double seconds) {
    const long iters = 20'000'000;  // 12*width*2*iters flops per thread per call
    const int width = fma_vector_width();
    double best = 0;
    const double end = now_s() + seconds;
    float sink = 0;
    while (now_s() < end) {
        const double t0 = now_s();
#pragma omp parallel num_threads(threads) reduction(+ : sink)
        sink += width == 16 ? fma_loop_512(iters, static_cast<float>(omp_get_thread_num()))
                            : fma_loop(iters, static_cast<float>(omp_get_thread_num()));
        const double dt = now_s() - t0;
        best = std::max(best, 12.0 * width * 2 * iters * threads / dt / 1e9);
    }
    if (sink == 12345.0f) best += 0;  // keep the loop's result alive
    return best;
}

Ceiling measure_ceiling(int threads, int tokens, int h, int i, int reps, ops::Precision dtype) {
    Ceiling c;
    c.threads = threads;
    c.dtype = dtype;
    c.fma_peak_gflops = measure_fma_peak(threads, 1.0);
    const int prev = omp_get_max_threads();
    omp_set_num_threads(threads);
    std::mt19937 rng(1);
    std::uniform_real_distribution<float> dist(-1, 1);
    double total_flops = 0, total_time = 0;
    for (const GemmShape& s : bert_linear_shapes(tokens, h, i)) {
        // int8 is inference only: its ceiling is the forward products', on the packed int8 kernels
        // the engine runs (ops/int8.hpp; int32 results, before the dequantizing epilogue).
        if (dtype == ops::Precision::int8 && (s.trans_a || s.trans_b)) continue;
        std::vector<float> a(static_cast<size_t>(s.m) * s.k), b(static_cast<size_t>(s.k) * s.n),
            out(static_cast<size_t>(s.m) * s.n);
        for (auto& x : a) x = dist(rng);
        for (auto& x : b) x = dist(rng);
        const int lda = s.trans_a ? s.m : s.k, ldb = s.trans_b ? s.k : s.n;
        std::vector<ops::bf16> ab, bb;
        if (dtype == ops::Precision::bf16) {
            ab.resize(a.size());
            bb.resize(b.size());
            if (s.trans_a)
                ops::to_bf16_transposed(ab.data(), a.data(), s.k, s.m, s.m);
            else
                ops::to_bf16(ab.data(), a.data(), a.size());
            ops::to_bf16(bb.data(), b.data(), b.size());
        }
        std::vector<uint8_t> aq;
        std::vector<int8_t> bq;
        std::vector<float> scales;
        ops::PackedWeights packed(ops::MatmulType::u8);
        std::vector<int32_t> acc;
        if (dtype == ops::Precision::int8) {
            aq.resize(a.size());
            bq.resize(b.size());
            scales.resize(static_cast<size_t>(std::max(s.m, s.n)));
            ops::quantize_rows(aq.data(), scales.data(), a.data(), s.m, s.k);
            ops::quantize_columns(bq.data(), scales.data(), b.data(), s.k, s.n, ops::int8_weight_max());
            packed.add(0, s.k, s.n, false);
            packed.pack(bq.data());
            acc.resize(out.size());
        }
        std::vector<double> times;
        for (int r = -1; r < reps; ++r) {
            const double t0 = now_s();
            if (dtype == ops::Precision::int8)
                ops::matmul(ops::MatmulType::u8, false, s.m, s.n, s.k, aq.data(), s.k, packed.at(0), -1, 0.f,
                            acc.data(), s.n, nullptr, ops::MatmulType::s32);
            else if (dtype == ops::Precision::bf16)
                ops::gemm_bf16(s.trans_b, s.m, s.n, s.k, ab.data(), s.k, bb.data(), ldb, 0.0f,
                               out.data(), s.n);
            else
                ops::gemm(s.trans_a, s.trans_b, s.m, s.n, s.k, 1.0f, a.data(), lda, b.data(), ldb,
                          0.0f, out.data(), s.n);
            if (r >= 0) times.push_back(now_s() - t0);
        }
        const double flops = 2.0 * s.m * s.n * s.k;
        const double best = *std::min_element(times.begin(), times.end());
        c.gemms.push_back({s, flops / median(times) / 1e9, flops / best / 1e9});
        total_flops += flops * s.count;
        total_time += best * s.count;  // a ceiling: a shared host only ever slows a repetition down
    }
    c.gemm_gflops = total_flops / total_time / 1e9;
    // fp32 GEMMs cannot outrun the fp32 FMA peak: the 1-s peak probe was slowed by other work
    if (dtype == ops::Precision::fp32 && c.gemm_gflops > c.fma_peak_gflops)
        log::warn("threads {}: sgemm measured {:.1f} GFLOP/s, above the FMA peak's {:.1f}: the machine "
                  "was busy during the 1-s peak probe, so that figure is low (rerun on a quiet machine)",
                  threads, c.gemm_gflops, c.fma_peak_gflops);
    omp_set_num_threads(prev);
    return c;
}

}  // namespace bertbench::bench
