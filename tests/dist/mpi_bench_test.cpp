// `mpirun -np 2 bertbench bench`: the data-parallel rows (per-rank and total throughput, scaling
// efficiency, compute vs exposed communication) and rank 0 alone reporting. Skipped without mpirun.
#include <gtest/gtest.h>

#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <nlohmann/json.hpp>
#include <string>

#include "mpi_util.hpp"

namespace {

using bertbench::testing::bertbench_path;
using bertbench::testing::count_of;
using bertbench::testing::mpirun_missing;
using bertbench::testing::mpirun_prefix;
using bertbench::testing::run_mpi;
using bertbench::testing::run_shell;

nlohmann::json json_array(const std::string& out) {
    // the report is "[\n ... \n]"; log lines around it ("[  1.2s] warning: ...") are not JSON
    const size_t b = out.find("[\n");
    const size_t e = b == std::string::npos ? b : out.find("\n]", b);
    if (e == std::string::npos) return nullptr;
    return nlohmann::json::parse(out.substr(b, e + 2 - b), nullptr, false);
}

// The report is what rank 0 prints on stdout; warnings and progress go to stderr. mpirun forwards
// the two streams separately, so merged they can interleave anywhere (a "step times spread"
// warning of a loaded machine once landed inside the JSON): the report is read from stdout alone,
// and stderr is kept for the failure messages.
struct SplitRun {
    int exit_code = -1;
    std::string out, err;
};
SplitRun run_mpi_split(int np, const std::string& args, int timeout_s) {
    const std::string err_path = ::testing::TempDir() + "bb_mpi_bench_stderr_" + std::to_string(getpid());
    const auto r = run_shell("( " + bertbench::testing::mpirun_prefix(np, timeout_s) + args + " 2>'" + err_path + "' )");
    SplitRun s{r.exit_code, r.out, ""};
    if (std::FILE* f = std::fopen(err_path.c_str(), "rb")) {
        char buf[4096];
        size_t n;
        while ((n = std::fread(buf, 1, sizeof buf, f)) > 0) s.err.append(buf, n);
        std::fclose(f);
    }
    std::remove(err_path.c_str());
    return s;
}

const std::string kPoint =
    " bench --model=tiny --mode=train --seq_len=32 --threads=1 --steps=3 --warmup=1 "
    "--ceiling=false --format=json --bucket_mb=0.05";

TEST(DistBench, SlowTwoRanksReportPerRankTotalAndExposedCommunication) {
    if (const std::string why = mpirun_missing(); !why.empty()) GTEST_SKIP() << why;
    const SplitRun r = run_mpi_split(2, bertbench_path() + kPoint + " --batch_size=4", 300);
    ASSERT_EQ(r.exit_code, 0) << r.out << r.err;
    const nlohmann::json j = json_array(r.out);
    ASSERT_TRUE(j.is_array() && j.size() == 1) << "one report (rank 0's), got:\n" << r.out << "\nstderr:\n" << r.err;
    const nlohmann::json& m = j[0]["mpi"];
    ASSERT_TRUE(m.is_object()) << j.dump(1);
    EXPECT_EQ(m["ranks"], 2);
    EXPECT_EQ(m["batch_size_per_rank"], 2);
    EXPECT_EQ(j[0]["batch_size"], 4);  // the global batch
    const double per_rank = m["sequences_per_second_per_rank"], total = m["sequences_per_second_total"];
    EXPECT_GT(per_rank, 0);
    EXPECT_GT(total, per_rank);  // both ranks' sequences
    EXPECT_EQ(total, j[0]["sequences_per_second"].get<double>());
    EXPECT_GT(m["sequences_per_second_1rank"].get<double>(), 0);
    EXPECT_NEAR(m["scaling_efficiency"].get<double>(),
                total / (2 * m["sequences_per_second_1rank"].get<double>()), 1e-9);
    const double compute = m["step_ms_compute"], exposed = m["step_ms_exposed_comm"];
    EXPECT_GE(exposed, 0);
    EXPECT_GT(compute, 0);
    EXPECT_NEAR(compute + exposed, j[0]["step_ms_median"].get<double>(), 1e-6);
    const double frac = m["exposed_comm_fraction"];
    EXPECT_GE(frac, 0);
    EXPECT_LE(frac, 1);
    // BERT-tiny's gradient: every parameter float, 4 bytes, in 0.05 MiB buckets
    EXPECT_GT(m["allreduce_bytes_per_step"].get<double>(), 4.0 * 4e6);
}

// A warning every rank would give (a thread count no CPU set has) comes once, from rank 0: the
// other ranks print only errors, so nothing of theirs lands inside rank 0's report.
TEST(DistBench, SlowOnlyRankZeroWarns) {
    if (const std::string why = mpirun_missing(); !why.empty()) GTEST_SKIP() << why;
    const SplitRun r =
        run_mpi_split(2,
                      bertbench_path() +
                          " bench --model=tiny --mode=train --seq_len=32 --threads=1,4096 "
                          "--steps=1 --warmup=0 --ceiling=false --format=json --batch_size=4 "
                          "--scaling_baseline=false",
                      300);
    ASSERT_EQ(r.exit_code, 0) << r.out << r.err;
    EXPECT_EQ(count_of(r.err, "warning: skipping point train tiny seq 32 batch 4 threads 4096"), 1u) << r.err;
    const nlohmann::json j = json_array(r.out);
    EXPECT_TRUE(j.is_array() && j.size() == 1) << r.out << "\nstderr:\n" << r.err;
}

TEST(DistBench, SlowGlobalBatchMustSplitEvenly) {
    if (const std::string why = mpirun_missing(); !why.empty()) GTEST_SKIP() << why;
    const auto r =
        run_mpi(2, bertbench_path() + kPoint + " --batch_size=3 --scaling_baseline=false", 120);
    EXPECT_NE(r.exit_code, 0) << r.out;
    EXPECT_NE(r.exit_code, 124) << "hung:\n" << r.out;
    EXPECT_NE(r.out.find("--batch_size: 3 is the GLOBAL batch, split over 2 ranks; expected a multiple of 2 (hint: "
                         "--batch_size=4 gives each rank 2)"), std::string::npos) << r.out;
    EXPECT_EQ(count_of(r.out, "error: "), 1u) << r.out;  // every rank's, said once
}

// Ranks that would time different work (MPMD lines that differ) stop before measuring, naming the
// flag: more steps on one rank left the other waiting in an all-reduce for good, another model
// crashed in MPI, another batch gave wrong totals. A scenario run is one process.
TEST(DistBench, SlowRanksWithDifferentFlagsStopBeforeMeasuring) {
    if (const std::string why = mpirun_missing(); !why.empty()) GTEST_SKIP() << why;
    const std::string point = kPoint + " --batch_size=4 --scaling_baseline=false";
    for (const auto& [extra, message] : std::vector<std::pair<std::string, std::string>>{
             {" --steps=30", "--steps is 30 there, 3 on rank 0"},
             {" --mode=infer", "--mode is \"infer\" there, \"train\" on rank 0"},
             {" --model=mini", "--model is \"mini\" there, \"tiny\" on rank 0"}}) {
        const auto r = run_shell(mpirun_prefix(1, 120) + bertbench_path() + point + " : -np 1 " + bertbench_path() +
                                 point + extra);
        EXPECT_NE(r.exit_code, 0) << r.out;
        EXPECT_NE(r.exit_code, 124) << "hung:\n" << r.out;
        EXPECT_NE(r.out.find("rank 1's flags and model config differ from rank 0's: " + message), std::string::npos)
            << r.out;
    }
    const auto s = run_mpi(2, bertbench_path() + " bench --scenario=offline --model=tiny", 120);
    EXPECT_NE(s.exit_code, 0) << s.out;
    EXPECT_NE(s.out.find("--scenario: one process"), std::string::npos) << s.out;
}

TEST(DistBench, WithoutMpirunTheReportHasNoMpiSection) {
    std::string point = kPoint;
    point.erase(point.find(" --bucket_mb"));  // refused outside mpirun, as the flag of no point
    auto r = run_shell(bertbench_path() + kPoint + " --batch_size=2 --steps=1 --warmup=0");
    EXPECT_NE(r.exit_code, 0);
    EXPECT_NE(r.out.find("--bucket_mb: applies under mpirun"), std::string::npos) << r.out;
    r = run_shell(bertbench_path() + point + " --batch_size=2 --steps=1 --warmup=0");
    ASSERT_EQ(r.exit_code, 0) << r.out;
    const nlohmann::json j = json_array(r.out);
    ASSERT_TRUE(j.is_array() && j.size() == 1) << r.out;
    EXPECT_FALSE(j[0].contains("mpi"));
}

}  // namespace
