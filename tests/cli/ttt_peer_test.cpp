// bench/peer/torch_ttt.py, the PyTorch peer of `bertbench pretrain` for time to train, against
// $BB_BERTBENCH: from the same initial weights (written by the peer, read by bertbench's
// --init_checkpoint) and the same flags, over three shuffled files, a shuffle buffer and an epoch
// boundary, the two trainings log the same learning rate, loss and gradient norm at every step and
// the same held-out accuracy at every evaluation — which holds only if the peer's port of the
// reader's order, its LAMB, schedule, clipping and model all match bertbench's. Also:
// scripts/ttt_compare.py end to end on that recipe, and the one-line refusals of both scripts.
// Skipped when /usr/bin/python3 cannot import torch and numpy. The two trainings are "Slow" (Release
// only, Makefile's test-asan): 41 and 22 s under ASan on a 2-core Zen 3, most of it the PyTorch side,
// which the sanitizers do not see, and the bertbench side's pretraining is under ASan elsewhere.
#include <gtest/gtest.h>

#include <cmath>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <map>
#include <nlohmann/json.hpp>
#include <string>

#include "run_util.hpp"
#include "test_util.hpp"

namespace bertbench::testing {
namespace {
namespace fs = std::filesystem;
using nlohmann::json;

std::string root() {
    const char* d = std::getenv("BB_SOURCE_DIR");
    return d ? d : fs::path(__FILE__).parent_path().parent_path().parent_path().string();
}

const std::string kPeer = "/usr/bin/python3 " + root() + "/bench/peer/torch_ttt.py";

// A 1-layer model on the golden records' 30,522-piece vocabulary, no dropout (the two programs
// draw dropout masks from different generators).
void write_config(const TmpDir& d) {
    std::ofstream(d.file("bert_config.json"))
        << R"({"vocab_size": 30522, "hidden_size": 32, "num_hidden_layers": 1, "num_attention_heads": 2,
              "intermediate_size": 64, "hidden_act": "gelu", "hidden_dropout_prob": 0.0,
              "attention_probs_dropout_prob": 0.0, "max_position_embeddings": 128,
              "type_vocab_size": 2, "initializer_range": 0.02})";
}

// 949 training records in 3 files; 64 steps of 16 = 1,024 samples cross into the second epoch.
std::string recipe(const TmpDir& d, const std::string& target = "0.99") {
    const std::string g = shared_dir() + "/golden";
    return " --bert_config_file=" + d.file("bert_config.json") +
           " --input_file=" + g + "/pretraining/public_128_multi_s1_d1.tfrecord-*" +
           " --eval_input_file=" + g + "/eval_pick/public_128_eval100.tfrecord" +
           " --train_batch_size=16 --max_seq_length=128 --max_predictions_per_seq=20"
           " --learning_rate=1e-2 --num_warmup_steps=5 --num_train_steps=64"
           " --eval_every_samples=512 --eval_batch_size=10 --max_eval_steps=5 --threads=1"
           " --target_mlm_accuracy=" + target;
}

TEST(TorchTttPeer, TrainsAsBertbenchStepByStepSlow) {
    if (const std::string p = torch_python_problem(); !p.empty()) GTEST_SKIP() << p;
    const TmpDir d("bb_ttt_peer");
    write_config(d);
    const RunResult self = run_shell(kPeer + " --selftest");
    ASSERT_EQ(self.exit_code, 0) << self.out;
    const std::string init = d.file("init.safetensors");
    const RunResult w = run_shell(kPeer + " --bert_config_file=" + d.file("bert_config.json") +
                                  " --seed=3 --write_init=" + init + " --output_dir=" + d.file("x"));
    ASSERT_EQ(w.exit_code, 0) << w.out;
    const std::string common = recipe(d) + " --seed=5 --init_checkpoint=" + init;
    const RunResult bb = run_shell(bertbench_path() + " pretrain" + common +
                                   " --save_checkpoints_steps=0 --output_dir=" + d.file("bb"));
    ASSERT_EQ(bb.exit_code, 0) << bb.out;
    const RunResult pt = run_shell(kPeer + common + " --log_every=1 --output_dir=" + d.file("pt"));
    ASSERT_EQ(pt.exit_code, 1) << pt.out;  // 1: the target (0.99) was not reached

    std::map<int64_t, json> peer;
    for (const json& j : read_jsonl(d.file("pt/train_log.jsonl"))) peer[j["step"]] = j;
    const auto steps = read_jsonl(d.file("bb/train_log.jsonl"));
    ASSERT_EQ(steps.size(), 64u);
    ASSERT_EQ(peer.size(), 64u);
    for (const json& s : steps) {
        const json& p = peer.at(s["step"].get<int64_t>());
        SCOPED_TRACE("step " + s["step"].dump());
        EXPECT_EQ(s["samples"], p["samples"]);
        EXPECT_NEAR(s["learning_rate"].get<double>(), p["learning_rate"].get<double>(), 1e-9);
        // Different summation orders in fp32: the losses drift apart by ~1e-6 relative over 64
        // steps; a wrong record, mask or update moves them by 1e-2 or more.
        EXPECT_NEAR(s["loss"].get<double>(), p["loss"].get<double>(), 2e-4 * s["loss"].get<double>());
        EXPECT_NEAR(s["grad_norm"].get<double>(), p["grad_norm"].get<double>(),
                    2e-3 * s["grad_norm"].get<double>());
    }
    const auto be = read_jsonl(d.file("bb/eval_log.jsonl")), pe = read_jsonl(d.file("pt/eval_log.jsonl"));
    ASSERT_EQ(be.size(), 2u);
    ASSERT_EQ(pe.size(), 2u);
    for (size_t i = 0; i < be.size(); ++i) {
        EXPECT_EQ(be[i]["samples"], pe[i]["samples"]);
        EXPECT_EQ(be[i]["examples"], pe[i]["examples"]);
        EXPECT_NEAR(be[i]["masked_lm_accuracy"].get<double>(), pe[i]["masked_lm_accuracy"].get<double>(), 1e-9);
        EXPECT_NEAR(be[i]["masked_lm_loss"].get<double>(), pe[i]["masked_lm_loss"].get<double>(), 1e-3);
    }
    const json res = json::parse(slurp(d.file("pt/results.json")));
    EXPECT_EQ(res["status"], "target not reached");
    EXPECT_EQ(res["samples"], 1024);
}

TEST(TorchTttPeer, RefusesInOneLine) {
    if (const std::string p = torch_python_problem(); !p.empty()) GTEST_SKIP() << p;
    const TmpDir d("bb_ttt_peer");
    write_config(d);
    RunResult r = run_shell(kPeer + recipe(d) + " --output_dir=" + d.file("o") + " --save_checkpoints_steps=5");
    EXPECT_NE(r.exit_code, 0);
    EXPECT_NE(r.out.find("unrecognized arguments: --save_checkpoints_steps=5"), std::string::npos) << r.out;
    r = run_shell(kPeer + recipe(d) + " --output_dir=" + d.file("o") + " --bert_config_file=" + d.file("none.json"));
    EXPECT_NE(r.exit_code, 0);
    EXPECT_NE(r.out.find("--bert_config_file=" + d.file("none.json") + ": expected a bert_config.json"),
              std::string::npos) << r.out;
    std::ofstream(d.file("short.tfrecord")) << "0123456789";
    r = run_shell(kPeer + recipe(d) + " --output_dir=" + d.file("o") + " --eval_input_file=" + d.file("short.tfrecord"));
    EXPECT_EQ(r.exit_code, 1);
    EXPECT_NE(r.out.find(d.file("short.tfrecord") + ": record 0 at byte 0: 10 trailing bytes"), std::string::npos)
        << r.out;
}

TEST(TorchTttPeer, CompareScriptRunsBothToTheTargetSlow) {
    if (const std::string p = torch_python_problem(); !p.empty()) GTEST_SKIP() << p;
    const TmpDir d("bb_ttt_peer");
    write_config(d);
    const std::string script = "/usr/bin/python3 " + root() + "/scripts/ttt_compare.py --bertbench=" +
                               bertbench_path() + " --out=" + d.file("cmp") + " --seeds=2";
    RunResult r = run_shell(script + " --impls=bertbench-fp32,torch-fp32 --doc=" + d.file("table.md") +
                            " --" + recipe(d, "0"));
    ASSERT_EQ(r.exit_code, 0) << r.out;
    const json s = json::parse(slurp(d.file("cmp/summary.json")));
    ASSERT_EQ(s["runs"].size(), 2u);
    for (const json& run : s["runs"]) {
        EXPECT_TRUE(run["reached"].get<bool>()) << run.dump();
        EXPECT_EQ(run["samples_to_target"], 512) << run.dump();  // target 0: the first evaluation
    }
    EXPECT_EQ(s["summary"]["torch-fp32"]["reached"], 1);
    EXPECT_NE(slurp(d.file("cmp/curves.svg")).find("<polyline"), std::string::npos);
    EXPECT_NE(slurp(d.file("table.md")).find("| bertbench-fp32 | 1 of 1 |"), std::string::npos)
        << slurp(d.file("table.md"));
    // A bertbench run paused (--stop_steps) is named so; the next call resumes it and marks it.
    const std::string again = "/usr/bin/python3 " + root() + "/scripts/ttt_compare.py --bertbench=" +
                              bertbench_path() + " --out=" + d.file("paused") + " --seeds=2 --impls=bertbench-fp32";
    r = run_shell(again + " --bertbench_flags=--stop_steps=10 --" + recipe(d, "0"));
    EXPECT_EQ(r.exit_code, 1) << r.out;
    EXPECT_NE(r.out.find("bertbench-fp32, seed 2: paused ("), std::string::npos) << r.out;
    EXPECT_NE(r.out.find("run this script again to resume it"), std::string::npos) << r.out;
    r = run_shell(again + " --" + recipe(d, "0"));
    ASSERT_EQ(r.exit_code, 0) << r.out;
    EXPECT_NE(r.out.find("512 samples to target (resumed: its time sums"), std::string::npos) << r.out;
    EXPECT_EQ(json::parse(slurp(d.file("paused/summary.json")))["resumed"], json::array({"bertbench-fp32 seed 2"}));
    r = run_shell(script + " --" + recipe(d) + " --seed=4");
    EXPECT_NE(r.exit_code, 0);
    EXPECT_NE(r.out.find("--seed: set by this script for every run"), std::string::npos) << r.out;
    r = run_shell(script + " --" + recipe(d) + " -output_dir=" + d.file("elsewhere"));  // absl's one dash
    EXPECT_NE(r.exit_code, 0);
    EXPECT_NE(r.out.find("-output_dir: set by this script for every run"), std::string::npos) << r.out;
}

}  // namespace
}  // namespace bertbench::testing
