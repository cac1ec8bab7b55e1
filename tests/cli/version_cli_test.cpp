// `bertbench version`: build_info names the commit the binary was built from (stamped at build
// time by cmake/git_stamp.cmake, so a rebuild after a commit reports the new one).
#include <gtest/gtest.h>

#include <cstdlib>
#include <nlohmann/json.hpp>
#include <string>

#include "run_util.hpp"

namespace {

using bertbench::testing::bertbench_path;
using bertbench::testing::run_bertbench;
using bertbench::testing::run_shell;

// First line of a shell command's stdout; "" when it fails.
std::string first_line(const std::string& cmd) {
    FILE* pipe = popen((cmd + " 2>/dev/null").c_str(), "r");
    if (pipe == nullptr) return "";
    char buf[256] = {};
    std::string line = std::fgets(buf, sizeof buf, pipe) ? buf : "";
    if (pclose(pipe) != 0) return "";
    while (!line.empty() && (line.back() == '\n' || line.back() == '\r')) line.pop_back();
    return line;
}

TEST(VersionCli, BuildInfoNamesTheBuiltCommit) {
    const auto r = run_bertbench("version 2>/dev/null");
    ASSERT_EQ(r.exit_code, 0) << r.out;
    const auto bi = nlohmann::json::parse(r.out)["build_info"];
    const std::string src = std::getenv("BB_SOURCE_DIR");
    const std::string head = first_line("git -C '" + src + "' rev-parse --short HEAD");
    EXPECT_EQ(bi["git_commit"], head.empty() ? "unknown" : head) << "rebuild before testing";
    ASSERT_TRUE(bi["git_dirty"].is_boolean());
    if (!head.empty()) {
        const bool dirty = !first_line("git -C '" + src +
                                       "' status --porcelain --untracked-files=no -- src bench "
                                       "cmake CMakeLists.txt")
                                .empty();
        EXPECT_EQ(bi["git_dirty"], dirty) << "rebuild before testing";
    }
}

// The binary waits at OpenMP barriers with a short spin of its own choosing (main.cpp), unless the
// user chose a policy: either way system_info says which.
TEST(VersionCli, NamesTheOpenMpWaitPolicy) {
    const auto wait = [](const std::string& env) {
        const auto r = run_shell("env -u OMP_WAIT_POLICY -u GOMP_SPINCOUNT " + env + " " + bertbench_path() +
                                 " version 2>/dev/null");
        EXPECT_EQ(r.exit_code, 0) << r.out;
        return nlohmann::json::parse(r.out)["system_info"]["openmp_wait"].get<std::string>();
    };
    EXPECT_EQ(wait(""), "GOMP_SPINCOUNT=10000");
    EXPECT_EQ(wait("GOMP_SPINCOUNT=300000"), "GOMP_SPINCOUNT=300000");
    EXPECT_EQ(wait("OMP_WAIT_POLICY=passive"), "OMP_WAIT_POLICY=passive");
}

// The native precisions come from CPUID; /proc/cpuinfo's flags, read independently, must agree.
TEST(VersionCli, NativePrecisionsMatchCpuinfo) {
    const auto r = run_bertbench("version 2>/dev/null");
    ASSERT_EQ(r.exit_code, 0) << r.out;
    const auto si = nlohmann::json::parse(r.out)["system_info"];
    const std::string native = si["native_precisions"];
    EXPECT_EQ(native.rfind("fp32", 0), 0u) << native;
    if (first_line("grep -m1 -c '^flags' /proc/cpuinfo") != "1") GTEST_SKIP() << "no /proc/cpuinfo flags";
    const std::string bf16 = first_line("grep -m1 -o -w -E 'avx512_bf16|amx_bf16' /proc/cpuinfo");
    EXPECT_EQ(native.find("bf16") != std::string::npos, !bf16.empty())
        << native << " vs /proc/cpuinfo: '" << bf16 << "'";
    EXPECT_FALSE(si["bf16_gemm"].get<std::string>().empty());
}

// bf16 counts as faster than fp32 only with native bf16 and either AMX under oneDNN or an AMD CPU
// (/proc/cpuinfo's vendor, read independently of CPUID leaf 0): never on emulated bf16, never on
// Intel's AVX512-BF16 alone.
TEST(VersionCli, Bf16FasterOnlyOnAmxOrAmd) {
    const auto r = run_bertbench("version 2>/dev/null");
    ASSERT_EQ(r.exit_code, 0) << r.out;
    const auto si = nlohmann::json::parse(r.out)["system_info"];
    const std::string gemm = si["bf16_gemm"];
    const bool fast = si["bf16_faster_than_fp32"];
    if (gemm.rfind("emulated", 0) == 0) {
        EXPECT_FALSE(fast) << gemm;
        return;
    }
    const std::string vendor = first_line("grep -m1 '^vendor_id' /proc/cpuinfo");
    if (vendor.empty()) GTEST_SKIP() << "no vendor_id in /proc/cpuinfo";
    const bool amd = vendor.find("AuthenticAMD") != std::string::npos;
    EXPECT_EQ(fast, amd || gemm.find("amx") != std::string::npos) << vendor << ", bf16 GEMM " << gemm;
}

}  // namespace
