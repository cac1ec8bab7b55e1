// PyTorch checkpoints: the zip and legacy containers around io/pickle.hpp's restricted VM, and
// the zip writer (see torch_checkpoint.hpp). The zip reader takes the central directory (zip64
// too: NVIDIA's BERT-large checkpoints with optimizer state pass 4 GiB), stored entries only (torch
// never compresses), and checks each storage's CRC-32 on first use.
#include "io/torch_checkpoint.hpp"

#include <fmt/format.h>
#include <fmt/ranges.h>
#include <zlib.h>

#include <algorithm>
#include <bit>
#include <cstring>
#include <map>
#include <set>
#include <utility>

#include "core/error.hpp"
#include "core/fs.hpp"
#include "io/pickle.hpp"

namespace bertbench::io {
namespace {

using pickle::Kind;
using pickle::Value;

constexpr uint8_t kLegacyMagic[10] = {0x6c, 0xfc, 0x9c, 0x46, 0xf9, 0x20, 0x6a, 0xa8, 0x50, 0x19};
constexpr const char* kAllowed =
    "a state dict needs only collections.OrderedDict, torch._utils._rebuild_tensor_v2, "
    "torch._utils._rebuild_parameter and torch.<T>Storage";

uint64_t rd(const std::byte* p, int n) {
    uint64_t v = 0;
    for (int k = 0; k < n; ++k) v |= uint64_t(static_cast<uint8_t>(p[k])) << (8 * k);
    return v;
}

struct ZipEntry {
    std::string name;
    uint64_t offset = 0, size = 0;  // the data, inside the file
    uint32_t crc = 0;
};

// The central directory of a zip image; Error naming `label` on anything out of bounds.
std::vector<ZipEntry> read_zip(const std::byte* f, size_t n, const std::string& label) {
    auto bad = [&](const std::string& what) { fail("{}: zip: {}", label, what); };
    if (n < 22) bad(fmt::format("{} bytes, too short for an end-of-central-directory record", n));
    size_t eocd = n - 22;
    const size_t lowest = n > 22 + 65535 ? n - 22 - 65535 : 0;
    while (rd(f + eocd, 4) != 0x06054b50) {
        if (eocd == lowest) bad("no end-of-central-directory record (truncated file?)");
        --eocd;
    }
    uint64_t count = rd(f + eocd + 10, 2), cd_size = rd(f + eocd + 12, 4), cd_off = rd(f + eocd + 16, 4);
    if (count == 0xFFFF || cd_size == 0xFFFFFFFF || cd_off == 0xFFFFFFFF) {  // zip64
        if (eocd < 20 || rd(f + eocd - 20, 4) != 0x07064b50) bad("expected a zip64 locator");
        const uint64_t z = rd(f + eocd - 20 + 8, 8);
        if (z > n || n - z < 56 || rd(f + z, 4) != 0x06064b50) bad("zip64 end record outside the file");
        count = rd(f + z + 32, 8);
        cd_size = rd(f + z + 40, 8);
        cd_off = rd(f + z + 48, 8);
    }
    if (cd_off > n || cd_size > n - cd_off)
        bad(fmt::format("central directory at {} (+{} bytes) outside the {}-byte file", cd_off, cd_size, n));
    if (count > cd_size / 46) bad(fmt::format("{} entries cannot fit in a {}-byte directory", count, cd_size));
    std::vector<ZipEntry> out;
    out.reserve(count);
    const std::byte* p = f + cd_off;
    const std::byte* end = p + cd_size;
    for (uint64_t k = 0; k < count; ++k) {
        if (end - p < 46 || rd(p, 4) != 0x02014b50) bad(fmt::format("central directory entry {}: bad signature", k));
        const uint64_t flags = rd(p + 8, 2), method = rd(p + 10, 2);
        ZipEntry e;
        e.crc = uint32_t(rd(p + 16, 4));
        uint64_t csize = rd(p + 20, 4), usize = rd(p + 24, 4), off = rd(p + 42, 4);
        const size_t nl = rd(p + 28, 2), xl = rd(p + 30, 2), cl = rd(p + 32, 2);
        if (size_t(end - p) - 46 < nl + xl + cl) bad(fmt::format("central directory entry {}: truncated", k));
        e.name.assign(reinterpret_cast<const char*>(p + 46), nl);
        for (const std::byte* x = p + 46 + nl; x + 4 <= p + 46 + nl + xl;) {  // zip64 sizes
            const uint64_t id = rd(x, 2), len = rd(x + 2, 2);
            const std::byte* v = x + 4;
            if (v + len > p + 46 + nl + xl) break;
            if (id == 1) {
                const std::byte* ve = v + len;
                if (usize == 0xFFFFFFFF && v + 8 <= ve) usize = rd(v, 8), v += 8;
                if (csize == 0xFFFFFFFF && v + 8 <= ve) csize = rd(v, 8), v += 8;
                if (off == 0xFFFFFFFF && v + 8 <= ve) off = rd(v, 8);
            }
            x += 4 + len;
        }
        p += 46 + nl + xl + cl;
        if (flags & 1) bad(fmt::format("entry {}: encrypted", e.name));
        if (method != 0 || csize != usize)
            bad(fmt::format("entry {}: compression method {}: expected 0 (stored; torch.save never "
                            "compresses, hint: was the file re-zipped?)", e.name, method));
        if (off > n || n - off < 30 || rd(f + off, 4) != 0x04034b50)
            bad(fmt::format("entry {}: local header at {} outside the file or damaged", e.name, off));
        e.offset = off + 30 + rd(f + off + 26, 2) + rd(f + off + 28, 2);
        e.size = usize;
        if (e.offset > n || e.size > n - e.offset)
            bad(fmt::format("entry {}: {} bytes at {} run past the end of the {}-byte file", e.name,
                            e.size, e.offset, n));
        out.push_back(std::move(e));
    }
    return out;
}

size_t element_size(DType d) { return dtype_size(d); }

uint64_t sat_mul(uint64_t a, uint64_t b) {
    uint64_t r;
    return __builtin_mul_overflow(a, b, &r) ? UINT64_MAX : r;
}
uint64_t sat_add(uint64_t a, uint64_t b) {
    uint64_t r;
    return __builtin_add_overflow(a, b, &r) ? UINT64_MAX : r;
}

// Storage bytes by key, as the container found them.
struct StorageBytes {
    const std::byte* data = nullptr;
    size_t numel = 0;  // elements present
    DType dtype = DType::F32;
    const ZipEntry* entry = nullptr;  // zip: for the CRC check
};

// The pickle's structure walked once (each value visited once: memo references make a DAG).
struct Walker {
    const pickle::Unpickler& u;
    const std::string& label;
    std::set<uint32_t> seen;
    size_t tensors = 0;
    void walk(uint32_t v, const std::string& where, int depth, bool allow_refused) {
        if (!seen.insert(v).second) return;
        if (depth > 100) fail("{}: {}: nested deeper than 100 levels", label, where);
        const Value& x = u.at(v);
        if (x.kind == Kind::refused && !allow_refused)
            fail("{}: pickle global '{}' refused at {} ({}); nothing in the file was run", label,
                 x.s, where, kAllowed);
        if (x.kind == Kind::tensor) ++tensors;
        for (uint32_t c : x.items) walk(c, where, depth + 1, allow_refused);
    }
};

}  // namespace

TorchFormat torch_format(std::span<const std::byte> head) {
    auto b = [&](size_t k) { return static_cast<uint8_t>(head[k]); };
    if (head.size() >= 4 && b(0) == 'P' && b(1) == 'K' && b(2) == 3 && b(3) == 4) return TorchFormat::zip;
    // legacy: the pickled magic number, PROTO n LONG1 <10 bytes>; protocols 4 and 5 put a FRAME
    // (0x95 and an 8-byte length) after PROTO, as torch.save(..., pickle_protocol=4) writes it
    if (head.size() < 3 || b(0) != 0x80 || b(1) < 2 || b(1) > 5) return TorchFormat::none;
    const size_t at = b(1) >= 4 && b(2) == 0x95 ? 11 : 2;
    if (head.size() >= at + 12 && b(at) == 0x8a && b(at + 1) == 10 &&
        std::memcmp(head.data() + at + 2, kLegacyMagic, 10) == 0)
        return TorchFormat::legacy;
    return TorchFormat::none;
}

const char* torch_format_name(TorchFormat f) {
    return f == TorchFormat::zip ? "zip" : f == TorchFormat::legacy ? "legacy" : "none";
}

std::string TorchTensor::shape_str() const { return fmt::format("[{}]", fmt::join(shape, ", ")); }

TorchCheckpointReader::TorchCheckpointReader(const std::string& path)
    : path_(path), bytes_(FileBytes::map(path, "PyTorch checkpoint")) {
    file_ = bytes_.data();
    file_size_ = bytes_.size();
    parse();
}

TorchCheckpointReader TorchCheckpointReader::from_bytes(std::string bytes, const std::string& label) {
    TorchCheckpointReader r;
    r.path_ = label;
    r.bytes_ = FileBytes::image(std::move(bytes));
    r.file_ = r.bytes_.data();
    r.file_size_ = r.bytes_.size();
    r.parse();
    return r;
}

const TorchTensor* TorchCheckpointReader::find(const std::string& name) const {
    const auto it = std::lower_bound(index_.begin(), index_.end(), name,
                                     [&](size_t i, const std::string& n) { return tensors_[i].name < n; });
    return it != index_.end() && tensors_[*it].name == name ? &tensors_[*it] : nullptr;
}

std::string TorchCheckpointReader::ignored_summary() const {
    if (ignored_.empty()) return "";
    return fmt::format("ignored {}", fmt::join(ignored_, ", "));
}

void TorchCheckpointReader::parse() {
    format_ = torch_format({file_, file_size_});
    if (format_ == TorchFormat::zip) parse_zip();
    else if (format_ == TorchFormat::legacy) parse_legacy();
    else fail("{}: expected a PyTorch checkpoint (a zip archive or torch's legacy magic number), found neither", path_);
    index_.resize(tensors_.size());
    for (size_t i = 0; i < index_.size(); ++i) index_[i] = i;
    std::sort(index_.begin(), index_.end(), [&](size_t a, size_t b) { return tensors_[a].name < tensors_[b].name; });
}

namespace {

// From the object pickle and its storages: the state dict's tensors, the rest listed as ignored.
void collect(const pickle::Unpickler& u, const std::map<std::string, StorageBytes>& storages,
             const std::string& label, size_t file_size, std::string* sd_key,
             std::vector<TorchTensor>* tensors, std::vector<std::string>* ignored) {
    uint64_t total = 0;  // elements of all state-dict tensors: readers allocate this much
    const Value& root = u.at(u.root());
    Walker w{u, label, {}, 0};
    if (root.kind == Kind::refused) w.walk(u.root(), "the top level", 0, false);
    if (root.kind != Kind::dict)
        fail("{}: expected a state dict (a dict of tensors) at the top level, got {}", label, u.brief(root));
    uint32_t sd = u.root();
    for (const char* k : {"model", "state_dict"})
        if (const Value* v = u.get(root, k); v != nullptr && v->kind == Kind::dict) {
            *sd_key = k;
            for (size_t i = 0; i + 1 < root.items.size(); i += 2)
                if (u.at(root.items[i]).kind == Kind::string && u.at(root.items[i]).s == k) sd = root.items[i + 1];
            break;
        }
    // The values NVIDIA's data_loader entry created (pickles build a dict's value after its key
    // and before the next key) may name any global: that entry is ignored, never built.
    uint32_t dl_begin = 0, dl_end = 0;
    if (!sd_key->empty())
        for (size_t i = 0; i + 1 < root.items.size(); i += 2)
            if (u.at(root.items[i]).kind == Kind::string && u.at(root.items[i]).s == "data_loader") {
                dl_begin = root.items[i];
                dl_end = i + 2 < root.items.size() ? root.items[i + 2] : uint32_t(u.size());
            }
    for (uint32_t v = 0; v < u.size(); ++v)
        if (u.at(v).kind == Kind::refused && !(v > dl_begin && v < dl_end))
            fail("{}: pickle global '{}' refused ({}); nothing in the file was run", label, u.at(v).s, kAllowed);
    const Value& d = u.at(sd);
    std::set<std::string> names;
    for (size_t i = 0; i + 1 < d.items.size(); i += 2) {
        const Value& key = u.at(d.items[i]);
        const Value& val = u.at(d.items[i + 1]);
        if (key.kind != Kind::string)
            fail("{}: state dict{}: expected str keys, got {}", label, sd_key->empty() ? "" : " '" + *sd_key + "'", u.brief(key));
        if (!names.insert(key.s).second)
            fail("{}: tensor \"{}\": the name appears twice in the state dict", label, key.s);
        if (val.kind != Kind::tensor) {
            ignored->push_back(fmt::format("{} ({})", key.s, u.brief(val)));
            continue;
        }
        const Value& st = u.at(val.items[0]);
        const auto it = storages.find(st.s);
        if (it == storages.end()) fail("{}: tensor \"{}\": storage '{}' is not in the file", label, key.s, st.s);
        const StorageBytes& sb = it->second;
        if (sb.dtype != st.dtype)
            fail("{}: tensor \"{}\": storage '{}' is {} here and {} elsewhere", label, key.s, st.s,
                 dtype_name(st.dtype), dtype_name(sb.dtype));
        TorchTensor t;
        t.name = key.s;
        t.storage = st.s;
        t.dtype = st.dtype;
        t.shape = val.shape;
        t.stride = val.stride;
        t.offset = val.i;
        if (uint64_t(st.i) > sb.numel)
            fail("{}: tensor \"{}\": storage '{}' declares {} elements, the file holds {}", label,
                 key.s, st.s, st.i, sb.numel);
        // A legacy storage view: a window of its root storage.
        size_t base = 0, avail = sb.numel;
        if (st.view_numel >= 0) {
            if (uint64_t(st.view_offset) > sb.numel || uint64_t(st.view_numel) > sb.numel - uint64_t(st.view_offset))
                fail("{}: tensor \"{}\": storage view [{}, +{}) outside its {}-element storage", label,
                     key.s, st.view_offset, st.view_numel, sb.numel);
            base = size_t(st.view_offset);
            avail = size_t(st.view_numel);
        }
        // Extent: offset + sum((size - 1) * stride) must stay inside the storage; the element
        // count may not exceed it (an expanded, stride-0 tensor would allocate beyond the file).
        uint64_t numel = 1, last = uint64_t(t.offset), dense = 1;  // saturating at 2^64 - 1
        for (size_t k = t.shape.size(); k-- > 0;) {
            const uint64_t n = uint64_t(t.shape[k]), st_k = uint64_t(t.stride[k]);
            numel = sat_mul(numel, n);
            if (n > 0) last = sat_add(last, sat_mul(n - 1, st_k));
            if (n != 1 && st_k != dense) t.contiguous = false;
            dense = sat_mul(dense, n);
        }
        if (numel > 0 && last >= avail)
            fail("{}: tensor \"{}\" {}: offset {} and strides [{}] reach element {}, the storage has {}",
                 label, key.s, t.shape_str(), t.offset, fmt::join(t.stride, ", "), last, avail);
        if (numel > avail)
            fail("{}: tensor \"{}\" {}: {} elements from a {}-element storage (an expanded tensor, "
                 "stride 0): not supported (hint: save t.contiguous())", label, key.s, t.shape_str(),
                 numel, avail);
        t.numel = size_t(numel);
        total += numel;
        if (total > file_size)
            fail("{}: tensor \"{}\": the state dict's tensors reach {} elements, more than the "
                 "file's {} bytes (one storage viewed over and over)", label, key.s, total, file_size);
        t.storage_numel = avail;
        t.data = sb.data + base * element_size(sb.dtype);
        tensors->push_back(std::move(t));
    }
    Walker sub{u, label, {}, 0};  // one visited set for all keys: each value walked once
    if (!sd_key->empty())
        for (size_t i = 0; i + 1 < root.items.size(); i += 2) {
            const Value& key = u.at(root.items[i]);
            if (root.items[i + 1] == sd) continue;
            const std::string k = key.kind == Kind::string ? key.s : u.brief(key);
            sub.tensors = 0;
            sub.walk(root.items[i + 1], k, 0, k == "data_loader");
            const Value& v = u.at(root.items[i + 1]);
            ignored->push_back(sub.tensors ? fmt::format("'{}' ({} tensor{})", k, sub.tensors, sub.tensors == 1 ? "" : "s")
                                           : fmt::format("'{}' ({})", k, u.brief(v)));
        }
}

}  // namespace

void TorchCheckpointReader::parse_zip() {
    const std::vector<ZipEntry> entries = read_zip(file_, file_size_, path_);
    if (entries.empty()) fail("{}: zip: no entries", path_);
    const std::string& first = entries[0].name;
    const std::string prefix = first.substr(0, first.find('/') + 1);  // "archive/"
    std::map<std::string, const ZipEntry*> by_name;
    for (const ZipEntry& e : entries)  // two of a name: torch reads one, and which is not ours to guess
        if (!by_name.emplace(e.name, &e).second)
            fail("{}: zip: expected each entry name once, got \"{}\" twice", path_, e.name);
    auto entry = [&](const std::string& n) {
        const auto it = by_name.find(prefix + n);
        return it == by_name.end() ? nullptr : it->second;
    };
    const ZipEntry* pkl = entry("data.pkl");
    if (pkl == nullptr) fail("{}: zip: expected a PyTorch archive ({}data.pkl), found no such entry", path_, prefix);
    if (const ZipEntry* bo = entry("byteorder"); bo != nullptr) {
        const std::string order(reinterpret_cast<const char*>(file_ + bo->offset), bo->size);
        if (order != "little")
            fail("{}: {}byteorder: expected \"little\", got \"{}\" (big-endian files are not read)",
                 path_, prefix, order.substr(0, 16));
    }
    if (uLong(crc32_z(0, reinterpret_cast<const Bytef*>(file_ + pkl->offset), size_t(pkl->size))) != pkl->crc)
        fail("{}: {}data.pkl: CRC-32 mismatch (the file is corrupt or truncated)", path_, prefix);
    const std::string label = path_ + ": " + prefix + "data.pkl";
    size_t pos = 0;
    const pickle::Unpickler u({file_ + pkl->offset, size_t(pkl->size)}, &pos, label);
    std::map<std::string, StorageBytes> storages;
    for (size_t v = 0; v < u.size(); ++v) {
        const Value& s = u.at(uint32_t(v));
        if (s.kind != Kind::storage || storages.count(s.s)) continue;
        const ZipEntry* e = entry("data/" + s.s);
        if (e == nullptr) fail("{}: storage '{}': expected the entry {}data/{}, found none", path_, s.s, prefix, s.s);
        const size_t es = element_size(s.dtype);
        if (e->size % es != 0)
            fail("{}: {}data/{}: {} bytes, not a whole number of {}-byte elements", path_, prefix, s.s, e->size, es);
        storages[s.s] = {file_ + e->offset, size_t(e->size / es), s.dtype, e};
    }
    collect(u, storages, path_, file_size_, &sd_key_, &tensors_, &ignored_);
    // The state dict's storages only: optimizer state is never read.
    std::set<std::string> checked;
    for (const TorchTensor& t : tensors_) {
        if (!checked.insert(t.storage).second) continue;
        const ZipEntry* e = storages.at(t.storage).entry;
        if (uLong(crc32_z(0, reinterpret_cast<const Bytef*>(file_ + e->offset), size_t(e->size))) != e->crc)
            fail("{}: {}: CRC-32 mismatch (the file is corrupt or truncated)", path_, e->name);
    }
}

void TorchCheckpointReader::parse_legacy() {
    const std::span<const std::byte> f{file_, file_size_};
    size_t pos = 0;
    const pickle::Unpickler magic(f, &pos, path_ + ": magic number");
    const pickle::Unpickler proto(f, &pos, path_ + ": protocol version");
    if (const Value& v = proto.at(proto.root()); v.kind != Kind::integer || v.i != 1001)
        fail("{}: legacy format: expected protocol version 1001, got {}", path_, proto.brief(v));
    const pickle::Unpickler info(f, &pos, path_ + ": sys_info");
    if (const Value* le = info.get(info.at(info.root()), "little_endian"); le == nullptr || le->kind != Kind::boolean || le->i != 1)
        fail("{}: sys_info: expected little_endian True (big-endian files are not read)", path_);
    const pickle::Unpickler u(f, &pos, path_ + ": object pickle");
    const pickle::Unpickler keys(f, &pos, path_ + ": storage keys");
    const Value& kl = keys.at(keys.root());
    if (kl.kind != Kind::list) fail("{}: expected the list of storage keys, got {}", path_, keys.brief(kl));
    std::map<std::string, DType> types;
    for (size_t v = 0; v < u.size(); ++v)
        if (const Value& s = u.at(uint32_t(v)); s.kind == Kind::storage) types.emplace(s.s, s.dtype);
    std::map<std::string, StorageBytes> storages;
    for (uint32_t k : kl.items) {
        const Value& key = keys.at(k);
        if (key.kind != Kind::string) fail("{}: storage keys: expected strs, got {}", path_, keys.brief(key));
        const auto t = types.find(key.s);
        if (t == types.end()) fail("{}: storage '{}' is listed but no tensor uses it", path_, key.s);
        if (storages.count(key.s)) fail("{}: storage '{}' listed twice", path_, key.s);
        if (file_size_ - pos < 8) fail("{}: storage '{}': truncated before its element count", path_, key.s);
        const uint64_t numel = rd(file_ + pos, 8);
        pos += 8;
        const size_t es = element_size(t->second);
        if (numel > (file_size_ - pos) / es)
            fail("{}: storage '{}': {} elements of {} bytes declared, {} bytes left in the file", path_,
                 key.s, numel, es, file_size_ - pos);
        storages[key.s] = {file_ + pos, size_t(numel), t->second, nullptr};
        pos += size_t(numel) * es;
    }
    collect(u, storages, path_, file_size_, &sd_key_, &tensors_, &ignored_);
}

bool TorchCheckpointReader::is_float(const TorchTensor& t) const {
    return t.dtype == DType::F32 || t.dtype == DType::F16 || t.dtype == DType::BF16 || t.dtype == DType::F64;
}

void TorchCheckpointReader::read_f32(const TorchTensor& t, std::span<float> out) const {
    if (!is_float(t)) fail("{}: tensor \"{}\": expected a float tensor, got {}", path_, t.name, dtype_name(t.dtype));
    if (out.size() != t.numel)
        fail("{}: tensor \"{}\": expected {} elements, the file has {} {}", path_, t.name, out.size(), t.numel, t.shape_str());
    const size_t es = element_size(t.dtype);
    auto one = [&](size_t e) -> float {
        const std::byte* p = t.data + e * es;
        switch (t.dtype) {
            case DType::F32: return std::bit_cast<float>(uint32_t(rd(p, 4)));
            case DType::F16: return half_to_float(uint16_t(rd(p, 2)));
            case DType::BF16: return std::bit_cast<float>(uint32_t(rd(p, 2)) << 16);
            default: return float(std::bit_cast<double>(rd(p, 8)));
        }
    };
    if (t.contiguous) {
        if (t.dtype == DType::F32 && !out.empty())
            std::memcpy(out.data(), t.data + size_t(t.offset) * 4, out.size() * 4);
        else
            for (size_t i = 0; i < out.size(); ++i) out[i] = one(size_t(t.offset) + i);
        return;
    }
    std::vector<int64_t> idx(t.shape.size(), 0);  // row-major walk of a strided view
    size_t e = size_t(t.offset);
    for (size_t i = 0; i < out.size(); ++i) {
        out[i] = one(e);
        for (size_t k = t.shape.size(); k-- > 0;) {
            e += size_t(t.stride[k]);
            if (++idx[k] < t.shape[k]) break;
            e -= size_t(t.stride[k]) * size_t(t.shape[k]);
            idx[k] = 0;
        }
    }
}

std::vector<float> TorchCheckpointReader::read_f32(const TorchTensor& t) const {
    std::vector<float> out(t.numel);
    read_f32(t, out);
    return out;
}

// ---- writer ----

void write_torch_checkpoint(const std::string& path, const std::vector<TorchOutTensor>& tensors,
                            const std::string& under_key) {
    const std::string prefix = "archive/";
    // one storage per distinct span: a tensor whose values are an earlier one's shares its storage
    std::vector<size_t> storage(tensors.size());
    for (size_t k = 0; k < tensors.size(); ++k) {
        storage[k] = k;
        for (size_t j = 0; j < k; ++j)
            if (storage[j] == j && tensors[j].values.data() == tensors[k].values.data() &&
                tensors[j].values.size() == tensors[k].values.size())
                storage[k] = j;
    }
    pickle::Pickler pk;
    if (!under_key.empty()) {
        pk.empty_dict();
        pk.string(under_key);
    }
    pk.global("collections", "OrderedDict");
    pk.empty_tuple();
    pk.reduce();
    pk.mark();
    for (size_t k = 0; k < tensors.size(); ++k) {
        const TorchOutTensor& t = tensors[k];
        pk.string(t.name);
        pk.global("torch._utils", "_rebuild_tensor_v2");
        pk.mark();
        pk.mark();  // persistent id
        pk.string("storage");
        pk.global("torch", "FloatStorage");
        pk.string(std::to_string(storage[k]));
        pk.string("cpu");
        pk.integer(int64_t(t.values.size()));
        pk.tuple();
        pk.binpersid();
        pk.integer(0);
        pk.mark();
        for (int64_t d : t.shape) pk.integer(d);
        pk.tuple();
        pk.mark();  // row-major strides
        std::vector<int64_t> stride(t.shape.size(), 1);
        for (size_t d = t.shape.size(); d-- > 1;) stride[d - 1] = stride[d] * t.shape[d];
        for (int64_t s : stride) pk.integer(s);
        pk.tuple();
        pk.boolean(false);
        pk.global("collections", "OrderedDict");
        pk.empty_tuple();
        pk.reduce();
        pk.tuple();
        pk.reduce();
    }
    pk.setitems();
    if (!under_key.empty()) pk.setitem();
    const std::string pkl = pk.finish();

    struct Out {
        std::string name;
        const void* data;
        size_t size;
        uint64_t offset = 0;
        uint32_t crc = 0;
    };
    std::vector<Out> outs;
    outs.push_back({prefix + "data.pkl", pkl.data(), pkl.size()});
    outs.push_back({prefix + "byteorder", "little", 6});
    for (size_t k = 0; k < tensors.size(); ++k)
        if (storage[k] == k)
            outs.push_back({prefix + "data/" + std::to_string(k), tensors[k].values.data(), tensors[k].values.size_bytes()});
    outs.push_back({prefix + "version", "3\n", 2});

    AtomicFile f(path);
    uint64_t at = 0;
    auto put = [&](uint64_t v, int n) {
        char b[8];
        for (int k = 0; k < n; ++k) b[k] = char(v >> (8 * k));
        f.write(b, size_t(n));
        at += uint64_t(n);
    };
    auto bytes = [&](const void* p, size_t n) {
        if (n) f.write(p, n);
        at += n;
    };
    for (Out& o : outs) {
        o.offset = at;
        o.crc = uint32_t(crc32_z(0, static_cast<const Bytef*>(o.data), o.size));
        // Pad the local header's extra field ("FB", as torch does) so the data is 64-byte aligned.
        size_t pad = (64 - (at + 30 + o.name.size() + 4) % 64) % 64;
        put(0x04034b50, 4), put(20, 2), put(0, 2), put(0, 2), put(0, 2), put(0x21, 2);
        put(o.crc, 4), put(o.size, 4), put(o.size, 4), put(o.name.size(), 2), put(pad + 4, 2);
        bytes(o.name.data(), o.name.size());
        put(0x4246, 2), put(pad, 2);
        bytes(std::string(pad, 'Z').data(), pad);
        bytes(o.data, o.size);
        if (at > 0xFFFFFFF0u)
            fail("{}: the checkpoint would pass 4 GiB; zip64 is not written (hint: --to=safetensors)", path);
    }
    const uint64_t cd = at;
    for (const Out& o : outs) {
        put(0x02014b50, 4), put(20, 2), put(20, 2), put(0, 2), put(0, 2), put(0, 2), put(0x21, 2);
        put(o.crc, 4), put(o.size, 4), put(o.size, 4), put(o.name.size(), 2), put(0, 2), put(0, 2);
        put(0, 2), put(0, 2), put(0, 4), put(o.offset, 4);
        bytes(o.name.data(), o.name.size());
    }
    const uint64_t cd_size = at - cd;
    put(0x06054b50, 4), put(0, 2), put(0, 2), put(outs.size(), 2), put(outs.size(), 2);
    put(cd_size, 4), put(cd, 4), put(0, 2);
    if (outs.size() > 0xFFFF) fail("{}: {} tensors: more than a zip without zip64 holds", path, tensors.size());
    f.commit();
}

}  // namespace bertbench::io
