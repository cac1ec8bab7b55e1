// DeferredStopSignals (core/fs.hpp): a stop signal raised while it lives waits, pending, and is
// delivered when it ends — so prepare's renames of several outputs end all done, never some.
#include <gtest/gtest.h>
#include <signal.h>

#include <atomic>

#include "core/fs.hpp"

namespace bertbench {
namespace {

std::atomic<int> g_hups{0};
void count_hup(int) { ++g_hups; }

TEST(DeferredStopSignals, HoldsAStopSignalUntilItEnds) {
    struct sigaction sa {}, old {};
    sa.sa_handler = count_hup;
    sigemptyset(&sa.sa_mask);
    ASSERT_EQ(sigaction(SIGHUP, &sa, &old), 0);
    g_hups = 0;
    {
        const DeferredStopSignals held;
        ASSERT_EQ(raise(SIGHUP), 0);
        EXPECT_EQ(g_hups.load(), 0);  // pending, not delivered
        sigset_t pending;
        sigpending(&pending);
        EXPECT_EQ(sigismember(&pending, SIGHUP), 1);
    }
    EXPECT_EQ(g_hups.load(), 1);  // delivered as the mask was restored
    ASSERT_EQ(raise(SIGHUP), 0);  // and the mask is as before: at once
    EXPECT_EQ(g_hups.load(), 2);
    sigaction(SIGHUP, &old, nullptr);
}

}  // namespace
}  // namespace bertbench
