// Multi-node, tested on one machine (issue 12 §4): two "hosts" are network namespaces on a
// bridge (scripts/mpi-netns.sh), one rank each, talking over TCP. Where namespaces cannot be made
// (not root, no CAP_NET_ADMIN, no iproute2), each test is skipped with the reason. The script
// removes its namespaces, links and /etc/hosts lines when the job ends, also on failure or
// timeout; the tests check that nothing of theirs is left.
#include <gtest/gtest.h>
#include <unistd.h>

#include <filesystem>
#include <nlohmann/json.hpp>
#include <string>

#include "cli/mpi_test_util.hpp"

namespace bertbench {
namespace {
namespace fs = std::filesystem;
using testing::files_under;
using testing::run_bertbench;
using testing::run_shell;
using testing::TmpDir;

#define SKIP_WITHOUT_NETNS()                                                         \
    do {                                                                             \
        const auto check = testing::netns_check();                                   \
        ASSERT_FALSE(check.script_broken) << "scripts/mpi-netns.sh --check failed:\n" \
                                          << check.why;                              \
        if (!check.available) GTEST_SKIP() << check.why;                             \
    } while (0)

// The name prefix of a run of mpi-netns.sh whose output is `out` ("bbmn<PID>"; its first line
// names the hosts: "mpi-netns: 2 hosts (bbmn<PID>h1:1 ..."), or "" when not found.
std::string tag_of(const std::string& out) {
    const size_t at = out.find("(bbmn");
    if (at == std::string::npos) return "";
    return out.substr(at + 1, out.find('h', at + 5) - at - 1);
}

// Nothing of that run is left: namespaces, links, /etc/hosts lines.
void expect_torn_down(const std::string& out) {
    const std::string tag = tag_of(out);
    ASSERT_GT(tag.size(), 4u) << out;
    EXPECT_EQ(run_shell("ip netns list | grep '^" + tag + "h'").out, "");
    EXPECT_EQ(run_shell("ip -o link show | grep ' " + tag + "'").out, "");
    EXPECT_EQ(run_shell("grep '" + tag + "' /etc/hosts").out, "");
}

TEST(MpiNetns, RanksRunInTwoHostsAndTheSetupIsRemovedAfterAFailure) {
    SKIP_WITHOUT_NETNS();
    // Each rank reports its hostname: two distinct "hosts".
    auto r = run_shell(testing::mpirun_netns(2, 60) + "hostname");
    ASSERT_EQ(r.exit_code, 0) << r.out;
    const std::string tag = tag_of(r.out);
    ASSERT_NE(tag, "") << r.out;
    EXPECT_NE(r.out.find("\n" + tag + "h1\n"), std::string::npos) << r.out;
    EXPECT_NE(r.out.find("\n" + tag + "h2\n"), std::string::npos) << r.out;
    expect_torn_down(r.out);
    // A failing job (one rank exits 3): the status comes back and the setup is still removed.
    r = run_shell(testing::mpirun_netns(2, 60) + "sh -c 'test $OMPI_COMM_WORLD_RANK = 0 || exit 3'");
    EXPECT_NE(r.exit_code, 0) << r.out;
    expect_torn_down(r.out);
    // A job past its time limit is stopped (status 124) and the setup removed.
    r = run_shell(testing::mpirun_netns(2, 2) + "sleep 60");
    EXPECT_EQ(r.exit_code, 124) << r.out;
    EXPECT_NE(r.out.find("ran past --timeout=2 s"), std::string::npos) << r.out;
    expect_torn_down(r.out);
}

TEST(MpiNetns, PrepareOnTwoHostsWritesTheSameBytesAsOneProcess) {
    SKIP_WITHOUT_NETNS();
    const TmpDir tmp("bb_mpi_netns");
    testing::write_shard_input(tmp.path / "in");
    const std::string args = " --vocab_file=" + testing::shared_dir() +
                             "/golden/vocab.txt --dupe_factor=1 --random_seed=3 --jobs=1"
                             " --input_dir=" + tmp.file("in") + " --output_dir=";
    const auto one = run_bertbench("prepare" + args + tmp.file("one"));
    ASSERT_EQ(one.exit_code, 0) << one.out;
    const auto two = run_shell(testing::mpirun_netns(2) + testing::bertbench_path() + " prepare" +
                               args + tmp.file("two"));
    ASSERT_EQ(two.exit_code, 0) << two.out;
    EXPECT_NE(two.out.find("prepare: 6 shards on 2 ranks"), std::string::npos) << two.out;
    expect_torn_down(two.out);
    const auto expected = files_under(tmp.path / "one");
    const auto got = files_under(tmp.path / "two");
    ASSERT_EQ(expected.size(), 12u);
    ASSERT_EQ(got.size(), expected.size());
    for (const auto& [name, bytes] : expected) {
        ASSERT_EQ(got.count(name), 1u) << name;
        EXPECT_TRUE(got.at(name) == bytes) << name << " differs";
    }
}

// The data-parallel training step (forward, backward with the bucketed all-reduce overlapped,
// LAMB) with its gradients averaged over TCP between the two hosts: `bench` under mpirun reports
// once (rank 0), for 2 ranks, with the bytes it all-reduced.
TEST(MpiNetns, BenchTrainsDataParallelAcrossTwoHosts) {
    SKIP_WITHOUT_NETNS();
    const auto r = run_shell(testing::mpirun_netns(2) + testing::bertbench_path() +
                             " bench --model=tiny --mode=train --seq_len=32 --threads=1 --steps=3"
                             " --warmup=1 --ceiling=false --format=json --bucket_mb=0.05 --batch_size=4");
    ASSERT_EQ(r.exit_code, 0) << r.out;
    expect_torn_down(r.out);
    // The JSON array: from a line "[" to a line "]" (warnings on stderr, which may follow it,
    // contain "[   2.39s]").
    const size_t b = r.out.find("[\n");
    const size_t e = b == std::string::npos ? b : r.out.find("\n]", b);
    ASSERT_TRUE(b != std::string::npos && e != std::string::npos) << r.out;
    const auto j = nlohmann::json::parse(r.out.substr(b, e + 2 - b), nullptr, false);
    ASSERT_TRUE(j.is_array() && j.size() == 1) << "one report (rank 0's):\n" << r.out;
    const auto& m = j[0]["mpi"];
    ASSERT_TRUE(m.is_object()) << j.dump(1);
    EXPECT_EQ(m["ranks"], 2);
    EXPECT_EQ(m["batch_size_per_rank"], 2);
    // BERT-tiny's gradient, 4 bytes per float (4.4 M parameters), every step
    EXPECT_GT(m["allreduce_bytes_per_step"].get<double>(), 4.0 * 4e6);
}

}  // namespace
}  // namespace bertbench
