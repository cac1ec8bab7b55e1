// --dtype=int8 on the command line: bench runs int8 inference points and measures the int8 GEMM
// ceiling; every command that trains refuses int8 in one line before any work.
#include <gtest/gtest.h>

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>

#include "cli/run_util.hpp"

namespace bertbench {
namespace {

using testing::run_bertbench;

TEST(Int8Cli, BenchRunsInt8InferenceNextToFp32) {
    const std::string json_path = ::testing::TempDir() + "/bench_int8.json";
    const auto r = run_bertbench(
        "bench --mode=infer --model=tiny --seq_len=32 --batch_size=2 --threads=1 --warmup=1 --steps=2 "
        "--dtype=fp32,int8 --noceiling --json=" + json_path);
    ASSERT_EQ(r.exit_code, 0) << r.out;
    std::ifstream in(json_path);
    const auto j = nlohmann::json::parse(in);
    ASSERT_EQ(j["points"].size(), 2u);
    EXPECT_EQ(j["points"][0]["dtype"], "fp32");
    EXPECT_EQ(j["points"][1]["dtype"], "int8");
    EXPECT_GT(j["points"][1]["sequences_per_second"].get<double>(), 0);
}

TEST(Int8Cli, BenchMeasuresTheInt8Ceiling) {
    const std::string json_path = ::testing::TempDir() + "/bench_int8_gemm.json";
    const auto r = run_bertbench("bench --mode=gemm --dtype=int8 --threads=1 --gemm_tokens=64 --gemm_reps=1 --json=" +
                                 json_path);
    ASSERT_EQ(r.exit_code, 0) << r.out;
    EXPECT_NE(r.out.find("int8 GEMM"), std::string::npos) << r.out;
    EXPECT_NE(r.out.find(" GOP/s"), std::string::npos) << r.out;  // integer operations, no share of a float peak
    EXPECT_EQ(r.out.find("% of the fp32 FMA peak"), std::string::npos) << r.out;
    std::ifstream in(json_path);
    const auto j = nlohmann::json::parse(in);
    const auto& c = j["ceilings"][0];
    EXPECT_EQ(c["dtype"], "int8");
    EXPECT_EQ(c["model"], "base");  // whose linear shapes
    EXPECT_FALSE(c["gemm_impl"].get<std::string>().empty());
    EXPECT_EQ(c["shapes"].size(), 3u);  // the forward products only
    EXPECT_GT(c["gemm_gflops"].get<double>(), 0);
}

TEST(Int8Cli, TrainingWithInt8IsOneLineError) {
    const std::string dir = ::testing::TempDir() + "/int8_cli";
    std::filesystem::create_directories(dir);
    std::ofstream(dir + "/bert_config.json")
        << R"({"vocab_size": 64, "hidden_size": 8, "num_hidden_layers": 1, "num_attention_heads": 2,
              "intermediate_size": 16, "max_position_embeddings": 512, "type_vocab_size": 2})";
    const std::string golden = std::string(std::getenv("BB_SHARED_DIR")) + "/golden/squad/dataset-v1.1.json";
    const std::vector<std::string> commands = {
        "bench --mode=train --dtype=int8 --model=tiny",
        "pretrain --do_train --dtype=int8 --bert_config_file=" + dir + "/bert_config.json --input_file=" + dir +
            "/none.tfrecord --output_dir=" + dir + "/out",
        "squad --do_train --dtype=int8 --bert_config_file=" + dir + "/bert_config.json --vocab_file=" + dir +
            "/vocab.txt --train_file=" + golden + " --output_dir=" + dir + "/squad",
    };
    for (const std::string& c : commands) {
        const auto r = run_bertbench(c);
        EXPECT_NE(r.exit_code, 0) << c;
        EXPECT_NE(r.out.find("int8 is for inference"), std::string::npos) << c << "\n" << r.out;
        EXPECT_EQ(r.out.find('\n'), r.out.size() - 1) << "more than one line: " << c << "\n" << r.out;
    }
    // In a sweep with points that can run, the int8 training point is skipped with a warning, as
    // any point that cannot run (docs/benchmark.md); the sweep was refused whole before.
    const std::string json_path = dir + "/mixed.json";
    const auto r = run_bertbench(
        "bench --mode=train,infer --model=tiny --seq_len=16 --batch_size=2 --threads=1 --warmup=1 --steps=2 "
        "--dtype=fp32,int8 --noceiling --json=" + json_path);
    ASSERT_EQ(r.exit_code, 0) << r.out;
    EXPECT_NE(r.out.find("warning: skipping point train tiny"), std::string::npos) << r.out;
    EXPECT_NE(r.out.find("int8 is for inference"), std::string::npos) << r.out;
    std::ifstream in(json_path);
    EXPECT_EQ(nlohmann::json::parse(in)["points"].size(), 3u);  // train fp32, infer fp32 and int8
}

}  // namespace
}  // namespace bertbench
