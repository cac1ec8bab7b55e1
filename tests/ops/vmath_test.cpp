// Accuracy of the vectorised float exp / tanh / GELU (ops/vmath.hpp) against double libm, over
// ranges BERT produces; lengths not a multiple of 8 so the scalar tails are covered too.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <vector>

#include "check.hpp"
#include "ops/vmath.hpp"

namespace bertbench::ops {
namespace {

using bertbench::testing::all_close;

TEST(VMath, ExpWithinFewUlp) {
    const size_t n = 20001;
    std::vector<float> x(n), y(n);
    std::vector<double> want(n);
    for (size_t i = 0; i < n; ++i) {
        x[i] = -86.0f + 173.0f * float(i) / float(n - 1);
        want[i] = std::exp(double(x[i] - 0.5f));  // the float input, as the kernel sees it
    }
    exp_affine(y.data(), x.data(), n, 1.0f, 0.5f);
    EXPECT_TRUE(all_close("exp", y, want, 0, 4e-7));  // ≈ 3 ulp
    // saturation: very negative inputs give a tiny non-negative value, never NaN/inf
    const float big[3] = {-1e4f, -1e30f, 1e30f};
    float out[3];
    exp_affine(out, big, 3, 1.0f, 0.0f);
    EXPECT_LT(out[0], 1e-37f);
    EXPECT_TRUE(std::isfinite(out[2]));
}

TEST(VMath, TanhAndGeluMatchDouble) {
    const size_t n = 12347;
    std::vector<float> x(n), y(n), dx(n), ones(n, 1.0f);
    std::vector<double> xd(n), t(n), g(n), dg(n);
    for (size_t i = 0; i < n; ++i) {
        x[i] = -12.0f + 24.0f * float(i) / float(n - 1);
        xd[i] = x[i];
        t[i] = std::tanh(xd[i]);
    }
    std::vector<float> tf(n);
    for (size_t i = 0; i < n; ++i) tf[i] = fast_tanh(x[i]);
    EXPECT_TRUE(all_close("tanh scalar", tf, t, 1e-7, 3e-7));
    gelu_tanh_array(g.data(), xd.data(), n);  // double reference path (std::tanh)
    gelu_tanh_backward_array(dg.data(), std::vector<double>(n, 1.0).data(), xd.data(), n);
    gelu_tanh_array(y.data(), x.data(), n);
    gelu_tanh_backward_array(dx.data(), ones.data(), x.data(), n);
    EXPECT_TRUE(all_close("gelu float", y, g, 1e-6, 1e-6));
    EXPECT_TRUE(all_close("gelu' float", dx, dg, 1e-6, 1e-6));
}

// The 8-lane reductions behind softmax and LayerNorm: max exact, sums within float rounding of the
// double sums, for lengths around the vector width (scalar tails, n < 8, n < 16).
TEST(VMath, ReductionsMatchDouble) {
    for (size_t n : {1u, 5u, 8u, 15u, 16u, 17u, 129u, 768u, 1001u}) {
        std::vector<float> x(n), y(n), e(n);
        double sum = 0, dot = 0, esum = 0;
        float mx = -1e30f;
        for (size_t i = 0; i < n; ++i) {
            x[i] = std::sin(0.37f * float(i) + 0.1f) * 3.0f + (i == n / 2 ? 5.0f : 0.0f);
            y[i] = std::cos(0.11f * float(i));
            sum += x[i];
            dot += double(x[i]) * y[i];
            esum += std::exp(double(x[i]) * 0.5 - 1.0);
            mx = std::max(mx, x[i]);
        }
        EXPECT_EQ(array_max(x.data(), n), mx) << n;
        EXPECT_NEAR(sum_lanes8<float>(n, [&](size_t i) { return x[i]; }), sum, 1e-5 * n) << n;
        EXPECT_NEAR(sum_lanes8<float>(n, [&](size_t i) { return x[i] * y[i]; }), dot, 1e-5 * n) << n;
        EXPECT_NEAR(exp_affine_sum(e.data(), x.data(), n, 0.5f, 1.0f), esum, 1e-6 * esum) << n;
        for (size_t i = 0; i < n; ++i)
            EXPECT_NEAR(e[i], std::exp(double(x[i]) * 0.5 - 1.0), 4e-7 * e[i]) << n << " " << i;
    }
}

// array_argmax follows the scalar rule (first maximum; NaNs as the scalar loop treats them).
TEST(VMath, ArgmaxIsTheScalarRule) {
    const auto scalar = [](const std::vector<float>& x) {
        size_t best = 0;
        for (size_t c = 1; c < x.size(); ++c)
            if (x[c] > x[best]) best = c;
        return best;
    };
    const float nan = std::nanf("");
    for (size_t n : {1u, 7u, 8u, 9u, 16u, 23u, 100u, 30522u}) {
        std::vector<float> x(n);
        for (size_t i = 0; i < n; ++i) x[i] = std::sin(0.7f * float(i));
        EXPECT_EQ(array_argmax(x.data(), n), scalar(x)) << n;
        x[n - 1] = 2.0f;  // a tie: the first one wins
        x[n / 2] = 2.0f;
        EXPECT_EQ(array_argmax(x.data(), n), scalar(x)) << n;
        for (size_t at : {size_t{0}, n / 3, n - 1}) {
            std::vector<float> y = x;
            y[at] = nan;
            EXPECT_EQ(array_argmax(y.data(), n), scalar(y)) << n << " NaN at " << at;
        }
    }
}

}  // namespace
}  // namespace bertbench::ops
