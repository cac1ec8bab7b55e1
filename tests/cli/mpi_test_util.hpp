// Helpers of the MPI end-to-end tests (mpi_prepare_cli_test.cpp, mpi_netns_cli_test.cpp): mpirun
// on this machine and shell commands (tests/dist/mpi_util.hpp), network-namespace "hosts" through
// scripts/mpi-netns.sh, shard-mode input, and byte comparison of output directories.
#pragma once

#include <cstdlib>
#include <filesystem>
#include <map>
#include <string>

#include "cli/run_util.hpp"
#include "core/fs.hpp"
#include "dist/mpi_util.hpp"
#include "test_util.hpp"

namespace bertbench::testing {

inline std::string source_dir() {
    const char* d = std::getenv("BB_SOURCE_DIR");
    return d ? d : ".";
}

// No LSan in the ranks that mpi-netns.sh starts (OpenMPI's start-up allocations are never freed;
// the ASan build's tests would fail on them): the ranks inherit the script's environment.
constexpr const char* kRankEnv = "ASAN_OPTIONS=detect_leaks=0 ";

// Why network-namespace hosts cannot be made here ("" when they can): scripts/mpi-netns.sh
// --check makes and removes them; its exit status 77 means "not possible here" with the reason.
// Any other failure is returned as a failure of the script itself (the caller fails the test).
struct NetnsCheck {
    bool available = false;
    bool script_broken = false;
    std::string why;
};
inline NetnsCheck netns_check() {
    NetnsCheck c;
    if (const std::string m = mpirun_missing(); !m.empty()) {
        c.why = m;
        return c;
    }
    const auto r = run_shell("bash " + source_dir() + "/scripts/mpi-netns.sh --check");
    c.available = r.exit_code == 0;
    c.script_broken = r.exit_code != 0 && r.exit_code != 77;
    c.why = r.out;
    while (!c.why.empty() && c.why.back() == '\n') c.why.pop_back();
    return c;
}

// `scripts/mpi-netns.sh --hosts=N -- ` with a time limit: the ranks run one per namespace.
inline std::string mpirun_netns(int hosts, int timeout_s = 300) {
    return std::string(kRankEnv) + "bash " + source_dir() +
           "/scripts/mpi-netns.sh --hosts=" + std::to_string(hosts) +
           " --timeout=" + std::to_string(timeout_s) + " -- ";
}

// Shard-mode input made from the golden corpus: five shards of unequal size cut at document
// boundaries, plus the small extra corpus (six files in all).
inline void write_shard_input(const std::filesystem::path& dir) {
    std::filesystem::create_directories(dir);
    const std::string text = read_file(shared_dir() + "/golden/corpus_public.txt");
    std::vector<size_t> cuts{0};
    for (size_t at = text.find("\n\n"); at != std::string::npos; at = text.find("\n\n", at + 2))
        cuts.push_back(at + 2);
    const std::vector<size_t> docs{0, 5, 20, 30, 50};
    for (size_t i = 0; i < docs.size(); ++i) {
        const size_t from = cuts.at(docs[i]);
        const size_t to = i + 1 < docs.size() ? cuts.at(docs[i + 1]) : text.size();
        write_file_atomic((dir / ("part-" + std::to_string(i) + ".txt")).string(),
                          text.substr(from, to - from));
    }
    write_file_atomic((dir / "part-5.txt").string(),
                      read_file(shared_dir() + "/golden/corpus_public_extra.txt"));
}

// Every regular file under `dir` by relative path, with its bytes.
inline std::map<std::string, std::string> files_under(const std::filesystem::path& dir) {
    std::map<std::string, std::string> out;
    for (const auto& e : std::filesystem::recursive_directory_iterator(dir))
        if (e.is_regular_file())
            out[std::filesystem::relative(e.path(), dir).string()] = read_file(e.path().string());
    return out;
}

}  // namespace bertbench::testing
