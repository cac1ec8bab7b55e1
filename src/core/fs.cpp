#include "core/fs.hpp"

#include <fcntl.h>
#include <fnmatch.h>
#include <glob.h>
#include <signal.h>
#include <sys/file.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <cstring>
#include <exception>
#include <filesystem>
#include <functional>
#include <map>
#include <set>

#include "core/error.hpp"
#include "core/flags.hpp"
#include "core/json_safe.hpp"
#include "core/log.hpp"

namespace bertbench {

AtomicFile::AtomicFile(std::string path) : path_(std::move(path)) {
    // A directory where the file goes is said now, not as "cannot finish writing ... (is the disk
    // full?)" when the rename fails after all the work.
    target_ = output_target(path_, &stream_);
    if (stream_) {
        // /dev/stdout and the like: through the open descriptor, after what was printed before
        // (opening the file a redirection points it at would truncate it)
        const int fd = named_descriptor(path_);
        if (fd >= 0) std::fflush(nullptr);
        const int copy = fd >= 0 ? ::dup(fd) : -1;
        file_ = copy >= 0 ? ::fdopen(copy, "wb") : fd >= 0 ? nullptr : std::fopen(path_.c_str(), "wb");
        if (file_ == nullptr && copy >= 0) ::close(copy);
        if (file_ == nullptr) fail("{}: cannot open for writing: {}", path_, std::strerror(errno));
        return;
    }
    tmp_ = temporary_path(target_);
    register_temporary(tmp_);  // before it exists: a signal right after the open finds it
    file_ = std::fopen(tmp_.c_str(), "wb");
    if (file_ == nullptr) {
        const int err = errno;
        unregister_temporary(tmp_);
        fail("{}: cannot create file: {}", path_, std::strerror(err));
    }
}

AtomicFile::~AtomicFile() {
    if (file_ == nullptr) return;
    std::fclose(file_);
    if (stream_) return;
    std::remove(tmp_.c_str());
    unregister_temporary(tmp_);
}

void AtomicFile::write(const void* data, size_t size) {
    BB_CHECK(file_ != nullptr);
    synced_ = false;
    if (size > 0 && std::fwrite(data, 1, size, file_) != size)
        fail("{}: write failed: {} (is the disk full?)", path_, std::strerror(errno));
}

void AtomicFile::commit() {
    BB_CHECK(file_ != nullptr);
    if (stream_) {  // nothing to sync or rename: a FIFO's reader or a device has the bytes
        const bool ok = std::fflush(file_) == 0;
        const int err = errno;
        std::fclose(file_);
        file_ = nullptr;
        if (!ok) fail("{}: write failed: {}", path_, std::strerror(err));
        return;
    }
    sync();  // on failure the destructor removes the temporary
    std::fclose(file_);
    file_ = nullptr;
    const bool renamed = std::rename(tmp_.c_str(), target_.c_str()) == 0;
    const int err = errno;
    if (!renamed) std::remove(tmp_.c_str());
    unregister_temporary(tmp_);
    if (!renamed) fail("{}: cannot finish writing: {} (is the disk full?)", path_, std::strerror(err));
}

void AtomicFile::sync() {
    BB_CHECK(file_ != nullptr);
    if (stream_ || synced_) return;
    if (std::fflush(file_) != 0 || fsync(fileno(file_)) != 0)
        fail("{}: cannot finish writing: {} (is the disk full?)", path_, std::strerror(errno));
    synced_ = true;
}

int named_descriptor(const std::string& path) {
    int fd = -1;
    if (path == "/dev/stdout") fd = 1;
    if (path == "/dev/stderr") fd = 2;
    for (const std::string_view dir : {"/dev/fd/", "/proc/self/fd/"})
        if (path.starts_with(dir) && path.size() > dir.size() && path.size() <= dir.size() + 6 &&
            path.find_first_not_of("0123456789", dir.size()) == std::string::npos &&
            (path[dir.size()] != '0' || path.size() == dir.size() + 1))  // "01": no such entry
            fd = std::stoi(path.substr(dir.size()));
    return fd >= 0 && ::fcntl(fd, F_GETFD) != -1 ? fd : -1;
}

size_t name_max(const std::string& dir) {
    std::filesystem::path probe = dir;
    std::error_code ec;
    while (!probe.empty() && !std::filesystem::exists(probe, ec)) probe = probe.parent_path();
    const long n = ::pathconf(probe.empty() ? "." : probe.c_str(), _PC_NAME_MAX);
    return n > 0 ? static_cast<size_t>(n) : 255;
}

std::string output_target(const std::string& path, bool* stream) {
    *stream = false;
    if (named_descriptor(path) >= 0) {  // whatever it is open on: written into, never replaced
        *stream = true;
        return path;
    }
    // The kernel's view first: it follows every link, /proc/self/fd's included ("pipe:[N]").
    struct stat st {};
    if (::stat(path.c_str(), &st) == 0) {
        if (S_ISDIR(st.st_mode)) fail("{}: is a directory, expected a file name to write", path);
        if (S_ISFIFO(st.st_mode) || S_ISCHR(st.st_mode)) {
            *stream = true;
            return path;
        }
        if (!S_ISREG(st.st_mode))
            fail("{}: is {}, expected a regular file, a FIFO or a character device to write", path,
                 file_type_name(st.st_mode));
    }
    // A regular file or nothing yet: the file the chain of links ends at is replaced. A name its
    // file system cannot hold is said now, not when the finished file is renamed to it.
    const std::filesystem::path name = std::filesystem::path(path).filename();
    const size_t limit = name_max(std::filesystem::path(path).parent_path().string());
    if (name.string().size() > limit)
        fail("{}: a file name of {} bytes, expected at most {} (NAME_MAX)", path, name.string().size(), limit);
    std::string target = path;
    for (int hops = 0;; ++hops) {
        struct stat l {};
        if (::lstat(target.c_str(), &l) != 0 || !S_ISLNK(l.st_mode)) return target;
        if (hops == 40)
            fail("{}: too many levels of symbolic links, expected a file to write", path);
        std::error_code ec;
        const std::filesystem::path to = std::filesystem::read_symlink(target, ec);
        if (ec) fail("{}: cannot read the symbolic link {}: {}", path, target, ec.message());
        target = to.is_absolute() ? to.string()
                                  : (std::filesystem::path(target).parent_path() / to).string();
    }
}

namespace {

// The registered temporaries: fixed slots, so that the signal handler reads no heap memory.
// state: 0 free, 1 being filled or emptied, 2 holding a path the handler may remove.
struct TemporarySlot {
    std::atomic<int> state{0};
    char path[4096];
};
TemporarySlot g_temporaries[64];

extern "C" void remove_temporaries_and_die(int sig) {
    for (TemporarySlot& t : g_temporaries)
        if (t.state.load() == 2) ::unlink(t.path);
    // SA_RESETHAND made the action the default again: the signal, blocked while this handler
    // runs, ends the process as soon as it returns, with the status the shell expects.
    ::raise(sig);
}

}  // namespace

void register_temporary(const std::string& path) {
    if (path.size() >= sizeof(TemporarySlot::path)) return;  // left to remove_stale_temporaries
    for (TemporarySlot& t : g_temporaries) {
        int free_slot = 0;
        if (!t.state.compare_exchange_strong(free_slot, 1)) continue;
        std::memcpy(t.path, path.c_str(), path.size() + 1);
        t.state.store(2);
        return;
    }
}

void unregister_temporary(const std::string& path) {
    for (TemporarySlot& t : g_temporaries) {
        int held = 2;
        if (t.state.load() != 2 || path != t.path || !t.state.compare_exchange_strong(held, 1))
            continue;
        t.state.store(0);
        return;
    }
}

void install_temporary_cleanup() {
    for (const int sig : {SIGINT, SIGTERM, SIGHUP}) {
        struct sigaction current {};
        if (::sigaction(sig, nullptr, &current) != 0 || current.sa_handler == SIG_IGN) continue;
        struct sigaction action {};
        action.sa_handler = remove_temporaries_and_die;
        sigemptyset(&action.sa_mask);
        action.sa_flags = SA_RESETHAND;
        ::sigaction(sig, &action, nullptr);
    }
}

void write_file_atomic(const std::string& path, std::string_view contents) {
    AtomicFile f(path);
    f.write(contents);
    f.commit();
}

std::unique_ptr<AtomicFile> staged_file(const std::string& path, std::string_view contents) {
    auto f = std::make_unique<AtomicFile>(path);
    f->write(contents);
    f->sync();
    return f;
}

void commit_together(const std::vector<std::unique_ptr<AtomicFile>>& files) {
    for (const auto& f : files) f->sync();  // staged ones: a flush of nothing
    const DeferredStopSignals all_or_none;
    for (const auto& f : files) f->commit();
}

std::string read_file(const std::string& path) {
    // An ifstream opens a directory and reads nothing: the caller would report an empty or
    // invalid file ("not valid JSON", "the vocabulary is empty") instead of what is wrong.
    // A device (/dev/zero, /dev/urandom) would be read until memory runs out.
    struct stat st {};
    if (::stat(path.c_str(), &st) == 0 && (S_ISDIR(st.st_mode) || S_ISCHR(st.st_mode) || S_ISBLK(st.st_mode)))
        fail("{}: is {}, expected a file", path, file_type_name(st.st_mode));
    // A pipe is read (a shell's <(...)), but never waited on: a FIFO that no process writes would
    // block a plain open forever. Opened non-blocking, then read blocking: with no writer a read
    // is end-of-file at once (POSIX), with one it ends when the writer closes.
    const int fd = ::open(path.c_str(), O_RDONLY | O_NONBLOCK | O_CLOEXEC);
    if (fd < 0) fail("{}: cannot open file: {}", path, std::strerror(errno));
    const bool fifo = ::fstat(fd, &st) == 0 && S_ISFIFO(st.st_mode);
    if (const int flags = ::fcntl(fd, F_GETFL); flags >= 0) ::fcntl(fd, F_SETFL, flags & ~O_NONBLOCK);
    std::string out;
    char buf[1 << 16];
    for (;;) {
        const ssize_t n = ::read(fd, buf, sizeof buf);
        if (n > 0) {
            out.append(buf, static_cast<size_t>(n));
        } else if (n == 0) {
            break;
        } else if (errno != EINTR) {
            const int err = errno;
            ::close(fd);
            fail("{}: read failed: {}", path, std::strerror(err));
        }
    }
    ::close(fd);
    if (fifo && out.empty()) fail("{}: is a FIFO (named pipe) with nothing to read: no process writes it", path);
    return out;
}

void check_not_directory(const std::string& path, const std::string& flag, const std::string& what) {
    struct stat st {};
    if (!path.empty() && ::stat(path.c_str(), &st) == 0 && S_ISDIR(st.st_mode))
        fail("{}={}: is a directory, expected {}", flag, path, what);
}

void check_input_file(const std::string& path, const std::string& flag, const std::string& what) {
    check_not_directory(path, flag, what);
    struct stat st {};
    if (!path.empty() && ::stat(path.c_str(), &st) != 0)
        fail("{}={}: {}, expected {}", flag, path, std::strerror(errno), what);
}

const char* file_type_name(unsigned mode) {
    switch (mode & S_IFMT) {
        case S_IFREG: return "a regular file";
        case S_IFDIR: return "a directory";
        case S_IFIFO: return "a FIFO (named pipe)";
        case S_IFCHR: return "a character device";
        case S_IFBLK: return "a block device";
        case S_IFSOCK: return "a socket";
        case S_IFLNK: return "a symbolic link";
        default: return "not a regular file";
    }
}

int open_regular_file(const std::string& path, std::string* error) {
    // stat first, so that a device is never opened (opening one can act: a tape rewinds); the
    // fstat after the non-blocking open covers a file swapped in between.
    struct stat st {};
    if (::stat(path.c_str(), &st) == 0 && !S_ISREG(st.st_mode)) {
        *error = fmt::format("expected a regular file, found {}", file_type_name(st.st_mode));
        errno = 0;
        return -1;
    }
    const int fd = ::open(path.c_str(), O_RDONLY | O_NONBLOCK | O_CLOEXEC);
    if (fd < 0) {
        const int err = errno;
        *error = fmt::format("cannot open: {}", std::strerror(err));
        errno = err;
        return -1;
    }
    if (::fstat(fd, &st) != 0) {
        const int err = errno;
        ::close(fd);
        *error = fmt::format("cannot stat: {}", std::strerror(err));
        errno = err;
        return -1;
    }
    if (!S_ISREG(st.st_mode)) {
        ::close(fd);
        *error = fmt::format("expected a regular file, found {}", file_type_name(st.st_mode));
        errno = 0;
        return -1;
    }
    const int flags = ::fcntl(fd, F_GETFL);
    if (flags >= 0) ::fcntl(fd, F_SETFL, flags & ~O_NONBLOCK);
    return fd;
}

DirectoryLock::DirectoryLock(const std::string& dir, const std::string& flag) {
    const int fd = ::open(dir.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    if (fd < 0 || ::flock(fd, LOCK_EX | LOCK_NB) == 0) {
        fd_ = fd;
        return;
    }
    const int err = errno;
    ::close(fd);
    if (err == EWOULDBLOCK)
        fail("{}={}: another bertbench run is using this directory now (expected one run per directory; "
             "hint: wait for it to end, or use another {})", flag, dir, flag);
}

DirectoryLock::~DirectoryLock() {
    if (fd_ >= 0) ::close(fd_);
}

DirectoryLock& DirectoryLock::operator=(DirectoryLock&& o) noexcept {
    if (this != &o) {
        if (fd_ >= 0) ::close(fd_);
        fd_ = std::exchange(o.fd_, -1);
    }
    return *this;
}

FileBytes FileBytes::map(const std::string& path, const char* what) {
    std::string why;
    const int fd = open_regular_file(path, &why);  // a FIFO is an error, not a wait
    if (fd < 0) fail("{}: {}: {}", path, what, why);
    struct stat st {};
    if (::fstat(fd, &st) != 0) {
        const int err = errno;
        ::close(fd);
        fail("{}: cannot stat: {}", path, std::strerror(err));
    }
    FileBytes f;
    f.size_ = static_cast<size_t>(st.st_size);
    if (f.size_ > 0) {
        void* m = ::mmap(nullptr, f.size_, PROT_READ, MAP_PRIVATE, fd, 0);
        if (m == MAP_FAILED) {
            const int err = errno;
            ::close(fd);
            fail("{}: cannot map {} bytes: {}", path, f.size_, std::strerror(err));
        }
        f.map_ = m;
        f.data_ = static_cast<const std::byte*>(m);
    }
    ::close(fd);
    return f;
}

FileBytes FileBytes::image(std::string bytes) {
    FileBytes f;
    f.image_ = std::make_unique<std::string>(std::move(bytes));
    f.data_ = reinterpret_cast<const std::byte*>(f.image_->data());
    f.size_ = f.image_->size();
    return f;
}

FileBytes::~FileBytes() {
    if (map_ != nullptr) ::munmap(map_, size_);
}

FileBytes& FileBytes::operator=(FileBytes&& o) noexcept {
    if (this == &o) return *this;
    if (map_ != nullptr) ::munmap(map_, size_);
    map_ = std::exchange(o.map_, nullptr);
    image_ = std::move(o.image_);
    data_ = std::exchange(o.data_, nullptr);
    size_ = std::exchange(o.size_, 0);
    return *this;
}

bool is_own_temporary_or_sidecar(const std::string& filename) {
    if (filename.ends_with(".meta.json")) return true;
    const size_t at = filename.rfind(".tmp.");
    if (at == std::string::npos || at + 5 == filename.size()) return false;
    return filename.find_first_not_of("0123456789", at + 5) == std::string::npos;
}

namespace {

namespace stdfs = std::filesystem;

// The characters that make a pattern a glob for TensorFlow (and fnmatch's escape).
constexpr const char* kWildcards = "*?[\\";

// TensorFlow's io::Dirname and io::JoinPath.
std::string tf_dirname(const std::string& path) {
    const size_t slash = path.rfind('/');
    if (slash == std::string::npos) return "";
    return slash == 0 ? "/" : path.substr(0, slash);
}
std::string tf_join(const std::string& dir, const std::string& name) {
    return dir.empty() ? name : dir.back() == '/' ? dir + name : dir + "/" + name;
}

// tf.gfile.Glob (GetMatchingPaths in TensorFlow's file_system_helper.cc): a pattern without
// wildcards is itself if it exists; otherwise, from the deepest directory of the pattern without
// wildcards (".", joined in front, when there is none), level by level, every entry of each
// directory in the directory's order (readdir: not sorted) that fnmatch(FNM_PATHNAME) matches
// against the pattern's prefix of that depth (so '*' matches a leading dot).
std::vector<std::string> tf_matching_paths(const std::string& pattern) {
    const size_t wildcard = pattern.find_first_of(kWildcards);
    std::error_code ec;
    if (wildcard == std::string::npos)
        return stdfs::exists(pattern, ec) ? std::vector<std::string>{pattern} : std::vector<std::string>{};
    std::string d = tf_dirname(pattern.substr(0, wildcard)).empty() ? tf_join(".", pattern) : pattern;
    if (d.back() == '/') d = tf_dirname(d);
    std::vector<std::string> levels;  // the pattern's prefixes, the root first
    while (!d.empty()) {
        levels.push_back(d);
        const std::string up = tf_dirname(d);
        if (up == d) break;
        d = up;
    }
    std::reverse(levels.begin(), levels.end());
    size_t first = 0;
    while (first < levels.size() && levels[first].find_first_of(kWildcards) == std::string::npos) ++first;
    std::vector<std::string> out;
    std::vector<std::pair<std::string, size_t>> queue{{levels[first - 1], first - 1}}, next;
    while (!queue.empty()) {
        next.clear();
        for (const auto& [parent, depth] : queue) {
            const size_t level = depth + 1;
            // the directory's entries in its own order (readdir); none if it cannot be read
            for (auto it = stdfs::directory_iterator(parent, ec); !ec && it != stdfs::directory_iterator(); it.increment(ec)) {
                const std::string path = tf_join(parent, it->path().filename().string());
                if (::fnmatch(levels[level].c_str(), path.c_str(), FNM_PATHNAME) != 0) continue;
                if (level + 1 == levels.size())
                    out.push_back(path);
                else if (std::error_code dir_ec; stdfs::is_directory(path, dir_ec))
                    next.emplace_back(path, level);
            }
            ec.clear();
        }
        std::swap(queue, next);
    }
    return out;
}

}  // namespace

std::vector<std::string> expand_globs(const std::string& list, const std::string& flag, GlobOrder order) {
    std::vector<std::string> out, left_out;
    for (const std::string& pattern : split_commas(list)) {
        std::vector<std::string> matches = tf_matching_paths(pattern);
        if (matches.empty()) {
            // a file whose name the list's syntax took apart: say so
            std::error_code ec;
            std::string hint;
            if (list.find(',') != std::string::npos && stdfs::is_regular_file(list, ec))
                hint = fmt::format(" (hint: \"{}\" is a file, but {} is a comma list, as the references' "
                                   "is: rename the file to a name without a comma)", list, flag);
            else if (pattern.find_first_of(kWildcards) != std::string::npos && stdfs::exists(pattern, ec))
                hint = fmt::format(" (hint: that is a file, but its * ? [ \\ are wildcards here, as in "
                                   "tf.gfile.Glob: \"{}\" names it)", list_item_for_file(pattern, flag));
            fail("{}: \"{}\" matches no file{}", flag, pattern, hint);
        }
        if (order == GlobOrder::sorted) std::sort(matches.begin(), matches.end());
        const bool wildcard = pattern.find_first_of("*?[") != std::string::npos;
        size_t kept = 0;
        for (const std::string& path : matches) {
            if (wildcard &&
                is_own_temporary_or_sidecar(std::filesystem::path(path).filename().string())) {
                left_out.push_back(path);
                continue;
            }
            out.push_back(path);
            ++kept;
        }
        if (kept == 0)
            fail("{}: \"{}\" matches only bertbench's own temporary or sidecar files (*.tmp.<pid>, "
                 "*.meta.json), which are never read as input", flag, pattern);
    }
    if (!left_out.empty()) {
        std::string names;
        for (const auto& p : left_out) names += (names.empty() ? "" : ", ") + p;
        log::info("{}: not reading {} of bertbench's own temporary/sidecar files the glob matched: "
                  "{}", flag, left_out.size(), names);
    }
    if (out.empty()) fail("{}: no input files given", flag);
    return out;
}

std::string list_item_for_file(const std::string& path, const std::string& flag) {
    if (path.find(',') != std::string::npos)
        fail("{}: {}: a name holding a comma, expected none (bertbench's file lists are split at "
             "commas, as the references' --input_file is; hint: rename it)", flag, path);
    if (const size_t bad = json_safe::invalid_utf8_at(path); bad != std::string::npos)
        fail("{}: {}: byte {} of the name (0x{:02x}) is not UTF-8, expected UTF-8 text, which the run's "
             "JSON files can record (hint: rename it)", flag, json_safe::printable(path), bad,
             static_cast<unsigned char>(path[bad]));
    std::string out;
    for (const char c : path) {
        if (std::strchr(kWildcards, c) != nullptr) out += '\\';
        out += c;
    }
    return out;
}

std::vector<std::string> paths_of_list(const std::string& list) {
    std::vector<std::string> out{list};
    for (const std::string& item : split_commas(list)) {
        if (item.find_first_of(kWildcards) == std::string::npos) {
            out.push_back(item);
            continue;
        }
        glob_t g{};
        if (::glob(item.c_str(), 0, nullptr, &g) == 0)
            for (size_t i = 0; i < g.gl_pathc; ++i) out.emplace_back(g.gl_pathv[i]);
        ::globfree(&g);
    }
    return out;
}

namespace {
constexpr size_t kTemporaryStemMax = 255 - 15;  // NAME_MAX less ".tmp." and a pid's 10 digits
// A name too long for the suffix: cut, and the whole name's hash appended (two long names with
// one beginning get two temporaries)
std::string temporary_stem(const std::string& name) {
    if (name.size() <= kTemporaryStemMax) return name;
    return name.substr(0, kTemporaryStemMax - 17) + fmt::format("-{:016x}", std::hash<std::string>{}(name));
}
}  // namespace

std::string temporary_path(const std::string& target) {
    const std::filesystem::path p(target);
    return (p.parent_path() / (temporary_stem(p.filename().string()) + ".tmp." + std::to_string(getpid())))
        .string();
}

int remove_stale_temporaries(const std::string& dir, const std::string& output_name) {
    return output_name.empty() ? remove_stale_temporaries(dir, std::vector<std::string>{})
                               : remove_stale_temporaries(dir, std::vector<std::string>{output_name});
}

int remove_stale_temporaries(const std::string& dir, const std::vector<std::string>& output_names) {
    namespace fs = std::filesystem;
    std::set<std::string> stems;  // empty: every temporary's
    for (const std::string& name : output_names) stems.insert(temporary_stem(name));
    std::error_code ec;
    int removed = 0;
    for (const auto& e : fs::directory_iterator(dir.empty() ? "." : dir, ec)) {
        const std::string name = e.path().filename().string();
        const size_t at = name.rfind(".tmp.");
        if (at == std::string::npos || at + 5 == name.size() ||
            name.find_first_not_of("0123456789", at + 5) != std::string::npos)
            continue;
        if (!stems.empty() && !stems.count(name.substr(0, at))) continue;
        const std::string digits = name.substr(at + 5);
        if (digits.size() > 9) continue;  // not a pid we wrote
        const pid_t pid = static_cast<pid_t>(std::stol(digits));
        if (pid <= 0 || pid == getpid()) continue;
        if (::kill(pid, 0) == 0 || errno == EPERM) continue;  // that process still runs
        std::error_code rm;
        if (!e.is_regular_file(rm) || !fs::remove(e.path(), rm)) continue;
        log::info("removed {}: a temporary file of process {}, which no longer runs",
                  e.path().string(), pid);
        ++removed;
    }
    return removed;
}

CreatedDirCleanup::CreatedDirCleanup(const std::string& dir)
    : uncaught_(std::uncaught_exceptions()) {
    namespace fs = std::filesystem;
    if (dir.empty()) return;
    std::error_code ec;
    for (fs::path p = fs::absolute(dir, ec).lexically_normal(); !p.empty() && p != p.root_path();
         p = p.parent_path()) {
        if (p.filename().empty()) continue;  // a trailing separator
        if (fs::exists(p, ec)) break;
        missing_.push_back(p.string());
    }
}

CreatedDirCleanup::~CreatedDirCleanup() {
    if (std::uncaught_exceptions() <= uncaught_) return;  // no failure
    for (const std::string& d : missing_) {
        struct stat st {};
        if (::lstat(d.c_str(), &st) != 0 || !S_ISDIR(st.st_mode)) continue;
        if (::rmdir(d.c_str()) != 0) break;  // not empty (or not ours to remove): keep the rest
    }
}

DeferredStopSignals::DeferredStopSignals() {
    sigset_t set;
    sigemptyset(&set);
    for (const int sig : {SIGINT, SIGTERM, SIGHUP}) sigaddset(&set, sig);
    pthread_sigmask(SIG_BLOCK, &set, &old_);
}
DeferredStopSignals::~DeferredStopSignals() { pthread_sigmask(SIG_SETMASK, &old_, nullptr); }

}  // namespace bertbench
