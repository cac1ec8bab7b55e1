// Checkpoints: round trip with metadata and extra tensors (optimizer slots, step), errors naming
// the tensor / expected and found shape / file, and Hugging Face import (names, transposes,
// missing / unexpected report) from an HF-layout file written here with HF's own names.
#include "model/checkpoint.hpp"

#include <gtest/gtest.h>
#include <unistd.h>

#include <filesystem>

#include "core/error.hpp"
#include "core/fs.hpp"
#include "io/torch_checkpoint.hpp"
#include "model/convert.hpp"
#include "test_util.hpp"

namespace bertbench::model {
namespace {

using testing::error_of;
using testing::TmpDir;

BertConfig checkpoint_config() {
    BertConfig c;
    c.vocab_size = 101;
    c.hidden_size = 24;
    c.num_hidden_layers = 2;
    c.num_attention_heads = 3;
    c.intermediate_size = 40;
    c.max_position_embeddings = 32;
    return c;
}

TEST(Checkpoint, RoundTripWithMetadataAndExtraTensors) {
    TmpDir dir;
    const ParamTable table(checkpoint_config(), Heads::pretraining);
    std::vector<float> w(table.total_floats()), m(table.total_floats());
    table.initialize(w, 1);
    table.initialize(m, 2);
    const std::vector<int64_t> step = {1234};
    const std::string path = dir.file("ckpt.safetensors");
    {
        CheckpointWriter cw(path, table);
        cw.add_table(w);
        cw.add_table(m, "/adam_m");
        cw.add_i64("global_step", step);
        cw.set_metadata("data_cursor", "shard 3 record 17");
        cw.commit();
    }
    const CheckpointReader r(path);
    EXPECT_EQ(r.metadata().at("format"), kCheckpointFormat);
    EXPECT_EQ(r.metadata().at("data_cursor"), "shard 3 record 17");
    EXPECT_EQ(r.config().to_json(), checkpoint_config().to_json());
    EXPECT_EQ(r.file().tensors().size(), 2 * table.entries().size() + 1);
    EXPECT_EQ(r.read_i64("global_step"), step);
    std::vector<float> w2(table.total_floats(), -1.0f), m2(table.total_floats(), -1.0f);
    r.load_table(table, w2);
    r.load_table(table, m2, "/adam_m");
    for (const ParamInfo& p : table.entries()) {
        ASSERT_TRUE(
            std::equal(w.begin() + p.offset, w.begin() + p.offset + p.size, w2.begin() + p.offset))
            << p.name;
        ASSERT_TRUE(
            std::equal(m.begin() + p.offset, m.begin() + p.offset + p.size, m2.begin() + p.offset))
            << p.name;
    }
    EXPECT_NE(error_of([&] { r.load_table(table, m2, "/adam_v"); }).find("/adam_v\""),
              std::string::npos);
    const std::vector<int64_t> shape = {2, 24};
    EXPECT_EQ(r.read_f32("cls/seq_relationship/output_weights", &shape).size(), 48u);
    const std::vector<int64_t> wrong = {24, 2};
    EXPECT_THROW(r.read_f32("cls/seq_relationship/output_weights", &wrong), Error);

    // save_checkpoint / load_checkpoint
    const std::string p2 = dir.file("w.safetensors");
    save_checkpoint(p2, table, w, {{"k", "v"}});
    std::vector<float> w3(table.total_floats());
    load_checkpoint(p2, table, w3);
    for (const ParamInfo& p : table.entries())
        ASSERT_TRUE(
            std::equal(w.begin() + p.offset, w.begin() + p.offset + p.size, w3.begin() + p.offset));
}

TEST(Checkpoint, MismatchesNameTensorShapesAndFile) {
    TmpDir dir;
    const ParamTable table(checkpoint_config(), Heads::pretraining);
    std::vector<float> w(table.total_floats());
    table.initialize(w, 1);
    const std::string path = dir.file("ckpt.safetensors");
    save_checkpoint(path, table, w);

    BertConfig bigger = checkpoint_config();
    bigger.vocab_size = 102;
    const ParamTable other(bigger, Heads::pretraining);
    std::vector<float> buf(other.total_floats());
    const std::string e = error_of([&] { CheckpointReader(path).load_table(other, buf); });
    EXPECT_NE(e.find(path), std::string::npos) << e;
    EXPECT_NE(e.find("bert/embeddings/word_embeddings"), std::string::npos) << e;
    EXPECT_NE(e.find("expected shape [102, 24], got [101, 24]"), std::string::npos) << e;
    const std::string e2 = error_of([&] { load_checkpoint(path, other, buf); });
    EXPECT_NE(e2.find("vocab_size: expected 102"), std::string::npos) << e2;

    const ParamTable squad(checkpoint_config(), Heads::squad);
    std::vector<float> sq(squad.total_floats());
    const std::string e3 = error_of([&] { load_checkpoint(path, squad, sq); });
    EXPECT_NE(e3.find("cls/squad/output_weights"), std::string::npos) << e3;
    EXPECT_NE(e3.find("no such tensor"), std::string::npos) << e3;
    // The other direction works: a pretraining checkpoint holds the encoder for fine-tuning.
    const ParamTable none(checkpoint_config(), Heads::none);
    std::vector<float> nb(none.total_floats());
    EXPECT_NO_THROW(load_checkpoint(path, none, nb));
}

// Writes `w` (laid out by `table`) as a transformers BertForPreTraining state dict.
// `untied`: the decoder's first value differs from the word embeddings' (an untied model).
void write_hf(const std::string& path, const ParamTable& table, std::span<const float> w,
              bool old_names, bool drop_pooler_bias, bool untied = false) {
    const BertConfig& c = table.config();
    io::SafetensorsWriter out(path);
    out.set_metadata("format", "pt");
    auto put = [&](const std::string& hf, const std::string& tf) {
        const ParamInfo& p = table.at(tf);
        out.add_f32(hf, p.shape, table.view(w, tf));
    };
    auto put_t = [&](const std::string& hf, const std::string& tf) {  // [in, out] -> [out, in]
        const ParamInfo& p = table.at(tf);
        const auto src = table.view(w, tf);
        const int64_t in = p.shape[0], o = p.shape[1];
        std::vector<float> t(src.size());
        for (int64_t i = 0; i < in; ++i)
            for (int64_t j = 0; j < o; ++j) t[j * in + i] = src[i * o + j];
        out.add_f32(hf, {o, in}, t);
    };
    const std::string g = old_names ? "gamma" : "weight", b = old_names ? "beta" : "bias";
    put("bert.embeddings.word_embeddings.weight", "bert/embeddings/word_embeddings");
    put("bert.embeddings.position_embeddings.weight", "bert/embeddings/position_embeddings");
    put("bert.embeddings.token_type_embeddings.weight", "bert/embeddings/token_type_embeddings");
    put("bert.embeddings.LayerNorm." + g, "bert/embeddings/LayerNorm/gamma");
    put("bert.embeddings.LayerNorm." + b, "bert/embeddings/LayerNorm/beta");
    const std::vector<int64_t> ids = {0, 1, 2};
    out.add_i64("bert.embeddings.position_ids", {1, 3}, ids);
    for (int l = 0; l < c.num_hidden_layers; ++l) {
        const std::string h = "bert.encoder.layer." + std::to_string(l) + ".";
        const std::string t = "bert/encoder/layer_" + std::to_string(l) + "/";
        for (const char* q : {"query", "key", "value"}) {
            put_t(h + "attention.self." + q + ".weight", t + "attention/self/" + q + "/kernel");
            put(h + "attention.self." + q + ".bias", t + "attention/self/" + q + "/bias");
        }
        put_t(h + "attention.output.dense.weight", t + "attention/output/dense/kernel");
        put(h + "attention.output.dense.bias", t + "attention/output/dense/bias");
        put(h + "attention.output.LayerNorm." + g, t + "attention/output/LayerNorm/gamma");
        put(h + "attention.output.LayerNorm." + b, t + "attention/output/LayerNorm/beta");
        put_t(h + "intermediate.dense.weight", t + "intermediate/dense/kernel");
        put(h + "intermediate.dense.bias", t + "intermediate/dense/bias");
        put_t(h + "output.dense.weight", t + "output/dense/kernel");
        put(h + "output.dense.bias", t + "output/dense/bias");
        put(h + "output.LayerNorm." + g, t + "output/LayerNorm/gamma");
        put(h + "output.LayerNorm." + b, t + "output/LayerNorm/beta");
    }
    put_t("bert.pooler.dense.weight", "bert/pooler/dense/kernel");
    if (!drop_pooler_bias) put("bert.pooler.dense.bias", "bert/pooler/dense/bias");
    put_t("cls.predictions.transform.dense.weight", "cls/predictions/transform/dense/kernel");
    put("cls.predictions.transform.dense.bias", "cls/predictions/transform/dense/bias");
    put("cls.predictions.transform.LayerNorm." + g, "cls/predictions/transform/LayerNorm/gamma");
    put("cls.predictions.transform.LayerNorm." + b, "cls/predictions/transform/LayerNorm/beta");
    put("cls.predictions.bias", "cls/predictions/output_bias");
    if (untied) {
        const ParamInfo& p = table.at("bert/embeddings/word_embeddings");
        std::vector<float> decoder(table.view(w, p.name).begin(), table.view(w, p.name).end());
        decoder[0] += 1.0f;
        out.add_f32("cls.predictions.decoder.weight", p.shape, decoder);
    } else {
        put("cls.predictions.decoder.weight", "bert/embeddings/word_embeddings");  // tied copy
    }
    put("cls.predictions.decoder.bias", "cls/predictions/output_bias");
    put("cls.seq_relationship.weight", "cls/seq_relationship/output_weights");  // [2, H]
    put("cls.seq_relationship.bias", "cls/seq_relationship/output_bias");
    out.add_f32("classifier.extra.weight", {2}, std::vector<float>{1, 2});
    out.write();
}

// BERT ties the MLM decoder to the word embeddings: a file whose decoder holds other values is
// another model, refused by name rather than run with the embeddings in its place.
TEST(Checkpoint, AnUntiedDecoderIsRefused) {
    TmpDir dir;
    const ParamTable table(checkpoint_config(), Heads::pretraining);
    std::vector<float> w(table.total_floats());
    table.initialize(w, 7);
    const std::string path = dir.file("untied.safetensors");
    write_hf(path, table, w, false, false, /*untied=*/true);
    std::vector<float> got(table.total_floats());
    try {
        (void)import_hf_safetensors(path, table, got);
        ADD_FAILURE() << "an untied decoder was loaded";
    } catch (const Error& e) {
        EXPECT_NE(std::string(e.what()).find("tensor \"cls.predictions.decoder.weight\" holds other values than the "
                                             "word embeddings \"bert.embeddings.word_embeddings.weight\""),
                  std::string::npos) << e.what();
    }
}

TEST(Checkpoint, ImportsHuggingFaceBert) {
    TmpDir dir;
    const ParamTable table(checkpoint_config(), Heads::pretraining);
    std::vector<float> w(table.total_floats());
    table.initialize(w, 7);
    // Make biases and LayerNorm parameters distinct so that a swapped name would be caught.
    for (size_t i = 0; i < w.size(); ++i) w[i] += 0.001f * float(i % 97);
    for (const bool old_names : {false, true}) {
        const std::string path = dir.file(old_names ? "old.safetensors" : "new.safetensors");
        write_hf(path, table, w, old_names, /*drop_pooler_bias=*/old_names);
        std::vector<float> got(table.total_floats(), -5.0f);
        const ImportReport rep = import_hf_safetensors(path, table, got);
        EXPECT_EQ(rep.unexpected, std::vector<std::string>{"classifier.extra.weight"});
        EXPECT_EQ(rep.ignored.size(), 3u);  // position_ids, decoder.weight, decoder.bias
        if (old_names) {
            EXPECT_EQ(rep.missing, std::vector<std::string>{"bert/pooler/dense/bias"});
        } else {
            EXPECT_TRUE(rep.missing.empty());
        }
        EXPECT_EQ(rep.loaded.size(), table.entries().size() - rep.missing.size());
        EXPECT_NE(rep.summary().find("classifier.extra.weight"), std::string::npos);
        for (const ParamInfo& p : table.entries()) {
            const auto a = table.view(std::span<const float>(w), p.name);
            const auto b = table.view(std::span<const float>(got), p.name);
            if (p.name == "bert/pooler/dense/bias" && old_names) {
                EXPECT_EQ(b[0], -5.0f);  // untouched
                continue;
            }
            EXPECT_TRUE(std::equal(a.begin(), a.end(), b.begin())) << p.name;
        }
    }
    // A shape mismatch names both names and both shapes.
    BertConfig wider = checkpoint_config();
    wider.intermediate_size = 48;
    const ParamTable t2(wider, Heads::pretraining);
    std::vector<float> buf(t2.total_floats());
    const std::string e =
        error_of([&] { import_hf_safetensors(dir.file("new.safetensors"), t2, buf); });
    EXPECT_NE(e.find("bert.encoder.layer.0.intermediate.dense.weight"), std::string::npos) << e;
    EXPECT_NE(e.find("bert/encoder/layer_0/intermediate/dense/kernel"), std::string::npos) << e;
    EXPECT_NE(e.find("expected shape [48, 24] (HF [out, in]), got [40, 24]"), std::string::npos)
        << e;
}

// NVIDIA's PyTorch checkpoints: the vocabulary padded to a multiple of 8 in the model (101 -> 104
// rows of word embeddings and MLM output bias, the padding rows holding values no token reaches).
// The import and `convert --bert_config_file` keep the config's 101 rows, bit for bit, and say so;
// any other row count stays a shape error.
TEST(Checkpoint, NvidiasPaddedVocabularyIsTrimmedToTheConfigs) {
    TmpDir dir;
    const ParamTable table(checkpoint_config(), Heads::pretraining);
    std::vector<float> w(table.total_floats());
    table.initialize(w, 3);
    const auto write = [&](const std::string& path, int64_t rows) {
        std::vector<std::vector<float>> values;
        std::vector<io::TorchOutTensor> out;
        values.reserve(table.entries().size());
        for (const ParamInfo& p : table.entries()) {
            std::string hf;
            bool tr = false;
            ASSERT_TRUE(tf_to_hf_name(p.name, &hf, &tr)) << p.name;
            const auto v = table.view(std::span<const float>(w), p.name);
            std::vector<int64_t> shape = p.shape;
            values.emplace_back(v.begin(), v.end());
            if (tr) {  // [in, out] -> Linear's [out, in]
                for (int64_t i = 0; i < shape[0]; ++i)
                    for (int64_t j = 0; j < shape[1]; ++j) values.back()[j * shape[0] + i] = v[i * shape[1] + j];
                std::swap(shape[0], shape[1]);
            }
            if (p.name == "bert/embeddings/word_embeddings" || p.name == "cls/predictions/output_bias") {
                values.back().resize(values.back().size() / 101 * rows, 99.0f);
                shape[0] = rows;
            }
            if (hf.find("intermediate.dense") != std::string::npos) hf.replace(hf.find("dense"), 5, "dense_act");
            out.push_back({hf, shape, values.back()});
        }
        io::write_torch_checkpoint(path, out);
    };
    write(dir.file("ckpt_1.pt"), 104);
    std::vector<float> got(table.total_floats(), -5.0f);
    const ImportReport rep = import_torch_checkpoint(dir.file("ckpt_1.pt"), table, got);
    EXPECT_TRUE(rep.missing.empty());
    for (const ParamInfo& p : table.entries()) {
        const auto a = table.view(std::span<const float>(w), p.name), b = table.view(std::span<const float>(got), p.name);
        EXPECT_TRUE(std::equal(a.begin(), a.end(), b.begin())) << p.name;
    }
    EXPECT_NE(rep.summary().find("bert.embeddings.word_embeddings.weight rows 101..103 (NVIDIA's vocabulary padding"),
              std::string::npos) << rep.summary();
    EXPECT_NE(rep.summary().find("cls.predictions.bias rows 101..103"), std::string::npos) << rep.summary();
    // convert with the config: the same 101 rows in the output
    const std::string cfg = dir.file("bert_config.json");
    write_file_atomic(cfg, checkpoint_config().to_json().dump());
    ConvertOptions o;
    o.input = dir.file("ckpt_1.pt");
    o.output = dir.file("out.safetensors");
    o.bert_config_file = cfg;
    const ConvertResult res = convert_checkpoint(o);
    EXPECT_NE(res.summary().find("bert/embeddings/word_embeddings rows 101..103"), std::string::npos) << res.summary();
    std::vector<float> back(table.total_floats());
    load_checkpoint(o.output, table, back);
    EXPECT_EQ(back, w);
    // 105 rows is no padding to a multiple of 8: a shape error naming it
    write(dir.file("ckpt_2.pt"), 105);
    const std::string e = error_of([&] { import_torch_checkpoint(dir.file("ckpt_2.pt"), table, got); });
    EXPECT_NE(e.find("expected shape [101, 24], got [105, 24]"), std::string::npos) << e;
    o.input = dir.file("ckpt_2.pt");
    o.output = dir.file("out2.safetensors");
    EXPECT_NE(error_of([&] { convert_checkpoint(o); }).find("does not fit the weights"), std::string::npos);
}

// `convert --to=pt` and `--to=nvidia_pt`, read by torch itself: HF's keys with the decoder tied
// (one storage with the word embeddings / output bias, so load_state_dict(strict=True) takes it),
// and NVIDIA's {"model": ...} with its dense_act names and the vocabulary padded with zero rows to
// a multiple of 8 (101 -> 104), which bertbench reads back to the same weights.
TEST(Checkpoint, PtOutputsAreHfsAndNvidiasLayouts) {
    TmpDir dir;
    const ParamTable table(checkpoint_config(), Heads::pretraining);
    std::vector<float> w(table.total_floats());
    table.initialize(w, 5);
    save_checkpoint(dir.file("in.safetensors"), table, w, {});
    ConvertOptions o;
    o.input = dir.file("in.safetensors");
    for (const char* to : {"pt", "nvidia_pt"}) {
        o.to = to;
        o.output = dir.file(std::string(to) + ".pt");
        convert_checkpoint(o);
    }
    const std::string script = dir.file("check.py");
    write_file_atomic(script, R"(import sys, torch
hf = torch.load(sys.argv[1], weights_only=True)
ptr = lambda t: (t.untyped_storage() if hasattr(t, 'untyped_storage') else t.storage()).data_ptr()
assert ptr(hf['cls.predictions.decoder.weight']) == ptr(hf['bert.embeddings.word_embeddings.weight'])
assert ptr(hf['cls.predictions.decoder.bias']) == ptr(hf['cls.predictions.bias'])
assert 'bert.encoder.layer.1.intermediate.dense.weight' in hf
nv = torch.load(sys.argv[2], weights_only=True)
assert list(nv.keys()) == ['model'], nv.keys()
sd = nv['model']
assert 'cls.predictions.decoder.bias' not in sd
for k in ('bert.encoder.layer.1.intermediate.dense_act.weight', 'bert.pooler.dense_act.bias',
          'cls.predictions.transform.dense_act.weight'):
    assert k in sd, k
    assert torch.equal(sd[k], hf[k.replace('dense_act', 'dense')]), k
we = sd['bert.embeddings.word_embeddings.weight']
assert we.shape == (104, 24) and torch.equal(we[:101], hf['bert.embeddings.word_embeddings.weight'])
assert torch.count_nonzero(we[101:]) == 0 and sd['cls.predictions.bias'].shape == (104,)
assert ptr(sd['cls.predictions.decoder.weight']) == ptr(we)
)");
    const std::string cmd = "/usr/bin/python3 " + script + " " + dir.file("pt.pt") + " " + dir.file("nvidia_pt.pt") + " 2>&1";
    EXPECT_EQ(std::system(cmd.c_str()), 0) << cmd;
    std::vector<float> back(table.total_floats());
    const ImportReport rep = import_torch_checkpoint(dir.file("nvidia_pt.pt"), table, back);
    EXPECT_TRUE(rep.missing.empty()) << rep.summary();
    for (const ParamInfo& p : table.entries()) {
        const auto a = table.view(std::span<const float>(w), p.name), b = table.view(std::span<const float>(back), p.name);
        EXPECT_TRUE(std::equal(a.begin(), a.end(), b.begin())) << p.name;
    }
}

TEST(Checkpoint, HfNameMap) {
    HfName m;
    ASSERT_TRUE(hf_to_tf_name("encoder.layer.11.attention.self.key.weight", &m));  // BertModel
    EXPECT_EQ(m.tf_name, "bert/encoder/layer_11/attention/self/key/kernel");
    EXPECT_TRUE(m.transpose);
    ASSERT_TRUE(hf_to_tf_name("bert.encoder.layer.3.output.LayerNorm.gamma", &m));
    EXPECT_EQ(m.tf_name, "bert/encoder/layer_3/output/LayerNorm/gamma");
    EXPECT_FALSE(m.transpose);
    ASSERT_TRUE(hf_to_tf_name("cls.seq_relationship.weight", &m));
    EXPECT_EQ(m.tf_name, "cls/seq_relationship/output_weights");
    EXPECT_FALSE(m.transpose);
    ASSERT_TRUE(hf_to_tf_name("qa_outputs.weight", &m));
    EXPECT_EQ(m.tf_name, "cls/squad/output_weights");
    EXPECT_FALSE(m.transpose);
    ASSERT_TRUE(hf_to_tf_name("cls.predictions.bias", &m));
    EXPECT_EQ(m.tf_name, "cls/predictions/output_bias");
    for (const char* bad : {"bert.encoder.layer.x.output.dense.weight",
                            "encoder.layer.1.foo.weight", "cls.predictions.decoder.weight",
                            "bert.embeddings.LayerNorm.scale", "", "bert.", "pooler.dense.kernel"})
        EXPECT_FALSE(hf_to_tf_name(bad, &m)) << bad;
}

// NVIDIA DeepLearningExamples' names (LinearActivation "dense_act") and DistributedDataParallel's
// "module." prefix, as in NVIDIA's ckpt_<step>.pt (issue 25 item 7).
TEST(Checkpoint, HfNameMapTakesNvidiaAndDdpNames) {
    const std::pair<const char*, const char*> cases[] = {
        {"bert.encoder.layer.2.intermediate.dense_act.weight", "bert/encoder/layer_2/intermediate/dense/kernel"},
        {"module.bert.encoder.layer.0.intermediate.dense_act.bias", "bert/encoder/layer_0/intermediate/dense/bias"},
        {"module.bert.pooler.dense_act.weight", "bert/pooler/dense/kernel"},
        {"cls.predictions.transform.dense_act.weight", "cls/predictions/transform/dense/kernel"},
        {"module.cls.predictions.transform.LayerNorm.bias", "cls/predictions/transform/LayerNorm/beta"},
        {"module.encoder.layer.1.attention.self.query.weight", "bert/encoder/layer_1/attention/self/query/kernel"},
        {"module.qa_outputs.bias", "cls/squad/output_bias"},
    };
    for (const auto& [nv, tf] : cases) {
        HfName m;
        ASSERT_TRUE(hf_to_tf_name(nv, &m)) << nv;
        EXPECT_EQ(m.tf_name, tf) << nv;
    }
    HfName m;
    EXPECT_FALSE(hf_to_tf_name("module.module.bert.pooler.dense.weight", &m));
    EXPECT_FALSE(hf_to_tf_name("bert.encoder.layer.0.attention.self.query_act.weight", &m));
    // The layer index check sees through the prefixes too.
    EXPECT_THROW(check_hf_layer_index("f.pt", "module.bert.encoder.layer.07.output.dense.weight", 12), Error);
    EXPECT_NO_THROW(check_hf_layer_index("f.pt", "module.bert.encoder.layer.7.output.dense.weight", 12));
}

// The JSON inside a checkpoint's metadata is untrusted input too: a bert_config nested ~70,000
// levels deep used to overflow the stack (the error path serialised it recursively).
TEST(Checkpoint, DeeplyNestedConfigMetadataIsAnError) {
    TmpDir dir;
    const ParamTable table(checkpoint_config(), Heads::pretraining);
    std::vector<float> w(table.total_floats());
    table.initialize(w, 1);
    const std::string deep = std::string(70000, '[') + std::string(70000, ']');
    const std::string path = dir.file("deep.safetensors");
    save_checkpoint(path, table, w, {{"bert_config", R"({"hidden_size": )" + deep + "}"}});
    std::string e = error_of([&] { CheckpointReader(path).config(); });
    EXPECT_NE(e.find(path), std::string::npos) << e.substr(0, 300);
    EXPECT_NE(e.find("bert_config"), std::string::npos) << e.substr(0, 300);
    EXPECT_NE(e.find("nested deeper than 64 levels"), std::string::npos) << e.substr(0, 300);
    EXPECT_LT(e.size(), 400u);
    e = error_of([&] { load_checkpoint(path, table, w); });
    EXPECT_NE(e.find("nested deeper than 64 levels"), std::string::npos) << e.substr(0, 300);
    // Not JSON at all, and a config whose value is a long string: short messages as well.
    save_checkpoint(path, table, w, {{"bert_config", "{\"hidden_size\": "}});
    e = error_of([&] { CheckpointReader(path).config(); });
    EXPECT_NE(e.find("not valid JSON"), std::string::npos) << e;
    nlohmann::json j = checkpoint_config().to_json();
    j["hidden_size"] = std::string(1 << 20, '7');
    save_checkpoint(path, table, w, {{"bert_config", j.dump()}});
    e = error_of([&] { CheckpointReader(path).config(); });
    EXPECT_NE(e.find("hidden_size: expected an integer"), std::string::npos) << e.substr(0, 300);
    EXPECT_LT(e.size(), 400u);
}

}  // namespace
}  // namespace bertbench::model
