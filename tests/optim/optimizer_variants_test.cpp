// The optimizer variants other references run (optim/optimizer.hpp OptimizerVariant), over several
// updates against double-precision references written here from the reference code: NVIDIA NGC
// TF's LAMBOptimizer (trust ratio on every tensor, decay only where not excluded) and MLPerf
// TF2's AdamWeightDecay (decoupled decay lr·wd·w, then Keras Adam bias-corrected with t = updates
// counting this one). Tolerance (numpy.isclose form): atol 1e-6, rtol 1e-5 after 4 fp32 updates.
// Also: a resumed Keras run (state and update count restored) equals an uninterrupted one bit for
// bit, and each variant is refused with the other kind.
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <random>
#include <string>
#include <vector>

#include "core/error.hpp"
#include "model/param_table.hpp"
#include "optim/optimizer.hpp"
#include "optim_test_util.hpp"

namespace bertbench::optim {
namespace {

constexpr double kVariantAtol = 1e-6, kVariantRtol = 1e-5;

// A multi-chunk kernel, an excluded LayerNorm gamma (non-trivial values, so its trust ratio is far
// from 1), a bias, a small kernel and the masked-LM head's LayerNorm gamma (decayed by MLPerf TF2's
// AdamWeightDecay only), with padding between them.
struct VariantTensors {
    std::vector<model::ParamInfo> entries;
    size_t total = 0;
    VariantTensors() {
        add("bert/encoder/layer_0/intermediate/dense/kernel", kChunkFloats + 37, true);
        add("bert/encoder/layer_0/output/LayerNorm/gamma", 13, false);
        add("bert/encoder/layer_0/output/dense/bias", 29, false);
        add("cls/predictions/transform/dense/kernel", 7 * 13, true);
        add("cls/predictions/transform/LayerNorm/gamma", 11, false, true);
        total += 3;
    }
    void add(const std::string& name, size_t size, bool decay, bool decayed_in_tf2 = false) {
        model::ParamInfo p;
        p.name = name;
        p.shape = {static_cast<int64_t>(size)};
        p.size = size;
        p.offset = total + 5;
        p.decay = decay;
        p.decayed_in_tf2 = decayed_in_tf2;
        total = p.offset + p.size;
        entries.push_back(p);
    }
};

std::vector<float> variant_random(const VariantTensors& vt, uint32_t seed, float scale, float shift) {
    std::mt19937 rng(seed);
    std::normal_distribution<float> nd(0.0f, 1.0f);
    std::vector<float> x(vt.total, std::nanf(""));  // padding: NaN, never read
    for (const auto& e : vt.entries)
        for (size_t i = 0; i < e.size; ++i) x[e.offset + i] = shift + scale * nd(rng);
    return x;
}

void expect_variant_close(const std::string& what, const VariantTensors& vt, const std::vector<float>& got,
                          const std::vector<double>& want) {
    for (const auto& e : vt.entries)
        testing::expect_close(what + " " + e.name, got.data() + e.offset, want.data() + e.offset, e.size,
                              kVariantRtol, kVariantAtol);
}

TEST(OptimizerVariants, NgcLambAdaptsEveryTensor) {
    const VariantTensors vt;
    OptimizerConfig c;
    c.variant = OptimizerVariant::ngc_tf;
    c.beta_1 = 0.85;
    c.weight_decay_rate = 0.05;
    Optimizer opt(vt.entries, vt.total, c);
    std::vector<float> w = variant_random(vt, 1, 0.2f, 0.3f);
    std::vector<double> rw(w.begin(), w.end()), rm(vt.total, 0.0), rv(vt.total, 0.0);
    const float lrs[] = {1e-2f, 5e-3f, 2e-3f, 1e-3f};
    std::vector<double> ratios;
    for (int t = 1; t <= 4; ++t) {
        const std::vector<float> g = variant_random(vt, 10 + t, 0.05f, 0.0f);
        const float lr = lrs[t - 1];
        opt.step(w, g, lr);
        // The reference, double: bias corrections 1 - beta^t, r = ||w||/||u|| for every tensor.
        const double b1 = float(c.beta_1), b2 = float(c.beta_2), eps = float(c.epsilon), wd = float(c.weight_decay_rate);
        ratios.clear();
        for (const auto& e : vt.entries) {
            std::vector<double> u(e.size);
            double w2 = 0, u2 = 0;
            for (size_t i = 0; i < e.size; ++i) {
                const size_t j = e.offset + i;
                rm[j] = b1 * rm[j] + (1 - b1) * g[j];
                rv[j] = b2 * rv[j] + (1 - b2) * double(g[j]) * g[j];
                u[i] = (rm[j] / (1 - std::pow(b1, t))) / (std::sqrt(rv[j] / (1 - std::pow(b2, t))) + eps) +
                       (e.decay ? wd * rw[j] : 0.0);
                w2 += rw[j] * rw[j];
                u2 += u[i] * u[i];
            }
            const double r = w2 > 0 && u2 > 0 ? std::sqrt(w2 / u2) : 1.0;
            ratios.push_back(r);
            for (size_t i = 0; i < e.size; ++i) rw[e.offset + i] -= r * lr * u[i];
        }
    }
    expect_variant_close("ngc lamb w", vt, w, rw);
    const std::vector<float> got_ratios = opt.last_trust_ratios();
    ASSERT_EQ(got_ratios.size(), ratios.size());
    for (size_t t = 0; t < ratios.size(); ++t)
        EXPECT_NEAR(got_ratios[t], ratios[t], 1e-5 * ratios[t]) << vt.entries[t].name;
    // The LayerNorm gamma and the bias (no decay) are adapted: MLPerf's LAMB would give them 1.
    EXPECT_GT(std::abs(got_ratios[1] - 1.0f), 0.1f) << got_ratios[1];
    EXPECT_GT(std::abs(got_ratios[2] - 1.0f), 0.1f) << got_ratios[2];
}

// MLPerf TF2 optimization.py AdamWeightDecay._resource_apply_dense: decay first, then TF's
// ResourceApplyAdam with alpha = lr·sqrt(1 - b2^t)/(1 - b1^t).
std::vector<double> keras_reference(const VariantTensors& vt, const OptimizerConfig& c,
                                    const std::vector<float>& w0, const std::vector<std::vector<float>>& grads,
                                    const std::vector<float>& lrs) {
    std::vector<double> w(w0.begin(), w0.end()), m(vt.total, 0.0), v(vt.total, 0.0);
    const double b1 = float(c.beta_1), b2 = float(c.beta_2), eps = float(c.epsilon), wd = float(c.weight_decay_rate);
    for (size_t s = 0; s < grads.size(); ++s) {
        const double t = double(s + 1), lr = lrs[s];
        const double alpha = lr * std::sqrt(1 - std::pow(b2, t)) / (1 - std::pow(b1, t));
        for (const auto& e : vt.entries)
            for (size_t j = e.offset; j < e.offset + e.size; ++j) {
                if ((e.decay || e.decayed_in_tf2) && wd != 0) w[j] -= lr * wd * w[j];
                m[j] = b1 * m[j] + (1 - b1) * grads[s][j];
                v[j] = b2 * v[j] + (1 - b2) * double(grads[s][j]) * grads[s][j];
                w[j] -= alpha * m[j] / (std::sqrt(v[j]) + eps);
            }
    }
    return w;
}

OptimizerConfig keras_config() {
    OptimizerConfig c;
    c.kind = OptimizerKind::adamw;
    c.variant = OptimizerVariant::keras;
    c.beta_1 = 0.8;
    c.beta_2 = 0.95;
    c.epsilon = 1e-4;
    c.weight_decay_rate = 0.1;
    return c;
}

TEST(OptimizerVariants, KerasAdamWeightDecayIsBiasCorrectedWithDecayFirst) {
    const VariantTensors vt;
    const std::vector<float> lrs = {1e-2f, 5e-3f, 2e-3f, 1e-3f};
    std::vector<std::vector<float>> grads;
    for (int s = 0; s < 4; ++s) grads.push_back(variant_random(vt, 20 + s, 0.05f, 0.0f));
    for (const double wd : {0.1, 0.0}) {
        OptimizerConfig c = keras_config();
        c.weight_decay_rate = wd;
        Optimizer opt(vt.entries, vt.total, c);
        std::vector<float> w = variant_random(vt, 2, 0.2f, 0.3f);
        const std::vector<double> want = keras_reference(vt, c, w, grads, lrs);
        for (size_t s = 0; s < grads.size(); ++s) opt.step(w, grads[s], lrs[s]);
        expect_variant_close("keras adamw w (wd " + std::to_string(wd) + ")", vt, w, want);
        EXPECT_EQ(opt.update_count(), 4);
    }
}

// A checkpoint restores m, v and the update count (set_scalars); the resumed run continues with
// t = 3, 4 and ends on the same bits as the uninterrupted one.
TEST(OptimizerVariants, KerasResumeEqualsUninterrupted) {
    const VariantTensors vt;
    const OptimizerConfig c = keras_config();
    const std::vector<float> lrs = {1e-2f, 5e-3f, 2e-3f, 1e-3f};
    std::vector<std::vector<float>> grads;
    for (int s = 0; s < 4; ++s) grads.push_back(variant_random(vt, 30 + s, 0.05f, 0.0f));
    Optimizer whole(vt.entries, vt.total, c);
    std::vector<float> w_whole = variant_random(vt, 3, 0.2f, 0.3f);
    std::vector<float> w_split = w_whole;
    for (size_t s = 0; s < 4; ++s) whole.step(w_whole, grads[s], lrs[s]);

    Optimizer first(vt.entries, vt.total, c);
    for (size_t s = 0; s < 2; ++s) first.step(w_split, grads[s], lrs[s]);
    Optimizer resumed(vt.entries, vt.total, c);
    std::memcpy(resumed.m().data(), first.m().data(), vt.total * sizeof(float));
    std::memcpy(resumed.v().data(), first.v().data(), vt.total * sizeof(float));
    resumed.set_scalars(first.update_count(), first.beta1_power(), first.beta2_power());
    for (size_t s = 2; s < 4; ++s) resumed.step(w_split, grads[s], lrs[s]);
    for (const auto& e : vt.entries)
        EXPECT_EQ(std::memcmp(w_whole.data() + e.offset, w_split.data() + e.offset, e.size * sizeof(float)), 0)
            << e.name;
    // and the update count matters: a resume that lost it (t restarting at 1) differs
    Optimizer forgetful(vt.entries, vt.total, c);
    std::vector<float> w_forgot = variant_random(vt, 3, 0.2f, 0.3f);
    for (size_t s = 0; s < 2; ++s) forgetful.step(w_forgot, grads[s], lrs[s]);
    Optimizer restarted(vt.entries, vt.total, c);
    std::memcpy(restarted.m().data(), forgetful.m().data(), vt.total * sizeof(float));
    std::memcpy(restarted.v().data(), forgetful.v().data(), vt.total * sizeof(float));
    for (size_t s = 2; s < 4; ++s) restarted.step(w_forgot, grads[s], lrs[s]);
    EXPECT_NE(std::memcmp(w_whole.data() + vt.entries[0].offset, w_forgot.data() + vt.entries[0].offset,
                          vt.entries[0].size * sizeof(float)),
              0);
}

TEST(OptimizerVariants, EachVariantBelongsToItsKind) {
    const VariantTensors vt;
    OptimizerConfig lamb_keras;
    lamb_keras.variant = OptimizerVariant::keras;
    EXPECT_THROW(Optimizer(vt.entries, vt.total, lamb_keras), Error);
    OptimizerConfig adamw_ngc = OptimizerConfig::adamw_reference();
    adamw_ngc.variant = OptimizerVariant::ngc_tf;
    EXPECT_THROW(Optimizer(vt.entries, vt.total, adamw_ngc), Error);
    EXPECT_STREQ(to_string(OptimizerVariant::standard), "standard");
    EXPECT_STREQ(to_string(OptimizerVariant::ngc_tf), "ngc_tf");
    EXPECT_STREQ(to_string(OptimizerVariant::keras), "keras");
}

}  // namespace
}  // namespace bertbench::optim
