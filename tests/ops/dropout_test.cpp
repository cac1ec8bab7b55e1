// Philox-4x32-10 known-answer vectors (Random123 kat_vectors) and dropout: keep rate, scaling,
// independence from the thread count and the work split, backward = mask·dy/keep.
#include <gtest/gtest.h>
#include <omp.h>

#include <cmath>
#include <vector>

#include "check.hpp"
#include "core/philox.hpp"
#include "ops/dropout.hpp"

namespace bertbench::ops {
namespace {

TEST(Philox, KnownAnswerVectors) {
    EXPECT_EQ(philox::philox4x32_10({0, 0, 0, 0}, {0, 0}),
              (philox::Counter{0x6627e8d5u, 0xe169c58du, 0xbc57ac4cu, 0x9b00dbd8u}));
    EXPECT_EQ(philox::philox4x32_10({0xffffffffu, 0xffffffffu, 0xffffffffu, 0xffffffffu},
                                    {0xffffffffu, 0xffffffffu}),
              (philox::Counter{0x408f276du, 0x41c83b0eu, 0xa20bc7c6u, 0x6d5451fdu}));
    EXPECT_EQ(philox::philox4x32_10({0x243f6a88u, 0x85a308d3u, 0x13198a2eu, 0x03707344u},
                                    {0xa4093822u, 0x299f31d0u}),
              (philox::Counter{0xd16cfe09u, 0x94fdccebu, 0x5001e420u, 0x24126ea1u}));
}

TEST(Dropout, KeepRateAndStreamsDiffer) {
    const size_t n = 200003;
    std::vector<uint8_t> a(n), b(n), c(n);
    dropout_fill_mask_parallel(a.data(), {1, 5, 2, 0.9}, n);
    dropout_fill_mask_parallel(b.data(), {1, 6, 2, 0.9}, n);  // next step
    dropout_fill_mask_parallel(c.data(), {1, 5, 3, 0.9}, n);  // other site
    size_t kept = 0, same_b = 0, same_c = 0;
    for (size_t i = 0; i < n; ++i) {
        kept += a[i];
        same_b += a[i] == b[i];
        same_c += a[i] == c[i];
    }
    // binomial sd = sqrt(n·0.09) ≈ 134; allow 6 sd
    EXPECT_NEAR(double(kept), 0.9 * n, 6 * std::sqrt(0.09 * n));
    // independent masks agree on ≈ 0.82 of elements
    EXPECT_LT(same_b, size_t(0.85 * n));
    EXPECT_LT(same_c, size_t(0.85 * n));
}

TEST(Dropout, IndependentOfThreadCountAndSplit) {
    const size_t n = 100001;
    const DropoutStream s{123456789012345ull, 99, 7, 0.9};
    std::vector<uint8_t> one(n), two(n), pieces(n);
    const int saved = omp_get_max_threads();
    omp_set_num_threads(1);
    dropout_fill_mask_parallel(one.data(), s, n);
    omp_set_num_threads(2);
    dropout_fill_mask_parallel(two.data(), s, n);
    omp_set_num_threads(saved);
    // odd-sized pieces starting at unaligned elements
    for (size_t at = 0; at < n;) {
        const size_t len = std::min<size_t>(n - at, 1 + (at * 7919) % 37);
        dropout_fill_mask(pieces.data() + at, s, at, len);
        at += len;
    }
    EXPECT_EQ(one, two);
    EXPECT_EQ(one, pieces);
}

TEST(Dropout, ForwardScalesAndBackwardMatchesFiniteDifferences) {
    const size_t n = 37;
    std::vector<uint8_t> mask(n);
    dropout_fill_mask(mask.data(), {3, 1, 1, 0.7}, 0, n);
    std::vector<double> x = bertbench::testing::random_vector(n, 1), res = bertbench::testing::random_vector(n, 2);
    const std::vector<double> r = bertbench::testing::random_vector(n, 3);
    std::vector<double> y(n);
    auto loss = [&] {
        dropout_add_forward(y.data(), x.data(), mask.data(), 0.7, res.data(), n);
        return bertbench::testing::dot(y, r);
    };
    loss();
    for (size_t i = 0; i < n; ++i) EXPECT_NEAR(y[i], (mask[i] ? x[i] / 0.7 : 0.0) + res[i], 1e-15);
    std::vector<double> dx(n);
    dropout_backward(dx.data(), r.data(), mask.data(), 0.7, n);
    EXPECT_TRUE(bertbench::testing::all_close("ddropout", dx, bertbench::testing::numeric_grad(x, loss), 1e-7, 1e-6));
}

}  // namespace
}  // namespace bertbench::ops
