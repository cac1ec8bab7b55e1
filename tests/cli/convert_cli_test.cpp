// `bertbench convert` through the real binary: safetensors -> TF -> safetensors and
// safetensors -> HF -> safetensors give back every tensor bit for bit; the real keras_bert_tiny TF
// checkpoint -> safetensors -> TF gives back its .index and .data files byte for byte; HF output has
// HF names, [out, in] kernels and a config.json; existing outputs, output == input and unknown
// formats, and a --bert_config_file that does not fit the weights, are one-line errors with a
// non-zero exit.
#include <gtest/gtest.h>

#include <algorithm>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <set>
#include <string>
#include <vector>
#include <nlohmann/json.hpp>

#include "cli/run_util.hpp"
#include "core/fs.hpp"
#include "io/safetensors.hpp"
#include "io/tf_bundle.hpp"
#include "io/torch_checkpoint.hpp"
#include "model/checkpoint.hpp"
#include "test_util.hpp"

namespace bertbench {
namespace {

using bertbench::testing::run_bertbench;
using bertbench::testing::TmpDir;

std::string tiny_prefix() {
    const char* d = std::getenv("BB_SHARED_DIR");
    return std::string(d ? d : "/work/shared") + "/golden/tf_checkpoint/keras_bert_tiny/bert_model.ckpt";
}

model::BertConfig small_config() {
    model::BertConfig c;
    c.vocab_size = 23;
    c.hidden_size = 8;
    c.num_hidden_layers = 2;
    c.num_attention_heads = 2;
    c.intermediate_size = 12;
    c.max_position_embeddings = 16;
    return c;
}

// Every tensor of two safetensors files: same names, dtypes, shapes and bytes.
void expect_same_tensors(const std::string& a, const std::string& b) {
    const io::SafetensorsReader ra(a), rb(b);
    ASSERT_EQ(ra.tensors().size(), rb.tensors().size());
    for (const io::TensorInfo& t : ra.tensors()) {
        const io::TensorInfo* u = rb.find(t.name);
        ASSERT_NE(u, nullptr) << t.name;
        EXPECT_EQ(t.dtype, u->dtype) << t.name;
        EXPECT_EQ(t.shape, u->shape) << t.name;
        const auto x = ra.bytes(t), y = rb.bytes(*u);
        ASSERT_EQ(x.size(), y.size()) << t.name;
        EXPECT_EQ(std::memcmp(x.data(), y.data(), x.size()), 0) << t.name;
    }
}

// A checkpoint as pretrain writes it: weights, adam slots and step counters.
std::string make_checkpoint(const TmpDir& dir, bool with_optimizer, model::Heads heads = model::Heads::pretraining) {
    const model::ParamTable table(small_config(), heads);
    std::vector<float> w(table.total_floats()), m(table.total_floats());
    table.initialize(w, 3);
    table.initialize(m, 4);
    const std::string path = dir.file("a.safetensors");
    model::CheckpointWriter cw(path, table);
    cw.add_table(w);
    if (with_optimizer) {
        cw.add_table(m, "/adam_m");
        cw.add_table(m, "/adam_v");
        const std::vector<int64_t> step = {77};
        cw.add_i64("bertbench/global_step", step);
    }
    cw.commit();
    return path;
}

TEST(ConvertCli, SafetensorsToTfAndBackIsBitExact) {
    TmpDir dir;
    const std::string a = make_checkpoint(dir, true);
    const std::string prefix = dir.file("tf/run/model.ckpt-77");  // its directories created, as TF's Saver
    auto r = run_bertbench("convert --input=" + a + " --output=" + prefix);
    ASSERT_EQ(r.exit_code, 0) << r.out;
    EXPECT_NE(r.out.find("-> TensorFlow checkpoint"), std::string::npos) << r.out;
    EXPECT_TRUE(std::filesystem::exists(prefix + ".index"));
    EXPECT_TRUE(std::filesystem::exists(prefix + ".data-00000-of-00001"));
    // as TF's Saver leaves it: its scalar int64 global_step (what an Estimator restores) and the
    // directory's `checkpoint` state file naming it (tf.train.latest_checkpoint)
    const io::TfBundleReader tf(prefix);
    const io::TfTensorEntry* step = tf.find("global_step");
    ASSERT_NE(step, nullptr);
    EXPECT_EQ(step->dtype, io::TfDType::int64);
    EXPECT_TRUE(step->shape.empty());
    EXPECT_EQ(tf.read_i64(*step), std::vector<int64_t>{77});
    EXPECT_EQ(read_file(dir.file("tf/run/checkpoint")),
              "model_checkpoint_path: \"model.ckpt-77\"\nall_model_checkpoint_paths: \"model.ckpt-77\"\n");
    r = run_bertbench("convert --input=" + prefix + " --output=" + dir.file("b.safetensors"));
    ASSERT_EQ(r.exit_code, 0) << r.out;
    expect_same_tensors(a, dir.file("b.safetensors"));
    expect_same_tensors(dir.file("b.safetensors"), a);
    // --output named by one of the bundle's files, as --input may be: that file's prefix
    for (const std::string file : {".index", ".data-00000-of-00001"}) {
        const std::string other = dir.file("tf2/model.ckpt-5");
        r = run_bertbench("convert --overwrite --input=" + a + " --output=" + other + file);
        ASSERT_EQ(r.exit_code, 0) << r.out;
        EXPECT_NE(r.out.find("writing the TensorFlow checkpoint of prefix " + other), std::string::npos) << r.out;
        EXPECT_TRUE(std::filesystem::exists(other + ".index"));
        EXPECT_TRUE(std::filesystem::exists(other + ".data-00000-of-00001"));
        EXPECT_FALSE(std::filesystem::exists(other + file + ".index"));
    }
}

// A training checkpoint of the small model: weights (seed 3), LAMB's moments as bertbench keeps
// them (seeds 4, 5) and its beta powers 0.25, 0.5.
struct LambCheckpoint {
    const model::ParamTable table{small_config(), model::Heads::pretraining};
    std::vector<float> w = std::vector<float>(table.total_floats()), m = w, v = w;
    explicit LambCheckpoint(const std::string& path) {
        table.initialize(w, 3), table.initialize(m, 4), table.initialize(v, 5);
        model::CheckpointWriter cw(path, table);
        cw.add_table(w);
        cw.add_table(m, "/adam_m");
        cw.add_table(v, "/adam_v");
        const float powers[2] = {0.25f, 0.5f};
        cw.add_f32("bertbench/beta_powers", powers);
        cw.commit();
    }
};

// --tf_slots=lamb: the slots under the names MLPerf's lamb_optimizer_v1.py graph restores
// (<var>/LAMB = m, <var>/LAMB_1 = v, the scalars beta1_power and beta2_power), the weights as they
// are; refused for a checkpoint without optimizer state and for other formats.
TEST(ConvertCli, TfSlotsNamedAsMlperfLamb) {
    TmpDir dir;
    const std::string a = dir.file("a.safetensors");
    const LambCheckpoint ck(a);
    const model::ParamTable& table = ck.table;
    const std::vector<float>& w = ck.w;
    const std::vector<float>& m = ck.m;
    const std::vector<float>& v = ck.v;
    const std::string prefix = dir.file("tf/model.ckpt-5");
    auto r = run_bertbench("convert --tf_slots=lamb --input=" + a + " --output=" + prefix);
    ASSERT_EQ(r.exit_code, 0) << r.out;
    const io::TfBundleReader tf(prefix);
    EXPECT_NE(r.out.find(std::to_string(tf.entries().size()) + " tensors"), std::string::npos)
        << r.out;
    const auto f32 = [&](const std::string& name) {
        const io::TfTensorEntry* e = tf.find(name);
        EXPECT_NE(e, nullptr) << name;
        if (!e) return std::vector<float>{};
        std::vector<float> out(static_cast<size_t>(e->numel()));
        tf.read_f32(*e, out);
        return out;
    };
    const auto& first = table.entries().front();
    const auto slice = [&](const std::vector<float>& x) {
        return std::vector<float>(x.begin() + static_cast<ptrdiff_t>(first.offset),
                                  x.begin() + static_cast<ptrdiff_t>(first.offset + first.size));
    };
    EXPECT_EQ(f32(first.name), slice(w));
    EXPECT_EQ(f32(first.name + "/LAMB"), slice(m));
    EXPECT_EQ(f32(first.name + "/LAMB_1"), slice(v));
    EXPECT_EQ(tf.find(first.name + "/adam_m"), nullptr);
    EXPECT_EQ(f32("beta1_power"), std::vector<float>{0.25f});
    EXPECT_EQ(f32("beta2_power"), std::vector<float>{0.5f});
    EXPECT_TRUE(tf.find("beta1_power")->shape.empty());
    // back to ours, the slots keep MLPerf's names; --tf_slots=lamb on that says so (it said "found
    // no moments"), and without it the same TF tensors come back
    ASSERT_EQ(run_bertbench("convert --input=" + prefix + " --output=" + dir.file("back.safetensors")).exit_code, 0);
    r = run_bertbench("convert --tf_slots=lamb --input=" + dir.file("back.safetensors") + " --output=" +
                      dir.file("tf3/model.ckpt-5"));
    EXPECT_NE(r.exit_code, 0);
    EXPECT_NE(r.out.find("found its slots already under MLPerf's LAMB names"), std::string::npos) << r.out;
    ASSERT_EQ(run_bertbench("convert --input=" + dir.file("back.safetensors") + " --output=" +
                            dir.file("tf3/model.ckpt-5")).exit_code, 0);
    const io::TfBundleReader again(dir.file("tf3/model.ckpt-5"));
    EXPECT_EQ(again.entries().size(), tf.entries().size());
    EXPECT_NE(again.find(first.name + "/LAMB_1"), nullptr);
    // without optimizer state, or another format: one line each
    r = run_bertbench("convert --tf_slots=lamb --input=" + make_checkpoint(dir, false) +
                      " --output=" + dir.file("tf2/model.ckpt-1"));
    EXPECT_NE(r.exit_code, 0);
    EXPECT_NE(r.out.find("--tf_slots=lamb: expected a training checkpoint with the optimizer's "
                         "state"),
              std::string::npos)
        << r.out;
    r = run_bertbench("convert --tf_slots=lamb --to=hf --input=" + a + " --output=" + dir.file("hf"));
    EXPECT_NE(r.out.find("--tf_slots=lamb: names the optimizer slots of a TensorFlow checkpoint"),
              std::string::npos)
        << r.out;
    r = run_bertbench("convert --tf_slots=nadam --input=" + a + " --output=" + dir.file("x"));
    EXPECT_NE(r.exit_code, 0);
    EXPECT_FALSE(std::filesystem::exists(dir.file("x.index")));
    EXPECT_NE(r.out.find("--tf_slots=nadam: expected adam or lamb"), std::string::npos) << r.out;
}

// --tf_gradient_accumulators: MLPerf's checkpoint_add_gradacc.py's zeros beside every variable of
// the LAMB graph's checkpoint (the moments, the powers and the step included; bertbench's own
// resume state not), for its run_pretraining.py --steps_per_update > 1.
TEST(ConvertCli, TfGradientAccumulatorsAsCheckpointAddGradacc) {
    TmpDir dir;
    const std::string a = dir.file("a.safetensors");
    const LambCheckpoint ck(a);
    const model::ParamTable& table = ck.table;
    const std::string prefix = dir.file("tf/model.ckpt-5");
    auto r = run_bertbench("convert --tf_slots=lamb --tf_gradient_accumulators --input=" + a +
                           " --output=" + prefix);
    ASSERT_EQ(r.exit_code, 0) << r.out;
    const io::TfBundleReader tf(prefix);
    size_t vars = 0, accumulators = 0;
    for (const auto& e : tf.entries()) {
        if (e.name.ends_with("/GradientAccumulator")) {
            ++accumulators;
            const std::string of = e.name.substr(0, e.name.size() - 20);
            const io::TfTensorEntry* var = tf.find(of);
            ASSERT_NE(var, nullptr) << e.name;
            EXPECT_EQ(e.shape, var->shape) << e.name;
            EXPECT_EQ(e.dtype, var->dtype) << e.name;
            EXPECT_FALSE(of.starts_with("bertbench/")) << e.name;
            if (e.dtype == io::TfDType::float32) {
                std::vector<float> x(static_cast<size_t>(e.numel()));
                tf.read_f32(e, x);
                EXPECT_TRUE(std::all_of(x.begin(), x.end(), [](float f) { return f == 0.0f; }))
                    << e.name;
            }
        } else if (!e.name.starts_with("bertbench/")) {
            ++vars;
            EXPECT_NE(tf.find(e.name + "/GradientAccumulator"), nullptr) << e.name;
        }
    }
    EXPECT_EQ(accumulators, vars);
    EXPECT_GT(vars, 3 * table.entries().size());  // weights, both moments, the powers
    EXPECT_NE(tf.find("beta1_power/GradientAccumulator"), nullptr);
    EXPECT_NE(r.out.find(std::to_string(tf.entries().size()) + " tensors"), std::string::npos)
        << r.out;
    // the checkpoint still reads as the model's (the accumulators are optimizer state)
    r = run_bertbench("convert --to=safetensors --input=" + prefix +
                      " --output=" + dir.file("b.safetensors"));
    EXPECT_EQ(r.exit_code, 0) << r.out;
    r = run_bertbench("convert --tf_gradient_accumulators --to=hf --input=" + a +
                      " --output=" + dir.file("hf"));
    EXPECT_NE(r.exit_code, 0);
    EXPECT_NE(r.out.find("--tf_gradient_accumulators: adds variables of MLPerf's TensorFlow graph"),
              std::string::npos)
        << r.out;
}

TEST(ConvertCli, SafetensorsToHfAndBackIsBitExact) {
    TmpDir dir;
    const std::string a = make_checkpoint(dir, false);
    auto r = run_bertbench("convert --to=hf --input=" + a + " --output=" + dir.file("hf"));
    ASSERT_EQ(r.exit_code, 0) << r.out;
    const nlohmann::json cfg = nlohmann::json::parse(read_file(dir.file("hf/config.json")));
    EXPECT_EQ(cfg["hidden_size"], 8);
    EXPECT_EQ(cfg["model_type"], "bert");
    EXPECT_EQ(cfg["architectures"][0], "BertForPreTraining");
    EXPECT_EQ(cfg["hidden_act"], "gelu_new");  // the reference's tanh GELU
    // floats as a user writes them: 0.1, not the float's exact double 0.10000000149011612
    EXPECT_EQ(cfg["hidden_dropout_prob"].get<double>(), 0.1);
    EXPECT_EQ(cfg["initializer_range"].get<double>(), 0.02);
    const io::SafetensorsReader hf(dir.file("hf/model.safetensors"));
    const io::TensorInfo* q = hf.find("bert.encoder.layer.0.intermediate.dense.weight");
    ASSERT_NE(q, nullptr);
    EXPECT_EQ(q->shape, (std::vector<int64_t>{12, 8}));  // [out, in]
    EXPECT_EQ(hf.find("bert/encoder/layer_0/intermediate/dense/kernel"), nullptr);
    // The HF file also loads through the existing import path, transposed back.
    const io::SafetensorsReader ours(a);
    const std::vector<float> k = ours.read_f32("bert/encoder/layer_0/intermediate/dense/kernel");
    const std::vector<float> w = hf.read_f32("bert.encoder.layer.0.intermediate.dense.weight");
    EXPECT_EQ(k[1 * 12 + 5], w[5 * 8 + 1]);  // kernel[in=1][out=5] == weight[out=5][in=1]
    r = run_bertbench("convert --input=" + dir.file("hf/model.safetensors") +
                      " --output=" + dir.file("c.safetensors"));
    ASSERT_EQ(r.exit_code, 0) << r.out;
    expect_same_tensors(a, dir.file("c.safetensors"));
    expect_same_tensors(dir.file("c.safetensors"), a);
}

// save_pretrained's directory needs no --bert_config_file: its config.json (model_type "bert")
// beside the weights is read, as from_pretrained reads it, and said; a config.json without
// model_type (a run's record, or google's file) is not taken for it.
TEST(ConvertCli, HfConfigBesideTheWeightsIsRead) {
    TmpDir dir;
    const std::string a = make_checkpoint(dir, false);
    ASSERT_EQ(run_bertbench("convert --to=hf --input=" + a + " --output=" + dir.file("hf")).exit_code, 0);
    auto r = run_bertbench("convert --to=hf --input=" + dir.file("hf/model.safetensors") + " --output=" + dir.file("hf2"));
    ASSERT_EQ(r.exit_code, 0) << r.out;
    EXPECT_NE(r.out.find("the model's config is " + dir.file("hf/config.json")), std::string::npos) << r.out;
    EXPECT_EQ(nlohmann::json::parse(read_file(dir.file("hf2/config.json"))),
              nlohmann::json::parse(read_file(dir.file("hf/config.json"))));
    // that config.json is an input: even --overwrite does not replace it (a pytorch_model.bin
    // converted into its own directory dropped every key bertbench does not model)
    ASSERT_EQ(run_bertbench("convert --to=pt --input=" + dir.file("hf/model.safetensors") + " --output=" +
                            dir.file("hf/pytorch_model.bin")).exit_code, 0);
    const std::string before = read_file(dir.file("hf/config.json"));
    r = run_bertbench("convert --to=hf --overwrite --input=" + dir.file("hf/pytorch_model.bin") + " --output=" + dir.file("hf"));
    EXPECT_EQ(r.exit_code, 1) << r.out;
    EXPECT_NE(r.out.find(dir.file("hf/config.json") + " is the input file"), std::string::npos) << r.out;
    EXPECT_EQ(read_file(dir.file("hf/config.json")), before);
    // into ours, the config goes along (its metadata), so eval and squad need none either
    r = run_bertbench("convert --input=" + dir.file("hf/model.safetensors") + " --output=" + dir.file("c.safetensors"));
    ASSERT_EQ(r.exit_code, 0) << r.out;
    model::BertConfig got;
    ASSERT_TRUE(model::checkpoint_config(dir.file("c.safetensors"), &got));
    nlohmann::json want = small_config().to_json();
    want["hidden_act"] = "gelu_new";  // HF's name of the same tanh form
    EXPECT_EQ(got.to_json(), want);
    // a config.json that is not a BERT model's: the weights carry none, as before
    std::filesystem::create_directories(dir.file("run"));
    std::filesystem::copy_file(dir.file("hf/model.safetensors"), dir.file("run/model.safetensors"));
    write_file_atomic(dir.file("run/config.json"), R"({"flags": {}, "bert_config": {"hidden_size": 8}})");
    r = run_bertbench("convert --to=hf --input=" + dir.file("run/model.safetensors") + " --output=" + dir.file("hf3"));
    EXPECT_EQ(r.exit_code, 1) << r.out;
    EXPECT_NE(r.out.find("--bert_config_file: expected the model's bert_config.json"), std::string::npos) << r.out;
    EXPECT_FALSE(std::filesystem::exists(dir.file("hf3")));
}

// A SQuAD model (its table has the pooler, as google's run_squad.py checkpoints do) goes to HF's
// BertForQuestionAnswering layout without the pooler, which that class lacks (a strict
// load_state_dict refuses extra keys); NVIDIA's layout keeps it (its BertModel has one).
TEST(ConvertCli, SquadModelsLeaveThePoolerOutOfHfLayouts) {
    TmpDir dir;
    const std::string a = make_checkpoint(dir, false, model::Heads::squad);
    auto r = run_bertbench("convert --to=pt --input=" + a + " --output=" + dir.file("qa.bin"));
    ASSERT_EQ(r.exit_code, 0) << r.out;
    EXPECT_NE(r.out.find("bert/pooler/dense/kernel (HF's BertForQuestionAnswering has no pooler)"), std::string::npos)
        << r.out;
    const auto names = [](const std::string& pt) {
        std::set<std::string> n;
        const io::TorchCheckpointReader reader(pt);
        for (const auto& t : reader.tensors()) n.insert(t.name);
        return n;
    };
    const std::set<std::string> hf_pt = names(dir.file("qa.bin"));
    EXPECT_TRUE(hf_pt.count("qa_outputs.weight"));
    EXPECT_TRUE(hf_pt.count("bert.encoder.layer.1.output.dense.weight"));
    EXPECT_FALSE(hf_pt.count("bert.pooler.dense.weight"));
    r = run_bertbench("convert --to=nvidia_pt --input=" + a + " --output=" + dir.file("nv.pt"));
    ASSERT_EQ(r.exit_code, 0) << r.out;
    EXPECT_TRUE(names(dir.file("nv.pt")).count("bert.pooler.dense_act.weight"));
    r = run_bertbench("convert --to=hf --input=" + a + " --output=" + dir.file("hf"));
    ASSERT_EQ(r.exit_code, 0) << r.out;
    const io::SafetensorsReader hf(dir.file("hf/model.safetensors"));
    EXPECT_EQ(hf.find("bert.pooler.dense.weight"), nullptr);
    EXPECT_NE(hf.find("qa_outputs.weight"), nullptr);
    EXPECT_EQ(nlohmann::json::parse(read_file(dir.file("hf/config.json")))["architectures"][0],
              "BertForQuestionAnswering");
    // a pretraining model keeps its pooler (BertForPreTraining has one)
    const std::string p = make_checkpoint(dir, false);
    r = run_bertbench("convert --to=pt --input=" + p + " --output=" + dir.file("pre.bin"));
    ASSERT_EQ(r.exit_code, 0) << r.out;
    EXPECT_TRUE(names(dir.file("pre.bin")).count("bert.pooler.dense.weight"));
}

// Every kind of output may name a directory that does not exist yet: it is created, as TF's
// Saver creates a prefix's (before, only --to=tf and an HF directory were).
TEST(ConvertCli, OutputDirectoriesAreCreated) {
    TmpDir dir;
    const std::string a = make_checkpoint(dir, false);
    for (const std::string out : {"st/new/c.safetensors", "pt/new/c.pt", "nv/new/ckpt_1.pt", "hf/new/model.safetensors",
                                   "tf/new/model.ckpt-1"}) {
        const std::string to = out.starts_with("nv/") ? " --to=nvidia_pt" : out.starts_with("hf/") ? " --to=hf" : "";
        const auto r = run_bertbench("convert" + to + " --input=" + a + " --output=" + dir.file(out));
        ASSERT_EQ(r.exit_code, 0) << out << ": " << r.out;
        EXPECT_TRUE(std::filesystem::exists(dir.file(out.starts_with("tf/") ? out + ".index" : out))) << out;
    }
    expect_same_tensors(a, dir.file("st/new/c.safetensors"));
    EXPECT_TRUE(std::filesystem::exists(dir.file("hf/new/config.json")));
}

// The output's extension chooses the format in any case, and .pth (PyTorch's own) is a PyTorch
// file: `--output=model.pth` once wrote a TensorFlow bundle model.pth.index/.data beside a
// `checkpoint` file.
TEST(ConvertCli, ExtensionsInAnyCaseAndPthChooseTheFormat) {
    TmpDir dir;
    const std::string a = make_checkpoint(dir, false);
    for (const std::string out : {"m.pth", "m.PT", "m.Bin", "m.SafeTensors"}) {
        const auto r = run_bertbench("convert --input=" + a + " --output=" + dir.file(out));
        ASSERT_EQ(r.exit_code, 0) << out << ": " << r.out;
        EXPECT_NE(r.out.find(out.ends_with("s") ? "safetensors" : "-> PyTorch checkpoint"), std::string::npos)
            << out << ": " << r.out;
        EXPECT_FALSE(std::filesystem::exists(dir.file(out + ".index"))) << out;
        std::string magic(2, '\0');
        std::ifstream(dir.file(out), std::ios::binary).read(magic.data(), 2);
        EXPECT_EQ(magic == "PK", !out.ends_with("s")) << out << ": a zip archive for PyTorch";
    }
    EXPECT_FALSE(std::filesystem::exists(dir.file("checkpoint")));
    expect_same_tensors(a, dir.file("m.SafeTensors"));
    // --to naming the other format than the name: refused, nothing written (a PyTorch zip named
    // .safetensors fails in every safetensors loader, far from here)
    for (const auto& [flags, says] : std::vector<std::pair<std::string, std::string>>{
             {"--to=nvidia_pt --output=" + dir.file("n.safetensors"), "a PyTorch file under a safetensors name"},
             {"--to=pt --output=" + dir.file("n.SAFETENSORS"), "a PyTorch file under a safetensors name"},
             {"--to=hf --output=" + dir.file("n.bin"), "a safetensors file under a PyTorch name"},
             {"--to=safetensors --output=" + dir.file("n.pth"), "a safetensors file under a PyTorch name"}}) {
        const auto r = run_bertbench("convert --input=" + a + " " + flags);
        EXPECT_EQ(r.exit_code, 1) << flags << ": " << r.out;
        EXPECT_NE(r.out.find(says), std::string::npos) << flags << ": " << r.out;
    }
    for (const char* out : {"n.safetensors", "n.SAFETENSORS", "n.bin", "n.pth"})
        EXPECT_FALSE(std::filesystem::exists(dir.file(out))) << out;
}

TEST(ConvertCli, RealTfCheckpointRoundTripsByteForByte) {
    TmpDir dir;
    auto r = run_bertbench("convert --input=" + tiny_prefix() + " --output=" + dir.file("k.safetensors"));
    ASSERT_EQ(r.exit_code, 0) << r.out;
    EXPECT_NE(r.out.find("139 tensors"), std::string::npos) << r.out;
    r = run_bertbench("convert --input=" + dir.file("k.safetensors") + " --output=" + dir.file("k2"));
    ASSERT_EQ(r.exit_code, 0) << r.out;
    EXPECT_EQ(read_file(dir.file("k2.index")), read_file(tiny_prefix() + ".index"));
    EXPECT_EQ(read_file(dir.file("k2.data-00000-of-00001")),
              read_file(tiny_prefix() + ".data-00000-of-00001"));
    // TF -> HF needs a config; with keras_bert_tiny's it writes 46 weights (adam slots skipped).
    r = run_bertbench("convert --to=hf --input=" + tiny_prefix() + " --output=" + dir.file("hf"));
    EXPECT_EQ(r.exit_code, 1);
    EXPECT_NE(r.out.find("--bert_config_file"), std::string::npos) << r.out;
    const std::string cfg = std::filesystem::path(tiny_prefix()).parent_path() / "bert_config.json";
    r = run_bertbench("convert --to=hf --input=" + tiny_prefix() + " --output=" + dir.file("hf") +
                      " --bert_config_file=" + cfg);
    ASSERT_EQ(r.exit_code, 0) << r.out;
    EXPECT_NE(r.out.find("46 tensors written"), std::string::npos) << r.out;
    EXPECT_NE(r.out.find("skipped 93"), std::string::npos) << r.out;
}

// eval takes a TF prefix; a TF checkpoint carries no config, so it asks for one.
TEST(ConvertCli, EvalWithTfCheckpointNeedsAConfig) {
    const auto r = run_bertbench("eval --init_checkpoint=" + tiny_prefix() +
                                 " --input_file=" + tiny_prefix() + ".index");
    EXPECT_EQ(r.exit_code, 1);
    EXPECT_NE(r.out.find("--bert_config_file"), std::string::npos) << r.out;
    EXPECT_NE(r.out.find("is a TensorFlow checkpoint and carries no config"), std::string::npos) << r.out;
}

// A TF prefix names its .index and data shards: an output named as one of them is refused as the
// input it is (eval's --json overwrote the index, exit 0; bench's scenario outputs and
// --json-summary go through the same model::files_read, squad's and the train loop's outputs
// through checkpoint_files).
TEST(ConvertCli, OutputsOntoATfCheckpointsFilesAreRefused) {
    TmpDir dir;
    const std::string prefix = dir.file("m.ckpt"), other = dir.file("other");
    const std::vector<std::string> files{prefix + ".data-00000-of-00001", prefix + ".index"};
    for (const std::string& f : files)
        std::filesystem::copy_file(tiny_prefix() + f.substr(prefix.size()), f);
    for (const std::string& name : {prefix, prefix + ".index", files[0]}) {
        std::vector<std::string> got = model::checkpoint_files(name);
        std::sort(got.begin(), got.end());
        EXPECT_EQ(got, files) << name;
    }
    EXPECT_EQ(model::checkpoint_files(other), std::vector<std::string>{other});
    const std::string cfg = std::filesystem::path(tiny_prefix()).parent_path() / "bert_config.json";
    const std::string index = read_file(files[1]), data = read_file(files[0]);
    for (const std::string& f : files) {
        const auto e = run_bertbench("eval --init_checkpoint=" + prefix + " --bert_config_file=" + cfg +
                                     " --input_file=" + testing::golden("pretraining/public_128_s12345_d2.tfrecord") +
                                     " --json=" + f);
        EXPECT_EQ(e.exit_code, 1) << e.out;
        EXPECT_NE(e.out.find("--json=" + f + ": is the same file as the input"), std::string::npos) << e.out;
    }
    EXPECT_EQ(read_file(files[1]), index);
    EXPECT_EQ(read_file(files[0]), data);
    // a name as the loader resolves it: the directory's TF state file's latest, NAME.safetensors
    write_file_atomic(dir.file("checkpoint"), "model_checkpoint_path: \"m.ckpt\"\n");
    std::vector<std::string> got = model::checkpoint_files(dir.path.string());
    std::sort(got.begin(), got.end());
    EXPECT_EQ(got, files);
    const std::string ours = dir.file("b.safetensors");
    ASSERT_EQ(run_bertbench("convert --input=" + prefix + " --output=" + ours).exit_code, 0);
    EXPECT_EQ(model::checkpoint_files(dir.file("b")), std::vector<std::string>{ours});
    const std::string weights = read_file(ours);
    const auto e = run_bertbench("eval --init_checkpoint=" + dir.file("b") + " --bert_config_file=" + cfg +
                                 " --input_file=" + testing::golden("pretraining/public_128_s12345_d2.tfrecord") +
                                 " --json=" + ours);
    EXPECT_EQ(e.exit_code, 1) << e.out;
    EXPECT_NE(e.out.find("--json=" + ours + ": is the same file as the input"), std::string::npos) << e.out;
    EXPECT_EQ(read_file(ours), weights);
    // a Hugging Face directory's config.json, which the run reads as the model's config
    ASSERT_EQ(run_bertbench("convert --to=hf --input=" + prefix + " --bert_config_file=" + cfg + " --output=" +
                            dir.file("hf")).exit_code, 0);
    const std::string hf_config = dir.file("hf/config.json"), config_text = read_file(hf_config);
    EXPECT_EQ(model::checkpoint_files(dir.file("hf/model.safetensors")),
              (std::vector<std::string>{dir.file("hf/model.safetensors"), hf_config}));
    const auto h = run_bertbench("eval --init_checkpoint=" + dir.file("hf/model.safetensors") + " --input_file=" +
                                 testing::golden("pretraining/public_128_s12345_d2.tfrecord") + " --json=" + hf_config);
    EXPECT_EQ(h.exit_code, 1) << h.out;
    EXPECT_NE(h.out.find("--json=" + hf_config + ": is the same file as the input"), std::string::npos) << h.out;
    EXPECT_EQ(read_file(hf_config), config_text);
}

// A non-BERT TF2 bundle (Snappy index, a DT_STRING, data order != key order) survives
// TF -> safetensors -> TF with every numeric tensor's bytes; the DT_STRING is skipped and named.
TEST(ConvertCli, NonBertTfBundleRoundTrip) {
    TmpDir dir;
    const char* d = std::getenv("BB_SHARED_DIR");
    const std::string src =
        std::string(d ? d : "/work/shared") + "/golden/tf_checkpoint/serving_half_plus_two_tf2_cpu/variables";
    auto r = run_bertbench("convert --input=" + src + " --output=" + dir.file("v.safetensors"));
    ASSERT_EQ(r.exit_code, 0) << r.out;
    EXPECT_NE(r.out.find("3 tensors written"), std::string::npos) << r.out;
    EXPECT_NE(r.out.find("_CHECKPOINTABLE_OBJECT_GRAPH (DT_STRING)"), std::string::npos) << r.out;
    r = run_bertbench("convert --input=" + dir.file("v.safetensors") + " --output=" + dir.file("v"));
    ASSERT_EQ(r.exit_code, 0) << r.out;
    const io::TfBundleReader a(src), b(dir.file("v"));
    ASSERT_EQ(b.entries().size(), 3u);
    for (const io::TfTensorEntry& e : b.entries()) {
        const io::TfTensorEntry* o = a.find(e.name);
        ASSERT_NE(o, nullptr) << e.name;
        EXPECT_EQ(o->dtype, e.dtype);
        EXPECT_EQ(o->shape, e.shape);
        EXPECT_EQ(a.read_raw(*o), b.read_raw(e)) << e.name;
    }
}

TEST(ConvertCli, BadOutputsAndInputsAreOneLineErrors) {
    TmpDir dir;
    const std::string a = make_checkpoint(dir, false);
    auto r = run_bertbench("convert --input=" + a + " --output=" + dir.file("t"));
    ASSERT_EQ(r.exit_code, 0) << r.out;
    // existing output without --overwrite
    r = run_bertbench("convert --input=" + a + " --output=" + dir.file("t"));
    EXPECT_EQ(r.exit_code, 1);
    EXPECT_NE(r.out.find(dir.file("t") + ".data-00000-of-00001 exists"), std::string::npos) << r.out;
    EXPECT_NE(r.out.find("--overwrite"), std::string::npos) << r.out;
    r = run_bertbench("convert --overwrite --input=" + a + " --output=" + dir.file("t"));
    EXPECT_EQ(r.exit_code, 0) << r.out;
    // output == input, also through a hard link, even with --overwrite
    std::filesystem::create_hard_link(a, dir.file("link.safetensors"));
    r = run_bertbench("convert --overwrite --input=" + a + " --output=" + dir.file("link.safetensors"));
    EXPECT_EQ(r.exit_code, 1);
    EXPECT_NE(r.out.find("is the input file"), std::string::npos) << r.out;
    r = run_bertbench("convert --overwrite --input=" + dir.file("t") + " --output=" + dir.file("t"));
    EXPECT_EQ(r.exit_code, 1);
    EXPECT_NE(r.out.find("is the input file"), std::string::npos) << r.out;
    // no such input; unknown --to; a file that is neither format
    r = run_bertbench("convert --input=" + dir.file("nope") + " --output=" + dir.file("x"));
    EXPECT_EQ(r.exit_code, 1);
    EXPECT_NE(r.out.find(dir.file("nope")), std::string::npos) << r.out;
    // a directory without TF's state file (with one: its latest, tests/cli/paths_cli_test.cpp): the
    // checkpoints in it named as the hint (the TF prefix without .index)
    std::filesystem::remove(dir.file("checkpoint"));
    r = run_bertbench("convert --input=" + dir.path.string() + " --output=" + dir.file("x"));
    EXPECT_EQ(r.exit_code, 1);
    EXPECT_NE(r.out.find(dir.path.string() + ": a directory; expected a checkpoint file or TensorFlow prefix "
                                              "(hint: name one of the 3 it holds, newest first: "),
              std::string::npos) << r.out;
    EXPECT_NE(r.out.find(dir.file("t") + ","), std::string::npos) << r.out;
    EXPECT_EQ(r.out.find(".index"), std::string::npos) << r.out;
    r = run_bertbench("convert --to=onnx --input=" + a + " --output=" + dir.file("x"));
    EXPECT_EQ(r.exit_code, 1);
    EXPECT_NE(r.out.find("--to=onnx"), std::string::npos) << r.out;
    write_file_atomic(dir.file("junk.safetensors"), "not a checkpoint at all");
    r = run_bertbench("convert --input=" + dir.file("junk.safetensors") + " --output=" + dir.file("y"));
    EXPECT_EQ(r.exit_code, 1);
    EXPECT_NE(r.out.find("junk.safetensors"), std::string::npos) << r.out;
    // a --bert_config_file of another size than the weights: refused, and no directory left
    model::BertConfig wide = small_config();
    wide.hidden_size = 16;
    write_file_atomic(dir.file("wide.json"), wide.to_json().dump());
    r = run_bertbench("convert --to=hf --input=" + a + " --output=" + dir.file("hfw") +
                      " --bert_config_file=" + dir.file("wide.json"));
    EXPECT_EQ(r.exit_code, 1);
    EXPECT_NE(r.out.find("--bert_config_file=" + dir.file("wide.json") + ": does not fit the weights"),
              std::string::npos) << r.out;
    EXPECT_NE(r.out.find("has shape [23, 8], the config gives it [23, 16]"), std::string::npos) << r.out;
    EXPECT_FALSE(std::filesystem::exists(dir.file("hfw")));
    // a checkpoint lacking one encoder tensor, with the config that says what the model has:
    // refused in one line naming it (it converted, and eval refused the output), no output left
    {
        const model::ParamTable table(small_config(), model::Heads::pretraining);
        std::vector<float> w(table.total_floats());
        table.initialize(w, 3);
        io::SafetensorsWriter sw(dir.file("partial.safetensors"));
        const std::string gone = "bert/encoder/layer_1/output/dense/kernel";
        for (const model::ParamInfo& p : table.entries())
            if (p.name != gone)
                sw.add_f32(p.name, p.shape, std::span<const float>(w).subspan(p.offset, p.size));
        sw.write();
        write_file_atomic(dir.file("small.json"), small_config().to_json().dump());
        r = run_bertbench("convert --to=tf --input=" + dir.file("partial.safetensors") + " --output=" +
                          dir.file("partial/model.ckpt") + " --bert_config_file=" + dir.file("small.json"));
        EXPECT_EQ(r.exit_code, 1) << r.out;
        EXPECT_NE(r.out.find("the input lacks 1 (first: " + gone + ")"), std::string::npos) << r.out;
        EXPECT_EQ(r.out.find('\n'), r.out.size() - 1) << r.out;
        EXPECT_FALSE(std::filesystem::exists(dir.file("partial/model.ckpt.index")));
    }
    for (const auto& e : std::filesystem::directory_iterator(dir.path))
        EXPECT_EQ(e.path().string().find(".tmp."), std::string::npos) << e.path();
    EXPECT_FALSE(std::filesystem::exists(dir.file("y.index")));
}

}  // namespace
}  // namespace bertbench
