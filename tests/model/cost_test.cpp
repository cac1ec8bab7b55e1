// The engine's op list (model/cost.hpp): labels, tags and costs are one table, and every section
// the engine profiles carries its op's tag, so that nothing needs to parse a label; the model
// FLOPs against a hand count (with and without the last layer's subset of rows); ParamInfo's placement (layer, embedding) against the names.
#include <gtest/gtest.h>

#include <set>
#include <string>

#include "core/profile.hpp"
#include "model/bert.hpp"
#include "model/cost.hpp"
#include "tiny_model.hpp"

namespace bertbench::model {
namespace {

TEST(OpList, LabelsAreDistinctAndTagsRoundTrip) {
    std::set<std::string> labels;
    int labelled = 0;
    for (int o = 0; o < kNumOps; ++o)
        for (const Pass pass : {Pass::forward, Pass::backward, Pass::step}) {
            const Op op = static_cast<Op>(o);
            const int tag = op_tag(op, pass);
            EXPECT_EQ(op_from_tag(tag), std::make_pair(op, pass));
            const bool step_op = op == Op::zero_grads || op == Op::clip_accumulate || op == Op::optimizer;
            if (step_op != (pass == Pass::step)) continue;
            if (op == Op::weight_copies && pass != Pass::forward) continue;
            ++labelled;
            EXPECT_TRUE(labels.insert(op_label(op, pass)).second) << op_label(op, pass);
        }
    EXPECT_EQ(labelled, static_cast<int>(labels.size()));
    EXPECT_THROW(op_label(Op::zero_grads, Pass::forward), Error);  // no such (op, pass)
}

// A profiled forward and backward of each model: every section is one of the op list's, tagged.
TEST(OpList, EverySectionTheEngineProfilesIsTagged) {
    const BertConfig c = testing::tiny_config();
    const Batch b = testing::tiny_batch();
    const ParamTable table(c, Heads::pretraining);
    const std::vector<float> params = testing::make_params<float>(table, 3);
    std::vector<float> grads(params.size(), 0.f);
    BertPretrainer m(table, Plan{3, 16, 5});
    profile::enable(true);
    m.forward(params, b, true, 1, 2);
    m.backward(grads, params, b);
    profile::enable(false);
    std::set<std::string> seen;
    for (const profile::Entry& e : profile::entries()) {
        seen.insert(e.label);
        ASSERT_GE(e.tag, 0) << e.label;
        const auto [op, pass] = op_from_tag(e.tag);
        EXPECT_EQ(e.label, op_label(op, pass));
    }
    for (const char* want : {"gemm qkv fwd", "attention bwd", "loss fwd", "gemm mlm-decoder bwd", "embeddings bwd"})
        EXPECT_TRUE(seen.count(want)) << want;
}

TEST(OpList, ForwardFlopsAreTheHandCount) {
    const BertConfig c = testing::tiny_config();
    Batch b = testing::tiny_batch();
    const double H = c.hidden_size, I = c.intermediate_size, V = c.vocab_size, L = c.num_hidden_layers;
    const double N = 17, B = 3, P = 5, t2 = 5 * 5 + 9 * 9 + 3 * 3;
    const double encoder = L * (2 * N * (4 * H * H + 2 * H * I) + 4 * t2 * H);
    EXPECT_DOUBLE_EQ(forward_flops(c, b, Heads::pretraining),
                     encoder + 2 * B * H * H + 2 * B * H * 2 + 2 * P * H * H + 2 * P * H * V);
    EXPECT_DOUBLE_EQ(forward_flops(c, b, Heads::squad), encoder + 2 * N * H * 2);
    EXPECT_DOUBLE_EQ(forward_flops(c, b, Heads::none), encoder);
    // last_layer_subset: the last layer's attention output and FFN on B + P = 8 rows, not 17
    const double subset = encoder - 2 * (N - B - P) * (H * H + 2 * H * I);
    EXPECT_DOUBLE_EQ(last_layer_rows(b, true), B + P);
    EXPECT_DOUBLE_EQ(forward_flops(c, b, Heads::none, true), subset);
    EXPECT_DOUBLE_EQ(op_cost(Op::gelu, Pass::forward, c, b, 0, true).flops, 10 * ((L - 1) * N + B + P) * I);
    // int8: the dense halves' LayerNorms, GELU and residuals in the products' epilogues, no dropout
    const auto int8 = [&](Op op) { return op_cost(op, Pass::forward, c, b, 0, false, ops::Precision::int8); };
    EXPECT_DOUBLE_EQ(int8(Op::layernorm).bytes, 8 * N * H);  // the embeddings'
    EXPECT_DOUBLE_EQ(op_cost(Op::layernorm, Pass::forward, c, b, 0).bytes, 8 * (2 * L + 1) * N * H);
    EXPECT_EQ(int8(Op::gelu).flops + int8(Op::dropout_residual).bytes, 0);
    EXPECT_DOUBLE_EQ(int8(Op::gemm_ffn_in).flops, op_cost(Op::gemm_ffn_in, Pass::forward, c, b, 0).flops);
    EXPECT_DOUBLE_EQ(last_layer_rows(b, false), N);
}

TEST(ParamTablePlacement, LayerAndEmbeddingAgreeWithTheNames) {
    const ParamTable t(testing::tiny_config(), Heads::pretraining);
    for (const ParamInfo& p : t.entries()) {
        EXPECT_EQ(p.embedding, p.name.starts_with("bert/embeddings/")) << p.name;
        const std::string layer = p.layer >= 0 ? "bert/encoder/layer_" + std::to_string(p.layer) + "/" : "";
        if (p.layer >= 0)
            EXPECT_TRUE(p.name.starts_with(layer)) << p.name;
        else
            EXPECT_FALSE(p.name.starts_with("bert/encoder/")) << p.name;
    }
}

}  // namespace
}  // namespace bertbench::model
