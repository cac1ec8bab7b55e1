// `bertbench pretrain` on NVIDIA HDF5 shards, end to end with the real binary and a tiny model:
// training on the golden .hdf5 twin of a TFRecord (and evaluating on an HDF5 copy of the eval
// TFRecord) logs bit-identical losses and eval metrics to the run on the TFRecords, and `eval`
// of the final checkpoint agrees between the two formats.
#include <gtest/gtest.h>
#include <unistd.h>

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <sstream>
#include <string>
#include <vector>

#include "../cli/run_util.hpp"
#include "io/example.hpp"
#include "io/hdf5_shard.hpp"
#include "io/tfrecord.hpp"
#include "test_util.hpp"

namespace bertbench::train {
namespace {

using testing::golden;
namespace fs = std::filesystem;
using bertbench::testing::run_bertbench;
using bertbench::testing::slurp;
using nlohmann::json;

// The lines of a jsonl log without its timing fields (they differ run to run).
std::vector<std::string> log_lines(const std::string& path) {
    std::vector<std::string> out;
    std::istringstream in(slurp(path));
    for (std::string line; std::getline(in, line);) {
        json j = json::parse(line);
        for (const char* k :
             {"sequences_per_second", "tokens_per_second", "eval_seconds", "elapsed_s"})
            j.erase(k);
        out.push_back(j.dump());
    }
    return out;
}

// An HDF5 copy of a TFRecord (the writer itself is checked against the goldens in test_io).
void tfrecord_to_hdf5(const std::string& in, const std::string& out, int T, int P) {
    io::TfRecordReader r(in);
    io::Hdf5ShardWriter w(out, T, P);
    std::string payload;
    io::PretrainingRecord rec;
    while (r.next(payload)) {
        io::parse_pretraining_example(io::decode_example(payload), T, P, in, rec);
        w.write(rec);
    }
    w.close();
}

TEST(PretrainHdf5E2E, Hdf5TwinGivesBitIdenticalLossesAndEval) {
    const fs::path dir =
        fs::temp_directory_path() / ("bb_pretrain_hdf5_" + std::to_string(getpid()));
    fs::remove_all(dir);
    fs::create_directories(dir);
    std::ofstream(dir / "bert_config.json")
        << R"({"vocab_size": 30522, "hidden_size": 64, "num_hidden_layers": 2,
              "num_attention_heads": 2, "intermediate_size": 128,
              "max_position_embeddings": 512, "type_vocab_size": 2})";
    const std::string eval_h5 = (dir / "eval100.hdf5").string();
    tfrecord_to_hdf5(golden("eval_pick/public_128_eval100.tfrecord"), eval_h5, 128, 20);

    auto run = [&](const std::string& name, const std::string& train, const std::string& eval) {
        const std::string out = (dir / name).string();
        const auto r = run_bertbench(
            "pretrain --bert_config_file=" + (dir / "bert_config.json").string() +
            " --input_file=" + train + " --eval_input_file=" + eval + " --output_dir=" + out +
            " --train_batch_size=4 --steps_per_update=2 --num_train_steps=12 "
            "--num_warmup_steps=2 --learning_rate=2e-3 --save_checkpoints_steps=12 "
            "--eval_every_samples=24 --max_eval_steps=2 --eval_batch_size=8 --threads=1 --seed=5");
        EXPECT_EQ(r.exit_code, 0) << r.out;
        return out;
    };
    const std::string a = run("tf", golden("pretraining/public_128_s12345_d2.tfrecord"),
                              golden("eval_pick/public_128_eval100.tfrecord"));
    const std::string b = run("h5", golden("hdf5/public_128_s12345_d2.hdf5"), eval_h5);

    const auto ta = log_lines(a + "/train_log.jsonl"), tb = log_lines(b + "/train_log.jsonl");
    ASSERT_EQ(ta.size(), 6u);  // 12 micro-steps / 2 per update
    ASSERT_EQ(tb.size(), ta.size());
    for (size_t i = 0; i < ta.size(); ++i) EXPECT_EQ(tb[i], ta[i]) << "update " << i + 1;
    const auto ea = log_lines(a + "/eval_log.jsonl"), eb = log_lines(b + "/eval_log.jsonl");
    ASSERT_GE(ea.size(), 2u);
    EXPECT_EQ(eb, ea);

    // Offline eval of the TFRecord run's checkpoint on both eval formats.
    auto eval = [&](const std::string& input, const std::string& json_out) {
        const auto r = run_bertbench(
            "eval --init_checkpoint=" + a + "/model.ckpt-12.safetensors --input_file=" + input +
            " --eval_batch_size=8 --max_eval_steps=3 --threads=1 --json=" + json_out);
        EXPECT_EQ(r.exit_code, 0) << r.out;
        json j = json::parse(slurp(json_out));
        return std::make_tuple(j["masked_lm_accuracy"], j["masked_lm_loss"], j["examples"]);
    };
    EXPECT_EQ(eval(eval_h5, (dir / "e_h5.json").string()),
              eval(golden("eval_pick/public_128_eval100.tfrecord"), (dir / "e_tf.json").string()));
    fs::remove_all(dir);
}

}  // namespace
}  // namespace bertbench::train
