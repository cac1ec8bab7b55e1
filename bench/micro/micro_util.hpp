// What the ops_micro benchmarks share (ops_micro.cpp, ops_micro_dense.cpp): BERT-base's shapes,
// deterministic inputs, the checks each benchmark runs against its double-precision reference
// before it times, and the counters.
#pragma once

#include <benchmark/benchmark.h>

#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <random>
#include <vector>

#include "core/philox.hpp"
#include "ops/dropout.hpp"

namespace bertbench::micro {

inline constexpr int kN = 1024, kH = 768, kI = 3072, kB = 8, kT = 128, kNH = 12, kHS = kH / kNH;
inline constexpr int kP = 160, kV = 30522;
inline constexpr double kKeep = 0.9;

inline std::vector<float> random_vec(size_t n, uint32_t seed, float scale = 1.0f) {
    std::mt19937 rng(seed);
    std::uniform_real_distribution<float> d(-scale, scale);
    std::vector<float> v(n);
    for (auto& x : v) x = d(rng);
    return v;
}

// Uniform [lo, hi) from a hash of (seed, i): fast, parallel and deterministic, for big buffers.
inline void fill_hash_uniform(float* x, size_t n, uint64_t seed, float lo, float hi) {
#pragma omp parallel for schedule(static)
    for (long long i = 0; i < static_cast<long long>(n); ++i) {
        uint64_t z = seed * 0x9E3779B97F4A7C15ull + static_cast<uint64_t>(i) + 1;  // splitmix64
        z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
        z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
        z ^= z >> 31;
        x[i] = lo + (hi - lo) * static_cast<float>(static_cast<double>(z >> 40) * 0x1.0p-24);
    }
}

// numpy.isclose form: |got - want| <= atol + rtol |want| (NaN fails); aborts naming the worst.
inline void check(const char* name, const float* got, const std::vector<double>& want, double atol,
           double rtol) {
    size_t bad = 0, worst = 0;
    double worst_err = -1;
    for (size_t i = 0; i < want.size(); ++i) {
        const double diff = std::fabs(static_cast<double>(got[i]) - want[i]);
        const double tol = atol + rtol * std::fabs(want[i]);
        const bool ok = diff <= tol;
        const double err = ok ? diff - tol : HUGE_VAL;
        if (!ok) ++bad;
        if (err > worst_err) worst_err = err, worst = i;
    }
    if (bad > 0) {
        std::fprintf(stderr, "%s: %zu bad of %zu, worst index %zu: got %.9g want %.9g\n", name, bad,
                     want.size(), worst, static_cast<double>(got[worst]), want[worst]);
        std::abort();
    }
}
inline void check(const char* name, const std::vector<float>& got, const std::vector<double>& want,
           double atol, double rtol) {
    if (got.size() < want.size()) {
        std::fprintf(stderr, "%s: got %zu values, want %zu\n", name, got.size(), want.size());
        std::abort();
    }
    check(name, got.data(), want, atol, rtol);
}
// Exact equality of integer results (masks, argmax).
template <typename A, typename B>
inline void check_equal(const char* name, const A* got, const B* want, size_t n) {
    size_t bad = 0, first = 0;
    for (size_t i = 0; i < n; ++i)
        if (static_cast<long long>(got[i]) != static_cast<long long>(want[i]) && bad++ == 0)
            first = i;
    if (bad > 0) {
        std::fprintf(stderr, "%s: %zu bad of %zu, first index %zu: got %lld want %lld\n", name, bad,
                     n, first, static_cast<long long>(got[first]),
                     static_cast<long long>(want[first]));
        std::abort();
    }
}

inline void set_gflops(benchmark::State& state, double flops_per_iteration) {
    state.counters["GFLOP/s"] =
        benchmark::Counter(flops_per_iteration, benchmark::Counter::kIsIterationInvariantRate,
                           benchmark::Counter::kIs1000);
}
inline void set_bytes(benchmark::State& state, double bytes_per_iteration) {
    state.SetBytesProcessed(static_cast<int64_t>(state.iterations()) *
                            static_cast<int64_t>(bytes_per_iteration));
}

// Reference dropout decision for element e of a stream, from the documented definition
// (u = (word >> 8)·2⁻²⁴ < keep, word = Philox block e/4, word e%4), in double.
inline bool ref_keep(const ops::DropoutStream& s, uint64_t e) {
    const uint32_t w = philox::block(s.seed, s.step, s.site, e / 4)[e % 4];
    return static_cast<double>(w >> 8) * 0x1.0p-24 < s.keep_prob;
}

}  // namespace bertbench::micro
