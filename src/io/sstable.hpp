// LevelDB-format sorted string table, as TensorFlow's core/lib/io/table* writes it (no filters, no
// meta blocks): [data blocks][metaindex block][index block][48-byte footer], each block followed by
// a 5-byte trailer (type 0 = none / 1 = Snappy, masked CRC-32C of contents + type byte).
// Spec: ../shared/golden/tf_checkpoint/FORMAT.md section 3. The parser trusts nothing: every handle,
// varint, restart offset and key is bounds-checked, keys must be strictly increasing, data blocks
// must follow one another without overlap, and any problem is one Error line naming the file and
// the block (and entry) with what was expected and what was found.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

namespace bertbench::io {

struct SstEntry {
    std::string key, value;
};

struct SstBlockInfo {
    uint64_t offset = 0, size = 0;  // handle: contents (stored form) at offset, trailer after
    int type = 0;                   // 0 none, 1 Snappy
    uint64_t uncompressed_size = 0;
    uint64_t entries = 0;
    uint32_t num_restarts = 0;
    std::string index_key;  // the index block's separator for this data block ("" for others)
};

// The layout of a parsed table (what FORMAT.md's invariants and listing.json talk about).
struct SstInfo {
    uint64_t file_size = 0;
    SstBlockInfo metaindex, index;
    std::vector<SstBlockInfo> data_blocks;
};

// Parses a whole table image. `label` (the file's path) starts every error message.
std::vector<SstEntry> parse_sstable(std::string_view image, const std::string& label,
                                    SstInfo* info = nullptr);

struct SstBuildOptions {
    uint64_t block_size = 262144;  // TF's table_options.h default
    int restart_interval = 16;     // data blocks; the index block always uses 1
};

// Builds a table image as TF's TableBuilder does with kNoCompression: keys must be strictly
// increasing (BB_CHECK), blocks are cut at `block_size` (estimated size, after the entry that
// reaches it, or before an entry of >= 2 x block_size), index keys are FindShortestSeparator /
// FindShortSuccessor of the block's last key, and the metaindex block is empty.
std::string build_sstable(const std::vector<SstEntry>& entries, const SstBuildOptions& options = {});

}  // namespace bertbench::io
