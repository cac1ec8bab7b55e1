// dist::Comm and GradientReducer: the one-process behaviour in-process, the MPI behaviour by
// re-running this test binary under `mpirun -np 2` (DistWorker.* run only there, selected by
// BB_DIST_WORKER) and checking what the ranks print.
#include "dist/comm.hpp"

#include <gtest/gtest.h>
#include <unistd.h>

#include <cmath>
#include <cstdlib>
#include <filesystem>
#include <string>
#include <vector>

#include "core/error.hpp"
#include "dist/grad_reducer.hpp"
#include "mpi_util.hpp"
#include "test_util.hpp"

namespace bertbench::dist {
namespace {

using testing::count_of;
using testing::mpirun_missing;
using testing::run_mpi;

std::string self_exe() {
    char buf[4096];
    const ssize_t n = readlink("/proc/self/exe", buf, sizeof buf - 1);
    return n > 0 ? std::string(buf, static_cast<size_t>(n)) : std::string();
}

const char* worker_mode() { return std::getenv("BB_DIST_WORKER"); }

TEST(DistSingle, WithoutMpirunIsOneProcessAndCollectivesAreIdentity) {
    if (worker_mode() != nullptr) GTEST_SKIP() << "worker run";
    ASSERT_FALSE(launched_by_mpi()) << "run this test outside mpirun";
    Comm& c = world();
    EXPECT_FALSE(c.is_mpi());
    EXPECT_EQ(c.rank(), 0);
    EXPECT_EQ(c.size(), 1);
    EXPECT_EQ(rank_prefix(), "");
    std::vector<float> f{1.5f, -2.0f};
    c.all_reduce_mean(f);
    EXPECT_EQ(f, (std::vector<float>{1.5f, -2.0f}));
    EXPECT_EQ(c.sum(int64_t{7}), 7);
    EXPECT_EQ(c.allgather("abc"), std::vector<std::string>{"abc"});
    EXPECT_NO_THROW(require_same_on_all_ranks(c, "x", "flags hash", ""));
    // the reducer with one rank leaves the gradient alone and reports no wait
    std::vector<float> g(5000, 0.25f);
    GradientReducer red(c, g.size(), {0, 1000, 4000}, 4096);
    red.begin(g);
    red.ready(0, 5000);
    const ReduceStats s = red.finish();
    EXPECT_EQ(s.buckets, 0);
    EXPECT_EQ(g, std::vector<float>(5000, 0.25f));
}

TEST(DistSingle, BucketsAreCutFromTheEndOfTheBuffer) {
    if (worker_mode() != nullptr) GTEST_SKIP() << "worker run";
    std::vector<float> g(5000);
    GradientReducer red(world(), g.size(), {0}, 4096 * sizeof(float));
    EXPECT_EQ(red.bucket_floats(), 4096u);
    EXPECT_EQ(red.num_buckets(), 2);  // [904, 5000) and [0, 904)
}

// The bookkeeping both reducers share (the MPI one and a device's collectives): a bucket starts
// once all its floats are ready, a ready range reaching into the padding before the next tensor
// covers it, the order is the backward's, start_rest starts the rest in order, and a range
// reported twice is an Error.
TEST(DistSingle, GradientBucketsStartWhenEveryFloatIsReady) {
    if (worker_mode() != nullptr) GTEST_SKIP() << "worker run";
    // tensors [0, 1400), [1500, 2990), [3000, 4090), each padded up to the next (the last to the
    // end); buckets of 1024 floats from the end of 4100: [3076, 4100), [2052, 3076), [1028, 2052),
    // [4, 1028), [0, 4)
    GradientBuckets b(4100, {3000, 0, 1500}, 1024 * sizeof(float));
    ASSERT_EQ(b.size(), 5);
    EXPECT_THROW(b.begin(4099), Error);  // a buffer smaller than the layout
    EXPECT_EQ(b.range(0), (std::pair<size_t, size_t>{3076, 4100}));
    EXPECT_EQ(b.range(4), (std::pair<size_t, size_t>{0, 4}));
    std::vector<std::pair<size_t, size_t>> started;
    const GradientBuckets::Start record = [&](size_t lo, size_t hi) { started.emplace_back(lo, hi); };
    b.begin(4100);
    b.ready(3000, 4090, record);  // with its padding to the end: completes [3076, 4100) only
    ASSERT_EQ(started.size(), 1u);
    EXPECT_EQ(started[0], (std::pair<size_t, size_t>{3076, 4100}));
    b.ready(1500, 2990, record);  // with its padding to 3000: completes [2052, 3076)
    ASSERT_EQ(started.size(), 2u);
    EXPECT_EQ(started[1], (std::pair<size_t, size_t>{2052, 3076}));
    EXPECT_EQ(b.started(), 2);
    EXPECT_THROW(b.ready(1500, 2990, record), Error);  // reported twice
    b.start_rest(record);
    ASSERT_EQ(started.size(), 5u);
    EXPECT_EQ(started[2], (std::pair<size_t, size_t>{1028, 2052}));
    EXPECT_EQ(started[4], (std::pair<size_t, size_t>{0, 4}));
    // a new backward starts from nothing; the first tensor with its padding to 1500 completes
    // [4, 1028) and [0, 4), not [1028, 2052)
    b.begin(4100);
    started.clear();
    b.ready(0, 1400, record);
    ASSERT_EQ(started.size(), 2u);
    EXPECT_EQ(started[0], (std::pair<size_t, size_t>{4, 1028}));
    EXPECT_EQ(started[1], (std::pair<size_t, size_t>{0, 4}));
    EXPECT_EQ(b.started(), 2);
}

TEST(DistSingle, FnvHashSeesEveryByte) {
    const float a[2] = {1.0f, 2.0f}, b[2] = {1.0f, std::nextafter(2.0f, 3.0f)};
    EXPECT_NE(fnv1a64(a, sizeof a), fnv1a64(b, sizeof b));
    EXPECT_EQ(fnv1a64(a, sizeof a), fnv1a64(a, sizeof a));
}

// ---- under mpirun -np 2 ----------------------------------------------------------------------

// Runs in each rank. Prints "WORKER OK rank R" when every check passed.
TEST(DistWorker, Collectives) {
    const char* mode = worker_mode();
    if (mode == nullptr) GTEST_SKIP() << "runs only as a rank under mpirun (DistMpi.* start it)";
    int argc = 0;
    char** argv = nullptr;
    init(&argc, &argv);
    Comm& c = world();
    ASSERT_TRUE(c.is_mpi());
    ASSERT_EQ(c.size(), 2);
    const int r = c.rank();
    EXPECT_EQ(rank_prefix(), "rank " + std::to_string(r) + ": ");
    if (std::string(mode) == "fail") {
        // rank 1 fails, as a command would; rank 0 waits in a collective that never completes.
        if (r == 1) {
            std::fprintf(stderr, "bertbench test: error: %scannot open its data\n", rank_prefix().c_str());
            c.abort(3);
        }
        c.barrier();
        std::printf("rank 0 passed the barrier (must not happen)\n");
        finalize();
        return;
    }
    std::vector<float> f(1000);
    std::vector<double> d(3);
    std::vector<int64_t> i64(2);
    for (size_t i = 0; i < f.size(); ++i) f[i] = static_cast<float>(i) * static_cast<float>(r + 1);
    for (size_t i = 0; i < d.size(); ++i) d[i] = 0.5 * static_cast<double>(r + 1) + static_cast<double>(i);
    i64 = {int64_t{1} << 40, -r};
    c.all_reduce_sum(std::span<float>(f));
    c.all_reduce_mean(std::span<double>(d));
    c.all_reduce_sum(std::span<int64_t>(i64));
    for (size_t i = 0; i < f.size(); ++i) ASSERT_EQ(f[i], 3.0f * static_cast<float>(i)) << i;
    EXPECT_EQ(d, (std::vector<double>{0.75, 1.75, 2.75}));
    EXPECT_EQ(i64, (std::vector<int64_t>{int64_t{2} << 40, -1}));
    EXPECT_EQ(c.sum(0.25 * (r + 1)), 0.75);
    std::vector<std::byte> bytes(5, std::byte{static_cast<unsigned char>(r)});
    c.broadcast(bytes, 1);
    EXPECT_EQ(bytes, std::vector<std::byte>(5, std::byte{1}));
    EXPECT_EQ(c.allgather(std::string(static_cast<size_t>(r) + 1, 'a' + static_cast<char>(r))),
              (std::vector<std::string>{"a", "bb"}));
    // differing values: every rank throws, naming rank 1
    try {
        require_same_on_all_ranks(c, r == 0 ? "h0" : "h1", "flags hash", "same flags on every rank");
        ADD_FAILURE() << "no error for differing values";
    } catch (const Error& e) {
        EXPECT_NE(std::string(e.what()).find("flags hash of rank 1 differs from rank 0's (h1 vs h0)"),
                  std::string::npos) << e.what();
    }
    // a JSON object: the first key that differs, a nested one named after its parent, a key one
    // rank lacks; equal objects pass
    const std::vector<std::pair<nlohmann::json, std::string>> objects{
        {{{"--seed", 1}, {"bert_config.json", {{"hidden_size", r == 0 ? 128 : 256}, {"layers", 2}}}},
         "rank 1's flags differ from rank 0's: bert_config.json hidden_size is 256 there, 128 on rank 0 "
         "(hint: same flags)"},
        {r == 0 ? nlohmann::json{{"--a", 1}} : nlohmann::json{{"--a", 1}, {"--b", "x"}},
         "rank 1's flags differ from rank 0's: --b is \"x\" there, absent on rank 0"},
        {r == 0 ? nlohmann::json{{"--a", 1}, {"--b", "x"}} : nlohmann::json{{"--a", 1}},
         "rank 1's flags differ from rank 0's: --b is absent there, \"x\" on rank 0"}};
    for (const auto& [value, message] : objects) {
        try {
            require_same_json_on_all_ranks(c, value, "flags", "same flags");
            ADD_FAILURE() << "no error for " << value.dump();
        } catch (const Error& e) {
            EXPECT_NE(std::string(e.what()).find(message), std::string::npos) << e.what();
        }
    }
    EXPECT_NO_THROW(require_same_json_on_all_ranks(c, {{"--a", {1, 2}}}, "flags", ""));
    // one directory for the job: rank 0's, the same path on both; then each rank its own (a
    // node-local directory): every rank stops, naming rank 1; no file left behind either way
    const testing::TmpDir own("bb_comm_dir");  // rank 0's is also the shared one
    const std::string shared = c.allgather(own.path.string())[0];
    EXPECT_NO_THROW(require_shared_directory(c, shared, "output_dir"));
    try {
        require_shared_directory(c, own.path.string(), "output_dir");
        ADD_FAILURE() << "no error for a directory of each rank's own";
    } catch (const Error& e) {
        EXPECT_NE(std::string(e.what()).find("rank 1 does not see the directory rank 0 writes to"), std::string::npos)
            << e.what();
    }
    c.barrier();
    EXPECT_TRUE(std::filesystem::is_empty(own.path));
    c.barrier();  // every rank done with rank 0's directory before its TmpDir removes it
    // GradientReducer: 3M floats, tensors every 1000 floats (+ 8 floats of padding each), 1 MB
    // buckets, ranges reported from the top down as a backward would. Integer values, so the
    // mean is exact: rank r holds (i % 97) * (r + 1) -> mean 1.5 * (i % 97).
    const size_t total = 3'000'000;
    std::vector<size_t> bounds;
    for (size_t o = 0; o < total; o += 1008) bounds.push_back(o);
    std::vector<float> g(total);
    for (int step = 0; step < 3; ++step) {
        for (size_t i = 0; i < total; ++i) g[i] = static_cast<float>(i % 97) * static_cast<float>(r + 1);
        GradientReducer red(c, total, bounds, size_t{1} << 20);
        red.begin(g);
        for (size_t k = bounds.size(); k-- > 0;)
            if (k % 7 != 3) red.ready(bounds[k], bounds[k] + 1000);  // some tensors never reported
        const ReduceStats s = red.finish();
        EXPECT_EQ(s.buckets, 12);  // 12,000,000 bytes in 1 MiB buckets
        for (size_t i = 0; i < total; ++i)
            ASSERT_EQ(g[i], 1.5f * static_cast<float>(i % 97)) << "step " << step << " float " << i;
        const uint64_t h = fnv1a64(g.data(), g.size() * sizeof(float));
        const auto all = c.allgather(std::to_string(h));
        EXPECT_EQ(all[0], all[1]);
    }
    // One reducer, several steps, with every range reported: every bucket starts early.
    GradientReducer red(c, total, bounds, size_t{1} << 20);
    for (int step = 0; step < 3; ++step) {
        for (size_t i = 0; i < total; ++i) g[i] = static_cast<float>(step + r);
        red.begin(g);
        for (size_t k = bounds.size(); k-- > 0;) red.ready(bounds[k], std::min(total, bounds[k] + 1000));
        const ReduceStats s = red.finish();
        EXPECT_EQ(s.started_early, s.buckets);
        EXPECT_EQ(s.bytes, total * sizeof(float));
        for (size_t i = 0; i < total; i += 4099) ASSERT_EQ(g[i], static_cast<float>(step) + 0.5f);
    }
    c.barrier();
    if (!::testing::Test::HasFailure()) std::printf("WORKER OK rank %d\n", r);
    std::fflush(stdout);
    finalize();
}

TEST(DistMpi, TwoRanksCollectivesAndBucketedReducer) {
    if (worker_mode() != nullptr) GTEST_SKIP() << "worker run";
    if (const std::string why = mpirun_missing(); !why.empty()) GTEST_SKIP() << why;
    const auto r = run_mpi(2, "-x BB_DIST_WORKER=ok " + self_exe() + " --gtest_filter=DistWorker.*", 120);
    EXPECT_EQ(r.exit_code, 0) << r.out;
    EXPECT_EQ(count_of(r.out, "WORKER OK rank"), 2u) << r.out;
}

TEST(DistMpi, ARankThatFailsStopsTheJobAndIsNamed) {
    if (worker_mode() != nullptr) GTEST_SKIP() << "worker run";
    if (const std::string why = mpirun_missing(); !why.empty()) GTEST_SKIP() << why;
    // rank 0 would wait in a barrier forever: MPI_Abort from rank 1 must end the job well
    // before the 60 s limit (timeout's status would be 124).
    const auto r = run_mpi(2, "-x BB_DIST_WORKER=fail " + self_exe() + " --gtest_filter=DistWorker.*", 60);
    EXPECT_NE(r.exit_code, 0) << r.out;
    EXPECT_NE(r.exit_code, 124) << "the job hung until the time limit:\n" << r.out;
    EXPECT_NE(r.out.find("rank 1: cannot open its data"), std::string::npos) << r.out;
    EXPECT_EQ(r.out.find("passed the barrier"), std::string::npos) << r.out;
}

}  // namespace
}  // namespace bertbench::dist
