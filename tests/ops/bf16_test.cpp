// bf16 conversion (round to nearest even) against a reference written from the definition, and the
// bf16 GEMM — native (oneDNN matmul, where the CPU has bf16 units) and emulated — against a double
// GEMM of the same bf16 operands. Tolerance of the GEMM: fp32 accumulation noise only
// (|got − want| ≤ 1e-5·Σ|a·b| per element), since both sides multiply identical bf16 values.
#include "ops/bf16.hpp"
#include "ops/matmul.hpp"

#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <limits>
#include <random>
#include <thread>
#include <vector>

#include "core/error.hpp"

namespace bertbench::ops {
namespace {

// The definition: the bf16 neighbours of f are its truncation and the next value up in magnitude;
// take the nearer, ties to the one with an even last bit. NaN -> a NaN.
uint16_t reference_bits(float f) {
    if (std::isnan(f)) return 0x7fc0;
    uint32_t u;
    std::memcpy(&u, &f, 4);
    const uint32_t lo = u & 0xffff0000u, hi = lo + 0x10000u;
    float flo, fhi;
    std::memcpy(&flo, &lo, 4);
    std::memcpy(&fhi, &hi, 4);
    const double dlo = std::abs(double(f) - double(flo));
    // hi overflows into Inf for the largest finite values: compare with the exact halfway point.
    const double dhi = std::isinf(fhi) ? std::abs(double(f) - std::ldexp(1.0, 128) * (f < 0 ? -1 : 1))
                                       : std::abs(double(fhi) - double(f));
    if (dlo < dhi) return static_cast<uint16_t>(lo >> 16);
    if (dhi < dlo) return static_cast<uint16_t>(hi >> 16);
    return static_cast<uint16_t>(((lo >> 16) & 1) ? hi >> 16 : lo >> 16);
}

std::vector<float> interesting_floats() {
    std::vector<float> v = {0.f, -0.f, 1.f, -1.f, 1.00390625f, 1.005859375f, 1.0078125f,
                            std::numeric_limits<float>::max(), -std::numeric_limits<float>::max(),
                            std::numeric_limits<float>::min(), std::numeric_limits<float>::denorm_min(),
                            std::numeric_limits<float>::infinity(), -std::numeric_limits<float>::infinity(),
                            3.3895313e38f, 1e-40f, -1e-42f};
    std::mt19937 rng(7);
    for (int i = 0; i < 200000; ++i) {
        uint32_t u = rng();
        if (i % 3 == 0) u = (u & 0xffff0000u) | (i % 2 ? 0x8000u : 0x7fffu);  // near and at ties
        float f;
        std::memcpy(&f, &u, 4);
        v.push_back(f);
    }
    return v;
}

TEST(Bf16, ScalarConversionIsRoundToNearestEven) {
    size_t checked = 0;
    for (float f : interesting_floats()) {
        const bf16 h = to_bf16(f);
        if (std::isnan(f)) {
            EXPECT_TRUE(std::isnan(to_float(h)));
            continue;
        }
        ASSERT_EQ(h.bits, reference_bits(f)) << "f = " << f;
        ++checked;
    }
    EXPECT_GT(checked, 100000u);
    EXPECT_EQ(round_bf16(1.00390625f), 1.0f);        // tie, even neighbour below
    EXPECT_EQ(round_bf16(1.01171875f), 1.015625f);   // tie, even neighbour above
}

// Both vector paths (AVX-512 where the CPU has it, AVX2) give the scalar conversion's bits, at
// every length around their 16- and 8-wide steps and from unaligned starts.
TEST(Bf16, VectorConversionEqualsScalar) {
    const std::vector<float> v = interesting_floats();
    for (const bool avx512 : {true, false}) {
        set_bf16_conversion_avx512(avx512);
        if (avx512 && !bf16_conversion_avx512()) continue;  // no AVX-512 on this CPU
        for (size_t start : {size_t(0), size_t(3)})
            for (size_t n : {size_t(0), size_t(1), size_t(7), size_t(8), size_t(9), size_t(15),
                             size_t(16), size_t(17), size_t(33), v.size() - start}) {
                std::vector<bf16> got(n);
                to_bf16(got.data(), v.data() + start, n);
                for (size_t i = 0; i < n; ++i) {
                    const float f = v[start + i];
                    if (std::isnan(f)) {
                        ASSERT_TRUE(std::isnan(to_float(got[i]))) << i;
                        continue;
                    }
                    ASSERT_EQ(got[i].bits, to_bf16(f).bits)
                        << "avx512 " << avx512 << " start " << start << " n " << n << " i " << i;
                }
            }
    }
    set_bf16_conversion_avx512(true);
}

// The transposes (8×8 blocks through registers, ragged edges one by one) on shapes around the block
// and tile sizes, a leading dimension wider than the columns, and a row count that is a multiple of
// 512 (the tiling for destination strides that alias in L1).
TEST(Bf16, TransposedConversion) {
    const std::vector<float> special = interesting_floats();
    const std::vector<std::pair<int, int>> shapes = {{37, 45}, {8, 8}, {1, 9}, {9, 1}, {64, 64},
                                                     {130, 70}, {512, 19}, {1024, 9}, {20, 300}};
    std::mt19937 rng(3);
    std::normal_distribution<float> d;
    for (const auto& [rows, cols] : shapes) {
        const int ld = cols + 5;
        std::vector<float> src(static_cast<size_t>(rows) * ld);
        for (size_t i = 0; i < src.size(); ++i) src[i] = i % 7 == 3 ? special[i % special.size()] : d(rng);
        std::vector<bf16> dst(static_cast<size_t>(rows) * cols), src_b(src.size()), dst_b(dst.size());
        to_bf16_transposed(dst.data(), src.data(), rows, cols, ld);
        for (size_t i = 0; i < src.size(); ++i) src_b[i] = to_bf16(src[i]);
        transpose_bf16(dst_b.data(), src_b.data(), rows, cols, ld);
        for (int r = 0; r < rows; ++r)
            for (int c = 0; c < cols; ++c) {
                const size_t at = static_cast<size_t>(c) * rows + r;
                const float f = src[static_cast<size_t>(r) * ld + c];
                ASSERT_EQ(dst_b[at].bits, src_b[static_cast<size_t>(r) * ld + c].bits)
                    << rows << "x" << cols << " at " << r << "," << c;
                if (std::isnan(f)) {
                    ASSERT_TRUE(std::isnan(to_float(dst[at])));
                    continue;
                }
                ASSERT_EQ(dst[at].bits, to_bf16(f).bits) << rows << "x" << cols << " at " << r << "," << c;
            }
    }
}

struct GemmCase {
    int M, N, K;
    bool trans_b;
    float beta;
    bool bias = false;  // a bias row (N) added to the product (beta 0)
};

// Runs gemm_bf16 and compares with the double product of the same bf16 values.
void check_gemm(const GemmCase& g, uint64_t seed) {
    std::mt19937 rng(static_cast<unsigned>(seed));
    std::normal_distribution<float> d;
    const int lda = g.K + 3, ldb = (g.trans_b ? g.K : g.N) + 5, ldc = g.N + 2;
    std::vector<bf16> A(static_cast<size_t>(g.M) * lda), B(static_cast<size_t>(g.trans_b ? g.N : g.K) * ldb);
    for (bf16& x : A) x = to_bf16(d(rng));
    for (bf16& x : B) x = to_bf16(d(rng));
    std::vector<float> C(static_cast<size_t>(g.M) * ldc);
    for (float& x : C) x = d(rng);
    const std::vector<float> C0 = C;
    std::vector<float> bias(static_cast<size_t>(g.N));
    for (float& x : bias) x = d(rng);
    gemm_bf16(g.trans_b, g.M, g.N, g.K, A.data(), lda, B.data(), ldb, g.beta, C.data(), ldc,
              g.bias ? bias.data() : nullptr);
    size_t bad = 0;
    for (int i = 0; i < g.M; ++i)
        for (int j = 0; j < g.N; ++j) {
            double want = g.beta * double(C0[static_cast<size_t>(i) * ldc + j]), mag = 0;
            if (g.bias) want += bias[static_cast<size_t>(j)];
            for (int k = 0; k < g.K; ++k) {
                const double a = to_float(A[static_cast<size_t>(i) * lda + k]);
                const double b = to_float(g.trans_b ? B[static_cast<size_t>(j) * ldb + k]
                                                    : B[static_cast<size_t>(k) * ldb + j]);
                want += a * b;
                mag += std::abs(a * b);
            }
            const double got = C[static_cast<size_t>(i) * ldc + j];
            if (!(std::abs(got - want) <= 1e-5 * (mag + 1))) {
                if (bad++ < 3)
                    ADD_FAILURE() << "M " << g.M << " N " << g.N << " K " << g.K << " trans_b "
                                  << g.trans_b << " beta " << g.beta << ": C[" << i << "," << j
                                  << "] = " << got << ", want " << want;
            }
        }
    // Padding between rows of C is never written.
    for (int i = 0; i < g.M; ++i)
        for (int j = g.N; j < ldc; ++j)
            ASSERT_EQ(C[static_cast<size_t>(i) * ldc + j], C0[static_cast<size_t>(i) * ldc + j]);
    EXPECT_EQ(bad, 0u);
}

const std::vector<GemmCase> kCases = {{13, 7, 37, false, 0.f},  {13, 7, 37, true, 1.f},
                                      {1, 64, 96, false, 1.f},  {130, 257, 65, true, 0.f},
                                      {64, 96, 200, false, 0.f}, {37, 13, 1, true, 1.f},
                                      {5, 3, 0, false, 1.f},     {5, 3, 0, true, 0.f},
                                      {13, 7, 37, false, 0.f, true}, {130, 257, 65, false, 0.f, true},
                                      {5, 3, 0, false, 0.f, true}};

TEST(Bf16, GemmEmulatedMatchesDoubleReference) {
    set_bf16_emulation(true);
    uint64_t seed = 1;
    for (const GemmCase& g : kCases) check_gemm(g, seed++);
    set_bf16_emulation(false);
}

TEST(Bf16, GemmNativeMatchesDoubleReference) {
    set_bf16_emulation(false);
    if (!bf16_native())
        GTEST_SKIP() << "no native bf16 on this CPU (it multiplies natively: "
                     << native_precisions() << "); the emulated path is tested above";
    EXPECT_NE(bf16_gemm_impl().find("bf16"), std::string::npos) << bf16_gemm_impl();
    uint64_t seed = 100;
    for (const GemmCase& g : kCases) check_gemm(g, seed++);
}

// Real data brings a new shape with every batch: the primitive cache stays bounded, and a shape
// evicted long ago is created again and still computes the right product.
TEST(Bf16, PrimitiveCacheIsBoundedAndRecreatesEvictedShapes) {
    set_bf16_emulation(false);
    if (!bf16_native()) GTEST_SKIP() << "no native bf16 on this CPU (no primitives to cache)";
    check_gemm({3, 5, 7, false, 0.f}, 1);
    std::vector<bf16> a(700 * 4, to_bf16(1.f)), b(4 * 2, to_bf16(1.f));
    std::vector<float> c(700 * 2);
    for (int m = 1; m <= 700; ++m) gemm_bf16(false, m, 2, 4, a.data(), 4, b.data(), 2, 0.f, c.data(), 2);
    EXPECT_LE(cached_matmuls(), 512u);
    EXPECT_GE(cached_matmuls(), 500u);
    check_gemm({3, 5, 7, false, 0.f}, 2);  // long evicted: created again
}

// Each thread keeps its own ready-to-run primitives (the lock-free hit path): several threads
// running the same and different shapes at once, and one thread cycling through more shapes than
// its table holds, all compute the right products.
TEST(Bf16, GemmFromSeveralThreadsAndManyShapes) {
    set_bf16_emulation(false);
    std::vector<std::thread> threads;
    for (int t = 0; t < 4; ++t)
        threads.emplace_back([t] {
            for (int rep = 0; rep < 2; ++rep)
                for (size_t i = 0; i < kCases.size(); ++i) {
                    check_gemm(kCases[(i + static_cast<size_t>(t)) % kCases.size()], 1000 + i);
                    check_gemm({16 + t, 24, 40, t % 2 == 1, 1.f}, 2000 + i);  // one per thread
                }
        });
    for (std::thread& th : threads) th.join();
    std::vector<bf16> a(200 * 8, to_bf16(1.f)), b(8 * 3, to_bf16(0.5f));
    std::vector<float> c(200 * 3);
    for (int round = 0; round < 2; ++round)
        for (int m = 1; m <= 200; ++m) {
            gemm_bf16(false, m, 3, 8, a.data(), 8, b.data(), 3, 0.f, c.data(), 3);
            ASSERT_EQ(c[static_cast<size_t>(m - 1) * 3 + 2], 4.f) << "round " << round << " M " << m;
        }
    check_gemm({13, 7, 37, false, 0.f}, 3000);
}

TEST(Bf16, NativeOnlyWhereTheCpuSaysSo) {
    const std::string p = native_precisions();
    EXPECT_EQ(p.rfind("fp32", 0), 0u) << p;
    if (bf16_native()) {
        EXPECT_NE(p.find("bf16"), std::string::npos) << p;
    }
}

TEST(Bf16, LinearBackwardMatchesFp32OnRoundedOperands) {
    // dx = dy·Wᵀ, dW += xᵀ·dy, db += Σ dy with bf16 operands, against the fp32 formulas applied to
    // the rounded operands (in double).
    const int N = 19, IN = 23, OUT = 11;
    std::mt19937 rng(5);
    std::normal_distribution<float> d;
    std::vector<float> x(N * IN), dy(N * OUT), w(IN * OUT), dx(N * IN), dw(IN * OUT, 0.5f), db(OUT, 0.25f);
    for (float& v : x) v = d(rng);
    for (float& v : dy) v = d(rng);
    for (float& v : w) v = d(rng);
    std::vector<bf16> wb(w.size()), scratch(N * OUT + N * IN);
    to_bf16(wb.data(), w.data(), w.size());
    linear_backward_bf16(dx.data(), dw.data(), db.data(), dy.data(), x.data(), wb.data(), N, IN, OUT,
                         false, scratch.data());
    for (int i = 0; i < N; ++i)
        for (int k = 0; k < IN; ++k) {
            double want = 0;
            for (int o = 0; o < OUT; ++o) want += double(round_bf16(dy[i * OUT + o])) * round_bf16(w[k * OUT + o]);
            EXPECT_NEAR(dx[i * IN + k], want, 1e-4) << "dx " << i << "," << k;
        }
    for (int k = 0; k < IN; ++k)
        for (int o = 0; o < OUT; ++o) {
            double want = 0.5;
            for (int i = 0; i < N; ++i) want += double(round_bf16(x[i * IN + k])) * round_bf16(dy[i * OUT + o]);
            EXPECT_NEAR(dw[k * OUT + o], want, 1e-4) << "dw " << k << "," << o;
        }
    for (int o = 0; o < OUT; ++o) {
        double want = 0.25;
        for (int i = 0; i < N; ++i) want += dy[i * OUT + o];  // the bias gradient stays fp32
        EXPECT_NEAR(db[o], want, 1e-5) << "db " << o;
    }
}

// The form with operands already in bf16 (the engine's) equals the converting one bit for bit.
TEST(Bf16, LinearBackwardFromBf16OperandsEqualsConverting) {
    const int N = 21, IN = 17, OUT = 13;
    std::mt19937 rng(9);
    std::normal_distribution<float> d;
    std::vector<float> x(N * IN), dy(N * OUT), w(IN * OUT);
    for (float& v : x) v = d(rng);
    for (float& v : dy) v = d(rng);
    for (float& v : w) v = d(rng);
    std::vector<bf16> wb(w.size()), scratch(N * OUT + N * IN), xb(x.size()), xt(x.size()), dyb(dy.size());
    to_bf16(wb.data(), w.data(), w.size());
    std::vector<float> dx1(N * IN, 1.f), dw1(IN * OUT, 0.5f), db1(OUT, 0.25f);
    std::vector<float> dx2 = dx1, dw2 = dw1, db2 = db1;
    linear_backward_bf16(dx1.data(), dw1.data(), db1.data(), dy.data(), x.data(), wb.data(), N, IN,
                         OUT, true, scratch.data());
    to_bf16(xb.data(), x.data(), x.size());
    transpose_bf16(xt.data(), xb.data(), N, IN, IN);
    to_bf16(dyb.data(), dy.data(), dy.size());
    linear_backward_bf16(dx2.data(), dw2.data(), db2.data(), dy.data(), dyb.data(), xt.data(),
                         wb.data(), N, IN, OUT, true);
    EXPECT_EQ(dx1, dx2);
    EXPECT_EQ(dw1, dw2);
    EXPECT_EQ(db1, db2);
}

// The bf16-output dense layer (Q, K, V of a bf16 engine) writes exactly to_bf16 of the fp32
// layer's output, natively and emulated; also through packed weights (inference engines).
TEST(Bf16, LinearForwardBf16OutputEqualsRoundingTheFp32Output) {
    const int N = 37, IN = 45, OUT = 29;
    std::mt19937 rng(12);
    std::normal_distribution<float> d;
    std::vector<float> x(N * IN), w(IN * OUT), b(OUT);
    for (float& v : x) v = d(rng);
    for (float& v : w) v = d(rng);
    for (float& v : b) v = d(rng);
    std::vector<bf16> xb(x.size()), wb(w.size());
    to_bf16(xb.data(), x.data(), x.size());
    to_bf16(wb.data(), w.data(), w.size());
    for (const bool emulate : {true, false}) {
        if (!emulate && !bf16_native()) continue;
        set_bf16_emulation(emulate);
        std::vector<float> y(N * OUT);
        linear_forward_bf16(y.data(), xb.data(), wb.data(), b.data(), N, IN, OUT);
        std::vector<bf16> want(y.size()), got(y.size(), bf16{0x1234});
        to_bf16(want.data(), y.data(), y.size());
        linear_forward_bf16(got.data(), xb.data(), wb.data(), b.data(), N, IN, OUT);
        for (size_t i = 0; i < y.size(); ++i)
            ASSERT_EQ(got[i].bits, want[i].bits) << "emulate " << emulate << " at " << i;
        if (!emulate) {
            PackedWeights packed(MatmulType::bf16);
            packed.add(0, IN, OUT, false);
            packed.pack(wb.data());
            std::fill(got.begin(), got.end(), bf16{0x1234});
            matmul_packed(MatmulType::bf16, N, OUT, IN, xb.data(), IN, packed.at(0), got.data(), OUT,
                          b.data(), MatmulType::bf16);
            for (size_t i = 0; i < y.size(); ++i) ASSERT_EQ(got[i].bits, want[i].bits) << "packed at " << i;
        }
    }
    set_bf16_emulation(false);
}

TEST(Bf16, ParsePrecision) {
    EXPECT_EQ(parse_precision("fp32", "dtype"), Precision::fp32);
    EXPECT_EQ(parse_precision("float32", "dtype"), Precision::fp32);
    EXPECT_EQ(parse_precision("bf16", "dtype"), Precision::bf16);
    EXPECT_EQ(parse_precision("bfloat16", "precision"), Precision::bf16);
    EXPECT_EQ(parse_precision("int8", "dtype"), Precision::int8);
    try {
        parse_precision("uint4", "dtype");
        ADD_FAILURE() << "uint4 accepted";
    } catch (const Error& e) {
        EXPECT_NE(std::string(e.what()).find("--dtype: expected fp32, bf16, int8"), std::string::npos) << e.what();
    }
    try {
        parse_precision("fp16", "dtype");
        ADD_FAILURE() << "fp16 accepted";
    } catch (const Error& e) {
        const std::string m = e.what();
        EXPECT_NE(m.find("--dtype=fp16"), std::string::npos) << m;
        EXPECT_NE(m.find("bf16"), std::string::npos) << m;
    }
}

}  // namespace
}  // namespace bertbench::ops
