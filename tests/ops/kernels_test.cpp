// The AVX-512 kernel table against the AVX2 one (ops/kernels.hpp), every entry, on odd sizes and
// tails. Same formulas on both paths: exp, GELU, argmax, dropout masks and the elementwise ops
// must agree bit for bit (tolerance 0; so must the bf16 copies the producers write); what sums over a row (LayerNorm, softmax, the loss,
// attention) may differ in the last bits: atol 1e-6, rtol 1e-5. Skipped on a CPU without AVX-512.
#include <gtest/gtest.h>
#include <immintrin.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <limits>
#include <vector>

#include "check.hpp"
#include "ops/int8.hpp"
#include "ops/int8_vnni.hpp"
#include "ops/matmul.hpp"
#include "ops/kernels.hpp"
#include "ops/quantize.hpp"
#include "ops/vmath.hpp"

namespace bertbench::ops {
namespace {

using testing::all_close;
using testing::rand_f;
using testing::same_bits;

constexpr double kAtol = 1e-6, kRtol = 1e-5;
const size_t kSizes[] = {1, 7, 15, 16, 17, 31, 33, 100, 257, 4099};

class KernelsIsa : public ::testing::Test {
protected:
    void SetUp() override {
        a_ = kernels_for(Isa::avx2);
        b_ = kernels_for(Isa::avx512);
        ASSERT_NE(a_, nullptr);
        if (!b_) GTEST_SKIP() << "no AVX-512 kernels here (CPU: " << cpu_isa_summary() << ")";
        ASSERT_EQ(b_->isa, Isa::avx512);
    }
    const Kernels* a_ = nullptr;  // AVX2 (the reference)
    const Kernels* b_ = nullptr;  // AVX-512
};

// exp on every float (exp_affine_sum with scale 1 and shift 0: x itself), 16 lanes against 8: the
// same bits for all 2^32 inputs, NaN and the clamped ranges included (vmath.hpp's exp16 builds 2^n
// with vscalefps, exp8 from n's bits).
TEST_F(KernelsIsa, ExpEveryFloatBitIdenticalSlow) {
    constexpr size_t kChunk = size_t(1) << 20;
    std::vector<uint32_t> bits(kChunk);
    std::vector<float> x(kChunk), ya(kChunk), yb(kChunk);
    size_t differ = 0;
    uint32_t first = 0;
    for (uint64_t base = 0; base < (uint64_t(1) << 32); base += kChunk) {
        for (size_t i = 0; i < kChunk; ++i) bits[i] = static_cast<uint32_t>(base + i);
        std::memcpy(x.data(), bits.data(), kChunk * sizeof(float));
        a_->exp_affine_sum(ya.data(), x.data(), kChunk, 1.f, 0.f);
        b_->exp_affine_sum(yb.data(), x.data(), kChunk, 1.f, 0.f);
        for (size_t i = 0; i < kChunk; ++i)
            if (std::memcmp(&ya[i], &yb[i], sizeof(float)) != 0 && differ++ == 0) first = bits[i];
    }
    EXPECT_EQ(differ, 0u) << "first differing input bits 0x" << std::hex << first;
}

TEST_F(KernelsIsa, ActivationsBitIdentical) {
    for (const Activation act : {Activation::gelu_tanh, Activation::gelu_erf, Activation::relu}) {
        for (const size_t n : kSizes) {
            std::vector<float> x = rand_f(n, n, 12.0), dy = rand_f(n, n + 1);
            if (n > 3) x[2] = 100.f, x[3] = -100.f;  // the σ cap
            std::vector<float> ya(n), yb(n), da(n), db(n);
            std::vector<bf16> ha(n), hb(n), hda(n), hdb(n);  // the bf16 copies, same bits too
            a_->activation_forward(act, ya.data(), x.data(), n, ha.data());
            b_->activation_forward(act, yb.data(), x.data(), n, hb.data());
            a_->activation_backward(act, da.data(), dy.data(), x.data(), n, hda.data(), nullptr);
            b_->activation_backward(act, db.data(), dy.data(), x.data(), n, hdb.data(), nullptr);
            EXPECT_TRUE(all_close("act fwd n=" + std::to_string(n), yb, ya, 0, 0));
            EXPECT_TRUE(all_close("act bwd n=" + std::to_string(n), db, da, 0, 0));
            EXPECT_TRUE(same_bits(hb, ha)) << "act fwd bf16 n=" << n;
            EXPECT_TRUE(same_bits(hdb, hda)) << "act bwd bf16 n=" << n;
        }
    }
    for (const size_t n : kSizes) {  // tanh (pooler)
        std::vector<float> ya = rand_f(n, 7 * n), yb = ya, dy = rand_f(n, 3), da(n), db(n);
        a_->tanh_forward(ya.data(), n);
        b_->tanh_forward(yb.data(), n);
        a_->tanh_backward(da.data(), dy.data(), ya.data(), n);
        b_->tanh_backward(db.data(), dy.data(), ya.data(), n);
        EXPECT_TRUE(all_close("tanh fwd", yb, ya, 0, 0));
        EXPECT_TRUE(all_close("tanh bwd", db, da, 0, 0));
    }
}

TEST_F(KernelsIsa, ExpAndArgmax) {
    for (const size_t n : kSizes) {
        std::vector<float> x = rand_f(n, 11 * n, 100.0), ya(n), yb(n);
        const float sa = a_->exp_affine_sum(ya.data(), x.data(), n, 0.5f, 3.f);
        const float sb = b_->exp_affine_sum(yb.data(), x.data(), n, 0.5f, 3.f);
        EXPECT_TRUE(all_close("exp n=" + std::to_string(n), yb, ya, 0, 0));
        EXPECT_NEAR(sb, sa, 1e-6 * std::abs(sa)) << "n=" << n;
        // ties: the first maximum, wherever the copies sit relative to the 8/16-lane blocks
        for (size_t first = 0; first < n; first += 1 + n / 5) {
            std::vector<float> z = rand_f(n, first + 1);
            z[first] = 5.f;
            for (size_t j = first + 1; j < n; j += 3) z[j] = 5.f;
            EXPECT_EQ(b_->array_argmax(z.data(), n), a_->array_argmax(z.data(), n)) << n << " " << first;
            EXPECT_EQ(b_->array_argmax(z.data(), n), first);
            if (n > 2) {
                z[n / 2] = std::numeric_limits<float>::quiet_NaN();
                EXPECT_EQ(b_->array_argmax(z.data(), n), a_->array_argmax(z.data(), n)) << "NaN " << n;
            }
        }
    }
}

TEST_F(KernelsIsa, DropoutBitIdentical) {
    const DropoutStream s{0x1234567890abcdefull, 0x100000007ull, 9, 0.9};
    for (const size_t first : {size_t(0), size_t(1), size_t(6), size_t(4) * size_t(0xFFFFFFF0u) + 3}) {
        for (const size_t n : kSizes) {
            std::vector<uint8_t> ma(n), mb(n);
            a_->dropout_fill_mask(ma.data(), s, first, n);
            b_->dropout_fill_mask(mb.data(), s, first, n);
            EXPECT_EQ(mb, ma) << "first " << first << " n " << n;
        }
    }
    const size_t n = 70001;  // several parallel chunks and a tail
    std::vector<uint8_t> ma(n), mb(n);
    a_->dropout_fill_mask_parallel(ma.data(), s, n);
    b_->dropout_fill_mask_parallel(mb.data(), s, n);
    EXPECT_EQ(mb, ma);
    const std::vector<float> x = rand_f(n, 5), r = rand_f(n, 6);
    for (const float* res : {static_cast<const float*>(nullptr), r.data()}) {
        std::vector<float> ya(n), yb(n);
        std::vector<bf16> ha(n), hb(n);
        a_->dropout_add_forward(ya.data(), x.data(), ma.data(), 0.9f, res, n, ha.data());
        b_->dropout_add_forward(yb.data(), x.data(), ma.data(), 0.9f, res, n, hb.data());
        EXPECT_TRUE(all_close("dropout fwd", yb, ya, 0, 0));
        EXPECT_TRUE(same_bits(hb, ha)) << "dropout fwd bf16";
    }
    std::vector<float> da(n), db(n);
    std::vector<bf16> hda(n), hdb(n);
    a_->dropout_backward(da.data(), x.data(), ma.data(), 0.9f, n, hda.data(), nullptr);
    b_->dropout_backward(db.data(), x.data(), ma.data(), 0.9f, n, hdb.data(), nullptr);
    EXPECT_TRUE(all_close("dropout bwd", db, da, 0, 0));
    EXPECT_TRUE(same_bits(hdb, hda)) << "dropout bwd bf16";
}

// The bias gradient their producers sum (bias_grad.hpp) adds each column's values in the same
// order on both paths: the same bits.
TEST_F(KernelsIsa, ProducersBiasGradientBitIdentical) {
    const int N = 131, C = 2053;  // a partial 64-row chunk, rows of two segments
    const size_t n = static_cast<size_t>(N) * C;
    const std::vector<float> x = rand_f(n, 41), dy = rand_f(n, 42);
    std::vector<uint8_t> mask(n);
    a_->dropout_fill_mask_parallel(mask.data(), DropoutStream{3, 1, 4, 0.9}, n);
    std::vector<float> part(bias_grad_part_size(N, C));
    const auto run = [&](const Kernels* k, bool gelu) {
        std::vector<float> db(C, 0.5f);
        std::vector<bf16> dxb(n);
        const BiasGrad<float> bg{db.data(), part.data(), C};
        if (gelu)
            k->activation_backward(Activation::gelu_tanh, nullptr, dy.data(), x.data(), n, dxb.data(), &bg);
        else
            k->dropout_backward(nullptr, dy.data(), mask.data(), 0.9f, n, dxb.data(), &bg);
        return db;
    };
    for (const bool gelu : {true, false})
        EXPECT_TRUE(all_close(gelu ? "gelu db" : "dropout db", run(b_, gelu), run(a_, gelu), 0, 0));
}

TEST_F(KernelsIsa, RowReductionsClose) {
    for (const int C : {1, 7, 17, 33, 128, 257}) {
        const int N = 13;
        const size_t nc = static_cast<size_t>(N) * C;
        const std::vector<float> x = rand_f(nc, C), dy = rand_f(nc, C + 1), g = rand_f(C, 2), be = rand_f(C, 3);
        std::vector<float> ya(nc), yb(nc), ma(N), mb(N), ra(N), rb(N);
        a_->layernorm_forward(ya.data(), ma.data(), ra.data(), x.data(), g.data(), be.data(), N, C, 1e-12,
                              nullptr);
        b_->layernorm_forward(yb.data(), mb.data(), rb.data(), x.data(), g.data(), be.data(), N, C, 1e-12,
                              nullptr);
        EXPECT_TRUE(all_close("ln y C=" + std::to_string(C), yb, ya, kAtol, kRtol));
        EXPECT_TRUE(all_close("ln rstd", rb, ra, kAtol, kRtol));
        std::vector<float> dxa(nc, 1.f), dxb(nc, 1.f), dga(C), dgb(C), dba(C), dbb(C);
        a_->layernorm_backward(dxa.data(), dga.data(), dba.data(), dy.data(), x.data(), g.data(), ma.data(),
                               ra.data(), N, C, true);
        b_->layernorm_backward(dxb.data(), dgb.data(), dbb.data(), dy.data(), x.data(), g.data(), ma.data(),
                               ra.data(), N, C, true);
        EXPECT_TRUE(all_close("ln dx", dxb, dxa, kAtol, kRtol));
        EXPECT_TRUE(all_close("ln dgamma", dgb, dga, kAtol, kRtol));
        EXPECT_TRUE(all_close("ln dbeta", dbb, dba, kAtol, kRtol));

        std::vector<float> pa(nc), pb(nc), dsa(nc), dsb(nc);
        a_->softmax_forward(pa.data(), x.data(), N, C, 0.7f);
        b_->softmax_forward(pb.data(), x.data(), N, C, 0.7f);
        EXPECT_TRUE(all_close("softmax", pb, pa, kAtol, kRtol));
        a_->softmax_backward(dsa.data(), dy.data(), pa.data(), N, C);
        b_->softmax_backward(dsb.data(), dy.data(), pa.data(), N, C);
        EXPECT_TRUE(all_close("softmax bwd", dsb, dsa, kAtol, kRtol));

        std::vector<int32_t> labels(N), arga(N), argb(N);
        for (int r = 0; r < N; ++r) labels[r] = (r * 5) % C;
        std::vector<double> la(N), lb(N);
        std::vector<float> lsea(N), lseb(N), coef(N, 0.25f), dla(nc), dlb(nc);
        a_->cross_entropy_forward(la.data(), arga.data(), lsea.data(), x.data(), labels.data(), N, C);
        b_->cross_entropy_forward(lb.data(), argb.data(), lseb.data(), x.data(), labels.data(), N, C);
        EXPECT_EQ(argb, arga);
        EXPECT_TRUE(all_close("ce loss", lb, la, kAtol, kRtol));
        a_->cross_entropy_backward(dla.data(), x.data(), lsea.data(), labels.data(), coef.data(), N, C);
        b_->cross_entropy_backward(dlb.data(), x.data(), lsea.data(), labels.data(), coef.data(), N, C);
        EXPECT_TRUE(all_close("ce dlogits", dlb, dla, 0, 0));  // exp given the same lse: same bits
    }
}

TEST_F(KernelsIsa, EmbeddingAndAttention) {
    const int B = 3, NH = 3, HS = 7, H = NH * HS, V = 11;
    const std::vector<int32_t> offsets = {0, 5, 6, 23}, keys = {5, 1, 17};
    const int N = offsets[B];
    std::vector<int32_t> ids(N), seg(N);
    for (int i = 0; i < N; ++i) ids[i] = (i * 7) % V, seg[i] = i % 2;
    const EmbeddingIndex ex{ids.data(), seg.data(), offsets.data(), B};
    const std::vector<float> word = rand_f(V * H, 1), pos = rand_f(N * H, 2), type = rand_f(2 * H, 3);
    std::vector<float> ea(N * H), eb(N * H);
    a_->embedding_forward(ea.data(), word.data(), pos.data(), type.data(), ex, H);
    b_->embedding_forward(eb.data(), word.data(), pos.data(), type.data(), ex, H);
    EXPECT_TRUE(all_close("emb fwd", eb, ea, 0, 0));
    std::vector<float> gwa(V * H), gwb(V * H), gpa(N * H), gpb(N * H), gta(2 * H), gtb(2 * H);
    a_->embedding_backward(gwa.data(), gpa.data(), gta.data(), ea.data(), ex, H);
    b_->embedding_backward(gwb.data(), gpb.data(), gtb.data(), ea.data(), ex, H);
    EXPECT_TRUE(all_close("emb dword", gwb, gwa, 0, 0));
    EXPECT_TRUE(all_close("emb dtype", gtb, gta, 0, 0));

    for (const bool padded : {false, true}) {
        std::vector<size_t> pofs(B + 1);
        const int32_t* kl = padded ? keys.data() : nullptr;
        const size_t np = attention_prob_offsets(pofs.data(), offsets.data(), B, NH, kl);
        const AttentionShape s{offsets.data(), pofs.data(), B, NH, HS, kl};
        const DropoutStream ds{42, 3, 5, 0.9};
        const std::vector<float> q = rand_f(N * H, 4), k = rand_f(N * H, 5), v = rand_f(N * H, 6),
                                 dctx = rand_f(N * H, 7);
        std::vector<float> ca(N * H), cb(N * H), pa(np), pb(np), sa(np), sb(np);
        std::vector<uint8_t> ma(np), mb(np);
        a_->attention_forward(ca.data(), pa.data(), sa.data(), ma.data(), q.data(), k.data(), v.data(), s, &ds, nullptr);
        b_->attention_forward(cb.data(), pb.data(), sb.data(), mb.data(), q.data(), k.data(), v.data(), s, &ds, nullptr);
        EXPECT_EQ(mb, ma);
        EXPECT_TRUE(all_close("attn probs", pb, pa, kAtol, kRtol));
        EXPECT_TRUE(all_close("attn ctx", cb, ca, kAtol, kRtol));
        std::vector<float> dqa(N * H), dqb(N * H), dka(N * H), dkb(N * H), dva(N * H), dvb(N * H), dpa(np), dpb(np);
        a_->attention_backward(dqa.data(), dka.data(), dva.data(), dpa.data(), dctx.data(), q.data(), k.data(),
                               v.data(), pa.data(), ma.data(), 0.9f, s, nullptr);
        b_->attention_backward(dqb.data(), dkb.data(), dvb.data(), dpb.data(), dctx.data(), q.data(), k.data(),
                               v.data(), pa.data(), ma.data(), 0.9f, s, nullptr);
        EXPECT_TRUE(all_close("attn dq", dqb, dqa, kAtol, kRtol));
        EXPECT_TRUE(all_close("attn dk", dkb, dka, kAtol, kRtol));
        EXPECT_TRUE(all_close("attn dv", dvb, dva, kAtol, kRtol));
    }
}

// The tanh GELU's bits do not depend on where a value sits: the scalar tail (here every value on
// its own, n = 1) gives the lanes' bits (n = 4096: 16 or 8 lanes), on every table; the int8
// epilogues activate each row on its own, so their tails fall elsewhere than the fp32 engine's.
TEST(Kernels, GeluTailIsTheLanesBitForBit) {
    constexpr size_t n = 4096;
    std::vector<float> x = rand_f(n, 99, 8.0);
    x[1] = 100.f, x[2] = -100.f, x[3] = 0.f, x[4] = -0.f, x[5] = 1e-30f;  // the σ cap, zeros, tiny
    for (const Isa isa : {Isa::avx2, Isa::avx512}) {
        const Kernels* k = kernels_for(isa);
        if (!k) continue;
        std::vector<float> lanes(n), alone(n);
        k->activation_forward(Activation::gelu_tanh, lanes.data(), x.data(), n, nullptr);
        for (size_t i = 0; i < n; ++i) k->activation_forward(Activation::gelu_tanh, &alone[i], &x[i], 1, nullptr);
        EXPECT_TRUE(same_bits(alone, lanes)) << k->name;
    }
}

// exp<Exp::q8> (vmath.hpp: the int8 engine's probabilities and GELU) within its stated 1.02e-4 of
// exp in double wherever the result is a normal float, clamped as exp is outside [-87.3, 88]; the
// 8 lanes give the scalar form's bits (the AVX-512 tables' 16 lanes are checked through
// softmax_rows_u8 and dequantize_rows above).
TEST(Kernels, ExpQ8WithinItsBound) {
    constexpr int kSteps = 1 << 20;
    double worst = 0;
    size_t differ = 0;
    for (int i = 0; i < kSteps; i += 8) {
        alignas(32) float x[8], lanes[8];
        for (int l = 0; l < 8; ++l) x[l] = -87.f + 175.f * static_cast<float>(i + l) / kSteps;
        _mm256_store_ps(lanes, exp8<Exp::q8>(_mm256_load_ps(x)));
        for (int l = 0; l < 8; ++l) {
            const float y = fast_exp<Exp::q8>(x[l]);
            differ += std::memcmp(&y, &lanes[l], sizeof y) != 0;
            if (y >= std::numeric_limits<float>::min())
                worst = std::max(worst, std::fabs(y / std::exp(static_cast<double>(x[l])) - 1));
        }
    }
    EXPECT_LE(worst, 1.02e-4);
    EXPECT_GT(worst, 5e-5);  // the degree-3 polynomial's error, not the full exp's 2 ulp
    EXPECT_EQ(differ, 0u);
    EXPECT_EQ(fast_exp<Exp::q8>(-1e4f), fast_exp<Exp::q8>(-87.3f));  // the clamps
    EXPECT_EQ(fast_exp<Exp::q8>(1e4f), fast_exp<Exp::q8>(88.f));
}

TEST(Kernels, ChosenTableIsRunnable) {
    const Kernels& k = kernels();
    EXPECT_EQ(kernels_for(k.isa), &k);  // what kernels() picked exists here and this CPU runs it
}

// The weight range int8 inference quantizes to is the widest oneDNN's int8 product keeps exact here:
// rows of 255 (u8) times 256 weights of ±int8_weight_max() sum exactly; and where the range is 7 bits,
// 8-bit weights would not (vpmaddubsw's int16 pairs saturate), so it is not chosen needlessly (it
// was on AVX-VNNI, whose oneDNN kernel "gemm:jit" names no VNNI). ctest runs it again with oneDNN held
// to AVX2 and to AVX2_VNNI (Int8Range.AVX2, Int8Range.AVX2_VNNI).
TEST(KernelsInt8, WeightRangeIsTheWidestTheProductKeepsExact) {
    const int M = 4, N = 32, K = 256;
    const std::vector<uint8_t> a(static_cast<size_t>(M) * K, 255);
    const auto exact = [&](int w) {
        const std::vector<int8_t> b(static_cast<size_t>(K) * N, static_cast<int8_t>(w));
        std::vector<int32_t> c(static_cast<size_t>(M) * N);
        ops::matmul(ops::MatmulType::u8, false, M, N, K, a.data(), K, b.data(), N, 0.f, c.data(), N, nullptr,
                    ops::MatmulType::s32);
        return std::all_of(c.begin(), c.end(), [&](int32_t v) { return v == 255 * w * K; });
    };
    const int wmax = ops::int8_weight_max();
    std::cout << "[int8] " << ops::int8_gemm_impl() << ", weights in ±" << wmax << "\n";
    ASSERT_TRUE(wmax == 127 || wmax == 63) << wmax;
    EXPECT_TRUE(exact(wmax));
    EXPECT_TRUE(exact(-wmax));
    EXPECT_EQ(exact(127), wmax == 127) << "8-bit weights " << (wmax == 127 ? "not " : "") << "exact, yet ±" << wmax;
}

// int8 inference's passes (ops/quantize.hpp) on every table this CPU runs, bit for bit against
// their scalar formulas written out here: q = nearbyint(x·(qmax/max|x|)), scale = max|x|/qmax (the
// u8 form: q + 128); y = float(acc − o)·(sx·sw) + b.
TEST(KernelsInt8, QuantizeAndDequantizeMatchScalarFormulas) {
    for (const Isa isa : {Isa::avx2, Isa::avx512}) {
        const Kernels* k = kernels_for(isa);
        if (!k) continue;
        for (const size_t n : kSizes) {
            const int C = static_cast<int>(n);
            for (const int qmax : {127, 63}) {
                std::vector<float> x = rand_f(n, n + qmax, 5.0);
                if (n > 5) x[5] = 0.5f / static_cast<float>(qmax);  // a tie of the rounding
                float m = 0.f;
                for (const float v : x) m = std::max(m, std::fabs(v));
                const float r = static_cast<float>(qmax) / m;
                std::vector<int8_t> q(n, 99), want(n);
                for (size_t c = 0; c < n; ++c) want[c] = static_cast<int8_t>(static_cast<int>(std::nearbyint(x[c] * r)));
                float scale = -1.f;
                ASSERT_TRUE(k->quantize_row_s8(q.data(), &scale, x.data(), C, qmax)) << k->name << " n=" << n;
                EXPECT_EQ(q, want) << k->name << " n=" << n << " qmax=" << qmax;
                EXPECT_EQ(scale, m / static_cast<float>(qmax)) << k->name << " n=" << n;
                if (qmax != 127) continue;
                std::vector<uint8_t> u(n, 99), want_u(n);
                for (size_t c = 0; c < n; ++c) want_u[c] = static_cast<uint8_t>(want[c] + 128);
                scale = -1.f;
                ASSERT_TRUE(k->quantize_row_u8(u.data(), &scale, x.data(), C)) << k->name << " n=" << n;
                EXPECT_EQ(u, want_u) << k->name << " u8 n=" << n;
                EXPECT_EQ(scale, m / 127.f) << k->name << " u8 n=" << n;
            }
            std::vector<float> zeros(n, 0.f), x = rand_f(n, n);
            std::vector<int8_t> q(n, 99);
            float scale = -1.f;
            ASSERT_TRUE(k->quantize_row_s8(q.data(), &scale, zeros.data(), C, 127));
            EXPECT_EQ(scale, 0.f);
            EXPECT_TRUE(std::all_of(q.begin(), q.end(), [](int8_t v) { return v == 0; })) << k->name << " n=" << n;
            std::vector<uint8_t> u(n, 99);
            ASSERT_TRUE(k->quantize_row_u8(u.data(), &scale, zeros.data(), C));
            EXPECT_EQ(scale, 0.f);
            EXPECT_TRUE(std::all_of(u.begin(), u.end(), [](uint8_t v) { return v == 128; })) << k->name << " u8 n=" << n;
            // subnormal values: 127/max overflows float, which would saturate every value to -128;
            // the row counts as zeros (ops/quantize.hpp inverse_step)
            std::vector<float> tiny = zeros;
            tiny[n / 2] = 1e-39f, tiny[0] = -3e-40f;
            q.assign(n, 99);
            ASSERT_TRUE(k->quantize_row_s8(q.data(), &scale, tiny.data(), C, 127));
            EXPECT_EQ(scale, 0.f);
            EXPECT_TRUE(std::all_of(q.begin(), q.end(), [](int8_t v) { return v == 0; })) << k->name << " tiny n=" << n;
            std::vector<float> wcol(2 * n, 0.5f), wscale(2, -1.f);  // (n, 2): column 1 subnormal
            for (size_t r = 0; r < n; ++r) wcol[2 * r + 1] = tiny[r];
            std::vector<int8_t> wq(2 * n, 99);
            quantize_columns(wq.data(), wscale.data(), wcol.data(), C, 2, 127);
            EXPECT_EQ(wscale[1], 0.f);
            EXPECT_EQ(wscale[0], 0.5f / 127);
            for (size_t r = 0; r < n; ++r) EXPECT_EQ(wq[2 * r + 1], 0) << "row " << r;
            for (const float bad : {std::numeric_limits<float>::quiet_NaN(), std::numeric_limits<float>::infinity(),
                                    -std::numeric_limits<float>::infinity()}) {
                std::vector<float> y = x;
                y[n - 1] = bad;  // the last element: the scalar tail or the last vector
                EXPECT_FALSE(k->quantize_row_s8(q.data(), &scale, y.data(), C, 127)) << k->name << " n=" << n << " " << bad;
                EXPECT_FALSE(k->quantize_row_u8(u.data(), &scale, y.data(), C)) << k->name << " u8 n=" << n << " " << bad;
                y[n - 1] = x[n - 1];
                y[0] = bad;
                EXPECT_FALSE(k->quantize_row_s8(q.data(), &scale, y.data(), C, 127)) << k->name << " n=" << n << " " << bad;
            }
            // dequantization: 3 rows of n columns, with and without a bias
            const int rows = 3;
            std::vector<int32_t> acc(static_cast<size_t>(rows) * n);
            for (size_t i = 0; i < acc.size(); ++i) acc[i] = static_cast<int32_t>((i * 2654435761u) % 2000001) - 1000000;
            const std::vector<float> xs = {0.013f, 0.f, 2.5e-3f}, ws = rand_f(n, 2 * n, 0.01), b = rand_f(n, 3 * n);
            std::vector<int32_t> off(n);  // the u8 inputs' offsets: 128·Σ_k qw(k,j)
            for (size_t j = 0; j < n; ++j) off[j] = 128 * (static_cast<int32_t>((j * 40503u) % 20001) - 10000);
            // y rows ld apart: a slab of a wider y, whose other columns stay as they were
            const size_t ld = n + 5;
            for (int variant = 0; variant < 4; ++variant) {  // with and without a bias, and offsets
                const float* bias = variant & 1 ? nullptr : b.data();
                const int32_t* o = variant & 2 ? nullptr : off.data();
                std::vector<float> y(rows * ld, -7.f), want(y.size(), -7.f);
                for (int i = 0; i < rows; ++i)
                    for (size_t j = 0; j < n; ++j) {
                        const float t = xs[i] * ws[j];
                        const int32_t a = acc[i * n + j] - (o ? o[j] : 0);
                        want[i * ld + j] = std::fma(static_cast<float>(a), t, bias ? bias[j] : 0.f);
                    }
                k->dequantize_rows(y.data(), acc.data(), o, xs.data(), ws.data(), bias, nullptr, rows, C,
                                   static_cast<int>(ld), nullptr);
                EXPECT_TRUE(all_close(std::string(k->name) + " dequantize n=" + std::to_string(n), y, want, 0, 0));
                // plus a residual (ld apart, as y): the sum of the two, rounded once
                const std::vector<float> res = rand_f(rows * ld, 4 * n);
                std::vector<float> yr(rows * ld, -7.f), wr = want;
                for (int i = 0; i < rows; ++i)
                    for (size_t j = 0; j < n; ++j) wr[i * ld + j] += res[i * ld + j];
                k->dequantize_rows(yr.data(), acc.data(), o, xs.data(), ws.data(), bias, res.data(), rows, C,
                                   static_cast<int>(ld), nullptr);
                EXPECT_TRUE(all_close(std::string(k->name) + " dequantize+residual n=" + std::to_string(n), yr, wr, 0, 0));
                // with an activation: ReLU as activation_forward makes it of the dequantized row; the
                // GELU (exp to Exp::q8's 1.02e-4, vmath.hpp: σ within 1.02e-4 relative, plus 2u's
                // rounding in float, 3 ulp of at most 80: 1.5e-5; the σ cap 1e-33 absolute) against
                // its σ form in double
                for (const Activation a : {Activation::gelu_tanh, Activation::relu}) {
                    std::vector<float> ya(rows * ld, -7.f), wa = want;
                    for (int i = 0; i < rows; ++i) k->activation_forward(a, wa.data() + i * ld, wa.data() + i * ld, n, nullptr);
                    if (a == Activation::gelu_tanh)
                        for (int i = 0; i < rows; ++i)
                            for (size_t j = 0; j < n; ++j) {
                                const double v = want[i * ld + j];
                                // x·σ(2u): 0.5x(1 + tanh u) cancels to 0 where tanh u ≈ −1
                                wa[i * ld + j] = static_cast<float>(
                                    v / (1 + std::exp(-2 * 0.7978845608028654 * (v + 0.044715 * v * v * v))));
                            }
                    const double rtol = a == Activation::gelu_tanh ? 1.2e-4 : 0, atol = rtol > 0 ? 1e-30 : 0;
                    k->dequantize_rows(ya.data(), acc.data(), o, xs.data(), ws.data(), bias, nullptr, rows, C,
                                       static_cast<int>(ld), &a);
                    EXPECT_TRUE(all_close(std::string(k->name) + " dequantize+act n=" + std::to_string(n), ya, wa, atol,
                                          rtol));
                    // the residual after the activation (rounded once more: a few ulp of the sum)
                    for (int i = 0; i < rows; ++i)
                        for (size_t j = 0; j < n; ++j) wa[i * ld + j] += res[i * ld + j];
                    std::vector<float> yr2(rows * ld, -7.f);
                    k->dequantize_rows(yr2.data(), acc.data(), o, xs.data(), ws.data(), bias, res.data(), rows, C,
                                       static_cast<int>(ld), &a);
                    for (int i = 0; i < rows; ++i)  // the same activation, then the residual added once
                        for (size_t j = 0; j < n; ++j) ya[i * ld + j] += res[i * ld + j];
                    EXPECT_TRUE(same_bits(yr2, ya)) << k->name << " dequantize+act+residual n=" << n;
                }
            }
        }
    }
}

// The int8 attention's probabilities (softmax_rows_u8) on every table this CPU runs, against their
// formula in double: x = (s − o)·sa·sb, e = exp(x − max x), y = e·w, q = round(y·255/max y), scale
// = max y / (255·Σe); q within half a step (plus exp's error), the largest on 255 wherever it
// sits (a spike moved along the row: the AVX-512 maximum keeps four chains of lanes).
TEST(KernelsInt8, SoftmaxRowsU8MatchesItsFormula) {
    for (const Isa isa : {Isa::avx2, Isa::avx512}) {
        const Kernels* k = kernels_for(isa);
        if (!k) continue;
        for (const int C : {1, 7, 16, 64, 100, 257, 384}) {
            const int R = 9;
            const size_t n = static_cast<size_t>(C);
            std::vector<int32_t> s(R * n), off(n);
            for (size_t i = 0; i < s.size(); ++i) s[i] = static_cast<int32_t>((i * 2654435761u) % 40001) - 20000;
            for (size_t j = 0; j < n; ++j) off[j] = static_cast<int32_t>((j * 40503u) % 6001) - 3000;
            std::vector<float> sa = rand_f(R, C, 1e-2), sb = rand_f(n, C + 1, 1e-2), w = rand_f(n, C + 2, 1.0);
            for (float& v : sa) v = std::fabs(v) + 1e-2f;  // x over a few units, the spike ~30 above
            for (float& v : sb) v = std::fabs(v) + 1e-2f;
            for (float& v : w) v = std::fabs(v) + 0.5f;
            for (int r = 0; r < R; ++r) s[r * n + (static_cast<size_t>(r) * 37 + 5) % n] += 150000;  // the spike
            std::vector<uint8_t> q(R * n);
            std::vector<float> scale(R), work(n);
            ASSERT_TRUE(k->softmax_rows_u8(q.data(), scale.data(), s.data(), off.data(), sa.data(), sb.data(),
                                           w.data(), R, C, work.data()));
            for (int r = 0; r < R; ++r) {
                std::vector<double> y(n);
                double mx = -1e300, sum = 0, m = 0;
                for (size_t j = 0; j < n; ++j)
                    mx = std::max(mx, double(s[r * n + j] - off[j]) * (double(sa[r]) * sb[j]));
                for (size_t j = 0; j < n; ++j) {
                    const double e = std::exp(double(s[r * n + j] - off[j]) * (double(sa[r]) * sb[j]) - mx);
                    sum += e;
                    y[j] = e * w[j];
                    m = std::max(m, y[j]);
                }
                const std::string at = std::string(k->name) + " C=" + std::to_string(C) + " row " + std::to_string(r);
                // exp within 1.02e-4 relative (Exp::q8, vmath.hpp): m and Σe each, so the scale within
                // 2.04e-4 and y/m within 2.04e-4 of ≤ 1 (q within half a step plus 255·2.04e-4 = 0.052)
                EXPECT_NEAR(scale[r], m / (255 * sum), 2.1e-4 * m / (255 * sum)) << at;
                for (size_t j = 0; j < n; ++j)
                    ASSERT_LE(std::fabs(q[r * n + j] - y[j] * 255 / m), 0.5 + 0.053) << at << " col " << j;
            }
        }
    }
}

// softmax_rows_u8's three passes give the bits of the six it replaced: dequantize_rows, array_max,
// exp_affine_sum<Exp::q8>, the product with w, array_max and the rounding to u8, composed here from
// the same inline functions in this file's instruction set (the AVX2 table's; the AVX-512 copy
// shares the structure with 16 lanes first).
TEST(KernelsInt8, SoftmaxRowsU8IsTheSeparatePassesBitForBit) {
    const Kernels* k = kernels_for(Isa::avx2);
    ASSERT_NE(k, nullptr);
    for (const int C : {1, 7, 8, 9, 16, 17, 64, 100, 257, 384}) {
        const int R = 5;
        const size_t n = static_cast<size_t>(C);
        std::vector<int32_t> s(R * n), off(n);
        for (size_t i = 0; i < s.size(); ++i) s[i] = static_cast<int32_t>((i * 2654435761u) % 40001) - 20000;
        for (size_t j = 0; j < n; ++j) off[j] = static_cast<int32_t>((j * 40503u) % 6001) - 3000;
        std::vector<float> sa = rand_f(R, C + 3, 1e-2), sb = rand_f(n, C + 4, 1e-2), w = rand_f(n, C + 5, 1.0);
        for (float& v : sa) v = std::fabs(v) + 1e-2f;
        for (float& v : sb) v = std::fabs(v) + 1e-2f;
        for (float& v : w) v = std::fabs(v) + 0.5f;
        std::vector<uint8_t> q(R * n);
        std::vector<float> scale(R), work(n);
        ASSERT_TRUE(k->softmax_rows_u8(q.data(), scale.data(), s.data(), off.data(), sa.data(), sb.data(), w.data(), R,
                                       C, work.data()));
        for (int r = 0; r < R; ++r) {
            std::vector<float> x(n);
            dequantize_rows(x.data(), s.data() + r * n, off.data(), &sa[r], sb.data(), nullptr, nullptr, 1, C, C,
                            nullptr);
            const float mx = array_max(x.data(), n);
            const float sum = exp_affine_sum<Exp::q8>(x.data(), x.data(), n, 1.f, mx);
            for (size_t j = 0; j < n; ++j) x[j] *= w[j];
            const float m = array_max(x.data(), n), step = inverse_step(m, 255.f);
            const std::string at = "C=" + std::to_string(C) + " row " + std::to_string(r);
            EXPECT_EQ(scale[r], step > 0.f ? m / (255.f * sum) : 0.f) << at;
            for (size_t j = 0; j < n; ++j)
                ASSERT_EQ(q[r * n + j], static_cast<uint8_t>(static_cast<int>(std::nearbyint(x[j] * step))))
                    << at << " col " << j;
        }
    }
}

// A score that is not a number (an int32 difference of 0 times an infinite scale) or an infinite
// one: false, wherever the score sits (the vector passes' lanes and the scalar tail).
TEST(KernelsInt8, SoftmaxRowsU8RejectsNonFiniteScores) {
    for (const Isa isa : {Isa::avx2, Isa::avx512}) {
        const Kernels* k = kernels_for(isa);
        if (!k) continue;
        for (const int C : {7, 16, 43}) {
            const size_t n = static_cast<size_t>(C);
            for (const size_t at : {size_t(0), n / 2, n - 1})
                for (const bool nan : {true, false}) {
                    std::vector<int32_t> s(n, 1000);
                    std::vector<float> sa{1.f}, sb(n, 1e-3f), w(n, 1.f), work(n), scale(1);
                    std::vector<uint8_t> q(n);
                    sb[at] = std::numeric_limits<float>::infinity();
                    if (nan) s[at] = 0;
                    EXPECT_FALSE(k->softmax_rows_u8(q.data(), scale.data(), s.data(), nullptr, sa.data(), sb.data(),
                                                    w.data(), 1, C, work.data()))
                        << k->name << " C=" << C << " at " << at << (nan ? " NaN" : " Inf");
                }
        }
    }
}

// The int8 attention's hand-written VNNI products (ops/int8_vnni.hpp) against oneDNN's u8 × s8
// product and a plain loop, int32 for int32: B from both source layouts (keys stored transposed, v
// row-major, rows ld apart inside a wider matrix), M, N and K not multiples of the tile (6 rows, 64
// outputs) or of the 4-input group, N over several tiles, extreme values (255 · ±127 · K), and A's
// rows read past K into bytes that must not count.
TEST(KernelsInt8, VnniProductsAreOnednnsSums) {
    if (!vnni_products()) GTEST_SKIP() << "no AVX512-VNNI here, or BB_ISA=avx2 (CPU: " << cpu_isa_summary() << ")";
    struct Shape {
        int M, N, K;
    };
    for (const Shape sh : {Shape{1, 1, 1}, Shape{5, 3, 2}, Shape{7, 17, 5}, Shape{13, 64, 64}, Shape{128, 128, 64},
                           Shape{31, 130, 63}, Shape{6, 200, 129}, Shape{128, 64, 128}, Shape{97, 65, 384}}) {
        const auto [M, N, K] = sh;
        const size_t ld = static_cast<size_t>(std::max(N, K)) + 9;  // rows of a wider matrix
        uint32_t x = 12345u + static_cast<uint32_t>(M * 7 + N * 131 + K);
        const auto next = [&] { return x = x * 1664525u + 1013904223u, static_cast<uint8_t>(x >> 24); };
        // A with room: the bytes past each row's K are garbage that B's zero padding must cancel
        std::vector<uint8_t> a(static_cast<size_t>(M) * K + 3);
        for (auto& v : a) v = next();
        std::vector<int8_t> bt(static_cast<size_t>(N) * ld), br(static_cast<size_t>(K) * ld);  // B(k,n): n·ld+k, k·ld+n
        for (auto& v : bt) v = static_cast<int8_t>(next());
        for (auto& v : br) v = static_cast<int8_t>(next());
        if (M * N * K > 1000) {  // the extremes: a row of 255s against columns of ±127
            std::fill_n(a.begin(), K, uint8_t{255});
            for (int k = 0; k < K; ++k) bt[static_cast<size_t>(k)] = 127, br[static_cast<size_t>(k) * ld] = -127;
        }
        for (const bool transposed : {true, false}) {
            const int8_t* b = transposed ? bt.data() : br.data();
            std::vector<int32_t> want(static_cast<size_t>(M) * N), dnnl(want.size()), got(want.size(), -1);
            for (int i = 0; i < M; ++i)
                for (int n = 0; n < N; ++n) {
                    int64_t sum = 0;
                    for (int k = 0; k < K; ++k)
                        sum += int64_t{a[static_cast<size_t>(i) * K + k]} *
                               (transposed ? b[static_cast<size_t>(n) * ld + k] : b[static_cast<size_t>(k) * ld + n]);
                    want[static_cast<size_t>(i) * N + n] = static_cast<int32_t>(sum);
                }
            matmul(MatmulType::u8, transposed, M, N, K, a.data(), K, b, static_cast<int>(ld), 0.f, dnnl.data(), N,
                   nullptr, MatmulType::s32);
            std::vector<int8_t> packed(vnni_packed_bytes(K, N), 99);
            if (transposed)
                vnni_pack_transposed(packed.data(), b, ld, K, N);
            else
                vnni_pack_rows(packed.data(), b, ld, K, N);
            vnni_product(got.data(), static_cast<size_t>(N), a.data(), static_cast<size_t>(K), packed.data(), M, N, K);
            EXPECT_EQ(dnnl, want) << "oneDNN " << M << "x" << N << "x" << K << (transposed ? " transposed" : " rows");
            EXPECT_EQ(got, want) << "vnni " << M << "x" << N << "x" << K << (transposed ? " transposed" : " rows");
        }
    }
}

}  // namespace
}  // namespace bertbench::ops
