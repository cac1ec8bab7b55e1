// safetensors reader (validating, mmap) and atomic writer. See safetensors.hpp for the format.
// Validation follows the rules of huggingface/safetensors (header <= 100 MB, offsets contiguous
// and covering the data section exactly), plus a nesting-depth limit so a hostile header cannot
// exhaust the stack of the recursive JSON parser.
#include "io/safetensors.hpp"

#include <algorithm>
#include <bit>
#include <charconv>
#include <cstring>
#include <limits>
#include <set>
#include <nlohmann/json.hpp>

#include "core/error.hpp"
#include "core/json_safe.hpp"
#include "core/fs.hpp"
#include "io/crc32c.hpp"

namespace bertbench::io {

static_assert(std::endian::native == std::endian::little, "safetensors data is little-endian");

namespace {

constexpr uint64_t kMaxHeaderBytes = 100u << 20;  // the reference implementation's limit
constexpr int kMaxJsonDepth = 32;                 // a valid header needs 3
// The metadata key our writer records the data section's CRC-32C under (8 lowercase hex digits);
// a file with it is checked on open, one without it (another tool's) is read as it is.
constexpr const char* kCrcKey = "data_crc32c";

struct DTypeName {
    DType dtype;
    const char* name;
    size_t size;
};
constexpr DTypeName kDTypes[] = {
    {DType::F64, "F64", 8},   {DType::F32, "F32", 4}, {DType::F16, "F16", 2},
    {DType::BF16, "BF16", 2}, {DType::I64, "I64", 8}, {DType::I32, "I32", 4},
    {DType::I16, "I16", 2},   {DType::I8, "I8", 1},   {DType::U8, "U8", 1},
    {DType::BOOL, "BOOL", 1},
};

// One pass over the header: the deepest [ / { nesting outside strings (stopping early once over
// the limit) and where the top-level object closes (npos: it does not).
struct JsonScan {
    int max_depth = 0;
    size_t end = std::string_view::npos;  // one past the top-level object's closing brace
};
JsonScan scan_json(std::string_view s) {
    JsonScan r;
    int depth = 0;
    bool in_string = false, escape = false;
    for (size_t i = 0; i < s.size(); ++i) {
        const char c = s[i];
        if (in_string) {
            if (escape)
                escape = false;
            else if (c == '\\')
                escape = true;
            else if (c == '"')
                in_string = false;
        } else if (c == '"') {
            in_string = true;
        } else if (c == '[' || c == '{') {
            r.max_depth = std::max(r.max_depth, ++depth);
            if (r.max_depth > kMaxJsonDepth) break;
        } else if (c == ']' || c == '}') {
            if (--depth == 0) {
                r.end = i + 1;
                break;
            }
        }
    }
    return r;
}

// nlohmann keeps the last of repeated keys, so a repeated tensor name would silently replace the
// first entry (with another shape and offsets). A SAX pass finds the first top-level key seen
// twice ("" if none); linear (a parse callback makes nlohmann's DOM parser quadratic).
std::string repeated_top_level_key(std::string_view header) {
    struct Keys : nlohmann::json_sax<nlohmann::json> {
        int depth = 0;
        std::set<std::string> seen;
        std::string repeated;
        bool null() override { return true; }
        bool boolean(bool) override { return true; }
        bool number_integer(number_integer_t) override { return true; }
        bool number_unsigned(number_unsigned_t) override { return true; }
        bool number_float(number_float_t, const string_t&) override { return true; }
        bool string(string_t&) override { return true; }
        bool binary(binary_t&) override { return true; }
        bool start_object(std::size_t) override { return ++depth, true; }
        bool end_object() override { return --depth, true; }
        bool start_array(std::size_t) override { return ++depth, true; }
        bool end_array() override { return --depth, true; }
        bool key(string_t& k) override {
            if (depth == 1 && !seen.insert(k).second) {
                repeated = k;
                return false;  // stop at the first
            }
            return true;
        }
        bool parse_error(std::size_t, const std::string&,
                         const nlohmann::detail::exception&) override {
            return false;
        }
    } keys;
    nlohmann::json::sax_parse(header, &keys, nlohmann::json::input_format_t::json, false);
    return keys.repeated;
}

template <typename T>
T load(const std::byte* p) {
    T v;
    std::memcpy(&v, p, sizeof(T));
    return v;
}

// Error naming the file unless `s` (a tensor name, a metadata key or value) is UTF-8.
void check_utf8(const std::string& path, const char* what, std::string_view s) {
    const size_t at = json_safe::invalid_utf8_at(s);
    if (at != std::string_view::npos)
        fail("{}: {} {}: expected UTF-8 text (the safetensors header is JSON), got the byte 0x{:02x} "
             "at offset {}",
             path, what, json_safe::quoted(s), static_cast<unsigned char>(s[at]), at);
}

}  // namespace

size_t dtype_size(DType dtype) {
    for (const auto& d : kDTypes)
        if (d.dtype == dtype) return d.size;
    BB_CHECK(false);
    return 0;
}

const char* dtype_name(DType dtype) {
    for (const auto& d : kDTypes)
        if (d.dtype == dtype) return d.name;
    BB_CHECK(false);
    return "";
}

bool parse_dtype(const std::string& name, DType* out) {
    for (const auto& d : kDTypes)
        if (name == d.name) {
            *out = d.dtype;
            return true;
        }
    return false;
}

size_t TensorInfo::numel() const {
    size_t n = 1;
    for (int64_t d : shape) n *= static_cast<size_t>(d);
    return n;
}

std::string TensorInfo::shape_str() const {
    std::string s = "[";
    for (size_t i = 0; i < shape.size(); ++i) s += (i ? ", " : "") + std::to_string(shape[i]);
    return s + "]";
}

// ---- reader ----

SafetensorsReader::SafetensorsReader(const std::string& path)
    : path_(path), bytes_(FileBytes::map(path, "safetensors file")) {
    file_ = bytes_.data();
    file_size_ = bytes_.size();
    parse();
}

SafetensorsReader SafetensorsReader::from_bytes(std::string bytes, const std::string& label) {
    SafetensorsReader r;
    r.path_ = label;
    r.bytes_ = FileBytes::image(std::move(bytes));
    r.file_ = r.bytes_.data();
    r.file_size_ = r.bytes_.size();
    r.parse();
    return r;
}

void SafetensorsReader::parse() {
    const std::string& f = path_;
    if (file_size_ < 8)
        fail(
            "{}: expected at least 8 bytes (the header length), got a {}-byte file "
            "(hint: the file is truncated or not safetensors)",
            f, file_size_);
    const uint64_t n = load<uint64_t>(file_);
    if (n > kMaxHeaderBytes)
        fail(
            "{}: header length: expected at most {} bytes, got {} (hint: not a safetensors file, "
            "or a corrupt one)",
            f, kMaxHeaderBytes, n);
    if (n > file_size_ - 8)
        fail(
            "{}: header length: expected at most {} (file size - 8), got {} (hint: the file is "
            "truncated)",
            f, file_size_ - 8, n);
    if (n < 2) fail("{}: header: expected a JSON object, got {} bytes", f, n);
    const std::string_view header(reinterpret_cast<const char*>(file_ + 8), n);
    if (header[0] != '{')
        fail("{}: header: expected a JSON object starting with '{{', got byte 0x{:02x}", f,
             static_cast<unsigned char>(header[0]));
    const JsonScan scan = scan_json(header);
    if (scan.end != std::string_view::npos) {
        // The writer pads with spaces; anything else after the object means the length field
        // covers bytes that are not header (tensor data parsed as JSON).
        const size_t extra = header.find_first_not_of(" \t\r\n", scan.end);
        if (extra != std::string_view::npos)
            fail(
                "{}: header length: expected {} bytes (the JSON object, then padding spaces), got "
                "{}: byte 0x{:02x} at offset {} follows the object (hint: the length field is "
                "wrong, or the file is corrupt)",
                f, scan.end, n, static_cast<unsigned char>(header[extra]), 8 + extra);
    }
    if (scan.max_depth > kMaxJsonDepth)
        fail("{}: header: JSON nested deeper than {} levels (a valid header needs 3)", f,
             kMaxJsonDepth);
    const nlohmann::json j = nlohmann::json::parse(header, nullptr, /*allow_exceptions=*/false);
    if (j.is_discarded() || !j.is_object())
        fail("{}: header: expected a JSON object, got invalid JSON (hint: the file is corrupt)", f);
    const std::string repeated = repeated_top_level_key(header);
    if (!repeated.empty())
        fail("{}: tensor \"{}\": expected each name once in the header, got it twice (hint: the "
             "file is corrupt or was edited)",
             f, repeated);

    data_ = file_ + 8 + n;
    data_size_ = file_size_ - 8 - n;
    tensors_.clear();
    metadata_.clear();
    index_.clear();
    for (const auto& [name, v] : j.items()) {
        if (name == "__metadata__") {
            if (!v.is_object())
                fail("{}: __metadata__: expected an object of strings, got {}", f, v.type_name());
            for (const auto& [k, s] : v.items()) {
                if (!s.is_string())
                    fail("{}: __metadata__[\"{}\"]: expected a string, got {}", f, k,
                         s.type_name());
                metadata_[k] = s.get<std::string>();
            }
            continue;
        }
        if (!v.is_object())
            fail("{}: tensor \"{}\": expected an object with dtype, shape, data_offsets, got {}", f,
                 name, v.type_name());
        TensorInfo t;
        t.name = name;
        const auto dt = v.find("dtype");
        if (dt == v.end() || !dt->is_string())
            fail("{}: tensor \"{}\": dtype: expected a string such as \"F32\", got {}", f, name,
                 dt == v.end() ? "nothing" : json_safe::brief(*dt));
        if (!parse_dtype(dt->get<std::string>(), &t.dtype))
            fail(
                "{}: tensor \"{}\": dtype: expected one of F64 F32 F16 BF16 I64 I32 I16 I8 U8 "
                "BOOL, got \"{}\"",
                f, name, dt->get<std::string>());
        const auto sh = v.find("shape");
        if (sh == v.end() || !sh->is_array())
            fail("{}: tensor \"{}\": shape: expected an array of sizes, got {}", f, name,
                 sh == v.end() ? "nothing" : json_safe::brief(*sh));
        // numel * dtype size must fit in the data section, so bound it while multiplying.
        uint64_t bytes = dtype_size(t.dtype);  // saturates at UINT64_MAX
        for (const auto& d : *sh) {
            if (!d.is_number_unsigned() && !(d.is_number_integer() && d.get<int64_t>() >= 0))
                fail("{}: tensor \"{}\": shape: expected non-negative integers, got {}", f, name,
                     json_safe::brief(*sh));
            const uint64_t x = d.get<uint64_t>();
            if (x > static_cast<uint64_t>(std::numeric_limits<int64_t>::max()))
                fail("{}: tensor \"{}\": shape: dimension {} is too large", f, name, x);
            t.shape.push_back(static_cast<int64_t>(x));
            if (__builtin_mul_overflow(bytes, x, &bytes))
                bytes = std::numeric_limits<uint64_t>::max();
        }
        const auto off = v.find("data_offsets");
        if (off == v.end() || !off->is_array() || off->size() != 2 ||
            !(*off)[0].is_number_unsigned() || !(*off)[1].is_number_unsigned())
            fail(
                "{}: tensor \"{}\": data_offsets: expected [begin, end] (non-negative integers), "
                "got {}",
                f, name, off == v.end() ? "nothing" : json_safe::brief(*off));
        const uint64_t b = (*off)[0].get<uint64_t>(), e = (*off)[1].get<uint64_t>();
        if (b > e)
            fail("{}: tensor \"{}\": data_offsets: expected begin <= end, got [{}, {}]", f, name, b,
                 e);
        if (e > data_size_)
            fail(
                "{}: tensor \"{}\": data_offsets: expected end <= {} (the data section size), got "
                "{} (hint: the file is truncated)",
                f, name, data_size_, e);
        if (bytes != e - b)  // a saturated product printed as such, not as 2^64 - 1
            fail(
                "{}: tensor \"{}\": expected {} bytes ({} {}), got data_offsets [{}, {}] = {} "
                "bytes",
                f, name,
                bytes == std::numeric_limits<uint64_t>::max() ? std::string("more than 2^64")
                                                              : std::to_string(bytes),
                dtype_name(t.dtype), t.shape_str(), b, e, e - b);
        t.begin = b;
        t.end = e;
        tensors_.push_back(std::move(t));
    }
    std::stable_sort(tensors_.begin(), tensors_.end(),
                     [](const TensorInfo& a, const TensorInfo& b) {
                         return a.begin != b.begin ? a.begin < b.begin : a.end < b.end;
                     });
    size_t pos = 0;
    const TensorInfo* prev = nullptr;
    for (const TensorInfo& t : tensors_) {
        if (t.begin < pos)
            fail("{}: tensor \"{}\": data_offsets [{}, {}] overlap tensor \"{}\" [{}, {}]", f,
                 t.name, t.begin, t.end, prev->name, prev->begin, prev->end);
        if (t.begin > pos)
            fail(
                "{}: tensor \"{}\": expected data to start at byte {}, got {} (the format allows "
                "no holes in the data section)",
                f, t.name, pos, t.begin);
        pos = t.end;
        prev = &t;
    }
    if (pos != data_size_)
        fail(
            "{}: data section: expected {} bytes (the tensors' total), got {} (hint: trailing "
            "garbage or a truncated file)",
            f, pos, data_size_);
    for (size_t i = 0; i < tensors_.size(); ++i) index_[tensors_[i].name] = i;
    const auto crc = metadata_.find(kCrcKey);
    crc_pending_ = crc != metadata_.end();  // else not one of our files: no checksum to check
    if (!crc_pending_) return;
    const std::string& v = crc->second;
    const auto [end, ec] = std::from_chars(v.data(), v.data() + v.size(), crc_, 16);
    if (v.size() != 8 || ec != std::errc() || end != v.data() + v.size())
        fail("{}: __metadata__[\"{}\"]: expected 8 hex digits (the data section's CRC-32C), got {}", f, kCrcKey,
             json_safe::quoted(v));
}

void SafetensorsReader::check_data() const {
    if (!crc_pending_) return;
    const uint32_t got = crc32c(data_, data_size_);
    if (got != crc_)
        fail("{}: data section: CRC-32C {:08x}, but the header's {} is {:08x} (hint: the file is corrupt: a byte "
             "of the tensors was changed after it was written)",
             path_, got, kCrcKey, crc_);
    crc_pending_ = false;
}

const TensorInfo* SafetensorsReader::find(const std::string& name) const {
    const auto it = index_.find(name);
    return it == index_.end() ? nullptr : &tensors_[it->second];
}

const TensorInfo& SafetensorsReader::at(const std::string& name) const {
    const TensorInfo* t = find(name);
    if (t == nullptr)
        fail(
            "{}: tensor \"{}\": expected it in the file, got no such tensor ({} tensors in the "
            "file)",
            path_, name, tensors_.size());
    return *t;
}

std::span<const std::byte> SafetensorsReader::bytes(const TensorInfo& t) const {
    BB_CHECK(t.end <= data_size_ && t.begin <= t.end);
    check_data();
    return {data_ + t.begin, t.end - t.begin};
}

void SafetensorsReader::read_f32(const std::string& name, std::span<float> out) const {
    const TensorInfo& t = at(name);
    if (t.numel() != out.size())
        fail("{}: tensor \"{}\": expected {} elements, got {} (shape {})", path_, name, out.size(),
             t.numel(), t.shape_str());
    check_data();
    const std::byte* p = data_ + t.begin;
    const size_t n = out.size();
    switch (t.dtype) {
        case DType::F32:
            if (n > 0) std::memcpy(out.data(), p, n * 4);
            break;
        case DType::F64:
            for (size_t i = 0; i < n; ++i) out[i] = static_cast<float>(load<double>(p + 8 * i));
            break;
        case DType::F16:
            for (size_t i = 0; i < n; ++i) out[i] = half_to_float(load<uint16_t>(p + 2 * i));
            break;
        case DType::BF16:
            for (size_t i = 0; i < n; ++i)
                out[i] =
                    std::bit_cast<float>(static_cast<uint32_t>(load<uint16_t>(p + 2 * i)) << 16);
            break;
        default:
            fail("{}: tensor \"{}\": expected a float dtype (F32, F64, F16, BF16), got {}", path_,
                 name, dtype_name(t.dtype));
    }
}

std::vector<float> SafetensorsReader::read_f32(const std::string& name) const {
    std::vector<float> v(at(name).numel());
    read_f32(name, v);
    return v;
}

std::vector<int64_t> SafetensorsReader::read_i64(const std::string& name) const {
    const TensorInfo& t = at(name);
    check_data();
    const size_t n = t.numel();
    const std::byte* p = data_ + t.begin;
    std::vector<int64_t> v(n);
    for (size_t i = 0; i < n; ++i) {
        switch (t.dtype) {
            case DType::I64:
                v[i] = load<int64_t>(p + 8 * i);
                break;
            case DType::I32:
                v[i] = load<int32_t>(p + 4 * i);
                break;
            case DType::I16:
                v[i] = load<int16_t>(p + 2 * i);
                break;
            case DType::I8:
                v[i] = load<int8_t>(p + i);
                break;
            case DType::U8:
            case DType::BOOL:
                v[i] = load<uint8_t>(p + i);
                break;
            default:
                fail(
                    "{}: tensor \"{}\": expected an integer dtype (I64, I32, I16, I8, U8, BOOL), "
                    "got {}",
                    path_, name, dtype_name(t.dtype));
        }
    }
    return v;
}

// ---- writer ----

SafetensorsWriter::SafetensorsWriter(std::string path) : path_(std::move(path)) {}

void SafetensorsWriter::set_metadata(const std::string& key, const std::string& value) {
    check_utf8(path_, "metadata key", key);
    check_utf8(path_, ("metadata \"" + key + "\": value").c_str(), value);
    metadata_[key] = value;
}

bool SafetensorsWriter::has(const std::string& name) const {
    return index_.count(name) != 0;
}

void SafetensorsWriter::add(const std::string& name, DType dtype, std::vector<int64_t> shape,
                            const void* data, size_t nbytes) {
    if (name.empty() || name == "__metadata__")
        fail("{}: tensor name: expected a non-empty name other than __metadata__, got \"{}\"",
             path_, name);
    check_utf8(path_, "tensor name", name);
    if (has(name)) fail("{}: tensor \"{}\": added twice", path_, name);
    size_t numel = 1;
    for (int64_t d : shape) {
        BB_CHECK(d >= 0);
        numel *= static_cast<size_t>(d);
    }
    if (numel * dtype_size(dtype) != nbytes)
        fail("{}: tensor \"{}\": expected {} bytes for {} of {} elements, got {}", path_, name,
             numel * dtype_size(dtype), dtype_name(dtype), numel, nbytes);
    BB_CHECK(nbytes == 0 || data != nullptr);
    index_[name] = entries_.size();
    entries_.push_back({name, dtype, std::move(shape), data, nbytes, nullptr});
}

void SafetensorsWriter::add_copy(const std::string& name, DType dtype, std::vector<int64_t> shape,
                                 const void* data, size_t nbytes) {
    auto owned = std::make_shared<std::vector<std::byte>>(nbytes);
    if (nbytes > 0) std::memcpy(owned->data(), data, nbytes);
    add(name, dtype, std::move(shape), owned->data(), nbytes);
    entries_.back().owned = std::move(owned);
}

std::unique_ptr<AtomicFile> SafetensorsWriter::stage() {
    // The header is assembled entry by entry, not as one nlohmann::ordered_json object: that
    // keeps insertion order by a linear key search on every insert, quadratic in the tensor count
    // (300,000 tensors took minutes). Names are unique (add() checks), so no lookup is needed;
    // the bytes are those ordered_json::dump() gives.
    uint32_t crc = 0;
    for (const Entry& e : entries_) crc = crc32c(e.data, e.nbytes, crc);
    std::map<std::string, std::string> metadata = metadata_;
    metadata[kCrcKey] = fmt::format("{:08x}", crc);
    std::string text = "{\"__metadata__\":" + nlohmann::ordered_json(metadata).dump();
    size_t pos = 0;
    for (const Entry& e : entries_) {
        if (text.size() > 1) text += ',';
        text += nlohmann::ordered_json(e.name).dump();
        text += ':';
        text += nlohmann::ordered_json({{"dtype", dtype_name(e.dtype)},
                                        {"shape", e.shape},
                                        {"data_offsets", {pos, pos + e.nbytes}}})
                    .dump();
        pos += e.nbytes;
    }
    text += '}';
    text.append((64 - (8 + text.size()) % 64) % 64, ' ');  // data section 64-byte aligned
    const uint64_t n = text.size();
    auto out = std::make_unique<AtomicFile>(path_);
    out->write(&n, 8);
    out->write(text);
    for (const Entry& e : entries_) out->write(e.data, e.nbytes);
    out->sync();
    return out;
}

void SafetensorsWriter::write() { stage()->commit(); }

}  // namespace bertbench::io
