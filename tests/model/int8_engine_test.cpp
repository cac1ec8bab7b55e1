// The int8 inference engine (EngineOptions::precision int8, ops/int8.hpp): its dense layers really
// run in int8 (results move away from fp32, by about int8's step and no more), the MLM predictions
// stay those of fp32, the quantized weights follow weights_changed() and a new buffer, and a
// training plan or the double engine is an Error. Each dense layer's error against fp32 is bounded
// by its scales in tests/backend/backend_ops_int8_test.cpp.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <random>
#include <vector>

#include "core/error.hpp"
#include "model/bert.hpp"
#include "model/param_table.hpp"
#include "ops/bf16.hpp"
#include "ops/int8.hpp"
#include "tiny_model.hpp"

namespace bertbench::model {
namespace {

using testing::random_batch;
using testing::rel_l2;
using testing::scaled_params;
using testing::small_config;

struct InferOutcome {
    double loss = 0;
    std::vector<float> logits, sequence;
    size_t bytes = 0;  // arena_bytes(): activations, scratch, weight copies
};

InferOutcome infer(const ParamTable& table, const std::vector<float>& params, const Batch& batch,
                   ops::Precision p) {
    BertPretrainer e(table, Plan{batch.batch_size, 40, 5, true}, EngineOptions{p});
    InferOutcome r;
    r.loss = e.forward(params, batch, false, 0, 0).total;
    r.logits.assign(e.mlm_logits().begin(), e.mlm_logits().end());
    r.sequence.assign(e.sequence_output().begin(), e.sequence_output().end());
    r.bytes = e.arena_bytes();
    return r;
}

class Int8Engine : public ::testing::Test {
protected:
    BertConfig cfg = small_config(3);
    ParamTable table{cfg, Heads::pretraining};
    std::vector<float> params = scaled_params(table, 3);  // activations well away from the initialisation's scale
    Batch batch = random_batch(cfg, {17, 40, 9, 31}, 5, 11);
};

// One int8 step is 1/127 of a row's (or column's) largest value: each dense layer's output moves by
// well under 1 % relative (RMS), and three layers of them stay within a few percent; the predicted
// tokens (argmax of each masked position's logits) barely change. Without VNNI the weights have 7
// bits (int8_weight_max() 63, ops/int8.hpp): their step is twice as large, and so are the bounds
// (measured on an AVX2 Zen 3: logits 3.2e-2, sequence output 2.1e-2).
TEST_F(Int8Engine, DiffersFromFp32ByInt8Precision) {
    const InferOutcome f = infer(table, params, batch, ops::Precision::fp32);
    const InferOutcome q = infer(table, params, batch, ops::Precision::int8);
    const double dz = rel_l2(q.logits, f.logits), dx = rel_l2(q.sequence, f.sequence);
    const int V = cfg.vocab_size, P = static_cast<int>(f.logits.size()) / V;
    int same = 0;
    for (int p = 0; p < P; ++p) {
        const auto arg = [&](const std::vector<float>& z) {
            return std::max_element(z.begin() + p * V, z.begin() + (p + 1) * V) - (z.begin() + p * V);
        };
        same += arg(q.logits) == arg(f.logits);
    }
    std::printf("[int8] vs fp32: sequence output %.2e, logits %.2e (relative L2), loss %.4f vs %.4f, "
                "%d of %d predictions the same\n", dx, dz, q.loss, f.loss, same, P);
    const double steps = 127.0 / ops::int8_weight_max();  // 1, or 2 with 7-bit weights
    EXPECT_GT(dx, 1e-4) << "int8 results equal fp32's: the int8 path did not run";
    EXPECT_LT(dx, 3e-2 * steps);
    EXPECT_LT(dz, 3e-2 * steps);
    EXPECT_NEAR(q.loss, f.loss, 1e-2 * steps * f.loss);
    EXPECT_GE(same, P - P / 10);
}

// A model whose FFN is narrower than its hidden size (intermediate_size < hidden_size): the
// attention's context is quantized into the buffer that then takes FFN-in's output, which was
// sized for the FFN alone (an overflow of N·(H − I) bytes: glibc's "free(): invalid next size"
// at the end of `eval --dtype=int8`, and heap damage in between). Its int8 results stay within
// int8's precision of fp32, as the others'.
TEST(Int8EngineShapes, FfnNarrowerThanTheHiddenSize) {
    BertConfig c = small_config(2);
    c.intermediate_size = 24;  // < hidden 64
    const ParamTable t{c, Heads::pretraining};
    const std::vector<float> p = scaled_params(t, 5);
    const Batch b = random_batch(c, {40, 33, 7}, 5, 13);
    const InferOutcome f = infer(t, p, b, ops::Precision::fp32);
    const InferOutcome q = infer(t, p, b, ops::Precision::int8);
    const double steps = 127.0 / ops::int8_weight_max();
    const double dx = rel_l2(q.sequence, f.sequence);
    EXPECT_GT(dx, 1e-4) << "int8 results equal fp32's: the int8 path did not run";
    EXPECT_LT(dx, 3e-2 * steps);
    EXPECT_LT(rel_l2(q.logits, f.logits), 3e-2 * steps);
}

// The quantized weights are refreshed after weights_changed() and for another buffer: results
// equal a fresh engine's on the new weights, bit for bit.
TEST_F(Int8Engine, QuantizedWeightsFollowTheParameters) {
    const Plan plan{batch.batch_size, 40, 5, true};
    BertPretrainer e(table, plan, EngineOptions{ops::Precision::int8});
    std::vector<float> p = params;
    const double before = e.forward(p, batch, false, 0, 0).total;
    for (float& x : p) x *= 1.5f;
    e.weights_changed();
    const double after = e.forward(p, batch, false, 0, 0).total;
    EXPECT_NE(before, after);
    EXPECT_EQ(after, BertPretrainer(table, plan, EngineOptions{ops::Precision::int8}).forward(p, batch, false, 0, 0).total);
    const std::vector<float> q = params;
    EXPECT_EQ(e.forward(q, batch, false, 0, 0).total, before);
}

// An int8 engine has no bf16 in it: every product is int8 but the pooler's and the NSP
// classifier's, which stay fp32. Emulating bf16 (fp32 products where the CPU has bf16 units)
// leaves its results alone bit for bit, on every CPU, and it keeps no bf16 copy of the weights.
// (It once ran "the rest" in bf16 where bf16 outruns fp32; once the attention's products and the
// MLM head went int8 that rest was empty, and the copy cost 2 bytes per parameter for nothing.)
TEST_F(Int8Engine, HasNoBf16InIt) {
    if (!ops::bf16_native()) GTEST_SKIP() << "no native bf16 on this CPU: nothing to emulate";
    const InferOutcome native = infer(table, params, batch, ops::Precision::int8);
    ops::set_bf16_emulation(true);
    const InferOutcome emulated = infer(table, params, batch, ops::Precision::int8);
    ops::set_bf16_emulation(false);
    EXPECT_EQ(native.loss, emulated.loss);
    EXPECT_EQ(native.logits, emulated.logits);
    EXPECT_EQ(native.sequence, emulated.sequence);
    EXPECT_EQ(native.bytes, emulated.bytes) << "a bf16 copy of something where bf16 is native";
    const InferOutcome bf = infer(table, params, batch, ops::Precision::bf16);
    EXPECT_NE(bf.logits, native.logits) << "the bf16 engine ran as the int8 one";
}

// The MLM head's dense layers run in int8 too: the tied decoder's weights (the word embeddings,
// one output channel per vocabulary row) are quantized, so a NaN in a row no input token looks up
// is an Error naming that channel, where the fp32 engine carries it to that column of the logits.
TEST_F(Int8Engine, TiedDecoderIsQuantized) {
    int unused = cfg.vocab_size - 1;
    while (std::find(batch.input_ids.begin(), batch.input_ids.end(), unused) != batch.input_ids.end()) --unused;
    std::vector<float> p = params;
    p[table.embeddings().word + static_cast<size_t>(unused) * cfg.hidden_size + 3] = std::nanf("");
    const InferOutcome f = infer(table, p, batch, ops::Precision::fp32);
    EXPECT_TRUE(std::isnan(f.logits[unused]));
    EXPECT_FALSE(std::isnan(f.logits[0]));
    try {
        infer(table, p, batch, ops::Precision::int8);
        ADD_FAILURE() << "the int8 engine ran on a NaN decoder weight";
    } catch (const Error& err) {
        const std::string want = "output channel " + std::to_string(unused) + " of a " + std::to_string(cfg.hidden_size) +
                                 "x" + std::to_string(cfg.vocab_size) + " weight";
        EXPECT_NE(std::string(err.what()).find(want), std::string::npos) << err.what();
    }
}

TEST_F(Int8Engine, TrainingPlanIsAnError) {
    try {
        BertPretrainer e(table, Plan{batch.batch_size, 40, 5, false}, EngineOptions{ops::Precision::int8});
        ADD_FAILURE() << "an int8 training engine was built";
    } catch (const Error& err) {
        EXPECT_NE(std::string(err.what()).find("int8 is for inference"), std::string::npos) << err.what();
    }
    EXPECT_THROW(BertPretrainerF64(table, Plan{2, 16, 2, true}, EngineOptions{ops::Precision::int8}), Error);
}

}  // namespace
}  // namespace bertbench::model
