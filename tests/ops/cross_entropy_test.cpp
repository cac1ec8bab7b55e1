// The MLM head's fused cross-entropy passes (cross_entropy.hpp) against a reference written from
// the definition in double, and against the unfused ops they replace (cross_entropy_forward after
// bias_add; cross_entropy_backward, bias_backward, to_bf16), at odd sizes: row counts that are not
// a multiple of the 16-row chunk, vocabularies that are not a multiple of 8 or 16 or of the
// 2048-column segment, labels in the first and last column, zero weights.
// Tolerances: vs the double reference, fp32 atol 1e-7 + rtol 1e-5 (exp and sums in fp32; the
// gradients are ≤ coef ≤ 0.05); bf16(dlogits) bit for bit with the unfused ops' bf16(dlogits).
#include "ops/cross_entropy.hpp"

#include <gtest/gtest.h>

#include <cmath>
#include <cstdint>
#include <random>
#include <vector>

#include "check.hpp"
#include "ops/bf16.hpp"
#include "ops/gemm.hpp"

namespace bertbench::ops {
namespace {

using bertbench::testing::all_close;

struct Case {
    int R, V;
    std::vector<float> logits, bias, coef;
    std::vector<int32_t> labels;
};

Case make_case(int R, int V, uint64_t seed) {
    Case c{R, V, {}, {}, {}, {}};
    std::mt19937_64 rng(seed);
    std::normal_distribution<float> n(0.f, 3.f);
    std::uniform_int_distribution<int> lab(0, V - 1);
    c.logits.resize(static_cast<size_t>(R) * V);
    for (float& z : c.logits) z = n(rng);
    c.bias.resize(static_cast<size_t>(V));
    for (float& b : c.bias) b = 0.5f * n(rng);
    for (int r = 0; r < R; ++r) {
        // first and last column, then random; every 7th row weight 0 (a padded prediction)
        c.labels.push_back(r == 0 ? 0 : r == 1 ? V - 1 : lab(rng));
        c.coef.push_back(r % 7 == 6 ? 0.f : static_cast<float>(1 + r % 3) / (2.f * R));
    }
    return c;
}

// d[r][v] = coef[r]·(softmax(z[r])[v] − [v = label[r]]) in double
std::vector<double> reference_dlogits(const Case& c) {
    std::vector<double> d(c.logits.size());
    for (int r = 0; r < c.R; ++r) {
        const float* z = c.logits.data() + static_cast<size_t>(r) * c.V;
        double m = z[0], s = 0;
        for (int v = 0; v < c.V; ++v) m = std::max(m, static_cast<double>(z[v]));
        for (int v = 0; v < c.V; ++v) s += std::exp(z[v] - m);
        for (int v = 0; v < c.V; ++v)
            d[static_cast<size_t>(r) * c.V + v] =
                c.coef[r] * (std::exp(z[v] - m) / s - (v == c.labels[r] ? 1.0 : 0.0));
    }
    return d;
}

class FusedBackwardBf16 : public ::testing::TestWithParam<std::pair<int, int>> {};

TEST_P(FusedBackwardBf16, MatchesReferenceAndUnfusedOps) {
    const auto [R, V] = GetParam();
    const Case c = make_case(R, V, 1000u * R + V);
    // lse from the forward, as the engine keeps it
    std::vector<double> loss(R);
    std::vector<int32_t> amax(R);
    std::vector<float> lse(R);
    cross_entropy_forward(loss.data(), amax.data(), lse.data(), c.logits.data(), c.labels.data(), R, V);
    const size_t n = c.logits.size();

    std::vector<bf16> dlb(n);
    std::vector<float> db(V, 0.25f), part(cross_entropy_db_part_size(R, V), -7.f);
    cross_entropy_backward_bf16(dlb.data(), db.data(), part.data(), c.logits.data(), lse.data(),
                                c.labels.data(), c.coef.data(), R, V);

    // unfused ops: fp32 gradient, bias gradient, bf16 conversion
    std::vector<float> ul(n), udb(V, 0.25f);
    std::vector<bf16> ulb(n);
    cross_entropy_backward(ul.data(), c.logits.data(), lse.data(), c.labels.data(), c.coef.data(), R, V);
    bias_backward(udb.data(), ul.data(), R, V);
    to_bf16(ulb.data(), ul.data(), n);

    const std::vector<double> want = reference_dlogits(c);
    std::vector<double> want_db(V, 0.25);
    for (int r = 0; r < R; ++r)
        for (int v = 0; v < V; ++v) want_db[v] += want[static_cast<size_t>(r) * V + v];
    EXPECT_TRUE(all_close("unfused dlogits vs reference", ul, want, 1e-7, 1e-5));
    EXPECT_TRUE(all_close("db vs reference", db, want_db, 1e-7, 1e-5));
    // the same fp32 terms summed in another order (chunk partials): fp32 rounding only
    EXPECT_TRUE(all_close("db vs unfused", db, udb, 1e-8, 1e-6));

    // the same fp32 gradient (the same exp lanes), so the same bf16 bits as the unfused ops
    size_t bad = 0, first = n;
    for (size_t i = 0; i < n; ++i)
        if (dlb[i].bits != ulb[i].bits) {
            ++bad;
            if (first == n) first = i;
        }
    EXPECT_EQ(bad, 0u) << "dlb elements differing from bf16(cross_entropy_backward), R=" << R
                       << " V=" << V << ", first at " << first;
    // and bf16 of the reference, to bf16 rounding (relative 2^-8) plus fp32 noise
    std::vector<float> dlb_f(n);
    for (size_t i = 0; i < n; ++i) dlb_f[i] = to_float(dlb[i]);
    EXPECT_TRUE(all_close("dlb vs reference", dlb_f, want, 1e-7, 1.0 / 256));
}

// (R, V): R below, at and above the 16-row chunk; V below and above the 2048-column segment, not
// multiples of 16 or 8; 37·1013 and 61·4099 ≥ 2^15 take the parallel path.
INSTANTIATE_TEST_SUITE_P(OddSizes, FusedBackwardBf16,
                         ::testing::Values(std::pair{1, 13}, std::pair{16, 255},
                                           std::pair{37, 1013}, std::pair{61, 4099}));

TEST(FusedForwardBias, MatchesBiasAddThenForward) {
    for (const auto& [R, V] : {std::pair{1, 13}, std::pair{37, 1013}}) {
        const Case c = make_case(R, V, 99u + V);
        std::vector<float> z = c.logits, lse(R), uz = c.logits, ulse(R);
        std::vector<double> loss(R), uloss(R);
        std::vector<int32_t> amax(R), uamax(R);
        cross_entropy_forward_bias(loss.data(), amax.data(), lse.data(), z.data(), c.bias.data(),
                                   c.labels.data(), R, V);
        bias_add(uz.data(), c.bias.data(), R, V);
        cross_entropy_forward(uloss.data(), uamax.data(), ulse.data(), uz.data(), c.labels.data(), R, V);
        EXPECT_TRUE(all_close("biased logits", z, uz, 0, 0));
        EXPECT_TRUE(all_close("loss", loss, uloss, 0, 0));
        EXPECT_TRUE(all_close("lse", lse, ulse, 0, 0));
        EXPECT_EQ(amax, uamax);
        // and the loss from the definition, in double
        for (int r = 0; r < R; ++r) {
            const float* row = z.data() + static_cast<size_t>(r) * V;
            double m = row[0], s = 0;
            for (int v = 0; v < V; ++v) m = std::max(m, static_cast<double>(row[v]));
            for (int v = 0; v < V; ++v) s += std::exp(row[v] - m);
            const double want = m + std::log(s) - row[c.labels[r]];
            EXPECT_NEAR(loss[r], want, 1e-5 + 1e-5 * std::abs(want)) << "row " << r;
        }
    }
}

}  // namespace
}  // namespace bertbench::ops
