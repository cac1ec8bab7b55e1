// Packed weights (ops::PackedWeights, matmul_packed): products with B reordered into oneDNN's
// blocked layout equal a double GEMM of the same operands to fp32 accumulation noise
// (|got − want| ≤ 1e-5·Σ|a·b| per element), for B stored as a kernel (K, N) or transposed (N, K),
// odd shapes, several matrices in one source buffer, strided A and C, with and without a bias, and
// after a re-pack from changed values; no rows at all (M = 0) is a no-op.
#include "ops/matmul.hpp"

#include <gtest/gtest.h>

#include <cmath>
#include <random>
#include <vector>

#include "ops/bf16.hpp"

namespace bertbench::ops {
namespace {

struct Shape {
    int K, N;
    bool trans_b;
};

// Element e of the source buffer as the GEMM sees it (bf16 values are rounded once, here).
template <typename E>
double value(const std::vector<E>& v, size_t i) {
    if constexpr (std::is_same_v<E, bf16>) return to_float(v[i]);
    else return v[i];
}

template <typename E>
void check_packed(MatmulType type) {
    if (matmul_impl(type).empty()) GTEST_SKIP() << "oneDNN has no matmul of this type here";
    std::mt19937 rng(11);
    std::normal_distribution<float> d;
    const std::vector<Shape> shapes = {{37, 13, false}, {33, 77, true}, {128, 200, false},
                                       {1, 5, true}, {96, 130, false}};
    // The matrices lie one after another in one buffer, with gaps, as the parameters do.
    std::vector<size_t> offsets;
    size_t total = 7;
    for (const Shape& s : shapes) {
        offsets.push_back(total);
        total += static_cast<size_t>(s.K) * s.N + 3;
    }
    std::vector<E> src(total);
    const auto fill = [&] {
        for (E& x : src) {
            if constexpr (std::is_same_v<E, bf16>) x = to_bf16(d(rng));
            else x = d(rng);
        }
    };
    fill();
    PackedWeights packed(type);
    for (size_t i = 0; i < shapes.size(); ++i)
        packed.add(offsets[i], shapes[i].K, shapes[i].N, shapes[i].trans_b);
    EXPECT_EQ(packed.at(offsets[0] + 1), nullptr);
    for (int round = 0; round < 2; ++round) {
        if (round == 1) fill();  // new values: a re-pack must follow them
        packed.pack(src.data());
        for (size_t i = 0; i < shapes.size(); ++i) {
            const Shape& s = shapes[i];
            for (const int M : {0, 1, 20, 131}) {  // 0: no masked position in the batch
                const bool with_bias = (M + static_cast<int>(i)) % 2 == 0;
                const int lda = s.K + 2, ldc = s.N + 3;
                std::vector<E> A(static_cast<size_t>(M) * lda);
                for (E& x : A) {
                    if constexpr (std::is_same_v<E, bf16>) x = to_bf16(d(rng));
                    else x = d(rng);
                }
                std::vector<float> bias(static_cast<size_t>(s.N)), C(static_cast<size_t>(M) * ldc, 7.f);
                for (float& x : bias) x = d(rng);
                matmul_packed(type, M, s.N, s.K, A.data(), lda, packed.at(offsets[i]), C.data(), ldc,
                              with_bias ? bias.data() : nullptr);
                size_t bad = 0;
                for (int r = 0; r < M; ++r)
                    for (int c = 0; c < ldc; ++c) {
                        const float got = C[static_cast<size_t>(r) * ldc + c];
                        if (c >= s.N) {  // padding between rows of C is never written
                            ASSERT_EQ(got, 7.f);
                            continue;
                        }
                        double want = with_bias ? bias[static_cast<size_t>(c)] : 0.0, mag = 0;
                        for (int k = 0; k < s.K; ++k) {
                            const size_t b = offsets[i] + (s.trans_b ? static_cast<size_t>(c) * s.K + k
                                                                     : static_cast<size_t>(k) * s.N + c);
                            const double p = value(A, static_cast<size_t>(r) * lda + k) * value(src, b);
                            want += p;
                            mag += std::abs(p);
                        }
                        if (!(std::abs(got - want) <= 1e-5 * (mag + 1)) && bad++ < 3)
                            ADD_FAILURE() << "round " << round << " K " << s.K << " N " << s.N
                                          << " trans_b " << s.trans_b << " M " << M << ": C[" << r
                                          << "," << c << "] = " << got << ", want " << want;
                    }
                EXPECT_EQ(bad, 0u);
            }
        }
    }
    EXPECT_GE(packed.bytes(), total * sizeof(E) - 7 * sizeof(E) - 3 * shapes.size() * sizeof(E));
}

TEST(PackedWeights, F32MatchesDoubleReference) { check_packed<float>(MatmulType::f32); }

TEST(PackedWeights, Bf16MatchesDoubleReference) {
    if (!bf16_native()) GTEST_SKIP() << "no native bf16 on this CPU (engines do not pack bf16 there)";
    check_packed<bf16>(MatmulType::bf16);
}

}  // namespace
}  // namespace bertbench::ops
