// Structure-aware NVIDIA HDF5 shards (fuzz/recipe.hpp), written with libhdf5 itself, so every
// file is one libhdf5 accepts: the recipe picks, per dataset, the type (the schema's or int64,
// big-endian, unsigned, float, string), the rank and extent (up to 2^40 declared rows), the layout
// (contiguous, chunked with chunks of 1 row to 2^21 rows, compact, virtual sourced from itself or
// another dataset or file, external storage), filters (deflate, shuffle, fletcher32, nbit,
// scale-offset, an unregistered plugin id), allocation and fill times, a fill value, how many rows
// are written, raw chunks written directly (garbage, or a deflate stream inflating to 20 MiB),
// and the values (mostly a valid record, else edge ids), with libhdf5's old or newest format.
// The file is written by fuzz/hdf5_gen_writer, a process of its own (libhdf5's writer is not the
// target), and read here as the pipeline does: Hdf5ShardReader in blocks (its first and last,
// every record decoded into a batch whose invariants are checked), data::PretrainReader with the
// model's vocabulary (ids checked where decoded), and hdf5_layout. Beyond a clean Error: a block holds at
// most kHdf5BlockBytes of rows (or one row).
#include <fcntl.h>
#include <poll.h>
#include <spawn.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <csignal>
#include <cstdint>
#include <filesystem>
#include <string>
#include <vector>

#include "data/pretrain_reader.hpp"
#include "fuzz_util.hpp"
#include "hdf5_gen.hpp"
#include "io/hdf5_shard.hpp"

using namespace bertbench;
namespace fs = std::filesystem;

namespace {

namespace hdf5_gen = fuzz::hdf5_gen;

// Shards are written by fuzz/hdf5_gen_writer, a process of its own (started once, again only
// after it died or took more than 1 s on one shard); an input whose writing failed is skipped.
// The readers run in the fuzzer's own process, where any fault is a finding.
class ShardWriter {
  public:
    // True when the writer wrote the shard of recipe `data` to `path`.
    bool write(const std::string& data, const std::string& path, const fs::path& dir) {
        if (pid_ < 0) start(path, dir);
        const uint32_t n = static_cast<uint32_t>(data.size());
        char ok = 0;
        pollfd p{from_, POLLIN, 0};
        int ready = -1;
        if (hdf5_gen::write_all(to_, &n, 4) && hdf5_gen::write_all(to_, data.data(), n)) {
            do ready = poll(&p, 1, 1000);
            while (ready < 0 && errno == EINTR);
        }
        if (ready == 1 && hdf5_gen::read_all(from_, &ok, 1)) return ok == 1;
        stop();  // died or hung: a fresh writer for the next input
        return false;
    }

  private:
    void start(const std::string& path, const fs::path& dir) {
        static const std::string exe =
            (fs::read_symlink("/proc/self/exe").parent_path() / "hdf5_gen_writer").string();
        int down[2], up[2];
        if (pipe2(down, O_CLOEXEC) != 0 || pipe2(up, O_CLOEXEC) != 0) std::abort();
        posix_spawn_file_actions_t fa;
        posix_spawn_file_actions_init(&fa);
        posix_spawn_file_actions_adddup2(&fa, down[0], 0);
        posix_spawn_file_actions_adddup2(&fa, up[1], 1);
        posix_spawn_file_actions_addopen(&fa, 2, "/dev/null", O_WRONLY, 0);
        const std::string d = dir.string();
        char* argv[] = {const_cast<char*>(exe.c_str()), const_cast<char*>(path.c_str()),
                        const_cast<char*>(d.c_str()), nullptr};
        if (posix_spawn(&pid_, exe.c_str(), &fa, nullptr, argv, environ) != 0) std::abort();
        posix_spawn_file_actions_destroy(&fa);
        close(down[0]), close(up[1]);
        to_ = down[1], from_ = up[0];
    }
    void stop() {
        kill(pid_, SIGKILL);
        while (waitpid(pid_, nullptr, 0) < 0 && errno == EINTR) {
        }
        close(to_), close(from_);
        pid_ = -1;
    }
    pid_t pid_ = -1;
    int to_ = -1, from_ = -1;
};

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
    static const fs::path dir = fuzz::scratch_dir();
    static ShardWriter writer;
    const std::string path = (dir / "shard.hdf5").string();
    const std::string recipe(reinterpret_cast<const char*>(data), size);
    if (!writer.write(recipe, path, dir)) return 0;
    fuzz::Recipe r(data, size);
    const hdf5_gen::Shape s = hdf5_gen::draw_shape(r);
    const int rT = s.rT, rP = s.rP;

    fuzz::expect_clean([&] {
        const io::Hdf5ShardReader reader(path, rT, rP);
        const uint64_t n = reader.records(), per_block = reader.block_rows();
        const uint64_t row_bytes = 6 * uint64_t(rT) + 8 * uint64_t(rP) + 1;  // the six datasets
        if (per_block == 0 || (per_block > 1 && per_block * row_bytes > io::kHdf5BlockBytes)) std::abort();
        model::Batch batch;
        batch.seq_offsets.push_back(0);
        io::PretrainingRecord rec;
        // The first block and the last (the records between are the same code again).
        for (uint64_t first : {uint64_t{0}, n > per_block ? (n - 1) / per_block * per_block : n}) {
            if (first >= n) continue;
            const uint64_t count = std::min(per_block, n - first);
            const io::Hdf5ShardArrays a = reader.read_rows(first, count);
            io::check_hdf5_arrays(path, a);
            for (uint64_t i = 0; i < a.records && i < 512; ++i) {
                const std::string where = path + ": record " + std::to_string(first + i);
                io::decode_hdf5_record(a, i, where, rec);
                batch = {};
                batch.seq_offsets.push_back(0);
                data::append_pretraining_record(batch, rec, where);
                fuzz::check_batch_invariants(batch);
            }
        }
    });
    fuzz::expect_clean([&] {
        data::PretrainReaderConfig c;
        c.files = {path};
        c.max_seq_length = rT;
        c.max_predictions_per_seq = rP;
        c.batch_size = 4;
        c.training = false;
        c.prefetch_batches = 1;
        c.vocab_size = 15;
        c.type_vocab_size = 2;
        data::PretrainReader reader(c);
        model::Batch b;
        for (int i = 0; i < 32 && reader.next(b); ++i) fuzz::check_batch_invariants(b);
    });
    fuzz::expect_clean([&] { (void)io::hdf5_layout(path); });
    return 0;
}
