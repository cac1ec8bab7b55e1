// Small helpers shared by the tests: a temporary directory removed at scope exit, the message
// of the bertbench::Error a callable throws, where ../shared is, whole files, JSON-lines files and
// the deterministic lines of a run's logs.
#pragma once

#include <sys/resource.h>
#include <sys/wait.h>
#include <unistd.h>

#include <nlohmann/json.hpp>

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <functional>
#include <initializer_list>
#include <sstream>
#include <string>
#include <vector>

#include "core/error.hpp"
#include "core/fs.hpp"

namespace bertbench::testing {

// Whether this test binary is the AddressSanitizer build (make test-asan). A test that scales its
// input to catch a quadratic cost runs it smaller there: the sanitizer checks the code paths, which
// a tenth of the input takes as well; the Release run keeps the full size and its bound.
#if defined(__SANITIZE_ADDRESS__)
inline constexpr bool kAddressSanitizer = true;
#else
inline constexpr bool kAddressSanitizer = false;
#endif

struct TmpDir {
    std::filesystem::path path;
    explicit TmpDir(const std::string& prefix = "bb_test") {
        static int counter = 0;
        path = std::filesystem::temp_directory_path() /
               (prefix + "_" + std::to_string(getpid()) + "_" + std::to_string(counter++));
        std::filesystem::create_directories(path);
    }
    ~TmpDir() {
        std::error_code ec;
        std::filesystem::remove_all(path, ec);
    }
    TmpDir(const TmpDir&) = delete;
    TmpDir& operator=(const TmpDir&) = delete;
    std::string file(const std::string& name) const { return (path / name).string(); }
};

// The message of the Error thrown by f(), or "" if it throws none.
template <typename F>
std::string error_of(F&& f) {
    try {
        f();
    } catch (const Error& e) {
        return e.what();
    }
    return "";
}

// ../shared (the goldens): $BB_SHARED_DIR, which tests/test_env.cpp sets for every test binary.
inline std::string shared_dir() {
    const char* d = std::getenv("BB_SHARED_DIR");
    return d ? d : "/work/shared";
}

// How f() ended in a forked child (run_in_child): a crash, a blocked read or a blow-up of memory
// must fail the test that provokes it, not kill the test binary.
struct ChildOutcome {
    // 0: threw bertbench::Error, 1: returned, 2: threw another exception, 128 + N: killed by
    // signal N (SIGALRM: the alarm ran out)
    int status = -1;
    std::string message;  // the Error's, "no error", "not a bertbench::Error: ..." or "killed by signal N"
    long max_rss_kb = 0;  // the child's peak resident memory
    bool killed() const { return status >= 128; }
};

// Runs f() in a forked child that SIGALRM ends after alarm_s seconds.
inline ChildOutcome run_in_child(const std::function<void()>& f, unsigned alarm_s) {
    int fds[2];
    if (::pipe(fds) != 0) return {-1, "pipe failed", 0};
    const pid_t pid = ::fork();
    if (pid == 0) {
        ::close(fds[0]);
        ::alarm(alarm_s);
        int code = 1;
        std::string msg = "no error";
        try {
            f();
        } catch (const Error& e) {
            code = 0;
            msg = e.what();
        } catch (const std::exception& e) {
            code = 2;
            msg = std::string("not a bertbench::Error: ") + e.what();
        }
        [[maybe_unused]] const ssize_t n = ::write(fds[1], msg.data(), msg.size());
        ::_exit(code);
    }
    ::close(fds[1]);
    ChildOutcome out;
    char buf[4096];
    for (ssize_t n; (n = ::read(fds[0], buf, sizeof buf)) > 0;) out.message.append(buf, size_t(n));
    ::close(fds[0]);
    int status = 0;
    struct rusage ru {};
    ::wait4(pid, &status, 0, &ru);
    out.max_rss_kb = ru.ru_maxrss;
    if (WIFEXITED(status)) {
        out.status = WEXITSTATUS(status);
    } else {
        out.status = 128 + WTERMSIG(status);
        out.message = "killed by signal " + std::to_string(WTERMSIG(status));
    }
    return out;
}

// A file of ../shared/golden/.
inline std::string golden(const std::string& rel) {
    return shared_dir() + "/golden/" + rel;
}
// The golden pretraining records (seq 128) and the evaluation records picked from them.
inline std::string train_data() {
    return golden("pretraining/public_128_s12345_d2.tfrecord");
}
inline std::string eval_data() {
    return golden("eval_pick/public_128_eval100.tfrecord");
}

// The Python that runs the independent PyTorch references and peers: BB_TORCH_PYTHON, else
// /usr/bin/python3 (scripts/gpu-check.sh names the GPU machine's, which has PyTorch with CUDA).
inline std::string torch_python() {
    const char* e = std::getenv("BB_TORCH_PYTHON");
    return e && *e ? e : "/usr/bin/python3";
}

// "" when torch_python() with torch and numpy is usable, else why not.
inline std::string torch_python_problem() {
    static const std::string problem = [] {
        const std::string py = torch_python();
        if (access(py.c_str(), X_OK) != 0) return py + " not found";
        if (std::system((py + " -c 'import torch, numpy' >/dev/null 2>&1").c_str()) != 0)
            return "torch/numpy not importable by " + py;
        return std::string();
    }();
    return problem;
}

// The whole file, or "" when it cannot be read (a log a run has not written yet).
inline std::string slurp(const std::string& path) {
    std::ifstream in(path, std::ios::binary);
    std::stringstream ss;
    ss << in.rdbuf();
    return ss.str();
}

// tests/tools/torch_bert.py (the independent PyTorch reference) run with `args`, its output written
// to `log`. status: the script's exit status; skipped(): 77, the bf16 reference is no reference on
// this CPU (PyTorch's bf16 GEMM does not accumulate in fp32 there; the output says by how much).
struct TorchBertRun {
    int status = -1;
    std::string command, output;
    bool skipped() const { return status == 77; }
};
inline TorchBertRun run_torch_bert(const std::string& args, const std::string& log) {
    const char* src = std::getenv("BB_SOURCE_DIR");  // tests/test_env.cpp sets it
    TorchBertRun r;
    r.command = torch_python() + " " + (src ? src : ".") + "/tests/tools/torch_bert.py " + args +
                " > " + log + " 2>&1";
    const int rc = std::system(r.command.c_str());
    r.status = WIFEXITED(rc) ? WEXITSTATUS(rc) : -1;
    r.output = slurp(log);
    return r;
}

// The JSON document in `path`.
inline nlohmann::json read_json(const std::string& path) {
    return nlohmann::json::parse(read_file(path));
}

// One JSON value per non-empty line of `path` (split on '\n' only: a raw U+2028 stays inside its
// line).
inline std::vector<nlohmann::json> read_jsonl(const std::string& path) {
    std::vector<nlohmann::json> out;
    std::istringstream in(read_file(path));
    for (std::string line; std::getline(in, line);)
        if (!line.empty()) out.push_back(nlohmann::json::parse(line));
    return out;
}

// The JSON lines of `path` with the given fields erased, each dumped ("" file: none).
inline std::vector<std::string> log_lines(const std::string& path,
                                          std::initializer_list<const char*> erase) {
    std::vector<std::string> out;
    std::istringstream in(slurp(path));
    for (std::string line; std::getline(in, line);) {
        nlohmann::json j = nlohmann::json::parse(line);
        for (const char* k : erase) j.erase(k);
        out.push_back(j.dump());
    }
    return out;
}
// What two runs of the same training must log identically: train_log.jsonl and eval_log.jsonl of
// an output directory without their timing fields.
inline std::vector<std::string> train_lines(const std::string& dir) {
    return log_lines(dir + "/train_log.jsonl", {"sequences_per_second", "tokens_per_second"});
}
inline std::vector<std::string> eval_lines(const std::string& dir) {
    return log_lines(dir + "/eval_log.jsonl", {"eval_seconds", "elapsed_s"});
}

}  // namespace bertbench::testing
