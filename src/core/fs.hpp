// File helpers. Every output file is written atomically: to "<final>.tmp.<pid>", fsync'd, then
// renamed, so a crash or a full disk never leaves a half-written file under its final name. An
// output that is a symbolic link is written where the link points (the link stays); one that is a
// FIFO or a character device (/dev/null, /dev/stdout, a shell's >(...)) is written straight into
// it, as the reference scripts' open() does; a block device or a socket is refused. /dev/stdout,
// /dev/stderr and /dev/fd/N are written through that open descriptor, after what the process
// printed there before, whatever it is open on (a redirection's file is not truncated or replaced).
#pragma once

#include <signal.h>

#include <cstddef>
#include <cstdio>
#include <map>
#include <memory>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

namespace bertbench {

// An output file written under a temporary name until commit(). Destroying an uncommitted
// AtomicFile removes the temporary, and so does SIGINT, SIGTERM or SIGHUP (below). write() throws
// Error (naming the final path) on failure.
class AtomicFile {
public:
    explicit AtomicFile(std::string path);
    ~AtomicFile();
    AtomicFile(const AtomicFile&) = delete;
    AtomicFile& operator=(const AtomicFile&) = delete;

    void write(const void* data, size_t size);
    void write(std::string_view s) { write(s.data(), s.size()); }
    void commit();  // sync(), rename to the final path
    // Flush and fsync (nothing for a stream): a writer of several files syncs them all before the
    // first commit(), so that a full disk or a slow sync fails or stops before any is renamed.
    void sync();
    const std::string& path() const { return path_; }
    // The temporary's name (empty for a stream), for a writer whose library writes the file by
    // name (libhdf5): it rewrites the temporary in place, then commit() fsyncs it through this
    // object's descriptor (fsync covers the file, whichever descriptor wrote it) and renames it.
    const std::string& temporary() const { return tmp_; }

private:
    std::string path_, tmp_, target_;  // target_: path_ with a final symbolic link followed
    std::FILE* file_ = nullptr;
    bool stream_ = false;  // a FIFO, a character device or an open descriptor, written directly
    bool synced_ = false;  // no write since the last sync()
};

// Where the output `path` goes and how (the rules above): `*stream` true for a FIFO, a character
// device or an open descriptor (/dev/stdout, /dev/fd/N), written directly; otherwise the regular
// file to create or replace, `path` with a final symbolic link followed to the end of its chain (a
// dangling link gives the file it names). Error naming `path` for a directory, a block device, a
// socket, a link loop or a name longer than its directory allows (NAME_MAX).
std::string output_target(const std::string& path, bool* stream);
// NAME_MAX of directory `dir`, or of its nearest existing parent when it is not made yet (255
// where pathconf cannot tell).
size_t name_max(const std::string& dir);
// The open descriptor `path` names (/dev/stdout 1, /dev/stderr 2, /dev/fd/N and /proc/self/fd/N
// N), or -1 for any other path or a descriptor that is not open.
int named_descriptor(const std::string& path);

// Temporaries removed when the process is stopped by SIGINT, SIGTERM or SIGHUP: AtomicFile and
// the HDF5 writer register theirs while they write. install_temporary_cleanup() sets the handler
// for those of the three signals not inherited as ignored; it removes every registered temporary
// and then dies of the signal as before. Only commands that run no GEMM call it (prepare,
// pick-eval, convert): a handler must not run on a thread inside oneDNN's sgemm (docs/engine.md,
// "Signals"); pretrain takes its signals with a watcher thread and finishes or removes its own.
void register_temporary(const std::string& path);
void unregister_temporary(const std::string& path);
void install_temporary_cleanup();

void write_file_atomic(const std::string& path, std::string_view contents);
// Outputs published as one (a checkpoint's files): each written and synced under its temporary
// name first (staged_file, or a writer's stage()), then commit_together renames them with the
// stop signals deferred, so that a signal, or a full disk before it, leaves all of them or none.
std::unique_ptr<AtomicFile> staged_file(const std::string& path, std::string_view contents);
void commit_together(const std::vector<std::unique_ptr<AtomicFile>>& files);
std::string read_file(const std::string& path);  // whole file; Error naming the path on failure

// Opens `path` read-only for a reader that needs a regular file (it maps it, seeks in it or takes
// its size). Never waits: the open is non-blocking, so a FIFO without a writer cannot hang the
// reader, and O_NONBLOCK is cleared once the file is known to be regular. Returns the descriptor
// (close-on-exec), or -1 with `*error` set to the rest of a message after "<path>: ":
// "cannot open: <strerror>" (errno kept for the caller) or "expected a regular file, found a FIFO
// (named pipe)" (errno 0), before a byte is read.
int open_regular_file(const std::string& path, std::string* error);
// A file's bytes for a reader: the regular file mapped read-only (open_regular_file's checks), or an
// in-memory image (tests, fuzzing). Move-only; the bytes stay where they are when it moves, so
// pointers into them survive a move of their owner.
class FileBytes {
  public:
    FileBytes() = default;
    // Errors name the path and `what` ("safetensors file").
    static FileBytes map(const std::string& path, const char* what);
    static FileBytes image(std::string bytes);
    ~FileBytes();
    FileBytes(FileBytes&& o) noexcept { *this = std::move(o); }
    FileBytes& operator=(FileBytes&& o) noexcept;

    const std::byte* data() const { return data_; }  // null for an empty file
    size_t size() const { return size_; }

  private:
    void* map_ = nullptr;
    std::unique_ptr<std::string> image_;
    const std::byte* data_ = nullptr;
    size_t size_ = 0;
};
// One run in a directory at a time: an advisory lock on `dir` itself (no file of its own), held
// until this object goes or the process ends, however it ends; none where the file system cannot
// lock (some network mounts: the run goes on). Error naming `flag` when another process holds it.
class DirectoryLock {
  public:
    DirectoryLock() = default;
    DirectoryLock(const std::string& dir, const std::string& flag);
    ~DirectoryLock();
    DirectoryLock(DirectoryLock&& o) noexcept : fd_(std::exchange(o.fd_, -1)) {}
    DirectoryLock& operator=(DirectoryLock&& o) noexcept;

  private:
    int fd_ = -1;
};
// What a st_mode is, for messages: "a regular file", "a directory", "a FIFO (named pipe)", ...
const char* file_type_name(unsigned mode);

// Error "<flag>=<path>: is a directory, expected <what>" when `path` is a directory (for a flag
// that names one input file, checked before any work); anything else passes (the reader reports it).
void check_not_directory(const std::string& path, const std::string& flag, const std::string& what);
// An input file the command reads later, checked before the work that precedes the read: a path
// that stat() fails on is "{flag}={path}: <its reason>, expected {what}", a directory as
// check_not_directory says. An empty path passes.
void check_input_file(const std::string& path, const std::string& flag, const std::string& what);

// Expands a comma-separated list of paths and globs as tf.gfile.Glob matches them (the reference
// scripts' glob: fnmatch with FNM_PATHNAME, '*' matching a leading dot too; a relative pattern
// with no directory before its first wildcard yields "./name"); each item must match at least
// one file (the reference skips it silently). Result keeps list order, each glob's matches sorted
// or, GlobOrder::directory, in tf.gfile.Glob's own order: each directory's entries as readdir
// gives them (create_pretraining_data.py reads its inputs so; the same directory on the same file
// system gives the same order). Error names `flag` when nothing matches. A wildcard never matches
// bertbench's own temporaries ("<name>.tmp.<pid>") or shard sidecars ("<name>.meta.json"): they
// are left out and named in one log line.
enum class GlobOrder { sorted, directory };
std::vector<std::string> expand_globs(const std::string& list, const std::string& flag,
                                      GlobOrder order = GlobOrder::sorted);
// A listed file (NVIDIA's --input_dir) as an item of such a list that matches it alone: its
// wildcards (* ? [ \) escaped for fnmatch. Error naming `flag` for a name holding a comma, which
// no item of the list can carry, or bytes that are not UTF-8 (the run's JSON records list them).
std::string list_item_for_file(const std::string& path, const std::string& flag);

// Whether both paths exist and are one file (device and inode: another spelling, a hard link or
// a symlink counts).
bool same_file(const std::string& a, const std::string& b);
// Error, before anything is written, when `output` is the same file as one of `inputs`: compared
// by device and inode, so another spelling, a hard link or a symlink is caught. An output that
// does not exist yet matches nothing.
void check_output_not_input(const std::string& output, const std::string& output_flag,
                            const std::vector<std::string>& inputs, const std::string& input_flag);

// The files a comma list of paths and globs may name, for check_output_not_input before the work:
// each item as is, a wildcard item as glob(3) expands it, and the whole text as one path too (a
// flag naming one file reads "c,fg.json" whole); nothing has to exist (the readers report what is
// missing).
std::vector<std::string> paths_of_list(const std::string& list);

// Creates the directory `dir` a command writes in, and its parents. Error naming `flag` for a
// symbolic link that leads nowhere (a missing target or a loop), a file of that name, or a
// directory that cannot be made.
void make_output_dir(const std::string& dir, const std::string& flag);

// Before the work, for a file written at the end (a report, a plot): error naming `flag` when
// `path` is a directory, or its directory (that of the file a final symbolic link leads to) does
// not exist, is not one, or takes no new file (one is made and removed there to know).
// `made_parents`: the writer creates missing directories, so the nearest existing one is checked.
// A stream (output_target: /dev/null, /dev/stdout, a FIFO) passes.
void check_output_file_writable(const std::string& path, const std::string& flag, bool made_parents = false);

// Error when two of a command's outputs (flag, path) are the same file ("a" and "./a" alike,
// existing or not): one would overwrite the other, or both write through one temporary.
void check_outputs_distinct(const std::vector<std::pair<std::string, std::string>>& outputs);

// Error when one of the files a run writes in its directory `dir` (named by `dir_flag`), `names`,
// is a directory there: checked before the run's work, not when that file is written at its end.
void check_run_outputs_not_directories(const std::string& dir, const std::string& dir_flag,
                                       const std::vector<std::string>& names);

// Error when `path` (an output named by `flag`) would be one of the files a run writes in its
// directory `dir` (named by `dir_flag`): a name in `names`, or one starting with a prefix in
// `prefixes` (e.g. "model.ckpt-"), or `dir` itself or a directory above it (made before the
// file is written, so the write would fail at the end). Another name in `dir` is fine.
void check_output_not_in_run(const std::string& path, const std::string& flag, const std::string& dir,
                             const std::string& dir_flag, const std::vector<std::string>& names,
                             const std::vector<std::string>& prefixes = {});

// Removes the temporaries "*.tmp.<pid>" in `dir` whose process <pid> no longer runs (an
// AtomicFile of a killed run), logging each; only those of the output file named `output_name`
// when one is given. Returns how many.
int remove_stale_temporaries(const std::string& dir, const std::string& output_name = "");
// The same for the temporaries of the output files named `output_names` (file names in `dir`)
// only: a directory other runs also write into (another host's process ids are not this one's).
int remove_stale_temporaries(const std::string& dir, const std::vector<std::string>& output_names);
// The temporary an output file is written under before its rename: "<name>.tmp.<pid>" beside it,
// the name cut to leave room for the suffix where it is within 15 bytes of NAME_MAX (255).
std::string temporary_path(const std::string& target);
// True for a name bertbench writes beside its outputs: "*.tmp.<digits>" or "*.meta.json".
bool is_own_temporary_or_sidecar(const std::string& filename);

// A failed start leaves no empty output directory behind: constructed before a command may create
// `dir` (and its missing parents), it removes on destruction those of them that did not exist
// then and are empty now, when an exception is unwinding the stack (the command failed). A
// directory holding anything, or one that existed before, is left alone.
class CreatedDirCleanup {
public:
    explicit CreatedDirCleanup(const std::string& dir);
    ~CreatedDirCleanup();
    CreatedDirCleanup(const CreatedDirCleanup&) = delete;
    CreatedDirCleanup& operator=(const CreatedDirCleanup&) = delete;

private:
    std::vector<std::string> missing_;  // `dir` and its missing parents, innermost first
    int uncaught_ = 0;
};

// SIGINT, SIGTERM and SIGHUP held on the calling thread while it lives, delivered when it ends:
// around the renames that publish several outputs, so that a stop signal leaves all of them or
// none, never the first few (install_temporary_cleanup's handler then runs, with nothing left to
// remove). The fsyncs before the renames may take a while on a slow disk; a signal waits for them.
class DeferredStopSignals {
public:
    DeferredStopSignals();
    ~DeferredStopSignals();
    DeferredStopSignals(const DeferredStopSignals&) = delete;
    DeferredStopSignals& operator=(const DeferredStopSignals&) = delete;

private:
    sigset_t old_{};  // the thread's mask before
};

}  // namespace bertbench
