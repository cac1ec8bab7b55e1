// Fixtures of the tests that run reference scripts' command lines on the real binary: the golden
// files, a tiny BERT (L2 H64 A2 I128) as a bert_config.json, freshly initialised weights, and a
// google-research/bert-style model directory ($BERT_BASE_DIR: vocab.txt, bert_config.json and the
// TF checkpoint bert_model.ckpt, written by `bertbench convert --to=tf`).
#pragma once

#include <gtest/gtest.h>
#include <unistd.h>

#include <cstdint>
#include <filesystem>
#include <fstream>
#include <functional>
#include <string>
#include <vector>

#include "cli/run_util.hpp"
#include "model/checkpoint.hpp"
#include "model/config.hpp"
#include "model/param_table.hpp"
#include "test_util.hpp"

namespace bertbench::testing {

// `pretrain` for 4 steps of batch 4 on the golden records, a checkpoint at step 4.
inline std::string short_pretrain_args(const std::string& config, const std::string& out,
                                       const std::string& extra) {
    return "pretrain --bert_config_file=" + config + " --input_file=" + train_data() +
           " --output_dir=" + out +
           " --train_batch_size=4 --num_train_steps=4 --num_warmup_steps=1 --learning_rate=2e-3"
           " --save_checkpoints_steps=4 --threads=1 --seed=5 " +
           extra;
}

// The tiny model's bert_config.json, written to `path`.
inline void write_tiny_bert_config(const std::string& path) {
    std::ofstream(path) << R"({"vocab_size": 30522, "hidden_size": 64, "num_hidden_layers": 2,
                              "num_attention_heads": 2, "intermediate_size": 128,
                              "max_position_embeddings": 512, "type_vocab_size": 2})";
}

// A temporary directory for one test's runs (removed at the end): the tiny model's
// bert_config.json, data/part-00000 .. part-<parts - 1> (copies of the golden training records) and
// init.safetensors, the tiny model initialised with `seed`, then changed by `adjust` if given.
struct TinyRunDir {
    std::filesystem::path dir;
    TinyRunDir(const std::string& name, int parts, uint64_t seed,
               const std::function<void(const model::ParamTable&, std::vector<float>&)>& adjust = {}) {
        dir = std::filesystem::temp_directory_path() / ("bb_" + name + "_" + std::to_string(getpid()));
        std::filesystem::remove_all(dir);
        std::filesystem::create_directories(dir / "data");
        for (int i = 0; i < parts; ++i)
            std::filesystem::copy_file(train_data(), dir / "data" / ("part-0000" + std::to_string(i)));
        write_tiny_bert_config(config());
        const model::ParamTable table(model::BertConfig::from_json_file(config()), model::Heads::pretraining);
        std::vector<float> params(table.total_floats());
        table.initialize(params, seed);
        if (adjust) adjust(table, params);
        model::save_checkpoint(init(), table, params);
    }
    ~TinyRunDir() { std::filesystem::remove_all(dir); }
    TinyRunDir(const TinyRunDir&) = delete;
    TinyRunDir& operator=(const TinyRunDir&) = delete;
    std::string file(const std::string& name) const { return (dir / name).string(); }
    std::string config() const { return file("bert_config.json"); }
    std::string init() const { return file("init.safetensors"); }
};

// Pretraining weights of the model in `config`, initialised with `seed`, as a bertbench checkpoint.
inline void save_initialized_checkpoint(const std::string& config, const std::string& out,
                                        uint64_t seed) {
    const model::BertConfig c = model::BertConfig::from_json_file(config);
    const model::ParamTable table(c, model::Heads::pretraining);
    std::vector<float> params(table.total_floats());
    table.initialize(params, seed);
    model::save_checkpoint(out, table, params);
}

// `dir` as google-research/bert ships a model (tiny, seed 3); `scratch` is a free file path.
inline void write_tiny_bert_dir(const std::string& dir, const std::string& scratch) {
    std::filesystem::create_directories(dir);
    std::filesystem::copy_file(golden("vocab.txt"), dir + "/vocab.txt");
    write_tiny_bert_config(dir + "/bert_config.json");
    save_initialized_checkpoint(dir + "/bert_config.json", scratch, 3);
    const auto r = run_bertbench("convert --to=tf --input=" + scratch + " --output=" + dir +
                                 "/bert_model.ckpt");
    EXPECT_EQ(r.exit_code, 0) << r.out;
}

// A fine-tuned SQuAD model as save_pretrained leaves it in `dir` (config.json, model.safetensors
// with qa_outputs, vocab.txt): the tiny model with a span head initialised with seed 7;
// `scratch` is a free file path.
inline void write_tiny_squad_hf_dir(const std::string& dir, const std::string& scratch) {
    write_tiny_bert_config(scratch + ".json");
    const model::BertConfig c = model::BertConfig::from_json_file(scratch + ".json");
    const model::ParamTable table(c, model::Heads::squad);
    std::vector<float> params(table.total_floats());
    table.initialize(params, 7);
    model::save_checkpoint(scratch, table, params);
    const auto r = run_bertbench("convert --to=hf --input=" + scratch + " --output=" + dir);
    EXPECT_EQ(r.exit_code, 0) << r.out;
    std::filesystem::copy_file(golden("vocab.txt"), dir + "/vocab.txt");
}

}  // namespace bertbench::testing
