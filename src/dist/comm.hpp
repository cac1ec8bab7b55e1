// The processes of a data-parallel job and the collectives the trainer needs (DESIGN.md: MPI
// data-parallel, N ranks x batch b = 1 rank x N*b). Two implementations: one process (today's
// bertbench: no MPI call is ever made) and MPI (Debian's OpenMPI), chosen once by init(): MPI
// starts only when mpirun/PMIx launched us. Every collective must be called by every rank in the
// same order; a rank that fails calls abort() (MPI_Abort) so the job stops instead of hanging.
#pragma once

#include <cstddef>
#include <cstdint>
#include <map>
#include <span>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

namespace bertbench::dist {

class Comm {
public:
    virtual ~Comm() = default;
    virtual int rank() const = 0;
    virtual int size() const = 0;
    bool is_root() const { return rank() == 0; }
    // True only for the MPI implementation (even with one rank).
    virtual bool is_mpi() const = 0;

    // In-place all-reduce: every rank's buffer becomes the element-wise sum over ranks (the same
    // bits on every rank). Buffers must have the same length on every rank.
    virtual void all_reduce_sum(std::span<float> data) = 0;
    virtual void all_reduce_sum(std::span<double> data) = 0;
    virtual void all_reduce_sum(std::span<int64_t> data) = 0;
    // sum / size(); floats and doubles only.
    void all_reduce_mean(std::span<float> data);
    void all_reduce_mean(std::span<double> data);
    // Scalar helpers.
    double sum(double x);
    int64_t sum(int64_t x);

    // Non-blocking float sum for the gradient reducer: start() returns a ticket, test() makes
    // progress and says whether it finished, wait() blocks until it has. At most one thread
    // calls these at a time.
    virtual int start_all_reduce_sum(std::span<float> data) = 0;
    virtual bool test(int ticket) = 0;
    virtual void wait(int ticket) = 0;
    // Whether another thread may run collectives while the main thread also calls into MPI
    // (MPI_THREAD_MULTIPLE granted). The gradient reducer uses a thread only then.
    virtual bool threads_allowed() const = 0;

    // Root's bytes into every rank's buffer (same size everywhere).
    virtual void broadcast(std::span<std::byte> data, int root) = 0;
    // Every rank's string, indexed by rank.
    virtual std::vector<std::string> allgather(const std::string& s) = 0;
    virtual void barrier() = 0;
    // Stop every process of the job with this exit code (MPI_Abort); one process: std::exit.
    [[noreturn]] virtual void abort(int code) = 0;
};

// The job's communicator: the MPI one after init() under mpirun, else the one-process one.
Comm& world();

// Whether the environment says mpirun (or another PMIx launcher) started this process.
bool launched_by_mpi();
// Called first thing in main(): MPI_Init_thread (asking for MPI_THREAD_MULTIPLE) when
// launched_by_mpi(), otherwise nothing. Idempotent.
void init(int* argc, char*** argv);
// MPI_Finalize when init() started MPI; nothing otherwise. Idempotent.
void finalize();

// A barrier that sleeps while it waits (a non-blocking all-reduce polled every millisecond), for
// ranks that idle while another one measures: MPI's blocking barrier spins on a core.
void idle_barrier(Comm& comm);

// "rank R: " when the job has more than one rank, "" otherwise: error messages start with it.
std::string rank_prefix();

// Under mpirun rank 0 alone logs; the other ranks print warnings and errors only. Commands call
// it before parsing their flags, so that what the parse says (flags without effect) comes once.
void quiet_other_ranks();

// A rank's fatal error under mpirun, printed as `head` + the error, once: when every rank fails
// within a few seconds (the same bad flag or file), rank 0 prints one line (a "rank R: " line
// for each rank whose error differs) instead of one per rank; otherwise this rank prints its
// own, with its rank. Then the job stops with `code` (MPI_Abort, from one rank).
[[noreturn]] void fail_job(const std::string& head, const std::string& what, int code);

// Every rank passes its own value of `what` (e.g. a hash of its flags); an Error on every rank
// naming the first rank whose value differs from rank 0's. Collective.
void require_same_on_all_ranks(Comm& comm, const std::string& value, const std::string& what,
                               const std::string& hint);

// The same for a JSON object (a command's flags, a model config): the error names the first rank
// whose object differs from rank 0's and each top-level key where it does (up to 4, in key order),
// with both values ("rank 1's flags differ from rank 0's: --train_batch_size is 16 there, 8 on
// rank 0"; `what` a plural: a flag the user gave is named beside the settings derived from it); a
// key of a nested object is named after its parent's ("bert_config.json hidden_size"). Collective.
void require_same_json_on_all_ranks(Comm& comm, const nlohmann::json& value, const std::string& what,
                                    const std::string& hint);

// A rank's share of the GLOBAL batch `global_batch` (flag --`flag`) under `ranks` processes; an
// Error with the nearest multiple as a hint when it does not divide.
int local_batch(int global_batch, int ranks, const std::string& flag);

// Every rank sees the directory `dir` (flag --`flag`) that rank 0 writes to, not a directory of
// the same name of its own (node-local scratch): rank 0 writes a file with a number of this job
// into it, each rank reads it back, rank 0 removes it. An Error on every rank naming the first rank
// that does not see it. Nothing is checked where rank 0 cannot write there (its own writes fail
// later, with their own errors). Collective; `dir` exists on every rank.
void require_shared_directory(Comm& comm, const std::string& dir, const std::string& flag);

// FNV-1a 64 of bytes, for weight and flag hashes compared across ranks.
uint64_t fnv1a64(const void* data, size_t bytes, uint64_t h = 1469598103934665603ull);

// Each of `files` with its size and the FNV-1a of its first and last `sample` bytes ("N bytes,
// sampled FNV-1a <hex>", or "unreadable"), for the ranks of an mpirun job to compare what their
// input flags name on each host, and a resume what its checkpoint's run read: a copy of another
// content under the same name and size (records in another order, another shard) differs there
// without reading whole shards.
std::map<std::string, std::string> file_fingerprints(const std::vector<std::string>& files,
                                                     uintmax_t sample = 64 << 10);

}  // namespace bertbench::dist
