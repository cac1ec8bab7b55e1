// `mpirun -np N bertbench prepare`: how shard mode's shards are split across ranks
// (data::shards_of_rank) and the listing fingerprint the ranks compare.
#include <gtest/gtest.h>

#include <algorithm>
#include <filesystem>
#include <map>
#include <string>
#include <vector>

#include "core/error.hpp"
#include "core/fs.hpp"
#include "data/pretraining_shards.hpp"
#include "test_util.hpp"

namespace bertbench::data {
namespace {
namespace fs = std::filesystem;
using testing::error_of;
using testing::TmpDir;

// Input files of the given sizes (bytes), named part-<i>.txt, and their plan.
std::vector<ShardJob> plan_of(const TmpDir& tmp, const std::vector<size_t>& sizes) {
    fs::create_directories(tmp.path / "in");
    for (size_t i = 0; i < sizes.size(); ++i)
        write_file_atomic(tmp.file("in/part-" + std::to_string(10 + i) + ".txt"),
                          std::string(sizes[i], 'x'));
    return plan_shards(tmp.file("in"), tmp.file("out"));
}

TEST(ShardsOfRank, EveryShardGoesToExactlyOneRankInPlanOrder) {
    const TmpDir tmp("bb_rank_split");
    const std::vector<size_t> sizes{700, 100, 300, 300, 50, 900, 10, 400, 250};
    const auto plan = plan_of(tmp, sizes);
    std::map<std::string, std::string> output_of;
    for (const auto& job : plan) output_of[job.input] = job.output;
    for (int ranks : {1, 2, 3, 4, 9, 12}) {
        std::map<std::string, int> owner;
        for (int r = 0; r < ranks; ++r) {
            const auto mine = shards_of_rank(plan, r, ranks);
            EXPECT_TRUE(std::is_sorted(mine.begin(), mine.end(), [](const auto& a, const auto& b) {
                return a.input < b.input;
            }));  // plan order (the plan is sorted by name)
            for (const auto& job : mine) {
                EXPECT_TRUE(owner.emplace(job.input, r).second)
                    << job.input << " given to ranks " << owner[job.input] << " and " << r;
                EXPECT_EQ(job.output, output_of[job.input]);
            }
        }
        EXPECT_EQ(owner.size(), plan.size()) << ranks << " ranks";
        if (ranks == 1) {
            EXPECT_EQ(shards_of_rank(plan, 0, 1).size(), plan.size());
        }
    }
}

TEST(ShardsOfRank, LargestFirstToTheLeastLoadedRank) {
    const TmpDir tmp("bb_rank_split");
    // Round-robin by name would give rank 0 the three large files (900+800+700 vs 30).
    const auto plan = plan_of(tmp, {900, 10, 800, 10, 700, 10});
    auto bytes = [&](int r, int n) {
        size_t b = 0;
        for (const auto& job : shards_of_rank(plan, r, n)) b += fs::file_size(job.input);
        return b;
    };
    // 900 -> r0, 800 -> r1, 700 -> r1 (800 < 900: 1500), then each 10 -> r0 (910, 920, 930).
    EXPECT_EQ(bytes(0, 2), 930u);
    EXPECT_EQ(bytes(1, 2), 1500u);
    // Three ranks: one large file each, the small ones to the least loaded (700, then 710, 720).
    EXPECT_EQ(bytes(0, 3), 900u);
    EXPECT_EQ(bytes(1, 3), 800u);
    EXPECT_EQ(bytes(2, 3), 730u);
    // More ranks than shards: the extra ranks get nothing.
    EXPECT_EQ(shards_of_rank(plan, 7, 8).size(), 0u);
    EXPECT_EQ(shards_of_rank(plan, 5, 8).size(), 1u);
}

TEST(ShardsOfRank, BadRankIsAnError) {
    const TmpDir tmp("bb_rank_split");
    const auto plan = plan_of(tmp, {1, 2});
    EXPECT_NE(error_of([&] { shards_of_rank(plan, 2, 2); }).find("rank 2 of 2"), std::string::npos);
    EXPECT_NE(error_of([&] { shards_of_rank(plan, 0, 0); }), "");
    EXPECT_NE(error_of([&] { shards_of_rank(plan, -1, 2); }), "");
}

TEST(PlanFingerprint, ChangesWithANameOrASize) {
    const TmpDir tmp("bb_rank_split");
    const auto plan = plan_of(tmp, {5, 6, 7});
    const std::string fp = plan_fingerprint(plan);
    EXPECT_EQ(fp, plan_fingerprint(plan_shards(tmp.file("in"), tmp.file("out"))));
    write_file_atomic(plan[1].input, std::string(60, 'y'));
    const std::string grown = plan_fingerprint(plan_shards(tmp.file("in"), tmp.file("out")));
    EXPECT_NE(fp, grown);
    write_file_atomic(tmp.file("in/part-99.txt"), "z");
    EXPECT_NE(grown, plan_fingerprint(plan_shards(tmp.file("in"), tmp.file("out"))));
}

}  // namespace
}  // namespace bertbench::data
