// Helpers shared by the io tests: golden paths, reading all records, temporary files.
#pragma once

#include <unistd.h>

#include <cstdlib>
#include <filesystem>
#include <string>
#include <vector>

#include "io/tfrecord.hpp"

namespace bertbench::io::testing {

inline std::string shared_dir() {
    const char* d = std::getenv("BB_SHARED_DIR");
    return d ? d : "/work/shared";
}
inline std::string golden(const std::string& rel) {
    return shared_dir() + "/golden/" + rel;
}

// Every golden TFRecord file (pretraining outputs and pick_eval_samples outputs).
inline std::vector<std::string> golden_tfrecords() {
    std::vector<std::string> out;
    for (const char* dir : {"pretraining", "eval_pick"})
        for (const auto& e : std::filesystem::directory_iterator(golden(dir))) {
            const std::string name = e.path().filename().string();
            if (name.find(".tfrecord") != std::string::npos &&
                name.find(".jsonl") == std::string::npos)
                out.push_back(e.path().string());
        }
    std::sort(out.begin(), out.end());
    return out;
}

inline std::vector<std::string> read_records(const std::string& path) {
    TfRecordReader r(path);
    std::vector<std::string> out;
    std::string p;
    while (r.next(p)) out.push_back(p);
    return out;
}

// A fresh directory under the system temp dir, removed when the object dies.
struct TempDir {
    std::filesystem::path path;
    TempDir() {
        static int counter = 0;
        path = std::filesystem::temp_directory_path() /
               ("bb_io_test_" + std::to_string(::getpid()) + "_" + std::to_string(counter++));
        std::filesystem::create_directories(path);
    }
    ~TempDir() {
        std::error_code ec;
        std::filesystem::remove_all(path, ec);
    }
    std::string file(const std::string& name) const { return (path / name).string(); }
};

}  // namespace bertbench::io::testing
