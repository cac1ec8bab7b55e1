// Time to target end to end ($BB_BERTBENCH pretrain, a tiny model on the golden records): a run
// whose target is out of reach says how far it got (best accuracy, at which samples and time) and
// logs run_stop "aborted"; the same run with its best accuracy as the target stops at the
// evaluation that first reached it, with results.json's samples and time to target equal to what
// eval_log.jsonl and mlperf.log (run_start -> run_stop, eval_accuracy's epoch_num) say.
#include <fmt/format.h>
#include <gtest/gtest.h>
#include <unistd.h>

#include <cmath>
#include <filesystem>
#include <fstream>
#include <map>
#include <nlohmann/json.hpp>
#include <sstream>
#include <string>
#include <vector>

#include "../cli/run_util.hpp"
#include "test_util.hpp"

namespace bertbench::train {
namespace {
namespace fs = std::filesystem;
using bertbench::testing::eval_lines;
using bertbench::testing::run_bertbench;
using bertbench::testing::shared_dir;
using bertbench::testing::slurp;
using nlohmann::json;

struct TttRunDir {
    fs::path dir;
    TttRunDir() {
        dir = fs::temp_directory_path() / ("bb_ttt_" + std::to_string(getpid()));
        fs::remove_all(dir);
        fs::create_directories(dir);
        std::ofstream(dir / "bert_config.json")
            << R"({"vocab_size": 30522, "hidden_size": 64, "num_hidden_layers": 2,
                  "num_attention_heads": 2, "intermediate_size": 128,
                  "max_position_embeddings": 512, "type_vocab_size": 2})";
    }
    ~TttRunDir() { fs::remove_all(dir); }
    std::string path(const std::string& name) const { return (dir / name).string(); }
};

// 16 steps of 4 sequences, an evaluation every 16 samples (4 in all) on 16 held-out examples.
std::string command(const TttRunDir& d, const std::string& out, const std::string& target) {
    return "pretrain --bert_config_file=" + d.path("bert_config.json") +
           " --input_file=" + shared_dir() + "/golden/pretraining/public_128_s12345_d2.tfrecord" +
           " --eval_input_file=" + shared_dir() + "/golden/eval_pick/public_128_eval100.tfrecord" +
           " --output_dir=" + out +
           " --train_batch_size=4 --num_train_steps=16 --num_warmup_steps=2 --learning_rate=1e-2"
           " --eval_every_samples=16 --eval_batch_size=8 --max_eval_steps=2"
           " --save_checkpoints_steps=0 --threads=1 --seed=7 --target_mlm_accuracy=" + target;
}

struct Mllog {
    std::vector<json> events;
    explicit Mllog(const std::string& path) {
        std::istringstream in(slurp(path));
        for (std::string line; std::getline(in, line);)
            if (line.rfind(":::MLLOG ", 0) == 0) events.push_back(json::parse(line.substr(9)));
    }
    std::vector<json> all(const std::string& key) const {
        std::vector<json> v;
        for (const auto& e : events)
            if (e["key"] == key) v.push_back(e);
        return v;
    }
};

TEST(TimeToTargetE2E, UnreachedSaysHowFarAndReachedStopsAtTheFirstEvalAtTarget) {
    const TttRunDir d;
    // 1. A target no tiny model reaches in 64 samples.
    const std::string a = d.path("a");
    const auto ra = run_bertbench(command(d, a, "0.99"));
    ASSERT_EQ(ra.exit_code, 0) << ra.out;
    const json res_a = json::parse(slurp(a + "/results.json"));
    EXPECT_EQ(res_a["status"], "target not reached");
    EXPECT_EQ(res_a["target_reached"], false);
    EXPECT_TRUE(res_a["samples_to_target"].is_null());
    EXPECT_TRUE(res_a["time_to_target_s"].is_null());
    EXPECT_GE(res_a["initialization_s"].get<double>(), 0.0);
    const auto evals = bertbench::testing::read_jsonl(a + "/eval_log.jsonl");
    ASSERT_EQ(evals.size(), 4u);  // at 16, 32, 48, 64 samples
    size_t best = 0;
    for (size_t i = 1; i < evals.size(); ++i)
        if (evals[i]["masked_lm_accuracy"].get<double>() > evals[best]["masked_lm_accuracy"].get<double>())
            best = i;
    const double best_acc = evals[best]["masked_lm_accuracy"].get<double>();
    ASSERT_GT(best_acc, 0.0) << "the tiny model learnt nothing; the reached case below needs a target > 0";
    EXPECT_EQ(res_a["best_masked_lm_accuracy"].get<double>(), best_acc);
    EXPECT_EQ(res_a["best_masked_lm_accuracy_samples"], evals[best]["samples"]);
    // The best evaluation's time is taken as it ends; eval_log's elapsed_s just after.
    EXPECT_NEAR(res_a["best_masked_lm_accuracy_time_s"].get<double>(),
                evals[best]["elapsed_s"].get<double>(), 0.5);
    EXPECT_NE(ra.out.find("target masked-LM accuracy 0.99 not reached in 64 samples"), std::string::npos)
        << ra.out;
    EXPECT_NE(ra.out.find(fmt::format("best {:.4f} at {} samples", best_acc,
                                      evals[best]["samples"].get<int64_t>())),
              std::string::npos)
        << ra.out;
    const Mllog la(a + "/mlperf.log");
    const auto acc_a = la.all("eval_accuracy");
    ASSERT_EQ(acc_a.size(), evals.size());
    for (size_t i = 0; i < evals.size(); ++i) {
        EXPECT_EQ(acc_a[i]["metadata"]["epoch_num"], evals[i]["samples"]) << i;
        EXPECT_EQ(acc_a[i]["metadata"]["samples_count"], evals[i]["samples"]) << i;
        EXPECT_EQ(acc_a[i]["value"].get<double>(), evals[i]["masked_lm_accuracy"].get<double>()) << i;
    }
    ASSERT_EQ(la.all("run_stop").size(), 1u);
    EXPECT_EQ(la.all("run_stop")[0]["metadata"]["status"], "aborted");

    // 2. The same run with that best accuracy as its target (printed exactly): it stops at the
    // first evaluation that reached it, the same bits as run 1's up to there.
    const std::string b = d.path("b");
    const auto rb = run_bertbench(command(d, b, fmt::format("{:.17g}", best_acc)));
    ASSERT_EQ(rb.exit_code, 0) << rb.out;
    const json res_b = json::parse(slurp(b + "/results.json"));
    EXPECT_EQ(res_b["status"], "success");
    EXPECT_EQ(res_b["target_reached"], true);
    const int64_t want_samples = evals[best]["samples"].get<int64_t>();
    EXPECT_EQ(res_b["samples_to_target"].get<int64_t>(), want_samples);
    EXPECT_EQ(res_b["samples"].get<int64_t>(), want_samples);  // stopped there
    const std::vector<std::string> lines_a = eval_lines(a), lines_b = eval_lines(b);
    ASSERT_EQ(lines_b.size(), best + 1);
    for (size_t i = 0; i <= best; ++i) EXPECT_EQ(lines_b[i], lines_a[i]) << "evaluation " << i;
    const auto evals_b = bertbench::testing::read_jsonl(b + "/eval_log.jsonl");
    const double ttt = res_b["time_to_target_s"].get<double>();
    EXPECT_NEAR(ttt, evals_b.back()["elapsed_s"].get<double>(), 0.5);
    EXPECT_LE(ttt, res_b["wall_time_s"].get<double>());
    EXPECT_NE(rb.out.find(fmt::format("time to target {:.1f} s, {} samples", ttt, want_samples)),
              std::string::npos)
        << rb.out;
    // What MLPerf's scoring reads: run_start -> run_stop (success) in ms, and the eval_accuracy
    // that reached the target with its samples.
    const Mllog lb(b + "/mlperf.log");
    ASSERT_EQ(lb.all("run_start").size(), 1u);
    ASSERT_EQ(lb.all("run_stop").size(), 1u);
    EXPECT_EQ(lb.all("run_stop")[0]["metadata"]["status"], "success");
    const double mlperf_s = (lb.all("run_stop")[0]["time_ms"].get<int64_t>() -
                             lb.all("run_start")[0]["time_ms"].get<int64_t>()) / 1e3;
    EXPECT_NEAR(mlperf_s, ttt, 0.5);
    const auto acc_b = lb.all("eval_accuracy");
    ASSERT_EQ(acc_b.size(), best + 1);
    EXPECT_GE(acc_b.back()["value"].get<double>(), best_acc);
    EXPECT_EQ(acc_b.back()["metadata"]["epoch_num"].get<int64_t>(), want_samples);
    for (const char* key : {"train_samples", "eval_samples", "init_start", "init_stop", "opt_name",
                            "opt_lamb_learning_rate_decay_poly_power", "cache_clear"})
        EXPECT_EQ(lb.all(key).size(), 1u) << key;
    // an evaluation reads --max_eval_steps=2 batches of 8 of the 100 eval records: 16 sequences
    EXPECT_EQ(lb.all("eval_samples")[0]["value"], 16);
    EXPECT_EQ(lb.all("opt_name")[0]["value"], "lamb");
    EXPECT_EQ(lb.all("cache_clear")[0]["value"], true);  // the input files' page cache dropped
    // init_start is the run's start, before its set-up (its initialization_s), not at init_stop
    const double init_ms = static_cast<double>(lb.all("init_stop")[0]["time_ms"].get<int64_t>() -
                                               lb.all("init_start")[0]["time_ms"].get<int64_t>());
    EXPECT_NEAR(init_ms / 1e3, res_b["initialization_s"].get<double>(), 0.05);
    // wall_time_s is run_start -> run_stop: the final checkpoint's write after run_stop is not in it
    EXPECT_NEAR(res_b["wall_time_s"].get<double>(), mlperf_s, 0.05);
    // Both logs, the aborted run's and the one that reached its target, pass the compliance
    // checker's rules (scripts/mlperf_log_check.py; open division: no accuracy floor).
    for (const std::string& dir : {a, b}) {
        const auto c = bertbench::testing::check_mlperf_log(dir + "/mlperf.log", "--division=open");
        EXPECT_EQ(c.exit_code, 0) << dir << ":\n" << c.out;
    }
}

TEST(TimeToTargetE2E, TargetOutsideZeroToOneIsOneLineNamingTheFlag) {
    const TttRunDir d;
    const auto r = run_bertbench(command(d, d.path("c"), "1.5"));
    EXPECT_NE(r.exit_code, 0);
    EXPECT_NE(r.out.find("error: --target_mlm_accuracy: expected a masked-LM accuracy in [0, 1]"),
              std::string::npos)
        << r.out;
    EXPECT_NE(r.out.find("got 1.5"), std::string::npos) << r.out;
    EXPECT_FALSE(fs::exists(d.path("c") + "/mlperf.log"));
}

}  // namespace
}  // namespace bertbench::train
