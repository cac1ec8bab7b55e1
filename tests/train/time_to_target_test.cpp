// TimeToTarget (train/time_to_target.hpp): the first evaluation at or above the target fixes the
// samples and time to target; the best accuracy and when it came are kept for a run that does not
// get there; the state round-trips through a checkpoint and a checkpoint written before the
// best_* fields existed still restores.
#include "train/time_to_target.hpp"

#include <gtest/gtest.h>

#include <string>

#include "core/error.hpp"

namespace bertbench::train {
namespace {
using nlohmann::json;

TEST(TimeToTarget, FirstEvaluationAtOrAboveTheTargetFixesSamplesAndTime) {
    TimeToTarget t;
    t.target = 0.5;
    EXPECT_FALSE(t.record(0.2, 100, 10.0));
    EXPECT_FALSE(t.record(0.4, 200, 20.0));
    EXPECT_FALSE(t.record(0.3, 300, 30.0));
    EXPECT_TRUE(t.record(0.5, 400, 41.5));  // >=, as MLPerf's closed_bert.yaml (value >= 0.720)
    EXPECT_FALSE(t.record(0.6, 500, 50.0));  // already reached: nothing moves
    EXPECT_TRUE(t.reached);
    EXPECT_EQ(t.samples_to_target, 400);
    EXPECT_DOUBLE_EQ(t.time_to_target_s, 41.5);
    EXPECT_EQ(t.evals, 5);
    EXPECT_DOUBLE_EQ(t.best_accuracy, 0.6);
    EXPECT_EQ(t.best_samples, 500);
    EXPECT_DOUBLE_EQ(t.last_accuracy, 0.6);
    const std::string s = t.summary(500, 50.0, 2.25);
    EXPECT_NE(s.find("time to target 41.5 s, 400 samples"), std::string::npos) << s;
    EXPECT_NE(s.find("2.2 s of initialisation before run_start not counted"), std::string::npos) << s;

    json r;
    t.add_results(r);
    EXPECT_EQ(r["target_reached"], true);
    EXPECT_EQ(r["samples_to_target"], 400);
    EXPECT_EQ(r["time_to_target_s"], 41.5);
    EXPECT_EQ(r["best_masked_lm_accuracy_samples"], 500);
}

TEST(TimeToTarget, NotReachedSaysHowFarItGot) {
    TimeToTarget t;
    t.target = 0.72;
    t.record(0.2, 100, 10.0);
    t.record(0.31, 200, 20.0);
    t.record(0.31, 300, 30.0);  // a tie: the first evaluation at the best value is kept
    t.record(0.25, 400, 40.0);
    EXPECT_FALSE(t.reached);
    EXPECT_EQ(t.best_samples, 200);
    EXPECT_DOUBLE_EQ(t.best_elapsed_s, 20.0);
    json r;
    t.add_results(r);
    EXPECT_EQ(r["target_reached"], false);
    EXPECT_TRUE(r["samples_to_target"].is_null());
    EXPECT_TRUE(r["time_to_target_s"].is_null());
    EXPECT_EQ(r["best_masked_lm_accuracy_samples"], 200);
    EXPECT_EQ(r["best_masked_lm_accuracy_time_s"], 20.0);
    const std::string s = t.summary(420, 44.0, -1);
    EXPECT_EQ(s, "target masked-LM accuracy 0.72 not reached in 420 samples (44.0 s after "
                 "run_start): best 0.3100 at 200 samples (20.0 s after run_start), last 0.2500 (4 "
                 "evaluations)");
    TimeToTarget none;
    EXPECT_NE(none.summary(64, 3.0, -1).find("no evaluation in 64 samples"), std::string::npos);
}

TEST(TimeToTarget, StateRoundTripsAndOldCheckpointsRestore) {
    TimeToTarget t;
    t.target = 0.5;
    t.record(0.3, 100, 10.0);
    t.record(0.55, 200, 21.0);
    TimeToTarget u;
    u.restore(t.state(), 200);
    EXPECT_EQ(u.state(), t.state());

    // A checkpoint from before best_samples/best_elapsed_s: they are unknown, the rest restores.
    json old = t.state();
    old.erase("best_samples");
    old.erase("best_elapsed_s");
    TimeToTarget v;
    v.restore(old, 200);
    EXPECT_EQ(v.samples_to_target, 200);
    EXPECT_EQ(v.best_samples, -1);
    EXPECT_NE(v.summary(200, 22.0, -1).find("time to target 21.0 s"), std::string::npos);

    // Counts beyond what the checkpoint saw are refused, naming the field.
    json bad = t.state();
    bad["best_samples"] = 300;
    try {
        TimeToTarget w;
        w.restore(bad, 200);
        FAIL() << "restored best_samples 300 from a checkpoint at 200 samples";
    } catch (const Error& e) {
        EXPECT_NE(std::string(e.what()).find("\"best_samples\""), std::string::npos) << e.what();
    }
    json no_flag = t.state();
    no_flag["target_reached"] = 1;
    EXPECT_THROW(TimeToTarget().restore(no_flag, 200), Error);
}

}  // namespace
}  // namespace bertbench::train
