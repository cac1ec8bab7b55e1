// The bf16 copies that producers write in their own pass (LayerNorm forward, GELU forward and
// backward, dropout+residual forward, dropout backward; the inputs of a bf16 engine's next GEMM):
// each must be bit-identical to converting that op's fp32 output with to_bf16, and asking for the
// copy must leave the fp32 output's bits unchanged. Odd sizes, serial and parallel (sizes above
// the OpenMP threshold, chunk tails), the AVX-512 and the AVX2 conversion code.
#include <gtest/gtest.h>

#include <cstdint>
#include <cstring>
#include <limits>
#include <random>
#include <string>
#include <vector>

#include "ops/activation.hpp"
#include "ops/bf16.hpp"
#include "ops/dropout.hpp"
#include "ops/layernorm.hpp"

namespace bertbench::ops {
namespace {

std::vector<float> random_values(size_t n, uint32_t seed, float scale) {
    std::mt19937 rng(seed);
    std::normal_distribution<float> d(0.f, scale);
    std::vector<float> v(n);
    for (float& x : v) x = d(rng);
    // a few values exactly halfway between two bf16 values and specials, to exercise the rounding
    for (size_t i = 3; i < n; i += 97) {
        uint32_t u;
        std::memcpy(&u, &v[i], 4);
        u = (u & 0xffff0000u) | 0x8000u;
        std::memcpy(&v[i], &u, 4);
    }
    return v;
}

// Every yb[i] == to_bf16(y[i]) (bits); on failure: how many differ, the first index, got, want.
void expect_bf16_of(const std::string& what, const std::vector<bf16>& yb, const std::vector<float>& y) {
    ASSERT_EQ(yb.size(), y.size()) << what;
    size_t bad = 0, first = 0;
    for (size_t i = 0; i < y.size(); ++i) {
        if (yb[i].bits != to_bf16(y[i]).bits && bad++ == 0) first = i;
    }
    EXPECT_EQ(bad, 0u) << what << ": " << bad << " of " << y.size() << " bf16 values differ; first at "
                       << first << ": got 0x" << std::hex << yb[first].bits << ", want 0x"
                       << to_bf16(y[first]).bits << " (fp32 " << std::dec << y[first] << ")";
}

void expect_same_bits(const std::string& what, const std::vector<float>& got, const std::vector<float>& want) {
    ASSERT_EQ(got.size(), want.size()) << what;
    size_t bad = 0, first = 0;
    for (size_t i = 0; i < got.size(); ++i) {
        if (std::memcmp(&got[i], &want[i], 4) != 0 && bad++ == 0) first = i;
    }
    EXPECT_EQ(bad, 0u) << what << ": " << bad << " fp32 values changed; first at " << first << ": got "
                       << got[first] << ", want " << want[first];
}

// Runs f once with each conversion path (AVX-512 where the CPU has it, and AVX2).
template <typename F>
void for_each_conversion(F f) {
    const bool had = bf16_conversion_avx512();
    for (bool avx512 : {true, false}) {
        set_bf16_conversion_avx512(avx512);
        if (avx512 && !bf16_conversion_avx512()) continue;  // not on this CPU
        f(avx512 ? "avx512" : "avx2");
    }
    set_bf16_conversion_avx512(had);
}

TEST(Bf16Producers, LayerNormForwardWritesBf16OfItsOutput) {
    // 13 x 37: serial; 301 x 127 (> 32K values): rows shared among the threads
    for (const auto& shape : {std::pair{13, 37}, std::pair{301, 127}}) {
        const int N = shape.first, C = shape.second;
        const size_t n = static_cast<size_t>(N) * C;
        const std::vector<float> x = random_values(n, 11, 3.f), g = random_values(C, 12, 1.f),
                                 b = random_values(C, 13, 0.5f);
        std::vector<float> y0(n), m0(N), r0(N);
        layernorm_forward(y0.data(), m0.data(), r0.data(), x.data(), g.data(), b.data(), N, C);
        for_each_conversion([&](const char* path) {
            const std::string what = "layernorm " + std::to_string(N) + "x" + std::to_string(C) + " " + path;
            std::vector<float> y(n), m(N), r(N);
            std::vector<bf16> yb(n, bf16{0xdead});
            layernorm_forward(y.data(), m.data(), r.data(), x.data(), g.data(), b.data(), N, C,
                              kLayerNormEps, yb.data());
            expect_same_bits(what + " y", y, y0);
            expect_same_bits(what + " mean", m, m0);
            expect_same_bits(what + " rstd", r, r0);
            expect_bf16_of(what, yb, y);
        });
    }
}

TEST(Bf16Producers, ActivationForwardAndBackwardWriteBf16OfTheirOutput) {
    // 37: one partial chunk; 3·4096 + 37: several chunks and a tail, in parallel
    for (const size_t n : {size_t(37), size_t(3 * 4096 + 37)}) {
        const std::vector<float> x = random_values(n, 21, 2.f), dy = random_values(n, 22, 1.f);
        for (const Activation a : {Activation::gelu_tanh, Activation::gelu_erf, Activation::relu}) {
            std::vector<float> y0(n), dx0(n);
            activation_forward(a, y0.data(), x.data(), n);
            activation_backward(a, dx0.data(), dy.data(), x.data(), n);
            for_each_conversion([&](const char* path) {
                const std::string what = "activation " + std::to_string(static_cast<int>(a)) + " n " +
                                         std::to_string(n) + " " + path;
                std::vector<float> y(n);
                std::vector<bf16> yb(n, bf16{0xdead}), ybonly(n, bf16{0xbeef});
                activation_forward(a, y.data(), x.data(), n, yb.data());
                expect_same_bits(what + " y", y, y0);
                expect_bf16_of(what + " forward", yb, y0);
                // no fp32 output: only the bf16 copy (what a bf16 engine's GELU writes)
                activation_forward<float>(a, nullptr, x.data(), n, ybonly.data());
                expect_bf16_of(what + " forward, bf16 only", ybonly, y0);
                // backward in place, as the engine runs it
                std::vector<float> dx = dy;
                std::vector<bf16> dxb(n, bf16{0xdead});
                activation_backward(a, dx.data(), dx.data(), x.data(), n, dxb.data());
                expect_same_bits(what + " dx", dx, dx0);
                expect_bf16_of(what + " backward", dxb, dx0);
            });
        }
    }
}

TEST(Bf16Producers, DropoutForwardAndBackwardWriteBf16OfTheirOutput) {
    // 37: serial; 9·4096 + 37 (> 32K): chunks in parallel, a tail
    for (const size_t n : {size_t(37), size_t(9 * 4096 + 37)}) {
        const std::vector<float> x = random_values(n, 31, 2.f), res = random_values(n, 32, 1.f);
        std::vector<uint8_t> mask(n);
        dropout_fill_mask_parallel(mask.data(), DropoutStream{7, 3, 2, 0.9}, n);
        const float keep = 0.9f;
        for (const bool masked : {true, false}) {
            const uint8_t* m = masked ? mask.data() : nullptr;
            std::vector<float> y0(n), dx0(n);
            dropout_add_forward(y0.data(), x.data(), m, keep, res.data(), n);
            dropout_backward(dx0.data(), x.data(), m, keep, n);
            for_each_conversion([&](const char* path) {
                const std::string what = std::string("dropout ") + (masked ? "masked" : "no mask") +
                                         " n " + std::to_string(n) + " " + path;
                // forward in place (y aliases x), with and without a residual
                std::vector<float> y = x;
                std::vector<bf16> yb(n, bf16{0xdead});
                dropout_add_forward(y.data(), y.data(), m, keep, res.data(), n, yb.data());
                expect_same_bits(what + " y", y, y0);
                expect_bf16_of(what + " forward", yb, y0);
                std::vector<float> y1(n), y1want(n);
                dropout_add_forward(y1want.data(), x.data(), m, keep, static_cast<const float*>(nullptr), n);
                std::vector<bf16> y1b(n, bf16{0xdead});
                dropout_add_forward(y1.data(), x.data(), m, keep, static_cast<const float*>(nullptr), n,
                                    y1b.data());
                expect_same_bits(what + " y, no residual", y1, y1want);
                expect_bf16_of(what + " forward, no residual", y1b, y1want);
                // backward out of place and in place
                std::vector<float> dx(n);
                std::vector<bf16> dxb(n, bf16{0xdead}), dxb2(n, bf16{0xbeef});
                dropout_backward(dx.data(), x.data(), m, keep, n, dxb.data());
                expect_same_bits(what + " dx", dx, dx0);
                expect_bf16_of(what + " backward", dxb, dx0);
                std::vector<float> dx2 = x;
                dropout_backward(dx2.data(), dx2.data(), m, keep, n, dxb2.data());
                expect_same_bits(what + " dx in place", dx2, dx0);
                expect_bf16_of(what + " backward in place", dxb2, dx0);
            });
        }
    }
}

TEST(Bf16Producers, SpecialValuesRoundAsToBf16) {
    // NaN, ±Inf, the largest finite values (round to Inf), denormals, ties: through dropout with
    // no mask and no residual, so the values reach the conversion unchanged
    std::vector<float> x = {std::numeric_limits<float>::quiet_NaN(), std::numeric_limits<float>::infinity(),
                            -std::numeric_limits<float>::infinity(), std::numeric_limits<float>::max(),
                            -std::numeric_limits<float>::max(), std::numeric_limits<float>::denorm_min(),
                            1e-40f, -1e-42f, 1.00390625f, 1.005859375f, 1.0078125f, -0.f};
    for (int i = 0; i < 40; ++i) x.push_back(x[static_cast<size_t>(i) % 12]);  // past 16: vector path too
    for_each_conversion([&](const char* path) {
        std::vector<float> y(x.size());
        std::vector<bf16> yb(x.size(), bf16{0xdead});
        dropout_add_forward(y.data(), x.data(), nullptr, 1.f, static_cast<const float*>(nullptr), x.size(),
                            yb.data());
        expect_bf16_of(std::string("special values ") + path, yb, x);
    });
}

}  // namespace
}  // namespace bertbench::ops
