// Checkpoints that could be read more than one way are read one way or refused: two names of one
// weight (HF's cls.predictions.bias and .decoder.bias, DDP's "module." beside the plain name) must
// hold the same values, for loading and for `convert`; a TF checkpoint with encoder layers the
// config does not have is refused as the other formats refuse it; `convert --to=safetensors` of
// fp16 writes the fp32 our readers take; an input with nothing to convert writes nothing; `--to=tf`
// keeps the checkpoints its directory's state file listed, as TF's Saver does.
#include <gtest/gtest.h>

#include <cmath>
#include <filesystem>

#include "core/error.hpp"
#include "core/fs.hpp"
#include "io/safetensors.hpp"
#include "io/tf_bundle.hpp"
#include "io/torch_checkpoint.hpp"
#include "model/checkpoint.hpp"
#include "model/convert.hpp"
#include "test_util.hpp"

namespace bertbench::model {
namespace {

using testing::error_of;
using testing::TmpDir;

BertConfig ambiguity_config(int layers = 2) {
    BertConfig c;
    c.vocab_size = 64;
    c.hidden_size = 16;
    c.num_hidden_layers = layers;
    c.num_attention_heads = 2;
    c.intermediate_size = 24;
    c.max_position_embeddings = 32;
    return c;
}

// fp16 bits of a float that fp16 holds exactly (0 or a normal: m x 2^e, 11 significant bits)
uint16_t exact_half(float f) {
    if (f == 0) return 0;
    int e = 0;
    const float m = std::frexp(std::fabs(f), &e);  // |f| = m 2^e, m in [0.5, 1)
    const auto frac = static_cast<uint16_t>((2 * m - 1) * 1024);
    return static_cast<uint16_t>((f < 0 ? 0x8000 : 0) | (e - 1 + 15) << 10 | frac);
}

// The table's weights under HF's names, Linear weights as [out, in], plus `extra` tensors.
std::vector<io::TorchOutTensor> hf_tensors(const ParamTable& table, std::span<const float> w,
                                           std::vector<std::vector<float>>* storage) {
    std::vector<io::TorchOutTensor> out;
    storage->reserve(table.entries().size() + 4);
    for (const ParamInfo& p : table.entries()) {
        std::string hf;
        bool tr = false;
        EXPECT_TRUE(tf_to_hf_name(p.name, &hf, &tr)) << p.name;
        const auto v = table.view(w, p.name);
        std::vector<int64_t> shape = p.shape;
        storage->emplace_back(v.begin(), v.end());
        if (tr) {
            for (int64_t i = 0; i < shape[0]; ++i)
                for (int64_t j = 0; j < shape[1]; ++j)
                    storage->back()[j * shape[0] + i] = v[i * shape[1] + j];
            std::swap(shape[0], shape[1]);
        }
        out.push_back({hf, shape, storage->back()});
    }
    return out;
}

TEST(CheckpointAmbiguity, TwoNamesOfOneWeightMustHoldTheSameValues) {
    TmpDir dir;
    const ParamTable table(ambiguity_config(), Heads::pretraining);
    std::vector<float> w(table.total_floats());
    table.initialize(w, 5);
    const std::string name = "bert.encoder.layer.0.output.dense.weight";
    for (const bool equal : {true, false})
        for (const bool ddp_first : {true, false}) {
            std::vector<std::vector<float>> storage;
            std::vector<io::TorchOutTensor> t = hf_tensors(table, w, &storage);
            const auto it =
                std::find_if(t.begin(), t.end(), [&](const auto& x) { return x.name == name; });
            ASSERT_NE(it, t.end());
            storage.emplace_back(it->values.begin(), it->values.end());
            if (!equal) storage.back()[3] += 1.0f;
            const io::TorchOutTensor ddp{"module." + name, it->shape, storage.back()};
            if (ddp_first)
                t.insert(t.begin(), ddp);
            else
                t.push_back(ddp);
            const std::string path = dir.file("dup.pt");
            std::filesystem::remove(path);
            io::write_torch_checkpoint(path, t);
            std::vector<float> got(table.total_floats());
            ConvertOptions o;
            o.input = path;
            o.output = dir.file("dup.safetensors");
            o.overwrite = true;
            if (equal) {
                const ImportReport rep = import_torch_checkpoint(path, table, got);
                EXPECT_TRUE(rep.missing.empty());
                EXPECT_EQ(got, w);
                EXPECT_NE(convert_checkpoint(o).summary().find(" (a copy of "), std::string::npos);
                continue;
            }
            const std::string first = ddp_first ? "module." + name : name,
                              second = ddp_first ? name : "module." + name;
            const std::string want =
                "tensors \"" + first + "\" and \"" + second +
                "\" are both bert/encoder/layer_0/output/dense/kernel but hold different values";
            const std::string e = error_of([&] { import_torch_checkpoint(path, table, got); });
            EXPECT_NE(e.find(want), std::string::npos) << e;
            const std::string c = error_of([&] { convert_checkpoint(o); });
            EXPECT_NE(c.find(want), std::string::npos) << c;
        }
}

// BERT ties the MLM decoder to the word embeddings: a state dict's decoder holding other values
// (an untied model) is refused by convert as by the loaders; an equal copy is a copy.
TEST(CheckpointAmbiguity, AnUntiedDecoderIsRefusedByConvertAsByTheLoaders) {
    TmpDir dir;
    const ParamTable table(ambiguity_config(), Heads::pretraining);
    std::vector<float> w(table.total_floats());
    table.initialize(w, 6);
    for (const bool tied : {true, false}) {
        std::vector<std::vector<float>> storage;
        std::vector<io::TorchOutTensor> t = hf_tensors(table, w, &storage);
        const auto words = table.view(std::span<const float>(w), "bert/embeddings/word_embeddings");
        storage.emplace_back(words.begin(), words.end());
        if (!tied) storage.back()[5] += 0.5f;
        t.push_back({"cls.predictions.decoder.weight", {64, 16}, storage.back()});
        const std::string path = dir.file(tied ? "tied.pt" : "untied.pt");
        io::write_torch_checkpoint(path, t);
        ConvertOptions o;
        o.input = path;
        o.output = dir.file(tied ? "tied.safetensors" : "untied.safetensors");
        std::vector<float> got(table.total_floats());
        if (tied) {
            EXPECT_NE(convert_checkpoint(o).summary().find("cls.predictions.decoder.weight (a copy of "
                                                           "bert.embeddings.word_embeddings.weight)"),
                      std::string::npos);
            EXPECT_TRUE(import_torch_checkpoint(path, table, got).missing.empty());
            continue;
        }
        const std::string c = error_of([&] { convert_checkpoint(o); });
        EXPECT_NE(c.find("tensors \"bert.embeddings.word_embeddings.weight\" and \"cls.predictions.decoder.weight\" "
                         "are both bert/embeddings/word_embeddings but hold different values"),
                  std::string::npos) << c;
        EXPECT_FALSE(std::filesystem::exists(o.output));
        const std::string e = error_of([&] { import_torch_checkpoint(path, table, got); });
        EXPECT_NE(e.find("an untied decoder"), std::string::npos) << e;
    }
}

TEST(CheckpointAmbiguity, DeeperTfLayersThanTheConfigAreRefused) {
    TmpDir dir;
    const ParamTable two(ambiguity_config(2), Heads::pretraining),
        one(ambiguity_config(1), Heads::pretraining);
    std::vector<float> w(two.total_floats());
    two.initialize(w, 9);
    const std::string prefix = dir.file("model.ckpt-1");
    {
        io::TfBundleWriter bw(prefix);
        for (const ParamInfo& p : two.entries()) {
            const auto v = two.view(std::span<const float>(w), p.name);
            bw.add_copy(p.name, io::TfDType::float32, p.shape, v.data(), v.size() * sizeof(float));
        }
        bw.finish();
    }
    std::vector<float> got(two.total_floats());
    load_init_checkpoint(prefix, two, got);
    EXPECT_EQ(got, w);
    std::vector<float> small(one.total_floats());
    const std::string e = error_of([&] { load_init_checkpoint(prefix, one, small); });
    EXPECT_NE(e.find("expected encoder layers 0..0 (num_hidden_layers of the model), found 16 "
                     "tensors of deeper layers"),
              std::string::npos)
        << e;

    // The same tensors in our safetensors (converted from PREFIX.index without a config, so no
    // saved config catches it): refused the same way.
    ConvertOptions o;
    o.input = prefix + ".index";
    o.output = dir.file("two.safetensors");
    convert_checkpoint(o);
    load_init_checkpoint(o.output, two, got);
    EXPECT_EQ(got, w);
    const std::string es = error_of([&] { load_init_checkpoint(o.output, one, small); });
    EXPECT_NE(es.find(o.output + ": expected encoder layers 0..0 (num_hidden_layers of the model), "
                      "found 16 tensors of deeper layers"),
              std::string::npos)
        << es;
    // convert's --bert_config_file must give the input's layer count: fewer or more is an error.
    for (const int layers : {1, 3}) {
        const std::string cfg = dir.file("layers" + std::to_string(layers) + ".json");
        write_file_atomic(cfg, ambiguity_config(layers).to_json().dump());
        o.input = prefix;
        o.output = dir.file("out" + std::to_string(layers) + ".safetensors");
        o.bert_config_file = cfg;
        const std::string ec = error_of([&] { convert_checkpoint(o); });
        EXPECT_NE(ec.find("--bert_config_file=" + cfg + ": does not fit the weights: " +
                          (layers == 1 ? std::string("expected encoder layers 0..0")
                                       : std::string("num_hidden_layers 3, but the input has no tensor of encoder layer 2"))),
                  std::string::npos)
            << ec;
        EXPECT_FALSE(std::filesystem::exists(o.output));
    }
}

TEST(CheckpointAmbiguity, ConvertWritesFp32AndNeverAnEmptyCheckpoint) {
    TmpDir dir;
    const ParamTable table(ambiguity_config(), Heads::pretraining);
    std::vector<float> w(table.total_floats());
    table.initialize(w, 11);
    for (float& v : w) v = std::round(v * 1024) / 1024;  // fp16 holds these exactly
    // HF safetensors in fp16: our checkpoint holds their values widened to fp32
    const std::string hf = dir.file("hf16.safetensors");
    {
        std::vector<std::vector<float>> storage;
        io::SafetensorsWriter out(hf);
        out.set_metadata("format", "pt");
        std::vector<std::vector<uint16_t>> halves;
        halves.reserve(table.entries().size());
        for (const io::TorchOutTensor& t : hf_tensors(table, w, &storage)) {
            halves.emplace_back();
            for (const float f : t.values) halves.back().push_back(exact_half(f));
            out.add(t.name, io::DType::F16, t.shape, halves.back().data(),
                    halves.back().size() * 2);
        }
        out.write();
    }
    const std::string cfg = dir.file("bert_config.json");
    write_file_atomic(cfg, ambiguity_config().to_json().dump());
    ConvertOptions o;
    o.input = hf;
    o.output = dir.file("ours.safetensors");
    o.bert_config_file = cfg;
    convert_checkpoint(o);
    const io::SafetensorsReader r(o.output);
    for (const io::TensorInfo& t : r.tensors()) EXPECT_EQ(t.dtype, io::DType::F32) << t.name;
    std::vector<float> from_ours(w.size()), from_hf(w.size());
    load_checkpoint(o.output, table, from_ours);
    load_init_checkpoint(hf, table, from_hf);
    EXPECT_EQ(from_ours, from_hf);
    EXPECT_EQ(from_ours, w);
    // so do a TF bundle (google's graphs restore float32 variables: a DT_HALF one is refused) and
    // an HF file
    ConvertOptions to_tf = o, to_hf = o;
    to_tf.output = dir.file("tf16/model.ckpt");
    to_tf.to = "tf";
    convert_checkpoint(to_tf);
    const io::TfBundleReader tf(to_tf.output);
    for (const io::TfTensorEntry& e : tf.entries()) EXPECT_EQ(e.dtype, io::TfDType::float32) << e.name;
    std::vector<float> from_tf(w.size());
    load_init_checkpoint(to_tf.output, table, from_tf);
    EXPECT_EQ(from_tf, w);
    to_hf.output = dir.file("hf32");
    to_hf.to = "hf";
    convert_checkpoint(to_hf);
    const io::SafetensorsReader hf32(to_hf.output + "/model.safetensors");
    for (const io::TensorInfo& t : hf32.tensors()) EXPECT_EQ(t.dtype, io::DType::F32) << t.name;
    // nothing numeric to convert (a buffer only): an error, no file
    const std::string buffers = dir.file("buffers.safetensors");
    {
        io::SafetensorsWriter out(buffers);
        out.set_metadata("format", "pt");
        out.add_i64("bert.embeddings.position_ids", {1, 3}, std::vector<int64_t>{0, 1, 2});
        out.write();
    }
    for (const char* to : {"safetensors", "tf"}) {
        ConvertOptions e;
        e.input = buffers;
        e.output = dir.file(std::string("empty_") + to);
        e.to = to;
        const std::string why = error_of([&] { convert_checkpoint(e); });
        EXPECT_NE(why.find("expected tensors to convert, found none"), std::string::npos) << why;
        EXPECT_FALSE(std::filesystem::exists(e.output + ".index"));
        EXPECT_FALSE(std::filesystem::exists(e.output));
    }
}

// An NVIDIA checkpoint converted without its config keeps the vocabulary's padding rows (61 ->
// 64) under TF names: loaded with the model's config, as the .pt itself, the rows are left out.
TEST(CheckpointAmbiguity, NvidiaVocabularyPaddingUnderTfNamesIsLeftOut) {
    TmpDir dir;
    BertConfig c = ambiguity_config(), padded = ambiguity_config();
    c.vocab_size = 61;
    padded.vocab_size = 64;
    const ParamTable table(c, Heads::pretraining), wide(padded, Heads::pretraining);
    std::vector<float> w(wide.total_floats());
    wide.initialize(w, 9);
    const std::string st = dir.file("nv.safetensors");  // as convert writes it: no saved config
    {
        io::SafetensorsWriter out(st);
        out.set_metadata("format", kCheckpointFormat);
        for (const ParamInfo& p : wide.entries())
            out.add(p.name, io::DType::F32, p.shape, w.data() + p.offset, p.size * 4);
        out.write();
    }
    ConvertOptions o;
    o.input = st;
    o.output = dir.file("tf/model.ckpt");
    o.to = "tf";
    convert_checkpoint(o);
    for (const std::string& path : {st, o.output}) {
        std::vector<float> got(table.total_floats());
        load_init_checkpoint(path, table, got);
        for (const ParamInfo& p : table.entries())  // the first 61 rows; the rest as they are
            EXPECT_EQ(std::memcmp(got.data() + p.offset, w.data() + wide.find(p.name)->offset, p.size * 4), 0)
                << path << ": " << p.name;
    }
    // a row count that is no such padding is still an error naming both shapes
    c.vocab_size = 56;
    const ParamTable narrow(c, Heads::pretraining);
    std::vector<float> got(narrow.total_floats());
    const std::string why = error_of([&] { load_init_checkpoint(st, narrow, got); });
    EXPECT_NE(why.find("[56, 16]"), std::string::npos) << why;
    EXPECT_NE(why.find("[64, 16]"), std::string::npos) << why;
}

// convert refuses, before writing anything: an integer model weight (writers would drop it or
// keep it as integers), a directory where an output file goes, a --bert_config_file that
// contradicts a bertbench input's saved config; and it reads our checkpoint by its TF-style name.
TEST(CheckpointAmbiguity, ConvertChecksItsInputsAndOutputsBeforeWriting) {
    TmpDir dir;
    const ParamTable table(ambiguity_config(), Heads::pretraining);
    std::vector<float> w(table.total_floats());
    table.initialize(w, 5);
    const std::string ours = dir.file("model.ckpt-7.safetensors");
    save_checkpoint(ours, table, w);
    {
        ConvertOptions o;
        o.input = dir.file("model.ckpt-7");  // as --init_checkpoint takes it
        o.output = dir.file("copy.safetensors");
        convert_checkpoint(o);
        std::vector<float> back(w.size());
        load_checkpoint(o.output, table, back);
        EXPECT_EQ(back, w);
    }
    const std::string ints = dir.file("ints.safetensors");
    {
        io::SafetensorsWriter out(ints);
        out.set_metadata("format", "bertbench");
        for (const ParamInfo& p : table.entries()) {
            const auto v = table.view(std::span<const float>(w), p.name);
            if (p.name == "bert/encoder/layer_0/attention/self/query/kernel") {
                std::vector<int64_t> iv(v.size(), 1);
                out.add_i64(p.name, p.shape, iv);
            } else {
                out.add(p.name, io::DType::F32, p.shape, v.data(), v.size() * sizeof(float));
            }
        }
        out.write();
    }
    for (const char* to : {"pt", "hf", "tf"}) {
        ConvertOptions o;
        o.input = ints;
        o.output = dir.file(std::string("int_") + to);
        o.to = to;
        const std::string e = error_of([&] { convert_checkpoint(o); });
        EXPECT_NE(e.find("tensor \"bert/encoder/layer_0/attention/self/query/kernel\": expected a "
                         "floating-point weight, found I64"),
                  std::string::npos) << to << ": " << e;
        EXPECT_FALSE(std::filesystem::exists(o.output)) << to;
    }
    // --to=hf into a directory whose config.json is a directory: nothing written
    const std::string hf_dir = dir.file("hf");
    std::filesystem::create_directories(hf_dir + "/config.json");
    ConvertOptions h;
    h.input = ours;
    h.output = hf_dir;
    h.to = "hf";
    h.overwrite = true;
    std::string e = error_of([&] { convert_checkpoint(h); });
    EXPECT_NE(e.find(hf_dir + "/config.json: expected a file or no such path, found a directory"), std::string::npos) << e;
    EXPECT_FALSE(std::filesystem::exists(hf_dir + "/model.safetensors"));
    // ... and without --overwrite the same (not a hint to --overwrite, which would refuse it too)
    h.overwrite = false;
    e = error_of([&] { convert_checkpoint(h); });
    EXPECT_NE(e.find(hf_dir + "/config.json: expected a file or no such path, found a directory"), std::string::npos) << e;
    // an output under a regular file: the flag and the directory named (was filesystem_error's text)
    const std::string file = dir.file("a_file");
    write_file_atomic(file, "x");
    h.output = file + "/m.safetensors";
    h.to = "safetensors";
    e = error_of([&] { convert_checkpoint(h); });
    EXPECT_NE(e.find("--output=" + file + "/m.safetensors: cannot create the directory " + file + " ("), std::string::npos)
        << e;
    // a config that gives the same shapes but another activation than the one saved with the weights
    BertConfig erf = ambiguity_config();
    erf.hidden_act = erf.hidden_act == "gelu" ? "relu" : "gelu";
    const std::string cfg = dir.file("other_act.json");
    write_file_atomic(cfg, erf.to_json().dump());
    h.output = dir.file("hf2");
    h.bert_config_file = cfg;
    e = error_of([&] { convert_checkpoint(h); });
    EXPECT_NE(e.find(ours + ": bert_config.hidden_act: expected"), std::string::npos) << e;
    EXPECT_NE(e.find("(--bert_config_file=" + cfg + ")"), std::string::npos) << e;
    EXPECT_FALSE(std::filesystem::exists(h.output));
}

TEST(CheckpointAmbiguity, TfStateFileKeepsTheCheckpointsItListed) {
    TmpDir dir;
    const ParamTable table(ambiguity_config(), Heads::pretraining);
    std::vector<float> w(table.total_floats());
    table.initialize(w, 13);
    const std::string ours = dir.file("ours.safetensors");
    {
        io::SafetensorsWriter out(ours);
        for (const ParamInfo& p : table.entries())
            out.add_f32(p.name, p.shape, table.view(std::span<const float>(w), p.name));
        out.set_metadata("format", "bertbench-checkpoint-v1");
        out.set_metadata("bert_config", ambiguity_config().to_json().dump());
        out.write();
    }
    write_file_atomic(dir.file("checkpoint"),
                      "model_checkpoint_path: \"model.ckpt-28252\"\n"
                      "all_model_checkpoint_paths: \"model.ckpt-28000\"\n"
                      "all_model_checkpoint_paths: \"model.ckpt-28252\"\n");
    ConvertOptions o;
    o.input = ours;
    o.output = dir.file("export-1");
    convert_checkpoint(o);
    EXPECT_EQ(read_file(dir.file("checkpoint")),
              "model_checkpoint_path: \"export-1\"\n"
              "all_model_checkpoint_paths: \"model.ckpt-28000\"\n"
              "all_model_checkpoint_paths: \"model.ckpt-28252\"\n"
              "all_model_checkpoint_paths: \"export-1\"\n");
    // a --bert_config_file that is that state file is an input, not an output
    ConvertOptions c = o;
    c.output = dir.file("export-2");
    c.bert_config_file = dir.file("checkpoint");
    EXPECT_NE(error_of([&] { convert_checkpoint(c); }).find("state file"), std::string::npos);
}

}  // namespace
}  // namespace bertbench::model
