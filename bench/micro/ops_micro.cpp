// Google Benchmark microbenchmarks of the engine's ops at BERT-base shapes (seq 128, batch 8:
// N = 1024 tokens, H = 768, I = 3072, 12 heads). Each benchmark first validates the op's output
// against a plain reference loop (double accumulation) and aborts on a mismatch, then times it.
// Not run in CI: `cmake --build build --target ops_micro && build/bench/ops_micro`.
#include <benchmark/benchmark.h>
#include <fmt/format.h>

#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <random>
#include <vector>

#include "ops/activation.hpp"
#include "ops/attention.hpp"
#include "ops/gemm.hpp"
#include "ops/layernorm.hpp"

namespace {

using namespace bertbench;
constexpr int kN = 1024, kH = 768, kI = 3072, kB = 8, kT = 128, kNH = 12;

std::vector<float> random_vec(size_t n, uint32_t seed, float scale = 1.0f) {
    std::mt19937 rng(seed);
    std::uniform_real_distribution<float> d(-scale, scale);
    std::vector<float> v(n);
    for (auto& x : v) x = d(rng);
    return v;
}

// numpy.isclose form: |got - want| <= atol + rtol |want|; aborts naming the worst element.
void check(const char* name, const std::vector<float>& got, const std::vector<double>& want,
           double atol, double rtol) {
    size_t bad = 0, worst = 0;
    double worst_err = -1;
    for (size_t i = 0; i < want.size(); ++i) {
        const double err = std::fabs(got[i] - want[i]) - (atol + rtol * std::fabs(want[i]));
        if (err > 0) ++bad;
        if (err > worst_err) worst_err = err, worst = i;
    }
    if (bad > 0) {
        std::fprintf(stderr, "%s: %zu bad of %zu, worst index %zu: got %g want %g\n", name, bad,
                     want.size(), worst, static_cast<double>(got[worst]), want[worst]);
        std::abort();
    }
}

void BM_LinearForward(benchmark::State& state) {
    const int in = static_cast<int>(state.range(0)), out = static_cast<int>(state.range(1));
    const auto x = random_vec(static_cast<size_t>(kN) * in, 1),
               w = random_vec(static_cast<size_t>(in) * out, 2, 0.05f), b = random_vec(out, 3);
    std::vector<float> y(static_cast<size_t>(kN) * out);
    ops::linear_forward(y.data(), x.data(), w.data(), b.data(), kN, in, out);
    std::vector<double> want(64 * static_cast<size_t>(out));  // first 64 rows
    for (int i = 0; i < 64; ++i)
        for (int o = 0; o < out; ++o) {
            double s = b[o];
            for (int k = 0; k < in; ++k)
                s += static_cast<double>(x[static_cast<size_t>(i) * in + k]) *
                     w[static_cast<size_t>(k) * out + o];
            want[static_cast<size_t>(i) * out + o] = s;
        }
    check("linear_forward", std::vector<float>(y.begin(), y.begin() + 64L * out), want, 1e-4, 1e-4);
    for (auto _ : state) {
        ops::linear_forward(y.data(), x.data(), w.data(), b.data(), kN, in, out);
        benchmark::DoNotOptimize(y.data());
    }
    state.counters["GFLOP/s"] =
        benchmark::Counter(2.0 * kN * in * out, benchmark::Counter::kIsIterationInvariantRate,
                           benchmark::Counter::kIs1000);
}
BENCHMARK(BM_LinearForward)
    ->Args({kH, kH})
    ->Args({kH, kI})
    ->Args({kI, kH})
    ->Unit(benchmark::kMillisecond)
    ->UseRealTime();

void BM_LinearBackward(benchmark::State& state) {
    const int in = static_cast<int>(state.range(0)), out = static_cast<int>(state.range(1));
    const auto x = random_vec(static_cast<size_t>(kN) * in, 1),
               w = random_vec(static_cast<size_t>(in) * out, 2, 0.05f),
               dy = random_vec(static_cast<size_t>(kN) * out, 3);
    std::vector<float> dx(static_cast<size_t>(kN) * in), dw(static_cast<size_t>(in) * out, 0.0f),
        db(out, 0.0f);
    ops::linear_backward(dx.data(), dw.data(), db.data(), dy.data(), x.data(), w.data(), kN, in,
                         out);
    std::vector<double> want_db(out, 0.0);
    for (int i = 0; i < kN; ++i)
        for (int o = 0; o < out; ++o) want_db[o] += dy[static_cast<size_t>(i) * out + o];
    check("linear_backward db", db, want_db, 1e-3, 1e-4);
    std::vector<double> want_dx(static_cast<size_t>(in));  // row 0 of dx = dy[0] · wᵀ
    for (int k = 0; k < in; ++k) {
        double s = 0;
        for (int o = 0; o < out; ++o)
            s += static_cast<double>(dy[o]) * w[static_cast<size_t>(k) * out + o];
        want_dx[k] = s;
    }
    check("linear_backward dx", std::vector<float>(dx.begin(), dx.begin() + in), want_dx, 1e-4,
          1e-4);
    for (auto _ : state) {
        ops::linear_backward(dx.data(), dw.data(), db.data(), dy.data(), x.data(), w.data(), kN, in,
                             out);
        benchmark::DoNotOptimize(dw.data());
    }
    state.counters["GFLOP/s"] =
        benchmark::Counter(4.0 * kN * in * out, benchmark::Counter::kIsIterationInvariantRate,
                           benchmark::Counter::kIs1000);
}
BENCHMARK(BM_LinearBackward)
    ->Args({kH, kH})
    ->Args({kH, kI})
    ->Args({kI, kH})
    ->Unit(benchmark::kMillisecond)
    ->UseRealTime();

void BM_LayerNormForward(benchmark::State& state) {
    const auto x = random_vec(static_cast<size_t>(kN) * kH, 4), g = random_vec(kH, 5),
               b = random_vec(kH, 6);
    std::vector<float> y(x.size()), mean(kN), rstd(kN);
    ops::layernorm_forward(y.data(), mean.data(), rstd.data(), x.data(), g.data(), b.data(), kN,
                           kH);
    std::vector<double> want(x.size());
    for (int i = 0; i < kN; ++i) {
        double m = 0, v = 0;
        for (int c = 0; c < kH; ++c) m += x[static_cast<size_t>(i) * kH + c];
        m /= kH;
        for (int c = 0; c < kH; ++c) v += std::pow(x[static_cast<size_t>(i) * kH + c] - m, 2);
        const double r = 1 / std::sqrt(v / kH + 1e-12);
        for (int c = 0; c < kH; ++c)
            want[static_cast<size_t>(i) * kH + c] =
                (x[static_cast<size_t>(i) * kH + c] - m) * r * g[c] + b[c];
    }
    check("layernorm_forward", y, want, 1e-5, 1e-4);
    for (auto _ : state) {
        ops::layernorm_forward(y.data(), mean.data(), rstd.data(), x.data(), g.data(), b.data(), kN,
                               kH);
        benchmark::DoNotOptimize(y.data());
    }
    state.SetBytesProcessed(static_cast<int64_t>(state.iterations()) * 2 * 4 * kN * kH);
}
BENCHMARK(BM_LayerNormForward)->Unit(benchmark::kMicrosecond)->UseRealTime();

void BM_Gelu(benchmark::State& state) {
    const bool backward = state.range(0) != 0;
    const size_t n = static_cast<size_t>(kN) * kI;
    const auto x = random_vec(n, 7, 3.0f), dy = random_vec(n, 8);
    std::vector<float> y(n);
    std::vector<double> want(n);
    if (backward) {
        ops::activation_backward(ops::Activation::gelu_tanh, y.data(), dy.data(), x.data(), n);
    } else {
        ops::activation_forward(ops::Activation::gelu_tanh, y.data(), x.data(), n);
    }
    for (size_t i = 0; i < n; ++i) {
        const double v = x[i], u = std::sqrt(2 / M_PI) * (v + 0.044715 * v * v * v),
                     t = std::tanh(u);
        want[i] = backward ? dy[i] * (0.5 * (1 + t) + 0.5 * v * (1 - t * t) * std::sqrt(2 / M_PI) *
                                                          (1 + 3 * 0.044715 * v * v))
                           : 0.5 * v * (1 + t);
    }
    check(backward ? "gelu_backward" : "gelu_forward", y, want, 1e-5, 1e-4);
    for (auto _ : state) {
        if (backward)
            ops::activation_backward(ops::Activation::gelu_tanh, y.data(), dy.data(), x.data(), n);
        else
            ops::activation_forward(ops::Activation::gelu_tanh, y.data(), x.data(), n);
        benchmark::DoNotOptimize(y.data());
    }
    state.SetBytesProcessed(static_cast<int64_t>(state.iterations()) * (backward ? 3 : 2) * 4 *
                            static_cast<int64_t>(n));
}
BENCHMARK(BM_Gelu)->Arg(0)->Arg(1)->Unit(benchmark::kMicrosecond)->UseRealTime();

void BM_AttentionForward(benchmark::State& state) {
    const auto q = random_vec(static_cast<size_t>(kN) * kH, 9),
               k = random_vec(static_cast<size_t>(kN) * kH, 10),
               v = random_vec(static_cast<size_t>(kN) * kH, 11);
    std::vector<int32_t> offsets(kB + 1);
    for (int b = 0; b <= kB; ++b) offsets[b] = b * kT;
    std::vector<size_t> pofs(kB + 1);
    const size_t np = ops::attention_prob_offsets(pofs.data(), offsets.data(), kB, kNH);
    std::vector<float> ctx(static_cast<size_t>(kN) * kH), probs(np);
    const ops::AttentionShape shape{offsets.data(), pofs.data(), kB, kNH, kH / kNH};
    ops::attention_forward<float>(ctx.data(), probs.data(), nullptr, nullptr, q.data(), k.data(),
                                  v.data(), shape, nullptr);
    // reference for sequence 0, head 0, all rows
    const int HS = kH / kNH;
    std::vector<double> want(static_cast<size_t>(kT) * HS);
    std::vector<float> got(want.size());
    for (int i = 0; i < kT; ++i) {
        std::vector<double> s(kT);
        double mx = -1e300, sum = 0;
        for (int j = 0; j < kT; ++j) {
            double d = 0;
            for (int c = 0; c < HS; ++c)
                d += static_cast<double>(q[static_cast<size_t>(i) * kH + c]) *
                     k[static_cast<size_t>(j) * kH + c];
            s[j] = d / std::sqrt(static_cast<double>(HS));
            mx = std::max(mx, s[j]);
        }
        for (int j = 0; j < kT; ++j) sum += s[j] = std::exp(s[j] - mx);
        for (int c = 0; c < HS; ++c) {
            double a = 0;
            for (int j = 0; j < kT; ++j) a += s[j] / sum * v[static_cast<size_t>(j) * kH + c];
            want[static_cast<size_t>(i) * HS + c] = a;
            got[static_cast<size_t>(i) * HS + c] = ctx[static_cast<size_t>(i) * kH + c];
        }
    }
    check("attention_forward", got, want, 1e-5, 1e-4);
    for (auto _ : state) {
        ops::attention_forward<float>(ctx.data(), probs.data(), nullptr, nullptr, q.data(),
                                      k.data(), v.data(), shape, nullptr);
        benchmark::DoNotOptimize(ctx.data());
    }
    state.counters["GFLOP/s"] =
        benchmark::Counter(4.0 * kB * kT * kT * kH, benchmark::Counter::kIsIterationInvariantRate,
                           benchmark::Counter::kIs1000);
}
BENCHMARK(BM_AttentionForward)->Unit(benchmark::kMillisecond)->UseRealTime();

}  // namespace

BENCHMARK_MAIN();
