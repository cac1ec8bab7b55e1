// `mpirun -np N bertbench prepare --input_dir=... --output_dir=...` (issue 12 §6): the shards are
// split across the ranks and every output file (records and .meta.json sidecars) is byte-identical
// to the one-process shard mode's; ranks that see different listings, and file mode under mpirun,
// are refused with an error naming the rank.
#include <gtest/gtest.h>

#include <filesystem>
#include <nlohmann/json.hpp>
#include <string>
#include <utility>
#include <vector>

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
    testing::write_shard_input(tmp.path / "a" / "in");
    testing::write_shard_input(tmp.path / "b" / "in");
    fs::remove(tmp.path / "b" / "in" / "part-3.txt");
    // mpirun's MPMD form: the same command line, rank 1 in another working directory, whose
    // relative --input_dir lists other files (as a host without the shared file system would).
    const std::string command = testing::bertbench_path() + " prepare --input_dir=in --output_dir=" +
                                tmp.file("out") + " --vocab_file=" + vocab() + " --dupe_factor=1";
    const auto r = run_shell(mpirun_prefix(1, 300) + "-wdir " + tmp.file("a") + " " + command + " : -np 1 -wdir " +
                             tmp.file("b") + " " + command);
    EXPECT_NE(r.exit_code, 0) << r.out;
    EXPECT_NE(r.out.find(
                  "the --input_dir listing (file names and sizes) of rank 1 differs from rank 0's"),
              std::string::npos)
        << r.out;
    EXPECT_EQ(r.out.find("shards on 2 ranks"), std::string::npos) << r.out;
    ASSERT_TRUE(fs::is_directory(tmp.path / "out"));  // made by the listing step
    EXPECT_TRUE(fs::is_empty(tmp.path / "out")) << "nothing written";
}

// One dataset from one command line: a rank given another seed (or length, or masking
// probability) would make its shards unlike the rest's, and no single command would reproduce the
// set. --jobs may differ (each rank's threads; the bytes do not depend on it).
TEST(MpiPrepare, RanksWithOtherFlagsStopBeforeWriting) {
    if (const std::string m = mpirun_missing(); !m.empty()) GTEST_SKIP() << m;
    const TmpDir tmp("bb_mpi_prepare");
    testing::write_shard_input(tmp.path / "in");
    const std::string seed7 = prepare_args(tmp, "out", 1);
    std::string seed8 = seed7;
    seed8.replace(seed8.find("--random_seed=7"), 15, "--random_seed=8");
    const auto r = run_shell(mpirun_prefix(1, 300) + testing::bertbench_path() + " " + seed7 + " : -np 1 " +
                             testing::bertbench_path() + " " + seed8);
    EXPECT_NE(r.exit_code, 0) << r.out;
    EXPECT_EQ(testing::count_of(r.out, "error: "), 1u) << r.out;
    EXPECT_NE(r.out.find("rank 1's flags differ from rank 0's: --random_seed is \"8\" there, \"7\" on rank 0"),
              std::string::npos) << r.out;
    EXPECT_FALSE(fs::exists(tmp.path / "out"));

    std::string jobs2 = seed7;
    jobs2.replace(jobs2.find("--jobs=1"), 8, "--jobs=2");
    const auto ok = run_shell(mpirun_prefix(1, 300) + testing::bertbench_path() + " " + seed7 + " : -np 1 " +
                              testing::bertbench_path() + " " + jobs2);
    ASSERT_EQ(ok.exit_code, 0) << ok.out;
    EXPECT_EQ(files_under(tmp.path / "out").size(), 12u);
}

// Node-local output directories (the same --output_dir on every host, each its own disk): the
// shards would be split between the hosts. Rank 0's check file is not in rank 1's directory.
TEST(MpiPrepare, AnOutputDirOfEachRanksOwnIsRefused) {
    if (const std::string m = mpirun_missing(); !m.empty()) GTEST_SKIP() << m;
    const TmpDir tmp("bb_mpi_prepare");
    testing::write_shard_input(tmp.path / "in");
    fs::create_directories(tmp.path / "a");
    fs::create_directories(tmp.path / "b");
    const std::string command = testing::bertbench_path() + " prepare --input_dir=" + tmp.file("in") +
                                " --output_dir=out --vocab_file=" + vocab() + " --dupe_factor=1";
    const auto r = run_shell(mpirun_prefix(1, 300) + "-wdir " + tmp.file("a") + " " + command + " : -np 1 -wdir " +
                             tmp.file("b") + " " + command);
    EXPECT_NE(r.exit_code, 0) << r.out;
    EXPECT_NE(r.out.find("--output_dir=out: rank 1 does not see the directory rank 0 writes to"), std::string::npos)
        << r.out;
    EXPECT_EQ(r.out.find("shards on 2 ranks"), std::string::npos) << r.out;
    EXPECT_TRUE(files_under(tmp.path / "a" / "out").empty()) << "nothing written, the check file removed";
    EXPECT_TRUE(files_under(tmp.path / "b" / "out").empty());
}

// Every rank runs the same command: one that printed its help or ran another command and left
// would keep the others waiting in a collective for good (a hang until mpirun was killed).
TEST(MpiPrepare, RanksRunningAnotherCommandStopTogether) {
    if (const std::string m = mpirun_missing(); !m.empty()) GTEST_SKIP() << m;
    const TmpDir tmp("bb_mpi_prepare");
    testing::write_shard_input(tmp.path / "in");
    const std::string prepare = testing::bertbench_path() + " " + prepare_args(tmp, "out", 1);
    for (const auto& [other, role] : std::vector<std::pair<std::string, std::string>>{
             {prepare + " --help", "prepare --help"},
             {testing::bertbench_path() + " version", "version"},
             {testing::bertbench_path() + " --help", "--help"},
             {testing::bertbench_path() + " prepair", "the unknown command \"prepair\""}}) {
        const auto r = run_shell(mpirun_prefix(1, 120) + prepare + " : -np 1 " + other);
        EXPECT_NE(r.exit_code, 0) << other << "\n" << r.out;
        EXPECT_NE(r.exit_code, 124) << "hung: " << other << "\n" << r.out;
        EXPECT_NE(r.out.find("bertbench: error: the command of rank 1 differs from rank 0's (" + role + " vs prepare)"),
                  std::string::npos) << r.out;
        EXPECT_FALSE(fs::exists(tmp.path / "out"));
    }
    // the same help on every rank is a help
    const auto help = run_shell(mpirun_prefix(2, 120) + prepare + " --help");
    EXPECT_EQ(help.exit_code, 0) << help.out;
    EXPECT_EQ(testing::count_of(help.out, "--random_seed"), 2u) << help.out;
}

// `version` under mpirun: one JSON array from rank 0, an object per rank with its rank and host
// (each rank printed its own document, and one run in three tore them into each other's lines).
TEST(MpiPrepare, VersionPrintsOneArrayOfTheRanks) {
    if (const std::string m = mpirun_missing(); !m.empty()) GTEST_SKIP() << m;
    const auto r = run_shell(mpirun_prefix(3, 120) + testing::bertbench_path() + " version 2>/dev/null");
    ASSERT_EQ(r.exit_code, 0) << r.out;
    const nlohmann::json all = nlohmann::json::parse(r.out);
    ASSERT_TRUE(all.is_array()) << r.out;
    ASSERT_EQ(all.size(), 3u);
    for (int rank = 0; rank < 3; ++rank) {
        EXPECT_EQ(all[rank]["rank"], rank);
        EXPECT_FALSE(all[rank]["hostname"].get<std::string>().empty());
        EXPECT_TRUE(all[rank]["system_info"].contains("cpu_isa"));
        EXPECT_EQ(all[rank]["build_info"], all[0]["build_info"]);
    }
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
