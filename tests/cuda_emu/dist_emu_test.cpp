// Data parallelism on the CUDA backend, which the GPU machine (one GPU, no mpirun) cannot run:
// `mpirun -np 2 bertbench_emu pretrain --device=cuda:0`, two ranks sharing the emulated GPU, their
// gradients summed by NCCL (the emulation's, over MPI: tests/cuda_emu/shim/nccl_emu.cpp; buckets
// started during the backward on a stream of their own) and, with BB_DEVICE_COMM=host, staged
// through host memory — against each other, one process of the same global batch on that GPU and
// two CPU ranks. Skipped without mpirun.
#include <gtest/gtest.h>
#include <unistd.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "cli/run_util.hpp"
#include "dist/mpi_util.hpp"
#include "test_util.hpp"

namespace {
namespace fs = std::filesystem;
using bertbench::testing::bertbench_path;
using bertbench::testing::check_mlperf_log;
using bertbench::testing::count_of;
using bertbench::testing::eval_data;
using bertbench::testing::mpirun_missing;
using bertbench::testing::read_jsonl;
using bertbench::testing::run_mpi;
using bertbench::testing::run_shell;
using bertbench::testing::train_data;
using nlohmann::json;

constexpr int kSteps = 6;

// The pretrain command line of a small model with dropout off (the masks depend on each rank's
// local batch: docs/distributed.md), the gradient clipped after the all-reduce, file order.
std::string pretrain(const bertbench::testing::TmpDir& d, const std::string& out,
                     const char* device) {
    if (!fs::exists(d.file("bert_config.json")))
        std::ofstream(d.file("bert_config.json"))
            << R"({"vocab_size": 30522, "hidden_size": 48, "num_hidden_layers": 2,
                  "num_attention_heads": 3, "intermediate_size": 80,
                  "max_position_embeddings": 512, "type_vocab_size": 2,
                  "hidden_dropout_prob": 0.0, "attention_probs_dropout_prob": 0.0})";
    return " pretrain --bert_config_file=" + d.file("bert_config.json") +
           " --input_file=" + train_data() + " --eval_input_file=" + eval_data() +
           " --output_dir=" + d.file(out) +
           " --train_batch_size=4 --num_warmup_steps=2 --learning_rate=2e-3 --num_train_steps=" +
           std::to_string(kSteps) +
           " --eval_every_samples=24 --max_eval_steps=1 --eval_batch_size=8" +
           " --save_checkpoints_steps=0 --shuffle_buffer=0 "
           "--clip_by_global_norm_after_gradient_allreduce" +
           " --threads=1 --seed=5 --device=" + device;
}

TEST(DataParallelOnTheEmulatedGpu, SlowTwoRanksSharingItEqualOneProcessAndTwoCpuRanks) {
    if (const std::string why = mpirun_missing(); !why.empty()) GTEST_SKIP() << why;
    const bertbench::testing::TmpDir d("bb_dp_emu");
    const std::string emu = BB_BERTBENCH_EMU;
    const auto one = run_shell(emu + pretrain(d, "one", "cuda"));
    ASSERT_EQ(one.exit_code, 0) << one.out;
    // both ranks on GPU 0; NCCL (emulated) by default, host memory on request
    const auto two = run_mpi(2, emu + pretrain(d, "two", "cuda:0"), 600);
    ASSERT_EQ(two.exit_code, 0) << two.out;
    EXPECT_NE(two.out.find("gradients averaged by NCCL 2.99.0 (rank 0 of 2)"), std::string::npos)
        << two.out;
    const auto staged =
        run_shell("BB_DEVICE_COMM=host " + bertbench::testing::mpirun_prefix(2, 600) + emu +
                  pretrain(d, "staged", "cuda:0"));
    ASSERT_EQ(staged.exit_code, 0) << staged.out;
    EXPECT_NE(staged.out.find("gradients averaged by host memory (BB_DEVICE_COMM=host)"),
              std::string::npos)
        << staged.out;
    // A sum of two is the same in any order: NCCL's and MPI's on the host give the same bits.
    EXPECT_EQ(bertbench::testing::train_lines(d.file("two")),
              bertbench::testing::train_lines(d.file("staged")));
    const auto cpu = run_mpi(2, bertbench_path() + pretrain(d, "cpu", "cpu"), 300);
    ASSERT_EQ(cpu.exit_code, 0) << cpu.out;

    const std::vector<json> a = read_jsonl(d.file("one") + "/train_log.jsonl"),
                            b = read_jsonl(d.file("two") + "/train_log.jsonl"),
                            c = read_jsonl(d.file("cpu") + "/train_log.jsonl");
    ASSERT_EQ(a.size(), size_t{kSteps});
    ASSERT_EQ(b.size(), size_t{kSteps}) << "rank 0 alone writes the log";
    ASSERT_EQ(c.size(), size_t{kSteps});
    // Tolerance (numpy.isclose form, atol 0): rtol 1e-5, as for two CPU ranks against one process
    // (tests/dist/mpi_pretrain_test.cpp): fp32 sums in another order; the emulated GEMMs are
    // OpenBLAS's, the CPU engine's oneDNN's, which differ by rounding only.
    double worst_two = 0, worst_cpu = 0;
    for (size_t i = 0; i < a.size(); ++i) {
        EXPECT_EQ(b[i]["samples"], a[i]["samples"]);
        for (const char* k : {"loss", "mlm_loss", "nsp_loss", "grad_norm"}) {
            const double want = a[i][k].get<double>(), got_two = b[i][k].get<double>(),
                         got_cpu = c[i][k].get<double>();
            EXPECT_NEAR(got_two, want, 1e-5 * std::abs(want)) << k << " at step " << i + 1;
            EXPECT_NEAR(got_cpu, want, 1e-5 * std::abs(want)) << k << " at step " << i + 1;
            worst_two = std::max(worst_two, std::abs(got_two - want) / std::abs(want));
            worst_cpu = std::max(worst_cpu, std::abs(got_cpu - want) / std::abs(want));
        }
    }
    std::printf(
        "max relative difference from one process on the GPU: 2 GPU ranks %.3g, 2 CPU ranks %.3g\n",
        worst_two, worst_cpu);
    EXPECT_NE(a.front()["loss"], a.back()["loss"]) << "the model trained";
    const std::vector<json> ea = read_jsonl(d.file("one") + "/eval_log.jsonl"),
                            eb = read_jsonl(d.file("two") + "/eval_log.jsonl");
    ASSERT_EQ(ea.size(), eb.size());
    ASSERT_FALSE(ea.empty());
    for (size_t i = 0; i < ea.size(); ++i) {
        EXPECT_EQ(eb[i]["examples"], ea[i]["examples"]);
        EXPECT_NEAR(eb[i]["masked_lm_loss"].get<double>(), ea[i]["masked_lm_loss"].get<double>(),
                    1e-4);
    }
    // One writer, a compliant log, its platform the two ranks' GPU.
    const std::string ml = bertbench::testing::slurp(d.file("two") + "/mlperf.log");
    EXPECT_EQ(count_of(ml, "\"run_start\""), 1u);
    EXPECT_NE(ml.find("\"submission_platform\", \"value\": \"2x"), std::string::npos) << ml;
    const auto check = check_mlperf_log(d.file("two") + "/mlperf.log", "--division=open");
    EXPECT_EQ(check.exit_code, 0) << check.out;
}

}  // namespace
