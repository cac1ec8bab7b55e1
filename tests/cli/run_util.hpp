// Runs the built bertbench binary (path in $BB_BERTBENCH) as a real process for end-to-end tests.
#pragma once

#include <sys/wait.h>

#include <array>
#include <cstdio>
#include <cstdlib>
#include <string>

namespace bertbench::testing {

struct RunResult {
    int exit_code = -1;
    std::string out;  // stdout and stderr together
};

inline std::string bertbench_path() {
    const char* p = std::getenv("BB_BERTBENCH");
    return p ? p : "bertbench";
}

// `args` is appended to the binary path as shell words (the caller quotes).
inline RunResult run_bertbench(const std::string& args) {
    RunResult r;
    const std::string cmd = bertbench_path() + " " + args + " 2>&1";
    FILE* pipe = popen(cmd.c_str(), "r");
    if (pipe == nullptr) return r;
    std::array<char, 4096> buf{};
    size_t n;
    while ((n = fread(buf.data(), 1, buf.size(), pipe)) > 0) r.out.append(buf.data(), n);
    const int status = pclose(pipe);
    r.exit_code = WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
    return r;
}

}  // namespace bertbench::testing
