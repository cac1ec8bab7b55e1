// Checkpoint metadata built to hurt (issue 28 item 5): max_position_embeddings = 1 in a
// checkpoint's bert_config is refused where the config is read, naming the file and field; it
// used to surface as the first flag checked against it ("--max_seq_length=128: expected 2..1").
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "core/error.hpp"
#include "model/checkpoint.hpp"
#include "model/param_table.hpp"
#include "test_util.hpp"

namespace bertbench::model {
namespace {

using bertbench::testing::error_of;
using bertbench::testing::TmpDir;

TEST(HostileConfig, OnePositionIsRefusedWhereTheConfigIsRead) {
    TmpDir dir("bb_hostile_config");
    BertConfig c;
    c.vocab_size = 30, c.hidden_size = 8, c.num_hidden_layers = 1, c.num_attention_heads = 2;
    c.intermediate_size = 16, c.max_position_embeddings = 16, c.type_vocab_size = 2;
    const ParamTable table(c, Heads::pretraining);
    std::vector<float> w(table.total_floats());
    table.initialize(w, 1);
    nlohmann::json j = c.to_json();
    j["max_position_embeddings"] = 1;
    const std::string path = dir.file("one.safetensors");
    save_checkpoint(path, table, w, {{"bert_config", j.dump()}});
    const std::string e = error_of([&] { CheckpointReader(path).config(); });
    EXPECT_NE(e.find(path + ": bert_config: max_position_embeddings: expected at least 2 (a "
                            "sequence holds [CLS] and [SEP]), got 1"),
              std::string::npos)
        << e;
    j["max_position_embeddings"] = 2;  // the smallest that can hold a sequence
    save_checkpoint(path, table, w, {{"bert_config", j.dump()}});
    EXPECT_EQ(CheckpointReader(path).config().max_position_embeddings, 2);
}

}  // namespace
}  // namespace bertbench::model
