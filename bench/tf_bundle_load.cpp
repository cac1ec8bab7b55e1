// Times loading a TensorFlow checkpoint (tensor bundle) against a plain sequential read of the same
// bytes. Writes a synthetic bundle of a preset's ParamTable with pretraining heads (large: 335M
// floats, ~1.34 GB) to DIR with io::TfBundleWriter, then times, interleaved and best of `runs`:
//   load: model::load_init_checkpoint(DIR/model.ckpt-1, ...) into a ParamTable buffer, exactly the
//         --init_checkpoint path of pretrain/eval (index parse and validation, every tensor's
//         masked CRC-32C checked, data copied into place);
//   read: read(2) of PREFIX.index and PREFIX.data-00000-of-00001 into one buffer (the disk /
//         page-cache reference; both are warm after the write unless the cache is dropped first).
// Prints one JSON object: bytes, best seconds and GB/s (1e9 bytes/s) of each, load/read ratio, and
// whether the loaded buffer equals the written one. Measures; asserts nothing. The files are removed
// at the end unless --keep. Usage: tf_bundle_load DIR [model=large] [runs=3] [--keep]
#include <fcntl.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <string>
#include <vector>

#include "core/aligned.hpp"
#include "core/error.hpp"
#include "io/tf_bundle.hpp"
#include "model/checkpoint.hpp"

using namespace bertbench;
namespace fs = std::filesystem;

namespace {

double seconds_since(std::chrono::steady_clock::time_point t0) {
    return std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
}

// read(2) of `path` into buf (sized to the file), in 64 MiB calls; returns the bytes read.
size_t read_whole(const std::string& path, std::vector<char>& buf, size_t at) {
    const int fd = ::open(path.c_str(), O_RDONLY);
    if (fd < 0) fail("{}: cannot open: {}", path, std::strerror(errno));
    size_t done = 0;
    for (;;) {
        const size_t want = std::min<size_t>(size_t{64} << 20, buf.size() - at - done);
        if (want == 0) break;
        const ssize_t n = ::read(fd, buf.data() + at + done, want);
        if (n < 0) {
            ::close(fd);
            fail("{}: read failed: {}", path, std::strerror(errno));
        }
        if (n == 0) break;
        done += static_cast<size_t>(n);
    }
    ::close(fd);
    return done;
}

}  // namespace

int main(int argc, char** argv) try {
    std::vector<std::string> args;
    bool keep = false;
    for (int i = 1; i < argc; ++i) {
        if (std::string(argv[i]) == "--keep") keep = true;
        else args.emplace_back(argv[i]);
    }
    if (args.empty()) {
        std::fprintf(stderr, "usage: tf_bundle_load DIR [model=large] [runs=3] [--keep]\n");
        return 2;
    }
    const std::string dir = args[0];
    const std::string preset = args.size() > 1 ? args[1] : "large";
    const int runs = args.size() > 2 ? std::max(1, std::atoi(args[2].c_str())) : 3;
    fs::create_directories(dir);
    const std::string prefix = (fs::path(dir) / "model.ckpt-1").string();
    const std::string index = prefix + ".index", data = prefix + ".data-00000-of-00001";
    if (fs::exists(index) || fs::exists(data))
        fail("{}: expected no bundle there yet, found {} (remove it, or pick another DIR)", dir,
             fs::exists(index) ? index : data);

    // The files go at the end, on an error too, unless --keep.
    struct Cleanup {
        std::vector<std::string> files;
        bool keep;
        ~Cleanup() {
            std::error_code ec;
            if (!keep)
                for (const std::string& f : files) fs::remove(f, ec);
        }
    } cleanup{{index, data}, keep};

    const model::ParamTable table(model::BertConfig::preset(preset), model::Heads::pretraining);
    AlignedVector<float> written(table.total_floats(), 0.0f);
    // Distinct values, cheaply (the table's random initialisation of 335M floats takes longer
    // than everything timed here; CRC and copy speed do not depend on the values).
    for (size_t i = 0; i < written.size(); ++i)
        written[i] = static_cast<float>(i % 1000003) * 1e-6f - 0.5f;

    auto t0 = std::chrono::steady_clock::now();
    {
        io::TfBundleWriter w(prefix);
        for (const model::ParamInfo& p : table.entries())
            w.add(p.name, io::TfDType::float32, p.shape, written.data() + p.offset,
                  p.size * sizeof(float));
        w.finish();
    }
    const double write_s = seconds_since(t0);
    const size_t bytes = fs::file_size(index) + fs::file_size(data);

    // Destinations touched once beforehand (pretrain/eval initialise the buffer before loading).
    AlignedVector<float> loaded(table.total_floats(), 0.0f);
    std::vector<char> buf(bytes, 0);
    double best_load = 1e30, best_read = 1e30;
    for (int r = 0; r < runs; ++r) {
        t0 = std::chrono::steady_clock::now();
        size_t got = read_whole(index, buf, 0);
        got += read_whole(data, buf, got);
        best_read = std::min(best_read, seconds_since(t0));
        if (got != bytes) fail("{}: read {} bytes, expected {}", prefix, got, bytes);

        t0 = std::chrono::steady_clock::now();
        model::load_init_checkpoint(prefix, table, loaded);
        best_load = std::min(best_load, seconds_since(t0));
    }
    bool equal = true;
    for (const model::ParamInfo& p : table.entries())
        equal = equal && std::memcmp(written.data() + p.offset, loaded.data() + p.offset,
                                     p.size * sizeof(float)) == 0;

    const double gb = static_cast<double>(bytes) / 1e9;
    std::printf("{\"model\": \"%s\", \"tensors\": %zu, \"parameters\": %zu, \"bytes\": %zu, "
                "\"runs\": %d, \"write_s\": %.3f, \"load_s\": %.4f, \"load_gb_per_s\": %.3f, "
                "\"read_s\": %.4f, \"read_gb_per_s\": %.3f, \"load_over_read\": %.3f, "
                "\"bit_exact\": %s, \"cache\": \"warm (just written)\"}\n",
                preset.c_str(), table.entries().size(), table.num_parameters(), bytes, runs,
                write_s, best_load, gb / best_load, best_read, gb / best_read,
                (gb / best_load) / (gb / best_read), equal ? "true" : "false");
    return 0;
} catch (const std::exception& e) {
    std::fprintf(stderr, "tf_bundle_load: error: %s\n", e.what());
    return 1;
}
