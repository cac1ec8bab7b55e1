// LevelDB-format table reader and writer (TensorFlow core/lib/io: format, block, block_builder,
// table, table_builder); see sstable.hpp and FORMAT.md section 3 for the layout and the checks.
#include "io/sstable.hpp"

#include <snappy.h>

#include <algorithm>

#include "core/error.hpp"
#include "io/crc32c.hpp"
#include "io/wire.hpp"

namespace bertbench::io {
namespace {

constexpr uint64_t kTableMagic = 0xdb4775248b80fb57ull;
constexpr size_t kFooterSize = 48;   // 2 handles padded to 40 bytes + 8-byte magic
constexpr size_t kTrailerSize = 5;   // type byte + masked CRC-32C
constexpr size_t kMaxKeySize = 65536;                   // TF names are < 1 KiB
constexpr uint64_t kMaxDecodedKeyBytes = 64ull << 20;   // all keys together (bounds memory)

struct BlockHandle {
    uint64_t offset = 0, size = 0;
};

BlockHandle read_handle(wire::Cursor& c) {
    BlockHandle h;
    h.offset = c.varint64();
    h.size = c.varint64();
    return h;
}

// Returns the (uncompressed) contents of the block `h`, checking bounds, the trailer's CRC and type.
// `limit` is where blocks must end (the footer's start).
std::string_view read_block(std::string_view image, BlockHandle h, uint64_t limit,
                            const std::string& where, std::string& storage, SstBlockInfo* info) {
    if (h.offset > limit || h.size > limit - h.offset || kTrailerSize > limit - h.offset - h.size)
        fail(
            "{}: handle (offset {}, size {}) plus its {}-byte trailer: expected inside the {} "
            "bytes before the footer, found it past them (hint: the file is truncated or "
            "corrupt)",
            where, h.offset, h.size, kTrailerSize, limit);
    const char* p = image.data() + h.offset;
    const uint8_t type = static_cast<uint8_t>(p[h.size]);
    const uint32_t stored = wire::load_le32(p + h.size + 1);
    const uint32_t actual = mask_crc(crc32c(&type, 1, crc32c(p, h.size)));
    if (stored != actual)
        fail(
            "{}: block CRC-32C mismatch (expected 0x{:08x} as stored in its trailer, computed "
            "0x{:08x} over offset {} size {}); the file is corrupt",
            where, stored, actual, h.offset, h.size);
    info->offset = h.offset;
    info->size = h.size;
    info->type = type;
    if (type == 0) {
        info->uncompressed_size = h.size;
        return {p, h.size};
    }
    if (type != 1)
        fail("{}: block type: expected 0 (none) or 1 (Snappy), found {}", where, type);
    size_t n = 0;
    if (!snappy::GetUncompressedLength(p, h.size, &n) || n > 64 * h.size + 1024 ||
        !snappy::IsValidCompressedBuffer(p, h.size))
        fail("{}: Snappy block (offset {}, size {}): expected valid Snappy data, found corrupt "
             "data", where, h.offset, h.size);
    storage.resize(n);
    if (!snappy::RawUncompress(p, h.size, storage.data()))
        fail("{}: Snappy block (offset {}, size {}): decompression failed", where, h.offset,
             h.size);
    info->uncompressed_size = n;
    return storage;
}

// Appends the entries of one block to `out`, checking its structure (FORMAT.md 3.4).
void parse_block(std::string_view b, const std::string& where, std::vector<SstEntry>& out,
                 SstBlockInfo* info, uint64_t& key_bytes) {
    if (b.size() < 4)
        fail("{}: expected at least 4 bytes (the restart count), found {}", where, b.size());
    const uint32_t num = wire::load_le32(b.data() + b.size() - 4);
    if (num == 0 || num > (b.size() - 4) / 4)
        fail("{}: restart count: expected 1..{} for a block of {} bytes, found {}", where,
             (b.size() - 4) / 4, b.size(), num);
    const size_t entries_end = b.size() - 4 * (size_t(num) + 1);
    std::vector<uint32_t> restarts(num);
    for (uint32_t i = 0; i < num; ++i) {
        restarts[i] = wire::load_le32(b.data() + entries_end + 4 * size_t(i));
        const bool ok = i == 0 ? restarts[0] == 0
                               : restarts[i] > restarts[i - 1] && restarts[i] < entries_end;
        if (!ok)
            fail("{}: restart point {}: expected {}, found offset {}", where, i,
                 i == 0 ? std::string("0")
                        : fmt::format("an offset in ({}, {})", restarts[i - 1], entries_end),
                 restarts[i]);
    }
    wire::Cursor c(b.substr(0, entries_end), where);
    std::string key;
    size_t r = 0;  // next restart point to match
    uint64_t n = 0;
    while (!c.done()) {
        const size_t at = c.pos();
        const uint32_t shared = c.varint32();
        const uint32_t non_shared = c.varint32();
        const uint32_t value_len = c.varint32();
        if (r < num && restarts[r] < at)
            fail("{}: restart point {} (offset {}): expected the start of an entry, found the "
                 "middle of entry {}", where, r, restarts[r], n - 1);
        const bool restart = r < num && restarts[r] == at;
        if (restart) ++r;
        if (restart && shared != 0)
            fail("{}: entry {} at restart point {}: expected shared key length 0, found {}", where,
                 n, r - 1, shared);
        if (shared > key.size())
            fail("{}: entry {}: shared key length {} is longer than the previous key ({} bytes)",
                 where, n, shared, key.size());
        if (uint64_t(shared) + non_shared > kMaxKeySize)
            fail("{}: entry {}: key of {} bytes: expected at most {}", where, n,
                 uint64_t(shared) + non_shared, kMaxKeySize);
        const std::string_view delta = c.bytes(non_shared);
        const std::string_view value = c.bytes(value_len);
        key.resize(shared);
        key.append(delta);
        key_bytes += key.size();
        if (key_bytes > kMaxDecodedKeyBytes)
            fail("{}: entry {}: the keys add up to more than {} bytes (hint: corrupt prefix "
                 "compression)", where, n, kMaxDecodedKeyBytes);
        out.push_back({key, std::string(value)});
        ++n;
    }
    if (r < num && !(n == 0 && entries_end == 0))  // an empty block has its one restart at 0
        fail("{}: restart point {} (offset {}): expected the start of an entry, found none there",
             where, r, restarts[r]);
    info->entries = n;
    info->num_restarts = num;
}

// Bytewise comparison as unsigned bytes (std::string's char_traits<char> compares unsigned).
bool less(const std::string& a, const std::string& b) {
    return a.compare(b) < 0;
}

}  // namespace

std::vector<SstEntry> parse_sstable(std::string_view image, const std::string& label,
                                    SstInfo* info_out) {
    SstInfo info;
    info.file_size = image.size();
    if (image.size() < kFooterSize)
        fail("{}: expected at least {} bytes (the table footer), found {} (hint: not a "
             "TensorFlow checkpoint index, or truncated)", label, kFooterSize, image.size());
    const uint64_t footer_at = image.size() - kFooterSize;
    const char* footer = image.data() + footer_at;
    const uint64_t magic = wire::load_le64(footer + 40);
    if (magic != kTableMagic)
        fail("{}: table magic: expected 0x{:016x}, found 0x{:016x} (hint: not a TensorFlow "
             "checkpoint index, or truncated)", label, kTableMagic, magic);
    wire::Cursor fc(std::string_view(footer, 40), label + ": footer");
    const BlockHandle meta_h = read_handle(fc), index_h = read_handle(fc);

    std::string storage;
    uint64_t key_bytes = 0;
    {  // TF writes no meta blocks; the block is checked and its entries are ignored
        std::vector<SstEntry> meta;
        const std::string where = label + ": metaindex block";
        parse_block(read_block(image, meta_h, footer_at, where, storage, &info.metaindex), where,
                    meta, &info.metaindex, key_bytes);
    }
    std::vector<SstEntry> index;
    const std::string index_where = label + ": index block";
    parse_block(read_block(image, index_h, footer_at, index_where, storage, &info.index),
                index_where, index, &info.index, key_bytes);

    std::vector<SstEntry> out;
    uint64_t prev_end = 0;
    for (size_t i = 0; i < index.size(); ++i) {
        const std::string where = fmt::format("{}: data block {}", label, i);
        if (i > 0 && !less(index[i - 1].key, index[i].key))
            fail("{}: index key: expected keys in increasing order, found \"{}\" after \"{}\"",
                 index_where, index[i].key, index[i - 1].key);
        wire::Cursor hc(index[i].value, fmt::format("{}: entry {} (block handle)", index_where, i));
        const BlockHandle h = read_handle(hc);  // trailing bytes tolerated (TF does)
        if (h.offset < prev_end)
            fail("{}: offset {}: expected at least {} (data blocks follow one another without "
                 "overlap)", where, h.offset, prev_end);
        SstBlockInfo bi;
        bi.index_key = index[i].key;
        const size_t first = out.size();
        parse_block(read_block(image, h, footer_at, where, storage, &bi), where, out, &bi,
                    key_bytes);
        prev_end = h.offset + h.size + kTrailerSize;
        for (size_t k = first; k < out.size(); ++k) {
            const bool ordered = k == 0 ? true : less(out[k - 1].key, out[k].key);
            if (!ordered)
                fail("{}: entry {}: expected keys in strictly increasing order, found \"{}\" "
                     "after \"{}\"", where, k - first, out[k].key, out[k - 1].key);
            if (less(bi.index_key, out[k].key))
                fail("{}: entry {}: key \"{}\" is above the index separator \"{}\" (hint: the "
                     "index or the block is corrupt)", where, k - first, out[k].key, bi.index_key);
        }
        info.data_blocks.push_back(std::move(bi));
    }
    if (info_out != nullptr) *info_out = std::move(info);
    return out;
}

// ---- writer ----
namespace {

class BlockBuilder {
  public:
    explicit BlockBuilder(int interval) : interval_(interval) {}
    bool empty() const { return buf_.empty(); }
    size_t estimate() const { return buf_.size() + restarts_.size() * 4 + 4; }

    void add(const std::string& key, std::string_view value) {
        size_t shared = 0;
        if (counter_ < interval_) {
            const size_t m = std::min(last_.size(), key.size());
            while (shared < m && last_[shared] == key[shared]) ++shared;
        } else {
            restarts_.push_back(static_cast<uint32_t>(buf_.size()));
            counter_ = 0;
        }
        wire::put_varint(buf_, shared);
        wire::put_varint(buf_, key.size() - shared);
        wire::put_varint(buf_, value.size());
        buf_.append(key, shared, std::string::npos);
        buf_.append(value);
        last_ = key;
        ++counter_;
    }

    std::string finish() {  // contents; resets the builder
        std::string out = std::move(buf_);
        for (uint32_t r : restarts_) wire::put_fixed32(out, r);
        wire::put_fixed32(out, static_cast<uint32_t>(restarts_.size()));
        buf_.clear();
        restarts_.assign(1, 0);
        counter_ = 0;
        last_.clear();
        return out;
    }

  private:
    int interval_;
    std::string buf_, last_;
    std::vector<uint32_t> restarts_{0};
    int counter_ = 0;
};

void find_shortest_separator(std::string* start, const std::string& limit) {
    const size_t m = std::min(start->size(), limit.size());
    size_t i = 0;
    while (i < m && (*start)[i] == limit[i]) ++i;
    if (i >= m) return;  // one is a prefix of the other
    const uint8_t d = static_cast<uint8_t>((*start)[i]);
    if (d < 0xff && d + 1 < static_cast<uint8_t>(limit[i])) {
        (*start)[i] = static_cast<char>(d + 1);
        start->resize(i + 1);
    }
}

void find_short_successor(std::string* key) {
    for (size_t i = 0; i < key->size(); ++i)
        if (static_cast<uint8_t>((*key)[i]) != 0xff) {
            (*key)[i] = static_cast<char>(static_cast<uint8_t>((*key)[i]) + 1);
            key->resize(i + 1);
            return;
        }
}

}  // namespace

std::string build_sstable(const std::vector<SstEntry>& entries, const SstBuildOptions& o) {
    std::string file;
    BlockBuilder data(o.restart_interval), index(1);
    std::string last_key;
    bool pending = false;
    BlockHandle pending_h;
    auto write_block = [&](BlockBuilder& b) {
        const std::string contents = b.finish();
        BlockHandle h{file.size(), contents.size()};
        file += contents;
        const char type = 0;
        file.push_back(type);
        wire::put_fixed32(file, mask_crc(crc32c(&type, 1, crc32c(contents.data(), contents.size()))));
        return h;
    };
    auto put_handle = [](const BlockHandle& h) {
        std::string s;
        wire::put_varint(s, h.offset);
        wire::put_varint(s, h.size);
        return s;
    };
    auto flush = [&] {
        if (data.empty()) return;
        pending_h = write_block(data);
        pending = true;
    };
    for (size_t i = 0; i < entries.size(); ++i) {
        const SstEntry& e = entries[i];
        if (i > 0) {
            BB_CHECK(less(entries[i - 1].key, e.key));
            if (e.key.size() + e.value.size() >= 2 * o.block_size) flush();
        }
        if (pending) {
            find_shortest_separator(&last_key, e.key);
            index.add(last_key, put_handle(pending_h));
            pending = false;
        }
        last_key = e.key;
        data.add(e.key, e.value);
        if (data.estimate() >= o.block_size) flush();
    }
    flush();
    BlockBuilder meta(o.restart_interval);
    const BlockHandle meta_h = write_block(meta);
    if (pending) {
        find_short_successor(&last_key);
        index.add(last_key, put_handle(pending_h));
    }
    const BlockHandle index_h = write_block(index);
    std::string footer = put_handle(meta_h) + put_handle(index_h);
    footer.resize(40, '\0');
    wire::put_fixed32(footer, static_cast<uint32_t>(kTableMagic));
    wire::put_fixed32(footer, static_cast<uint32_t>(kTableMagic >> 32));
    return file + footer;
}

}  // namespace bertbench::io
