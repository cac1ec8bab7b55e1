// ParameterUpdater's data-parallel micro-step (update.hpp): where the replica mean sits relative
// to clipping and accumulation. Two replicas are simulated in one process: the GradientMean adds
// the other replica's gradient and halves, exactly what a 2-rank MPI sum * 0.5 gives.
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <limits>
#include <random>
#include <vector>

#include "optim/clip.hpp"
#include "optim/update.hpp"

namespace bertbench::optim {
namespace {

struct Tables {
    std::vector<model::ParamInfo> entries;
    size_t total = 0;
    Tables() {
        add("bert/embeddings/word_embeddings", 40000);  // > 1 chunk
        add("bert/encoder/layer_0/attention/self/query/kernel", 37 * 13);
        add("bert/encoder/layer_0/attention/output/LayerNorm/gamma", 13);
        add("cls/predictions/output_bias", 29);
        total += 3;
    }
    void add(const std::string& name, size_t n) {
        model::ParamInfo p;
        p.name = name;
        p.shape = {static_cast<int64_t>(n)};
        p.size = n;
        p.offset = (total + 15) / 16 * 16;
        p.decay = name.find("LayerNorm") == std::string::npos && name.find("bias") == std::string::npos;
        total = p.offset + p.size;
        entries.push_back(p);
    }
    std::vector<float> random(std::mt19937& rng, float scale) const {
        std::normal_distribution<float> d(0.0f, scale);
        std::vector<float> v(total, 0.0f);  // padding 0, as in a real gradient buffer
        for (const auto& e : entries)
            for (size_t i = 0; i < e.size; ++i) v[e.offset + i] = d(rng);
        return v;
    }
};

const LrSchedule kSched{1e-3, 100, 0, 0, 1.0};

bool bitwise_equal(const std::vector<float>& a, const std::vector<float>& b) {
    return a.size() == b.size() && std::memcmp(a.data(), b.data(), a.size() * sizeof(float)) == 0;
}

TEST(DataParallelUpdate, ClipAfterAllReduceEqualsOneProcessOnTheMeanGradient) {
    Tables t;
    std::mt19937 rng(7);
    std::vector<float> w_dp = t.random(rng, 0.05f), w_one = w_dp;
    ParameterUpdater dp(t.entries, t.total, {}, kSched, 1, ClipMode::after_accumulation);
    ParameterUpdater one(t.entries, t.total, {}, kSched, 1, ClipMode::after_accumulation);
    EXPECT_TRUE(dp.overlappable());
    int clipped = 0;
    for (int step = 0; step < 10; ++step) {
        // norms around 0.6 .. 3: some steps clip, some do not
        const float scale = 0.003f * static_cast<float>(1 + step % 5);
        std::vector<float> g0 = t.random(rng, scale), g1 = t.random(rng, scale), mean(t.total);
        for (size_t i = 0; i < t.total; ++i) mean[i] = (g0[i] + g1[i]) * 0.5f;
        int calls = 0;
        const MicroStepResult a = dp.micro_step(w_dp, std::span<float>(g0), [&](std::span<float> g) {
            ++calls;
            for (size_t i = 0; i < g.size(); ++i) g[i] = (g[i] + g1[i]) * 0.5f;
        });
        const MicroStepResult b = one.micro_step(w_one, mean);
        EXPECT_EQ(calls, 1);
        EXPECT_EQ(a.grad_norm, b.grad_norm) << "step " << step;
        clipped += b.clip_scale < 1.0f;
        ASSERT_TRUE(bitwise_equal(w_dp, w_one)) << "step " << step;
    }
    EXPECT_GT(clipped, 0);
    EXPECT_LT(clipped, 10);
}

TEST(DataParallelUpdate, PerReplicaClipScalesEachReplicaByItsOwnNormBeforeTheMean) {
    Tables t;
    std::mt19937 rng(11);
    std::vector<float> w_dp = t.random(rng, 0.05f), w_ref = w_dp;
    ParameterUpdater dp(t.entries, t.total, {}, kSched, 1, ClipMode::per_micro_batch);
    // the reference: no clip of its own, fed the mean of the replicas' clipped gradients
    ParameterUpdater ref(t.entries, t.total, {}, kSched, 1, ClipMode::per_micro_batch,
                         std::numeric_limits<float>::infinity());
    EXPECT_FALSE(dp.overlappable());
    const ChunkPlan plan(t.entries, t.total);
    for (int step = 0; step < 6; ++step) {
        std::vector<float> g0 = t.random(rng, 0.001f * static_cast<float>(1 + 3 * (step % 2))),
                           g1 = t.random(rng, 0.004f);
        const float s0 = clip_scale(global_norm(plan, g0)), s1 = clip_scale(global_norm(plan, g1));
        std::vector<float> c1 = g1, mean(t.total);
        for (float& x : c1) x *= s1;
        for (size_t i = 0; i < t.total; ++i) mean[i] = (g0[i] * s0 + c1[i]) * 0.5f;
        const MicroStepResult a = dp.micro_step(w_dp, std::span<float>(g0), [&](std::span<float> g) {
            for (size_t i = 0; i < g.size(); ++i) g[i] = (g[i] + c1[i]) * 0.5f;
        });
        ref.micro_step(w_ref, mean);
        EXPECT_EQ(a.clip_scale, s0);
        ASSERT_TRUE(bitwise_equal(w_dp, w_ref)) << "step " << step;
    }
}

TEST(DataParallelUpdate, WithAccumulationTheMeanRunsOncePerUpdateOnTheAccumulator) {
    Tables t;
    std::mt19937 rng(3);
    for (ClipMode mode : {ClipMode::per_micro_batch, ClipMode::after_accumulation}) {
        std::vector<float> w = t.random(rng, 0.05f);
        ParameterUpdater dp(t.entries, t.total, {}, kSched, 3, mode);
        EXPECT_FALSE(dp.overlappable());
        int calls = 0;
        for (int step = 0; step < 6; ++step) {
            std::vector<float> g = t.random(rng, 0.01f);
            const MicroStepResult r = dp.micro_step(w, std::span<float>(g), [&](std::span<float> buf) {
                ++calls;
                EXPECT_EQ(buf.data(), dp.grad_accum().data());
            });
            EXPECT_EQ(r.applied, step % 3 == 2);
            // the norm: every micro-batch's, or (clip after accumulation) the update's only, which
            // the training log then reports undivided
            EXPECT_EQ(r.norm_measured, mode == ClipMode::per_micro_batch || r.applied) << step;
            EXPECT_EQ(r.grad_norm > 0, r.norm_measured) << step;
        }
        EXPECT_EQ(calls, 2);
    }
}

// NGC TF under Horovod (its DistributedOptimizer, K = 3 micro-batches per update): every
// micro-batch's gradient of loss / K is averaged over the replicas, clipped to norm 1 and
// accumulated; in the micro-batch gradient's units clip norm K, accumulated as g_clipped / K.
TEST(DataParallelUpdate, AveragedMicroBatchClipsEachReplicaMeanThenAccumulates) {
    Tables t;
    std::mt19937 rng(5);
    const int k = 3;
    std::vector<float> w_dp = t.random(rng, 0.05f), w_ref = w_dp;
    ParameterUpdater dp(t.entries, t.total, {}, kSched, k, ClipMode::averaged_micro_batch,
                        static_cast<float>(k));
    EXPECT_TRUE(dp.overlappable());  // the mean comes first: it may start during the backward
    // the reference: one process fed the accumulated update of the clipped means, no clip of its own
    ParameterUpdater ref(t.entries, t.total, {}, kSched, 1, ClipMode::per_micro_batch,
                         std::numeric_limits<float>::infinity());
    const ChunkPlan plan(t.entries, t.total);
    std::vector<double> acc(t.total, 0.0);
    int calls = 0, clipped = 0;
    for (int step = 0; step < 2 * k; ++step) {
        // norms of the mean / K about 0.5, 1.4, 2.4: below and above the clip norm 1
        const float scale = 0.01f * static_cast<float>(1 + 2 * (step % 3));
        std::vector<float> g0 = t.random(rng, scale), g1 = t.random(rng, scale), mean(t.total);
        for (size_t i = 0; i < t.total; ++i) mean[i] = (g0[i] + g1[i]) * 0.5f;
        // loss / K's gradient clipped to 1 (TF), as float
        std::vector<float> over_k(t.total);
        for (size_t i = 0; i < t.total; ++i) over_k[i] = mean[i] / static_cast<float>(k);
        const float s = clip_scale(global_norm(plan, over_k));
        clipped += s < 1.0f;
        for (size_t i = 0; i < t.total; ++i) acc[i] += static_cast<double>(over_k[i]) * s;
        const MicroStepResult r = dp.micro_step(w_dp, std::span<float>(g0), [&](std::span<float> g) {
            ++calls;
            EXPECT_EQ(g.data(), g0.data());  // the micro-batch gradient, not the accumulator
            for (size_t i = 0; i < g.size(); ++i) g[i] = (g[i] + g1[i]) * 0.5f;
        });
        EXPECT_EQ(r.applied, step % k == k - 1);
        if (!r.applied) continue;
        std::vector<float> update(t.total);
        for (size_t i = 0; i < t.total; ++i) update[i] = static_cast<float>(acc[i]);
        std::fill(acc.begin(), acc.end(), 0.0);
        ref.set_global_step(step);  // the same learning rate
        ref.micro_step(w_ref, update);
        for (size_t i = 0; i < t.total; ++i)
            ASSERT_NEAR(w_dp[i], w_ref[i], 1e-6f * (1.0f + std::fabs(w_ref[i]))) << "step " << step << " [" << i << "]";
    }
    EXPECT_EQ(calls, 2 * k);  // one all-reduce per micro-step
    EXPECT_GT(clipped, 0);
    EXPECT_LT(clipped, 2 * k);
}

}  // namespace
}  // namespace bertbench::optim
