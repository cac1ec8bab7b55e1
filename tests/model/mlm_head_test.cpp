// The pretrainer's MLM output head (fused bias, loss, and in bf16 the one-pass backward) against a
// straightforward computation in double from the engine's own logits, fp32 and bf16, at odd sizes:
// 41 masked positions (not a multiple of the 16-row chunk), a vocabulary of 2,053 (not a multiple
// of 8 or 16; above the 2,048-column segment), some masked_weights 0.
// Tolerances: loss rtol 1e-5 (fp32 log-sum-exp); output_bias gradient atol 1e-8 + rtol 1e-4 (fp32
// exp and sums; it never passes through bf16); logits − logits without bias = bias to fp32
// rounding of the logits (atol 1e-5·max|z|).
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <random>
#include <vector>

#include "model/bert.hpp"
#include "model/param_table.hpp"
#include "ops/bf16.hpp"

namespace bertbench::model {
namespace {

BertConfig mlm_odd_config() {
    BertConfig c;
    c.vocab_size = 2053;
    c.hidden_size = 32;
    c.num_attention_heads = 2;
    c.intermediate_size = 64;
    c.num_hidden_layers = 1;
    c.max_position_embeddings = 64;
    c.hidden_dropout_prob = 0.f;
    c.attention_probs_dropout_prob = 0.f;
    return c;
}

Batch odd_batch(const BertConfig& c) {
    std::mt19937_64 rng(5);
    Batch b;
    const std::vector<int> lengths = {23, 40, 9, 31};
    b.batch_size = static_cast<int>(lengths.size());
    b.seq_offsets.push_back(0);
    for (int s = 0; s < b.batch_size; ++s) {
        const int len = lengths[static_cast<size_t>(s)], start = b.seq_offsets.back();
        for (int t = 0; t < len; ++t) {
            b.input_ids.push_back(static_cast<int32_t>(rng() % c.vocab_size));
            b.segment_ids.push_back(t < len / 2 ? 0 : 1);
        }
        b.seq_offsets.push_back(start + len);
        for (int p = 1; p <= 11 && p < len; ++p) {
            b.masked_index.push_back(start + p);
            // the last vocabulary entry once, to hit the ragged end
            b.masked_ids.push_back(b.masked_ids.empty() ? c.vocab_size - 1
                                                        : static_cast<int32_t>(rng() % c.vocab_size));
            b.masked_weights.push_back(b.masked_index.size() % 5 == 0 ? 0.0f : 1.0f);
            b.masked_seq.push_back(s);
        }
        b.next_sentence_labels.push_back(static_cast<int32_t>(rng() % 2));
    }
    return b;
}

class MlmHead : public ::testing::TestWithParam<ops::Precision> {};

TEST_P(MlmHead, LossAndBiasGradientMatchReference) {
    const BertConfig cfg = mlm_odd_config();
    const ParamTable table(cfg, Heads::pretraining);
    std::vector<float> params(table.total_floats());
    table.initialize(params, 3);
    for (float& x : params) x *= 4.0f;  // logits of a few units: a non-trivial softmax
    const size_t ob = table.at("cls/predictions/output_bias").offset;
    std::mt19937_64 rng(8);
    std::normal_distribution<float> nd(0.f, 0.5f);
    for (int v = 0; v < cfg.vocab_size; ++v) params[ob + v] = nd(rng);
    const Batch batch = odd_batch(cfg);
    const int P = batch.num_predictions(), V = cfg.vocab_size;
    ASSERT_EQ(P, 41);

    BertPretrainer e(table, Plan{batch.batch_size, 40, 11}, EngineOptions{GetParam()});
    const Losses out = e.forward(params, batch, true, 1, 1);
    const std::vector<float> z(e.mlm_logits().begin(), e.mlm_logits().end());
    std::vector<float> grads(params.size(), 0.f);
    e.backward(grads, params, batch);

    // the reference from the engine's logits, in double
    double num = 0, den = 0, correct = 0;
    std::vector<double> softmax(static_cast<size_t>(P) * V), ce(P);
    for (int p = 0; p < P; ++p) {
        const float* row = z.data() + static_cast<size_t>(p) * V;
        const int best = static_cast<int>(std::max_element(row, row + V) - row);
        double s = 0;
        for (int v = 0; v < V; ++v) s += std::exp(double(row[v]) - row[best]);
        for (int v = 0; v < V; ++v)
            softmax[static_cast<size_t>(p) * V + v] = std::exp(double(row[v]) - row[best]) / s;
        ce[p] = row[best] + std::log(s) - row[batch.masked_ids[p]];
        const double w = batch.masked_weights[p];
        num += w * ce[p];
        den += w;
        if (best == batch.masked_ids[p]) correct += w;
    }
    const double want_loss = num / (den + 1e-5);
    EXPECT_NEAR(out.mlm_loss, want_loss, 1e-5 * want_loss);
    EXPECT_DOUBLE_EQ(out.mlm_weight, den);
    EXPECT_DOUBLE_EQ(out.mlm_correct, correct);

    size_t bad = 0, worst = 0;
    double worst_excess = -1;
    for (int v = 0; v < V; ++v) {
        double want = 0;
        for (int p = 0; p < P; ++p)
            want += batch.masked_weights[p] / (den + 1e-5) *
                    (softmax[static_cast<size_t>(p) * V + v] - (v == batch.masked_ids[p] ? 1 : 0));
        const double excess = std::abs(grads[ob + v] - want) - (1e-8 + 1e-4 * std::abs(want));
        bad += excess > 0;
        if (excess > worst_excess) worst_excess = excess, worst = static_cast<size_t>(v);
    }
    EXPECT_EQ(bad, 0u) << "output_bias gradient: worst column " << worst << " off by "
                       << worst_excess << " beyond tolerance";

    // the bias is in the logits: the same forward with a zero bias differs by the bias
    std::vector<float> nobias = params;
    std::fill_n(nobias.begin() + static_cast<long>(ob), V, 0.f);
    e.forward(nobias, batch, true, 1, 1);
    const std::vector<float> z0(e.mlm_logits().begin(), e.mlm_logits().end());
    float zmax = 0;
    for (float x : z) zmax = std::max(zmax, std::abs(x));
    size_t bad_bias = 0;
    for (int p = 0; p < P; ++p)
        for (int v = 0; v < V; ++v) {
            const size_t i = static_cast<size_t>(p) * V + v;
            bad_bias += !(std::abs(z[i] - z0[i] - params[ob + v]) <= 1e-5f * zmax);
        }
    EXPECT_EQ(bad_bias, 0u) << "logits − logits(bias 0) != bias";
}

INSTANTIATE_TEST_SUITE_P(Precisions, MlmHead,
                         ::testing::Values(ops::Precision::fp32, ops::Precision::bf16),
                         [](const auto& p) { return std::string(ops::precision_name(p.param)); });

}  // namespace
}  // namespace bertbench::model
