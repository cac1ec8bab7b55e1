// File helpers. Every output file is written atomically: to "<final>.tmp.<pid>", fsync'd, then
// renamed, so a crash or a full disk never leaves a half-written file under its final name.
#pragma once

#include <cstdio>
#include <string>
#include <string_view>
#include <vector>

namespace bertbench {

// An output file written under a temporary name until commit(). Destroying an uncommitted
// AtomicFile removes the temporary. write() throws Error (naming the final path) on failure.
class AtomicFile {
public:
    explicit AtomicFile(std::string path);
    ~AtomicFile();
    AtomicFile(const AtomicFile&) = delete;
    AtomicFile& operator=(const AtomicFile&) = delete;

    void write(const void* data, size_t size);
    void write(std::string_view s) { write(s.data(), s.size()); }
    void commit();  // flush, fsync, rename to the final path
    const std::string& path() const { return path_; }

private:
    std::string path_, tmp_;
    std::FILE* file_ = nullptr;
};

void write_file_atomic(const std::string& path, std::string_view contents);
std::string read_file(const std::string& path);  // whole file; Error naming the path on failure
// Expands a comma-separated list of paths and globs; each glob must match at least one file.
// Result keeps list order, each glob's matches sorted. Error names `flag` when nothing matches.
std::vector<std::string> expand_globs(const std::string& list, const std::string& flag);

}  // namespace bertbench
