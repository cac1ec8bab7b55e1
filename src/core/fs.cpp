#include "core/fs.hpp"

#include <glob.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <fstream>
#include <sstream>

#include "core/error.hpp"
#include "core/flags.hpp"

namespace bertbench {

AtomicFile::AtomicFile(std::string path) : path_(std::move(path)) {
    tmp_ = path_ + ".tmp." + std::to_string(getpid());
    file_ = std::fopen(tmp_.c_str(), "wb");
    if (file_ == nullptr) fail("{}: cannot create file: {}", path_, std::strerror(errno));
}

AtomicFile::~AtomicFile() {
    if (file_ != nullptr) {
        std::fclose(file_);
        std::remove(tmp_.c_str());
    }
}

void AtomicFile::write(const void* data, size_t size) {
    BB_CHECK(file_ != nullptr);
    if (size > 0 && std::fwrite(data, 1, size, file_) != size)
        fail("{}: write failed: {} (is the disk full?)", path_, std::strerror(errno));
}

void AtomicFile::commit() {
    BB_CHECK(file_ != nullptr);
    const bool ok = std::fflush(file_) == 0 && fsync(fileno(file_)) == 0;
    const int err = errno;
    std::fclose(file_);
    file_ = nullptr;
    if (!ok || std::rename(tmp_.c_str(), path_.c_str()) != 0) {
        std::remove(tmp_.c_str());
        fail("{}: cannot finish writing: {} (is the disk full?)", path_,
             std::strerror(ok ? errno : err));
    }
}

void write_file_atomic(const std::string& path, std::string_view contents) {
    AtomicFile f(path);
    f.write(contents);
    f.commit();
}

std::string read_file(const std::string& path) {
    std::ifstream in(path, std::ios::binary);
    if (!in) fail("{}: cannot open file: {}", path, std::strerror(errno));
    std::ostringstream ss;
    ss << in.rdbuf();
    if (in.bad()) fail("{}: read failed", path);
    return ss.str();
}

std::vector<std::string> expand_globs(const std::string& list, const std::string& flag) {
    std::vector<std::string> out;
    for (const std::string& pattern : split_commas(list)) {
        glob_t g{};
        const int rc = ::glob(pattern.c_str(), 0, nullptr, &g);
        if (rc == GLOB_NOMATCH || g.gl_pathc == 0) {
            globfree(&g);
            fail("{}: \"{}\" matches no file", flag, pattern);
        }
        if (rc != 0) {
            globfree(&g);
            fail("{}: cannot expand \"{}\"", flag, pattern);
        }
        for (size_t i = 0; i < g.gl_pathc; ++i) out.emplace_back(g.gl_pathv[i]);
        globfree(&g);
    }
    if (out.empty()) fail("{}: no input files given", flag);
    return out;
}

}  // namespace bertbench
