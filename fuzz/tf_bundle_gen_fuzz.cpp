// Structure-aware TensorFlow checkpoints (fuzz/recipe.hpp): the recipe chooses a BundleHeaderProto
// (num_shards up to 2^31 - 1 or below 1, endianness, versions), which data shards exist and their
// bytes, and up to 12 entries (or up to 3000 scalars): the tiny model's TF names or others, any
// DataType value, shapes with edge dims (2^31, 2^62, negative), shard ids, offsets and sizes that
// agree with the shard or not, slices (a partitioned variable). The index is a real SSTable
// (io::build_sstable, small blocks or TF's default) and each CRC-32C is recomputed over the bytes
// the entry names, so the readers get past the checksums to the values. The files are written as
// PREFIX.index / PREFIX.data-SSSSS-of-NNNNN and read as the loaders do: TfBundleReader, every
// tensor (raw, fp32, int64), import_tf_checkpoint into the tiny model, convert_checkpoint to one
// of safetensors / tf / hf / pt. What must hold beyond a clean Error: the shards used are at most
// one per entry, and convert writes no more than a small multiple of the bytes it was given.
#include <algorithm>
#include <cstdint>
#include <cstdio>
#include <filesystem>
#include <string>
#include <vector>

#include "fuzz_util.hpp"
#include "io/crc32c.hpp"
#include "io/sstable.hpp"
#include "io/tf_bundle.hpp"
#include "io/wire.hpp"
#include "model/checkpoint.hpp"
#include "model/param_table.hpp"
#include "recipe.hpp"

using namespace bertbench;
namespace fs = std::filesystem;

namespace {

void tag(std::string& out, uint32_t field, uint32_t wire_type) {
    io::wire::put_varint(out, (uint64_t(field) << 3) | wire_type);
}
void varint_field(std::string& out, uint32_t field, uint64_t v) {
    tag(out, field, 0);
    io::wire::put_varint(out, v);
}
void bytes_field(std::string& out, uint32_t field, const std::string& v) {
    tag(out, field, 2);
    io::wire::put_varint(out, v.size());
    out += v;
}

std::string header_proto(fuzz::Recipe& r, int32_t num_shards) {
    std::string h;
    varint_field(h, 1, static_cast<uint64_t>(int64_t{num_shards}));  // int32: sign-extended
    if (r.flip()) varint_field(h, 2, r.one_in(8) ? r.upto(3) : 0);   // endianness
    std::string version;
    varint_field(version, 1, static_cast<uint64_t>(int64_t{r.one_in(8) ? r.hostile_i32() : 1}));
    if (r.one_in(6)) varint_field(version, 2, static_cast<uint64_t>(int64_t{r.hostile_i32(2)}));
    if (r.one_in(8)) varint_field(version, 3, r.upto(2));  // bad_consumers
    bytes_field(h, 3, version);
    return h;
}

struct Entry {
    std::string name, proto;
};

std::string shard_path(const std::string& prefix, int32_t shard, int32_t num_shards) {
    char buf[64];
    std::snprintf(buf, sizeof buf, ".data-%05d-of-%05d", shard, num_shards);
    return prefix + buf;
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
    static const model::ParamTable table(fuzz::tiny_config(), model::Heads::pretraining);
    static const fs::path dir = fuzz::scratch_dir();
    fuzz::Recipe r(data, size);
    const fs::path in = dir / "in";
    fs::remove_all(in);
    fs::create_directories(in);
    const std::string prefix = (in / "model.ckpt-1").string();

    // The header and the shards that exist (at most 3, whatever num_shards says).
    static constexpr std::array<int32_t, 8> kShards{1, 1, 1, 2, 3, 0, -1, 2147483647};
    const int32_t num_shards = r.one_in(5) ? r.hostile_i32(4) : r.pick(kShards);
    const int written = static_cast<int>(r.range(0, 3));
    std::vector<std::string> shards(static_cast<size_t>(written));
    for (std::string& s : shards) s = r.bytes(r.one_in(4) ? r.upto(1 << 16) : r.upto(512));

    // Entries: the model's names (some with their real shapes) or others.
    std::vector<Entry> entries;
    const bool many = r.one_in(16);
    const size_t n_entries = many ? r.upto(3000) : r.upto(12);
    for (size_t i = 0; i < n_entries; ++i) {
        Entry e;
        const model::ParamInfo& p = table.entries()[r.upto(table.entries().size() - 1)];
        std::vector<int64_t> shape;
        int32_t dtype = 1;
        if (!many && r.flip()) {  // a model weight, shape mostly right
            e.name = p.name;
            shape = p.shape;
            if (r.one_in(4) && !shape.empty()) shape[r.upto(shape.size() - 1)] = r.hostile_i64(8);
            if (r.one_in(6)) e.name += r.pick(std::array<const char*, 4>{"/adam_m", "/adam_v", "/Adam", "/GradientAccumulator"});
        } else if (many) {
            e.name = "t" + std::to_string(i);
        } else {
            e.name = r.one_in(8) ? r.text(300) : "v/" + std::to_string(r.upto(20));
            if (r.one_in(8)) e.name = "global_step";
            const size_t rank = r.one_in(16) ? r.upto(40) : r.upto(4);
            for (size_t k = 0; k < rank; ++k) shape.push_back(r.one_in(4) ? r.hostile_i64(8) : int64_t(r.upto(8)));
        }
        if (e.name.empty()) continue;  // "" is the header's key
        if (r.one_in(5)) {
            static constexpr std::array<int32_t, 10> kTypes{1, 2, 3, 7, 9, 14, 19, 8, 20, 0};
            dtype = r.one_in(4) ? r.hostile_i32(30) : r.pick(kTypes);
        }
        const int32_t shard = shards.empty() ? 0 : static_cast<int32_t>(r.upto(shards.size() - 1));
        int32_t shard_id = r.one_in(8) ? r.hostile_i32(4) : shard;
        uint64_t numel = 1;
        bool overflow = false;
        for (int64_t d : shape) overflow |= __builtin_mul_overflow(numel, static_cast<uint64_t>(d), &numel);
        const size_t es = io::tf_dtype_size(static_cast<io::TfDType>(dtype));
        uint64_t nbytes = 0;
        overflow |= __builtin_mul_overflow(numel, es == 0 ? 1 : es, &nbytes);
        const std::string& sd = shards.empty() ? std::string() : shards[static_cast<size_t>(shard)];
        uint64_t offset = sd.empty() ? 0 : r.upto(sd.size());
        if (r.one_in(8)) offset = r.hostile_u64(64);
        uint64_t sz = overflow ? r.hostile_u64() : nbytes;
        if (r.one_in(8)) sz = r.hostile_u64(64);
        // The CRC of the bytes the entry names, where the shard holds them (else anything).
        uint32_t crc = r.any<uint32_t>();
        if (offset <= sd.size() && sz <= sd.size() - offset && !r.one_in(16))
            crc = io::masked_crc32c(sd.data() + offset, sz);

        std::string v, dims;
        if (dtype != 0 || r.flip()) varint_field(v, 1, static_cast<uint64_t>(int64_t{dtype}));
        for (int64_t d : shape) {
            std::string dim;
            varint_field(dim, 1, static_cast<uint64_t>(d));
            if (r.one_in(16)) bytes_field(dim, 2, "n");
            bytes_field(dims, 2, dim);
        }
        if (r.one_in(16)) varint_field(dims, 3, r.upto(1));  // unknown_rank
        bytes_field(v, 2, dims);
        if (shard_id != 0) varint_field(v, 3, static_cast<uint64_t>(int64_t{shard_id}));
        if (offset != 0 || r.one_in(8)) varint_field(v, 4, offset);
        if (sz != 0 || r.one_in(8)) varint_field(v, 5, sz);
        tag(v, 6, 5);
        io::wire::put_fixed32(v, crc);
        if (r.one_in(10)) {  // slices: a partitioned variable
            std::string slice, extent;
            varint_field(extent, 1, r.upto(4));
            varint_field(extent, 2, r.hostile_u64(4));
            bytes_field(slice, 1, extent);
            bytes_field(v, 7, slice);
        }
        e.proto = std::move(v);
        entries.push_back(std::move(e));
    }
    std::sort(entries.begin(), entries.end(), [](const Entry& a, const Entry& b) { return a.name < b.name; });
    entries.erase(std::unique(entries.begin(), entries.end(),
                              [](const Entry& a, const Entry& b) { return a.name == b.name; }),
                  entries.end());
    std::vector<io::SstEntry> kv;
    if (!r.one_in(32)) kv.push_back({"", header_proto(r, num_shards)});
    for (Entry& e : entries) kv.push_back({std::move(e.name), std::move(e.proto)});
    io::SstBuildOptions opt;
    if (r.flip()) opt.block_size = 1 + r.upto(256), opt.restart_interval = 1 + static_cast<int>(r.upto(16));
    const std::string index = io::build_sstable(kv, opt);
    fuzz::write_file(prefix + ".index", index);
    uint64_t input_bytes = index.size();
    for (int s = 0; s < written; ++s) {
        fuzz::write_file(shard_path(prefix, s, num_shards), shards[static_cast<size_t>(s)]);
        input_bytes += shards[static_cast<size_t>(s)].size();
    }

    fuzz::expect_clean([&] {
        const io::TfBundleReader b(prefix);
        if (b.used_shards().size() > b.entries().size()) std::abort();  // never per num_shards
        for (const io::TfTensorEntry& e : b.entries()) {
            fuzz::expect_clean([&] { (void)b.read_raw(e); });
            if (e.numel() <= input_bytes)  // the caller's buffer: only for what could be present
                fuzz::expect_clean([&] {
                    std::vector<float> f(e.numel());
                    b.read_f32(e, f);
                });
            fuzz::expect_clean([&] { (void)b.read_i64(e); });
        }
    });
    fuzz::expect_clean([&] {
        std::vector<float> params(table.total_floats());
        (void)model::import_tf_checkpoint(prefix, table, params);
    });
    fuzz::convert_into(r, prefix, dir / "out", input_bytes);
    return 0;
}
