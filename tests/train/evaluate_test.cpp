// Pretraining evaluation (train/evaluate.hpp) against an independent computation in this test:
// per-position softmax cross-entropy and argmax from the engine's mlm_logits()/nsp_logits(), and
// the engine's own Losses (mlm_correct, mlm_weight, mlm_loss), summed over the eval100 golden set
// (real MLPerf-schema records, seq 128, 20 predictions; last batch partial).
#include <gtest/gtest.h>

#include <cmath>
#include <cstdlib>
#include <string>
#include <vector>

#include "data/pretrain_reader.hpp"
#include "model/bert.hpp"
#include "test_util.hpp"
#include "train/evaluate.hpp"

namespace bertbench::train {
namespace {
using testing::shared_dir;

model::BertConfig small_config() {
    model::BertConfig c;
    c.hidden_size = 32;
    c.num_hidden_layers = 1;
    c.num_attention_heads = 2;
    c.intermediate_size = 64;
    return c;  // vocab 30522: the golden records use the uncased BERT vocab
}

// |got - want| <= atol + rtol*|want|, with a message naming the value.
::testing::AssertionResult close(const char* name, double got, double want, double atol,
                                 double rtol) {
    if (std::abs(got - want) <= atol + rtol * std::abs(want)) return ::testing::AssertionSuccess();
    return ::testing::AssertionFailure() << name << ": got " << got << ", want " << want
                                         << " (atol " << atol << ", rtol " << rtol << ")";
}

TEST(Evaluate, MatchesIndependentStreamingSumsSlow) {
    const model::BertConfig c = small_config();
    const model::ParamTable table(c, model::Heads::pretraining);
    std::vector<float> params(table.total_floats());
    table.initialize(params, 7);
    model::BertPretrainer engine(table, {8, 128, 20});
    const std::string file = shared_dir() + "/golden/eval_pick/public_128_eval100.tfrecord";

    EvalOptions eo;
    eo.files = {file};
    eo.batch_size = 8;
    eo.max_eval_steps = 0;
    const EvalMetrics got = evaluate(engine, params, c.vocab_size, eo);

    // Independent pass: same records, our own softmax/argmax in double from the logits.
    data::PretrainReaderConfig rc;
    rc.files = {file};
    rc.batch_size = 8;
    rc.training = false;
    rc.shuffle_buffer = 0;
    data::PretrainReader reader(rc);
    model::Batch b;
    double w_sum = 0, ce_sum = 0, correct = 0, nsp_ce = 0, nsp_ok = 0, eng_correct = 0,
           eng_w = 0, eng_loss = 0, total_loss = 0;
    int64_t examples = 0, batches = 0, predictions = 0;
    while (reader.next(b)) {
        const model::Losses l = engine.forward(params, b, false, 0, 0);
        eng_correct += l.mlm_correct;
        eng_w += l.mlm_weight;
        eng_loss += l.mlm_loss * (l.mlm_weight + 1e-5);  // engine: Σw·CE / (Σw + 1e-5)
        const auto logits = engine.mlm_logits();
        const double batch_w = w_sum, batch_ce = ce_sum, batch_nsp = nsp_ce;
        const int64_t batch_examples = examples;
        for (int p = 0; p < b.num_predictions(); ++p) {
            const float* row = logits.data() + static_cast<size_t>(p) * c.vocab_size;
            double mx = row[0];
            int arg = 0;
            for (int v = 1; v < c.vocab_size; ++v)
                if (row[v] > mx) mx = row[v], arg = v;
            double s = 0;
            for (int v = 0; v < c.vocab_size; ++v) s += std::exp(row[v] - mx);
            const double w = b.masked_weights[p];
            ce_sum += w * (std::log(s) + mx - row[b.masked_ids[p]]);
            correct += w * (arg == b.masked_ids[p]);
            w_sum += w;
            predictions += w != 0;
        }
        const auto nsp = engine.nsp_logits();
        for (int i = 0; i < b.batch_size; ++i) {
            const double a = nsp[2 * i], z = nsp[2 * i + 1];
            const double m = std::max(a, z);
            const double lse = m + std::log(std::exp(a - m) + std::exp(z - m));
            const int label = b.next_sentence_labels[i];
            nsp_ce += lse - (label == 0 ? a : z);
            nsp_ok += ((z > a ? 1 : 0) == label);
            ++examples;
        }
        // The Estimator's `loss`: this batch's model_fn total_loss, averaged over the batches.
        total_loss += (ce_sum - batch_ce) / (w_sum - batch_w + 1e-5) +
                      (nsp_ce - batch_nsp) / static_cast<double>(examples - batch_examples);
        ++batches;
    }
    ASSERT_EQ(examples, 100);
    ASSERT_EQ(batches, 13);  // 12 x 8 + 4: a partial last batch is included
    EXPECT_EQ(got.examples, examples);
    EXPECT_TRUE(close("masked_lm_accuracy", got.masked_lm_accuracy, correct / w_sum, 0, 1e-12));
    EXPECT_TRUE(close("masked_lm_accuracy vs engine", got.masked_lm_accuracy,
                      eng_correct / eng_w, 0, 1e-12));
    // The eval sums the engine's rows, whose log-sum-exp is float (as TF's fp32 log_softmax):
    // within a few float ulps of the double reference here.
    EXPECT_TRUE(close("masked_lm_loss", got.masked_lm_loss, ce_sum / w_sum, 0, 2e-6));
    EXPECT_TRUE(close("masked_lm_loss vs engine", got.masked_lm_loss, eng_loss / eng_w, 1e-5,
                      1e-5));
    EXPECT_TRUE(close("next_sentence_loss", got.next_sentence_loss, nsp_ce / examples, 0, 2e-6));
    EXPECT_EQ(got.predictions, predictions);
    EXPECT_TRUE(close("next_sentence_accuracy", got.next_sentence_accuracy, nsp_ok / examples, 0,
                      1e-12));
    EXPECT_TRUE(close("loss", got.loss, total_loss / static_cast<double>(batches), 0, 2e-6));
    EXPECT_GT(got.masked_lm_loss, 5.0);  // random init over a 30522-word vocabulary
}

TEST(Evaluate, MaxEvalStepsLimitsBatches) {
    const model::BertConfig c = small_config();
    const model::ParamTable table(c, model::Heads::pretraining);
    std::vector<float> params(table.total_floats());
    table.initialize(params, 7);
    model::BertPretrainer engine(table, {4, 128, 20});
    EvalOptions eo;
    eo.files = {shared_dir() + "/golden/eval_pick/public_128_eval100.tfrecord"};
    eo.batch_size = 4;
    eo.max_eval_steps = 2;
    const EvalMetrics m = evaluate(engine, params, c.vocab_size, eo);
    EXPECT_EQ(m.examples, 8);
    EXPECT_GT(m.predictions, 8 * 10);  // about 15% of the tokens of 8 sequences
}

TEST(Evaluate, EmptyAccumulatorIsZeroLikeDivNoNan) {
    EvalAccumulator acc;
    EXPECT_EQ(acc.result().masked_lm_accuracy, 0.0);  // div_no_nan
    EXPECT_EQ(acc.result().examples, 0);
}

}  // namespace
}  // namespace bertbench::train
