// Finite-difference checks (double, odd sizes 13/7/37, mixed sequence lengths) of every op's
// backward, and forward checks against naive/padded references. Loss = Σ r·y with a fixed random r,
// so the analytic gradient is backward(dy = r). Tolerance: atol 1e-7, rtol 1e-6 unless stated.
#include <gtest/gtest.h>
#include <oneapi/dnnl/dnnl.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <vector>

#include "check.hpp"
#include "core/error.hpp"
#include "ops/activation.hpp"
#include "ops/attention.hpp"
#include "ops/cross_entropy.hpp"
#include "ops/embedding.hpp"
#include "ops/gemm.hpp"
#include "ops/layernorm.hpp"
#include "ops/softmax.hpp"

namespace bertbench::ops {
namespace {

using bertbench::testing::all_close;
using bertbench::testing::dot;
using bertbench::testing::numeric_grad;
using bertbench::testing::random_vector;
using Vec = std::vector<double>;
constexpr double kFdAtol = 1e-7, kFdRtol = 1e-6;

// C = alpha·op(A)·op(B) + beta·C by the definition, in double, row-major with leading dimensions.
Vec naive_gemm(bool ta, bool tb, int M, int N, int K, double alpha, const Vec& a, int lda,
               const Vec& b, int ldb, double beta, Vec c, int ldc) {
    for (int i = 0; i < M; ++i)
        for (int j = 0; j < N; ++j) {
            double s = 0;
            for (int k = 0; k < K; ++k)
                s += (ta ? a[k * lda + i] : a[i * lda + k]) * (tb ? b[j * ldb + k] : b[k * ldb + j]);
            c[i * ldc + j] = alpha * s + beta * c[i * ldc + j];
        }
    return c;
}

TEST(Gemm, MatchesNaiveForAllTransposes) {
    const int M = 13, N = 7, K = 37;
    for (int ta = 0; ta < 2; ++ta)
        for (int tb = 0; tb < 2; ++tb) {
            Vec a = random_vector(M * K, 1), b = random_vector(K * N, 2), c = random_vector(M * N, 3);
            const Vec want = naive_gemm(ta, tb, M, N, K, 0.5, a, ta ? M : K, b, tb ? K : N, 2.0, c, N);
            gemm(ta, tb, M, N, K, 0.5, a.data(), ta ? M : K, b.data(), tb ? K : N, 2.0, c.data(), N);
            EXPECT_TRUE(all_close("gemm", c, want, 1e-12, 1e-12)) << "ta=" << ta << " tb=" << tb;
            // float path agrees to fp32 accuracy
            std::vector<float> af(a.begin(), a.end()), bf(b.begin(), b.end()), cf(M * N, 0.f);
            gemm(ta, tb, M, N, K, 1.f, af.data(), ta ? M : K, bf.data(), tb ? K : N, 0.f, cf.data(), N);
            Vec wd(M * N, 0.0);
            gemm(ta, tb, M, N, K, 1.0, a.data(), ta ? M : K, b.data(), tb ? K : N, 0.0, wd.data(), N);
            EXPECT_TRUE(all_close("sgemm", cf, wd, 1e-5, 1e-5));
        }
}

// The float path (oneDNN) on what the engine passes it: sub-matrices with leading dimensions wider
// than the rows (attention reads one head's columns of [tokens, H]), alpha/beta, and K = 0, where
// C = beta·C. A bad leading dimension is an Error, not a crash.
TEST(Gemm, FloatStridedAlphaBetaAndEmptyK) {
    const int M = 9, N = 5, K = 11, ld = 23;
    for (int ta = 0; ta < 2; ++ta)
        for (int tb = 0; tb < 2; ++tb) {
            const Vec a = random_vector((ta ? K : M) * ld, 4), b = random_vector((tb ? N : K) * ld, 5);
            const Vec c0 = random_vector(M * ld, 6);
            const Vec want = naive_gemm(ta, tb, M, N, K, -0.75, a, ld, b, ld, 0.5, c0, ld);
            std::vector<float> af(a.begin(), a.end()), bf(b.begin(), b.end()), cf(c0.begin(), c0.end());
            gemm(ta, tb, M, N, K, -0.75f, af.data(), ld, bf.data(), ld, 0.5f, cf.data(), ld);
            EXPECT_TRUE(all_close("strided sgemm", cf, want, 1e-5, 1e-5)) << "ta=" << ta << " tb=" << tb;
        }
    std::vector<float> c(6, 2.f), none(1, 0.f);
    gemm(false, false, 2, 3, 0, 1.f, none.data(), 1, none.data(), 3, 0.5f, c.data(), 3);
    EXPECT_EQ(c, std::vector<float>(6, 1.f));
    EXPECT_THROW(gemm(false, false, 2, 3, 4, 1.f, none.data(), 2, none.data(), 3, 0.f, c.data(), 3),
                 Error);
}

// A transposed A whose rows are 4 KiB apart goes through a padded copy (gemm.cpp): the same bits
// as oneDNN's sgemm on A where it lies, and the product itself.
TEST(Gemm, TransposedAWithAliasedRowsKeepsTheBits) {
    const int M = 1000, N = 37, K = 53, lda = 1024;  // A (K, lda): M of its columns used
    const Vec a = random_vector(static_cast<size_t>(K) * lda, 7), b = random_vector(K * N, 8),
              c0 = random_vector(M * N, 9);
    std::vector<float> af(a.begin(), a.end()), bf(b.begin(), b.end()), ours(c0.begin(), c0.end());
    std::vector<float> sgemm = ours;
    gemm(true, false, M, N, K, 1.f, af.data(), lda, bf.data(), N, 1.f, ours.data(), N);
    ASSERT_EQ(dnnl_sgemm('T', 'N', M, N, K, 1.f, af.data(), lda, bf.data(), N, 1.f, sgemm.data(), N), dnnl_success);
    EXPECT_EQ(std::memcmp(ours.data(), sgemm.data(), ours.size() * sizeof(float)), 0);
    const Vec want = naive_gemm(true, false, M, N, K, 1.0, a, lda, b, N, 1.0, c0, N);
    EXPECT_TRUE(all_close("aliased sgemm", ours, want, 1e-5, 1e-5));
}

TEST(Linear, FiniteDifferences) {
    const int N = 13, IN = 7, OUT = 37;
    Vec x = random_vector(N * IN, 1), w = random_vector(IN * OUT, 2), b = random_vector(OUT, 3);
    const Vec r = random_vector(N * OUT, 4);
    Vec y(N * OUT);
    auto loss = [&] {
        linear_forward(y.data(), x.data(), w.data(), b.data(), N, IN, OUT);
        return dot(y, r);
    };
    Vec dx(N * IN, 0.0), dw(IN * OUT, 0.5), db(OUT, 0.25);  // dw, db accumulate onto 0.5 / 0.25
    linear_backward(dx.data(), dw.data(), db.data(), r.data(), x.data(), w.data(), N, IN, OUT);
    Vec gw = numeric_grad(w, loss), gb = numeric_grad(b, loss);
    for (double& v : gw) v += 0.5;
    for (double& v : gb) v += 0.25;
    EXPECT_TRUE(all_close("dx", dx, numeric_grad(x, loss), kFdAtol, kFdRtol));
    EXPECT_TRUE(all_close("dw", dw, gw, kFdAtol, kFdRtol));
    EXPECT_TRUE(all_close("db", db, gb, kFdAtol, kFdRtol));
    // accumulate_dx adds onto the existing dx
    Vec dx2 = dx;
    linear_backward<double>(dx2.data(), nullptr, nullptr, r.data(), x.data(), w.data(), N, IN, OUT, true);
    for (double& v : dx) v *= 2;
    EXPECT_TRUE(all_close("dx accumulate", dx2, dx, 1e-12, 1e-12));
}

TEST(LayerNorm, FiniteDifferencesAndForward) {
    const int N = 13, C = 37;
    Vec x = random_vector(N * C, 1, 2.0), g = random_vector(C, 2), b = random_vector(C, 3);
    const Vec r = random_vector(N * C, 4);
    Vec y(N * C), mean(N), rstd(N);
    auto loss = [&] {
        layernorm_forward(y.data(), mean.data(), rstd.data(), x.data(), g.data(), b.data(), N, C);
        return dot(y, r);
    };
    loss();
    // forward against the textbook formula
    Vec want(N * C);
    for (int i = 0; i < N; ++i) {
        double m = 0, v = 0;
        for (int c = 0; c < C; ++c) m += x[i * C + c] / C;
        for (int c = 0; c < C; ++c) v += (x[i * C + c] - m) * (x[i * C + c] - m) / C;
        for (int c = 0; c < C; ++c) want[i * C + c] = (x[i * C + c] - m) / std::sqrt(v + 1e-12) * g[c] + b[c];
    }
    EXPECT_TRUE(all_close("layernorm y", y, want, 1e-12, 1e-10));
    Vec dx(N * C), dg(C, 0.0), db(C, 0.0);
    layernorm_backward(dx.data(), dg.data(), db.data(), r.data(), x.data(), g.data(), mean.data(),
                       rstd.data(), N, C);
    EXPECT_TRUE(all_close("dx", dx, numeric_grad(x, loss), kFdAtol, kFdRtol));
    EXPECT_TRUE(all_close("dgamma", dg, numeric_grad(g, loss), kFdAtol, kFdRtol));
    EXPECT_TRUE(all_close("dbeta", db, numeric_grad(b, loss), kFdAtol, kFdRtol));
    // in-place (dx aliases dy) gives the same dx
    loss();
    Vec inplace = r, dg2(C, 0.0), db2(C, 0.0);
    layernorm_backward(inplace.data(), dg2.data(), db2.data(), inplace.data(), x.data(), g.data(),
                       mean.data(), rstd.data(), N, C);
    EXPECT_TRUE(all_close("dx in place", inplace, dx, 0, 0));
    EXPECT_TRUE(all_close("dgamma in place", dg2, dg, 0, 0));
}

TEST(Activation, FiniteDifferencesAndFormulas) {
    const int n = 37;
    for (Activation a : {Activation::gelu_tanh, Activation::gelu_erf, Activation::relu}) {
        Vec x = random_vector(n, 1, 4.0);
        if (a == Activation::relu)
            for (double& v : x)
                if (std::abs(v) < 1e-3) v = 0.5;  // keep away from the kink
        const Vec r = random_vector(n, 2);
        Vec y(n);
        auto loss = [&] {
            activation_forward(a, y.data(), x.data(), n);
            return dot(y, r);
        };
        Vec dx(n);
        activation_backward(a, dx.data(), r.data(), x.data(), n);
        EXPECT_TRUE(all_close("dact", dx, numeric_grad(x, loss), kFdAtol, kFdRtol)) << int(a);
    }
    // spot values: gelu_tanh(1) = 0.8411919906082768, gelu_erf(1) = 0.8413447460685429
    EXPECT_NEAR(activation_value(Activation::gelu_tanh, 1.0), 0.8411919906082768, 1e-15);
    EXPECT_NEAR(activation_value(Activation::gelu_erf, 1.0), 0.8413447460685429, 1e-15);
    // tanh (pooler)
    Vec x = random_vector(n, 3, 2.0), y(n);
    const Vec r = random_vector(n, 4);
    auto loss = [&] {
        y = x;
        tanh_forward(y.data(), n);
        return dot(y, r);
    };
    loss();
    Vec dx(n);
    tanh_backward(dx.data(), r.data(), y.data(), n);
    EXPECT_TRUE(all_close("dtanh", dx, numeric_grad(x, loss), kFdAtol, kFdRtol));
}

TEST(Softmax, FiniteDifferences) {
    const int R = 7, C = 13;
    const double scale = 0.37;
    Vec s = random_vector(R * C, 1, 3.0);
    const Vec r = random_vector(R * C, 2);
    Vec p(R * C);
    auto loss = [&] {
        softmax_forward(p.data(), s.data(), R, C, scale);
        return dot(p, r);
    };
    loss();
    for (int i = 0; i < R; ++i) {
        double sum = 0;
        for (int c = 0; c < C; ++c) sum += p[i * C + c];
        EXPECT_NEAR(sum, 1.0, 1e-14);
    }
    Vec ds(R * C);
    softmax_backward(ds.data(), r.data(), p.data(), R, C);
    for (double& v : ds) v *= scale;  // backward is w.r.t. the scaled input
    EXPECT_TRUE(all_close("ds", ds, numeric_grad(s, loss), kFdAtol, kFdRtol));
}

TEST(CrossEntropy, FiniteDifferencesAndArgmaxTies) {
    const int R = 7, V = 13;
    Vec z = random_vector(R * V, 1, 3.0);
    const std::vector<int32_t> labels = {0, 12, 5, 7, 7, 3, 11};
    const Vec coef = random_vector(R, 2);
    std::vector<double> row(R);
    std::vector<int32_t> am(R);
    Vec lse(R);
    auto loss = [&] {
        cross_entropy_forward(row.data(), am.data(), lse.data(), z.data(), labels.data(), R, V);
        double s = 0;
        for (int i = 0; i < R; ++i) s += coef[i] * row[i];
        return s;
    };
    loss();
    for (int i = 0; i < R; ++i) {  // against log-softmax computed naively
        double sum = 0;
        for (int c = 0; c < V; ++c) sum += std::exp(z[i * V + c]);
        EXPECT_NEAR(row[i], std::log(sum) - z[i * V + labels[i]], 1e-12);
    }
    Vec dz(R * V);
    cross_entropy_backward(dz.data(), z.data(), lse.data(), labels.data(), coef.data(), R, V);
    EXPECT_TRUE(all_close("dlogits", dz, numeric_grad(z, loss), kFdAtol, kFdRtol));
    // ties -> lowest index
    Vec tie(V, 0.0);
    tie[4] = tie[9] = 2.0;
    int32_t a = -1, lab = 0;
    double l = 0, ls = 0;
    cross_entropy_forward(&l, &a, &ls, tie.data(), &lab, 1, V);
    EXPECT_EQ(a, 4);
}

TEST(Embedding, FiniteDifferencesAndSparseRows) {
    const int H = 7, V = 37, maxpos = 13;
    const std::vector<int32_t> offsets = {0, 5, 18, 19};  // lengths 5, 13, 1
    const int B = 3, N = 19;
    std::vector<int32_t> ids(N), seg(N);
    for (int i = 0; i < N; ++i) {
        ids[i] = (i * 7 + 3) % 29;  // rows 29..36 never used
        seg[i] = (i % 3 == 0) ? 1 : 0;
    }
    ids[3] = ids[8];  // a repeated id accumulates twice
    Vec word = random_vector(V * H, 1), pos = random_vector(maxpos * H, 2), type = random_vector(2 * H, 3);
    const Vec r = random_vector(N * H, 4);
    const EmbeddingIndex ex{ids.data(), seg.data(), offsets.data(), B};
    Vec e(N * H);
    auto loss = [&] {
        embedding_forward(e.data(), word.data(), pos.data(), type.data(), ex, H);
        return dot(e, r);
    };
    Vec dw(V * H, 0.0), dp(maxpos * H, 0.0), dt(2 * H, 0.0);
    embedding_backward(dw.data(), dp.data(), dt.data(), r.data(), ex, H);
    EXPECT_TRUE(all_close("dword", dw, numeric_grad(word, loss), kFdAtol, kFdRtol));
    EXPECT_TRUE(all_close("dpos", dp, numeric_grad(pos, loss), kFdAtol, kFdRtol));
    EXPECT_TRUE(all_close("dtype", dt, numeric_grad(type, loss), kFdAtol, kFdRtol));
    for (int v = 29; v < V; ++v)
        for (int c = 0; c < H; ++c) ASSERT_EQ(dw[v * H + c], 0.0) << "row " << v << " untouched";
}

// Attention on unpadded sequences of lengths 5, 13, 1 with NH=3 heads of HS=4, with and without
// dropout on the probabilities (the mask is a pure function of the stream, so FD sees the same one).
class AttentionTest : public ::testing::TestWithParam<bool> {};

TEST_P(AttentionTest, FiniteDifferences) {
    const bool with_dropout = GetParam();
    const std::vector<int32_t> offsets = {0, 5, 18, 19};
    const int B = 3, N = 19, NH = 3, HS = 4, H = 12;
    std::vector<size_t> pofs(B + 1);
    const size_t np = attention_prob_offsets(pofs.data(), offsets.data(), B, NH);
    EXPECT_EQ(np, size_t(3 * (25 + 169 + 1)));
    const AttentionShape shape{offsets.data(), pofs.data(), B, NH, HS};
    const DropoutStream drop{42, 7, 3, 0.8};
    Vec q = random_vector(N * H, 1), k = random_vector(N * H, 2), v = random_vector(N * H, 3);
    const Vec r = random_vector(N * H, 4);
    Vec ctx(N * H), probs(np), pd(np);
    std::vector<uint8_t> mask(np);
    auto loss = [&] {
        attention_forward(ctx.data(), probs.data(), pd.data(), mask.data(), q.data(), k.data(),
                          v.data(), shape, with_dropout ? &drop : nullptr);
        return dot(ctx, r);
    };
    loss();
    Vec dq(N * H), dk(N * H), dv(N * H), dprobs(np);
    attention_backward(dq.data(), dk.data(), dv.data(), dprobs.data(), r.data(), q.data(), k.data(),
                       v.data(), probs.data(), with_dropout ? mask.data() : nullptr, 0.8, shape);
    EXPECT_TRUE(all_close("dq", dq, numeric_grad(q, loss), kFdAtol, kFdRtol));
    EXPECT_TRUE(all_close("dk", dk, numeric_grad(k, loss), kFdAtol, kFdRtol));
    EXPECT_TRUE(all_close("dv", dv, numeric_grad(v, loss), kFdAtol, kFdRtol));
    if (with_dropout) {
        size_t kept = 0;
        for (uint8_t m : mask) kept += m;
        EXPECT_GT(kept, np / 2);
        EXPECT_LT(kept, np);
    }
}
INSTANTIATE_TEST_SUITE_P(Dropout, AttentionTest, ::testing::Bool());

// Unpadded attention equals the reference padded computation: all sequences padded to T=13,
// scores + (1 − mask)·(−10000), softmax over all 13 columns, in float (as the reference runs).
TEST(Attention, EqualsPaddedComputationWithAdditiveMask) {
    const std::vector<int32_t> offsets = {0, 5, 18, 19};
    const int B = 3, N = 19, NH = 3, HS = 4, H = 12, T = 13;
    std::vector<size_t> pofs(B + 1);
    const size_t np = attention_prob_offsets(pofs.data(), offsets.data(), B, NH);
    const AttentionShape shape{offsets.data(), pofs.data(), B, NH, HS};
    const Vec qd = random_vector(N * H, 1, 3.0), kd = random_vector(N * H, 2, 3.0), vd = random_vector(N * H, 3);
    std::vector<float> q(qd.begin(), qd.end()), k(kd.begin(), kd.end()), v(vd.begin(), vd.end());
    std::vector<float> ctx(N * H), probs(np), pd(np);
    attention_forward<float>(ctx.data(), probs.data(), pd.data(), nullptr, q.data(), k.data(), v.data(),
                             shape, nullptr);
    std::vector<float> want(N * H);
    for (int b = 0; b < B; ++b) {
        const int o = offsets[b], t = offsets[b + 1] - o;
        for (int h = 0; h < NH; ++h)
            for (int i = 0; i < t; ++i) {
                float s[T];
                float m = -1e30f;
                for (int j = 0; j < T; ++j) {
                    float d = 0;
                    if (j < t)
                        for (int c = 0; c < HS; ++c) d += q[(o + i) * H + h * HS + c] * k[(o + j) * H + h * HS + c];
                    s[j] = d / std::sqrt(float(HS)) + (j < t ? 0.f : -10000.f);
                    m = std::max(m, s[j]);
                }
                float sum = 0;
                for (int j = 0; j < T; ++j) sum += (s[j] = std::exp(s[j] - m));
                for (int c = 0; c < HS; ++c) {
                    float acc = 0;
                    for (int j = 0; j < t; ++j) acc += s[j] / sum * v[(o + j) * H + h * HS + c];
                    want[(o + i) * H + h * HS + c] = acc;
                }
            }
    }
    EXPECT_TRUE(all_close("ctx unpadded vs padded", ctx, want, 1e-6, 1e-5));
}

}  // namespace
}  // namespace bertbench::ops
