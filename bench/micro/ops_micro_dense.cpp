// ops_micro's dense benchmarks (ops_micro.cpp says what every benchmark does and how to run them):
// the linear layers and GEMMs, the inference engines' dense layers in fp32, bf16 and int8,
// LayerNorm, GELU and the softmax.
#include <benchmark/benchmark.h>
#include <fmt/format.h>
#include <oneapi/dnnl/dnnl.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <map>
#include <oneapi/dnnl/dnnl.hpp>
#include <random>
#include <unordered_map>
#include <vector>

#include "core/philox.hpp"
#include "micro_util.hpp"
#include "model/config.hpp"
#include "model/param_table.hpp"
#include "ops/activation.hpp"
#include "ops/attention.hpp"
#include "ops/cross_entropy.hpp"
#include "ops/dropout.hpp"
#include "ops/embedding.hpp"
#include "ops/gemm.hpp"
#include "ops/int8.hpp"
#include "ops/layernorm.hpp"
#include "ops/matmul.hpp"
#include "ops/softmax.hpp"
#include "optim/optimizer.hpp"

namespace {

using namespace bertbench;
using namespace bertbench::micro;

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

// The first min(M, 4) rows of the product C(M,N) = A·B in double, A(i,k) and B(k,j) read
// through the accessors (a benchmark's check of its own result).
template <typename FA, typename FB>
std::vector<double> first_rows(int M, int N, int K, FA a, FB b) {
    std::vector<double> want(static_cast<size_t>(std::min(M, 4)) * N);
    for (size_t i = 0; i < static_cast<size_t>(std::min(M, 4)); ++i)
        for (size_t j = 0; j < static_cast<size_t>(N); ++j) {
            double sum = 0;
            for (size_t k = 0; k < static_cast<size_t>(K); ++k) sum += static_cast<double>(a(i, k)) * b(k, j);
            want[i * N + j] = sum;
        }
    return want;
}

// A GEMM benchmark's body: run() once, its C(M,N)'s first rows checked against first_rows of the
// accessors a, b, then run() timed.
template <typename Run, typename FA, typename FB>
void check_then_time(benchmark::State& state, const char* name, const Run& run, const std::vector<float>& c, int M,
                     int N, int K, FA a, FB b) {
    run();
    const std::vector<double> want = first_rows(M, N, K, a, b);
    check(name, std::vector<float>(c.begin(), c.begin() + static_cast<long>(want.size())), want, 1e-4, 1e-4);
    for (auto _ : state) {
        run();
        benchmark::DoNotOptimize(c.data());
    }
    set_gflops(state, 2.0 * M * N * K);
}

// C(M,N) = A(M,K)·Bᵀ with B stored (N,K), the MLM decoder's product (B = the embedding table):
// arg 3 picks the kernel, 0 = dnnl_sgemm, 1 = the cached oneDNN matmul primitive (ops/matmul.hpp).
// ops::gemm takes the matmul for M <= 256 with B >= 2^20 values (docs/engine.md, "GEMM library"):
// this benchmark is the measurement behind that rule.
void BM_GemmTransB(benchmark::State& state) {
    const int M = static_cast<int>(state.range(0)), N = static_cast<int>(state.range(1)),
              K = static_cast<int>(state.range(2));
    const bool primitive = state.range(3) != 0;
    const auto a = random_vec(static_cast<size_t>(M) * K, 4), b = random_vec(static_cast<size_t>(N) * K, 5);
    std::vector<float> c(static_cast<size_t>(M) * N);
    const auto run = [&] {
        if (primitive)
            ops::matmul(ops::MatmulType::f32, true, M, N, K, a.data(), K, b.data(), K, 0.f, c.data(), N);
        else
            dnnl_sgemm('N', 'T', M, N, K, 1.f, a.data(), K, b.data(), K, 0.f, c.data(), N);
    };
    check_then_time(state, primitive ? "gemm (matmul primitive)" : "gemm (dnnl_sgemm)", run, c, M, N, K,
                    [&](size_t i, size_t k) { return a[i * K + k]; }, [&](size_t k, size_t j) { return b[j * K + k]; });
}
BENCHMARK(BM_GemmTransB)
    ->ArgNames({"M", "N", "K", "matmul"})
    ->ArgsProduct({{20, 64, 128, 160, 640}, {kV}, {kH}, {0, 1}})
    ->Args({kT, kH, kI, 0})
    ->Args({kT, kH, kI, 1})
    ->Unit(benchmark::kMillisecond)
    ->UseRealTime();

// A weight gradient's product C(M,N) += Aᵀ·B with A stored (K, M): ops::gemm (padded = 1: which
// copies A with longer rows first when its rows lie a multiple of 4 KiB apart, gemm.cpp) against
// dnnl_sgemm on A where it lies (padded = 0). The demo's tied decoder (M = 4,096 vocabulary rows,
// N = 128 hidden, K = 416 masked positions), and rows 2 KiB apart (M = 512, left to sgemm); the
// measurement behind docs/engine.md's "GEMM library".
void BM_GemmTransA(benchmark::State& state) {
    const int M = static_cast<int>(state.range(0)), N = static_cast<int>(state.range(1)),
              K = static_cast<int>(state.range(2));
    const bool padded = state.range(3) != 0;
    const auto a = random_vec(static_cast<size_t>(K) * M, 6), b = random_vec(static_cast<size_t>(K) * N, 7);
    std::vector<float> c(static_cast<size_t>(M) * N, 0.f);
    const auto run = [&] {
        if (padded)
            ops::gemm(true, false, M, N, K, 1.f, a.data(), M, b.data(), N, 0.f, c.data(), N);
        else
            dnnl_sgemm('T', 'N', M, N, K, 1.f, a.data(), M, b.data(), N, 0.f, c.data(), N);
    };
    check_then_time(state, padded ? "gemm (ops::gemm, Aᵀ)" : "gemm (dnnl_sgemm, Aᵀ)", run, c, M, N, K,
                    [&](size_t i, size_t k) { return a[k * M + i]; }, [&](size_t k, size_t j) { return b[k * N + j]; });
}
BENCHMARK(BM_GemmTransA)
    ->ArgNames({"M", "N", "K", "padded"})
    ->ArgsProduct({{512, 1024, 4096}, {128}, {416}, {0, 1}})
    ->Unit(benchmark::kMillisecond)
    ->UseRealTime();

// An inference engine's linear layer with what follows it: the packed-weight matmul with its bias
// (ops::matmul_packed), then GELU (epi 1) or the residual add (epi 2) as our own pass over the
// output (fused = 0, what the engine does), or the same matmul with that step as a oneDNN post-op
// (fused = 1: eltwise_gelu_tanh, binary_add of the full residual). The measurement behind
// docs/engine.md's "Epilogue fusion".
void BM_PackedLinearEpilogue(benchmark::State& state) {
    const int in = static_cast<int>(state.range(0)), out = static_cast<int>(state.range(1));
    const int epi = static_cast<int>(state.range(2));
    const bool fused = state.range(3) != 0;
    const auto x = random_vec(static_cast<size_t>(kN) * in, 1),
               w = random_vec(static_cast<size_t>(in) * out, 2, 0.05f), b = random_vec(out, 3),
               res = random_vec(static_cast<size_t>(kN) * out, 4);
    std::vector<float> y(static_cast<size_t>(kN) * out), want(y.size());
    ops::PackedWeights packed(ops::MatmulType::f32);
    packed.add(0, in, out, false);
    packed.pack(w.data());
    const auto separate = [&](float* dst) {
        ops::matmul_packed(ops::MatmulType::f32, kN, out, in, x.data(), in, packed.at(0), dst, out,
                           b.data());
        if (epi == 1)
            ops::kernels().activation_forward(ops::Activation::gelu_tanh, dst, dst, y.size(), nullptr);
        else
            ops::kernels().dropout_add_forward(dst, dst, nullptr, 1.0f, res.data(), y.size(), nullptr);
    };
    using dnnl::memory;
    const dnnl::engine eng(dnnl::engine::kind::cpu, 0);
    dnnl::stream stream(eng);
    const memory::desc x_md({kN, in}, memory::data_type::f32, memory::format_tag::ab),
        y_md({kN, out}, memory::data_type::f32, memory::format_tag::ab),
        b_md({1, out}, memory::data_type::f32, memory::format_tag::ab),
        w_any({in, out}, memory::data_type::f32, memory::format_tag::any);
    dnnl::post_ops po;
    if (epi == 1)
        po.append_eltwise(1.0f, dnnl::algorithm::eltwise_gelu_tanh, 0.0f, 0.0f);
    else
        po.append_binary(dnnl::algorithm::binary_add, y_md);
    dnnl::primitive_attr attr;
    attr.set_post_ops(po);
    const dnnl::matmul::primitive_desc pd(dnnl::matmul::desc(x_md, w_any, b_md, y_md), attr, eng);
    memory w_plain({{in, out}, memory::data_type::f32, memory::format_tag::ab}, eng,
                   const_cast<float*>(w.data())),
        w_packed(pd.weights_desc(), eng);
    dnnl::reorder(w_plain, w_packed).execute(stream, w_plain, w_packed);
    const dnnl::matmul prim(pd);
    const std::unordered_map<int, memory> args = {
        {DNNL_ARG_SRC, memory(x_md, eng, const_cast<float*>(x.data()))},
        {DNNL_ARG_WEIGHTS, w_packed},
        {DNNL_ARG_BIAS, memory(b_md, eng, const_cast<float*>(b.data()))},
        {DNNL_ARG_DST, memory(y_md, eng, y.data())},
        {DNNL_ARG_ATTR_MULTIPLE_POST_OP(0) | DNNL_ARG_SRC_1,
         memory(y_md, eng, const_cast<float*>(res.data()))}};
    const auto run = [&] {
        if (fused) {
            prim.execute(stream, args);
            stream.wait();
        } else {
            separate(y.data());
        }
    };
    run();
    separate(want.data());
    check(fused ? "linear + post-op" : "linear + own pass", y,
          std::vector<double>(want.begin(), want.end()), 1e-5, 1e-5);
    for (auto _ : state) {
        run();
        benchmark::DoNotOptimize(y.data());
    }
    set_gflops(state, 2.0 * kN * in * out);
}
BENCHMARK(BM_PackedLinearEpilogue)
    ->ArgNames({"in", "out", "epi", "fused"})
    ->ArgsProduct({{kH}, {kI}, {1}, {0, 1}})
    ->ArgsProduct({{kI}, {kH}, {2}, {0, 1}})
    ->ArgsProduct({{kH}, {kH}, {2}, {0, 1}})
    ->Unit(benchmark::kMillisecond)
    ->UseRealTime();

// An inference engine's dense layer at `rows` tokens (128: one sequence of 128), by way: 0 the int8
// op (ops/int8.hpp: the product a block of rows at a time on each thread, each block dequantized
// while in cache), 1 the same int8 product over all rows by oneDNN's threads, then one dequantizing
// pass, 2 the bf16 packed matmul with its bias (the bf16 engine's), 3 the fp32 one, 4 the int8 op
// as FFN-in runs it (GELU and the per-row quantization of its output in the epilogue), 5 the int8
// product alone (oneDNN's threads; u8 activations × s8 weights, as the engine runs it), 6 the same
// with s8 activations (oneDNN then adds 128 to them in its kernels). `layers` 12: the int8 ways
// cycle through 12 copies of the weights, as a forward streams its layers' from memory (1: one
// copy, in cache from the second call on). GOP/s count 2·rows·IN·OUT.
void BM_DenseInference(benchmark::State& state) {
    const int in = static_cast<int>(state.range(0)), out = static_cast<int>(state.range(1));
    const int way = static_cast<int>(state.range(2)), rows = static_cast<int>(state.range(3)),
              layers = static_cast<int>(state.range(4));
    if (way == 2 && !ops::bf16_native()) {  // oneDNN has no bf16 matmul to pack for (AVX2)
        state.SkipWithError("this CPU has no bf16 units: no packed bf16 matmul");
        return;
    }
    const auto x = random_vec(static_cast<size_t>(rows) * in, 1), w = random_vec(static_cast<size_t>(in) * out, 2, 0.05f),
               b = random_vec(out, 3);
    std::vector<float> y(static_cast<size_t>(rows) * out), xs(rows);
    std::vector<uint8_t> xq(x.size()), yq(way == 4 ? y.size() : 0);
    std::vector<float> ys(way == 4 ? rows : 0);
    const ops::Int8Output ffn_in{.rows = yq.data(), .scale = ys.data()};
    const ops::Activation gelu = ops::Activation::gelu_tanh;
    ops::quantize_rows(xq.data(), xs.data(), x.data(), rows, in);
    const size_t wn = w.size();
    std::vector<float> ws(wn * static_cast<size_t>(layers));
    ops::Int8Weights iw;
    for (int l = 0; l < layers; ++l) {
        std::copy(w.begin(), w.end(), ws.begin() + static_cast<std::ptrdiff_t>(wn * l));
        iw.add(wn * l, in, out);
    }
    iw.quantize(ws.data());
    std::vector<ops::Int8Matrix> ms;
    for (int l = 0; l < layers; ++l) ms.push_back(iw.at(wn * l));
    size_t call = 0;
    std::vector<int32_t> acc(way == 1 || way >= 5 ? y.size() : 0);
    // way 6: the s8 activations, and the weights packed for s8 × s8
    std::vector<int8_t> xs8(way == 6 ? x.size() : 0), wq(way == 6 ? wn : 0);
    for (size_t i = 0; i < xs8.size(); ++i) xs8[i] = static_cast<int8_t>(xq[i] ^ 0x80);
    ops::PackedWeights packed(way == 6 ? ops::MatmulType::s8 : way == 2 ? ops::MatmulType::bf16 : ops::MatmulType::f32);
    std::vector<ops::bf16> xb(way == 2 ? x.size() : 0), wb(way == 2 ? w.size() : 0);
    if (way == 6) {
        std::vector<float> scale(out);
        ops::quantize_columns(wq.data(), scale.data(), w.data(), in, out, ops::int8_weight_max());
        packed.add(0, in, out, false);
        packed.pack(wq.data());
    } else if (way == 2 || way == 3) {
        packed.add(0, in, out, false);
        if (way == 2) {
            ops::to_bf16(xb.data(), x.data(), x.size());
            ops::to_bf16(wb.data(), w.data(), w.size());
            packed.pack(wb.data());
        } else {
            packed.pack(w.data());
        }
    }
    const auto run = [&] {
        const ops::Int8Matrix& m = ms[call++ % ms.size()];
        switch (way) {
            case 0:
                ops::linear_forward_int8(y.data(), ops::MatmulType::f32, nullptr, xq.data(),
                                         xs.data(), m, rows, in, out, {.bias = b.data()});
                break;
            case 1:
            case 5:
                ops::matmul(ops::MatmulType::u8, false, rows, out, in, xq.data(), in, m.slabs[0], -1, 0.f, acc.data(),
                            out, nullptr, ops::MatmulType::s32);
                if (way == 5) break;
#pragma omp parallel for schedule(static)
                for (int i = 0; i < rows; ++i)
                    for (int j = 0; j < out; ++j) {
                        const size_t at = static_cast<size_t>(i) * out + j;
                        y[at] = static_cast<float>(acc[at] - m.offset[j]) * (xs[i] * m.scale[j]) + b[j];
                    }
                break;
            case 6:
                ops::matmul(ops::MatmulType::s8, false, rows, out, in, xs8.data(), in, packed.at(0), -1, 0.f, acc.data(),
                            out, nullptr, ops::MatmulType::s32);
                break;
            case 4:
                ops::linear_forward_int8(nullptr, ops::MatmulType::f32, &ffn_in, xq.data(),
                                         xs.data(), m, rows, in, out,
                                         {.bias = b.data(), .act = &gelu});
                break;
            case 2:
                ops::matmul_packed(ops::MatmulType::bf16, rows, out, in, xb.data(), in, packed.at(0), y.data(), out,
                                   b.data());
                break;
            default:
                ops::matmul_packed(ops::MatmulType::f32, rows, out, in, x.data(), in, packed.at(0), y.data(), out,
                                   b.data());
        }
    };
    for (auto _ : state) {
        run();
        benchmark::DoNotOptimize(y.data());
        benchmark::DoNotOptimize(acc.data());
    }
    set_gflops(state, 2.0 * rows * in * out);
}
BENCHMARK(BM_DenseInference)
    ->ArgNames({"in", "out", "way", "rows", "layers"})
    ->ArgsProduct({{kH}, {kH}, {0, 1, 2, 3, 5, 6}, {128, kN}, {1}})
    ->ArgsProduct({{kH}, {kI}, {0, 1, 2, 3, 4, 5, 6}, {128, kN}, {1}})
    ->ArgsProduct({{kI}, {kH}, {0, 1, 2, 3, 5, 6}, {128, kN}, {1}})
    ->ArgsProduct({{kH}, {kI}, {0, 4}, {128, kN}, {12}})
    ->ArgsProduct({{kI}, {kH}, {0}, {128, kN}, {12}})
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
    constexpr int kRows = 4;  // rows 0..3 of dw = xᵀ · dy (dw started at zero)
    std::vector<double> want_dw(static_cast<size_t>(kRows) * out, 0.0);
    for (int i = 0; i < kN; ++i)
        for (int k = 0; k < kRows; ++k) {
            const double xik = x[static_cast<size_t>(i) * in + k];
            for (int o = 0; o < out; ++o)
                want_dw[static_cast<size_t>(k) * out + o] += xik * dy[static_cast<size_t>(i) * out + o];
        }
    check("linear_backward dw", dw, want_dw, 1e-3, 1e-4);
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
BENCHMARK(BM_Gelu)->ArgName("bwd")->Arg(0)->Arg(1)->Unit(benchmark::kMicrosecond)->UseRealTime();

void BM_LayerNormBackward(benchmark::State& state) {
    const auto x = random_vec(static_cast<size_t>(kN) * kH, 4), g = random_vec(kH, 5),
               b = random_vec(kH, 6), dy = random_vec(static_cast<size_t>(kN) * kH, 12);
    std::vector<float> y(x.size()), mean(kN), rstd(kN), dx(x.size()), dg(kH, 0.0f), db(kH, 0.0f);
    ops::layernorm_forward(y.data(), mean.data(), rstd.data(), x.data(), g.data(), b.data(), kN,
                           kH);
    ops::layernorm_backward(dx.data(), dg.data(), db.data(), dy.data(), x.data(), g.data(),
                            mean.data(), rstd.data(), kN, kH);
    // dxhat = dy·γ; dx = r·(dxhat − mean(dxhat) − xhat·mean(dxhat·xhat)); dγ = Σ dy·xhat; dβ = Σ dy
    std::vector<double> want_dx(x.size()), want_dg(kH, 0.0), want_db(kH, 0.0), xhat(kH);
    for (int i = 0; i < kN; ++i) {
        const float* xi = x.data() + static_cast<size_t>(i) * kH;
        const float* dyi = dy.data() + static_cast<size_t>(i) * kH;
        double m = 0, v = 0, s1 = 0, s2 = 0;
        for (int c = 0; c < kH; ++c) m += xi[c];
        m /= kH;
        for (int c = 0; c < kH; ++c) v += (xi[c] - m) * (xi[c] - m);
        const double r = 1 / std::sqrt(v / kH + 1e-12);
        for (int c = 0; c < kH; ++c) {
            xhat[c] = (xi[c] - m) * r;
            s1 += static_cast<double>(dyi[c]) * g[c];
            s2 += static_cast<double>(dyi[c]) * g[c] * xhat[c];
            want_dg[c] += dyi[c] * xhat[c];
            want_db[c] += dyi[c];
        }
        s1 /= kH;
        s2 /= kH;
        for (int c = 0; c < kH; ++c)
            want_dx[static_cast<size_t>(i) * kH + c] =
                r * (static_cast<double>(dyi[c]) * g[c] - s1 - xhat[c] * s2);
    }
    check("layernorm_backward dx", dx, want_dx, 1e-4, 1e-4);
    check("layernorm_backward dgamma", dg, want_dg, 1e-3, 1e-4);
    check("layernorm_backward dbeta", db, want_db, 1e-3, 1e-4);
    for (auto _ : state) {
        ops::layernorm_backward(dx.data(), dg.data(), db.data(), dy.data(), x.data(), g.data(),
                                mean.data(), rstd.data(), kN, kH);
        benchmark::DoNotOptimize(dx.data());
        benchmark::DoNotOptimize(dg.data());
    }
    set_bytes(state, 3.0 * 4 * kN * kH);  // read dy, x; write dx
}
BENCHMARK(BM_LayerNormBackward)->Unit(benchmark::kMicrosecond)->UseRealTime();

// Softmax over the attention probs of a batch: B·NH·T rows of T = 128, pre-scale 1/√64.
void BM_Softmax(benchmark::State& state) {
    const bool backward = state.range(0) != 0;
    constexpr int R = kB * kNH * kT, C = kT;
    const size_t n = static_cast<size_t>(R) * C;
    const float scale = 0.125f;
    const auto s = random_vec(n, 13, 20.0f), dp = random_vec(n, 14);
    std::vector<float> p(n), ds(n);
    ops::softmax_forward(p.data(), s.data(), R, C, scale);
    std::vector<double> want_p(n), want_ds(n);
    for (int r = 0; r < R; ++r) {
        const size_t o = static_cast<size_t>(r) * C;
        double mx = -HUGE_VAL, sum = 0, dot = 0;
        for (int c = 0; c < C; ++c) mx = std::max(mx, static_cast<double>(s[o + c]) * scale);
        for (int c = 0; c < C; ++c) sum += want_p[o + c] = std::exp(s[o + c] * 0.125 - mx);
        for (int c = 0; c < C; ++c) want_p[o + c] /= sum;
        // the backward reference uses the op's p (the input it is given), in double
        for (int c = 0; c < C; ++c) dot += static_cast<double>(dp[o + c]) * p[o + c];
        for (int c = 0; c < C; ++c) want_ds[o + c] = p[o + c] * (dp[o + c] - dot);
    }
    check("softmax_forward", p, want_p, 1e-7, 1e-5);
    if (backward) {
        ops::softmax_backward(ds.data(), dp.data(), p.data(), R, C);
        check("softmax_backward", ds, want_ds, 1e-7, 1e-4);
    }
    for (auto _ : state) {
        if (backward)
            ops::softmax_backward(ds.data(), dp.data(), p.data(), R, C);
        else
            ops::softmax_forward(p.data(), s.data(), R, C, scale);
        benchmark::DoNotOptimize(backward ? ds.data() : p.data());
    }
    set_bytes(state, (backward ? 3.0 : 2.0) * 4 * static_cast<double>(n));
}
BENCHMARK(BM_Softmax)->ArgName("bwd")->Arg(0)->Arg(1)->Unit(benchmark::kMicrosecond)->UseRealTime();

}  // namespace
