// Backend conformance of the int8 inference ops (ops/int8.hpp) at odd sizes, two ways:
//  - exact arithmetic: the backend's result against a double-precision reference computed from
//    the very int8 values and scales the quantizers produced (the int32 sums are exact, so only
//    the float epilogue rounds: rtol 1e-6);
//  - quantization error against the fp32 layer, with the bound derived from the scales: rounding
//    moves each x(i,k) by at most sx(i)/2 and each W(k,j) by at most sw(j)/2, so
//      |y_int8 − y(i,j)| <= Σ_k (|W(k,j)|·sx(i)/2 + |x(i,k)|·sw(j)/2 + sx(i)·sw(j)/4)
//    (plus fp32 rounding), element by element.
// ctest runs this file a second time with oneDNN held to AVX2 (no VNNI: 7-bit weights, int8.hpp).
#include <algorithm>
#include <cstring>

#include "backend_ops_util.hpp"
#include "ops/activation.hpp"

namespace bertbench::backend {
namespace {

using BackendOpsInt8 = BackendOps;
INSTANTIATE_TEST_SUITE_P(All, BackendOpsInt8, ::testing::Values("cpu", "cuda"),
                         [](const ::testing::TestParamInfo<std::string>& p) { return p.param; });

struct Quantized {
    std::vector<int8_t> q;
    std::vector<float> scale;
};

// x (N, C) quantized per row by the backend
Quantized quantize(Backend& be, const std::vector<float>& x, int N, int C) {
    Buffer<float> dx(be, x);
    Buffer<int8_t> dq(be, x.size());
    Buffer<float> ds(be, static_cast<size_t>(N));
    BB_OP(be, quantize_rows)(dq.get(), ds.get(), dx.get(), N, C);
    return {dq.download(), ds.download()};
}

TEST_P(BackendOpsInt8, QuantizeRowsRoundsToTheNearestStep) {
    REQUIRE_OP(quantize_rows);
    const int N = 7, C = 301;
    std::vector<float> x = rand_f(static_cast<size_t>(N) * C, 71, 3.0);
    std::fill(x.begin() + 2 * C, x.begin() + 3 * C, 0.f);  // a row of zeros
    x[5 * C + 17] = 1e4f;                                   // an outlier
    const Quantized got = quantize(be(), x, N, C);
    for (int i = 0; i < N; ++i) {
        float amax = 0.f;
        for (int c = 0; c < C; ++c) amax = std::max(amax, std::fabs(x[i * C + c]));
        EXPECT_NEAR(got.scale[i], amax / 127.0, 1e-6 * amax / 127.0) << "row " << i;
        for (int c = 0; c < C; ++c) {
            const int q = got.q[i * C + c];
            ASSERT_LE(std::abs(q), 127);
            EXPECT_LE(std::fabs(double(q) * got.scale[i] - x[i * C + c]), got.scale[i] * (0.5 + 1e-5))
                << "row " << i << " col " << c;
        }
    }
    std::vector<float> bad = rand_f(C, 72);
    bad[9] = std::nanf("");
    EXPECT_THROW(quantize(be(), bad, 1, C), Error);
}

// One layer through Int8Weights and linear_forward_int8 (float y, GELU'd y, quantized GELU'd y).
TEST_P(BackendOpsInt8, LinearInt8IsExactOnTheQuantizedValues) {
    REQUIRE_OP(linear_forward_int8);
    const std::unique_ptr<ops::Int8Weights> weights = be().int8_weights();
    if (!weights) GTEST_SKIP() << "backend " << be().name() << " keeps no int8 weights";
    for (const int N : {1, 37, 200}) {
        const int IN = 67, OUT = 45;
        const std::vector<float> x = rand_f(static_cast<size_t>(N) * IN, 73, 2.0), b = rand_f(OUT, 74);
        // two kernels in one parameter buffer: the second at an offset, as in the model
        const std::vector<float> w = rand_f(static_cast<size_t>(IN) * OUT * 2 + 3, 75, 0.1);
        const size_t at = static_cast<size_t>(IN) * OUT + 3;
        std::unique_ptr<ops::Int8Weights> iw = be().int8_weights();
        iw->add(0, IN, OUT);
        iw->add(at, IN, OUT);
        iw->quantize(w.data());
        std::vector<int8_t> qw(static_cast<size_t>(IN) * OUT);
        std::vector<float> sw(OUT);
        ops::quantize_columns(qw.data(), sw.data(), w.data() + at, IN, OUT, ops::int8_weight_max());
        const Quantized qx = quantize(be(), x, N, IN);
        Buffer<int8_t> dxq(be(), qx.q);
        Buffer<float> dxs(be(), qx.scale), db(be(), b), dy(be(), static_cast<size_t>(N) * OUT);
        Buffer<int8_t> dyq(be(), static_cast<size_t>(N) * OUT);
        Buffer<float> dys(be(), static_cast<size_t>(N));
        std::vector<double> want(static_cast<size_t>(N) * OUT), gelu(want.size());
        for (int i = 0; i < N; ++i)
            for (int j = 0; j < OUT; ++j) {
                long long acc = 0;
                for (int k = 0; k < IN; ++k) acc += int(qx.q[i * IN + k]) * int(qw[k * OUT + j]);
                want[i * OUT + j] = double(acc) * qx.scale[i] * sw[j] + b[j];
                gelu[i * OUT + j] = ops::activation_value(ops::Activation::gelu_tanh, want[i * OUT + j]);
            }
        const std::string at_n = " N=" + std::to_string(N);
        BB_OP(be(), linear_forward_int8)(dy.get(), MatmulType::f32, nullptr, nullptr, dxq.get(), dxs.get(), iw->at(at), db.get(),
                                          N, IN, OUT, nullptr);
        const std::vector<float> y = dy.download();
        EXPECT_TRUE(all_close("int8 y" + at_n, y, want, 1e-6, 1e-6));
        // bf16 output: the float result rounded once
        Buffer<bf16> dyb(be(), static_cast<size_t>(N) * OUT);
        BB_OP(be(), linear_forward_int8)(dyb.get(), MatmulType::bf16, nullptr, nullptr, dxq.get(), dxs.get(), iw->at(at),
                                          db.get(), N, IN, OUT, nullptr);
        EXPECT_TRUE(same_bits(dyb.download(), narrow(y))) << "int8 bf16(y)" << at_n;
        const ops::Activation act = ops::Activation::gelu_tanh;
        BB_OP(be(), linear_forward_int8)(dy.get(), MatmulType::f32, nullptr, nullptr, dxq.get(), dxs.get(), iw->at(at), db.get(),
                                          N, IN, OUT, &act);
        EXPECT_TRUE(all_close("int8 gelu(y)" + at_n, dy.download(), gelu, 1e-6, 1e-6));
        // quantized output: within half a step of the GELU'd values
        BB_OP(be(), linear_forward_int8)(nullptr, MatmulType::f32, dyq.get(), dys.get(), dxq.get(), dxs.get(), iw->at(at), db.get(),
                                          N, IN, OUT, &act);
        const std::vector<int8_t> yq = dyq.download();
        const std::vector<float> ys = dys.download();
        for (int i = 0; i < N; ++i)
            for (int j = 0; j < OUT; ++j)
                ASSERT_LE(std::fabs(yq[i * OUT + j] * double(ys[i]) - gelu[i * OUT + j]), ys[i] * (0.5 + 1e-4) + 1e-6)
                    << "quantized gelu(y) row " << i << " col " << j << at_n;
    }
}

// The tied decoder's form: a kernel stored transposed, (OUT, IN) with one output channel per row,
// packed in column slabs (the last one narrower). Its quantization is the plain kernel's, and the
// slabbed product gives the one-slab product's bits (float, bf16 and activated outputs), which the
// test above ties to a double reference.
TEST_P(BackendOpsInt8, LinearInt8InSlabsOfATransposedKernelMatchesOneSlab) {
    REQUIRE_OP(linear_forward_int8);
    if (!be().int8_weights()) GTEST_SKIP() << "backend " << be().name() << " keeps no int8 weights";
    const int IN = 67, OUT = 45, slab = 16;  // slabs of 16, 16 and 13 output channels
    const size_t at = 5;
    const std::vector<float> wt = rand_f(at + static_cast<size_t>(OUT) * IN, 81, 0.1), b = rand_f(OUT, 82);
    std::vector<float> w(static_cast<size_t>(IN) * OUT);  // the same kernel, (IN, OUT)
    for (int j = 0; j < OUT; ++j)
        for (int k = 0; k < IN; ++k) w[k * OUT + j] = wt[at + j * IN + k];
    std::vector<int8_t> q(w.size()), qt(w.size());
    std::vector<float> s(OUT), st(OUT);
    ops::quantize_columns(q.data(), s.data(), w.data(), IN, OUT, ops::int8_weight_max());
    ops::quantize_columns_transposed(qt.data(), st.data(), wt.data() + at, IN, OUT, ops::int8_weight_max());
    EXPECT_EQ(s, st);
    std::vector<float> bad = w;  // a NaN anywhere in a channel, not only where it would be the max
    bad[3 * OUT + 7] = std::nanf("");
    EXPECT_THROW(ops::quantize_columns(q.data(), s.data(), bad.data(), IN, OUT, ops::int8_weight_max()), Error);
    for (int j = 0; j < OUT; ++j)
        for (int k = 0; k < IN; ++k) ASSERT_EQ(qt[j * IN + k], q[k * OUT + j]) << "channel " << j << " k " << k;
    std::unique_ptr<ops::Int8Weights> one = be().int8_weights(), slabbed = be().int8_weights();
    one->add(0, IN, OUT);
    one->quantize(w.data());
    slabbed->add(at, IN, OUT, true, slab);
    slabbed->quantize(wt.data());
    EXPECT_EQ(slabbed->at(at).slab_cols, slab);
    EXPECT_EQ(slabbed->at(at + 1).slabs, nullptr);  // no kernel there
    slabbed->add(at + IN, IN, 3);                    // registered, not yet quantized: never "no kernel"
    EXPECT_THROW(slabbed->at(at), Error);
    slabbed->quantize(wt.data());
    const ops::Activation act = ops::Activation::gelu_tanh;
    for (const int N : {1, 37, 200}) {
        const Quantized qx = quantize(be(), rand_f(static_cast<size_t>(N) * IN, 83, 2.0), N, IN);
        Buffer<int8_t> dxq(be(), qx.q);
        Buffer<float> dxs(be(), qx.scale), db(be(), b);
        for (const MatmulType type : {MatmulType::f32, MatmulType::bf16})
            for (const ops::Activation* a : {static_cast<const ops::Activation*>(nullptr), &act}) {
                const auto run = [&](const ops::Int8Weights& iw, size_t offset) {  // the output's bits
                    std::vector<uint32_t> bits(static_cast<size_t>(N) * OUT);
                    if (type == MatmulType::bf16) {
                        Buffer<bf16> y(be(), bits.size());
                        BB_OP(be(), linear_forward_int8)(y.get(), type, nullptr, nullptr, dxq.get(), dxs.get(), iw.at(offset),
                                                          db.get(), N, IN, OUT, a);
                        const std::vector<bf16> v = y.download();
                        for (size_t i = 0; i < v.size(); ++i) bits[i] = v[i].bits;
                    } else {
                        Buffer<float> y(be(), bits.size());
                        BB_OP(be(), linear_forward_int8)(y.get(), type, nullptr, nullptr, dxq.get(), dxs.get(), iw.at(offset),
                                                          db.get(), N, IN, OUT, a);
                        const std::vector<float> v = y.download();
                        std::memcpy(bits.data(), v.data(), v.size() * sizeof(float));
                    }
                    return bits;
                };
                EXPECT_EQ(run(*slabbed, at), run(*one, 0))
                    << "N=" << N << (type == MatmulType::bf16 ? " bf16" : " f32") << (a ? " gelu" : "");
            }
    }
}

TEST_P(BackendOpsInt8, LinearInt8StaysWithinTheScalesBoundOfFp32) {
    REQUIRE_OP(linear_forward_int8);
    std::unique_ptr<ops::Int8Weights> iw = be().int8_weights();
    if (!iw) GTEST_SKIP() << "backend " << be().name() << " keeps no int8 weights";
    const int N = 53, IN = 129, OUT = 77;
    const std::vector<float> x = rand_f(static_cast<size_t>(N) * IN, 76, 4.0),
                             w = rand_f(static_cast<size_t>(IN) * OUT, 77, 0.05), b = rand_f(OUT, 78);
    iw->add(0, IN, OUT);
    iw->quantize(w.data());
    std::vector<int8_t> qw(w.size());
    std::vector<float> sw(OUT);
    ops::quantize_columns(qw.data(), sw.data(), w.data(), IN, OUT, ops::int8_weight_max());
    const Quantized qx = quantize(be(), x, N, IN);
    Buffer<int8_t> dxq(be(), qx.q);
    Buffer<float> dxs(be(), qx.scale), db(be(), b), dy(be(), static_cast<size_t>(N) * OUT);
    BB_OP(be(), linear_forward_int8)(dy.get(), MatmulType::f32, nullptr, nullptr, dxq.get(), dxs.get(), iw->at(0), db.get(), N, IN,
                                      OUT, nullptr);
    const std::vector<float> got = dy.download();
    double worst = 0;  // the largest error as a fraction of its bound
    for (int i = 0; i < N; ++i)
        for (int j = 0; j < OUT; ++j) {
            double y = b[j], bound = 0;
            for (int k = 0; k < IN; ++k) {
                y += double(x[i * IN + k]) * w[k * OUT + j];
                bound += std::fabs(w[k * OUT + j]) * qx.scale[i] / 2 + std::fabs(x[i * IN + k]) * sw[j] / 2 +
                         double(qx.scale[i]) * sw[j] / 4;
            }
            const double err = std::fabs(got[i * OUT + j] - y);
            ASSERT_LE(err, bound + 1e-5 * std::fabs(y) + 1e-6) << "row " << i << " col " << j;
            worst = std::max(worst, err / bound);
        }
    // rounding errors add up like a random walk, far inside the worst case
    EXPECT_LT(worst, 0.5);
    std::cout << "[int8] " << ops::int8_gemm_impl() << ", weights in ±" << ops::int8_weight_max()
              << ": largest error " << worst << " of its bound\n";
}

}  // namespace
}  // namespace bertbench::backend
