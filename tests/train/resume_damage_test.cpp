// Resume reads its own checkpoint defensively: a train_state whose fields are missing or of the
// wrong type (valid JSON, damaged content) is one error naming the checkpoint and the metadata
// key, before any training — not a raw JSON-library message ("key 'evals' not found"); every
// number in it is range-checked and the step must agree with the file name (issue 28).
#include <gtest/gtest.h>
#include <unistd.h>

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <map>
#include <nlohmann/json.hpp>
#include <string>
#include <utility>
#include <vector>

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

// A fresh `dir` holding the tests' small bert_config.json (1 layer, H 32, BERT's vocabulary).
void fresh_dir_with_config(const fs::path& dir) {
    fs::remove_all(dir);
    fs::create_directories(dir);
    std::ofstream(dir / "bert_config.json")
        << R"({"vocab_size": 30522, "hidden_size": 32, "num_hidden_layers": 1,
              "num_attention_heads": 2, "intermediate_size": 64,
              "max_position_embeddings": 512, "type_vocab_size": 2})";
}

TEST(ResumeDamage, DamagedTrainStateIsOneErrorNamingTheCheckpoint) {
    const std::string shared = testing::shared_dir();
    const fs::path dir = fs::temp_directory_path() / ("bb_resume_damage_" + std::to_string(getpid()));
    fresh_dir_with_config(dir);
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

// A copy of `from` written to `to`, with the one-value I64 tensor `tensor` set to `value` and
// metadata `key` (if given) replaced by `value_json`.
void rewrite_checkpoint(const std::string& from, const std::string& to, const std::string& tensor,
                        int64_t value, const std::string& key = "",
                        const std::string& value_json = "") {
    const io::SafetensorsReader r(from);
    io::SafetensorsWriter w(to);
    for (const auto& [k, v] : r.metadata()) w.set_metadata(k, k == key ? value_json : v);
    for (const io::TensorInfo& t : r.tensors()) {
        const auto b = r.bytes(t);
        if (t.name == tensor) {
            ASSERT_EQ(t.dtype, io::DType::I64);
            ASSERT_EQ(b.size(), 8u);
            w.add_copy(t.name, t.dtype, t.shape, &value, 8);
        } else {
            w.add_copy(t.name, t.dtype, t.shape, b.data(), b.size());
        }
    }
    w.write();
}

// Every file of `dir` with its size and contents' modification time.
std::map<std::string, std::pair<uintmax_t, fs::file_time_type>> listing(const fs::path& dir) {
    std::map<std::string, std::pair<uintmax_t, fs::file_time_type>> out;
    for (const auto& e : fs::directory_iterator(dir))
        out[e.path().filename().string()] = {e.file_size(), e.last_write_time()};
    return out;
}

// Issue 28, "Overflow on resume": a checkpoint whose bertbench/global_step was 2^62 (finished
// false) resumed, UBSan reported a signed overflow in TrainLoop::samples() and the Release
// build exited 0 having written model.ckpt-4611686018427387904.safetensors. Every number of the
// checkpoint is now range-checked against what the run can mean, and a step that disagrees with
// the file name is refused: one error line naming the file and the tensor or field, expected and
// got, exit 1, and nothing written in --output_dir. The untouched checkpoint still resumes.
TEST(ResumeDamage, OutOfRangeNumbersAreRefusedBeforeAnythingIsWritten) {
    const std::string shared = testing::shared_dir();
    const fs::path dir = fs::temp_directory_path() / ("bb_resume_range_" + std::to_string(getpid()));
    fresh_dir_with_config(dir);
    const fs::path run = dir / "run";
    const std::string args = "pretrain --bert_config_file=" + (dir / "bert_config.json").string() +
                             " --input_file=" + shared +
                             "/golden/pretraining/public_128_s12345_d2.tfrecord --output_dir=" +
                             run.string() +
                             " --train_batch_size=4 --num_warmup_steps=1 --save_checkpoints_steps=2"
                             " --keep_checkpoint_max=0 --threads=1 --seed=2 --num_train_steps=4"
                             " --loss_scale=dynamic";  // for the loss scaler's counters
    auto r = run_bertbench(args);
    ASSERT_EQ(r.exit_code, 0) << r.out;
    // The step-2 checkpoint (finished false) is the one to damage; the others go.
    const std::string good = (dir / "good.safetensors").string();
    fs::rename(run / "model.ckpt-2.safetensors", good);
    fs::remove(run / "model.ckpt-4.safetensors");
    const std::string good_state = io::SafetensorsReader(good).metadata().at("train_state");
    const std::string good_reader = io::SafetensorsReader(good).metadata().at("reader_state");
    const std::string good_scaler = io::SafetensorsReader(good).metadata().at("loss_scaler");
    const auto with = [](const std::string& json_text, const char* field, const nlohmann::json& v) {
        nlohmann::json j = nlohmann::json::parse(json_text);
        j[field] = v;
        return j.dump();
    };

    struct Case {
        std::string name;       // the checkpoint's file name
        std::string tensor;     // an I64 tensor to set ...
        int64_t value;          // ... to this
        std::string key, json;  // a metadata value to replace
        std::string want;       // in the error, after "<file>: "
    };
    const int64_t two62 = int64_t{1} << 62;
    const std::vector<Case> cases = {
        {"model.ckpt-4611686018427387904.safetensors", "bertbench/global_step", two62, "", "",
         "tensor \"bertbench/global_step\": expected a step in [0, 2251799813685248] (2^53 "
         "sequences at --train_batch_size=4), got 4611686018427387904"},
        {"model.ckpt-3.safetensors", "bertbench/global_step", 2, "", "",
         "tensor \"bertbench/global_step\": expected 3 (the step in the file name), got 2"},
        {"model.ckpt-1000.safetensors", "bertbench/global_step", 1000, "", "",
         "tensor \"bertbench/global_step\": expected a step in [0, 4] (--num_train_steps), got 1000"},
        {"model.ckpt-2.safetensors", "bertbench/global_step", -2, "", "",
         "tensor \"bertbench/global_step\": expected a step in [0, 2251799813685248] (2^53 "
         "sequences at --train_batch_size=4), got -2"},
        {"model.ckpt-2.safetensors", "bertbench/update_count", int64_t{1} << 40, "", "",
         "tensor \"bertbench/update_count\": expected an integer in [0, 2]"},
        {"model.ckpt-2.safetensors", "bertbench/global_step", 2, "train_state",
         with(good_state, "skipped_steps", two62),
         "__metadata__[\"train_state\"]: \"skipped_steps\": expected an integer in [0, 2] (at "
         "most the global step), got 4611686018427387904"},
        {"model.ckpt-2.safetensors", "bertbench/global_step", 2, "train_state",
         with(good_state, "timed_samples", 1e300),
         "__metadata__[\"train_state\"]: \"timed_samples\": expected an integer in [0, 8]"},
        {"model.ckpt-2.safetensors", "bertbench/global_step", 2, "train_state",
         with(good_state, "next_eval_samples", -5),
         "__metadata__[\"train_state\"]: \"next_eval_samples\": expected an integer in [0, "
         "9007199254740992]"},
        {"model.ckpt-2.safetensors", "bertbench/global_step", 2, "train_state",
         with(good_state, "elapsed_s", "soon"),
         "__metadata__[\"train_state\"]: \"elapsed_s\": expected a finite number >= 0, got \"soon\""},
        {"model.ckpt-2.safetensors", "bertbench/global_step", 2, "reader_state",
         with(good_reader, "records_in_epoch", uint64_t{1} << 63),
         "__metadata__[\"reader_state\"]: \"records_in_epoch\": expected an integer in [0, 8]"},
        {"model.ckpt-2.safetensors", "bertbench/global_step", 2, "loss_scaler",
         with(good_scaler, "clean_updates", 1e300),
         "__metadata__[\"loss_scaler\"]: checkpoint state: loss scaler field \"clean_updates\": "
         "expected an integer in [0, 2] (at most the global step), got 1e+300"},
        {"model.ckpt-2.safetensors", "bertbench/global_step", 2, "loss_scaler",
         with(good_scaler, "overflows", two62),
         "__metadata__[\"loss_scaler\"]: checkpoint state: loss scaler field \"overflows\": "
         "expected an integer in [0, 2]"},
    };
    for (const Case& c : cases) {
        SCOPED_TRACE(c.want);
        for (const auto& e : fs::directory_iterator(run))
            if (e.path().filename().string().rfind("model.ckpt-", 0) == 0) fs::remove(e.path());
        const std::string ckpt = (run / c.name).string();
        rewrite_checkpoint(good, ckpt, c.tensor, c.value, c.key, c.json);
        const auto before = listing(run);
        r = run_bertbench(args);
        EXPECT_EQ(r.exit_code, 1) << r.out;  // an error, not a signal (< 128), not success
        size_t errors = 0, at = 0;
        for (size_t i = r.out.find("error: "); i != std::string::npos; i = r.out.find("error: ", i + 1))
            ++errors, at = i;
        EXPECT_EQ(errors, 1u) << r.out;
        const std::string line = r.out.substr(at, r.out.find('\n', at) - at);
        EXPECT_NE(line.find(ckpt + ": " + c.want), std::string::npos) << r.out;
        EXPECT_EQ(listing(run), before) << r.out;  // nothing written, nothing touched
    }

    // The checkpoint as the run wrote it resumes and finishes.
    for (const auto& e : fs::directory_iterator(run))
        if (e.path().filename().string().rfind("model.ckpt-", 0) == 0) fs::remove(e.path());
    fs::copy_file(good, run / "model.ckpt-2.safetensors");
    r = run_bertbench(args);
    EXPECT_EQ(r.exit_code, 0) << r.out;
    EXPECT_TRUE(fs::exists(run / "model.ckpt-4.safetensors")) << r.out;
    fs::remove_all(dir);
}

}  // namespace
}  // namespace bertbench::train
