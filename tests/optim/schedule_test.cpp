// LR schedule around its warm-up/decay discontinuity and the MLPerf eval interval, against the
// numpy reference (float64 formula, and float32 with TF's op order) and the reference README.
#include "optim/schedule.hpp"

#include <gtest/gtest.h>

#include <cmath>
#include <cstring>

#include "core/error.hpp"
#include "optim_test_util.hpp"

namespace bertbench::optim {
namespace {

void compare_schedule(const LrSchedule& s, int steps, int max_ulps) {
    testing::TempDir dir;
    nlohmann::json spec = {{"mode", "schedule"},
                           {"learning_rate", s.learning_rate},
                           {"num_train_steps", s.num_train_steps},
                           {"num_warmup_steps", s.num_warmup_steps},
                           {"start_warmup_step", s.start_warmup_step},
                           {"poly_power", s.poly_power}};
    std::vector<float> got;
    for (int i = 0; i < steps; ++i) {
        spec["steps"].push_back(i);
        got.push_back(s.at(i));
    }
    const auto ref = testing::run_reference(dir, spec);
    const auto f64 = ref["f64"].get<std::vector<double>>();
    const auto f32 = ref["f32"].get<std::vector<double>>();
    ASSERT_EQ(f64.size(), got.size());
    // vs the exact formula: fp32 evaluation, rtol 1e-6, atol 1e-12
    testing::expect_close("lr vs float64 formula", got.data(), f64.data(), got.size(), 1e-6, 1e-12);
    // vs TF's float32 op sequence: bit-identical for p = 1; for other p the float pow may differ
    // by 1 ulp between glibc powf and the script's double pow rounded to float (max_ulps 1)
    int bad = 0, worst = 0;
    for (size_t i = 0; i < got.size(); ++i) {
        const float want = static_cast<float>(f32[i]);
        int32_t a, b;
        std::memcpy(&a, &got[i], 4);
        std::memcpy(&b, &want, 4);
        if (std::abs(a - b) > max_ulps) {
            if (!bad) worst = static_cast<int>(i);
            ++bad;
        }
    }
    EXPECT_EQ(bad, 0) << "lr vs TF float32: " << bad << " steps differ by more than " << max_ulps
                      << " ulp; first at step " << worst << ": got " << got[worst] << ", want "
                      << f32[worst];
}

// MLPerf-style: negative start_warmup_step; warm-up ends at s = s0 + W = 211, where the rate drops
// from the ramp (286/287 lr0) to the decay line (1 - 211/600) lr0.
TEST(LrSchedule, AroundTheDiscontinuityMatchesReference) {
    LrSchedule s{4e-4, 600, 287, -76, 1.0};
    compare_schedule(s, 600, 0);
    EXPECT_FLOAT_EQ(s.at(0), 4e-4f * 76 / 287);
    EXPECT_FLOAT_EQ(s.at(210), 4e-4f * 286 / 287);
    EXPECT_FLOAT_EQ(s.at(211), 4e-4f * (1 - 211.0f / 600));
    EXPECT_GT(s.at(210), s.at(211) * 1.5f);
    EXPECT_EQ(s.at(600), 0.0f);
    EXPECT_EQ(s.at(10000), 0.0f);  // min(s, T)
}

TEST(LrSchedule, PolyPowerAndPositiveStartMatchReference) {
    compare_schedule(LrSchedule{1e-3, 300, 50, 20, 0.5}, 400, 1);  // lr < 0 before s0, as TF
    compare_schedule(LrSchedule{5e-4, 250, 0, 0, 2.0}, 300, 1);    // no warm-up
    EXPECT_LT(LrSchedule({1e-3, 300, 50, 20, 0.5}).at(0), 0.0f);
}

// NVIDIA NGC TF's AdamWeightDecay (its optimization.py): the decay starts from lr0 / (1 - W/T), so
// that it meets the warm-up's end at lr0 without a step; the warm-up ramps to lr0 as before.
TEST(LrSchedule, DecayFromItsOwnPeakMeetsTheWarmUpsEnd) {
    LrSchedule s{1e-3, 100, 20, 0, 1.0};
    s.decay_learning_rate = 1e-3 / (1 - 20.0 / 100);
    EXPECT_FLOAT_EQ(s.at(10), 1e-3f * 10 / 20);
    EXPECT_FLOAT_EQ(s.at(20), 1e-3f);  // the crossover: no step
    EXPECT_FLOAT_EQ(s.at(60), 1.25e-3f * (1 - 60.0f / 100));
    EXPECT_EQ(s.at(100), 0.0f);
}

// NGC TF's and TF2's global_step counts updates: with K = 3 micro-steps per update, update u
// (its last micro-step 3u - 1, where the update applies) gets the update-counted schedule's value
// at u - 1, over T and W in updates: the same values as K = 1 on the update counter.
TEST(LrSchedule, UpdateCounterRunsTheScheduleOnUpdates) {
    LrSchedule micro{1e-3, 30, 6, 0, 0.5};  // T = 10, W = 2 updates, in micro-steps
    micro.update_counter = 3;
    const LrSchedule updates{1e-3, 10, 2, 0, 0.5};
    for (int u = 1; u <= 10; ++u) EXPECT_EQ(micro.at(3 * u - 1), updates.at(u - 1)) << "update " << u;
    EXPECT_EQ(micro.at(2), 0.0f);                        // update 1: the warm-up's first rate
    EXPECT_FLOAT_EQ(micro.at(5), 1e-3f * 1 / 2);         // update 2
    EXPECT_FLOAT_EQ(micro.at(8), 1e-3f * std::sqrt(0.8f));  // update 3: decay at 2 of 10
    EXPECT_EQ(micro.at(29), updates.at(9));
}

// NVIDIA PyTorch run_squad.py's warmup_linear: the warm-up a fraction of a (possibly fractional)
// t_total, the decay from lr0 / (1 - w), 0 from t_total on; values worked out by hand from
// optimization.py's formula.
TEST(LrSchedule, NvidiaWarmupLinear) {
    LrSchedule s{3e-5, 38, 0, 0, 1.0};
    s.warmup_linear = {10.0, 0.1, 0};  // BertAdam: t_total = int(69 / 12) * 2.0
    EXPECT_EQ(s.at(0), 0.0f);
    EXPECT_FLOAT_EQ(s.at(1), 3e-5f);                      // x = 0.1: the decay's first value
    EXPECT_FLOAT_EQ(s.at(5), static_cast<float>(3e-5 * 0.5 / 0.9));
    EXPECT_EQ(s.at(10), 0.0f);
    EXPECT_EQ(s.at(30), 0.0f);                            // past t_total: max(..., 0)
    s.warmup_linear = {12.5, 0.1, 0};                     // t_total = 5 * 2.5 epochs
    EXPECT_FLOAT_EQ(s.at(1), static_cast<float>(3e-5 * 0.08 / 0.1));  // warm-up over 1.25 steps
    s.warmup_linear = {10.0, 0.1, 1};                     // LinearWarmUpScheduler: one ahead
    EXPECT_FLOAT_EQ(s.at(0), 3e-5f);
    EXPECT_FLOAT_EQ(s.at(4), static_cast<float>(3e-5 * 0.5 / 0.9));
    s.warmup_linear = {10.0, 1.0, 0};
    EXPECT_THROW(s.validate(), Error);  // BertAdam: "should be in [0.0, 1.0["
    // LinearWarmUpScheduler (--fp16) checks nothing: a warm-up over all of t_total, 0 at its end
    // (Python's (x - 1) / (1 - 1) raises there)
    s.warmup_linear = {10.0, 1.0, 1};
    EXPECT_NO_THROW(s.validate());
    EXPECT_FLOAT_EQ(s.at(0), 3e-6f);
    EXPECT_FLOAT_EQ(s.at(8), 2.7e-5f);
    EXPECT_EQ(s.at(9), 0.0f);
    EXPECT_EQ(s.at(20), 0.0f);
    s.warmup_linear = {10.0, 1.0001, 1};
    EXPECT_THROW(s.validate(), Error);
}

// NVIDIA run_pretraining.py's PolyWarmUpScheduler, values worked by hand: max_steps 4, warm-up
// 0.5, lr 2e-3, 2 micro-steps an update (the update's micro-steps 1, 3, 5, 7).
TEST(LrSchedule, NvidiaPolyWarmup) {
    LrSchedule s{2e-3, 8, 0, 0, 0.5};
    s.poly_warmup = {4.0, 0.5, 0.5, 2};
    EXPECT_FLOAT_EQ(s.at(1), 1e-3f);                                       // u = 1: 2e-3 x 0.25 / 0.5
    EXPECT_FLOAT_EQ(s.at(0), 1e-3f);                                       // the same update's first micro-step
    EXPECT_FLOAT_EQ(s.at(3), static_cast<float>(2e-3 * std::sqrt(0.5)));  // u = 2: p = 0.5, the decay
    EXPECT_FLOAT_EQ(s.at(5), 1e-3f);                                       // u = 3: 2e-3 x 0.25^0.5
    EXPECT_EQ(s.at(7), 0.0f);                                              // u = max_steps: 0
    EXPECT_EQ(s.at(9), 0.0f);                                              // past it: 0, not NaN
    s.poly_warmup = {2.5, 0.0, 0.5, 1};                                    // a float max_steps, no warm-up
    EXPECT_FLOAT_EQ(s.at(0), static_cast<float>(2e-3 * std::sqrt(0.6)));
    EXPECT_NO_THROW(s.validate());
    s.poly_warmup.warmup = 1.5;
    EXPECT_THROW(s.validate(), Error);
}

TEST(LrSchedule, ValidateNamesTheFlag) {
    try {
        LrSchedule{1e-3, 0, 10, 0, 1.0}.validate();
        ADD_FAILURE() << "expected Error";
    } catch (const Error& e) {
        EXPECT_NE(std::string(e.what()).find("--num_train_steps"), std::string::npos);
    }
    EXPECT_THROW((LrSchedule{1e-3, 10, -1, 0, 1.0}.validate()), Error);
    EXPECT_THROW((LrSchedule{1e-3, 10, 1, 0, 0.0}.validate()), Error);
}

TEST(EvalInterval, MatchesReadmeTableAndPythonFloatFormula) {
    // The table in mlcommons/training retired_benchmarks/bert/README.md.
    EXPECT_EQ(mlperf_eval_interval_samples(256), 150000);
    EXPECT_EQ(mlperf_eval_interval_samples(1024), 150000);
    EXPECT_EQ(mlperf_eval_interval_samples(1536), 150000);
    EXPECT_EQ(mlperf_eval_interval_samples(2048), 150000);
    EXPECT_EQ(mlperf_eval_interval_samples(3072), 175000);
    EXPECT_EQ(mlperf_eval_interval_samples(4096), 175000);
    EXPECT_EQ(mlperf_eval_interval_samples(8192), 225000);
    EXPECT_THROW(mlperf_eval_interval_samples(0), Error);
    // Every batch size 1..70000 and some large ones vs Python's float evaluation.
    testing::TempDir dir;
    nlohmann::json spec = {{"mode", "eval_interval"}};
    std::vector<int64_t> sizes;
    for (int64_t b = 1; b <= 70000; ++b) sizes.push_back(b);
    for (int64_t b : {98304, 131072, 1 << 20, 10000000}) sizes.push_back(b);
    spec["batch_sizes"] = sizes;
    const auto ref = testing::run_reference(dir, spec).get<std::vector<int64_t>>();
    ASSERT_EQ(ref.size(), sizes.size());
    int bad = 0;
    for (size_t i = 0; i < sizes.size(); ++i) {
        if (mlperf_eval_interval_samples(sizes[i]) != ref[i] && bad++ < 5)
            ADD_FAILURE() << "GBS " << sizes[i] << ": got " << mlperf_eval_interval_samples(sizes[i])
                          << ", want " << ref[i];
    }
    EXPECT_EQ(bad, 0);
}

}  // namespace
}  // namespace bertbench::optim
