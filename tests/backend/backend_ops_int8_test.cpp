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
    std::vector<uint8_t> q;  // each value plus 128, as quantize_rows stores it
    std::vector<float> scale;
    int value(size_t at) const { return int(q[at]) - 128; }
};

// x (N, C) quantized per row by the backend
Quantized quantize(Backend& be, const std::vector<float>& x, int N, int C) {
    Buffer<float> dx(be, x);
    Buffer<uint8_t> dq(be, x.size());
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
            const int q = got.value(i * C + c);
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
        Buffer<uint8_t> dxq(be(), qx.q);
        Buffer<float> dxs(be(), qx.scale), db(be(), b), dy(be(), static_cast<size_t>(N) * OUT);
        Buffer<uint8_t> dyq(be(), static_cast<size_t>(N) * OUT);
        Buffer<float> dys(be(), static_cast<size_t>(N));
        std::vector<double> want(static_cast<size_t>(N) * OUT), gelu(want.size());
        for (int i = 0; i < N; ++i)
            for (int j = 0; j < OUT; ++j) {
                long long acc = 0;
                for (int k = 0; k < IN; ++k) acc += qx.value(i * IN + k) * int(qw[k * OUT + j]);
                want[i * OUT + j] = double(acc) * qx.scale[i] * sw[j] + b[j];
                gelu[i * OUT + j] = ops::activation_value(ops::Activation::gelu_tanh, want[i * OUT + j]);
            }
        const std::string at_n = " N=" + std::to_string(N);
        BB_OP(be(), linear_forward_int8)(dy.get(), MatmulType::f32, nullptr, dxq.get(), dxs.get(), iw->at(at), N, IN,
                                         OUT, {.bias = db.get()});
        const std::vector<float> y = dy.download();
        EXPECT_TRUE(all_close("int8 y" + at_n, y, want, 1e-6, 1e-6));
        // bf16 output: the float result rounded once
        Buffer<bf16> dyb(be(), static_cast<size_t>(N) * OUT);
        BB_OP(be(), linear_forward_int8)(dyb.get(), MatmulType::bf16, nullptr, dxq.get(), dxs.get(), iw->at(at), N, IN,
                                         OUT, {.bias = db.get()});
        EXPECT_TRUE(same_bits(dyb.download(), narrow(y))) << "int8 bf16(y)" << at_n;
        const ops::Activation act = ops::Activation::gelu_tanh;
        BB_OP(be(), linear_forward_int8)(dy.get(), MatmulType::f32, nullptr, dxq.get(), dxs.get(), iw->at(at), N, IN,
                                         OUT, {.bias = db.get(), .act = &act});
        const std::vector<float> y_act = dy.download();
        // the epilogue's GELU feeds an 8-bit quantizer: its exp within 1.02e-4 (Exp::q8, vmath.hpp),
        // 1.2e-4 with the argument's rounding (KernelsInt8.QuantizeAndDequantizeMatchScalarFormulas)
        EXPECT_TRUE(all_close("int8 gelu(y)" + at_n, y_act, gelu, 1e-6, 1.2e-4));
        // with a residual (an inference layer's branch): y + r (or act(y) + r), bit for bit as
        // dropout_add_forward adds it to the product's output
        const std::vector<float> r = rand_f(static_cast<size_t>(N) * OUT, 79);
        Buffer<float> dr(be(), r);
        for (const ops::Activation* a : {static_cast<const ops::Activation*>(nullptr), &act}) {
            BB_OP(be(), linear_forward_int8)(dy.get(), MatmulType::f32, nullptr, dxq.get(), dxs.get(), iw->at(at), N,
                                             IN, OUT, {.bias = db.get(), .act = a, .residual = dr.get()});
            const std::vector<float> got = dy.download(), &base = a ? y_act : y;
            for (size_t i = 0; i < got.size(); ++i)
                ASSERT_EQ(got[i], base[i] + r[i]) << "int8 y + residual" << (a ? " gelu" : "") << at_n << " at " << i;
        }
        // quantized output: within half a step of the GELU'd values, plus the GELU's 1.2e-4
        const ops::Int8Output rows{.rows = dyq.get(), .scale = dys.get()};
        BB_OP(be(), linear_forward_int8)(nullptr, MatmulType::f32, &rows, dxq.get(), dxs.get(), iw->at(at), N, IN, OUT,
                                         {.bias = db.get(), .act = &act});
        const std::vector<uint8_t> yq = dyq.download();
        const std::vector<float> ys = dys.download();
        for (int i = 0; i < N; ++i)
            for (int j = 0; j < OUT; ++j)
                ASSERT_LE(std::fabs((yq[i * OUT + j] - 128) * double(ys[i]) - gelu[i * OUT + j]),
                          ys[i] * (0.5 + 1e-4) + 1.2e-4 * std::fabs(gelu[i * OUT + j]) + 1e-6)
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
    // u8 × s8 sums of more than 65,536 inputs could overflow int32: refused when registered
    EXPECT_THROW(be().int8_weights()->add(0, 65537, 1), Error);
    slabbed->add(at + IN, IN, 3);                    // registered, not yet quantized: never "no kernel"
    EXPECT_THROW(slabbed->at(at), Error);
    slabbed->quantize(wt.data());
    const ops::Activation act = ops::Activation::gelu_tanh;
    for (const int N : {1, 37, 200}) {
        const Quantized qx = quantize(be(), rand_f(static_cast<size_t>(N) * IN, 83, 2.0), N, IN);
        Buffer<uint8_t> dxq(be(), qx.q);
        Buffer<float> dxs(be(), qx.scale), db(be(), b);
        for (const MatmulType type : {MatmulType::f32, MatmulType::bf16})
            for (const ops::Activation* a : {static_cast<const ops::Activation*>(nullptr), &act}) {
                const auto run = [&](const ops::Int8Weights& iw, size_t offset) {  // the output's bits
                    std::vector<uint32_t> bits(static_cast<size_t>(N) * OUT);
                    if (type == MatmulType::bf16) {
                        Buffer<bf16> y(be(), bits.size());
                        BB_OP(be(), linear_forward_int8)(y.get(), type, nullptr, dxq.get(), dxs.get(), iw.at(offset), N,
                                                         IN, OUT, {.bias = db.get(), .act = a});
                        const std::vector<bf16> v = y.download();
                        for (size_t i = 0; i < v.size(); ++i) bits[i] = v[i].bits;
                    } else {
                        Buffer<float> y(be(), bits.size());
                        BB_OP(be(), linear_forward_int8)(y.get(), type, nullptr, dxq.get(), dxs.get(), iw.at(offset), N,
                                                         IN, OUT, {.bias = db.get(), .act = a});
                        const std::vector<float> v = y.download();
                        std::memcpy(bits.data(), v.data(), v.size() * sizeof(float));
                    }
                    return bits;
                };
                EXPECT_EQ(run(*slabbed, at), run(*one, 0))
                    << "N=" << N << (type == MatmulType::bf16 ? " bf16" : " f32") << (a ? " gelu" : "");
            }
        // quantized rows, whose scales need every slab of a row
        const auto rows = [&](const ops::Int8Weights& iw, size_t offset) {
            Buffer<uint8_t> yq(be(), static_cast<size_t>(N) * OUT);
            Buffer<float> scale(be(), static_cast<size_t>(N));
            const ops::Int8Output out{.rows = yq.get(), .scale = scale.get()};
            BB_OP(be(), linear_forward_int8)(nullptr, MatmulType::f32, &out, dxq.get(), dxs.get(), iw.at(offset), N, IN,
                                             OUT, {.bias = db.get(), .act = &act});
            return std::pair{yq.download(), scale.download()};
        };
        EXPECT_EQ(rows(*slabbed, at), rows(*one, 0)) << "quantized rows N=" << N;
    }
}

// The epilogue's LayerNorm (an int8 engine's attention output and FFN-out: bias, residual, then
// LayerNorm, the normalized rows quantized for the next product) gives the bits of the separate
// ops: the product with its residual, layernorm_forward, quantize_rows; in one slab or several.
TEST_P(BackendOpsInt8, LinearInt8LayerNormEpilogueIsTheSeparateOps) {
    REQUIRE_OP(linear_forward_int8);
    REQUIRE_OP(layernorm_forward);
    if (!be().int8_weights()) GTEST_SKIP() << "backend " << be().name() << " keeps no int8 weights";
    const int IN = 67, OUT = 45;
    const std::vector<float> w = rand_f(static_cast<size_t>(IN) * OUT, 101, 0.1),
                             b = rand_f(OUT, 102), g = rand_f(OUT, 103, 2.0),
                             beta = rand_f(OUT, 104);
    std::unique_ptr<ops::Int8Weights> one = be().int8_weights(), slabbed = be().int8_weights();
    one->add(0, IN, OUT);
    one->quantize(w.data());
    slabbed->add(0, IN, OUT, false, 16);
    slabbed->quantize(w.data());
    Buffer<float> db(be(), b), dg(be(), g), dbeta(be(), beta);
    for (const int N : {1, 37, 200}) {
        const std::string at_n = " N=" + std::to_string(N);
        const Quantized qx = quantize(be(), rand_f(static_cast<size_t>(N) * IN, 105, 2.0), N, IN);
        Buffer<uint8_t> dxq(be(), qx.q);
        Buffer<float> dxs(be(), qx.scale), dr(be(), rand_f(static_cast<size_t>(N) * OUT, 106, 3.0));
        const size_t n = static_cast<size_t>(N) * OUT;
        Buffer<float> v(be(), n), y(be(), n), mean(be(), N), rstd(be(), N);
        BB_OP(be(), linear_forward_int8)(v.get(), MatmulType::f32, nullptr, dxq.get(), dxs.get(), one->at(0), N, IN,
                                         OUT, {.bias = db.get(), .residual = dr.get()});
        BB_OP(be(), layernorm_forward)(y.get(), mean.get(), rstd.get(), v.get(), dg.get(), dbeta.get(), N, OUT,
                                       ops::kLayerNormEps, nullptr);
        const std::vector<float> want = y.download(), want_mean = mean.download(),
                                 want_rstd = rstd.download();
        const Quantized want_q = quantize(be(), want, N, OUT);
        for (const ops::Int8Weights* iw : {one.get(), slabbed.get()})
            for (const bool quantized : {false, true}) {
                const std::string what =
                    at_n + (iw == one.get() ? " one slab" : " slabs") + (quantized ? " +q" : "");
                Buffer<uint8_t> q(be(), n);
                Buffer<float> scale(be(), N), got(be(), n), got_mean(be(), N), got_rstd(be(), N);
                const ops::Int8Output out{.rows = q.get(), .scale = scale.get()};
                const ops::Int8Norm norm{dg.get(), dbeta.get(), got_mean.get(), got_rstd.get(),
                                         ops::kLayerNormEps};
                BB_OP(be(), linear_forward_int8)(got.get(), MatmulType::f32, quantized ? &out : nullptr, dxq.get(),
                                                 dxs.get(), iw->at(0), N, IN, OUT,
                                                 {.bias = db.get(), .residual = dr.get(), .norm = &norm});
                EXPECT_TRUE(same_bits(got.download(), want)) << "normalized rows" << what;
                EXPECT_TRUE(same_bits(got_mean.download(), want_mean)) << "mean" << what;
                EXPECT_TRUE(same_bits(got_rstd.download(), want_rstd)) << "rstd" << what;
                if (!quantized) continue;
                EXPECT_EQ(q.download(), want_q.q) << "quantized rows" << what;
                EXPECT_TRUE(same_bits(scale.download(), want_q.scale)) << "their scales" << what;
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
    Buffer<uint8_t> dxq(be(), qx.q);
    Buffer<float> dxs(be(), qx.scale), db(be(), b), dy(be(), static_cast<size_t>(N) * OUT);
    BB_OP(be(), linear_forward_int8)(dy.get(), MatmulType::f32, nullptr, dxq.get(), dxs.get(), iw->at(0), N, IN, OUT,
                                     {.bias = db.get()});
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

// The int8 attention, two ways as the dense layer above, on q, k and v quantized per row and head
// here (as the Q, K and V product's epilogue leaves them, each to ±int8_weight_max()): its formula
// (ops/int8.hpp) evaluated in double on those values, and against the double attention with a
// bound derived from the scales, per element of ctx (sequence b, head h, query row i, channel c;
// j over the kn keys; c_s = 1/√HS; p the exact probabilities):
//  - scores: q and k move by at most sq(i)/2, sk(j)/2 per element, so x(i,j) moves by at most
//      E(i) = max_j c_s·(sq(i)/2·(‖k(j)‖₁ + HS·sk(j)/2) + sk(j)/2·‖q(i)‖₁);
//  - the softmax: p̂(i,j) is within p(i,j)·e^{±2E(i)}·(1 ± 2.04e-4), the last its exp's error
//    (Exp::q8, vmath.hpp: 1.02e-4 in e and in Σe) (|p̂ − p| <= p·(e^{2E}·kExpQ8 − 1));
//  - v moves by at most sv(j)/2, and sp·u = p̂·sv ± sp/2 with sp <= max_j p(i,j)·sv(j)·e^{2E}/255:
//      |ctx − ctx_ref| <= Σ_j [|p̂ − p|·(|v(j,c)| + sv(j)/2) + p·sv(j)/2 + sp/2·(|v(j,c)|/sv(j) + 1/2)]
//    plus fp32 rounding.
constexpr double kExpQ8 = 1 + 2.04e-4;
TEST_P(BackendOpsInt8, AttentionInt8StaysWithinTheScalesBoundOfFp64) {
    REQUIRE_OP(attention_forward_int8);
    const int wmax = ops::int8_weight_max();
    struct Case {
        int NH, HS;
        std::vector<int32_t> offsets, key_lengths;  // empty: every row a key
    };
    const std::vector<Case> cases = {{3, 19, {0, 5, 42, 112}, {5, 30, 70}},  // padded rows as queries
                                     {2, 64, {0, 130, 147}, {}}};
    for (const Case& cs : cases) {
        const int NH = cs.NH, HS = cs.HS, H = NH * HS, B = static_cast<int>(cs.offsets.size()) - 1;
        const int N = cs.offsets[B];
        const int32_t* keys = cs.key_lengths.empty() ? nullptr : cs.key_lengths.data();
        std::vector<float> q = rand_f(static_cast<size_t>(N) * H, 81 + HS, 1.5),
                           k = rand_f(static_cast<size_t>(N) * H, 82 + HS, 1.5),
                           v = rand_f(static_cast<size_t>(N) * H, 83 + HS, 2.0);
        for (int c = 0; c < HS; ++c) q[static_cast<size_t>(7) * H + c] = 4.f * k[static_cast<size_t>(3) * H + c];  // a peaked row
        for (int c = 0; c < HS; ++c) v[static_cast<size_t>(2) * H + c] = 0.f;  // a key whose v is 0 (scale 0)
        // qkv (N, 3H) and scales (N, 3NH), the layout the op reads; the scales in double for the bound
        std::vector<int8_t> qkv(static_cast<size_t>(N) * 3 * H);
        std::vector<float> scales(static_cast<size_t>(N) * 3 * NH);
        const std::vector<float>* parts[3] = {&q, &k, &v};
        for (int r = 0; r < N; ++r)
            for (int part = 0; part < 3; ++part)
                for (int h = 0; h < NH; ++h) {
                    const float* x = parts[part]->data() + static_cast<size_t>(r) * H + h * HS;
                    float m = 0;
                    for (int c = 0; c < HS; ++c) m = std::max(m, std::fabs(x[c]));
                    const size_t g = static_cast<size_t>(r) * 3 * NH + static_cast<size_t>(part) * NH + h;
                    scales[g] = m / static_cast<float>(wmax);
                    for (int c = 0; c < HS; ++c)
                        qkv[g * HS + c] = static_cast<int8_t>(m > 0 ? std::nearbyint(x[c] * (static_cast<float>(wmax) / m)) : 0);
                }
        const AttentionReference ref = attention_reference(cs.offsets, keys, NH, HS, wide(q), wide(k), wide(v),
                                                           std::vector<double>(q.size()), nullptr);
        const auto doffs = put(cs.offsets);
        const auto dkeys = put(cs.key_lengths.empty() ? std::vector<int32_t>(1) : cs.key_lengths);
        const auto dpofs = put(ref.pofs);
        const ops::AttentionShape s{doffs->get(), dpofs->get(), B, NH, HS, keys ? dkeys->get() : nullptr};
        const auto dqkv = put(qkv);
        const auto dscales = put(scales);
        const auto dctx = put(std::vector<float>(q.size(), -9.f));
        BB_OP(be(), attention_forward_int8)(dctx->get(), dqkv->get(), dscales->get(), s);
        const std::vector<float> got = dctx->download();
        const double cs_ = 1.0 / std::sqrt(double(HS));
        double worst = 0;  // the largest error against the double attention, as a fraction of its bound
        for (int b = 0; b < B; ++b)
            for (int h = 0; h < NH; ++h) {
                const int o = cs.offsets[b], t = cs.offsets[b + 1] - o, kn = keys ? keys[b] : t;
                const auto at = [&](int row, int c) { return static_cast<size_t>(o + row) * H + h * HS + c; };
                const auto sc = [&](int part, int row) {
                    return double(scales[static_cast<size_t>(o + row) * 3 * NH + static_cast<size_t>(part) * NH + h]);
                };
                const auto qv = [&](int part, int row, int c) {
                    return double(qkv[static_cast<size_t>(o + row) * 3 * H + static_cast<size_t>(part) * H + h * HS + c]);
                };
                const auto l1 = [&](const std::vector<float>& x, int row) {
                    double m = 0;
                    for (int c = 0; c < HS; ++c) m += std::fabs(double(x[at(row, c)]));
                    return m;
                };
                for (int i = 0; i < t; ++i) {
                    const std::string where = "HS=" + std::to_string(HS) + " sequence " + std::to_string(b) + " head " +
                                              std::to_string(h) + " row " + std::to_string(i);
                    // the op's formula in double
                    std::vector<double> e(kn);
                    for (int j = 0; j < kn; ++j) {
                        double dot = 0;
                        for (int c = 0; c < HS; ++c) dot += qv(0, i, c) * qv(1, j, c);
                        e[j] = dot * (sc(0, i) * cs_) * sc(1, j);
                    }
                    const double xmax = *std::max_element(e.begin(), e.end());
                    double sum = 0, m = 0;
                    for (int j = 0; j < kn; ++j) {
                        sum += e[j] = std::exp(e[j] - xmax);
                        m = std::max(m, e[j] * sc(2, j));
                    }
                    const double sp = m / (255 * sum);
                    // the bound's terms per key
                    const double* p = ref.probs.data() + ref.pofs[b] + (static_cast<size_t>(h) * t + i) * kn;
                    double E = 0, spb = 0;
                    for (int j = 0; j < kn; ++j) {
                        const double sq = sc(0, i), sk = sc(1, j);
                        E = std::max(E, cs_ * (sq / 2 * (l1(k, j) + HS * sk / 2) + sk / 2 * l1(q, i)));
                        spb = std::max(spb, p[j] * sc(2, j));
                    }
                    spb *= std::exp(2 * E) * kExpQ8 / 255;
                    for (int c = 0; c < HS; ++c) {
                        double want = 0, mag = 0, bound = 0, flips = 0;
                        for (int j = 0; j < kn; ++j) {
                            const double y = m > 0 ? e[j] * sc(2, j) * (255 / m) : 0, u = std::nearbyint(y);
                            want += u * qv(2, j, c);
                            mag += std::fabs(u * qv(2, j, c));
                            // y/m within 2.04e-4 of ≤ 1 in the op: 0.053 of a step; u may round the
                            // other way within that of a half step
                            if (std::fabs(y - std::floor(y) - 0.5) <= 0.053) flips += std::fabs(qv(2, j, c));
                            const double av = std::fabs(double(v[at(j, c)])), sv = sc(2, j);
                            bound += p[j] * (std::exp(2 * E) * kExpQ8 - 1) * (av + sv / 2) + p[j] * sv / 2 +
                                     spb / 2 * ((sv > 0 ? av / sv : 0) + 0.5);
                        }
                        // the scale's 2.04e-4 and fp32 rounding, and the u8 values near a half step
                        EXPECT_NEAR(got[at(i, c)], sp * want, sp * (2.2e-4 * mag + flips)) << where << " channel " << c;
                        const double err = std::fabs(got[at(i, c)] - ref.ctx[at(i, c)]);
                        ASSERT_LE(err, bound + 1e-5 * std::fabs(ref.ctx[at(i, c)]) + 1e-6) << where << " channel " << c;
                        worst = std::max(worst, err / bound);
                    }
                }
            }
        EXPECT_LT(worst, 0.5);  // rounding errors add up like a random walk, far inside the worst case
        std::cout << "[int8 attention] HS=" << HS << ", q, k and v in ±" << wmax << ": largest error " << worst
                  << " of its bound\n";
    }
}

// The Q, K and V product's epilogue: yq_group quantizes each group of a row's columns on its own,
// to ±int8_weight_max(), bit for bit as quantize_row_s8 does a row of that group's values.
TEST_P(BackendOpsInt8, LinearInt8QuantizesEachGroupOfColumns) {
    REQUIRE_OP(linear_forward_int8);
    std::unique_ptr<ops::Int8Weights> iw = be().int8_weights();
    if (!iw) GTEST_SKIP() << "backend " << be().name() << " keeps no int8 weights";
    const int N = 37, IN = 45, G = 13, parts = 3, OUT = parts * 2 * G;  // 3 kernels of 2 groups side by side
    const std::vector<float> x = rand_f(static_cast<size_t>(N) * IN, 91, 2.0);
    // the parameters: kernel 0, bias 0, kernel 1, bias 1, ... (a layer's Q, K, V and their biases)
    const size_t kn = static_cast<size_t>(IN) * (OUT / parts), bn = OUT / parts;
    const std::vector<float> params = rand_f(parts * (kn + bn), 92, 0.2);
    const size_t kernels[] = {0, kn + bn, 2 * (kn + bn)}, biases[] = {kn, 2 * kn + bn, 3 * kn + 2 * bn};
    iw->add_side_by_side(kernels, biases, IN, OUT / parts);
    iw->quantize(params.data());
    const ops::Int8Matrix m = iw->at(0);
    ASSERT_NE(m.bias, nullptr);
    // the same product as one plain kernel (K, OUT) and bias (OUT) side by side, its float y
    std::vector<float> joined(static_cast<size_t>(IN) * OUT), bias(OUT);
    for (int p = 0; p < parts; ++p) {
        for (int r = 0; r < IN; ++r)
            std::copy_n(params.data() + kernels[p] + r * bn, bn, joined.data() + static_cast<size_t>(r) * OUT + p * bn);
        std::copy_n(params.data() + biases[p], bn, bias.data() + p * bn);
    }
    std::unique_ptr<ops::Int8Weights> plain = be().int8_weights();
    plain->add(0, IN, OUT);
    plain->quantize(joined.data());
    const Quantized qx = quantize(be(), x, N, IN);
    Buffer<uint8_t> dxq(be(), qx.q);
    Buffer<int8_t> dyq(be(), static_cast<size_t>(N) * OUT);
    Buffer<float> dxs(be(), qx.scale), db(be(), bias), dy(be(), static_cast<size_t>(N) * OUT),
        dys(be(), static_cast<size_t>(N) * OUT / G);
    BB_OP(be(), linear_forward_int8)(dy.get(), MatmulType::f32, nullptr, dxq.get(), dxs.get(), plain->at(0), N, IN, OUT,
                                     {.bias = db.get()});
    const ops::Int8Output groups{.groups = dyq.get(), .group = G, .scale = dys.get()};
    BB_OP(be(), linear_forward_int8)(nullptr, MatmulType::f32, &groups, dxq.get(), dxs.get(), m, N, IN, OUT,
                                     {.bias = m.bias});
    const std::vector<float> y = dy.download(), ys = dys.download();
    const std::vector<int8_t> yq = dyq.download();
    const int wmax = ops::int8_weight_max();
    for (int i = 0; i < N; ++i)
        for (int g = 0; g < OUT / G; ++g) {
            std::vector<int8_t> want(G);
            float scale = -1;
            ASSERT_TRUE(ops::kernels().quantize_row_s8(want.data(), &scale, y.data() + static_cast<size_t>(i) * OUT + g * G,
                                                       G, wmax));
            EXPECT_EQ(ys[static_cast<size_t>(i) * (OUT / G) + g], scale) << "row " << i << " group " << g;
            EXPECT_TRUE(std::equal(want.begin(), want.end(), yq.begin() + static_cast<long>(i) * OUT + g * G))
                << "row " << i << " group " << g;
        }
}

}  // namespace
}  // namespace bertbench::backend
