// dist::Comm: the one-process implementation, the MPI one (OpenMPI's C API), and start-up.
// Without mpirun nothing here calls MPI (not even MPI_Initialized): bertbench stays one plain
// process. MPI errors are fatal for the job (MPI_ERRORS_ARE_FATAL, the default), which is what
// we want: a broken peer must stop every rank, never leave one waiting.
#include "dist/comm.hpp"

#include <mpi.h>
#include <pthread.h>
#include <signal.h>
#include <sys/stat.h>
#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <deque>
#include <filesystem>
#include <memory>
#include <mutex>
#include <random>
#include <thread>

#include <fmt/ranges.h>

#include "core/error.hpp"
#include "core/fs.hpp"
#include "core/log.hpp"

namespace bertbench::dist {

void Comm::all_reduce_mean(std::span<float> data) {
    all_reduce_sum(data);
    if (size() == 1) return;
    const float inv = 1.0f / static_cast<float>(size());
    for (float& x : data) x *= inv;
}

void Comm::all_reduce_mean(std::span<double> data) {
    all_reduce_sum(data);
    if (size() == 1) return;
    const double inv = 1.0 / size();
    for (double& x : data) x *= inv;
}

double Comm::sum(double x) {
    all_reduce_sum(std::span<double>(&x, 1));
    return x;
}

int64_t Comm::sum(int64_t x) {
    all_reduce_sum(std::span<int64_t>(&x, 1));
    return x;
}

namespace {

class SingleComm final : public Comm {
public:
    int rank() const override { return 0; }
    int size() const override { return 1; }
    bool is_mpi() const override { return false; }
    void all_reduce_sum(std::span<float>) override {}
    void all_reduce_sum(std::span<double>) override {}
    void all_reduce_sum(std::span<int64_t>) override {}
    int start_all_reduce_sum(std::span<float>) override { return 0; }
    bool test(int) override { return true; }
    void wait(int) override {}
    bool threads_allowed() const override { return true; }
    void broadcast(std::span<std::byte>, int root) override {
        if (root != 0) fail("[dist] broadcast from rank {} in a one-process job", root);
    }
    std::vector<std::string> allgather(const std::string& s) override { return {s}; }
    void barrier() override {}
    [[noreturn]] void abort(int code) override {
        std::fflush(stdout);
        std::fflush(stderr);
        std::exit(code);
    }
};

// MPI counts are int: larger buffers go in pieces of at most 2^30 elements.
constexpr size_t kMaxCount = size_t{1} << 30;

void check(int rc, const char* what) {
    if (rc == MPI_SUCCESS) return;
    char msg[MPI_MAX_ERROR_STRING];
    int len = 0;
    MPI_Error_string(rc, msg, &len);
    fail("[dist] {} failed: {}", what, std::string(msg, static_cast<size_t>(len)));
}

class MpiComm final : public Comm {
public:
    MpiComm(MPI_Comm comm, bool threads, bool owned) : comm_(comm), threads_(threads), owned_(owned) {
        MPI_Comm_rank(comm_, &rank_);
        MPI_Comm_size(comm_, &size_);
    }
    ~MpiComm() override {
        if (owned_ && !finalized()) MPI_Comm_free(&comm_);
    }
    static bool finalized() {
        int f = 0;
        MPI_Finalized(&f);
        return f != 0;
    }
    std::unique_ptr<Comm> dup() {
        MPI_Comm c;
        check(MPI_Comm_dup(comm_, &c), "MPI_Comm_dup");
        return std::make_unique<MpiComm>(c, threads_, true);
    }
    int rank() const override { return rank_; }
    int size() const override { return size_; }
    bool is_mpi() const override { return true; }

    template <typename T>
    void reduce(std::span<T> data, MPI_Datatype type) {
        for (size_t off = 0; off < data.size(); off += kMaxCount) {
            const size_t n = std::min(kMaxCount, data.size() - off);
            check(MPI_Allreduce(MPI_IN_PLACE, data.data() + off, static_cast<int>(n), type,
                                MPI_SUM, comm_),
                  "MPI_Allreduce");
        }
    }
    void all_reduce_sum(std::span<float> d) override { reduce(d, MPI_FLOAT); }
    void all_reduce_sum(std::span<double> d) override { reduce(d, MPI_DOUBLE); }
    void all_reduce_sum(std::span<int64_t> d) override { reduce(d, MPI_INT64_T); }

    int start_all_reduce_sum(std::span<float> d) override {
        if (d.size() > kMaxCount) fail("[dist] non-blocking all-reduce of {} floats: at most 2^30", d.size());
        std::lock_guard lock(mutex_);
        const int ticket = next_ticket_++;
        pending_.push_back({ticket, MPI_REQUEST_NULL});
        check(MPI_Iallreduce(MPI_IN_PLACE, d.data(), static_cast<int>(d.size()), MPI_FLOAT,
                             MPI_SUM, comm_, &pending_.back().request),
              "MPI_Iallreduce");
        return ticket;
    }
    bool test(int ticket) override {
        std::lock_guard lock(mutex_);
        Pending* p = find(ticket);
        if (p == nullptr) return true;
        int done = 0;
        check(MPI_Test(&p->request, &done, MPI_STATUS_IGNORE), "MPI_Test");
        if (done) erase(ticket);
        return done != 0;
    }
    void wait(int ticket) override {
        MPI_Request r;
        {
            std::lock_guard lock(mutex_);
            Pending* p = find(ticket);
            if (p == nullptr) return;
            r = p->request;
            erase(ticket);
        }
        check(MPI_Wait(&r, MPI_STATUS_IGNORE), "MPI_Wait");
    }
    bool threads_allowed() const override { return threads_; }

    void broadcast(std::span<std::byte> data, int root) override {
        for (size_t off = 0; off < data.size(); off += kMaxCount) {
            const size_t n = std::min(kMaxCount, data.size() - off);
            check(MPI_Bcast(data.data() + off, static_cast<int>(n), MPI_BYTE, root, comm_),
                  "MPI_Bcast");
        }
    }
    std::vector<std::string> allgather(const std::string& s) override {
        if (s.size() > kMaxCount) fail("[dist] allgather of {} bytes: at most 2^30", s.size());
        int len = static_cast<int>(s.size());
        std::vector<int> lens(static_cast<size_t>(size_)), displs(static_cast<size_t>(size_));
        check(MPI_Allgather(&len, 1, MPI_INT, lens.data(), 1, MPI_INT, comm_), "MPI_Allgather");
        size_t total = 0;
        for (int r = 0; r < size_; ++r) {
            displs[static_cast<size_t>(r)] = static_cast<int>(total);
            total += static_cast<size_t>(lens[static_cast<size_t>(r)]);
        }
        if (total > kMaxCount) fail("[dist] allgather of {} bytes in all: at most 2^30", total);
        std::string all(total, '\0');
        check(MPI_Allgatherv(s.data(), len, MPI_CHAR, all.data(), lens.data(), displs.data(),
                             MPI_CHAR, comm_),
              "MPI_Allgatherv");
        std::vector<std::string> out;
        for (int r = 0; r < size_; ++r)
            out.push_back(all.substr(static_cast<size_t>(displs[static_cast<size_t>(r)]),
                                     static_cast<size_t>(lens[static_cast<size_t>(r)])));
        return out;
    }
    void barrier() override { check(MPI_Barrier(comm_), "MPI_Barrier"); }
    [[noreturn]] void abort(int code) override {
        std::fflush(stdout);
        std::fflush(stderr);
        MPI_Abort(MPI_COMM_WORLD, code);
        std::_Exit(code);  // MPI_Abort does not return; just in case
    }

private:
    struct Pending {
        int ticket;
        MPI_Request request;
    };
    Pending* find(int ticket) {
        for (Pending& p : pending_)
            if (p.ticket == ticket) return &p;
        return nullptr;
    }
    void erase(int ticket) {
        for (auto it = pending_.begin(); it != pending_.end(); ++it)
            if (it->ticket == ticket) {
                pending_.erase(it);
                return;
            }
    }

    MPI_Comm comm_;
    int rank_ = 0, size_ = 1;
    bool threads_, owned_;
    std::mutex mutex_;
    std::deque<Pending> pending_;
    int next_ticket_ = 1;
};

SingleComm g_single;
std::unique_ptr<MpiComm> g_mpi;
bool g_finalized = false;
// fail_job()'s own communicator: its agreement can never match a collective of the job's.
MPI_Comm g_errors = MPI_COMM_NULL;

}  // namespace

Comm& world() {
    if (g_mpi && !g_finalized) return *g_mpi;
    return g_single;
}

bool launched_by_mpi() {
    return std::getenv("OMPI_COMM_WORLD_SIZE") != nullptr || std::getenv("PMIX_RANK") != nullptr;
}

void init(int* argc, char*** argv) {
    if (g_mpi || g_finalized || !launched_by_mpi()) return;
    int provided = MPI_THREAD_SINGLE;
    // MPI_Init starts helper threads (PMIx, progress). They must not receive SIGINT/SIGTERM,
    // or the default action kills the rank before pretrain's stop-signal watcher sees it: they
    // are created with both blocked; this thread's mask is restored afterwards.
    sigset_t stop, old;
    sigemptyset(&stop);
    sigaddset(&stop, SIGINT);
    sigaddset(&stop, SIGTERM);
    pthread_sigmask(SIG_BLOCK, &stop, &old);
    const int rc = MPI_Init_thread(argc, argv, MPI_THREAD_MULTIPLE, &provided);
    pthread_sigmask(SIG_SETMASK, &old, nullptr);
    if (rc != MPI_SUCCESS) {
        std::fprintf(stderr, "bertbench: error: MPI_Init_thread failed (code %d) although the "
                             "environment says mpirun started this process\n", rc);
        std::exit(1);
    }
    g_mpi = std::make_unique<MpiComm>(MPI_COMM_WORLD, provided >= MPI_THREAD_MULTIPLE, false);
    if (MPI_Comm_dup(MPI_COMM_WORLD, &g_errors) != MPI_SUCCESS) g_errors = MPI_COMM_NULL;
}

void finalize() {
    if (!g_mpi || g_finalized) return;
    g_finalized = true;
    if (g_errors != MPI_COMM_NULL) MPI_Comm_free(&g_errors);
    MPI_Finalize();
}

void fail_job(const std::string& head, const std::string& what, int code) {
    Comm& c = world();
    const auto say = [&](const std::string& line) {
        std::fprintf(stderr, "%s%s\n", head.c_str(), line.c_str());
        std::fflush(stderr);
    };
    if (c.size() == 1 || g_errors == MPI_COMM_NULL) {
        say(rank_prefix() + what);
        c.abort(code);
    }
    // Does every rank fail? A barrier of the failing ranks, given a few seconds: ranks that read
    // the same bad command line or file fail within milliseconds of each other.
    MPI_Request request;
    bool all = false;
    if (MPI_Ibarrier(g_errors, &request) == MPI_SUCCESS) {
        const auto until = std::chrono::steady_clock::now() + std::chrono::seconds(3);
        while (!all && std::chrono::steady_clock::now() < until) {
            int done = 0;
            MPI_Test(&request, &done, MPI_STATUS_IGNORE);
            all = done != 0;
            if (!all) std::this_thread::sleep_for(std::chrono::milliseconds(1));
        }
    }
    if (!all) {  // this rank alone (so far): its own line, and the job stops
        say(rank_prefix() + what);
        c.abort(code);
    }
    // Every rank failed: rank 0 prints one line, naming ranks only where their errors differ;
    // then it alone stops the job (one MPI_Abort, not one per rank).
    MpiComm errors(g_errors, false, false);
    const std::vector<std::string> all_what = errors.allgather(what);
    if (c.rank() == 0) {
        bool same = true;
        for (const std::string& w : all_what) same = same && w == all_what[0];
        if (same) say(what);
        for (size_t r = 0; !same && r < all_what.size(); ++r)
            if (r == 0 || all_what[r] != all_what[0])
                say("rank " + std::to_string(r) + ": " + all_what[r]);
        c.abort(code);
    }
    for (;;) std::this_thread::sleep_for(std::chrono::seconds(1));  // until MPI_Abort reaches us
}

std::unique_ptr<Comm> duplicate(Comm& comm) {
    if (auto* m = dynamic_cast<MpiComm*>(&comm)) return m->dup();
    return std::make_unique<SingleComm>();
}

void idle_barrier(Comm& comm) {
    if (comm.size() == 1) return;
    float x = 0;
    const int t = comm.start_all_reduce_sum(std::span<float>(&x, 1));
    while (!comm.test(t)) std::this_thread::sleep_for(std::chrono::milliseconds(1));
}

void quiet_other_ranks() {
    if (world().rank() != 0 && log::level() < log::Level::warn) log::set_level(log::Level::warn);
}

std::string rank_prefix() {
    Comm& c = world();
    return c.size() > 1 ? "rank " + std::to_string(c.rank()) + ": " : std::string();
}

void require_same_on_all_ranks(Comm& comm, const std::string& value, const std::string& what,
                               const std::string& hint) {
    if (comm.size() == 1) return;
    const std::vector<std::string> all = comm.allgather(value);
    for (size_t r = 1; r < all.size(); ++r)
        if (all[r] != all[0])
            fail("{} of rank {} differs from rank 0's ({} vs {}){}", what, r, all[r], all[0],
                 hint.empty() ? "" : " (hint: " + hint + ")");
}

namespace {

// The first key (depth first, in key order; then the keys only b has) or array index where a and b
// differ, as "<path> is <b's value> there, <a's value> on rank 0"; "" when they are equal.
std::string first_difference(const nlohmann::json& a, const nlohmann::json& b, const std::string& path) {
    if (a == b) return "";
    if (a.is_object() && b.is_object()) {
        for (const auto& [k, v] : a.items()) {
            const std::string at = path.empty() ? k : path + " " + k;
            if (!b.contains(k)) return fmt::format("{} is absent there, {} on rank 0", at, v.dump());
            if (std::string d = first_difference(v, b.at(k), at); !d.empty()) return d;
        }
        for (const auto& [k, v] : b.items())
            if (!a.contains(k))
                return fmt::format("{} is {} there, absent on rank 0", path.empty() ? k : path + " " + k, v.dump());
    }
    if (a.is_array() && b.is_array()) {  // the first index where they differ, or the extra one
        for (size_t i = 0; i < std::max(a.size(), b.size()); ++i) {
            const std::string at = fmt::format("{}[{}]", path, i);
            if (i >= a.size()) return fmt::format("{} is {} there, absent on rank 0", at, b[i].dump());
            if (i >= b.size()) return fmt::format("{} is absent there, {} on rank 0", at, a[i].dump());
            if (std::string d = first_difference(a[i], b[i], at); !d.empty()) return d;
        }
    }
    return fmt::format("{} is {} there, {} on rank 0", path.empty() ? "the value" : path, b.dump(), a.dump());
}

}  // namespace

void require_same_json_on_all_ranks(Comm& comm, const nlohmann::json& value, const std::string& what,
                                    const std::string& hint) {
    if (comm.size() == 1) return;
    // (a flag's bytes need not be UTF-8: a path's; replaced in the comparison, not thrown on)
    const std::vector<std::string> all =
        comm.allgather(value.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace));
    for (size_t r = 1; r < all.size(); ++r) {
        if (all[r] == all[0]) continue;
        const nlohmann::json a = nlohmann::json::parse(all[0]), b = nlohmann::json::parse(all[r]);
        // each top-level key that differs: a flag given on one rank changes settings derived
        // from it too, which sort before it
        std::vector<std::string> diffs;
        if (a.is_object() && b.is_object()) {
            nlohmann::json keys = a;
            keys.update(b);
            for (const auto& [k, v] : keys.items()) {
                nlohmann::json x = nlohmann::json::object(), y = nlohmann::json::object();
                if (a.contains(k)) x[k] = a.at(k);
                if (b.contains(k)) y[k] = b.at(k);
                if (std::string d = first_difference(x, y, ""); !d.empty()) diffs.push_back(std::move(d));
            }
        } else {
            diffs.push_back(first_difference(a, b, ""));
        }
        const size_t n = diffs.size();
        if (n > 4) diffs.resize(4);
        fail("rank {}'s {} differ from rank 0's: {}{}{}", r, what, fmt::join(diffs, "; "),
             n > 4 ? fmt::format(" (and {} more)", n - 4) : "", hint.empty() ? "" : " (hint: " + hint + ")");
    }
}

int local_batch(int global_batch, int ranks, const std::string& flag) {
    if (global_batch % ranks != 0)
        fail("--{}: {} is the GLOBAL batch, split over {} ranks; expected a multiple of {} (hint: "
             "--{}={} gives each rank {})",
             flag, global_batch, ranks, ranks, flag, (global_batch / ranks + 1) * ranks, global_batch / ranks + 1);
    return global_batch / ranks;
}

void require_shared_directory(Comm& comm, const std::string& dir, const std::string& flag) {
    if (comm.size() == 1) return;
    // under temporary_path's name (rank 0's pid), so that remove_stale_temporaries clears one a
    // killed job left; each rank looks for rank 0's name in its own `dir`
    std::string name = temporary_path(".bertbench-rank-check");
    std::string token;  // rank 0's, "" where it could not write it
    if (comm.is_root()) {
        const std::string path = (std::filesystem::path(dir) / name).string();
        const std::string mine = fmt::format("{:016x}{:016x}", std::random_device{}(),
                                             std::chrono::steady_clock::now().time_since_epoch().count());
        try {
            write_file_atomic(path, mine);
            token = mine;
        } catch (const Error&) {
        }
    }
    const std::vector<std::string> root = comm.allgather(name + '\n' + token);  // after rank 0 wrote it
    name = root[0].substr(0, root[0].find('\n'));
    token = root[0].substr(name.size() + 1);
    const std::string path = (std::filesystem::path(dir) / name).string();
    std::string seen;
    try {
        if (!token.empty()) seen = read_file(path);
    } catch (const Error&) {
    }
    const std::vector<std::string> all = comm.allgather(seen == token ? std::string() : "x");  // all read
    std::error_code ignored;
    if (comm.is_root() && !token.empty()) std::filesystem::remove(path, ignored);
    for (size_t r = 1; r < all.size(); ++r)
        if (!all[r].empty())
            fail("--{}={}: rank {} does not see the directory rank 0 writes to (rank 0's file {} is not in "
                 "its --{}): expected one directory for every rank (hint: a shared file system; node-local "
                 "directories would split the outputs between the hosts)",
                 flag, dir, r, name, flag);
}

uint64_t fnv1a64(const void* data, size_t bytes, uint64_t h) {
    const auto* p = static_cast<const unsigned char*>(data);
    for (size_t i = 0; i < bytes; ++i) {
        h ^= p[i];
        h *= 1099511628211ull;
    }
    return h;
}

std::map<std::string, std::string> file_fingerprints(const std::vector<std::string>& files, uintmax_t sample) {
    std::map<std::string, std::string> out;
    for (const std::string& f : files) {
        std::string why;
        const int fd = open_regular_file(f, &why);  // a FIFO is not waited on
        struct stat st {};
        if (fd < 0 || ::fstat(fd, &st) != 0) {
            out[f] = "unreadable: " + why;
            if (fd >= 0) ::close(fd);
            continue;
        }
        const auto size = static_cast<uintmax_t>(st.st_size);
        // the first `sample` bytes, and the last (or what follows the first, if less)
        std::string buf(static_cast<size_t>(std::min(size, sample)), '\0');
        ssize_t got = ::pread(fd, buf.data(), buf.size(), 0);
        uint64_t h = fnv1a64(buf.data(), static_cast<size_t>(std::max<ssize_t>(got, 0)));
        if (size > sample) {
            const uintmax_t tail = std::min(size - sample, sample);
            buf.resize(static_cast<size_t>(tail));
            got = ::pread(fd, buf.data(), buf.size(), static_cast<off_t>(size - tail));
            h = fnv1a64(buf.data(), static_cast<size_t>(std::max<ssize_t>(got, 0)), h);
        }
        ::close(fd);
        out[f] = fmt::format("{} bytes, sampled FNV-1a {:016x}", size, h);
    }
    return out;
}

}  // namespace bertbench::dist
