// Hugging Face checkpoints built to hurt (issue 28 item 6): an encoder layer index that is not a
// plain decimal below the model's num_hidden_layers (layer.4294967296., layer.-1., layer.01.,
// layer.5. in a 2-layer model) is one line naming the file and the tensor, on import and on
// convert. Such names used to be skipped as "unexpected", leaving a whole layer at its
// initialisation with exit 0.
#include <gtest/gtest.h>

#include <filesystem>
#include <string>
#include <vector>

#include "../cli/run_util.hpp"
#include "core/error.hpp"
#include "io/safetensors.hpp"
#include "model/checkpoint.hpp"
#include "model/param_table.hpp"
#include "test_util.hpp"

namespace bertbench::model {
namespace {

using bertbench::testing::error_of;
using bertbench::testing::TmpDir;

BertConfig two_layers() {
    BertConfig c;
    c.vocab_size = 30, c.hidden_size = 8, c.num_hidden_layers = 2, c.num_attention_heads = 2;
    c.intermediate_size = 16, c.max_position_embeddings = 16, c.type_vocab_size = 2;
    return c;
}

// An HF file: the word embeddings (so it reads as HF) and one query weight under `layer`.
std::string hf_file(const TmpDir& dir, const std::string& layer) {
    const std::string path = dir.file("layer_" + layer + ".safetensors");
    io::SafetensorsWriter w(path);
    w.add_f32("bert.embeddings.word_embeddings.weight", {30, 8}, std::vector<float>(240, 0.5f));
    w.add_f32("bert.encoder.layer." + layer + ".attention.self.query.weight", {8, 8},
              std::vector<float>(64, 0.25f));
    w.write();
    return path;
}

TEST(HfImportHostile, MalformedLayerIndexIsRefusedNamingFileAndTensor) {
    TmpDir dir("bb_hf_layers");
    const ParamTable table(two_layers(), Heads::pretraining);
    std::vector<float> params(table.total_floats());
    const std::vector<std::pair<std::string, std::string>> cases = {
        {"4294967296", "expected an encoder layer index 0..1"},
        {"-1", "expected an encoder layer index 0..1"},
        {"01", "expected an encoder layer index 0..1"},
        {"5", "expected an encoder layer index 0..1 (decimal, no sign or leading zeros; "
              "num_hidden_layers of the model), got \"5\""},
    };
    for (const auto& [layer, want] : cases) {
        SCOPED_TRACE(layer);
        const std::string path = hf_file(dir, layer);
        const std::string msg = error_of([&] { import_hf_safetensors(path, table, params); });
        EXPECT_NE(msg.find(path + ": tensor \"bert.encoder.layer." + layer +
                           ".attention.self.query.weight\": " + want),
                  std::string::npos)
            << msg;
        EXPECT_EQ(msg.find('\n'), std::string::npos) << msg;
    }
    // A good index still imports.
    const ImportReport ok = import_hf_safetensors(hf_file(dir, "1"), table, params);
    EXPECT_EQ(ok.loaded.size(), 2u);
    EXPECT_TRUE(ok.unexpected.empty());

    // convert (no model to bound it by: below 2^31): exit 1, one line, nothing written.
    for (const char* layer_c : {"4294967296", "-1"}) {
        const std::string layer = layer_c;
        const std::string in = dir.file("layer_" + layer + ".safetensors"),
                          out = dir.file("out_" + layer + ".safetensors");
        const auto r = testing::run_bertbench("convert --input=" + in + " --output=" + out);
        EXPECT_EQ(r.exit_code, 1) << r.out;
        EXPECT_NE(r.out.find(in + ": tensor \"bert.encoder.layer." + layer +
                             ".attention.self.query.weight\": expected an encoder layer index "
                             "0..2147483647"),
                  std::string::npos)
            << r.out;
        EXPECT_FALSE(std::filesystem::exists(out));
    }
}

}  // namespace
}  // namespace bertbench::model
