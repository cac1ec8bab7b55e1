// DeferredStopSignals (core/fs.hpp): a stop signal raised while it lives waits, pending, and is
// delivered when it ends — so prepare's renames of several outputs end all done, never some. Files
// staged for commit_together are published all at once, and none when they are dropped.
#include <gtest/gtest.h>
#include <signal.h>

#include <atomic>
#include <unistd.h>

#include <filesystem>
#include <string>

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

TEST(DeferredStopSignals, StagedFilesArePublishedTogetherOrNotAtAll) {
    namespace fs = std::filesystem;
    const fs::path dir = fs::temp_directory_path() / ("bb_staged_" + std::to_string(getpid()));
    fs::remove_all(dir);
    fs::create_directory(dir);
    const std::string a = (dir / "a.index").string(), b = (dir / "b.json").string();
    const auto entries = [&] {
        size_t n = 0;
        for ([[maybe_unused]] const auto& e : fs::directory_iterator(dir)) ++n;
        return n;
    };
    {
        std::vector<std::unique_ptr<AtomicFile>> files;
        files.push_back(staged_file(a, "A"));
        files.push_back(staged_file(b, "B"));
        EXPECT_FALSE(fs::exists(a));  // written and synced under temporary names only
        EXPECT_EQ(entries(), 2u);
    }  // dropped (an error before the commit): nothing left
    EXPECT_EQ(entries(), 0u);
    std::vector<std::unique_ptr<AtomicFile>> files;
    files.push_back(staged_file(a, "A"));
    files.push_back(std::make_unique<AtomicFile>(b));  // written, not yet synced: commit_together syncs it
    files.back()->write("B");
    commit_together(files);
    EXPECT_EQ(read_file(a), "A");
    EXPECT_EQ(read_file(b), "B");
    EXPECT_EQ(entries(), 2u);  // no temporary left
    fs::remove_all(dir);
}

}  // namespace
}  // namespace bertbench
