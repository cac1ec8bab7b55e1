// The fine-tuning's length, schedule and optimizer (train::squad_plan): google-research/bert
// run_squad.py's, and NVIDIA PyTorch run_squad.py's, each counted by hand from the scripts'
// formulas (run_squad.py main(); NVIDIA's main() loop and optimization.py's warmup_linear).
#include <gtest/gtest.h>

#include <string>

#include "core/error.hpp"
#include "train/squad_train.hpp"

namespace bertbench::train {
namespace {

TEST(SquadPlan, GoogleCountsExamplesTimesEpochs) {
    SquadTrainOptions o;
    o.train_batch_size = 12;
    o.num_train_epochs = 2.0;
    o.warmup_proportion = 0.1;
    const SquadPlan p = squad_plan(o, 69, 228);  // features do not count
    EXPECT_EQ(p.updates, 11);                     // int(69 / 12 * 2)
    EXPECT_EQ(p.schedule.num_warmup_steps, 1);    // int(1.1)
    EXPECT_EQ(p.schedule.warmup_linear.total_steps, 0.0);
    EXPECT_EQ(p.optimizer.epsilon, 1e-6);
}

TEST(SquadPlan, NvidiaRunsWholeEpochsOfFeaturesOnASchedule) {
    SquadTrainOptions o;
    o.num_train_epochs = 2.5;
    o.warmup_proportion = 0.1;
    o.nvidia = {6, 2, 1, -1, false};  // micro-batches of 6, 2 per update, one process
    SquadPlan p = squad_plan(o, 69, 228);
    // int(2.5) epochs of ceil(228 / 6) = 38 micro-batches, an update every 2: 19 per epoch.
    EXPECT_EQ(p.updates, 2 * 19);
    EXPECT_EQ(p.schedule.warmup_linear.total_steps, 5 * 2.5);  // int(69 / 6 / 2) * 2.5
    EXPECT_EQ(p.schedule.warmup_linear.step_offset, 0);        // BertAdam
    EXPECT_EQ(p.optimizer.epsilon, 1e-6);
    o.nvidia.fused_adam = true;  // --fp16: FusedAdam, LinearWarmUpScheduler
    p = squad_plan(o, 69, 228);
    EXPECT_EQ(p.schedule.warmup_linear.step_offset, 1);
    EXPECT_EQ(p.optimizer.epsilon, 1e-8);
    o.nvidia.max_steps = 4;  // breaks once global_step > 4
    EXPECT_EQ(squad_plan(o, 69, 228).updates, 5);
    // Three processes under the launcher: DistributedSampler's ceil(228 / 3) = 76 features each,
    // 13 micro-batches, 6 updates an epoch; t_total floored over the processes.
    o.nvidia = {6, 2, 3, -1, false};
    p = squad_plan(o, 69, 228);
    EXPECT_EQ(p.updates, 2 * 6);
    EXPECT_EQ(p.schedule.warmup_linear.total_steps, 4.0);  // floor(12.5 / 3)
}

TEST(SquadPlan, NvidiaErrorsNameTheFlag) {
    SquadTrainOptions o;
    o.nvidia = {8, 1, 1, -1, false};
    o.num_train_epochs = 0.5;  // int(0.5) = 0 epochs: no update
    try {
        squad_plan(o, 69, 228);
        ADD_FAILURE() << "expected Error";
    } catch (const Error& e) {
        EXPECT_NE(std::string(e.what()).find("--num_train_epochs=0.5"), std::string::npos) << e.what();
    }
    o.num_train_epochs = 2;
    EXPECT_THROW(squad_plan(o, 7, 228), Error);  // t_total = int(7 / 8) x 2 = 0
    o.warmup_proportion = 1.0;                    // BertAdam refuses warmup >= 1
    try {
        squad_plan(o, 69, 228);
        ADD_FAILURE() << "expected Error";
    } catch (const Error& e) {
        EXPECT_NE(std::string(e.what()).find("--warmup_proportion"), std::string::npos) << e.what();
    }
}

}  // namespace
}  // namespace bertbench::train
