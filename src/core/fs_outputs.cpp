// Output-path checks (fs.hpp): an output is not an input, not a directory, writable, not
// another output and not one of a run's own files; the output directory made.
#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <filesystem>

#include "core/error.hpp"
#include "core/fs.hpp"

namespace bertbench {

bool same_file(const std::string& a, const std::string& b) {
    struct stat sa {}, sb {};
    return ::stat(a.c_str(), &sa) == 0 && ::stat(b.c_str(), &sb) == 0 && sa.st_dev == sb.st_dev &&
           sa.st_ino == sb.st_ino;
}

void check_output_not_input(const std::string& output, const std::string& output_flag,
                            const std::vector<std::string>& inputs, const std::string& input_flag) {
    for (const std::string& in : inputs) {
        if (same_file(in, output))
            fail("{}={}: is the same file as the input {} ({}); writing it would destroy the "
                 "input (expected a different output path)",
                 output_flag, output, input_flag, in == output ? in : in + ", same inode");
    }
}

void make_output_dir(const std::string& dir, const std::string& flag) {
    namespace fs = std::filesystem;
    std::string link = dir;  // "link/" is the directory it points to: look at the link itself
    while (link.size() > 1 && link.back() == '/') link.pop_back();
    std::error_code ec;
    if (fs::is_symlink(link, ec) && !fs::exists(link, ec))
        fail("{}={}: a symbolic link to {}, which leads nowhere (a missing target or a loop; expected a "
             "directory, or no such path)", flag, dir, fs::read_symlink(link, ec).string());
    fs::create_directories(dir, ec);
    if (ec || !fs::is_directory(dir))
        fail("{}={}: cannot create the directory ({})", flag, dir,
             ec ? ec.message() : std::string("a file of that name exists"));
}

void check_output_file_writable(const std::string& path, const std::string& flag, bool made_parents) {
    namespace fs = std::filesystem;
    std::error_code ec;
    if (fs::is_directory(path, ec)) fail("{}={}: is a directory, expected a file name", flag, path);
    // the file written is the end of a chain of links (a dangling one's too): its directory is checked
    bool stream = false;
    const std::string target = output_target(path, &stream);  // a block device or socket: its error now
    if (stream) return;                                       // written into, nothing created beside it
    fs::path parent = fs::path(target).parent_path();
    if (made_parents) {
        parent = fs::absolute(target).parent_path();
        while (!fs::exists(parent, ec) && parent.has_relative_path()) parent = parent.parent_path();
    }
    const std::string dir = parent.empty() ? "." : parent.string();
    const fs::file_status st = fs::status(dir, ec);
    const std::string via = target == path ? "" : fmt::format(" (a symbolic link to {})", target);
    if (!fs::exists(st))
        fail("{}={}{}: its directory {} does not exist (expected an existing directory)", flag, path, via, dir);
    if (!fs::is_directory(st)) fail("{}={}{}: {} is not a directory", flag, path, via, dir);
    // A file made and removed there, as the writer will make its temporary: permissions alone do
    // not tell (root passes access(2) on /proc and on a read-only mount). Under a name of its own,
    // so that no one watching for the writer's temporary sees it come and go.
    const std::string probe =
        temporary_path((fs::path(dir) / (fs::path(target).filename().string() + ".probe")).string());
    const int fd = ::open(probe.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0600);
    if (fd < 0 && errno != EEXIST)
        fail("{}={}{}: cannot create a file in {}: {}", flag, path, via, dir, std::strerror(errno));
    if (fd >= 0) {
        ::close(fd);
        ::unlink(probe.c_str());
    }
}

namespace {
// The same file for two spellings, whether or not it exists yet.
std::string normal_path(const std::string& path) {
    std::error_code ec;
    const std::filesystem::path p = std::filesystem::weakly_canonical(std::filesystem::absolute(path), ec);
    return ec ? std::filesystem::absolute(path).lexically_normal().string() : p.string();
}
}  // namespace

void check_outputs_distinct(const std::vector<std::pair<std::string, std::string>>& outputs) {
    // Each path normalised once; the first output of each file kept by name (thousands of shards).
    std::map<std::string, size_t> first;
    for (size_t i = 0; i < outputs.size(); ++i) {
        const auto& [fb, b] = outputs[i];
        if (b.empty()) continue;
        const auto [it, fresh] = first.emplace(normal_path(b), i);
        if (fresh) continue;
        const auto& [fa, a] = outputs[it->second];
        if (fa == fb)
            fail("{}: names the file {} twice (as {} and {}); expected each output once", fa, it->first, a, b);
        fail("{}={} and {}={}: the same file; expected different outputs (one would overwrite the other)",
             fa, a, fb, b);
    }
}

void check_run_outputs_not_directories(const std::string& dir, const std::string& dir_flag,
                                       const std::vector<std::string>& names) {
    for (const std::string& name : names) {
        const std::filesystem::path p = std::filesystem::path(dir) / name;
        std::error_code ec;
        if (std::filesystem::is_directory(p, ec))
            fail("{}={}: {} is a directory, expected a file name or nothing (the run writes its {} there)", dir_flag,
                 dir, p.string(), name);
    }
}

void check_output_not_in_run(const std::string& path, const std::string& flag, const std::string& dir,
                             const std::string& dir_flag, const std::vector<std::string>& names,
                             const std::vector<std::string>& prefixes) {
    const std::filesystem::path p(normal_path(path)), d(normal_path(dir.empty() ? "." : dir));
    // the run's directory itself (or one above it), made before the file is written
    for (std::filesystem::path up = d; !up.empty(); up = up.parent_path()) {
        if (up == p)
            fail("{}={}: is {}={}{}, a directory the run writes into; expected a file name", flag, path, dir_flag, dir,
                 up == d ? "" : " or a directory above it");
        if (up == up.root_path()) break;
    }
    if (p.parent_path() != d) return;
    const std::string name = p.filename().string();
    bool ours = std::find(names.begin(), names.end(), name) != names.end();
    for (const std::string& prefix : prefixes) ours |= name.starts_with(prefix);
    if (ours)
        fail("{}={}: is the run's own {} in {}={}, which it would overwrite (expected another name)", flag, path,
             name, dir_flag, dir);
}

}  // namespace bertbench
