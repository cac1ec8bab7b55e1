// The AVX2 dropout-mask path (8 Philox blocks at once, ops/dropout.hpp) against the scalar
// definition keep(e) = (philox::block(seed, step, site, e/4)[e%4] >> 8) < threshold: every bit,
// for unaligned starts and odd lengths, seeds/steps with high bits set, keep 0.9 / 0.5 / 1.0, and
// counters at the 2^32 wrap of the low counter word.
#include <gtest/gtest.h>

#include <cstdint>
#include <vector>

#include "core/philox.hpp"
#include "ops/dropout.hpp"

namespace bertbench::ops {
namespace {

std::vector<uint8_t> scalar_mask(const DropoutStream& s, uint64_t first, size_t n) {
    std::vector<uint8_t> m(n);
    const uint32_t thr = s.threshold();
    for (size_t i = 0; i < n; ++i) {
        const uint64_t e = first + i;
        m[i] = (philox::block(s.seed, s.step, s.site, e / 4)[e % 4] >> 8) < thr ? 1 : 0;
    }
    return m;
}

void expect_same(const DropoutStream& s, uint64_t first, size_t n) {
    std::vector<uint8_t> got(n, 7);
    dropout_fill_mask(got.data(), s, first, n);
    const std::vector<uint8_t> want = scalar_mask(s, first, n);
    size_t bad = 0, worst = n;
    for (size_t i = 0; i < n; ++i)
        if (got[i] != want[i] && bad++ == 0) worst = i;
    EXPECT_EQ(bad, 0u) << "mask seed " << s.seed << " step " << s.step << " site " << s.site
                       << " keep " << s.keep_prob << " first " << first << " n " << n << ": " << bad
                       << " bad, first at " << worst << " got "
                       << (worst < n ? int(got[worst]) : -1) << " want "
                       << (worst < n ? int(want[worst]) : -1);
}

TEST(DropoutSimd, EqualsScalarPhiloxBitForBit) {
    const DropoutStream streams[] = {{1, 5, 2, 0.9},
                                     {0xFEDCBA9876543210ull, 0x8000000100000007ull, 31, 0.9},
                                     {42, 0, 0, 0.5},
                                     {7, 3, 1, 1.0}};
    for (const auto& s : streams)
        for (uint64_t first : {0ull, 1ull, 3ull, 4ull, 37ull, 1000003ull})
            for (size_t n : {0, 1, 5, 31, 32, 33, 64, 95, 1000, 16384})
                expect_same(s, first, n);
}

TEST(DropoutSimd, LowCounterWordWrap) {
    const DropoutStream s{99, 12, 4, 0.9};
    // blocks 2^32 - 12 .. 2^32 + 20: the vector path must not wrap inside its 8 blocks
    const uint64_t first = ((uint64_t(1) << 32) - 12) * 4;
    for (uint64_t shift : {0ull, 1ull, 2ull, 3ull, 4ull, 13ull})
        expect_same(s, first + shift, 131);
}

// masked_scale's AVX2 path equals the scalar definition bit for bit, with and without a residual,
// in place, at lengths with and without a scalar tail.
TEST(DropoutSimd, MaskedScaleEqualsScalar) {
    for (size_t n : {3u, 8u, 37u, 1024u}) {
        std::vector<uint8_t> mask(n);
        dropout_fill_mask(mask.data(), {5, 1, 2, 0.7}, 0, n);
        std::vector<float> x(n), r(n), y(n), z(n);
        for (size_t i = 0; i < n; ++i) {
            x[i] = 0.25f * float(i) - 3.0f;
            r[i] = 1.0f / float(i + 1);
        }
        const float scale = 1.0f / 0.7f;
        masked_scale(y.data(), x.data(), mask.data(), scale, n, r.data());
        z = x;
        masked_scale(z.data(), z.data(), mask.data(), scale, n);
        for (size_t i = 0; i < n; ++i) {
            const float v = mask[i] ? x[i] * scale : 0.0f;
            EXPECT_EQ(y[i], v + r[i]) << n << " " << i;
            EXPECT_EQ(z[i], v) << n << " " << i;
        }
    }
}

}  // namespace
}  // namespace bertbench::ops
