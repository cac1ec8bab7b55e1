// The engine with bf16 GEMMs (EngineOptions::precision): native and emulated paths agree, bf16
// is really applied (results move away from fp32 by bf16's precision, not more), the bf16 copy of
// the weights follows weights_changed() and a new buffer, forward-only plans give the same
// output. Parity with PyTorch's autocast is in parity_test.cpp (Parity.Bf16MatchesPyTorchAutocast).
#include <gtest/gtest.h>

#include <cmath>
#include <random>
#include <vector>

#include "core/error.hpp"
#include "model/bert.hpp"
#include "model/param_table.hpp"
#include "tiny_model.hpp"

namespace bertbench::model {
namespace {

using testing::random_batch;
using testing::rel_l2;
using testing::scaled_params;
using testing::small_config;

struct Outcome {
    double loss = 0;
    std::vector<float> logits, grads;
};

Outcome run(const ParamTable& table, const std::vector<float>& params, const Batch& batch,
        ops::Precision precision, bool training) {
    BertPretrainer e(table, Plan{batch.batch_size, 40, 5}, EngineOptions{precision});
    Outcome r;
    r.loss = e.forward(params, batch, training, 99, 3).total;
    r.logits.assign(e.mlm_logits().begin(), e.mlm_logits().end());
    r.grads.assign(params.size(), 0.f);
    e.backward(r.grads, params, batch);
    return r;
}

class Bf16Engine : public ::testing::Test {
protected:
    BertConfig cfg = small_config();
    ParamTable table{cfg, Heads::pretraining};
    std::vector<float> params = scaled_params(table, 3);  // gradients away from the initialisation's scale
    Batch batch = random_batch(cfg, {17, 40, 9, 31}, 5, 11);
    void TearDown() override { ops::set_bf16_emulation(false); }
};

// bf16 moves results by about bf16's precision (2^-8 relative), no more and not zero.
TEST_F(Bf16Engine, DiffersFromFp32ByBf16Precision) {
    const Outcome f = run(table, params, batch, ops::Precision::fp32, true);
    const Outcome h = run(table, params, batch, ops::Precision::bf16, true);
    const double dl = std::abs(h.loss - f.loss) / std::abs(f.loss);
    const double dz = rel_l2(h.logits, f.logits), dg = rel_l2(h.grads, f.grads);
    std::printf("[bf16] vs fp32: loss %.2e, logits %.2e, gradients %.2e (relative)\n", dl, dz, dg);
    EXPECT_GT(dz, 1e-5) << "bf16 results equal fp32's: the bf16 path did not run";
    EXPECT_LT(dl, 1e-2);
    EXPECT_LT(dz, 3e-2);
    EXPECT_LT(dg, 5e-2);
}

// A model whose FFN is narrower than its hidden size (intermediate_size < hidden_size): the
// backward's bf16 scratch holds bf16(dy) at its start and bf16(x)ᵀ at its end, N·OUT + IN·N
// values, which a square layer (attention output, Q/K/V: 2·N·H) needs more of than N·(H + I); the
// transposed input overwrote dy (gradient norm 4.0 against fp32's 2.5 on a 48-wide model with an
// FFN of 17). Gradients stay within bf16's precision of fp32, as for any other shape.
TEST(Bf16EngineShapes, FfnNarrowerThanTheHiddenSize) {
    BertConfig c = small_config(2);
    c.intermediate_size = 24;  // < hidden 64
    const ParamTable t{c, Heads::pretraining};
    const std::vector<float> p = scaled_params(t, 3);
    const Batch b = random_batch(c, {40, 40, 40, 40}, 5, 11);  // as long as the plan's sequences: a full scratch
    const Outcome f = run(t, p, b, ops::Precision::fp32, true);
    const Outcome h = run(t, p, b, ops::Precision::bf16, true);
    EXPECT_GT(rel_l2(h.logits, f.logits), 1e-5) << "bf16 results equal fp32's: the bf16 path did not run";
    EXPECT_LT(std::abs(h.loss - f.loss) / std::abs(f.loss), 1e-2);
    EXPECT_LT(rel_l2(h.grads, f.grads), 5e-2);
}

// Native oneDNN bf16 kernels and the emulation (widen to fp32, sgemm) multiply the same bf16
// values; they differ only by fp32 accumulation order and the bf16 roundings of later operands
// (P', dS) that it flips: relative L2 3e-3, against ~1e-2 between bf16 and fp32.
TEST_F(Bf16Engine, NativeAndEmulatedAgree) {
    if (!ops::bf16_native()) GTEST_SKIP() << "no native bf16 on this CPU (" << ops::native_precisions() << ")";
    const Outcome n = run(table, params, batch, ops::Precision::bf16, true);
    ops::set_bf16_emulation(true);
    const Outcome e = run(table, params, batch, ops::Precision::bf16, true);
    EXPECT_NEAR(n.loss, e.loss, 1e-4 * std::abs(e.loss));
    EXPECT_LT(rel_l2(n.logits, e.logits), 3e-3);
    EXPECT_LT(rel_l2(n.grads, e.grads), 3e-3);
}

// The bf16 weight copy (and an inference engine's packed weights) are refreshed after
// weights_changed() and for a different buffer: results equal those of a fresh engine on the new
// weights, bit for bit.
TEST_F(Bf16Engine, WeightCopyFollowsTheParameters) {
    for (const bool forward_only : {false, true}) {
        const Plan plan{batch.batch_size, 40, 5, forward_only};
        BertPretrainer e(table, plan, EngineOptions{ops::Precision::bf16});
        std::vector<float> p = params;
        const double before = e.forward(p, batch, false, 0, 0).total;
        for (float& x : p) x *= 1.5f;
        e.weights_changed();
        const double after = e.forward(p, batch, false, 0, 0).total;
        EXPECT_NE(before, after);
        EXPECT_EQ(after, BertPretrainer(table, plan, EngineOptions{ops::Precision::bf16})
                             .forward(p, batch, false, 0, 0)
                             .total)
            << "forward_only " << forward_only;
        const std::vector<float> q = params;  // another buffer, the original values
        EXPECT_EQ(e.forward(q, batch, false, 0, 0).total, before) << "forward_only " << forward_only;
    }
}

TEST_F(Bf16Engine, ForwardOnlyPlanGivesTheSameOutput) {
    BertPretrainer full(table, Plan{batch.batch_size, 40, 5}, EngineOptions{ops::Precision::bf16});
    BertPretrainer fwd(table, Plan{batch.batch_size, 40, 5, true}, EngineOptions{ops::Precision::bf16});
    EXPECT_EQ(full.forward(params, batch, false, 0, 0).total, fwd.forward(params, batch, false, 0, 0).total);
    const auto a = full.mlm_logits(), b = fwd.mlm_logits();
    ASSERT_EQ(a.size(), b.size());
    for (size_t i = 0; i < a.size(); ++i) ASSERT_EQ(a[i], b[i]) << i;
    EXPECT_GT(full.arena_bytes(), fwd.arena_bytes());
}

// A bf16 training engine keeps each layer's GEMM inputs (x, q, k, v, ctx, x1, g) in bf16 only,
// their fp32 forms shared by the layers: with 6 layers that saves more than the bf16 weight copy
// and the scratch cost, so its arena is smaller than fp32's; and its results still agree with the
// emulated kernels and stay within bf16 precision of fp32 with that many layers sharing buffers.
TEST(Bf16EngineLayers, KeptActivationsAreBf16) {
    BertConfig c = small_config();
    c.num_hidden_layers = 6;
    const ParamTable table(c, Heads::pretraining);
    std::vector<float> params(table.total_floats());
    table.initialize(params, 5);
    const Batch batch = random_batch(c, {40, 23, 40, 12}, 5, 13);
    const Plan plan{batch.batch_size, 40, 5};
    // The materialized attention kernel on both sides, whatever BB_ATTENTION says: the fused one
    // saves no probs, and its bf16 engine keeps an fp32 ctx per layer, so the arenas compare
    // differently there.
    const auto mat = AttentionKernel::materialized;
    const BertPretrainer f(table, plan, EngineOptions{ops::Precision::fp32, mat});
    const BertPretrainer h(table, plan, EngineOptions{ops::Precision::bf16, mat});
    EXPECT_LT(h.arena_bytes(), f.arena_bytes());
    const Outcome of = run(table, params, batch, ops::Precision::fp32, true);
    const Outcome oh = run(table, params, batch, ops::Precision::bf16, true);
    EXPECT_GT(rel_l2(oh.logits, of.logits), 1e-5);
    EXPECT_LT(rel_l2(oh.logits, of.logits), 3e-2);
    EXPECT_LT(rel_l2(oh.grads, of.grads), 5e-2);
    if (ops::bf16_native()) {
        ops::set_bf16_emulation(true);
        const Outcome oe = run(table, params, batch, ops::Precision::bf16, true);
        ops::set_bf16_emulation(false);
        EXPECT_LT(rel_l2(oh.logits, oe.logits), 3e-3);
        EXPECT_LT(rel_l2(oh.grads, oe.grads), 3e-3);
    }
}

TEST(Bf16EngineDouble, IsAnError) {
    const ParamTable table(small_config(), Heads::pretraining);
    EXPECT_THROW(BertPretrainerF64(table, Plan{2, 16, 2}, EngineOptions{ops::Precision::bf16}),
                 Error);
}

}  // namespace
}  // namespace bertbench::model
