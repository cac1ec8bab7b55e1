// Resume reads its own checkpoint defensively: a train_state whose fields are missing or of the
// wrong type (valid JSON, damaged content) is one error naming the checkpoint and the metadata
// key, before any training — not a raw JSON-library message ("key 'evals' not found").
#include <gtest/gtest.h>
#include <unistd.h>

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <string>

#include "../cli/run_util.hpp"
#include "io/safetensors.hpp"
#include "test_util.hpp"

namespace bertbench::train {
namespace {
namespace fs = std::filesystem;
using bertbench::testing::run_bertbench;

// A copy of `path` with one metadata value replaced, written over it.
void replace_metadata(const std::string& path, const std::string& key, const std::string& value) {
    const fs::path tmp = path + ".rewrite";
    {
        const io::SafetensorsReader r(path);
        io::SafetensorsWriter w(tmp.string());
        for (const auto& [k, v] : r.metadata()) w.set_metadata(k, k == key ? value : v);
        for (const io::TensorInfo& t : r.tensors()) {
            const auto b = r.bytes(t);
            w.add_copy(t.name, t.dtype, t.shape, b.data(), b.size());
        }
        w.write();
    }
    fs::rename(tmp, path);
}

TEST(ResumeDamage, DamagedTrainStateIsOneErrorNamingTheCheckpoint) {
    const std::string shared = testing::shared_dir();
    const fs::path dir = fs::temp_directory_path() / ("bb_resume_damage_" + std::to_string(getpid()));
    fs::remove_all(dir);
    fs::create_directories(dir);
    std::ofstream(dir / "bert_config.json")
        << R"({"vocab_size": 30522, "hidden_size": 32, "num_hidden_layers": 1,
              "num_attention_heads": 2, "intermediate_size": 64,
              "max_position_embeddings": 512, "type_vocab_size": 2})";
    const std::string args = "pretrain --bert_config_file=" + (dir / "bert_config.json").string() +
                             " --input_file=" + shared +
                             "/golden/pretraining/public_128_s12345_d2.tfrecord --output_dir=" +
                             (dir / "run").string() +
                             " --train_batch_size=4 --num_warmup_steps=1 --save_checkpoints_steps=0"
                             " --threads=1 --seed=2";
    auto r = run_bertbench(args + " --num_train_steps=3");
    ASSERT_EQ(r.exit_code, 0) << r.out;
    const std::string ckpt = (dir / "run" / "model.ckpt-3.safetensors").string();
    ASSERT_TRUE(fs::exists(ckpt)) << r.out;
    replace_metadata(ckpt, "train_state", R"({"next_eval_samples": 0, "evals": "two"})");
    r = run_bertbench(args + " --num_train_steps=6 --allow_changed_flags");
    EXPECT_EQ(r.exit_code, 1) << r.out;
    EXPECT_NE(r.out.find(ckpt + ": __metadata__[\"train_state\"]"), std::string::npos) << r.out;
    size_t errors = 0;
    for (size_t at = r.out.find("error: "); at != std::string::npos; at = r.out.find("error: ", at + 1))
        ++errors;
    EXPECT_EQ(errors, 1u) << r.out;
    EXPECT_FALSE(fs::exists(dir / "run" / "model.ckpt-6.safetensors"));
    fs::remove_all(dir);
}

}  // namespace
}  // namespace bertbench::train
