// TensorFlow tensor bundle reader and writer (see tf_bundle.hpp; FORMAT.md sections 4-6, 8).
// Protobuf messages decoded here (field numbers from tensor_bundle.proto, tensor_shape.proto,
// versions.proto): BundleHeaderProto{1 num_shards, 2 endianness, 3 version{1 producer,
// 2 min_consumer, 3 bad_consumers}}, BundleEntryProto{1 dtype, 2 shape{2 dim{1 size, 2 name},
// 3 unknown_rank}, 3 shard_id, 4 offset, 5 size, 6 crc32c (fixed32), 7 slices}.
#include "io/tf_bundle.hpp"

#include <fmt/ranges.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cctype>
#include <cerrno>
#include <cstdio>
#include <cstring>
#include <filesystem>

#include "core/error.hpp"
#include "core/fs.hpp"
#include "io/crc32c.hpp"
#include "io/safetensors.hpp"  // half_to_float
#include "io/wire.hpp"

namespace bertbench::io {
namespace {

constexpr int32_t kBundleVersion = 1;  // kTensorBundleVersion: what we write, and the consumer
                                       // version CheckVersions is run with [TBC:795]
constexpr uint64_t kMaxNumel = uint64_t(1) << 62;

// A printable form of a key for messages (slice keys start with a zero byte).
std::string printable(std::string_view s) {
    std::string out;
    for (const char ch : s.substr(0, 200)) {
        const auto c = static_cast<unsigned char>(ch);
        if (c >= 0x20 && c < 0x7f && c != '"' && c != '\\')
            out.push_back(ch);
        else
            out += fmt::format("\\x{:02x}", c);
    }
    if (s.size() > 200) out += "...";
    return out;
}

void expect_wire(wire::Cursor& c, uint64_t field, uint32_t got, uint32_t want) {
    if (got != want)
        c.error(fmt::format("field {}: expected wire type {}, found {}", field, want, got));
}

// proto int32 fields are varints of the sign-extended 64-bit value.
int32_t to_int32(wire::Cursor& c, uint64_t v, const char* field) {
    const auto s = static_cast<int64_t>(v);
    if (s < INT32_MIN || s > INT32_MAX)
        c.error(fmt::format("{}: expected an int32, found {}", field, s));
    return static_cast<int32_t>(s);
}

TfBundleHeader parse_header(std::string_view v, const std::string& where) {
    wire::Cursor c(v, where);
    TfBundleHeader h;
    h.num_shards = 0;
    while (!c.done()) {
        const auto [field, wt] = c.tag();
        if (field == 1) {
            expect_wire(c, field, wt, 0);
            h.num_shards = to_int32(c, c.varint64(), "num_shards");
        } else if (field == 2) {
            expect_wire(c, field, wt, 0);
            const uint64_t e = c.varint64();
            if (e > 1) c.error(fmt::format("endianness: expected 0 (LITTLE) or 1 (BIG), found {}", e));
            h.big_endian = e == 1;
        } else if (field == 3) {
            expect_wire(c, field, wt, 2);
            wire::Cursor vc(c.length_delimited(), where + ": version");
            while (!vc.done()) {
                const auto [vf, vw] = vc.tag();
                if (vf == 1) {
                    expect_wire(vc, vf, vw, 0);
                    h.producer = to_int32(vc, vc.varint64(), "producer");
                } else if (vf == 2) {
                    expect_wire(vc, vf, vw, 0);
                    h.min_consumer = to_int32(vc, vc.varint64(), "min_consumer");
                } else if (vf == 3 && vw == 2) {  // packed
                    wire::Cursor pc(vc.length_delimited(), where + ": version.bad_consumers");
                    while (!pc.done()) h.bad_consumers.push_back(to_int32(pc, pc.varint64(), "bad_consumers"));
                } else if (vf == 3) {
                    expect_wire(vc, vf, vw, 0);
                    h.bad_consumers.push_back(to_int32(vc, vc.varint64(), "bad_consumers"));
                } else {
                    vc.skip_field(vw);
                }
            }
        } else {
            c.skip_field(wt);
        }
    }
    if (h.num_shards < 1)
        fail("{}: num_shards: expected >= 1, found {}", where, h.num_shards);
    // CheckVersions(version, consumer = 1, min_producer = 0)
    if (h.producer < 0)
        fail("{}: version.producer: expected >= 0, found {}", where, h.producer);
    if (h.min_consumer > kBundleVersion)
        fail("{}: version.min_consumer: expected <= {} (the bundle version read here), found {} "
             "(hint: written by a newer TensorFlow format)", where, kBundleVersion, h.min_consumer);
    if (std::find(h.bad_consumers.begin(), h.bad_consumers.end(), kBundleVersion) !=
        h.bad_consumers.end())
        fail("{}: version.bad_consumers: lists {}, the bundle version read here", where,
             kBundleVersion);
    return h;
}

void parse_shape(std::string_view v, const std::string& where, std::vector<int64_t>& shape) {
    wire::Cursor c(v, where);
    while (!c.done()) {
        const auto [field, wt] = c.tag();
        if (field == 2) {
            expect_wire(c, field, wt, 2);
            wire::Cursor dc(c.length_delimited(), where + ": dim");
            int64_t size = 0;
            while (!dc.done()) {
                const auto [df, dw] = dc.tag();
                if (df == 1) {
                    expect_wire(dc, df, dw, 0);
                    size = static_cast<int64_t>(dc.varint64());
                } else {
                    dc.skip_field(dw);
                }
            }
            if (size < 0)
                fail("{}: dim {}: expected a size >= 0 (fully defined shape), found {}", where,
                     shape.size(), size);
            shape.push_back(size);
        } else if (field == 3) {
            expect_wire(c, field, wt, 0);
            if (c.varint64() != 0)
                fail("{}: expected a fully defined shape, found unknown_rank", where);
        } else {
            c.skip_field(wt);
        }
    }
}

TfTensorEntry parse_entry(const std::string& name, std::string_view v, const std::string& where) {
    wire::Cursor c(v, where + ": BundleEntryProto");
    TfTensorEntry e;
    e.name = name;
    while (!c.done()) {
        const auto [field, wt] = c.tag();
        switch (field) {
            case 1:
                expect_wire(c, field, wt, 0);
                e.dtype = static_cast<TfDType>(to_int32(c, c.varint64(), "dtype"));
                break;
            case 2:
                expect_wire(c, field, wt, 2);
                e.shape.clear();
                parse_shape(c.length_delimited(), where + ": shape", e.shape);
                break;
            case 3:
                expect_wire(c, field, wt, 0);
                e.shard_id = to_int32(c, c.varint64(), "shard_id");
                break;
            case 4:
            case 5: {
                expect_wire(c, field, wt, 0);
                const uint64_t x = c.varint64();
                if (x >> 63) c.error(fmt::format("field {}: expected a non-negative int64", field));
                (field == 4 ? e.offset : e.size) = x;
                break;
            }
            case 6:
                expect_wire(c, field, wt, 5);
                e.crc32c_masked = c.fixed32();
                break;
            case 7:
                expect_wire(c, field, wt, 2);
                c.length_delimited();
                e.partitioned = true;
                break;
            default:
                c.skip_field(wt);
        }
    }
    return e;
}

bool checked_numel(const std::vector<int64_t>& shape, uint64_t* out) {
    uint64_t n = 1;
    for (int64_t d : shape)
        if (__builtin_mul_overflow(n, static_cast<uint64_t>(d), &n) || n > kMaxNumel) return false;
    *out = n;
    return true;
}

void validate_entry(const TfTensorEntry& e, const TfBundleHeader& h, const std::string& where) {
    if (std::string_view(tf_dtype_name(e.dtype)) == "DT_?" || e.dtype == TfDType::invalid)
        fail("{}: dtype: expected a TensorFlow DataType (1..23), found {}", where,
             static_cast<int32_t>(e.dtype));
    uint64_t numel = 0;
    if (!checked_numel(e.shape, &numel))
        fail("{}: shape {}: expected at most 2^62 elements, found more", where, e.shape_str());
    if (e.partitioned) return;  // data lives under the slice keys
    if (e.shard_id < 0 || e.shard_id >= h.num_shards)
        fail("{}: shard_id: expected 0..{} (num_shards {} in the header), found {}", where,
             h.num_shards - 1, h.num_shards, e.shard_id);
    if (e.size > UINT64_MAX / 2 - e.offset)
        fail("{}: offset {} + size {}: overflows", where, e.offset, e.size);
    const size_t es = tf_dtype_size(e.dtype);
    uint64_t want = 0;
    const bool wraps = es > 0 && __builtin_mul_overflow(numel, es, &want);
    if (es > 0 && (wraps || want != e.size))  // the product printed unwrapped
        fail("{}: size: expected {} bytes ({} elements of {} x {} bytes), found {}", where,
             wraps ? std::string("more than 2^64") : std::to_string(want), numel,
             tf_dtype_name(e.dtype), es, e.size);
    if (e.dtype == TfDType::string && e.size < numel + 4)
        fail("{}: size: expected at least {} bytes for {} strings, found {}", where, numel + 4,
             numel, e.size);
}

void byteswap(uint8_t* p, size_t n, size_t width) {
    if (width <= 1) return;
    for (size_t i = 0; i + width <= n; i += width) std::reverse(p + i, p + i + width);
}

void put_tag(std::string& out, uint32_t field, uint32_t wt) {
    wire::put_varint(out, (uint64_t(field) << 3) | wt);
}

}  // namespace

const char* tf_dtype_name(TfDType d) {
    static const char* const kNames[] = {
        "DT_INVALID", "DT_FLOAT",     "DT_DOUBLE",   "DT_INT32",      "DT_UINT8",   "DT_INT16",
        "DT_INT8",    "DT_STRING",    "DT_COMPLEX64", "DT_INT64",     "DT_BOOL",    "DT_QINT8",
        "DT_QUINT8",  "DT_QINT32",    "DT_BFLOAT16", "DT_QINT16",     "DT_QUINT16", "DT_UINT16",
        "DT_COMPLEX128", "DT_HALF",   "DT_RESOURCE", "DT_VARIANT",    "DT_UINT32",  "DT_UINT64"};
    const auto i = static_cast<int32_t>(d);
    return i >= 0 && i < 24 ? kNames[i] : "DT_?";
}

size_t tf_dtype_size(TfDType d) {
    static const uint8_t kSizes[] = {0, 4, 8, 4, 1, 2, 1, 0, 8, 8, 1, 1,
                                     1, 4, 2, 2, 2, 2, 16, 2, 0, 0, 4, 8};
    const auto i = static_cast<int32_t>(d);
    return i >= 0 && i < 24 ? kSizes[i] : 0;
}

uint64_t TfTensorEntry::numel() const {
    uint64_t n = 1;
    for (int64_t d : shape) n *= static_cast<uint64_t>(d);  // validated at parse: no overflow
    return n;
}

std::string TfTensorEntry::shape_str() const {
    return fmt::format("[{}]", fmt::join(shape, ", "));
}

// ---- reader ----

TfBundleReader::TfBundleReader(const std::string& prefix) : prefix_(prefix) {
    const std::string path = index_path();
    struct stat st {};
    if (::stat(path.c_str(), &st) != 0)
        fail("[tf_checkpoint] {}: cannot open the checkpoint index: {} (hint: a TF checkpoint "
             "is named by its prefix, e.g. .../model.ckpt-28252, or its .index file)",
             path, std::strerror(errno));
    if (!S_ISREG(st.st_mode))
        fail("[tf_checkpoint] {}: checkpoint index: expected a regular file, found {}", path,
             file_type_name(st.st_mode));
    parse(read_file(path));
}

TfBundleReader TfBundleReader::from_memory(std::string index_image,
                                           std::vector<std::string> shards,
                                           const std::string& label) {
    TfBundleReader r;
    r.prefix_ = label;
    r.in_memory_ = true;
    r.shards_ = std::move(shards);
    r.parse(index_image);
    return r;
}

bool TfBundleReader::is_bundle(const std::string& prefix) {
    struct stat st {};
    return !prefix.empty() && ::stat((prefix + ".index").c_str(), &st) == 0;
}

std::string TfBundleReader::prefix_of(const std::string& path) {
    struct stat st {};
    if (::stat(path.c_str(), &st) != 0 || !S_ISREG(st.st_mode)) return path;
    if (path.ends_with(".index")) return path.substr(0, path.size() - 6);
    // a data shard, PREFIX.data-00000-of-00001, beside its PREFIX.index
    const size_t dot = path.rfind(".data-");
    const std::string tail = dot == std::string::npos ? std::string() : path.substr(dot + 6);
    bool shard = tail.size() == 14 && tail.compare(5, 4, "-of-") == 0;
    for (size_t i = 0; shard && i < tail.size(); ++i)
        shard = (i >= 5 && i < 9) || std::isdigit(static_cast<unsigned char>(tail[i]));
    if (shard && is_bundle(path.substr(0, dot))) return path.substr(0, dot);
    return path;
}

std::string TfBundleReader::shard_path(int32_t shard) const {
    return fmt::format("{}.data-{:05d}-of-{:05d}", prefix_, shard, header_.num_shards);
}

std::vector<int32_t> TfBundleReader::used_shards() const {
    std::vector<int32_t> ids;
    ids.reserve(entries_.size());
    for (const TfTensorEntry& e : entries_)
        if (!e.partitioned) ids.push_back(e.shard_id);
    std::sort(ids.begin(), ids.end());
    ids.erase(std::unique(ids.begin(), ids.end()), ids.end());
    return ids;
}

void TfBundleReader::parse(std::string_view image) {
    const std::string label = "[tf_checkpoint] " + index_path();
    const std::vector<SstEntry> kv = parse_sstable(image, label, &table_);
    if (kv.empty() || !kv[0].key.empty())
        fail("{}: expected the bundle header (empty key) as the first entry, found {}", label,
             kv.empty() ? std::string("an empty table")
                        : "\"" + printable(kv[0].key) + "\"");
    header_ = parse_header(kv[0].value, label + ": BundleHeaderProto");
    for (size_t i = 1; i < kv.size(); ++i) {
        if (kv[i].key[0] == '\0') continue;  // a slice key (FORMAT.md section 7)
        const std::string where = fmt::format("{}: tensor \"{}\"", label, printable(kv[i].key));
        TfTensorEntry e = parse_entry(kv[i].key, kv[i].value, where);
        validate_entry(e, header_, where);
        index_[e.name] = entries_.size();
        entries_.push_back(std::move(e));
    }
}

const TfTensorEntry* TfBundleReader::find(const std::string& name) const {
    const auto it = index_.find(name);
    return it == index_.end() ? nullptr : &entries_[it->second];
}

std::string TfBundleReader::where(const TfTensorEntry& e) const {
    return fmt::format("[tf_checkpoint] {}: tensor \"{}\" (offset {}, size {})",
                       shard_path(e.shard_id), printable(e.name), e.offset, e.size);
}

void TfBundleReader::read_bytes(const TfTensorEntry& e, void* dst,
                                std::vector<uint8_t>* alloc) const {
    if (e.partitioned)
        fail("[tf_checkpoint] {}: tensor \"{}\": a partitioned variable (slices): not supported "
             "(hint: re-save it unpartitioned)", index_path(), printable(e.name));
    const std::string path = shard_path(e.shard_id);
    if (in_memory_) {
        if (static_cast<size_t>(e.shard_id) >= shards_.size())
            fail("[tf_checkpoint] {}: no such data shard (tensor \"{}\" is in shard {} of {})",
                 path, printable(e.name), e.shard_id, header_.num_shards);
        const std::string& s = shards_[static_cast<size_t>(e.shard_id)];
        if (e.offset > s.size() || e.size > s.size() - e.offset)
            fail("{}: expected the shard to hold bytes up to {}, found {} bytes (hint: the data "
                 "file is truncated)", where(e), e.offset + e.size, s.size());
        if (alloc != nullptr) alloc->resize(e.size), dst = alloc->data();
        if (e.size > 0) std::memcpy(dst, s.data() + e.offset, e.size);
        return;
    }
    // Opened as a regular file only: a FIFO in a shard's place would block the reader for ever.
    std::string why;
    const int fd = open_regular_file(path, &why);
    if (fd < 0) {
        const int err = errno;
        std::string found;
        if (err == ENOENT) {  // name the shards that are there, if any
            namespace fs = std::filesystem;
            const fs::path p(prefix_);
            const std::string stem = p.filename().string() + ".data-";
            std::error_code ec;
            std::vector<std::string> names;
            for (fs::directory_iterator it(p.parent_path().empty() ? "." : p.parent_path(), ec), end;
                 !ec && it != end; it.increment(ec))
                if (it->path().filename().string().rfind(stem, 0) == 0)
                    names.push_back(it->path().filename().string());
            std::sort(names.begin(), names.end());
            if (names.size() > 3) names.resize(3);
            found = names.empty() ? "; no data shard of this prefix is there"
                                  : fmt::format("; found {} instead", fmt::join(names, ", "));
        }
        if (err == 0)  // there, but a FIFO, directory or device: an error before any read
            fail("[tf_checkpoint] {}: data shard {} of {} (named by the header of {}) needed for "
                 "tensor \"{}\": {} (hint: the checkpoint's .data-* files are regular files)",
                 path, e.shard_id, header_.num_shards, index_path(), printable(e.name), why);
        fail("[tf_checkpoint] {}: cannot open data shard {} of {} (named by the header of {}) "
             "needed for tensor \"{}\": {}{} (hint: the checkpoint's .data-* files must sit "
             "beside its .index)",
             path, e.shard_id, header_.num_shards, index_path(), printable(e.name),
             std::strerror(err), found);
    }
    struct stat st {};
    const bool stat_ok = ::fstat(fd, &st) == 0;
    const uint64_t fsize = stat_ok ? static_cast<uint64_t>(st.st_size) : 0;
    if (!stat_ok || e.offset > fsize || e.size > fsize - e.offset) {
        ::close(fd);
        fail("{}: expected the shard to hold bytes up to {}, found {} bytes (hint: the data "
             "file is truncated)", where(e), e.offset + e.size, fsize);
    }
    // Allocated only now: an entry's size is a number the index declares (2^50 would have been
    // zero-filled before this check), the shard's size is bytes that exist.
    if (alloc != nullptr) alloc->resize(e.size), dst = alloc->data();
    size_t done = 0;
    int err = 0;
    while (done < e.size) {
        const ssize_t n = ::pread(fd, static_cast<char*>(dst) + done, e.size - done,
                                  static_cast<off_t>(e.offset + done));
        if (n < 0 && errno == EINTR) continue;
        if (n <= 0) {
            err = n < 0 ? errno : 0;
            break;
        }
        done += static_cast<size_t>(n);
    }
    ::close(fd);
    if (done < e.size)
        fail("{}: read failed after {} of {} bytes: {}", where(e), done, e.size,
             err != 0 ? std::strerror(err) : "unexpected end of file (the file shrank)");
}

std::vector<uint8_t> TfBundleReader::read_raw(const TfTensorEntry& e) const {
    if (e.dtype == TfDType::variant || e.dtype == TfDType::resource)
        fail("{}: dtype {}: not supported", where(e), tf_dtype_name(e.dtype));
    std::vector<uint8_t> buf;
    read_bytes(e, nullptr, &buf);  // sized once the shard is known to hold e.size bytes
    const uint32_t want = unmask_crc(e.crc32c_masked);
    uint32_t got = 0;
    if (e.dtype != TfDType::string) {
        got = crc32c(buf.data(), buf.size());
    } else {  // FORMAT.md 6.2: lengths (as fixed-width ints), their masked CRC, then the bytes
        const std::string_view all(reinterpret_cast<const char*>(buf.data()), buf.size());
        wire::Cursor c(all, where(e) + ": DT_STRING layout");
        const uint64_t n = e.numel();
        std::vector<uint64_t> lens(n);
        uint64_t total = 0;
        for (uint64_t i = 0; i < n; ++i) {
            lens[i] = c.varint64();
            if (lens[i] <= 0xFFFFFFFFull) {
                const uint32_t l = static_cast<uint32_t>(lens[i]);
                uint8_t le[4] = {uint8_t(l), uint8_t(l >> 8), uint8_t(l >> 16), uint8_t(l >> 24)};
                got = crc32c(le, 4, got);
            } else {
                uint8_t le[8];
                for (int k = 0; k < 8; ++k) le[k] = uint8_t(lens[i] >> (8 * k));
                got = crc32c(le, 8, got);
            }
            if (lens[i] > e.size) c.error(fmt::format("string {} of {} bytes: longer than the tensor", i, lens[i]));
            total += lens[i];
        }
        const uint32_t stored_len_crc = c.fixed32();
        if (stored_len_crc != mask_crc(got))
            fail(
                "{}: DT_STRING length checksum mismatch (expected 0x{:08x} as stored, computed "
                "0x{:08x}); the data file is corrupt",
                where(e), stored_len_crc, mask_crc(got));
        uint8_t le[4];
        std::memcpy(le, all.data() + c.pos() - 4, 4);
        got = crc32c(le, 4, got);
        if (total != c.remaining())
            fail("{}: DT_STRING: expected {} string bytes after the lengths, found {}", where(e),
                 total, c.remaining());
        got = crc32c(all.data() + c.pos(), c.remaining(), got);
    }
    if (got != want)
        fail(
            "{}: data CRC-32C mismatch (expected 0x{:08x} from the index, computed 0x{:08x}); "
            "the data file is corrupt",
            where(e), want, got);
    return buf;
}

void TfBundleReader::read_f32(const TfTensorEntry& e, std::span<float> out) const {
    if (out.size() != e.numel())
        fail("{}: expected {} elements (the destination), found shape {}", where(e), out.size(),
             e.shape_str());
    const size_t es = tf_dtype_size(e.dtype);
    if (e.dtype == TfDType::float32) {  // straight into the destination
        read_bytes(e, out.data());
        const uint32_t got = crc32c(out.data(), e.size), want = unmask_crc(e.crc32c_masked);
        if (got != want)
            fail(
                "{}: data CRC-32C mismatch (expected 0x{:08x} from the index, computed "
                "0x{:08x}); the data file is corrupt",
                where(e), want, got);
        if (header_.big_endian) byteswap(reinterpret_cast<uint8_t*>(out.data()), e.size, 4);
        return;
    }
    if (e.dtype != TfDType::float64 && e.dtype != TfDType::half && e.dtype != TfDType::bfloat16)
        fail("{}: dtype: expected DT_FLOAT, DT_DOUBLE, DT_HALF or DT_BFLOAT16, found {}", where(e),
             tf_dtype_name(e.dtype));
    std::vector<uint8_t> raw = read_raw(e);
    if (header_.big_endian) byteswap(raw.data(), raw.size(), es);
    for (size_t i = 0; i < out.size(); ++i) {
        const uint8_t* p = raw.data() + i * es;
        if (e.dtype == TfDType::float64) {
            double d;
            std::memcpy(&d, p, 8);
            out[i] = static_cast<float>(d);
        } else if (e.dtype == TfDType::half) {
            out[i] = half_to_float(static_cast<uint16_t>(p[0] | p[1] << 8));
        } else {
            const uint32_t bits = uint32_t(p[0] | p[1] << 8) << 16;
            std::memcpy(&out[i], &bits, 4);
        }
    }
}

std::vector<int64_t> TfBundleReader::read_i64(const TfTensorEntry& e) const {
    const TfDType d = e.dtype;
    const bool is_signed = d == TfDType::int64 || d == TfDType::int32 || d == TfDType::int16 ||
                           d == TfDType::int8;
    if (!is_signed && d != TfDType::uint8 && d != TfDType::uint16 && d != TfDType::uint32 &&
        d != TfDType::boolean)
        fail("{}: dtype: expected an integer type (DT_INT32, DT_INT64, ...), found {}", where(e),
             tf_dtype_name(d));
    std::vector<uint8_t> raw = read_raw(e);
    const size_t es = tf_dtype_size(d);
    if (header_.big_endian) byteswap(raw.data(), raw.size(), es);
    std::vector<int64_t> out(e.numel());
    for (size_t i = 0; i < out.size(); ++i) {
        uint64_t u = 0;
        for (size_t k = 0; k < es; ++k) u |= uint64_t(raw[i * es + k]) << (8 * k);
        if (is_signed && es < 8 && (u >> (8 * es - 1)) & 1) u |= ~uint64_t(0) << (8 * es);
        out[i] = static_cast<int64_t>(u);
    }
    return out;
}

// ---- writer ----

TfBundleWriter::TfBundleWriter(std::string prefix) : prefix_(std::move(prefix)) {}

void TfBundleWriter::add(const std::string& name, TfDType dtype, std::vector<int64_t> shape,
                         const void* data, size_t nbytes) {
    const std::string where = fmt::format("[tf_checkpoint] {}: tensor \"{}\"", prefix_, name);
    if (name.empty() || name[0] == '\0')
        fail("{}: expected a non-empty name not starting with a zero byte", where);
    if (tensors_.count(name)) fail("{}: added twice", where);
    const size_t es = tf_dtype_size(dtype);
    uint64_t numel = 0;
    if (es == 0 || dtype == TfDType::invalid)
        fail("{}: dtype {}: expected a fixed-size type", where, tf_dtype_name(dtype));
    for (int64_t d : shape)
        if (d < 0) fail("{}: shape dim {}: expected >= 0", where, d);
    if (!checked_numel(shape, &numel) || numel * es != nbytes)
        fail("{}: expected {} bytes for {} of shape [{}], got {}", where, numel * es,
             tf_dtype_name(dtype), fmt::join(shape, ", "), nbytes);
    tensors_[name] = Tensor{dtype, std::move(shape), data, nbytes, nullptr};
    order_.push_back(name);
}

void TfBundleWriter::add_copy(const std::string& name, TfDType dtype, std::vector<int64_t> shape,
                              const void* data, size_t nbytes) {
    auto owned = std::make_shared<std::vector<uint8_t>>(nbytes);
    if (nbytes > 0) std::memcpy(owned->data(), data, nbytes);
    add(name, dtype, std::move(shape), owned->data(), nbytes);
    tensors_[name].owned = std::move(owned);
}

std::string TfBundleWriter::index_image(const std::map<std::string, Tensor>& tensors) const {
    std::vector<SstEntry> kv;
    kv.reserve(tensors.size() + 1);
    std::string header;  // num_shards 1, endianness LITTLE (omitted), version{producer 1}
    put_tag(header, 1, 0);
    wire::put_varint(header, 1);
    put_tag(header, 3, 2);
    wire::put_varint(header, 2);
    put_tag(header, 1, 0);
    wire::put_varint(header, kBundleVersion);
    kv.push_back({"", header});
    for (const auto& [name, t] : tensors) {  // std::map: sorted bytewise, like TF's
        std::string shape;
        for (int64_t d : t.shape) {
            std::string dim;
            if (d != 0) {
                put_tag(dim, 1, 0);
                wire::put_varint(dim, static_cast<uint64_t>(d));
            }
            put_tag(shape, 2, 2);
            wire::put_varint(shape, dim.size());
            shape += dim;
        }
        std::string v;
        put_tag(v, 1, 0);
        wire::put_varint(v, static_cast<uint64_t>(t.dtype));
        put_tag(v, 2, 2);  // always present, empty for a scalar
        wire::put_varint(v, shape.size());
        v += shape;
        // shard_id is 0: omitted (proto3 default)
        if (t.offset != 0) {
            put_tag(v, 4, 0);
            wire::put_varint(v, t.offset);
        }
        if (t.nbytes != 0) {
            put_tag(v, 5, 0);
            wire::put_varint(v, t.nbytes);
        }
        if (t.crc != 0) {
            put_tag(v, 6, 5);
            wire::put_fixed32(v, t.crc);
        }
        kv.push_back({name, std::move(v)});
    }
    return build_sstable(kv);
}

TfBundleWriter::Images TfBundleWriter::build() const {
    std::map<std::string, Tensor> tensors = tensors_;
    Images out;
    for (const std::string& name : order_) {
        Tensor& t = tensors.at(name);
        t.offset = out.data.size();
        t.crc = mask_crc(crc32c(t.data, t.nbytes));
        out.data.append(static_cast<const char*>(t.data), t.nbytes);
    }
    out.index = index_image(tensors);
    return out;
}

void TfBundleWriter::finish() { commit_together(stage()); }

std::vector<std::unique_ptr<AtomicFile>> TfBundleWriter::stage() {
    // Both files are written in full under their temporary names before either is renamed, so a
    // write that fails (a full disk) leaves a checkpoint being replaced as it was.
    uint64_t offset = 0;
    auto data = std::make_unique<AtomicFile>(prefix_ + ".data-00000-of-00001");
    for (const std::string& name : order_) {
        Tensor& t = tensors_.at(name);
        t.offset = offset;
        t.crc = mask_crc(crc32c(t.data, t.nbytes));
        data->write(t.data, t.nbytes);
        offset += t.nbytes;
    }
    data->sync();
    std::vector<std::unique_ptr<AtomicFile>> files;
    files.push_back(std::move(data));
    files.push_back(staged_file(prefix_ + ".index", index_image(tensors_)));
    return files;
}

}  // namespace bertbench::io
