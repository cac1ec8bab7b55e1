// Runs the built bertbench binary (path in $BB_BERTBENCH) as a real process for end-to-end tests.
#pragma once

#include <sys/wait.h>

#include <unistd.h>

#include <algorithm>
#include <array>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <regex>
#include <string>
#include <thread>
#include <vector>

namespace bertbench::testing {

struct RunResult {
    int exit_code = -1;
    std::string out;  // stdout and stderr together
};

inline std::string bertbench_path() {
    const char* p = std::getenv("BB_BERTBENCH");
    return p ? p : "bertbench";
}

// A shell command line, stdout and stderr together; exit status (128 + signal when killed).
inline RunResult run_shell(const std::string& cmd) {
    RunResult r;
    FILE* pipe = popen((cmd + " 2>&1").c_str(), "r");
    if (pipe == nullptr) return r;
    std::array<char, 4096> buf{};
    size_t n;
    while ((n = fread(buf.data(), 1, buf.size(), pipe)) > 0) r.out.append(buf.data(), n);
    const int status = pclose(pipe);
    r.exit_code = WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
    return r;
}

// `args` is appended to the binary path as shell words (the caller quotes).
inline RunResult run_bertbench(const std::string& args) {
    return run_shell(bertbench_path() + " " + args);
}

// scripts/mlperf_log_check.py on an MLPerf log (the compliance checker's training_5.0.0 rules for
// BERT; `args` before the file, e.g. "--division=closed"): exit 0 and one line when it passes.
inline RunResult check_mlperf_log(const std::string& path, const std::string& args = "") {
    const char* src = std::getenv("BB_SOURCE_DIR");  // tests/test_env.cpp sets it
    return run_shell("/usr/bin/python3 " + std::string(src ? src : ".") +
                     "/scripts/mlperf_log_check.py " + args + " '" + path + "'");
}

// python3 scripts/<script> <args> (the caller quotes) with this build's bertbench as BERTBENCH and
// `env` (more VAR=value words) before it; leak checks off for the binary it runs.
inline RunResult run_script(const std::string& script, const std::string& args,
                            const std::string& env = "") {
    const char* src = std::getenv("BB_SOURCE_DIR");  // tests/test_env.cpp sets it
    return run_shell("ASAN_OPTIONS=detect_leaks=0 BERTBENCH='" + bertbench_path() + "' " + env +
                     " python3 " + std::string(src ? src : ".") + "/scripts/" + script + " " + args);
}

// The files of `dir` whose names match the regex `re`, sorted.
inline std::vector<std::string> matching_files(const std::string& dir, const std::string& re) {
    std::vector<std::string> out;
    for (const auto& e : std::filesystem::directory_iterator(dir))
        if (std::regex_match(e.path().filename().string(), std::regex(re)))
            out.push_back(e.path().string());
    std::sort(out.begin(), out.end());
    return out;
}

// How many times `needle` occurs in `hay` (overlapping occurrences counted).
inline size_t count_of(const std::string& hay, const std::string& needle) {
    size_t n = 0;
    for (size_t p = hay.find(needle); p != std::string::npos; p = hay.find(needle, p + 1)) ++n;
    return n;
}

// Starts the binary with `args` (no shell), stdout and stderr into the file `log`.
inline pid_t spawn_bertbench(const std::vector<std::string>& args, const std::string& log) {
    const std::string bin = bertbench_path();
    const pid_t pid = fork();
    if (pid == 0) {
        FILE* f = std::fopen(log.c_str(), "w");
        if (f) {
            dup2(fileno(f), 1);
            dup2(fileno(f), 2);
        }
        std::vector<char*> argv{const_cast<char*>(bin.c_str())};
        for (const auto& a : args) argv.push_back(const_cast<char*>(a.c_str()));
        argv.push_back(nullptr);
        execv(bin.c_str(), argv.data());
        _exit(127);
    }
    return pid;
}

// Polls the filesystem until `path` exists or the process exits; true if the file appeared.
inline bool wait_for_file(const std::string& path, pid_t pid) {
    const auto deadline = std::chrono::steady_clock::now() + std::chrono::minutes(5);
    while (std::chrono::steady_clock::now() < deadline) {
        if (std::filesystem::exists(path)) return true;
        int status = 0;
        if (waitpid(pid, &status, WNOHANG) == pid) return std::filesystem::exists(path);
        std::this_thread::sleep_for(std::chrono::milliseconds(2));  // poll interval, not a sync
    }
    return false;
}

// Polls the file `path` until it contains `text` or the process exits (not reaped: the caller
// still waits for it); true if the text appeared.
inline bool wait_for_text(const std::string& path, const std::string& text, pid_t pid) {
    const auto deadline = std::chrono::steady_clock::now() + std::chrono::minutes(5);
    while (std::chrono::steady_clock::now() < deadline) {
        std::ifstream in(path);
        const std::string got((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
        if (got.find(text) != std::string::npos) return true;
        siginfo_t info{};
        if (waitid(P_PID, static_cast<id_t>(pid), &info, WEXITED | WNOHANG | WNOWAIT) == 0 && info.si_pid == pid)
            return false;
        std::this_thread::sleep_for(std::chrono::milliseconds(5));  // poll interval, not a sync
    }
    return false;
}

}  // namespace bertbench::testing
