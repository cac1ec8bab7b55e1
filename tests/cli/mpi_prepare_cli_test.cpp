// `mpirun -np N bertbench prepare --input_dir=... --output_dir=...` (issue 12 §6): the shards are
// split across the ranks and every output file (records and .meta.json sidecars) is byte-identical
// to the one-process shard mode's; ranks that see different listings, and file mode under mpirun,
// are refused with an error naming the rank.
#include <gtest/gtest.h>

#include <filesystem>
#include <string>

#include "cli/mpi_test_util.hpp"

namespace bertbench {
namespace {
namespace fs = std::filesystem;
using testing::files_under;
using testing::mpirun_missing;
using testing::mpirun_prefix;
using testing::run_bertbench;
using testing::run_shell;
using testing::TmpDir;

std::string vocab() {
    return testing::shared_dir() + "/golden/vocab.txt";
}

std::string prepare_args(const TmpDir& tmp, const std::string& out, int jobs) {
    return "prepare --input_dir=" + tmp.file("in") + " --output_dir=" + tmp.file(out) +
           " --vocab_file=" + vocab() +
           " --dupe_factor=2 --random_seed=7 --jobs=" + std::to_string(jobs);
}

void expect_same_files(const fs::path& expected_dir, const fs::path& dir) {
    const auto expected = files_under(expected_dir);
    const auto got = files_under(dir);
    ASSERT_EQ(expected.size(), 12u) << "6 shards, each with its .meta.json";
    ASSERT_EQ(got.size(), expected.size()) << dir;
    for (const auto& [name, bytes] : expected) {
        const auto it = got.find(name);
        ASSERT_NE(it, got.end()) << name << " missing from " << dir;
        EXPECT_TRUE(it->second == bytes)
            << name << " differs (" << it->second.size() << " vs " << bytes.size() << " bytes)";
    }
}

TEST(MpiPrepare, RanksWriteTheSameBytesAsOneProcess) {
    if (const std::string m = mpirun_missing(); !m.empty()) GTEST_SKIP() << m;
    const TmpDir tmp("bb_mpi_prepare");
    testing::write_shard_input(tmp.path / "in");
    const auto one = run_bertbench(prepare_args(tmp, "one", 2));
    ASSERT_EQ(one.exit_code, 0) << one.out;

    // Two ranks with two threads each: rank 0 writes 3 of the 6 shards (input bytes balanced:
    // 115+55+1 KB vs 94+66+18 KB), rank 1 the other 3.
    auto two = run_shell(mpirun_prefix(2, 300) + testing::bertbench_path() + " " +
                         prepare_args(tmp, "two", 2));
    ASSERT_EQ(two.exit_code, 0) << two.out;
    EXPECT_NE(two.out.find("prepare: rank 0 of 2: 3 shards"), std::string::npos) << two.out;
    EXPECT_NE(two.out.find("prepare: 6 shards on 2 ranks (0 skipped"), std::string::npos)
        << two.out;
    expect_same_files(tmp.path / "one", tmp.path / "two");

    // Seven ranks for six shards: one rank has nothing to do and the job still completes.
    const auto seven = run_shell(mpirun_prefix(7, 300) + testing::bertbench_path() + " " +
                                 prepare_args(tmp, "seven", 1));
    ASSERT_EQ(seven.exit_code, 0) << seven.out;
    expect_same_files(tmp.path / "one", tmp.path / "seven");

    // A rerun skips every verified shard, whichever rank checks it.
    two = run_shell(mpirun_prefix(2, 300) + testing::bertbench_path() + " " +
                    prepare_args(tmp, "two", 1));
    ASSERT_EQ(two.exit_code, 0) << two.out;
    EXPECT_NE(two.out.find("prepare: 6 shards on 2 ranks (6 skipped"), std::string::npos)
        << two.out;
    expect_same_files(tmp.path / "one", tmp.path / "two");
}

TEST(MpiPrepare, RanksThatListDifferentInputsStopBeforeWriting) {
    if (const std::string m = mpirun_missing(); !m.empty()) GTEST_SKIP() << m;
    const TmpDir tmp("bb_mpi_prepare");
    testing::write_shard_input(tmp.path / "in");
    testing::write_shard_input(tmp.path / "in2");
    fs::remove(tmp.path / "in2" / "part-3.txt");
    // mpirun's MPMD form: rank 1 is given another --input_dir (as a host without the shared file
    // system would see another listing).
    const std::string common =
        " --output_dir=" + tmp.file("out") + " --vocab_file=" + vocab() + " --dupe_factor=1";
    const auto r =
        run_shell(mpirun_prefix(1, 300) + testing::bertbench_path() +
                  " prepare --input_dir=" + tmp.file("in") + common + " : -np 1 " +
                  testing::bertbench_path() + " prepare --input_dir=" + tmp.file("in2") + common);
    EXPECT_NE(r.exit_code, 0) << r.out;
    EXPECT_NE(r.out.find(
                  "the --input_dir listing (file names and sizes) of rank 1 differs from rank 0's"),
              std::string::npos)
        << r.out;
    EXPECT_EQ(r.out.find("shards on 2 ranks"), std::string::npos) << r.out;
    ASSERT_TRUE(fs::is_directory(tmp.path / "out"));  // made by the listing step
    EXPECT_TRUE(fs::is_empty(tmp.path / "out")) << "nothing written";
}

TEST(MpiPrepare, FileModeUnderMpirunIsRefused) {
    if (const std::string m = mpirun_missing(); !m.empty()) GTEST_SKIP() << m;
    const TmpDir tmp("bb_mpi_prepare");
    const auto r =
        run_shell(mpirun_prefix(2, 300) + testing::bertbench_path() +
                  " prepare --input_file=" + testing::shared_dir() +
                  "/golden/corpus_public_extra.txt --output_file=" + tmp.file("x.tfrecord") +
                  " --vocab_file=" + vocab());
    EXPECT_NE(r.exit_code, 0) << r.out;
    // Every rank refuses it: one line for the job (dist::fail_job), not one per rank.
    EXPECT_EQ(testing::count_of(r.out, "error: "), 1u) << r.out;
    EXPECT_NE(r.out.find("--input_file/--output_file under mpirun (2 ranks)"), std::string::npos)
        << r.out;
    EXPECT_FALSE(fs::exists(tmp.file("x.tfrecord")));
}

// A command whose work is one process's (convert, pick-eval, ...) is refused under mpirun -np 2:
// each rank did all of it, racing on the same outputs (convert's existing-output check failed at
// random on one rank).
TEST(MpiPrepare, OneProcessCommandsUnderMpirunAreRefused) {
    if (const std::string m = mpirun_missing(); !m.empty()) GTEST_SKIP() << m;
    const TmpDir tmp("bb_mpi_convert");
    const auto r = run_shell(mpirun_prefix(2, 120) + testing::bertbench_path() + " convert --input=" +
                             testing::shared_dir() + "/golden/vocab.txt --output=" + tmp.file("m.safetensors"));
    EXPECT_NE(r.exit_code, 0) << r.out;
    EXPECT_EQ(testing::count_of(r.out, "error: "), 1u) << r.out;
    EXPECT_NE(r.out.find("bertbench convert: error: under mpirun -np 2: convert is one process's work"),
              std::string::npos) << r.out;
    EXPECT_FALSE(fs::exists(tmp.file("m.safetensors")));
}

}  // namespace
}  // namespace bertbench
