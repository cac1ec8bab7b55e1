// Backend conformance (ggml's test-backend-ops idea): every op of the interface (backend.hpp), on
// every backend this build has, against the double-precision instantiation of the CPU ops
// (ops/*.hpp) on the same float inputs, at odd sizes. A backend that lacks an op is reported as a
// skip naming the op; the CUDA cases skip with a reason where the build or the machine has no GPU.
// Tolerances (numpy.isclose form): elementwise ops atol 1e-6, rtol 1e-5; row reductions and
// GEMMs atol 1e-5, rtol 1e-4 (fp32 sums of up to 257 terms against double); a bf16 GEMM output
// rtol 2^-8 more (one bf16 rounding). Exact: dropout masks (Philox, the CPU's bits), bf16
// conversions and the embeddings (the CPU's order of additions), on every backend.
#include "backend_ops_util.hpp"

namespace bertbench::backend {
namespace {

INSTANTIATE_TEST_SUITE_P(All, BackendOps, ::testing::Values("cpu", "cuda"),
                         [](const ::testing::TestParamInfo<std::string>& p) { return p.param; });

TEST_P(BackendOps, Gemm) {
    REQUIRE_OP(gemm);
    struct Shape {
        int M, N, K;
    };
    for (const MatmulType type : {MatmulType::f32, MatmulType::bf16})
        for (const MatmulType c_type : {MatmulType::f32, MatmulType::bf16})
            for (const bool ta : {false, true})
                for (const bool tb : {false, true})
                    for (const Shape s : {Shape{1, 1, 1}, Shape{7, 13, 37}, Shape{33, 17, 65}, Shape{130, 129, 257}})
                        for (const bool with_bias : {false, true})
                            for (const float beta : {0.f, 1.f}) {
                                if (beta != 0.f && (with_bias || c_type == MatmulType::bf16)) continue;
                                const int lda = (ta ? s.M : s.K) + 3, ldb = (tb ? s.K : s.N) + 1, ldc = s.N + 2;
                                const size_t na = static_cast<size_t>(ta ? s.K : s.M) * lda;
                                const size_t nb = static_cast<size_t>(tb ? s.N : s.K) * ldb;
                                const size_t nc = static_cast<size_t>(s.M) * ldc;
                                std::vector<float> a = rand_f(na, 1 + s.M), b = rand_f(nb, 2 + s.N),
                                                   c0 = rand_f(nc, 3), bias = rand_f(s.N, 4);
                                const bool bf = type == MatmulType::bf16;
                                if (bf) {  // the operands the reference sees are the bf16 values
                                    for (float& x : a) x = ops::round_bf16(x);
                                    for (float& x : b) x = ops::round_bf16(x);
                                }
                                std::vector<double> want(static_cast<size_t>(s.M) * s.N);
                                for (int m = 0; m < s.M; ++m)
                                    for (int n = 0; n < s.N; ++n) {
                                        double acc = beta != 0.f ? c0[static_cast<size_t>(m) * ldc + n] : 0.0;
                                        if (with_bias) acc += bias[n];
                                        for (int k = 0; k < s.K; ++k)
                                            acc += double(ta ? a[static_cast<size_t>(k) * lda + m]
                                                             : a[static_cast<size_t>(m) * lda + k]) *
                                                   double(tb ? b[static_cast<size_t>(n) * ldb + k]
                                                             : b[static_cast<size_t>(k) * ldb + n]);
                                        want[static_cast<size_t>(m) * s.N + n] = acc;
                                    }
                                const auto db = put(bias);
                                std::vector<double> got(want.size());
                                const std::string name = fmt::format("gemm {}->{} ta={} tb={} {}x{}x{} bias={} beta={}",
                                                                     bf ? "bf16" : "fp32",
                                                                     c_type == MatmulType::bf16 ? "bf16" : "fp32", ta,
                                                                     tb, s.M, s.N, s.K, with_bias, beta);
                                const auto run = [&](const void* A, const void* B, void* C) {
                                    BB_OP(be(), gemm)(type, ta, tb, s.M, s.N, s.K, A, lda, B, ldb, beta, C, ldc,
                                                      with_bias ? db->get() : nullptr, c_type);
                                };
                                const auto product = [&](const void* A, const void* B) {  // into got
                                    if (c_type == MatmulType::bf16) {
                                        const auto dc = put(std::vector<bf16>(nc));
                                        run(A, B, dc->get());
                                        const std::vector<bf16> c = dc->download();
                                        for (size_t i = 0; i < got.size(); ++i)
                                            got[i] = ops::to_float(c[i / s.N * ldc + i % s.N]);
                                    } else {
                                        const auto dc = put(c0);
                                        run(A, B, dc->get());
                                        const std::vector<float> c = dc->download();
                                        for (size_t i = 0; i < got.size(); ++i) got[i] = c[i / s.N * ldc + i % s.N];
                                    }
                                };
                                if (bf) {
                                    const auto da = put(narrow(a));
                                    const auto dbm = put(narrow(b));
                                    product(da->get(), dbm->get());
                                } else {
                                    const auto da = put(a);
                                    const auto dbm = put(b);
                                    product(da->get(), dbm->get());
                                }
                                const double rtol = kRtolSum + (c_type == MatmulType::bf16 ? 1.0 / 256 : 0.0);
                                EXPECT_TRUE(all_close(name, got, want, kAtolSum, rtol));
                            }
}

TEST_P(BackendOps, ToBf16SameBitsAsTheCpu) {
    REQUIRE_OP(to_bf16);
    std::vector<float> x = rand_f(4099, 5, 1e3);
    const float inf = std::numeric_limits<float>::infinity();
    const float specials[] = {0.f, -0.f, inf, -inf, std::numeric_limits<float>::quiet_NaN(), 1.00390625f,
                              1.01171875f, 3.4e38f, 1e-40f};  // ties to even up and down, a denormal
    for (size_t i = 0; i < std::size(specials); ++i) x[i] = specials[i];
    const auto dx = put(x);
    const auto dy = put(std::vector<bf16>(x.size()));
    BB_OP(be(), to_bf16)(dy->get(), dx->get(), x.size());
    EXPECT_TRUE(same_bits(dy->download(), narrow(x)));
}

TEST_P(BackendOps, BiasBackward) {
    REQUIRE_OP(bias_backward);
    const int N = 131, C = 37;
    const std::vector<float> dy = rand_f(static_cast<size_t>(N) * C, 6), db0 = rand_f(C, 7);
    std::vector<double> want = wide(db0);
    ops::bias_backward(want.data(), wide(dy).data(), N, C);
    const auto ddy = put(dy);
    const auto ddb = put(db0);
    BB_OP(be(), bias_backward)(ddb->get(), ddy->get(), N, C);
    EXPECT_TRUE(all_close("db", ddb->download(), want, kAtolSum, kRtolSum));
}

TEST_P(BackendOps, LayerNorm) {
    REQUIRE_OP(layernorm_forward);
    REQUIRE_OP(layernorm_backward);
    for (const int C : {7, 48, 257, 1030}) {  // C = 1 is degenerate (var 0, rstd 1e6)
        const int N = C == 257 ? 300 : 13;  // 300: the CUDA column sums' segments of 128 rows
        const size_t n = static_cast<size_t>(N) * C;
        const std::vector<float> x = rand_f(n, 8 + C, 3.0), g = rand_f(C, 9), b = rand_f(C, 10), dy = rand_f(n, 11);
        const std::vector<float> dg0 = rand_f(C, 12), db0 = rand_f(C, 13), dx0 = rand_f(n, 14);
        std::vector<double> y(n), mean(N), rstd(N);
        ops::layernorm_forward<double>(y.data(), mean.data(), rstd.data(), wide(x).data(), wide(g).data(),
                                       wide(b).data(), N, C, ops::kLayerNormEps, nullptr);
        const auto dx_ = put(x);
        const auto dg_ = put(g);
        const auto db_ = put(b);
        const auto ddy = put(dy);
        const auto dyo = put(std::vector<float>(n));
        const auto dm = put(std::vector<float>(N));
        const auto dr = put(std::vector<float>(N));
        const auto dyb = put(std::vector<bf16>(n));
        BB_OP(be(), layernorm_forward)(dyo->get(), dm->get(), dr->get(), dx_->get(), dg_->get(), db_->get(), N, C,
                                       ops::kLayerNormEps, dyb->get());
        const std::vector<float> got_y = dyo->download();
        EXPECT_TRUE(all_close("ln y C=" + std::to_string(C), got_y, y, kAtolSum, kRtolSum));
        EXPECT_TRUE(all_close("ln mean", dm->download(), mean, kAtolSum, kRtolSum));
        EXPECT_TRUE(all_close("ln rstd", dr->download(), rstd, kAtolSum, kRtolSum));
        EXPECT_TRUE(same_bits(dyb->download(), narrow(got_y))) << "ln yb = bf16(y), C=" << C;
        for (const bool acc : {false, true}) {
            // the backward from the backend's own saved mean/rstd, against the double one's
            std::vector<double> dx = wide(dx0), dg = wide(dg0), dbeta = wide(db0);
            ops::layernorm_backward<double>(dx.data(), dg.data(), dbeta.data(), wide(dy).data(), wide(x).data(),
                                            wide(g).data(), mean.data(), rstd.data(), N, C, acc);
            const auto ddx = put(dx0);
            const auto ddg = put(dg0);
            const auto ddbeta = put(db0);
            BB_OP(be(), layernorm_backward)(ddx->get(), ddg->get(), ddbeta->get(), ddy->get(), dx_->get(), dg_->get(),
                                            dm->get(), dr->get(), N, C, acc);
            EXPECT_TRUE(all_close("ln dx", ddx->download(), dx, kAtolSum, kRtolSum)) << "acc " << acc;
            EXPECT_TRUE(all_close("ln dgamma", ddg->download(), dg, kAtolSum, kRtolSum));
            EXPECT_TRUE(all_close("ln dbeta", ddbeta->download(), dbeta, kAtolSum, kRtolSum));
        }
    }
}

TEST_P(BackendOps, Activations) {
    REQUIRE_OP(activation_forward);
    REQUIRE_OP(activation_backward);
    const int N = 131, C = 33;  // a partial 64-row chunk of the bias gradient
    const size_t n = static_cast<size_t>(N) * C;
    for (const ops::Activation act : {ops::Activation::gelu_tanh, ops::Activation::gelu_erf, ops::Activation::relu}) {
        std::vector<float> x = rand_f(n, 15, 6.0);
        x[2] = 100.f, x[3] = -100.f;
        const std::vector<float> dy = rand_f(n, 16), db0 = rand_f(C, 17);
        std::vector<double> y(n), dx(n), db = wide(db0);
        ops::activation_forward<double>(act, y.data(), wide(x).data(), n, nullptr);
        ops::activation_backward<double>(act, dx.data(), wide(dy).data(), wide(x).data(), n, nullptr, nullptr);
        for (size_t i = 0; i < n; ++i) db[i % C] += dx[i];
        const auto dxin = put(x);
        const auto ddy = put(dy);
        const auto dout = put(std::vector<float>(n));
        const auto dgrad = put(std::vector<float>(n));
        const auto dyb = put(std::vector<bf16>(n));
        const auto ddxb = put(std::vector<bf16>(n));
        const auto ddb = put(db0);
        const auto part = put(std::vector<float>(ops::bias_grad_part_size(N, C)));
        BB_OP(be(), activation_forward)(act, dout->get(), dxin->get(), n, dyb->get());
        const ops::BiasGrad<float> bg{ddb->get(), part->get(), C};
        BB_OP(be(), activation_backward)(act, dgrad->get(), ddy->get(), dxin->get(), n, ddxb->get(), &bg);
        const std::string a = std::to_string(static_cast<int>(act));
        const std::vector<float> got_y = dout->download(), got_dx = dgrad->download();
        EXPECT_TRUE(all_close("act y " + a, got_y, y, kAtol, kRtol));
        EXPECT_TRUE(all_close("act dx " + a, got_dx, dx, kAtol, kRtol));
        EXPECT_TRUE(all_close("act db " + a, ddb->download(), db, kAtolSum, kRtolSum));
        EXPECT_TRUE(same_bits(dyb->download(), narrow(got_y))) << "act yb " << a;
        EXPECT_TRUE(same_bits(ddxb->download(), narrow(got_dx))) << "act dxb " << a;
    }
}

TEST_P(BackendOps, Tanh) {
    REQUIRE_OP(tanh_forward);
    REQUIRE_OP(tanh_backward);
    const size_t n = 1031;
    const std::vector<float> x = rand_f(n, 18, 4.0), dy = rand_f(n, 19);
    std::vector<double> y = wide(x), dx(n);
    ops::tanh_forward<double>(y.data(), n);
    const auto d = put(x);
    const auto ddy = put(dy);
    const auto ddx = put(std::vector<float>(n));
    BB_OP(be(), tanh_forward)(d->get(), n);
    const std::vector<float> got_y = d->download();
    EXPECT_TRUE(all_close("tanh y", got_y, y, kAtol, kRtol));
    ops::tanh_backward<double>(dx.data(), wide(dy).data(), wide(got_y).data(), n);
    BB_OP(be(), tanh_backward)(ddx->get(), ddy->get(), d->get(), n);
    EXPECT_TRUE(all_close("tanh dx", ddx->download(), dx, kAtol, kRtol));
}

TEST_P(BackendOps, Softmax) {
    REQUIRE_OP(softmax_forward);
    REQUIRE_OP(softmax_backward);
    for (const int C : {1, 5, 129, 1000}) {
        const int R = 7;
        const size_t n = static_cast<size_t>(R) * C;
        const std::vector<float> s = rand_f(n, 20 + C, 8.0), dp = rand_f(n, 21);
        std::vector<double> p(n), ds(n);
        ops::softmax_forward<double>(p.data(), wide(s).data(), R, C, 0.37);
        const auto d_s = put(s);
        const auto dp_ = put(std::vector<float>(n));
        const auto ddp = put(dp);
        const auto dds = put(std::vector<float>(n));
        BB_OP(be(), softmax_forward)(dp_->get(), d_s->get(), R, C, 0.37f);
        const std::vector<float> got_p = dp_->download();
        EXPECT_TRUE(all_close("softmax p C=" + std::to_string(C), got_p, p, kAtolSum, kRtolSum));
        ops::softmax_backward<double>(ds.data(), wide(dp).data(), wide(got_p).data(), R, C);
        BB_OP(be(), softmax_backward)(dds->get(), ddp->get(), dp_->get(), R, C);
        EXPECT_TRUE(all_close("softmax ds C=" + std::to_string(C), dds->download(), ds, kAtolSum, kRtolSum));
    }
}

TEST_P(BackendOps, DropoutMasksAreTheCpuBits) {
    REQUIRE_OP(dropout_mask);
    for (const ops::DropoutStream s : {ops::DropoutStream{0x1234567890abcdefull, 0x100000007ull, 9, 0.9},
                                       ops::DropoutStream{12345, 3, 0, 0.5}, ops::DropoutStream{7, 0, 71, 1.0}})
        for (const size_t n : {size_t(1), size_t(7), size_t(33), size_t(70001)}) {
            std::vector<uint8_t> want(n);
            ops::dropout_fill_mask(want.data(), s, 0, n);  // the scalar/AVX2 reference
            const auto d = put(std::vector<uint8_t>(n));
            BB_OP(be(), dropout_mask)(d->get(), s, n);
            EXPECT_EQ(d->download(), want) << "site " << s.site << " n " << n;
        }
}

TEST_P(BackendOps, DropoutForwardBackward) {
    REQUIRE_OP(dropout_add_forward);
    REQUIRE_OP(dropout_backward);
    const int N = 70, C = 37;
    const size_t n = static_cast<size_t>(N) * C;
    std::vector<uint8_t> mask(n);
    ops::dropout_fill_mask(mask.data(), ops::DropoutStream{3, 1, 4, 0.9}, 0, n);
    const std::vector<float> x = rand_f(n, 22), r = rand_f(n, 23), db0 = rand_f(C, 24);
    const auto dx = put(x);
    const auto dr = put(r);
    const auto dm = put(mask);
    for (const bool masked : {false, true})
        for (const bool residual : {false, true}) {
            std::vector<double> y(n), g(n), db = wide(db0);
            const uint8_t* m = masked ? mask.data() : nullptr;
            ops::dropout_add_forward<double>(y.data(), wide(x).data(), m, 0.9, residual ? wide(r).data() : nullptr, n,
                                             nullptr);
            ops::dropout_backward<double>(g.data(), wide(x).data(), m, 0.9, n, nullptr, nullptr);
            for (size_t i = 0; i < n; ++i) db[i % C] += g[i];
            const auto dy = put(std::vector<float>(n));
            const auto dg = put(std::vector<float>(n));
            const auto ddb = put(db0);
            const auto dyb = put(std::vector<bf16>(n));
            const auto dgb = put(std::vector<bf16>(n));
            const auto part = put(std::vector<float>(ops::bias_grad_part_size(N, C)));
            uint8_t* dmask = masked ? dm->get() : nullptr;
            BB_OP(be(), dropout_add_forward)(dy->get(), dx->get(), dmask, 0.9f, residual ? dr->get() : nullptr, n,
                                             dyb->get());
            const ops::BiasGrad<float> bg{ddb->get(), part->get(), C};
            BB_OP(be(), dropout_backward)(dg->get(), dx->get(), dmask, 0.9f, n, dgb->get(), &bg);
            const std::string what = fmt::format("masked={} residual={}", masked, residual);
            const std::vector<float> got_y = dy->download(), got_g = dg->download();
            EXPECT_TRUE(all_close("dropout y " + what, got_y, y, kAtol, kRtol));
            EXPECT_TRUE(all_close("dropout dx " + what, got_g, g, kAtol, kRtol));
            EXPECT_TRUE(all_close("dropout db " + what, ddb->download(), db, kAtolSum, kRtolSum));
            EXPECT_TRUE(same_bits(dyb->download(), narrow(got_y))) << what;
            EXPECT_TRUE(same_bits(dgb->download(), narrow(got_g))) << what;
        }
}

TEST_P(BackendOps, Embedding) {
    REQUIRE_OP(embedding_forward);
    REQUIRE_OP(embedding_backward);
    const int H = 37, V = 11, P = 9, TV = 2;
    const std::vector<int32_t> offsets = {0, 1, 6, 6, 15}, ids = {3, 0, 10, 3, 3, 7, 1, 2, 3, 4, 5, 6, 10, 9, 8},
                               segs = {0, 0, 0, 1, 1, 1, 0, 0, 0, 0, 1, 1, 1, 1, 1};
    const int B = 4, N = 15;
    const std::vector<float> word = rand_f(static_cast<size_t>(V) * H, 25), pos = rand_f(static_cast<size_t>(P) * H, 26),
                             type = rand_f(static_cast<size_t>(TV) * H, 27), de = rand_f(static_cast<size_t>(N) * H, 28);
    const ops::EmbeddingIndex hx{ids.data(), segs.data(), offsets.data(), B};
    std::vector<double> e(static_cast<size_t>(N) * H), dw = wide(word), dp = wide(pos), dt = wide(type);
    ops::embedding_forward<double>(e.data(), wide(word).data(), wide(pos).data(), wide(type).data(), hx, H);
    ops::embedding_backward<double>(dw.data(), dp.data(), dt.data(), wide(de).data(), hx, H);
    const auto dids = put(ids);
    const auto dsegs = put(segs);
    const auto doffs = put(offsets);
    const ops::EmbeddingIndex x{dids->get(), dsegs->get(), doffs->get(), B};
    const auto dword = put(word);
    const auto dpos = put(pos);
    const auto dtype = put(type);
    const auto dde = put(de);
    const auto dout = put(std::vector<float>(e.size()));
    BB_OP(be(), embedding_forward)(dout->get(), dword->get(), dpos->get(), dtype->get(), x, H);
    const std::vector<float> got_e = dout->download();
    EXPECT_TRUE(all_close("embedding e", got_e, e, kAtol, kRtol));
    BB_OP(be(), embedding_backward)(dword->get(), dpos->get(), dtype->get(), dde->get(), x, H);  // += into the tables
    const std::vector<float> got_dw = dword->download(), got_dp = dpos->download(), got_dt = dtype->download();
    EXPECT_TRUE(all_close("embedding dword", got_dw, dw, kAtol, kRtol));
    EXPECT_TRUE(all_close("embedding dpos", got_dp, dp, kAtol, kRtol));
    EXPECT_TRUE(all_close("embedding dtype", got_dt, dt, kAtolSum, kRtolSum));
    // Every backend adds in the CPU kernel's order (w + p + t; tokens in order): its fp32 bits.
    std::vector<float> cpu_e(e.size()), cpu_dw = word, cpu_dp = pos, cpu_dt = type;
    ops::kernels().embedding_forward(cpu_e.data(), word.data(), pos.data(), type.data(), hx, H);
    ops::kernels().embedding_backward(cpu_dw.data(), cpu_dp.data(), cpu_dt.data(), de.data(), hx, H);
    EXPECT_EQ(got_e, cpu_e) << "embedding e: the CPU's fp32 bits";
    EXPECT_EQ(got_dw, cpu_dw) << "embedding dword: the CPU's fp32 bits";
    EXPECT_EQ(got_dp, cpu_dp) << "embedding dpos: the CPU's fp32 bits";
    EXPECT_EQ(got_dt, cpu_dt) << "embedding dtype: the CPU's fp32 bits";
}

TEST_P(BackendOps, CrossEntropy) {
    REQUIRE_OP(cross_entropy_forward);
    REQUIRE_OP(cross_entropy_backward);
    for (const int V : {2, 37, 1031}) {
        const int R = 9;
        const size_t n = static_cast<size_t>(R) * V;
        std::vector<float> z = rand_f(n, 29 + V, 10.0);
        z[1] = z[0] = 20.f;  // a tie in row 0: the first index wins
        std::vector<int32_t> labels(R);
        for (int r = 0; r < R; ++r) labels[r] = (r * 7 + 3) % V;
        const std::vector<float> coef = rand_f(R, 30);
        std::vector<double> loss(R), lse(R), dz(n);
        std::vector<int32_t> arg(R);
        ops::cross_entropy_forward<double>(loss.data(), arg.data(), lse.data(), wide(z).data(), labels.data(), R, V);
        ops::cross_entropy_backward<double>(dz.data(), wide(z).data(), lse.data(), labels.data(), wide(coef).data(), R, V);
        const auto dzz = put(z);
        const auto dl = put(labels);
        const auto dc = put(coef);
        const auto dloss = put(std::vector<double>(R));
        const auto darg = put(std::vector<int32_t>(R));
        const auto dlse = put(std::vector<float>(R));
        const auto ddz = put(std::vector<float>(n));
        BB_OP(be(), cross_entropy_forward)(dloss->get(), darg->get(), dlse->get(), dzz->get(), dl->get(), R, V);
        BB_OP(be(), cross_entropy_backward)(ddz->get(), dzz->get(), dlse->get(), dl->get(), dc->get(), R, V);
        const std::string v = "V=" + std::to_string(V);
        EXPECT_TRUE(all_close("ce loss " + v, dloss->download(), loss, kAtolSum, kRtolSum));
        EXPECT_TRUE(all_close("ce lse " + v, dlse->download(), lse, kAtolSum, kRtolSum));
        EXPECT_EQ(darg->download(), arg) << v;
        EXPECT_TRUE(all_close("ce dlogits " + v, ddz->download(), dz, kAtol, kRtol));
    }
}

// Both attention kernels, the materialized and the fused one, against the double reference.
TEST_P(BackendOps, Attention) {
    REQUIRE_OP(attention_forward);
    REQUIRE_OP(attention_backward);
    const int NH = 3, HS = 7, H = NH * HS, B = 3;
    const std::vector<int32_t> offsets = {0, 1, 6, 23};
    const std::vector<int32_t> key_lengths = {1, 4, 17};  // padded rows as queries (SQuAD features)
    const int N = offsets[B];
    const std::vector<float> q = rand_f(static_cast<size_t>(N) * H, 31), k = rand_f(static_cast<size_t>(N) * H, 32),
                             v = rand_f(static_cast<size_t>(N) * H, 33), dctx = rand_f(static_cast<size_t>(N) * H, 34);
    for (const bool dropout : {false, true}) {
        const ops::DropoutStream stream{99, 5, 17, 0.9};
        const ops::DropoutStream* drop = dropout ? &stream : nullptr;
        const AttentionReference ref = attention_reference(offsets, dropout ? key_lengths.data() : nullptr, NH, HS,
                                                           wide(q), wide(k), wide(v), wide(dctx), drop);
        const auto& [pofs, ctx, probs, dq, dk, dv, mask] = ref;
        const size_t np = probs.size();
        const auto doffs = put(offsets);
        const auto dkeys = put(key_lengths);
        const auto dpofs = put(pofs);
        const ops::AttentionShape s{doffs->get(), dpofs->get(), B, NH, HS, dropout ? dkeys->get() : nullptr};
        const auto dq_ = put(q), dk_ = put(k), dv_ = put(v), ddctx = put(dctx);
        const auto dctx_out = put(std::vector<float>(q.size())), dprobs_ = put(std::vector<float>(np)),
                   dscratch = put(std::vector<float>(np));
        const auto dmask = put(std::vector<uint8_t>(np));
        const auto gq = put(std::vector<float>(q.size())), gk = put(std::vector<float>(q.size())),
                   gv = put(std::vector<float>(q.size()));
        BB_OP(be(), attention_forward)(dctx_out->get(), dprobs_->get(), dscratch->get(), dmask->get(), dq_->get(),
                                       dk_->get(), dv_->get(), s, drop, nullptr);
        BB_OP(be(), attention_backward)(gq->get(), gk->get(), gv->get(), dscratch->get(), ddctx->get(), dq_->get(),
                                        dk_->get(), dv_->get(), dprobs_->get(), dropout ? dmask->get() : nullptr,
                                        0.9f, s, nullptr);
        const std::string what = dropout ? " (dropout, key lengths)" : "";
        if (dropout) {
            EXPECT_EQ(dmask->download(), mask) << "attention dropout mask: the CPU's bits";
        }
        EXPECT_TRUE(all_close("attention ctx" + what, dctx_out->download(), ctx, kAtolSum, kRtolSum));
        EXPECT_TRUE(all_close("attention probs" + what, dprobs_->download(), probs, kAtolSum, kRtolSum));
        EXPECT_TRUE(all_close("attention dq" + what, gq->download(), dq, kAtolSum, kRtolSum));
        EXPECT_TRUE(all_close("attention dk" + what, gk->download(), dk, kAtolSum, kRtolSum));
        EXPECT_TRUE(all_close("attention dv" + what, gv->download(), dv, kAtolSum, kRtolSum));
        // the fused kernel (lse instead of the probabilities) against the same reference
        if (!be().ops().flash_attention_forward || !be().ops().flash_attention_backward) {
            std::cout << "[backend " << be().name() << "] lacks flash_attention_forward/backward: not tested\n";
            continue;
        }
        const auto lse = put(std::vector<float>(static_cast<size_t>(N) * NH));
        BB_OP(be(), flash_attention_forward)(dctx_out->get(), lse->get(), dq_->get(), dk_->get(), dv_->get(), s, drop,
                                             nullptr);
        BB_OP(be(), flash_attention_backward)(gq->get(), gk->get(), gv->get(), ddctx->get(), dq_->get(), dk_->get(),
                                              dv_->get(), dctx_out->get(), lse->get(), s, drop, nullptr);
        EXPECT_TRUE(all_close("flash ctx" + what, dctx_out->download(), ctx, kAtolSum, kRtolSum));
        EXPECT_TRUE(all_close("flash dq" + what, gq->download(), dq, kAtolSum, kRtolSum));
        EXPECT_TRUE(all_close("flash dk" + what, gk->download(), dk, kAtolSum, kRtolSum));
        EXPECT_TRUE(all_close("flash dv" + what, gv->download(), dv, kAtolSum, kRtolSum));
    }
}

// A bf16 engine's attention (AttentionBf16): q, k, v and dctx as bf16, against the double
// reference on those bf16 values. A backend may round the probabilities (and dS) to bf16 for its
// products, as the CPU does: each rounding is 2^-9 relative and a row's Σ|p'·v| is at most
// 1/keep (1.25), so ctx is off by up to ~2.5e-3 where its terms cancel: atol 4e-3 + rtol 2^-6.
TEST_P(BackendOps, AttentionBf16Inputs) {
    REQUIRE_OP(attention_forward);
    REQUIRE_OP(attention_backward);
    const int NH = 2, HS = 8, H = NH * HS, B = 2;
    const std::vector<int32_t> offsets = {0, 5, 24}, key_lengths = {5, 13};
    const int N = offsets[B];
    const size_t nh = static_cast<size_t>(N) * H;
    const std::vector<bf16> q = narrow(rand_f(nh, 35)), k = narrow(rand_f(nh, 36)), v = narrow(rand_f(nh, 37)),
                            dctx = narrow(rand_f(nh, 38));
    const auto widened = [](const std::vector<bf16>& x) {
        std::vector<double> w(x.size());
        for (size_t i = 0; i < x.size(); ++i) w[i] = ops::to_float(x[i]);
        return w;
    };
    const ops::DropoutStream stream{3, 1, 4, 0.8};
    const AttentionReference ref = attention_reference(offsets, key_lengths.data(), NH, HS, widened(q), widened(k),
                                                       widened(v), widened(dctx), &stream);
    const auto& [pofs, ctx, probs, dq, dk, dv, mask] = ref;
    const size_t np = probs.size();
    const auto goffs = put(offsets), gkeys = put(key_lengths);
    const auto gpofs = put(pofs);
    const ops::AttentionShape s{goffs->get(), gpofs->get(), B, NH, HS, gkeys->get()};
    const auto gq = put(q), gk = put(k), gv = put(v), gdctx = put(dctx);
    const ops::AttentionBf16 lp{gq->get(), gk->get(), gv->get(), gdctx->get()};
    const auto gctx = put(std::vector<float>(nh)), gprobs = put(std::vector<float>(np)),
               gscratch = put(std::vector<float>(np)), gdq = put(std::vector<float>(nh)),
               gdk = put(std::vector<float>(nh)), gdv = put(std::vector<float>(nh));
    const auto gmask = put(std::vector<uint8_t>(np));
    // the fp32 q, k, v, dctx are not read with lp: null
    BB_OP(be(), attention_forward)(gctx->get(), gprobs->get(), gscratch->get(), gmask->get(), nullptr, nullptr, nullptr,
                                   s, &stream, &lp);
    BB_OP(be(), attention_backward)(gdq->get(), gdk->get(), gdv->get(), gscratch->get(), nullptr, nullptr, nullptr,
                                    nullptr, gprobs->get(), gmask->get(), 0.8f, s, &lp);
    constexpr double atol = 4e-3, rtol = 1.0 / 64;
    EXPECT_EQ(gmask->download(), mask) << "the dropout mask: the CPU's bits";
    EXPECT_TRUE(all_close("bf16 attention ctx", gctx->download(), ctx, atol, rtol));
    EXPECT_TRUE(all_close("bf16 attention probs", gprobs->download(), probs, atol, rtol));
    EXPECT_TRUE(all_close("bf16 attention dq", gdq->download(), dq, atol, rtol));
    EXPECT_TRUE(all_close("bf16 attention dk", gdk->download(), dk, atol, rtol));
    EXPECT_TRUE(all_close("bf16 attention dv", gdv->download(), dv, atol, rtol));
}

// The inventory: the CPU backend has every op; another backend names what it lacks.
TEST_P(BackendOps, LacksOnlyWhatItSays) {
    const std::vector<const char*> missing = be().missing();
    if (GetParam() == "cpu") {
        EXPECT_TRUE(missing.empty()) << "the CPU backend lacks " << missing.front();
    }
    for (const char* op : missing) {
        std::cout << "[backend " << be().name() << "] lacks " << op << "\n";
    }
    // a missing op is one Error naming it (a table with the op taken out)
    struct Without : Backend {
        explicit Without(const Backend& be) : name_(be.name()) { ops_ = be.ops(); ops_.layernorm_forward = nullptr; }
        const char* name() const override { return name_; }
        std::string describe() const override { return ""; }
        void* alloc(size_t) override { return nullptr; }
        void release(void*) noexcept override {}
        void upload(void*, const void*, size_t) override {}
        void download(void*, const void*, size_t) override {}
        void zero(void*, size_t) override {}
        void synchronize() override {}
        bool host_memory() const override { return true; }
        const char* name_;
    };
    const Without w(be());
    ASSERT_EQ(w.missing().size(), missing.size() + 1);
    try {
        BB_OP(w, layernorm_forward);
        ADD_FAILURE() << "calling a missing op did not throw";
    } catch (const Error& e) {
        EXPECT_EQ(std::string(e.what()).find("[backend " + std::string(be().name()) + "] lacks the op layernorm_forward"),
                  0u)
            << e.what();
    }
    std::cout << "[backend " << be().name() << "] " << be().describe() << "\n";
}

}  // namespace
}  // namespace bertbench::backend
