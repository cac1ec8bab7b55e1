// Training with the parameters, gradients and optimizer state in a backend's own memory (what
// --device=cuda runs), checked here without a GPU: on the guarded backend (the CPU's ops on memory
// the host may not touch; tests/backend/guarded_backend.hpp) a pretraining run — gradient
// accumulation, dynamic loss scaling, online evaluation, a checkpoint and a resume — and a SQuAD
// fine-tuning run (bf16) write the same losses, evaluations (to the last bits where the CPU's
// packed-weight GEMMs add as its plain ones do) and checkpoint tensors as on the CPU backend,
// SQuAD's prediction the same logits; any direct host access to that memory would crash them.
#include <gtest/gtest.h>
#include <unistd.h>

#include <cmath>
#include <cstddef>
#include <filesystem>
#include <fstream>
#include <map>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "backend/guarded_backend.hpp"
#include "data/squad.hpp"
#include "io/safetensors.hpp"
#include "model/checkpoint.hpp"
#include "test_util.hpp"
#include "train/eval_checkpoint.hpp"
#include "train/pretrain.hpp"
#include "train/squad_train.hpp"

namespace bertbench::train {
namespace {
namespace fs = std::filesystem;
using nlohmann::json;

struct Dir {
    fs::path dir;
    explicit Dir(const std::string& name)
        : dir(fs::temp_directory_path() / ("bb_device_memory_" + name + "_" + std::to_string(getpid()))) {
        fs::remove_all(dir);
        fs::create_directories(dir);
    }
    ~Dir() { fs::remove_all(dir); }
    std::string operator/(const std::string& f) const { return (dir / f).string(); }
};

std::vector<json> lines(const std::string& path) {
    std::vector<json> out;
    std::ifstream in(path);
    for (std::string l; std::getline(in, l);)
        if (!l.empty()) out.push_back(json::parse(l));
    return out;
}

// The losses and evaluations a run logged (times and rates dropped: they differ between runs).
std::vector<json> logged(const std::string& dir, const char* file) {
    std::vector<json> out;
    for (json j : lines(dir + "/" + file)) {
        for (const char* k : {"elapsed_s", "eval_seconds", "sequences_per_second", "tokens_per_second"})
            j.erase(k);
        out.push_back(j);
    }
    return out;
}

// Evaluations on the CPU backend and on the guarded one: the CPU's evaluation engine multiplies
// by oneDNN's packed weights, the guarded backend keeps none (as the CUDA backend), so its engine
// runs the plain GEMMs; where the two kernels add in another order (AVX2 machines) the losses differ
// in their last bits. Losses (the metrics' and the Estimator's `loss`) within rtol 1e-8, every
// other field exact.
void expect_same_evals(const json& got, const json& want, const std::string& where = "") {
    if (want.is_array() || want.is_object()) {
        ASSERT_EQ(got.size(), want.size()) << where;
        if (want.is_array())
            for (size_t i = 0; i < want.size(); ++i) expect_same_evals(got[i], want[i], where + "[" + std::to_string(i) + "]");
        else
            for (const auto& [k, v] : want.items()) {
                ASSERT_TRUE(got.contains(k)) << where << "." << k;
                expect_same_evals(got[k], v, where + "." + k);
            }
    } else if (want.is_number_float() && (where.ends_with("_loss") || where.ends_with(".loss"))) {
        EXPECT_NEAR(got.get<double>(), want.get<double>(), 1e-8 * std::abs(want.get<double>())) << where;
    } else {
        EXPECT_EQ(got, want) << where;
    }
}

// Every tensor of a checkpoint, by name.
std::map<std::string, std::vector<std::byte>> tensors(const std::string& path) {
    const io::SafetensorsReader f(path);
    std::map<std::string, std::vector<std::byte>> out;
    for (const auto& t : f.tensors()) {
        const auto bytes = f.bytes(t);
        out[t.name].assign(bytes.begin(), bytes.end());
    }
    return out;
}

PretrainOptions pretrain_options(const Dir& d, const std::string& out) {
    std::ofstream(d / "bert_config.json")
        << R"({"vocab_size": 30522, "hidden_size": 48, "num_hidden_layers": 2, "num_attention_heads": 3,
              "intermediate_size": 80, "max_position_embeddings": 512, "type_vocab_size": 2})";
    PretrainOptions o;
    o.bert_config_file = d / "bert_config.json";
    o.input_file = testing::shared_dir() + "/golden/pretraining/public_128_s12345_d2.tfrecord";
    o.eval_input_file = testing::shared_dir() + "/golden/eval_pick/public_128_eval100.tfrecord";
    o.do_eval = true;
    o.output_dir = d / out;
    o.train_batch_size = 4;
    o.steps_per_update = 2;
    o.num_train_steps = 12;
    o.num_warmup_steps = 4;
    o.learning_rate = 2e-3;
    o.save_checkpoints_steps = 6;
    o.eval_every_samples = 24;
    o.max_eval_steps = 2;
    o.eval_batch_size = 8;
    o.threads = 1;
    o.seed = 5;
    o.loss_scale = "dynamic";
    o.initial_loss_scale = 1024;
    o.loss_scale_window = 2;
    o.target_mlm_accuracy = 0.99;
    return o;
}

TEST(DeviceMemory, PretrainingOnAGuardedBackendEqualsTheCpuAcrossAResume) {
    const Dir d("pretrain");
    const json flags = {{"seed", 5}};
    PretrainOptions cpu = pretrain_options(d, "cpu");
    ASSERT_EQ(run_pretraining(cpu, flags), 0);

    testing::GuardedBackend guarded;
    PretrainOptions dev = pretrain_options(d, "dev");
    dev.backend = &guarded;
    ASSERT_EQ(run_pretraining(dev, flags), 0);
    // Resumed from its step-6 checkpoint (as after a kill): loaded onto the backend, run again
    fs::remove(checkpoint_path(dev.output_dir, 12));
    ASSERT_EQ(latest_checkpoint(dev.output_dir), checkpoint_path(dev.output_dir, 6));
    ASSERT_EQ(run_pretraining(dev, flags), 0);
    EXPECT_EQ(guarded.mappings(), 0u) << "every buffer released";

    EXPECT_EQ(logged(cpu.output_dir, "train_log.jsonl"), logged(dev.output_dir, "train_log.jsonl"));
    expect_same_evals(json(logged(dev.output_dir, "eval_log.jsonl")), json(logged(cpu.output_dir, "eval_log.jsonl")));
    EXPECT_FALSE(logged(cpu.output_dir, "eval_log.jsonl").empty());
    const auto a = tensors(checkpoint_path(cpu.output_dir, 12)), b = tensors(checkpoint_path(dev.output_dir, 12));
    EXPECT_EQ(a.size(), b.size());
    for (const auto& [name, bytes] : a) EXPECT_TRUE(b.count(name) && b.at(name) == bytes) << name;

    // `eval` / `pretrain --nodo_train`: the checkpoint evaluated on the backend
    CheckpointEvalOptions e;
    e.checkpoint = checkpoint_path(cpu.output_dir, 12);
    e.files = {cpu.eval_input_file};
    e.eval_batch_size = 8;
    e.max_eval_steps = 3;
    const EvalMetrics host = evaluate_checkpoint(e);
    e.backend = &guarded;
    expect_same_evals(evaluate_checkpoint(e).to_json(), host.to_json());
}

// Synthetic SQuAD features: [CLS] 5 query tokens [SEP] document [SEP], padded to 24, an answer span
std::vector<data::SquadFeature> squad_features() {
    std::vector<data::SquadFeature> out;
    for (int i = 0; i < 12; ++i) {
        data::SquadFeature f;
        f.unique_id = 1000000000 + i;
        f.example_index = i;
        const int real = 14 + i % 9;
        for (int t = 0; t < 24; ++t) {
            const int word = 1000 + (i * 37 + t * 11) % 900;
            f.input_ids.push_back(t >= real ? 0 : t == 0 ? 101 : t == 6 || t == real - 1 ? 102 : word);
            f.input_mask.push_back(t < real ? 1 : 0);
            f.segment_ids.push_back(t > 6 && t < real ? 1 : 0);
        }
        f.start_position = 7 + i % 4;
        f.end_position = *f.start_position + i % 3;
        out.push_back(std::move(f));
    }
    return out;
}

TEST(DeviceMemory, SquadFineTuningAndPredictionOnAGuardedBackendEqualTheCpu) {
    const Dir d("squad");
    std::ofstream(d / "bert_config.json")
        << R"({"vocab_size": 2000, "hidden_size": 48, "num_hidden_layers": 2, "num_attention_heads": 3,
              "intermediate_size": 80, "max_position_embeddings": 64, "type_vocab_size": 2})";
    const std::vector<data::SquadFeature> features = squad_features();
    const auto options = [&](const std::string& out, backend::Backend* be) {
        SquadTrainOptions o;
        o.bert_config_file = d / "bert_config.json";
        o.output_dir = d / out;
        o.max_seq_length = 24;
        o.train_batch_size = 4;
        o.learning_rate = 1e-3;
        o.num_train_epochs = 2;
        o.save_checkpoints_steps = 0;
        o.threads = 1;
        o.seed = 3;
        o.precision = ops::Precision::bf16;  // the bf16 engine's copies of the weights, too
        o.backend = be;
        return o;
    };
    const json flags = {{"seed", 3}};
    ASSERT_EQ(run_squad_training(options("cpu", nullptr), 12, features, flags), 0);
    testing::GuardedBackend guarded;
    ASSERT_EQ(run_squad_training(options("dev", &guarded), 12, features, flags), 0);
    EXPECT_EQ(logged(d / "cpu", "train_log.jsonl"), logged(d / "dev", "train_log.jsonl"));
    const std::string a = latest_checkpoint(d / "cpu"), b = latest_checkpoint(d / "dev");
    ASSERT_FALSE(a.empty());
    EXPECT_EQ(fs::path(a).filename(), fs::path(b).filename());
    EXPECT_EQ(tensors(a), tensors(b));

    const SquadModel m = load_squad_model(a, "--init_checkpoint", d / "bert_config.json", "", 24);
    const SquadInference on_cpu = squad_infer(m, features, 5, ops::Precision::fp32);
    const SquadInference on_dev = squad_infer(m, features, 5, ops::Precision::fp32, &guarded);
    ASSERT_EQ(on_cpu.results.size(), features.size());
    ASSERT_EQ(on_dev.results.size(), features.size());
    for (size_t i = 0; i < features.size(); ++i) {
        EXPECT_EQ(on_cpu.results[i].start_logits, on_dev.results[i].start_logits) << i;
        EXPECT_EQ(on_cpu.results[i].end_logits, on_dev.results[i].end_logits) << i;
    }
}

}  // namespace
}  // namespace bertbench::train
