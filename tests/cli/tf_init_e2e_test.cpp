// --init_checkpoint=<TF prefix> end to end through the real binary ($BB_BERTBENCH): a checkpoint
// from a short `bertbench pretrain` run (L2 H64 A2 I128), converted with `bertbench convert --to=tf`,
// (a) evaluates to the same metrics JSON, byte for byte, as the safetensors checkpoint it came from,
// (b) starts a pretraining run whose train_log.jsonl losses are bit-identical to one started from
// the safetensors file, and (c) with its .data shard missing is a one-line error naming the shard
// before any work (no config.json, logs or checkpoints in --output_dir).
#include <gtest/gtest.h>

#include <cstdlib>
#include <filesystem>
#include <nlohmann/json.hpp>
#include <sstream>
#include <string>
#include <vector>

#include "cli/cli_fixtures.hpp"
#include "cli/run_util.hpp"
#include "core/fs.hpp"
#include "test_util.hpp"

namespace bertbench {
namespace {

namespace fs = std::filesystem;
using bertbench::testing::eval_data;
using bertbench::testing::run_bertbench;
using bertbench::testing::shared_dir;
using bertbench::testing::short_pretrain_args;
using bertbench::testing::TmpDir;
using bertbench::testing::train_data;
using bertbench::testing::train_lines;
using nlohmann::json;

// `pretrain` with a tiny model: 4 micro-steps of 4 sequences, one thread, no online eval.
// The "error: ..." line of a run's output ("" if none) and how many such lines there are.
std::string error_line(const std::string& out, int* count) {
    std::istringstream in(out);
    std::string line, first;
    *count = 0;
    while (std::getline(in, line))
        if (line.find("error: ") != std::string::npos && (*count)++ == 0) first = line;
    return first;
}

TEST(TfInitE2E, ConvertedCheckpointEvalsAndTrainsBitIdentically) {
    TmpDir dir;
    const std::string config = dir.file("bert_config.json");
    write_file_atomic(config, R"({"vocab_size": 30522, "hidden_size": 64, "num_hidden_layers": 2,
        "num_attention_heads": 2, "intermediate_size": 128, "max_position_embeddings": 512,
        "type_vocab_size": 2})");

    // A checkpoint as pretrain writes it (weights, adam slots, step, config) and its TF twin.
    auto r = run_bertbench(short_pretrain_args(config, dir.file("a"), ""));
    ASSERT_EQ(r.exit_code, 0) << r.out;
    const std::string st = dir.file("a/model.ckpt-4.safetensors");
    ASSERT_TRUE(fs::exists(st)) << r.out;
    fs::create_directories(dir.file("tf"));
    const std::string prefix = dir.file("tf/model.ckpt-4");
    r = run_bertbench("convert --to=tf --input=" + st + " --output=" + prefix);
    ASSERT_EQ(r.exit_code, 0) << r.out;
    ASSERT_TRUE(fs::exists(prefix + ".index")) << r.out;
    ASSERT_TRUE(fs::exists(prefix + ".data-00000-of-00001")) << r.out;

    // (a) eval: the same metrics JSON, byte for byte (every field).
    const std::string eval = " --input_file=" + eval_data() +
                             " --eval_batch_size=8 --max_eval_steps=3 --threads=1";
    r = run_bertbench("eval --init_checkpoint=" + st + eval + " --json=" + dir.file("st.json"));
    ASSERT_EQ(r.exit_code, 0) << r.out;
    r = run_bertbench("eval --init_checkpoint=" + prefix + " --bert_config_file=" + config + eval +
                      " --json=" + dir.file("tf.json"));
    ASSERT_EQ(r.exit_code, 0) << r.out;
    EXPECT_NE(r.out.find("TensorFlow"), std::string::npos) << r.out;  // the load report
    const std::string want = read_file(dir.file("st.json"));
    EXPECT_EQ(read_file(dir.file("tf.json")), want);
    const json m = json::parse(want);
    EXPECT_EQ(m["examples"], 24);
    EXPECT_GT(m["predictions"].get<int64_t>(), 0);

    // (b) pretrain from either: bit-identical losses, and not those of a fresh start (the weights
    // were loaded: run a began from the same seed and data with random weights).
    r = run_bertbench(short_pretrain_args(config, dir.file("b"), "--init_checkpoint=" + st));
    ASSERT_EQ(r.exit_code, 0) << r.out;
    r = run_bertbench(short_pretrain_args(config, dir.file("c"), "--init_checkpoint=" + prefix));
    ASSERT_EQ(r.exit_code, 0) << r.out;
    const std::vector<std::string> b = train_lines(dir.file("b")), c = train_lines(dir.file("c"));
    ASSERT_EQ(b.size(), 4u);
    ASSERT_EQ(c.size(), b.size());
    for (size_t i = 0; i < b.size(); ++i) EXPECT_EQ(c[i], b[i]) << "update " << i + 1;
    const std::vector<std::string> a = train_lines(dir.file("a"));
    ASSERT_EQ(a.size(), b.size());
    EXPECT_NE(json::parse(a[0])["loss"], json::parse(b[0])["loss"]);

    // (c) the data shard missing: a one-line error naming it, before any work.
    const std::string shard = prefix + ".data-00000-of-00001";
    fs::rename(shard, dir.file("moved"));
    r = run_bertbench(short_pretrain_args(config, dir.file("d"), "--init_checkpoint=" + prefix));
    EXPECT_EQ(r.exit_code, 1) << r.out;
    int errors = 0;
    std::string line = error_line(r.out, &errors);
    EXPECT_EQ(errors, 1) << r.out;
    EXPECT_NE(line.find(shard), std::string::npos) << r.out;
    EXPECT_NE(line.find("data shard 0 of 1"), std::string::npos) << r.out;
    for (const char* f : {"config.json", "train_log.jsonl", "mlperf.log", "results.json",
                          "model.ckpt-4.safetensors"})
        EXPECT_FALSE(fs::exists(dir.file("d") + "/" + f)) << f;
    r = run_bertbench("eval --init_checkpoint=" + prefix + " --bert_config_file=" + config + eval +
                      " --json=" + dir.file("e.json"));
    EXPECT_EQ(r.exit_code, 1) << r.out;
    line = error_line(r.out, &errors);
    EXPECT_EQ(errors, 1) << r.out;
    EXPECT_NE(line.find(shard), std::string::npos) << r.out;
    EXPECT_FALSE(fs::exists(dir.file("e.json")));
}

}  // namespace
}  // namespace bertbench
