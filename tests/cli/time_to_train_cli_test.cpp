// scripts/time-to-train.sh end to end with $BB_BERTBENCH on a tiny quick configuration (a tiny
// model, 2 steps of 2 sequences, one evaluation of 2 held-out examples): each seed's run is
// scored from its results.json; N >= 5 drops the fastest and the slowest (MLPerf's rule), fewer
// runs average them all; runs that miss the target give no score and exit 1; the flags the script
// owns are refused in one line; paused, resumed and failed runs are named.
#include <gtest/gtest.h>
#include <unistd.h>

#include <algorithm>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "run_util.hpp"
#include "test_util.hpp"

namespace bertbench::testing {
namespace {
namespace fs = std::filesystem;
using nlohmann::json;

std::string ttt_script() {
    const char* d = std::getenv("BB_SOURCE_DIR");
    const std::string root =
        d ? d : fs::path(__FILE__).parent_path().parent_path().parent_path().string();
    return root + "/scripts/time-to-train.sh";
}

struct Dir {
    fs::path dir;
    Dir() {
        dir = fs::temp_directory_path() / ("bb_ttt_cli_" + std::to_string(getpid()));
        fs::remove_all(dir);
        fs::create_directories(dir);
        std::ofstream(dir / "bert_config.json")
            << R"({"vocab_size": 30522, "hidden_size": 32, "num_hidden_layers": 1,
                  "num_attention_heads": 2, "intermediate_size": 64,
                  "max_position_embeddings": 128, "type_vocab_size": 2})";
    }
    ~Dir() { fs::remove_all(dir); }
    std::string path(const std::string& name) const { return (dir / name).string(); }
};

// The script's command line: its own flags, then pretrain's.
std::string command(const Dir& d, const std::string& own, const std::string& target) {
    return "bash " + ttt_script() + " " + own + " --bertbench=" + bertbench_path() +
           " --bert_config_file=" + d.path("bert_config.json") + " --input_file=" + shared_dir() +
           "/golden/pretraining/public_128_s12345_d2.tfrecord" +
           " --eval_input_file=" + shared_dir() + "/golden/eval_pick/public_128_eval100.tfrecord" +
           " --train_batch_size=2 --num_train_steps=2 --eval_every_samples=4 --eval_batch_size=2"
           " --max_eval_steps=1 --save_checkpoints_steps=0 --threads=1 --target_mlm_accuracy=" +
           target;
}

TEST(TimeToTrainCli, TwoRunsAreAveragedFromTheirResults) {
    const Dir d;
    const std::string out = d.path("two");
    // Target 0: every run reaches it at its first (and only) evaluation, after 4 samples.
    const RunResult r = run_shell(command(d, "--runs=2 --out=" + out, "0"));
    ASSERT_EQ(r.exit_code, 0) << r.out;
    const json s = json::parse(slurp(out + "/summary.json"));
    ASSERT_EQ(s["runs"].size(), 2u);
    double sum = 0;
    for (int k = 0; k < 2; ++k) {
        const json& run = s["runs"][k];
        EXPECT_EQ(run["seed"], k + 1);
        const json res = json::parse(slurp(out + "/seed-" + std::to_string(k + 1) + "/results.json"));
        EXPECT_EQ(run["status"], "success");
        EXPECT_EQ(run["time_to_target_s"], res["time_to_target_s"]);
        EXPECT_EQ(run["samples_to_target"], 4);
        // The seed reached pretrain: config.json records it.
        const json cfg = json::parse(slurp(out + "/seed-" + std::to_string(k + 1) + "/config.json"));
        EXPECT_EQ(cfg["flags"]["seed"], k + 1) << cfg["flags"].dump();
        sum += res["time_to_target_s"].get<double>();
    }
    EXPECT_TRUE(s["dropped"].empty());  // N < 5: nothing dropped
    EXPECT_EQ(s["score"]["counted_seeds"], json({1, 2}));
    EXPECT_DOUBLE_EQ(s["score"]["time_to_target_s"]["mean"].get<double>(), sum / 2);
    EXPECT_EQ(s["score"]["samples_to_target"]["mean"], 4.0);
    EXPECT_EQ(s["target_mlm_accuracy"], 0.0);
    EXPECT_NE(r.out.find("time to target   : mean"), std::string::npos) << r.out;
    EXPECT_NE(r.out.find("samples to target: mean 4;"), std::string::npos) << r.out;

    // Again with the same --out: the finished runs are reported, not redone; the same score.
    const RunResult again = run_shell(command(d, "--runs=2 --out=" + out, "0"));
    ASSERT_EQ(again.exit_code, 0) << again.out;
    EXPECT_NE(again.out.find("already finished"), std::string::npos) << again.out;
    EXPECT_EQ(json::parse(slurp(out + "/summary.json"))["score"], s["score"]);
}

TEST(TimeToTrainCli, FiveRunsDropTheFastestAndTheSlowest) {
    const Dir d;
    const std::string out = d.path("five");
    const RunResult r = run_shell(command(d, "--seeds=3,1,4,5,9 --out=" + out, "0"));
    ASSERT_EQ(r.exit_code, 0) << r.out;
    const json s = json::parse(slurp(out + "/summary.json"));
    ASSERT_EQ(s["runs"].size(), 5u);
    std::vector<std::pair<double, int>> by_time;
    for (const json& run : s["runs"])
        by_time.emplace_back(run["time_to_target_s"].get<double>(), run["seed"].get<int>());
    std::stable_sort(by_time.begin(), by_time.end(),
                     [](const auto& a, const auto& b) { return a.first < b.first; });
    ASSERT_EQ(s["dropped"].size(), 2u);
    EXPECT_EQ(s["dropped"][0]["seed"], by_time.front().second);
    EXPECT_EQ(s["dropped"][0]["why"], "fastest");
    EXPECT_EQ(s["dropped"][1]["seed"], by_time.back().second);
    EXPECT_EQ(s["dropped"][1]["why"], "slowest");
    double sum = 0;
    for (int i = 1; i <= 3; ++i) sum += by_time[i].first;
    EXPECT_NEAR(s["score"]["time_to_target_s"]["mean"].get<double>(), sum / 3, 1e-9);
    EXPECT_EQ(s["score"]["time_to_target_s"]["runs"], 3);
}

TEST(TimeToTrainCli, RunsMissingTheTargetGiveNoScore) {
    const Dir d;
    const std::string out = d.path("miss");
    const RunResult r = run_shell(command(d, "--runs=2 --out=" + out, "0.99"));
    EXPECT_EQ(r.exit_code, 1) << r.out;
    EXPECT_NE(r.out.find("no score: 2 of 2 runs did not reach the target (seeds 1, 2)"),
              std::string::npos)
        << r.out;
    const json s = json::parse(slurp(out + "/summary.json"));
    EXPECT_TRUE(s["score"].is_null());
    EXPECT_EQ(s["runs"][0]["status"], "target not reached");
    EXPECT_EQ(s["runs"][0]["best_masked_lm_accuracy_samples"], 4);
}

TEST(TimeToTrainCli, FlagsTheScriptSetsAreRefusedInOneLine) {
    const Dir d;
    const RunResult seed = run_shell(command(d, "--runs=2 --out=" + d.path("x") + " --seed=3", "0"));
    EXPECT_EQ(seed.exit_code, 1);
    EXPECT_EQ(seed.out,
              "time-to-train: --seed: set by this script (--seeds=S1,S2,... and --out=DIR), expected "
              "it absent, got --seed=3\n");
    // pretrain reads one dash as two (absl): -seed=99 was passed on, and the script's seed won
    const RunResult dash = run_shell(command(d, "--runs=2 --out=" + d.path("x") + " -seed=99", "0"));
    EXPECT_EQ(dash.exit_code, 1);
    EXPECT_EQ(dash.out,
              "time-to-train: -seed: set by this script (--seeds=S1,S2,... and --out=DIR), expected "
              "it absent, got -seed=99\n");
    const RunResult runs = run_shell(command(d, "--runs=0 --out=" + d.path("x"), "0"));
    EXPECT_EQ(runs.exit_code, 1);
    EXPECT_EQ(runs.out, "time-to-train: --runs: expected an integer >= 1, got \"0\"\n");
    const RunResult empty = run_shell(command(d, "--runs= --out=" + d.path("x"), "0"));
    EXPECT_EQ(empty.out, "time-to-train: --runs: expected an integer >= 1, got \"\"\n");
    EXPECT_FALSE(fs::exists(d.path("x")));
    // one seed in two spellings (pretrain reads 01 as 1), no seeds, no evaluations
    const RunResult twice = run_shell(command(d, "--seeds=1,01 --out=" + d.path("x"), "0"));
    EXPECT_EQ(twice.out, "time-to-train: --seeds: expected distinct seeds, got 1 twice\n");
    const RunResult none = run_shell(command(d, "--seeds= --out=" + d.path("x"), "0"));
    EXPECT_EQ(none.out, "time-to-train: --seeds: expected a comma list of integers, got \"\"\n");
    const RunResult no_eval = run_shell(command(d, "--runs=1 --out=" + d.path("x"), "0") + " --nodo_eval");
    EXPECT_EQ(no_eval.exit_code, 1);
    EXPECT_EQ(no_eval.out,
              "time-to-train: --nodo_eval: time to train is measured by the evaluations, expected them on "
              "(--do_eval), got --nodo_eval\n");
    for (const std::string off : {"-nodo_eval", "--do_eval=N", "-do_eval=FALSE", "--do_eval=f"}) {
        const RunResult r = run_shell(command(d, "--runs=1 --out=" + d.path("x"), "0") + " " + off);
        EXPECT_EQ(r.exit_code, 1) << off;
        EXPECT_NE(r.out.find("time-to-train: " + off + ": time to train is measured by the evaluations"),
                  std::string::npos) << r.out;
    }
    EXPECT_FALSE(fs::exists(d.path("x")));
}

// A run paused (--stop_steps) is not scored; the rerun continues it and the report names it as
// resumed (its time sums two processes). A run that fails after run_start counts as one that did
// not reach the target, and a rerun leaves it as it ended; one that fails before it (a flag
// pretrain refuses) stops the script without a hint to resume.
TEST(TimeToTrainCli, PausedResumedAndFailedRunsAreNamed) {
    const Dir d;
    const std::string out = d.path("resume");
    const RunResult paused = run_shell(command(d, "--runs=1 --out=" + out, "0") + " --stop_steps=1");
    EXPECT_EQ(paused.exit_code, 1) << paused.out;
    EXPECT_NE(paused.out.find("time-to-train: seed 1: not finished"), std::string::npos) << paused.out;
    const RunResult resumed = run_shell(command(d, "--runs=1 --out=" + out, "0"));
    ASSERT_EQ(resumed.exit_code, 0) << resumed.out;
    EXPECT_NE(resumed.out.find("success (resumed)"), std::string::npos) << resumed.out;
    const json s = json::parse(slurp(out + "/summary.json"));
    EXPECT_EQ(s["resumed_seeds"], json({1}));
    EXPECT_EQ(s["runs"][0]["resumed"], true);
    EXPECT_EQ(s["score"]["samples_to_target"]["mean"], 4.0);

    const std::string bad = d.path("nan");
    const std::string diverging = command(d, "--runs=2 --out=" + bad, "0.99") +
                                  " --learning_rate=1e30 --num_train_steps=40 --eval_every_samples=20";
    const RunResult nan = run_shell(diverging);
    EXPECT_EQ(nan.exit_code, 1) << nan.out;
    EXPECT_NE(nan.out.find("seed 2: the run failed after run_start (results.json: aborted); it counts as a "
                           "run that did not reach the target"),
              std::string::npos)
        << nan.out;
    EXPECT_NE(nan.out.find("no score: 2 of 2 runs did not reach the target"), std::string::npos) << nan.out;
    EXPECT_EQ(json::parse(slurp(bad + "/summary.json"))["runs"][1]["status"], "aborted");
    // A rerun does not run the aborted seed again (a resume could make it a success).
    const std::string aborted_before = slurp(bad + "/seed-2/results.json");
    const RunResult again = run_shell(diverging);
    EXPECT_EQ(again.exit_code, 1) << again.out;
    EXPECT_NE(again.out.find("seed 2: failed after run_start in an earlier attempt (results.json: aborted); not "
                             "rerun"),
              std::string::npos)
        << again.out;
    EXPECT_EQ(slurp(bad + "/seed-2/results.json"), aborted_before);

    const RunResult flag = run_shell(command(d, "--seeds=99999999999999999999 --out=" + d.path("flag"), "0"));
    EXPECT_EQ(flag.exit_code, 1);
    EXPECT_NE(flag.out.find("exited with status 1 (its error is above;"), std::string::npos) << flag.out;
    EXPECT_EQ(flag.out.find("resume"), std::string::npos) << flag.out;
}

}  // namespace
}  // namespace bertbench::testing
