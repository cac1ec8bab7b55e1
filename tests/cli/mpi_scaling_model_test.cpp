// scripts/mpi-scaling-model.py (docs/distributed.md, "Scaling model"): its parameter counts and
// all-reduced bytes are the engine's ParamTable's, a derived step time follows the engine's FLOP
// formula, and its table follows the ring all-reduce formula.
#include <gtest/gtest.h>

#include <cmath>
#include <nlohmann/json.hpp>
#include <string>

#include "cli/mpi_test_util.hpp"
#include "model/bert.hpp"
#include "model/config.hpp"
#include "model/param_table.hpp"

namespace bertbench {
namespace {
using testing::run_shell;

nlohmann::json run_model(const std::string& args) {
    const auto r = run_shell("python3 " + testing::source_dir() + "/scripts/mpi-scaling-model.py " +
                             args + " --json");
    EXPECT_EQ(r.exit_code, 0) << r.out;
    return nlohmann::json::parse(r.out);
}

// One full-length sequence of `seq` tokens with `preds` masked positions.
model::Batch one_sequence(int seq, int preds) {
    model::Batch b;
    b.batch_size = 1;
    b.seq_offsets = {0, seq};
    b.masked_index.assign(static_cast<size_t>(preds), 0);
    return b;
}

TEST(MpiScalingModel, ParametersAndBytesAreTheParamTables) {
    const auto rows =
        run_model("--models=tiny,mini,base,large --step_s=base=2 --nodes=2 --gbps=100");
    ASSERT_EQ(rows.size(), 4u);
    for (const auto& r : rows) {
        const model::ParamTable table(model::BertConfig::preset(r["model"]),
                                      model::Heads::pretraining);
        EXPECT_EQ(r["parameters"].get<size_t>(), table.num_parameters()) << r["model"];
        EXPECT_EQ(r["bytes"].get<size_t>(), table.total_floats() * sizeof(float)) << r["model"];
    }
    EXPECT_EQ(rows[2]["parameters"].get<size_t>(), 110106428u);  // BERT-base with both heads
}

TEST(MpiScalingModel, RingFormulaAndDerivedStepTime) {
    const auto rows = run_model(
        "--models=base,large --step_s=base=2 --nodes=2,8,256 --gbps=25,100 --overlap=0.5");
    ASSERT_EQ(rows.size(), 12u);
    const model::BertConfig base = model::BertConfig::preset("base"),
                            large = model::BertConfig::preset("large");
    const double ratio = model::forward_flops(large, one_sequence(128, 20)) /
                         model::forward_flops(base, one_sequence(128, 20));
    for (const auto& r : rows) {
        const double n = r["nodes"], gbps = r["gbps"], bytes = r["bytes"], step = r["step_s"];
        const double comm = 2 * (n - 1) / n * bytes / (gbps * 1e9 / 8);
        EXPECT_NEAR(r["allreduce_s"].get<double>(), comm, 1e-12 * comm);
        EXPECT_NEAR(r["efficiency_no_overlap"].get<double>(), step / (step + comm), 1e-12);
        EXPECT_NEAR(r["efficiency_overlap"].get<double>(),
                    step / (step + std::max(0.0, comm - 0.5 * step)), 1e-12);
        // At the "needed" compute time the efficiency is the target (90%).
        const double need = r["step_s_for_target_no_overlap"];
        EXPECT_NEAR(need / (need + comm), 0.9, 1e-12);
        const double need_o = r["step_s_for_target_overlap"];
        EXPECT_NEAR(need_o / (need_o + std::max(0.0, comm - 0.5 * need_o)), 0.9, 1e-12);
        if (r["model"] == "large") {
            EXPECT_NEAR(step, 2 * ratio, 1e-9 * step);
            EXPECT_NE(r["step_source"].get<std::string>().find("derived"), std::string::npos);
        } else {
            EXPECT_EQ(step, 2.0);
        }
    }
}

TEST(MpiScalingModel, BadArgumentsAreOneLineErrors) {
    for (const char* args : {"--step_s=base", "--step_s=foo=1", "--step_s=base=-1",
                             "--step_s=base=1 --nodes=0", "--step_s=base=1 --models=huge"}) {
        const auto r =
            run_shell("python3 " + testing::source_dir() + "/scripts/mpi-scaling-model.py " + args);
        EXPECT_NE(r.exit_code, 0) << args;
        EXPECT_NE(r.out.find("mpi-scaling-model: "), std::string::npos) << args << "\n" << r.out;
        EXPECT_EQ(r.out.find("Traceback"), std::string::npos) << r.out;
    }
}

}  // namespace
}  // namespace bertbench
