// The engine with the fused attention kernel (EngineOptions::attention, BB_ATTENTION) against the
// materialized one on a tiny odd config (V 37, H 12, 3 heads, I 13, 2 layers, dropout on) with
// mixed sequence lengths (5, 9, 3): a training step's losses and gradients, fp32 (atol 1e-5,
// rtol 1e-4; the kernels differ only in summation order) and bf16 (atol 1e-3, rtol 5e-2); padded
// SQuAD features (key_lengths); the regenerated attention_probs dropout mask (same bytes);
// finite differences in double through the fused kernel (atol 1e-8, rtol 1e-6); the kernel choice
// (auto threshold, BB_ATTENTION, errors) and the memory it saves.
#include <gtest/gtest.h>

#include <cstdlib>
#include <random>
#include <vector>

#include "../ops/check.hpp"
#include "core/error.hpp"
#include "model/bert.hpp"
#include "model/encoder.hpp"  // detail::plan_activation_bytes
#include "tiny_model.hpp"

namespace bertbench::model {
namespace {

using bertbench::testing::all_close;
using bertbench::testing::make_params;
using bertbench::testing::tiny_batch;

BertConfig fused_config() {
    return testing::tiny_config(512);
}

EngineOptions with(AttentionKernel k, ops::Precision p = ops::Precision::fp32) {
    EngineOptions o;
    o.attention = k;
    o.precision = p;
    return o;
}

void compare_training_step(ops::Precision precision, double atol, double rtol) {
    const ParamTable table(fused_config(), Heads::pretraining);
    const Batch batch = tiny_batch();
    BertPretrainer mat(table, Plan{3, 9, 2}, with(AttentionKernel::materialized, precision));
    BertPretrainer fus(table, Plan{3, 9, 2}, with(AttentionKernel::fused, precision));
    ASSERT_FALSE(mat.fused_attention());
    ASSERT_TRUE(fus.fused_attention());
    const auto p = make_params<float>(table, 3);
    const Losses a = mat.forward(p, batch, true, 21, 4), b = fus.forward(p, batch, true, 21, 4);
    EXPECT_NEAR(b.total, a.total, atol + rtol * std::abs(a.total));
    EXPECT_NEAR(b.mlm_loss, a.mlm_loss, atol + rtol * std::abs(a.mlm_loss));
    for (const DropoutSite site : {DropoutSite{DropoutSite::attention_probs, 0},
                                   DropoutSite{DropoutSite::attention_probs, 1}}) {
        const std::span<const uint8_t> ma = mat.dropout_mask(site);
        const std::vector<uint8_t> want(ma.begin(), ma.end());
        const std::span<const uint8_t> mb = fus.dropout_mask(site);
        EXPECT_EQ(std::vector<uint8_t>(mb.begin(), mb.end()), want) << "layer " << site.layer;
        EXPECT_EQ(want.size(), size_t(3 * (25 + 81 + 9)));
    }
    std::vector<float> ga(p.size(), 0.f), gb(p.size(), 0.f);
    mat.backward(ga, p, batch);
    fus.backward(gb, p, batch);
    EXPECT_TRUE(all_close("fused vs materialized grads", gb, ga, atol, rtol));
    // inference: no attention_probs mask either way
    fus.forward(p, batch, false, 21, 4);
    EXPECT_TRUE(fus.dropout_mask({model::DropoutSite::attention_probs, 0}).empty());
}

TEST(FusedAttentionEngine, TrainingStepMatchesMaterializedFp32) {
    compare_training_step(ops::Precision::fp32, 1e-5, 1e-4);
}

TEST(FusedAttentionEngine, TrainingStepMatchesMaterializedBf16) {
    compare_training_step(ops::Precision::bf16, 1e-3, 5e-2);
}

TEST(FusedAttentionEngine, PaddedSquadFeaturesMatchMaterialized) {
    const ParamTable table(fused_config(), Heads::squad);
    Batch batch = tiny_batch();
    batch.key_lengths = {3, 9, 1};  // padding rows are queries only
    BertSquad mat(table, Plan{3, 9, 0}, with(AttentionKernel::materialized));
    BertSquad fus(table, Plan{3, 9, 0}, with(AttentionKernel::fused));
    const auto p = make_params<float>(table, 7);
    const std::vector<int32_t> start = {1, 4, 0}, end = {3, 8, 2};
    const SpanLosses a = mat.forward(p, batch, start, end, true, 5, 6);
    const SpanLosses b = fus.forward(p, batch, start, end, true, 5, 6);
    EXPECT_NEAR(b.total, a.total, 1e-5 + 1e-4 * std::abs(a.total));
    EXPECT_TRUE(all_close("start logits", fus.start_logits(), mat.start_logits(), 1e-5, 1e-4));
    const std::span<const uint8_t> ma = mat.dropout_mask({model::DropoutSite::attention_probs, 1});
    const std::span<const uint8_t> mb = fus.dropout_mask({model::DropoutSite::attention_probs, 1});
    EXPECT_EQ(std::vector<uint8_t>(mb.begin(), mb.end()), std::vector<uint8_t>(ma.begin(), ma.end()));
    std::vector<float> ga(p.size(), 0.f), gb(p.size(), 0.f);
    mat.backward(ga, p, batch);
    fus.backward(gb, p, batch);
    EXPECT_TRUE(all_close("squad grads", gb, ga, 1e-5, 1e-4));
}

// Every parameter's gradient (all elements of small tensors, 10 of the others) by central
// differences through the fused kernel, with dropout (the regenerated masks must be those of the
// forward, or the gradient is wrong).
TEST(FusedAttentionEngine, FiniteDifferencesInDouble) {
    const ParamTable table(fused_config(), Heads::pretraining);
    const Batch batch = tiny_batch();
    BertPretrainerF64 model(table, Plan{4, 11, 3}, with(AttentionKernel::fused));
    ASSERT_TRUE(model.fused_attention());
    std::vector<double> params = make_params<double>(table, 5);
    auto loss = [&] { return model.forward(params, batch, true, 1234, 7).total; };
    loss();
    std::vector<double> grads(params.size(), 0.0);
    model.backward(grads, params, batch);
    std::vector<double> got, want;
    for (const ParamInfo& info : table.entries()) {
        const size_t count = std::min<size_t>(info.size, 10);
        for (size_t k = 0; k < count; ++k) {
            const size_t i = info.offset + (info.size <= 10 ? k : (k * 7919 + 13) % info.size);
            const double keep = params[i];
            params[i] = keep + 1e-6;
            const double fp = loss();
            params[i] = keep - 1e-6;
            const double fm = loss();
            params[i] = keep;
            got.push_back(grads[i]);
            want.push_back((fp - fm) / 2e-6);
        }
    }
    EXPECT_TRUE(all_close("fused grads vs finite differences", got, want, 1e-8, 1e-6));
    double norm = 0;
    for (double g : got) norm += g * g;
    EXPECT_GT(norm, 1e-4);
}

TEST(FusedAttentionEngine, ChoiceRuleEnvironmentAndMemory) {
    ASSERT_EQ(std::getenv("BB_ATTENTION"), nullptr) << "the test sets BB_ATTENTION itself";
    // automatic: materialized (faster) until its probabilities would take a quarter of the memory
    EXPECT_EQ(resolve_attention_kernel(AttentionKernel::automatic, 1000, 4000), AttentionKernel::materialized);
    EXPECT_EQ(resolve_attention_kernel(AttentionKernel::automatic, 1001, 4000), AttentionKernel::fused);
    EXPECT_EQ(resolve_attention_kernel(AttentionKernel::automatic, 1001, 0), AttentionKernel::materialized)
        << "memory unknown";
    EXPECT_EQ(resolve_attention_kernel(AttentionKernel::materialized, 4000, 4000), AttentionKernel::materialized);
    EXPECT_EQ(resolve_attention_kernel(AttentionKernel::fused, 1, 4000), AttentionKernel::fused);
    // a backend without the fused kernel: automatic stays materialized
    EXPECT_EQ(resolve_attention_kernel(AttentionKernel::automatic, 1001, 4000, false), AttentionKernel::materialized);
    EXPECT_EQ(resolve_attention_kernel(AttentionKernel::fused, 1, 4000, false), AttentionKernel::fused);
    // on a GPU, fused wherever the backend has it, whatever the size; an explicit choice stays
    EXPECT_EQ(resolve_attention_kernel(AttentionKernel::automatic, 1, 4000, true, true), AttentionKernel::fused);
    EXPECT_EQ(resolve_attention_kernel(AttentionKernel::automatic, 1, 0, true, true), AttentionKernel::fused);
    EXPECT_EQ(resolve_attention_kernel(AttentionKernel::automatic, 1, 4000, false, true),
              AttentionKernel::materialized);
    EXPECT_EQ(resolve_attention_kernel(AttentionKernel::materialized, 1, 4000, true, true),
              AttentionKernel::materialized);
    EXPECT_EQ(parse_attention_kernel("auto", "--attention"), AttentionKernel::automatic);
    EXPECT_THROW(parse_attention_kernel("flash", "--attention"), Error);
    // BB_ATTENTION is read by attention_kernel_from_environment (main, at start-up) only
    ::setenv("BB_ATTENTION", "fused", 1);
    EXPECT_EQ(attention_kernel_from_environment(), AttentionKernel::fused);
    const ParamTable table(fused_config(), Heads::pretraining);
    EXPECT_FALSE(BertPretrainer(table, Plan{2, 9, 2}).fused_attention()) << "the engine reads no environment";
    ::setenv("BB_ATTENTION", "sometimes", 1);
    EXPECT_THROW(attention_kernel_from_environment(), Error);
    ::unsetenv("BB_ATTENTION");
    EXPECT_EQ(attention_kernel_from_environment(), AttentionKernel::automatic);
    // ... and reaches the engines through the defaults of their options
    set_engine_environment({AttentionKernel::fused, 0});
    EXPECT_TRUE(BertPretrainer(table, Plan{2, 9, 2}).fused_attention());
    EXPECT_FALSE(BertPretrainer(table, Plan{2, 9, 2}, with(AttentionKernel::materialized)).fused_attention())
        << "an explicit choice wins";
    // a machine with room for the plan's activations (check_plan's least) but under 4x the
    // materialized probabilities
    const auto least = static_cast<size_t>(detail::plan_activation_bytes(Plan{2, 9, 2}, table.config()));
    set_engine_environment({AttentionKernel::automatic, least});
    EXPECT_TRUE(BertPretrainer(table, Plan{2, 9, 2}).fused_attention());
    set_engine_environment({});
    // seq 300: the probabilities (B·NH·T² floats per layer, + mask bytes and a scratch) are gone
    const BertPretrainer mat(table, Plan{2, 300, 2}, with(AttentionKernel::materialized));
    const BertPretrainer fus(table, Plan{2, 300, 2}, with(AttentionKernel::fused));
    EXPECT_TRUE(fus.fused_attention());
    EXPECT_FALSE(BertPretrainer(table, Plan{2, 300, 2}).fused_attention());  // a few MB: materialized
    const size_t probs_bytes = size_t(2) * 3 * 300 * 300 * sizeof(float);
    EXPECT_LT(fus.arena_bytes() + 2 * probs_bytes, mat.arena_bytes());
}

}  // namespace
}  // namespace bertbench::model
