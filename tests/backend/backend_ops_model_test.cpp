// Backend conformance, continued (backend_ops_test.cpp has the fixture's instantiation, the
// elementwise ops and both attention kernels): the ops the model calls beyond the kernels — the
// dense layer in fp32 and bf16, the packed GEMM, the biased and bf16 losses, the span loss, the row
// gathers — against the
// double instantiations of the CPU ops on the same (bf16-rounded where the op takes bf16) inputs.
// Tolerances as there; a bf16 output adds rtol 2^-8 (one rounding). Exact: transposes and row copies.
#include <algorithm>

#include "backend_ops_util.hpp"
#include "ops/cross_entropy.hpp"

namespace bertbench::backend {
namespace {

std::vector<float> rounded(std::vector<float> v) {
    for (float& x : v) x = ops::round_bf16(x);
    return v;
}
std::vector<double> from_bf16(const std::vector<bf16>& v) {
    std::vector<double> out(v.size());
    for (size_t i = 0; i < v.size(); ++i) out[i] = ops::to_float(v[i]);
    return out;
}
// xᵀ (C, R) of x (R, C)
template <typename T>
std::vector<T> transposed(const std::vector<T>& x, int R, int C) {
    std::vector<T> t(x.size());
    for (int r = 0; r < R; ++r)
        for (int c = 0; c < C; ++c) t[static_cast<size_t>(c) * R + r] = x[static_cast<size_t>(r) * C + c];
    return t;
}

constexpr int kN = 7, kIn = 13, kOut = 19;

TEST_P(BackendOps, LinearFp32) {
    REQUIRE_OP(linear_forward);
    REQUIRE_OP(linear_backward);
    const std::vector<float> x = rand_f(kN * kIn, 40), w = rand_f(kIn * kOut, 41), b = rand_f(kOut, 42),
                             dy = rand_f(kN * kOut, 43), dx0 = rand_f(kN * kIn, 44), dw0 = rand_f(kIn * kOut, 45),
                             db0 = rand_f(kOut, 46);
    for (const bool acc : {false, true}) {
        std::vector<double> y(kN * kOut), dx = wide(dx0), dw = wide(dw0), db = wide(db0);
        ops::linear_forward(y.data(), wide(x).data(), wide(w).data(), wide(b).data(), kN, kIn, kOut);
        ops::linear_backward(dx.data(), dw.data(), db.data(), wide(dy).data(), wide(x).data(), wide(w).data(), kN,
                             kIn, kOut, acc);
        const auto gx = put(x), gw = put(w), gb = put(b), gdy = put(dy), gdx = put(dx0), gdw = put(dw0),
                   gdb = put(db0), gy = put(std::vector<float>(kN * kOut));
        BB_OP(be(), linear_forward)(gy->get(), gx->get(), gw->get(), gb->get(), kN, kIn, kOut);
        BB_OP(be(), linear_backward)(gdx->get(), gdw->get(), gdb->get(), gdy->get(), gx->get(), gw->get(), kN, kIn,
                                     kOut, acc);
        const std::string a = acc ? " (dx accumulated)" : "";
        EXPECT_TRUE(all_close("linear y", gy->download(), y, kAtolSum, kRtolSum));
        EXPECT_TRUE(all_close("linear dx" + a, gdx->download(), dx, kAtolSum, kRtolSum));
        EXPECT_TRUE(all_close("linear dw" + a, gdw->download(), dw, kAtolSum, kRtolSum));
        EXPECT_TRUE(all_close("linear db" + a, gdb->download(), db, kAtolSum, kRtolSum));
    }
}

TEST_P(BackendOps, LinearBf16) {
    REQUIRE_OP(linear_forward_bf16);
    REQUIRE_OP(linear_backward_bf16);
    REQUIRE_OP(linear_backward_bf16_convert);
    // the reference sees the bf16 values of x, W and dy (db sums the fp32 dy)
    const std::vector<float> x = rand_f(kN * kIn, 50), w = rand_f(kIn * kOut, 51), b = rand_f(kOut, 52),
                             dy = rand_f(kN * kOut, 53), dx0 = rand_f(kN * kIn, 54), dw0 = rand_f(kIn * kOut, 55),
                             db0 = rand_f(kOut, 56);
    const std::vector<float> xr = rounded(x), wr = rounded(w), dyr = rounded(dy);
    std::vector<double> y(kN * kOut), dx = wide(dx0), dw = wide(dw0), db = wide(db0);
    ops::linear_forward(y.data(), wide(xr).data(), wide(wr).data(), wide(b).data(), kN, kIn, kOut);
    ops::linear_backward(dx.data(), dw.data(), static_cast<double*>(nullptr), wide(dyr).data(), wide(xr).data(),
                         wide(wr).data(), kN, kIn, kOut, true);
    ops::bias_backward(db.data(), wide(dy).data(), kN, kOut);
    const auto gxb = put(narrow(x)), gwb = put(narrow(w));
    const auto gb = put(b);
    const auto gy = put(std::vector<float>(kN * kOut));
    const auto gyb = put(std::vector<bf16>(kN * kOut));
    BB_OP(be(), linear_forward_bf16)(gy->get(), MatmulType::f32, gxb->get(), gwb->get(), gb->get(), kN, kIn, kOut);
    BB_OP(be(), linear_forward_bf16)(gyb->get(), MatmulType::bf16, gxb->get(), gwb->get(), gb->get(), kN, kIn, kOut);
    EXPECT_TRUE(all_close("linear bf16 y", gy->download(), y, kAtolSum, kRtolSum));
    EXPECT_TRUE(all_close("linear bf16 y (bf16)", from_bf16(gyb->download()), y, kAtolSum, kRtolSum + 1.0 / 256));
    // from bf16(dy) and bf16(x)ᵀ, and converting fp32 dy and x itself
    const auto gdy = put(dy), gx = put(x);
    const auto gdyb = put(narrow(dy)), gxt = put(transposed(narrow(x), kN, kIn));
    for (const bool convert : {false, true}) {
        const auto gdx = put(dx0), gdw = put(dw0), gdb = put(db0);
        if (convert) {
            const auto scratch = put(std::vector<bf16>(kN * (kIn + kOut)));
            BB_OP(be(), linear_backward_bf16_convert)(gdx->get(), gdw->get(), gdb->get(), gdy->get(), gx->get(),
                                                      gwb->get(), kN, kIn, kOut, true, scratch->get());
        } else {
            BB_OP(be(), linear_backward_bf16)(gdx->get(), gdw->get(), gdb->get(), gdy->get(), gdyb->get(),
                                              gxt->get(), gwb->get(), kN, kIn, kOut, true);
        }
        const std::string how = convert ? " (converting)" : "";
        EXPECT_TRUE(all_close("linear bf16 dx" + how, gdx->download(), dx, kAtolSum, kRtolSum));
        EXPECT_TRUE(all_close("linear bf16 dw" + how, gdw->download(), dw, kAtolSum, kRtolSum));
        EXPECT_TRUE(all_close("linear bf16 db" + how, gdb->download(), db, kAtolSum, kRtolSum));
    }
}

TEST_P(BackendOps, TransposeBf16) {
    REQUIRE_OP(transpose_bf16);
    const int R = 37, C = 19, ld = 23;
    const std::vector<bf16> src = narrow(rand_f(static_cast<size_t>(R) * ld, 60));
    std::vector<bf16> want(static_cast<size_t>(R) * C);
    for (int r = 0; r < R; ++r)
        for (int c = 0; c < C; ++c) want[static_cast<size_t>(c) * R + r] = src[static_cast<size_t>(r) * ld + c];
    const auto gs = put(src);
    const auto gd = put(std::vector<bf16>(want.size()));
    BB_OP(be(), transpose_bf16)(gd->get(), gs->get(), R, C, ld);
    EXPECT_TRUE(same_bits(gd->download(), want));
}

// Packed weights: where the backend keeps a layout of its own, the product equals the plain one.
TEST_P(BackendOps, MatmulPacked) {
    for (const MatmulType type : {MatmulType::f32, MatmulType::bf16}) {
        const std::unique_ptr<ops::PackedWeights> packed = be().packed_weights(type);
        if (!packed && type == MatmulType::f32) GTEST_SKIP() << "backend " << be().name() << " keeps no packed weights";
        if (!packed) {  // the CPU backend without bf16 units (AVX2)
            std::cout << "[backend " << be().name() << "] keeps no packed bf16 weights on this machine\n";
            continue;
        }
        REQUIRE_OP(matmul_packed);
        const bool bf = type == MatmulType::bf16;
        const int M = 5, K = 33, N = 21;
        std::vector<float> a = rand_f(M * K, 61), w = rand_f(K * N, 62), e = rand_f(N * K, 63);
        const std::vector<float> bias = rand_f(N, 64);
        if (bf) a = rounded(a), w = rounded(w), e = rounded(e);
        std::vector<float> flat = w;  // two matrices at offsets 0 and K·N: a kernel and a transposed one
        flat.insert(flat.end(), e.begin(), e.end());
        packed->add(0, K, N, false);
        packed->add(w.size(), K, N, true);
        if (bf) packed->pack(narrow(flat).data());
        else packed->pack(flat.data());
        for (const bool tb : {false, true}) {
            std::vector<double> want(M * N);
            for (int m = 0; m < M; ++m)
                for (int n = 0; n < N; ++n) {
                    double acc = bias[n];
                    for (int k = 0; k < K; ++k)
                        acc += double(a[m * K + k]) * (tb ? e[n * K + k] : w[k * N + n]);
                    want[m * N + n] = acc;
                }
            const auto gc = put(std::vector<float>(M * N));
            const auto gbias = put(bias);
            const void* pb = packed->at(tb ? w.size() : 0);
            if (bf) {
                const auto ga = put(narrow(a));
                BB_OP(be(), matmul_packed)(type, M, N, K, ga->get(), K, pb, gc->get(), N, gbias->get(), MatmulType::f32);
            } else {
                const auto ga = put(a);
                BB_OP(be(), matmul_packed)(type, M, N, K, ga->get(), K, pb, gc->get(), N, gbias->get(), MatmulType::f32);
            }
            EXPECT_TRUE(all_close(std::string("matmul_packed ") + (bf ? "bf16" : "fp32") + (tb ? " Bᵀ" : ""),
                                  gc->download(), want, kAtolSum, kRtolSum));
        }
    }
}

TEST_P(BackendOps, CrossEntropyBiasAndBf16) {
    REQUIRE_OP(cross_entropy_forward_bias);
    REQUIRE_OP(cross_entropy_backward_bf16);
    for (const int R : {3, 37}) {  // 37 rows: three row chunks of the bias gradient's partials
        const int V = 1031;
        const size_t n = static_cast<size_t>(R) * V;
        const std::vector<float> z = rand_f(n, 80, 10.0), bias = rand_f(V, 81), coef = rand_f(R, 82),
                                 db0 = rand_f(V, 83);
        std::vector<int32_t> labels(R);
        for (int r = 0; r < R; ++r) labels[r] = (r * 13 + 5) % V;
        std::vector<double> zb = wide(z), loss(R), lse(R), dz(n), db = wide(db0);
        std::vector<int32_t> arg(R);
        ops::cross_entropy_forward_bias<double>(loss.data(), arg.data(), lse.data(), zb.data(), wide(bias).data(),
                                                labels.data(), R, V);
        ops::cross_entropy_backward<double>(dz.data(), zb.data(), lse.data(), labels.data(), wide(coef).data(), R, V);
        ops::bias_backward(db.data(), dz.data(), R, V);
        const auto gz = put(z), gbias = put(bias), gc = put(coef), gdb = put(db0);
        const auto gl = put(labels);
        const auto gloss = put(std::vector<double>(R));
        const auto garg = put(std::vector<int32_t>(R));
        const auto glse = put(std::vector<float>(R));
        const auto gdlb = put(std::vector<bf16>(n));
        const auto gpart = put(std::vector<float>(ops::cross_entropy_db_part_size(R, V)));
        BB_OP(be(), cross_entropy_forward_bias)(gloss->get(), garg->get(), glse->get(), gz->get(), gbias->get(),
                                                gl->get(), R, V);
        BB_OP(be(), cross_entropy_backward_bf16)(gdlb->get(), gdb->get(), gpart->get(), gz->get(), glse->get(),
                                                 gl->get(), gc->get(), R, V);
        const std::string r = " R=" + std::to_string(R);
        EXPECT_TRUE(all_close("ce+bias logits" + r, gz->download(), zb, kAtol, kRtol));
        EXPECT_TRUE(all_close("ce+bias loss" + r, gloss->download(), loss, kAtolSum, kRtolSum));
        EXPECT_TRUE(all_close("ce+bias lse" + r, glse->download(), lse, kAtolSum, kRtolSum));
        EXPECT_EQ(garg->download(), arg) << r;
        EXPECT_TRUE(all_close("ce bf16 dlogits" + r, from_bf16(gdlb->download()), dz, kAtol, kRtol + 1.0 / 256));
        EXPECT_TRUE(all_close("ce bf16 db" + r, gdb->download(), db, kAtolSum, kRtolSum));
    }
}

TEST_P(BackendOps, Rows) {
    REQUIRE_OP(gather_rows);
    REQUIRE_OP(scatter_add_rows);
    REQUIRE_OP(bias_rows);
    REQUIRE_OP(gather_mask_rows);
    const int N = 11, C = 9, R = 6;
    const std::vector<int32_t> rows = {3, 0, 10, 3, 7, 3};  // row 3 three times
    const std::vector<float> src = rand_f(N * C, 90), upd = rand_f(R * C, 91), base = rand_f(N * C, 92),
                             b = rand_f(C, 93);
    std::vector<float> gathered(R * C), added = base, biased(N * C);
    for (int r = 0; r < R; ++r)
        for (int c = 0; c < C; ++c) {
            gathered[r * C + c] = src[rows[r] * C + c];
            added[rows[r] * C + c] += upd[r * C + c];  // in r order: the op's bits
        }
    for (int i = 0; i < N; ++i) std::copy(b.begin(), b.end(), biased.begin() + i * C);
    const auto gsrc = put(src), gupd = put(upd), gbase = put(base), gb = put(b);
    const auto grows = put(rows);
    const auto gg = put(std::vector<float>(R * C)), gy = put(std::vector<float>(N * C));
    BB_OP(be(), gather_rows)(gg->get(), gsrc->get(), grows->get(), R, C);
    BB_OP(be(), scatter_add_rows)(gbase->get(), gupd->get(), grows->get(), R, C);
    BB_OP(be(), bias_rows)(gy->get(), gb->get(), N, C);
    EXPECT_EQ(gg->download(), gathered);
    EXPECT_EQ(gbase->download(), added);
    EXPECT_EQ(gy->download(), biased);
    std::vector<uint8_t> masks(N * C), gathered_masks(R * C);
    for (size_t i = 0; i < masks.size(); ++i) masks[i] = static_cast<uint8_t>(i * 7 % 251);
    for (int r = 0; r < R; ++r)
        std::copy_n(masks.begin() + rows[r] * C, C, gathered_masks.begin() + r * C);
    const auto gm = put(masks), gmg = put(std::vector<uint8_t>(R * C));
    BB_OP(be(), gather_mask_rows)(gmg->get(), gm->get(), grows->get(), R, C);
    EXPECT_EQ(gmg->download(), gathered_masks);
}

// The span loss against a double log-softmax written out here (a label outside its sequence: no
// loss, no gradient, as tf.one_hot's zero row gives); the strided copy exactly.
TEST_P(BackendOps, SegmentCrossEntropyAndStridedCopy) {
    REQUIRE_OP(segment_cross_entropy);
    REQUIRE_OP(strided_copy);
    const std::vector<int32_t> offsets = {0, 1, 8, 27, 30, 34}, labels = {0, 6, 11, -13, 4};
    const int B = 5, N = offsets[B];
    const std::vector<float> z2 = rand_f(2 * N, 100, 8.0);  // (N, 2): start and end columns
    const float coef = 0.37f;
    std::vector<double> loss(B), dz(2 * N, -9.0);           // the end column keeps its -9
    for (int b = 0; b < B; ++b) {
        const int o = offsets[b], n = offsets[b + 1] - o;
        if (labels[b] < 0 || labels[b] >= n) {
            loss[b] = 0;
            for (int i = 0; i < n; ++i) dz[2 * (o + i)] = 0;
            continue;
        }
        double mx = z2[2 * o];
        for (int i = 0; i < n; ++i) mx = std::max(mx, double(z2[2 * (o + i)]));
        double sum = 0;
        for (int i = 0; i < n; ++i) sum += std::exp(z2[2 * (o + i)] - mx);
        const double lse = mx + std::log(sum);
        loss[b] = lse - z2[2 * (o + labels[b])];
        for (int i = 0; i < n; ++i) dz[2 * (o + i)] = coef * (std::exp(z2[2 * (o + i)] - lse) - (i == labels[b]));
    }
    std::vector<float> start(N);
    for (int i = 0; i < N; ++i) start[i] = z2[2 * i];
    const auto gz2 = put(z2), gdz = put(std::vector<float>(2 * N, -9.f)), gstart = put(std::vector<float>(N));
    const auto goffs = put(offsets), glab = put(labels);
    const auto gloss = put(std::vector<double>(B));
    BB_OP(be(), strided_copy)(gstart->get(), gz2->get(), static_cast<size_t>(N), 2);
    BB_OP(be(), segment_cross_entropy)(gloss->get(), gdz->get(), 2, gstart->get(), 1, goffs->get(), glab->get(), B,
                                       coef);
    EXPECT_EQ(gstart->download(), start);
    EXPECT_TRUE(all_close("span loss", gloss->download(), loss, kAtolSum, kRtolSum));
    EXPECT_TRUE(all_close("span dlogits", gdz->download(), dz, kAtol, kRtol));
}

}  // namespace
}  // namespace bertbench::backend
