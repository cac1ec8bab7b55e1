// TensorFlow checkpoints as --init_checkpoint: the real keras_bert_tiny bundle (google-research/bert
// names, adam slots, global_step) restores exactly the ParamTable's tensors with the stored bytes;
// optimizer state is reported as ignored; SQuAD tables may lack cls/squad/*; missing or mis-shaped
// tensors are errors naming them; the format dispatch; HF export names invert the import map.
#include <gtest/gtest.h>

#include <cstring>
#include <cstdlib>

#include "core/error.hpp"
#include "io/tf_bundle.hpp"
#include "model/checkpoint.hpp"
#include "test_util.hpp"

namespace bertbench::model {
namespace {

using testing::error_of;
using testing::TmpDir;

std::string tiny_dir() {
    const char* d = std::getenv("BB_SHARED_DIR");
    return std::string(d ? d : "/work/shared") + "/golden/tf_checkpoint/keras_bert_tiny";
}
std::string tiny_prefix() {
    return tiny_dir() + "/bert_model.ckpt";
}
BertConfig keras_tiny_config() {
    BertConfig c = BertConfig::from_json_file(tiny_dir() + "/bert_config.json");
    c.validate("keras_bert_tiny");
    return c;
}

TEST(TfCheckpoint, KerasBertTinyRestoresTheTableAndIgnoresOptimizerState) {
    const ParamTable table(keras_tiny_config(), Heads::pretraining);
    std::vector<float> params(table.total_floats(), 12345.0f);
    const TfImportReport rep = import_tf_checkpoint(tiny_prefix(), table, params);
    EXPECT_EQ(rep.loaded.size(), table.entries().size());
    EXPECT_EQ(table.entries().size(), 46u);
    EXPECT_TRUE(rep.missing.empty());
    EXPECT_TRUE(rep.unexpected.empty());
    EXPECT_EQ(rep.ignored.size(), 93u);  // 46 adam_m + 46 adam_v + global_step
    EXPECT_NE(std::find(rep.ignored.begin(), rep.ignored.end(), "global_step"), rep.ignored.end());
    const std::string s = rep.summary();
    EXPECT_NE(s.find("loaded 46 tensors; missing 0; shape-mismatched 0; ignored 93"), std::string::npos) << s;
    // Every table tensor holds exactly the stored bytes (checked against listing.json's sha256 by
    // tests/io/tf_bundle_test.cpp).
    const io::TfBundleReader r(tiny_prefix());
    for (const ParamInfo& p : table.entries()) {
        const std::vector<uint8_t> raw = r.read_raw(*r.find(p.name));
        ASSERT_EQ(raw.size(), p.size * 4) << p.name;
        EXPECT_EQ(std::memcmp(raw.data(), params.data() + p.offset, raw.size()), 0) << p.name;
    }
    // listing.json preview of bert/embeddings/LayerNorm/beta: first -5.77865966988611e-06
    EXPECT_FLOAT_EQ(table.view(std::span<const float>(params), "bert/embeddings/LayerNorm/beta")[0],
                    -5.77865966988611e-06f);
}

// A checkpoint of MLPerf's TF LAMB graph (lamb_optimizer_v1.py): each variable's moments are the
// slots "<var>/LAMB" and "<var>/LAMB_1", and beta1_power/beta2_power are saved beside them: all
// optimizer state, ignored (none of it "unexpected").
TEST(TfCheckpoint, MlperfLambSlotsAreOptimizerState) {
    TmpDir dir;
    const io::TfBundleReader r(tiny_prefix());
    io::TfBundleWriter wr(dir.file("lamb"));
    for (const auto& e : r.entries()) {
        std::string name = e.name;
        for (const auto& [from, to] : {std::pair{"/adam_m", "/LAMB"}, std::pair{"/adam_v", "/LAMB_1"}})
            if (name.ends_with(from)) name = name.substr(0, name.size() - std::strlen(from)) + to;
        const auto raw = r.read_raw(e);
        wr.add_copy(name, e.dtype, e.shape, raw.data(), raw.size());
    }
    const float powers[2] = {0.9f * 0.9f, 0.999f * 0.999f};
    wr.add_copy("beta1_power", io::TfDType::float32, {}, &powers[0], 4);
    wr.add_copy("beta2_power", io::TfDType::float32, {}, &powers[1], 4);
    wr.finish();
    const ParamTable table(keras_tiny_config(), Heads::pretraining);
    std::vector<float> params(table.total_floats());
    const TfImportReport rep = import_tf_checkpoint(dir.file("lamb"), table, params);
    EXPECT_EQ(rep.loaded.size(), 46u);
    EXPECT_TRUE(rep.unexpected.empty()) << rep.summary();
    EXPECT_EQ(rep.ignored.size(), 95u);  // 46 LAMB + 46 LAMB_1 + global_step + 2 beta powers
}

TEST(TfCheckpoint, SquadTableMayLackItsHeadOnly) {
    const ParamTable table(keras_tiny_config(), Heads::squad);
    std::vector<float> params(table.total_floats(), 0.0f);
    table.initialize(params, 7);
    const std::vector<float> before(params.begin(), params.end());
    const TfImportReport rep = import_tf_checkpoint(tiny_prefix(), table, params);
    EXPECT_EQ(rep.missing, (std::vector<std::string>{"cls/squad/output_weights", "cls/squad/output_bias"}));
    EXPECT_EQ(rep.unexpected.size(), 7u);  // cls/predictions/* (5) and cls/seq_relationship/* (2)
    const ParamInfo& w = table.at("cls/squad/output_weights");
    EXPECT_EQ(std::memcmp(before.data() + w.offset, params.data() + w.offset, w.size * 4), 0);
    // A pretraining table may not lack its heads: write the bundle without cls/*.
    TmpDir dir;
    const io::TfBundleReader r(tiny_prefix());
    io::TfBundleWriter wr(dir.file("enc"));
    for (const auto& e : r.entries())
        if (e.name.rfind("cls/", 0) != 0) {
            const auto raw = r.read_raw(e);
            wr.add_copy(e.name, e.dtype, e.shape, raw.data(), raw.size());
        }
    wr.finish();
    const ParamTable pre(keras_tiny_config(), Heads::pretraining);
    std::vector<float> p2(pre.total_floats());
    const std::string err = error_of([&] { import_tf_checkpoint(dir.file("enc"), pre, p2); });
    EXPECT_NE(err.find(dir.file("enc.index")), std::string::npos) << err;
    EXPECT_NE(err.find("found 7 missing (cls/predictions/transform/dense/kernel"), std::string::npos) << err;
    // ... while the encoder-only table loads from it.
    const ParamTable none(keras_tiny_config(), Heads::none);
    std::vector<float> p3(none.total_floats());
    EXPECT_EQ(import_tf_checkpoint(dir.file("enc"), none, p3).loaded.size(), none.entries().size());
}

TEST(TfCheckpoint, OtherConfigIsAnErrorNamingShapes) {
    BertConfig c = keras_tiny_config();
    c.intermediate_size = 8;
    const ParamTable table(c, Heads::pretraining);
    std::vector<float> params(table.total_floats(), 3.0f);
    const std::string err = error_of([&] { import_tf_checkpoint(tiny_prefix(), table, params); });
    EXPECT_NE(err.find("bert/encoder/layer_0/intermediate/dense/kernel: expected [4, 8], found [4, 16]"),
              std::string::npos) << err;
    EXPECT_NE(err.find("shape-mismatched"), std::string::npos) << err;
    EXPECT_EQ(err.find('\n'), std::string::npos);
    for (float v : params) ASSERT_EQ(v, 3.0f);  // nothing written on error
}

TEST(TfCheckpoint, FormatDispatch) {
    EXPECT_EQ(detect_checkpoint_format(tiny_prefix()), CheckpointFormat::tf_bundle);
    EXPECT_EQ(detect_checkpoint_format(tiny_prefix() + ".index"), CheckpointFormat::tf_bundle);
    BertConfig got;
    EXPECT_FALSE(checkpoint_config(tiny_prefix(), &got));
    const ParamTable table(keras_tiny_config(), Heads::pretraining);
    std::vector<float> params(table.total_floats());
    const std::string s = load_init_checkpoint(tiny_prefix() + ".index", table, params);
    EXPECT_NE(s.find("ignored 93"), std::string::npos) << s;
    TmpDir dir;
    save_checkpoint(dir.file("ours.safetensors"), table, params);
    EXPECT_EQ(detect_checkpoint_format(dir.file("ours.safetensors")), CheckpointFormat::bertbench);
    EXPECT_TRUE(checkpoint_config(dir.file("ours.safetensors"), &got));
    EXPECT_EQ(got.hidden_size, 4);
    // A Hugging Face file as save_pretrained writes it ({"format": "pt"}) is not ours.
    {
        io::SafetensorsWriter hf(dir.file("hf.safetensors"));
        hf.set_metadata("format", "pt");
        const std::vector<float> w(15 * 4, 0.5f);
        hf.add_f32("bert.embeddings.word_embeddings.weight", {15, 4}, w);
        hf.write();
    }
    EXPECT_EQ(detect_checkpoint_format(dir.file("hf.safetensors")), CheckpointFormat::hf_safetensors);
    // TF names without the word embeddings (a partial export) are still TF names: loading it names
    // the tensor it lacks, not every tensor as "no TF name"
    {
        io::SafetensorsWriter part(dir.file("part.safetensors"));
        const std::vector<float> w(4 * 4, 0.5f);
        part.add_f32("bert/encoder/layer_0/attention/self/query/kernel", {4, 4}, w);
        part.write();
    }
    EXPECT_EQ(detect_checkpoint_format(dir.file("part.safetensors")), CheckpointFormat::bertbench);
    const std::string missing = error_of([&] { load_init_checkpoint(dir.file("part.safetensors"), table, params); });
    EXPECT_NE(missing.find("tensor \"bert/embeddings/word_embeddings\": expected in the checkpoint"), std::string::npos)
        << missing;
    const std::string err = error_of([&] { detect_checkpoint_format(dir.file("model.ckpt-9")); });
    EXPECT_NE(err.find(dir.file("model.ckpt-9") + ".index"), std::string::npos) << err;
}

TEST(TfCheckpoint, HfExportNamesInvertTheImportMap) {
    for (Heads h : {Heads::pretraining, Heads::squad}) {
        const ParamTable table(keras_tiny_config(), h);
        for (const ParamInfo& p : table.entries()) {
            std::string hf;
            bool tr = false;
            ASSERT_TRUE(tf_to_hf_name(p.name, &hf, &tr)) << p.name;
            HfName back;
            ASSERT_TRUE(hf_to_tf_name(hf, &back)) << hf;
            EXPECT_EQ(back.tf_name, p.name);
            EXPECT_EQ(tr, p.name.ends_with("/kernel")) << p.name;
        }
    }
    std::string hf;
    bool tr;
    ASSERT_TRUE(tf_to_hf_name("bert/encoder/layer_1/attention/self/query/kernel", &hf, &tr));
    EXPECT_EQ(hf, "bert.encoder.layer.1.attention.self.query.weight");
    EXPECT_FALSE(tf_to_hf_name("bert/embeddings/LayerNorm/beta/adam_m", &hf, &tr));
    EXPECT_FALSE(tf_to_hf_name("global_step", &hf, &tr));
}

}  // namespace
}  // namespace bertbench::model
