// Loss scaling (optim/loss_scale.hpp): the flag's forms, unscaling and its finiteness check,
// TensorFlow DynamicLossScale's rules (halve on overflow, double after `window` clean updates),
// and the checkpoint state.
#include "optim/loss_scale.hpp"

#include <gtest/gtest.h>

#include <cmath>
#include <limits>
#include <vector>

#include "core/error.hpp"

namespace bertbench::optim {
namespace {

TEST(LossScale, FlagForms) {
    EXPECT_FALSE(LossScaler::from_flag("", 32768, 2000).enabled());
    EXPECT_FALSE(LossScaler::from_flag("none", 32768, 2000).enabled());
    const LossScaler d = LossScaler::from_flag("dynamic", 32768, 2000);
    EXPECT_EQ(d.mode(), LossScaler::Mode::dynamic);
    EXPECT_EQ(d.scale(), 32768.f);
    const LossScaler f = LossScaler::from_flag("128", 32768, 2000);
    EXPECT_EQ(f.mode(), LossScaler::Mode::fixed);
    EXPECT_EQ(f.scale(), 128.f);
    EXPECT_THROW(LossScaler::from_flag("dynamc", 32768, 2000), Error);
    EXPECT_THROW(LossScaler::from_flag("-4", 32768, 2000), Error);
    EXPECT_THROW(LossScaler::from_flag("dynamic", 0.5, 2000), Error);
    EXPECT_THROW(LossScaler::from_flag("dynamic", 32768, 0), Error);
}

TEST(LossScale, UnscaleDividesAndDetectsNonFinite) {
    const LossScaler s = LossScaler::from_flag("dynamic", 1024, 10);
    std::vector<float> g(100000, 2048.f);
    g[7] = -3072.f;
    EXPECT_TRUE(s.unscale(g));
    EXPECT_EQ(g[0], 2.f);
    EXPECT_EQ(g[7], -3.f);
    for (float bad : {std::numeric_limits<float>::infinity(), std::nanf("")}) {
        std::vector<float> h(100000, 1.f);
        h[99999] = bad;
        EXPECT_FALSE(s.unscale(h)) << bad;
    }
    // Disabled: untouched, and always "finite" (the optimizer's own check then applies).
    std::vector<float> k = {std::nanf(""), 4.f};
    EXPECT_TRUE(LossScaler::from_flag("", 1, 1).unscale(k));
    EXPECT_EQ(k[1], 4.f);
}

TEST(LossScale, DynamicHalvesOnOverflowAndDoublesAfterTheWindow) {
    LossScaler s = LossScaler::from_flag("dynamic", 1024, 3);
    EXPECT_NE(s.on_overflow(5), "");
    EXPECT_EQ(s.scale(), 512.f);
    EXPECT_EQ(s.on_clean_update(6), "");
    EXPECT_EQ(s.on_clean_update(7), "");
    EXPECT_NE(s.on_clean_update(8), "");  // third clean update in a row
    EXPECT_EQ(s.scale(), 1024.f);
    s.on_clean_update(9);
    s.on_clean_update(10);
    s.on_overflow(11);  // the run of clean updates restarts
    EXPECT_EQ(s.scale(), 512.f);
    s.on_clean_update(12);
    s.on_clean_update(13);
    EXPECT_EQ(s.scale(), 512.f);
    EXPECT_EQ(s.overflows(), 2);
    for (int i = 0; i < 40; ++i) s.on_overflow(20 + i);
    EXPECT_EQ(s.scale(), 1.f);  // never below 1
    // A fixed scale never moves.
    LossScaler f = LossScaler::from_flag("8", 1, 1);
    EXPECT_EQ(f.on_overflow(1), "");
    EXPECT_EQ(f.on_clean_update(2), "");
    EXPECT_EQ(f.scale(), 8.f);
}

TEST(LossScale, StateRoundTrip) {
    LossScaler a = LossScaler::from_flag("dynamic", 4096, 5);
    a.on_overflow(1);
    a.on_clean_update(2);
    LossScaler b = LossScaler::from_flag("dynamic", 65536, 5);
    b.restore(a.state());
    EXPECT_EQ(b.scale(), 2048.f);
    EXPECT_EQ(b.state(), a.state());
    EXPECT_THROW(b.restore(nlohmann::json{{"loss_scale", "x"}}), Error);
    EXPECT_THROW(b.restore(nlohmann::json{{"loss_scale", -1.0}, {"clean_updates", 0}, {"overflows", 0}}),
                 Error);
}

}  // namespace
}  // namespace bertbench::optim
