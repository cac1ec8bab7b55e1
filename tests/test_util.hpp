// Small helpers shared by the tests: a temporary directory removed at scope exit, the message
// of the bertbench::Error a callable throws, where ../shared is, and JSON-lines files.
#pragma once

#include <unistd.h>

#include <nlohmann/json.hpp>

#include <cstdlib>
#include <filesystem>
#include <sstream>
#include <string>
#include <vector>

#include "core/error.hpp"
#include "core/fs.hpp"

namespace bertbench::testing {

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

// One JSON value per line of `path`.
inline std::vector<nlohmann::json> read_jsonl(const std::string& path) {
    std::vector<nlohmann::json> out;
    std::istringstream in(read_file(path));
    for (std::string line; std::getline(in, line);) out.push_back(nlohmann::json::parse(line));
    return out;
}

}  // namespace bertbench::testing
