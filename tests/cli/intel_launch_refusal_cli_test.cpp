// scripts/launch_benchmark.py (Intel model zoo's launcher) on lines it cannot map: one-line
// refusals that run and create nothing; --dry-run; an --output-dir that cannot be made.
// intel_launch_cli_test.cpp runs the lines it maps.
#include <gtest/gtest.h>

#include <filesystem>
#include <string>
#include <utility>
#include <vector>

#include "cli/cli_fixtures.hpp"
#include "cli/intel_launch_util.hpp"

namespace bertbench {
namespace {
namespace fs = std::filesystem;
using testing::count_of;
using testing::IntelDirs;
using testing::intel_launch;
using testing::running_line;

// What has no bertbench equivalent, or fails in Intel's chain too: one line with the reason, exit
// 1, nothing run or created.
TEST(IntelLaunchBenchmark, UnmappableLinesAreRefusedInOneLine) {
    const IntelDirs d;
    const std::string out = d.tmp.file("never");
    const std::string infer = "--model-name=bert_large --mode=inference --framework=tensorflow"
                              " --batch-size=8 --data-location " + d.dataset + " --checkpoint " +
                              d.checkpoint + " --output-dir " + out;
    const std::string train = "--model-name=bert_large --mode=training --framework=tensorflow"
                              " --output-dir " + out;
    const std::vector<std::pair<std::string, std::string>> cases{
        {infer + " --precision=fp16 -- infer_option=SQuAD",
         "--precision=fp16: bertbench has no fp16"},
        {train + " --precision=int8 -- train_option=SQuAD",
         "Intel has no bert_large int8 training"},
        {infer + " --precision=fp32 --output-results -- infer_option=SQuAD",
         "--output-results: Intel's launcher raises ValueError on it"},
        {infer + " --precision=fp32 --mpi_num_processes=2 -- infer_option=SQuAD",
         "--mpi_num_processes with --mode=inference"},
        {infer + " --precision=fp32 -- infer_option=Classifier", "infer_option=Classifier"},
        {infer + " --precision=fp32 --frobnicate -- infer_option=SQuAD",
         "--frobnicate: not a flag of Intel's launcher (it passes unknown flags on as model args, which are "
         "name=value)"},
        // the flag named, not its value (argparse takes the value for a positional model arg)
        {infer + " --precision=fp32 --frobnicate 3 -- infer_option=SQuAD", "--frobnicate: not a flag"},
        {infer + " --precision=fp32 -- infer_option=SQuAD nonsense", "received: nonsense"},
        {infer + " --precision=fp32 -- infer_option=SQuAD train_file=x",
         "model arg train_file=x: Intel's start.sh passes it on as --train-file and its bert_large "
         "inference model_init.py exits on it"},
        {train + " --precision=fp32 -- train_option=SQuAD steps=5", "model arg steps=5"},
        {train + " --precision=fp32 -- train_option=SQuAD socket-id=1",
         "model arg socket_id=1: it overwrites Intel's launcher setting SOCKET_ID (its "
         "--socket-id)"},
        {train + " --precision=fp32 -- train_option=SQuAD accum_steps=2",
         "Intel's run_squad.py trains nothing with it"},
        // it was multiplied into the steps: "--num_train_steps: expected > 0, got 0" from bertbench
        {train + " --precision=fp32 -- train_option=Pretraining accum_steps=0",
         "model arg accum_steps=0: expected >= 1"},
        {train + " --precision=fp32 -- train_option=Pretraining learning_rate=1e-4x",
         "model arg learning_rate=1e-4x: expected a number (Intel's argparse type), got '1e-4x'"},
        {train + " --precision=fp32 -- train_option=Pretraining warmup_steps=1.5",
         "model arg warmup_steps=1.5: expected an integer (Intel's argparse type), got '1.5'"},
        {train + " --precision=fp32 --mpi_num_processes=2 -- train_option=Pretraining",
         "num_train_steps=1 // 2 ranks = 0"},
        {train + " --precision=fp32 --numa-cores-per-instance=4 -- train_option=SQuAD",
         "--numa-cores-per-instance: multi-instance runs are not mapped"},
        {train + " --precision=fp32 -- train_option=Classifier task_name=MRPC",
         "train_option=Classifier: bertbench has no Classifier fine-tuning"},
        {"--model-name=resnet50 --precision=fp32 --mode=inference --framework=tensorflow",
         "--model-name=resnet50"},
        // argparse's own errors: one line too (it printed its usage), the launcher named once
        {"--model-name=bert_large --mode=inference",
         "launch_benchmark.py: error: the following arguments are required: -f/--framework, -p/--precision"}};
    for (const auto& [args, want] : cases) {
        const auto r = intel_launch(args);
        EXPECT_EQ(r.exit_code, 1) << args << "\n" << r.out;
        EXPECT_EQ(count_of(r.out, "launch_benchmark.py: error: "), 1u) << r.out;
        EXPECT_NE(r.out.find(want), std::string::npos) << want << "\n" << r.out;
        EXPECT_EQ(r.out.find("running: "), std::string::npos) << r.out;
        EXPECT_FALSE(fs::exists(out));
    }
    // --dry-run prints the command and runs nothing; unknown launcher flags are model args
    // (Intel's throughput quickstart: --warmup-steps=50 --steps=350 reach run_squad.py); with both
    // mode flags the benchmark runs (Intel's run_squad.py gets --mode=accuracy --mode=benchmark).
    const auto dry = intel_launch(infer + " --precision=int8 --dry-run --warmup-steps=50 --steps=350"
                            " --benchmark-only --accuracy-only -- infer_option=SQuAD");
    EXPECT_EQ(dry.exit_code, 0) << dry.out;
    EXPECT_EQ(count_of(dry.out, "launch_benchmark.py: running: "), 1u) << dry.out;
    const std::string cmd = running_line(dry.out);
    EXPECT_NE(cmd.find(" bench --task=squad --mode=infer "), std::string::npos) << cmd;
    EXPECT_NE(cmd.find(" --warmup=50 --steps=350 "), std::string::npos) << cmd;
    EXPECT_NE(cmd.find(" --precision=int8"), std::string::npos) << cmd;
    EXPECT_NE(dry.out.find("not Intel's calibrated int8 graph"), std::string::npos) << dry.out;
    EXPECT_NE(dry.out.find("the last wins; so the benchmark runs"), std::string::npos) << dry.out;
    EXPECT_FALSE(fs::exists(out));
    // an --output-dir that cannot be made: one line naming it (it was a Python traceback)
    const std::string under_file = d.dataset + "/dev-v1.1.json/out";
    auto r = intel_launch("--model-name=bert_large --mode=inference --framework=tensorflow --precision=fp32 --batch-size=2 "
                    "--data-location " + d.checkpoint + " --output-dir=" + under_file +
                    " --benchmark-only -- infer_option=SQuAD max_seq_length=64 warmup_steps=0 steps=1");
    EXPECT_EQ(r.exit_code, 1) << r.out;
    EXPECT_NE(r.out.find("launch_benchmark.py: error: --output-dir=" + under_file +
                         ": cannot create the directory (Not a directory)"), std::string::npos) << r.out;
    EXPECT_EQ(r.out.find("Traceback"), std::string::npos) << r.out;
    // training takes the files its model args name: --data-location, --checkpoint are said to do nothing
    r = intel_launch(train + " --precision=fp32 --dry-run --data-location " + d.dataset + " --checkpoint " + d.checkpoint +
               " -- train_option=SQuAD");
    EXPECT_EQ(r.exit_code, 0) << r.out;
    EXPECT_NE(r.out.find("--data-location=" + d.dataset + " (training reads the files the model args name"),
              std::string::npos) << r.out;
    EXPECT_NE(r.out.find("--checkpoint=" + d.checkpoint + " (training reads"), std::string::npos) << r.out;
}

}  // namespace
}  // namespace bertbench
