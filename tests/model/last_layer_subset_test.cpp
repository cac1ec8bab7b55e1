// EngineOptions::last_layer_subset: the last layer's dense half on the rows the pretraining heads
// read ([CLS] rows, masked positions) gives the losses, logits and every gradient of the engine that
// runs it on every row — in double to 1e-12 (only the order of sums differs), in fp32 to fp32
// rounding (atol 1e-6, rtol 1e-4) — with the same dropout masks; where those rows are not fewer
// than the batch's, every row as without it, bit for bit; on a backend's own memory the same bits
// as on the CPU's; and the span head refuses it.
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <vector>

#include "../backend/guarded_backend.hpp"
#include "../ops/check.hpp"
#include "core/error.hpp"
#include "model/bert.hpp"
#include "model/cost.hpp"
#include "tiny_model.hpp"

namespace bertbench::model {
namespace {

using bertbench::testing::make_params;
using bertbench::testing::tiny_batch;
using bertbench::testing::tiny_config;

template <typename T>
struct StepRun {
    Losses losses;
    std::vector<T> grads, mlm_logits, nsp_logits, sequence;
    std::vector<std::vector<uint8_t>> masks;
};

template <typename T>
StepRun<T> train_step(const BertConfig& c, const Batch& batch, bool subset,
                      ops::Precision precision = ops::Precision::fp32,
                      AttentionKernel attention = AttentionKernel::materialized) {
    const ParamTable table(c, Heads::pretraining);
    EngineOptions o{precision};
    o.attention = attention;
    o.last_layer_subset = subset;
    BasicBertPretrainer<T> model(table, Plan{4, 11, 3}, o);
    const std::vector<T> params = make_params<T>(table, 5);
    StepRun<T> r;
    r.losses = model.forward(params, batch, true, 1234, 7);
    r.grads.assign(params.size(), T(0.5));  // the backward accumulates
    model.backward(r.grads, params, batch);
    r.mlm_logits.assign(model.mlm_logits().begin(), model.mlm_logits().end());
    r.nsp_logits.assign(model.nsp_logits().begin(), model.nsp_logits().end());
    r.sequence.assign(model.sequence_output().begin(), model.sequence_output().end());
    for (int l = 0; l < c.num_hidden_layers; ++l)
        for (const auto kind : {DropoutSite::attention_output, DropoutSite::output, DropoutSite::attention_probs}) {
            const auto m = model.dropout_mask({kind, l});
            r.masks.emplace_back(m.begin(), m.end());
        }
    return r;
}

// The rows of x (N, H) the subset's output holds: [CLS] of each sequence, then the masked ones.
template <typename T>
std::vector<T> head_rows(const std::vector<T>& x, const Batch& b, int H) {
    std::vector<int> rows(b.seq_offsets.begin(), b.seq_offsets.end() - 1);
    rows.insert(rows.end(), b.masked_index.begin(), b.masked_index.end());
    std::vector<T> out;
    for (const int r : rows) out.insert(out.end(), x.begin() + r * H, x.begin() + (r + 1) * H);
    return out;
}

template <typename T>
void expect_same_step(const StepRun<T>& sub, const StepRun<T>& all, const Batch& batch, int H, double atol, double rtol) {
    EXPECT_NEAR(sub.losses.total, all.losses.total, atol + rtol * std::abs(all.losses.total));
    EXPECT_EQ(sub.losses.mlm_correct, all.losses.mlm_correct);
    EXPECT_EQ(sub.losses.nsp_correct, all.losses.nsp_correct);
    EXPECT_TRUE(bertbench::testing::all_close("grads", sub.grads, all.grads, atol, rtol));
    EXPECT_TRUE(bertbench::testing::all_close("mlm logits", sub.mlm_logits, all.mlm_logits, atol, rtol));
    EXPECT_TRUE(bertbench::testing::all_close("nsp logits", sub.nsp_logits, all.nsp_logits, atol, rtol));
    EXPECT_TRUE(bertbench::testing::all_close("sequence output rows", sub.sequence, head_rows(all.sequence, batch, H), atol, rtol));
    EXPECT_EQ(sub.masks, all.masks);
}

TEST(LastLayerSubset, SameStepAsEveryRowInDoubleAndFloat) {
    for (const int layers : {1, 3}) {
        BertConfig c = tiny_config();
        c.num_hidden_layers = layers;
        const Batch batch = tiny_batch();  // 3 sequences, 5 masked of 17 rows: the last layer on 8
        SCOPED_TRACE("layers " + std::to_string(layers));
        expect_same_step(train_step<double>(c, batch, true), train_step<double>(c, batch, false), batch,
                         c.hidden_size, 1e-12, 1e-10);
        expect_same_step(train_step<float>(c, batch, true), train_step<float>(c, batch, false), batch,
                         c.hidden_size, 1e-6, 1e-4);
    }
    // bf16 operands: the same products on the same rows, so the same to fp32 rounding as well; and
    // the fused attention kernel, whose backward reads the attention's output of every row
    const Batch batch = tiny_batch();
    expect_same_step(train_step<float>(tiny_config(), batch, true, ops::Precision::bf16),
                     train_step<float>(tiny_config(), batch, false, ops::Precision::bf16), batch,
                     tiny_config().hidden_size, 1e-6, 1e-4);
    const auto fused = AttentionKernel::fused;
    expect_same_step(train_step<float>(tiny_config(), batch, true, ops::Precision::fp32, fused),
                     train_step<float>(tiny_config(), batch, false, ops::Precision::fp32, fused), batch,
                     tiny_config().hidden_size, 1e-6, 1e-4);
    // and the gradient is not the trivial one
    const StepRun<double> r = train_step<double>(tiny_config(), batch, true);
    double moved = 0;
    for (const double g : r.grads) moved += std::abs(g - 0.5);
    EXPECT_GT(moved, 1e-3);
}

TEST(LastLayerSubset, WhereTheHeadsReadEveryRowItIsTheFullComputation) {
    Batch b = tiny_batch();  // 3 sequences of 1, 2 and 1 rows, 1 masked: B + P = 4 = N
    b.seq_offsets = {0, 1, 3, 4};
    b.input_ids.resize(4);
    b.segment_ids.resize(4);
    b.masked_index = {2};
    b.masked_ids = {5};
    b.masked_weights = {1.f};
    b.masked_seq = {1};
    const StepRun<float> sub = train_step<float>(tiny_config(), b, true), all = train_step<float>(tiny_config(), b, false);
    EXPECT_EQ(sub.losses.total, all.losses.total);
    EXPECT_EQ(0, std::memcmp(sub.grads.data(), all.grads.data(), sub.grads.size() * sizeof(float)));
    EXPECT_EQ(sub.sequence, all.sequence);
}

TEST(LastLayerSubset, OnABackendsOwnMemoryTheCpusBits) {
    const ParamTable table(tiny_config(), Heads::pretraining);
    const Batch batch = tiny_batch();
    const std::vector<float> params = make_params<float>(table, 5);
    testing::GuardedBackend guarded;
    EngineOptions o;
    o.last_layer_subset = true;
    BertPretrainer cpu(table, Plan{4, 11, 3}, o);
    o.backend = &guarded;
    BertPretrainer dev(table, Plan{4, 11, 3}, o);
    const backend::Buffer<float> p(guarded, std::span<const float>(params));
    backend::Buffer<float> g(guarded, params.size());
    g.zero();
    std::vector<float> want(params.size(), 0.f);
    EXPECT_EQ(dev.forward(p.span(), batch, true, 3, 1).total, cpu.forward(params, batch, true, 3, 1).total);
    dev.backward(g.span(), p.span(), batch);
    cpu.backward(want, params, batch);
    EXPECT_EQ(0, std::memcmp(g.download().data(), want.data(), want.size() * sizeof(float)));
}

TEST(LastLayerSubset, TheSpanHeadRefusesIt) {
    EngineOptions o;
    o.last_layer_subset = true;
    try {
        BertSquad squad(ParamTable(tiny_config(), Heads::squad), Plan{3, 9, 0}, o);
        ADD_FAILURE() << "expected an Error";
    } catch (const Error& e) {
        EXPECT_NE(std::string(e.what()).find("last_layer_subset"), std::string::npos) << e.what();
    }
}

}  // namespace
}  // namespace bertbench::model
