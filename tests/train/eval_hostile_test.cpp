// Evaluation data built to hurt (issue 28 item 5): a token id >= vocab_size or a segment id >=
// type_vocab_size in an eval shard is one line naming the file and record, from the reader, before
// the engine sees the batch (whose message named neither).
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "core/error.hpp"
#include "io/example.hpp"
#include "io/tfrecord.hpp"
#include "model/bert.hpp"
#include "test_util.hpp"
#include "train/evaluate.hpp"

namespace bertbench::train {
namespace {

using bertbench::testing::error_of;
using bertbench::testing::TmpDir;

io::PretrainingRecord record(int T, int P) {
    io::PretrainingRecord r;
    r.input_ids.assign(size_t(T), 0);
    r.input_mask.assign(size_t(T), 0);
    r.segment_ids.assign(size_t(T), 0);
    for (int t = 0; t < 6; ++t) r.input_ids[size_t(t)] = 100 + t, r.input_mask[size_t(t)] = 1;
    r.masked_lm_positions.assign(size_t(P), 0);
    r.masked_lm_ids.assign(size_t(P), 0);
    r.masked_lm_weights.assign(size_t(P), 0.0f);
    r.masked_lm_positions[0] = 1, r.masked_lm_ids[0] = 7, r.masked_lm_weights[0] = 1.0f;
    return r;
}

TEST(EvalHostile, IdsOutsideTheModelNameTheFileAndRecord) {
    TmpDir dir("bb_eval_hostile");
    model::BertConfig c;
    c.vocab_size = 200, c.hidden_size = 16, c.num_hidden_layers = 1, c.num_attention_heads = 2;
    c.intermediate_size = 32, c.max_position_embeddings = 32, c.type_vocab_size = 2;
    const model::ParamTable table(c, model::Heads::pretraining);
    std::vector<float> params(table.total_floats());
    table.initialize(params, 3);
    model::BertPretrainer engine(table, {4, 32, 4});
    for (const bool segment : {false, true}) {
        const std::string path = dir.file(segment ? "segment.tfrecord" : "token.tfrecord");
        {
            io::TfRecordWriter w(path);
            for (int i = 0; i < 4; ++i) {
                io::PretrainingRecord r = record(32, 4);
                if (i == 1 && segment) r.segment_ids[2] = 2;
                if (i == 1 && !segment) r.input_ids[3] = 200;
                w.write(io::encode_example(io::pretraining_example(r)));
            }
            w.close();
        }
        EvalOptions eo;
        eo.files = {path};
        eo.batch_size = 4;
        eo.max_seq_length = 32;
        eo.max_predictions_per_seq = 4;
        eo.type_vocab_size = c.type_vocab_size;
        const std::string msg = error_of([&] { evaluate(engine, params, c.vocab_size, eo); });
        const std::string want =
            segment ? path + ": record 1: feature segment_ids: expected an id in [0, 2) "
                             "(type_vocab_size of the model), got 2 at index 2"
                    : path + ": record 1: feature input_ids: expected an id in [0, 200) "
                             "(vocab_size of the model), got 200 at index 3";
        EXPECT_NE(msg.find(want), std::string::npos) << msg;
    }
}

}  // namespace
}  // namespace bertbench::train
