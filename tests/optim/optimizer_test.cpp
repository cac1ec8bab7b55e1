// LAMB / AdamW / clipping / accumulation against the independent float64 numpy reference
// (tests/tools/optim_reference.py), plus determinism across thread counts and state naming.
#include "optim/optimizer.hpp"

#include <gtest/gtest.h>
#include <omp.h>

#include <algorithm>
#include <cstring>
#include <limits>
#include <random>

#include "core/error.hpp"
#include "model/param_table.hpp"
#include "optim/clip.hpp"
#include "optim/update.hpp"
#include "optim_test_util.hpp"

namespace bertbench::optim {
namespace {

using testing::expect_close;

bool excluded_by_name(const std::string& n) {  // the reference's regex list, independently
    return n.find("LayerNorm") != std::string::npos || n.find("layer_norm") != std::string::npos ||
           n.find("bias") != std::string::npos;
}

// Tensors exercising every path: multi-chunk (> kChunkFloats), excluded names (LayerNorm,
// layer_norm, bias), an all-zero tensor with zero grads (r = 1 branch), a non-zero tensor with zero
// grads (u = wd*w only), odd sizes and 16-float aligned offsets with NaN padding between them.
struct Fixture {
    enum Kind { normal, zero_all, zero_grad };
    std::vector<model::ParamInfo> entries;
    std::vector<Kind> kinds;
    size_t total = 0;

    Fixture() {
        add("bert/embeddings/word_embeddings", {7001, 10}, normal);  // 70010 floats: 3 chunks
        add("bert/embeddings/LayerNorm/gamma", {13}, normal);
        add("bert/encoder/layer_0/attention/self/query/kernel", {37, 13}, normal);
        add("bert/encoder/layer_0/attention/self/query/bias", {13}, normal);
        add("bert/encoder/layer_0/output/layer_norm/beta", {13}, normal);
        add("bert/pooler/dense/kernel", {13, 7}, zero_all);
        add("cls/seq_relationship/output_weights", {2, 13}, zero_grad);
        add("cls/predictions/output_bias", {29}, normal);
        total += 5;  // trailing padding
    }
    void add(const std::string& name, std::vector<int64_t> shape, Kind kind) {
        model::ParamInfo p;
        p.name = name;
        p.shape = shape;
        p.size = 1;
        for (auto d : shape) p.size *= static_cast<size_t>(d);
        p.offset = (total + 15) / 16 * 16;
        p.decay = !excluded_by_name(name);
        total = p.offset + p.size;
        entries.push_back(p);
        kinds.push_back(kind);
    }
    size_t packed() const {
        size_t n = 0;
        for (const auto& e : entries) n += e.size;
        return n;
    }
    std::vector<float> padded(float fill) const { return std::vector<float>(total, fill); }
    // packed (reference order) <-> padded (table layout)
    std::vector<float> pack(const std::vector<float>& buf) const {
        std::vector<float> out;
        for (const auto& e : entries) out.insert(out.end(), buf.begin() + e.offset, buf.begin() + e.offset + e.size);
        return out;
    }
};

std::vector<float> initial_params(const Fixture& fx, std::mt19937& rng) {
    auto w = fx.padded(std::numeric_limits<float>::quiet_NaN());
    std::normal_distribution<float> nd(0.0f, 1.0f);
    for (size_t t = 0; t < fx.entries.size(); ++t) {
        const auto& e = fx.entries[t];
        for (size_t i = 0; i < e.size; ++i) {
            float x = 0.0f;
            if (fx.kinds[t] != Fixture::zero_all) {
                if (e.name.find("gamma") != std::string::npos) x = 1.0f + 0.1f * nd(rng);
                else if (!e.decay) x = 0.1f * nd(rng);
                else x = 0.5f * nd(rng);
            }
            w[e.offset + i] = x;
        }
    }
    return w;
}

// One micro-batch gradient, scaled so its global norm is uniform in [0.3, 3] (clipping on some
// steps, not on others).
std::vector<float> random_grads(const Fixture& fx, std::mt19937& rng) {
    auto g = fx.padded(std::numeric_limits<float>::quiet_NaN());
    std::normal_distribution<float> nd(0.0f, 1.0f);
    double ss = 0;
    for (size_t t = 0; t < fx.entries.size(); ++t) {
        const auto& e = fx.entries[t];
        for (size_t i = 0; i < e.size; ++i) {
            const float x = fx.kinds[t] == Fixture::normal ? nd(rng) : 0.0f;
            g[e.offset + i] = x;
            ss += double(x) * x;
        }
    }
    const float target = std::uniform_real_distribution<float>(0.3f, 3.0f)(rng);
    const float s = static_cast<float>(target / std::sqrt(ss));
    for (const auto& e : fx.entries)
        for (size_t i = 0; i < e.size; ++i) g[e.offset + i] *= s;
    return g;
}

struct Case {
    OptimizerKind kind;
    int steps_per_update;
    double poly_power;
    ClipMode clip_mode = ClipMode::per_micro_batch;
};

void PrintTo(const Case& c, std::ostream* os) {
    *os << to_string(c.kind) << " n=" << c.steps_per_update << " p=" << c.poly_power
        << (c.clip_mode == ClipMode::after_accumulation ? " clip-after" : " clip-each");
}

class OptimizerVsReference : public ::testing::TestWithParam<Case> {};

TEST_P(OptimizerVsReference, TwelveUpdatesMatchNumpy) {
    const Case c = GetParam();
    const int updates = 12;
    const int n = c.steps_per_update;
    const int micro = updates * n;
    Fixture fx;
    std::mt19937 rng(1234 + n * 10 + static_cast<int>(c.kind));
    auto w = initial_params(fx, rng);
    const auto w0_packed = fx.pack(w);
    std::vector<std::vector<float>> grads;
    std::vector<float> grads_packed;
    for (int s = 0; s < micro; ++s) {
        grads.push_back(random_grads(fx, rng));
        auto p = fx.pack(grads.back());
        grads_packed.insert(grads_packed.end(), p.begin(), p.end());
    }

    OptimizerConfig oc = c.kind == OptimizerKind::lamb ? OptimizerConfig{} : OptimizerConfig::adamw_reference();
    LrSchedule sched;
    sched.learning_rate = c.kind == OptimizerKind::lamb ? 1e-2 : 1e-3;
    sched.num_warmup_steps = 5;
    sched.start_warmup_step = -2;
    sched.num_train_steps = micro + 4;
    sched.poly_power = c.poly_power;

    ParameterUpdater up(fx.entries, fx.total, oc, sched, n, c.clip_mode);
    std::vector<MicroStepResult> results;
    for (int s = 0; s < micro; ++s) results.push_back(up.micro_step(w, grads[s]));

    testing::TempDir dir;
    testing::write_raw(dir.file("params.f32"), w0_packed);
    testing::write_raw(dir.file("grads.f32"), grads_packed);
    nlohmann::json spec = {{"mode", "train"},
                           {"optimizer", to_string(c.kind)},
                           {"beta_1", oc.beta_1},
                           {"beta_2", oc.beta_2},
                           {"epsilon", oc.epsilon},
                           {"weight_decay_rate", oc.weight_decay_rate},
                           {"learning_rate", sched.learning_rate},
                           {"num_train_steps", sched.num_train_steps},
                           {"num_warmup_steps", sched.num_warmup_steps},
                           {"start_warmup_step", sched.start_warmup_step},
                           {"poly_power", sched.poly_power},
                           {"steps_per_update", n},
                           {"micro_steps", micro},
                           {"clip_norm", 1.0},
                           {"clip_after_accumulation", c.clip_mode == ClipMode::after_accumulation},
                           {"params", "params.f32"},
                           {"grads", "grads.f32"}};
    for (const auto& e : fx.entries) spec["tensors"].push_back({{"name", e.name}, {"size", e.size}});
    const auto ref = testing::run_reference(dir, spec);
    const auto state = testing::read_raw<double>(dir.file("state.f64"));
    const size_t P = fx.packed();
    ASSERT_EQ(state.size(), 3 * P);

    // Schedule and clipping, per micro-step.
    int applied = 0;
    for (int s = 0; s < micro; ++s) {
        const double want_lr = ref["lrs"][s], want_norm = ref["norms"][s];
        EXPECT_NEAR(results[s].learning_rate, want_lr, 1e-6 * std::fabs(want_lr) + 1e-12) << "step " << s;
        EXPECT_NEAR(results[s].grad_norm, want_norm, 1e-5 * want_norm) << "step " << s;
        EXPECT_EQ(results[s].applied, s % n == n - 1) << "step " << s;
        applied += results[s].applied;
    }
    EXPECT_EQ(applied, updates);
    EXPECT_EQ(up.optimizer().update_count(), ref["updates"].get<int>());
    EXPECT_EQ(up.global_step(), micro);
    // both branches of clipping happen (after_accumulation: only update micro-steps clip)
    const bool every = c.clip_mode == ClipMode::per_micro_batch;
    EXPECT_TRUE(std::any_of(results.begin(), results.end(),
                            [&](auto& r) { return (every || r.applied) && r.clip_scale < 1; }));
    EXPECT_TRUE(std::any_of(results.begin(), results.end(),
                            [&](auto& r) { return (every || r.applied) && r.clip_scale == 1; }));

    // Parameters, their change, and the slots; tolerances: fp32 (ours) vs float64 (numpy).
    const auto wp = fx.pack(w);
    const auto mp = fx.pack(std::vector<float>(up.optimizer().m().begin(), up.optimizer().m().end()));
    const auto vp = fx.pack(std::vector<float>(up.optimizer().v().begin(), up.optimizer().v().end()));
    size_t off = 0;
    for (size_t t = 0; t < fx.entries.size(); ++t) {
        const auto& e = fx.entries[t];
        const double* ww = state.data() + off;
        const double* wm = state.data() + P + off;
        const double* wv = state.data() + 2 * P + off;
        // fp32 rounding of w itself: at most ~1 ulp of max|w| per update.
        double wmax = 0;
        for (size_t i = 0; i < e.size; ++i) wmax = std::max(wmax, std::fabs(ww[i]));
        const double w_atol = updates * 0x1p-23 * wmax;
        expect_close(e.name + " params", wp.data() + off, ww, e.size, 1e-5, w_atol);
        std::vector<double> dgot(e.size), dwant(e.size);
        double dmax = 0, mmax = 0, vmax = 0;
        for (size_t i = 0; i < e.size; ++i) {
            dgot[i] = double(wp[off + i]) - w0_packed[off + i];
            dwant[i] = ww[i] - w0_packed[off + i];
            dmax = std::max(dmax, std::fabs(dwant[i]));
            mmax = std::max(mmax, std::fabs(wm[i]));
            vmax = std::max(vmax, std::fabs(wv[i]));
        }
        // the update itself to 1e-4 relative (the params test alone would hide a small lr bug)
        expect_close(e.name + " params - initial", dgot.data(), dwant.data(), e.size, 1e-4,
                     1e-4 * dmax + w_atol);
        expect_close(e.name + "/adam_m", mp.data() + off, wm, e.size, 1e-5, 1e-6 * mmax);
        expect_close(e.name + "/adam_v", vp.data() + off, wv, e.size, 1e-5, 1e-6 * vmax);
        if (fx.kinds[t] == Fixture::zero_all) {
            for (size_t i = 0; i < e.size; ++i) {
                ASSERT_EQ(wp[off + i], 0.0f) << e.name;
            }
        }
        const double want_r = ref["last_ratios"][t];
        EXPECT_NEAR(up.optimizer().last_trust_ratios()[t], want_r, 1e-4 * want_r) << e.name;
        off += e.size;
    }
    // padding is never written
    for (size_t i = 0; i < fx.total; ++i) {
        bool inside = false;
        for (const auto& e : fx.entries) inside |= i >= e.offset && i < e.offset + e.size;
        if (!inside) {
            ASSERT_TRUE(std::isnan(w[i])) << "padding float " << i << " was written";
        }
    }
}

INSTANTIATE_TEST_SUITE_P(All, OptimizerVsReference,
                         ::testing::Values(Case{OptimizerKind::lamb, 1, 1.0},
                                           Case{OptimizerKind::lamb, 3, 2.0},
                                           Case{OptimizerKind::adamw, 1, 1.0},
                                           Case{OptimizerKind::adamw, 3, 0.5},
                                           Case{OptimizerKind::lamb, 4, 1.0, ClipMode::after_accumulation}),
                         [](const auto& p) {
                             return std::string(to_string(p.param.kind)) + "_accum" +
                                    std::to_string(p.param.steps_per_update) +
                                    (p.param.clip_mode == ClipMode::after_accumulation ? "_clip_after" : "");
                         });

// Same bits for 1, 2 and 3 OpenMP threads (fixed chunk split and reduction order).
TEST(Optimizer, DeterministicAcrossThreadCounts) {
    Fixture fx;
    std::vector<std::vector<float>> outs;
    std::vector<float> norms;
    for (int threads : {1, 2, 3}) {
        omp_set_num_threads(threads);
        std::mt19937 rng(7);
        auto w = initial_params(fx, rng);
        Optimizer opt(fx.entries, fx.total, OptimizerConfig{});
        for (int s = 0; s < 3; ++s) {
            auto g = random_grads(fx, rng);
            const float norm = global_norm(ChunkPlan(fx.entries, fx.total), g);
            if (s == 0) norms.push_back(norm);
            opt.step(w, g, 1e-2f, clip_scale(norm));
        }
        outs.push_back(fx.pack(w));
    }
    omp_set_num_threads(omp_get_num_procs());
    EXPECT_EQ(std::memcmp(&norms[0], &norms[1], sizeof(float)), 0);
    EXPECT_EQ(std::memcmp(&norms[0], &norms[2], sizeof(float)), 0);
    for (size_t k = 1; k < outs.size(); ++k)
        EXPECT_EQ(std::memcmp(outs[0].data(), outs[k].data(), outs[0].size() * sizeof(float)), 0)
            << "thread count " << k + 1;
}

TEST(Optimizer, ClipScaleFollowsTf) {
    EXPECT_EQ(clip_scale(0.5f), 1.0f);
    EXPECT_EQ(clip_scale(1.0f), 1.0f);
    EXPECT_EQ(clip_scale(0.0f), 1.0f);  // 1/0 = inf, min(inf, 1) = 1
    EXPECT_FLOAT_EQ(clip_scale(4.0f), 0.25f);
    EXPECT_FLOAT_EQ(clip_scale(4.0f, 2.0f), 0.5f);
    EXPECT_TRUE(std::isnan(clip_scale(std::numeric_limits<float>::infinity())));
    EXPECT_TRUE(std::isnan(clip_scale(std::numeric_limits<float>::quiet_NaN())));
}

TEST(Optimizer, CpuBackendZeroClearsEveryFloat) {  // the gradients' clear, in parallel parts
    for (size_t n : {size_t{0}, size_t{7}, kChunkFloats, 3 * kChunkFloats + 5}) {
        std::vector<float> buf(n + 1, 2.5f);
        backend::cpu().zero(buf.data(), n * sizeof(float));
        EXPECT_EQ(std::count(buf.begin(), buf.begin() + static_cast<long>(n), 0.0f), static_cast<long>(n));
        EXPECT_EQ(buf[n], 2.5f) << "wrote past the span, n " << n;
    }
}

TEST(Optimizer, StateTensorsNamedLikeTfSlots) {
    Fixture fx;
    Optimizer opt(fx.entries, fx.total, OptimizerConfig{});
    auto st = opt.state_tensors();
    ASSERT_EQ(st.size(), 2 * fx.entries.size());
    EXPECT_EQ(st[0].name, "bert/embeddings/word_embeddings/adam_m");
    EXPECT_EQ(st[1].name, "bert/embeddings/word_embeddings/adam_v");
    EXPECT_EQ(st[0].data.size(), 70010u);
    EXPECT_EQ(st[2].data.data(), opt.m().data() + fx.entries[1].offset);
    EXPECT_FLOAT_EQ(opt.beta1_power(), 0.9f);
    std::vector<float> w = initial_params(fx, *std::make_unique<std::mt19937>(1)), g(fx.total, 0.0f);
    opt.step(w, g, 0.0f);
    EXPECT_EQ(opt.update_count(), 1);
    EXPECT_FLOAT_EQ(opt.beta1_power(), 0.9f * 0.9f);
    EXPECT_FLOAT_EQ(opt.beta2_power(), 0.999f * 0.999f);
}

// The SQuAD model's pooler gets no gradient (the span head reads the sequence output): neither
// optimizer moves or decays it, as google's run_squad.py (no gradient: skipped) and NVIDIA's (the
// pooler taken out of the optimizer) leave it. Every other tensor moves.
TEST(Optimizer, LeavesTheSquadPoolerAsLoaded) {
    model::BertConfig config;
    config.vocab_size = 50, config.hidden_size = 16, config.num_hidden_layers = 1;
    config.num_attention_heads = 2, config.intermediate_size = 32, config.max_position_embeddings = 16;
    const model::ParamTable table(config, model::Heads::squad);
    for (const model::ParamInfo& e : table.entries())
        EXPECT_EQ(e.trained, !e.name.starts_with("bert/pooler/")) << e.name;
    for (OptimizerConfig oc : {OptimizerConfig::adamw_reference(), OptimizerConfig{}}) {  // AdamW, LAMB
        std::mt19937 rng(3);
        std::normal_distribution<float> normal(0.0f, 0.5f);
        std::vector<float> w(table.total_floats()), g(table.total_floats());
        for (float& x : w) x = normal(rng);
        for (float& x : g) x = normal(rng);  // even where no gradient reaches: not read
        const std::vector<float> before = w;
        Optimizer opt(table, oc, backend::cpu());
        for (int s = 0; s < 3; ++s) opt.step(w, g, 1e-2f);
        for (const model::ParamInfo& e : table.entries()) {
            const bool same = std::equal(w.begin() + static_cast<long>(e.offset),
                                         w.begin() + static_cast<long>(e.offset + e.size),
                                         before.begin() + static_cast<long>(e.offset));
            EXPECT_EQ(same, !e.trained) << e.name << (oc.kind == OptimizerKind::lamb ? " LAMB" : " AdamW");
        }
    }
}

TEST(Optimizer, RejectsBadInput) {
    Fixture fx;
    Optimizer opt(fx.entries, fx.total, OptimizerConfig{});
    std::vector<float> w(fx.total, 0.0f), g(fx.total - 1, 0.0f);
    EXPECT_THROW(opt.step(w, g, 1e-3f), Error);
    OptimizerConfig bad;
    bad.beta_2 = 1.0;
    EXPECT_THROW(Optimizer(fx.entries, fx.total, bad), Error);
    EXPECT_THROW(parse_optimizer_kind("sgd"), Error);
    auto entries = fx.entries;
    entries.back().offset = fx.total;  // outside the buffer
    EXPECT_THROW(ChunkPlan(entries, fx.total), Error);
    // a non-finite gradient norm is an error naming the step, not silent NaN weights
    ParameterUpdater up(fx.entries, fx.total, OptimizerConfig{}, LrSchedule{1e-3, 10, 0, 0, 1.0}, 1);
    std::vector<float> gi(fx.total, 0.0f);
    gi[fx.entries[0].offset] = std::numeric_limits<float>::infinity();
    w.assign(fx.total, 0.0f);
    try {
        up.micro_step(w, gi);
        ADD_FAILURE() << "expected Error";
    } catch (const Error& e) {
        EXPECT_NE(std::string(e.what()).find("step 1:"), std::string::npos) << e.what();
    }
}

}  // namespace
}  // namespace bertbench::optim
