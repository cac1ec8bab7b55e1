// The profiler (core/profile.hpp) attributes time to labels by marks and scopes; the per-op
// breakdown of a real step covers the whole step (shares sum to 100%) and names the GEMM roles.
#include "core/profile.hpp"

#include <gtest/gtest.h>

#include <chrono>
#include <numeric>

#include "bench/runner.hpp"

namespace bertbench::bench {
namespace {

void spin_ms(double ms) {  // busy-wait: the profiler measures wall time
    const auto end =
        std::chrono::steady_clock::now() + std::chrono::duration<double, std::milli>(ms);
    while (std::chrono::steady_clock::now() < end) {
    }
}

double seconds_of(const std::string& label) {
    for (const auto& e : profile::entries())
        if (e.label == label) return e.seconds;
    return -1;
}

TEST(Profile, DisabledRecordsNothing) {
    profile::enable(false);
    BB_PROFILE_MARK("a");
    { BB_PROFILE_SCOPE("b"); }
    EXPECT_TRUE(profile::entries().empty());
}

TEST(Profile, MarksReplaceTopAndScopesNest) {
    profile::enable(true);
    profile::push("outer");
    spin_ms(3);
    {
        BB_PROFILE_SCOPE("inner");
        spin_ms(6);
        BB_PROFILE_MARK("inner2");  // replaces "inner" until the scope ends
        spin_ms(9);
    }
    spin_ms(3);
    profile::pop();
    profile::enable(false);
    // Lower bounds only: a busy wait lasts at least its time; preemption on a loaded machine
    // can only add to a section.
    EXPECT_GE(seconds_of("outer"), 0.006);
    EXPECT_GE(seconds_of("inner"), 0.006);
    EXPECT_GE(seconds_of("inner2"), 0.009);
    ASSERT_EQ(profile::entries().size(), 3u);
    EXPECT_EQ(profile::entries()[0].label, "outer");
    EXPECT_EQ(profile::entries()[0].calls, 2);
}

TEST(Profile, TrainStepSharesSumToOne) {
    Point p{"train", "tiny", model::BertConfig::preset("tiny"), 32, 2, 1, 1, 0, 1, {}, 0};
    const ProfileResult r = profile_point(p, 1);
    ASSERT_FALSE(r.rows.empty());
    double share = 0, ms = 0;
    bool qkv = false, optimizer = false, attention = false;
    for (const auto& row : r.rows) {
        share += row.share;
        ms += row.ms_per_step;
        EXPECT_GE(row.share, 0) << row.op;
        qkv |= row.op == "gemm qkv bwd";
        optimizer |= row.op.starts_with("optimizer");
        attention |= row.op == "attention fwd";
        if (row.op == "gemm qkv fwd") {
            EXPECT_GT(row.gflops, 0);
        }
    }
    EXPECT_NEAR(share, 1.0, 1e-9);
    EXPECT_NEAR(ms, r.step_ms, 1e-6 * r.step_ms);
    EXPECT_TRUE(qkv && optimizer && attention);
    EXPECT_FALSE(profile::g_enabled);  // left disabled
}

// The optimizer runs once per step whatever the micro-steps per update: its analytic FLOPs per
// step (GFLOP/s x ms) are the same at 1 and 3 (synthetic micro-batches are one Batch object, which
// once made it count per micro-batch).
TEST(Profile, OptimizerCountsOncePerStep) {
    const auto optimizer_mflop = [](int spu) {
        Point p{"train", "tiny", model::BertConfig::preset("tiny"), 32, 2, 1, spu, 0, 1, {}, 0};
        for (const auto& row : profile_point(p, 1).rows)
            if (row.op.starts_with("optimizer")) return row.gflops * row.ms_per_step;
        ADD_FAILURE() << "no optimizer row";
        return 0.0;
    };
    const double one = optimizer_mflop(1), three = optimizer_mflop(3);
    EXPECT_GT(one, 0);
    EXPECT_NEAR(three, one, 1e-9 * one);
}

}  // namespace
}  // namespace bertbench::bench
