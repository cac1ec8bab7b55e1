// Helpers for the optim tests: temp dirs, running the numpy reference, numpy.isclose comparisons
// that print the tensor name, #bad, worst index, got and want.
#pragma once

#include <gtest/gtest.h>
#include <stdlib.h>

#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

namespace bertbench::optim::testing {

inline std::string source_dir() {
    // BB_SOURCE_DIR when set (CTest), else the tree this header was compiled from.
    if (const char* s = std::getenv("BB_SOURCE_DIR")) return s;
    const std::string self = __FILE__, tail = "tests/optim/optim_test_util.hpp";
    if (self.size() > tail.size() && self.ends_with(tail))
        return self.substr(0, self.size() - tail.size() - 1);
    throw std::runtime_error("BB_SOURCE_DIR is not set and " + self + " is not in a source tree");
}

class TempDir {
public:
    TempDir() {
        std::string tmpl = (std::filesystem::temp_directory_path() / "bb_optim_XXXXXX").string();
        if (!mkdtemp(tmpl.data())) throw std::runtime_error("mkdtemp failed");
        path_ = tmpl;
    }
    ~TempDir() {
        std::error_code ec;
        std::filesystem::remove_all(path_, ec);
    }
    std::string file(const std::string& name) const { return (path_ / name).string(); }

private:
    std::filesystem::path path_;
};

template <typename T>
inline void write_raw(const std::string& path, const std::vector<T>& v) {
    std::ofstream f(path, std::ios::binary);
    f.write(reinterpret_cast<const char*>(v.data()), static_cast<std::streamsize>(v.size() * sizeof(T)));
    if (!f) throw std::runtime_error("cannot write " + path);
}

template <typename T>
inline std::vector<T> read_raw(const std::string& path) {
    std::ifstream f(path, std::ios::binary | std::ios::ate);
    if (!f) throw std::runtime_error("cannot read " + path);
    const auto bytes = static_cast<size_t>(f.tellg());
    std::vector<T> v(bytes / sizeof(T));
    f.seekg(0);
    f.read(reinterpret_cast<char*>(v.data()), static_cast<std::streamsize>(bytes));
    return v;
}

// Writes spec.json into dir, runs the reference, returns its result.json.
inline nlohmann::json run_reference(const TempDir& dir, const nlohmann::json& spec) {
    {
        std::ofstream f(dir.file("spec.json"));
        f << spec.dump();
    }
    const std::string cmd = "/usr/bin/python3 " + source_dir() +
                            "/tests/tools/optim_reference.py " + dir.file("spec.json") + " " +
                            dir.file("");
    const int rc = std::system(cmd.c_str());
    if (rc != 0) throw std::runtime_error("reference failed (rc " + std::to_string(rc) + "): " + cmd);
    std::ifstream f(dir.file("result.json"));
    return nlohmann::json::parse(f);
}

// numpy.isclose form: |got - want| <= atol + rtol * |want|. Returns the number of bad elements.
template <typename G, typename W>
inline size_t expect_close(const std::string& name, const G* got, const W* want, size_t n,
                           double rtol, double atol) {
    size_t bad = 0, worst = 0;
    double worst_excess = -1;
    for (size_t i = 0; i < n; ++i) {
        const double g = static_cast<double>(got[i]), w = static_cast<double>(want[i]);
        const double err = std::fabs(g - w), tol = atol + rtol * std::fabs(w);
        if (!(err <= tol)) {
            ++bad;
            const double excess = std::isnan(err) ? 1e300 : err - tol;
            if (excess > worst_excess) worst_excess = excess, worst = i;
        }
    }
    EXPECT_EQ(bad, 0u) << name << ": " << bad << " of " << n << " elements outside atol " << atol
                       << " + rtol " << rtol << " * |want|; worst index " << worst << ": got "
                       << static_cast<double>(got[worst]) << ", want "
                       << static_cast<double>(want[worst]);
    return bad;
}

}  // namespace bertbench::optim::testing
