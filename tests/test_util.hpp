// Small helpers shared by the tests: a temporary directory removed at scope exit, and the message
// of the bertbench::Error a callable throws.
#pragma once

#include <unistd.h>

#include <filesystem>
#include <string>

#include "core/error.hpp"

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

}  // namespace bertbench::testing
