// The optimizer with its state, the parameters and the gradients in a backend's own memory (the
// CUDA backend's case), run here on the guarded backend (tests/backend/guarded_backend.hpp: the
// CPU's ops on memory the host may not touch): LAMB and AdamW, with and without accumulation, in
// both clip modes, with loss scaling, give the bits the CPU backend gives.
#include <gtest/gtest.h>

#include <cstring>
#include <random>
#include <string>
#include <vector>

#include "backend/guarded_backend.hpp"
#include "optim/loss_scale.hpp"
#include "optim/update.hpp"

namespace bertbench::optim {
namespace {

std::vector<model::ParamInfo> entries(size_t* total) {
    std::vector<model::ParamInfo> out;
    size_t end = 0;
    const auto add = [&](const std::string& name, size_t size, bool decay) {
        model::ParamInfo p;
        p.name = name;
        p.shape = {static_cast<int64_t>(size)};
        p.size = size;
        p.offset = (end + 15) / 16 * 16;  // padding between tensors, never touched
        p.decay = decay;
        end = p.offset + size;
        out.push_back(p);
    };
    add("bert/embeddings/word_embeddings", 3 * kChunkFloats + 77, true);  // several chunks
    add("bert/embeddings/LayerNorm/gamma", 37, false);
    add("bert/encoder/layer_0/output/dense/kernel", 1031, true);
    *total = end + 3;
    return out;
}

struct Outcome {
    std::vector<float> params, m, v, ratios;
    std::vector<float> norms;
};

Outcome run(backend::Backend& be, OptimizerKind kind, int steps_per_update, ClipMode clip, bool scaled) {
    size_t total = 0;
    const std::vector<model::ParamInfo> e = entries(&total);
    OptimizerConfig oc = kind == OptimizerKind::lamb ? OptimizerConfig{} : OptimizerConfig::adamw_reference();
    LrSchedule schedule;
    schedule.learning_rate = 1e-2;
    schedule.num_train_steps = 100;
    schedule.num_warmup_steps = 2;
    ParameterUpdater up(e, total, oc, schedule, steps_per_update, clip, 1.0f, be);
    std::mt19937 rng(7);
    std::normal_distribution<float> normal(0.0f, 1.0f);
    std::vector<float> w(total);
    for (float& x : w) x = 0.05f * normal(rng);
    backend::Buffer<float> params(be, std::span<const float>(w)), grads(be, total);
    const LossScaler scaler = LossScaler::from_flag(scaled ? "256" : "", 1, 1);
    Outcome r;
    for (int s = 0; s < 6; ++s) {
        std::vector<float> g(total);
        for (float& x : g) x = (scaled ? 256.0f : 1.0f) * (0.3f + 0.01f * s) * normal(rng);
        grads.upload(g);
        EXPECT_TRUE(scaler.unscale(grads.span(), be));
        r.norms.push_back(up.micro_step(params.span(), grads.span()).grad_norm);
    }
    r.params = params.download();
    r.m = std::vector<float>(up.optimizer().m().size());
    be.download(r.m.data(), up.optimizer().m().data(), r.m.size() * sizeof(float));
    r.v = std::vector<float>(up.optimizer().v().size());
    be.download(r.v.data(), up.optimizer().v().data(), r.v.size() * sizeof(float));
    r.ratios = up.optimizer().last_trust_ratios();
    return r;
}

bool same_bits(const std::vector<float>& a, const std::vector<float>& b) {
    return a.size() == b.size() && std::memcmp(a.data(), b.data(), a.size() * sizeof(float)) == 0;
}

TEST(OptimizerDevice, UpdatesInABackendsOwnMemoryEqualTheCpuBits) {
    for (OptimizerKind kind : {OptimizerKind::lamb, OptimizerKind::adamw})
        for (int n : {1, 3})
            for (ClipMode clip : {ClipMode::per_micro_batch, ClipMode::after_accumulation}) {
                const bool scaled = n == 3;
                SCOPED_TRACE(std::string(to_string(kind)) + " steps_per_update " + std::to_string(n) +
                             (clip == ClipMode::per_micro_batch ? " per micro-batch" : " after accumulation"));
                const Outcome cpu = run(backend::cpu(), kind, n, clip, scaled);
                testing::GuardedBackend guarded;
                const Outcome dev = run(guarded, kind, n, clip, scaled);
                EXPECT_TRUE(same_bits(cpu.params, dev.params));
                EXPECT_TRUE(same_bits(cpu.m, dev.m));
                EXPECT_TRUE(same_bits(cpu.v, dev.v));
                EXPECT_TRUE(same_bits(cpu.ratios, dev.ratios));
                EXPECT_TRUE(same_bits(cpu.norms, dev.norms));
                EXPECT_EQ(guarded.mappings(), 0u) << "every buffer released";
            }
}

}  // namespace
}  // namespace bertbench::optim
