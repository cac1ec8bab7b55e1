// NVIDIA DeepLearningExamples' HDF5 pretraining shards (PyTorch/LanguageModeling/BERT), read and
// written with libhdf5's C API. Schema: six root datasets input_ids i4 (N,T), input_mask i1 (N,T),
// segment_ids i1 (N,T), masked_lm_positions i4 (N,P), masked_lm_ids i4 (N,P),
// next_sentence_labels i1 (N). No weights are stored: as in run_pretraining.py's
// pretraining_dataset, masked_lm_positions == 0 marks padding and the predictions before the
// first 0 (all P if there is none) have weight 1.0, the rest 0.0. Errors are one line:
// "[hdf5] <file>: dataset <name>: expected ..., got ..." (libhdf5's own error stack is silenced).
#pragma once

#include <array>
#include <cstdint>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "io/example.hpp"

namespace bertbench {
class AtomicFile;  // core/fs.hpp
}  // namespace bertbench

namespace bertbench::io {

// True for the extensions the readers treat as HDF5 (".hdf5", ".h5", any letter case).
bool is_hdf5_path(std::string_view path);

// The schema, in NVIDIA's writer's order. `width`: the flag that fixes the second dimension.
struct Hdf5DatasetSpec {
    const char* name;
    int bytes;  // NVIDIA's writer: a signed integer of this many bytes (i4 / i1); read: any integer
    enum class Width { seq, pred, none } width;
};
inline constexpr std::array<Hdf5DatasetSpec, 6> kHdf5Datasets{{
    {"input_ids", 4, Hdf5DatasetSpec::Width::seq},
    {"input_mask", 1, Hdf5DatasetSpec::Width::seq},
    {"segment_ids", 1, Hdf5DatasetSpec::Width::seq},
    {"masked_lm_positions", 4, Hdf5DatasetSpec::Width::pred},
    {"masked_lm_ids", 4, Hdf5DatasetSpec::Width::pred},
    {"next_sentence_labels", 1, Hdf5DatasetSpec::Width::none},
}};

// What libhdf5 reports about one dataset, before anything is read.
struct Hdf5DatasetInfo {
    bool found = false;  // a dataset of that name exists in the root group
    bool is_integer = false;
    bool is_bool = false;  // h5py's numpy bool: a one-byte enum of FALSE = 0 and TRUE = 1
    size_t type_size = 0;
    std::string type_name;       // for messages: "int32", "uint8", "float64", "string", ...
    bool simple = true;          // false: a scalar or null dataspace
    std::vector<uint64_t> dims;  // current extent
};

// Checks the six datasets (in kHdf5Datasets order) against the schema: present, an integer of
// 1, 2, 4 or 8 bytes (signed or not, converted on reading; h5py's bool for the one-byte
// datasets, which NVIDIA's loader reads as 0 and 1 too), rank 2 with widths max_seq_length /
// max_predictions_per_seq (rank 1 for next_sentence_labels), equal first dimensions. Returns N.
// Error names path and dataset.
uint64_t check_hdf5_schema(std::string_view path, const std::array<Hdf5DatasetInfo, 6>& info,
                           int max_seq_length, int max_predictions_per_seq);

// A whole shard in memory, row-major, in the stored types.
struct Hdf5ShardArrays {
    uint64_t records = 0;                                     // N
    int max_seq_length = 0, max_predictions_per_seq = 0;      // T, P
    std::vector<int32_t> input_ids;                           // (N, T)
    std::vector<int8_t> input_mask, segment_ids;              // (N, T)
    std::vector<int32_t> masked_lm_positions, masked_lm_ids;  // (N, P)
    std::vector<int8_t> next_sentence_labels;                 // (N)
};

// Error unless every array has the size its (N, T, P) implies (internal consistency).
void check_hdf5_arrays(std::string_view path, const Hdf5ShardArrays& a);

// Record `i` as the TFRecord path yields it, weights derived by NVIDIA's rule. Checks the values
// the pipeline relies on: ids >= 0, input_mask and next_sentence_labels 0/1, segment_ids >= 0,
// used positions in [1, T), used masked_lm_ids >= 0. `where` prefixes errors ("file: record 7").
void decode_hdf5_record(const Hdf5ShardArrays& a, uint64_t i, std::string_view where,
                        PretrainingRecord& out);

// The hard limits on what a shard may make the reader allocate (docs/fuzzing.md, resource rule).
// A chunk is decompressed whole: h5py's writer makes chunks of at most 1 MiB, libhdf5 allows 4 GiB.
inline constexpr uint64_t kHdf5MaxChunkBytes = 16ull << 20;
// Rows are read in blocks of about this many bytes (all six datasets), whatever N declares.
inline constexpr uint64_t kHdf5BlockBytes = 8ull << 20;

// How one dataset's values are stored, as far as reading them safely needs (Hdf5ShardReader).
struct Hdf5DatasetStorage {
    uint64_t chunk_bytes = 0;     // one chunk uncompressed; 0: not chunked
    std::vector<uint64_t> chunk;  // chunk shape
    int deflate = -1, fletcher32 = -1;  // index in the filter pipeline; -1: none
    uint64_t file_base = 0;  // chunked: where the file's addresses count from (after a user block)
};

// An open shard. Opening checks, before any value is read: the schema (check_hdf5_schema); every
// dataset stored in the file itself (contiguous, chunked or compact layout: a virtual dataset or
// external storage is refused); only filters built into libhdf5 (no plugin is ever loaded);
// chunks of at most kHdf5MaxChunkBytes; and every declared row backed by stored bytes (a
// contiguous dataset's bytes inside the file, every chunk of a chunked one's extent written).
// Filters: gzip/deflate, shuffle, fletcher32 in h5py's order. Before libhdf5 reads a chunk, its
// record in the chunk index must put it inside the file and decode to exactly the chunk's size:
// stored as that many bytes (plus fletcher32's 4), or, deflated, inflating (into 64 KiB,
// counting) to exactly that many: libhdf5's deflate would grow its buffer to the stream's end (a
// decompression bomb), and a shorter chunk was read past its buffer. Errors are one line naming
// the file and dataset. Not thread-safe; any
// number of readers may be open at once (libhdf5 is called under one lock).
class Hdf5ShardReader {
  public:
    // `predictions_up_to`: the masked_lm_* datasets may be narrower than max_predictions_per_seq
    // (NVIDIA's loader: the flag only caps the predictions a row has; the rows read then have the
    // shard's own width). Otherwise their width must equal it. A width of 0 is the shard's own.
    Hdf5ShardReader(const std::string& path, int max_seq_length, int max_predictions_per_seq,
                    bool predictions_up_to = false);
    ~Hdf5ShardReader();
    Hdf5ShardReader(const Hdf5ShardReader&) = delete;
    Hdf5ShardReader& operator=(const Hdf5ShardReader&) = delete;

    uint64_t records() const { return records_; }  // N
    uint64_t block_rows() const;  // rows per block: kHdf5BlockBytes / bytes per row, >= 1
    // Rows [first, first + count) as a shard of `count` records (values unchecked, as read).
    Hdf5ShardArrays read_rows(uint64_t first, uint64_t count) const;
    const std::string& path() const { return path_; }
    int max_seq_length() const { return max_seq_length_; }  // T of the rows read
    int max_predictions_per_seq() const { return max_predictions_per_seq_; }  // P of the rows read

  private:
    std::string path_;
    int max_seq_length_ = 0, max_predictions_per_seq_ = 0;
    uint64_t records_ = 0;
    uint64_t file_size_ = 0;
    int64_t file_ = -1;                          // hid_t of the open file
    std::array<Hdf5DatasetStorage, 6> storage_;  // kHdf5Datasets order
};

// Reads and checks a whole shard (Hdf5ShardReader, then array sizes; values are checked per record
// by decode_hdf5_record). For tests and tools: the input pipeline reads blocks. Refuses a shard
// larger than the machine's memory before allocating.
Hdf5ShardArrays read_hdf5_shard(const std::string& path, int max_seq_length,
                                int max_predictions_per_seq);

// Reads and checks every record of a shard a block at a time (Hdf5ShardReader::block_rows), so
// that memory stays at one block whatever the shard declares or inflates to; returns the record
// count. For a writer that checks a shard it wrote before reusing it (prepare's resume).
uint64_t verify_hdf5_shard(const std::string& path, int max_seq_length, int max_predictions_per_seq);

// Writes `a` as NVIDIA's writer does (h5py create_dataset(..., compression='gzip') per dataset in
// schema order: chunk shape from h5py's guess_chunk, deflate level 4, fill time alloc, no
// shuffle/fletcher32, no timestamps). Zero-length dims are chunked as h5py chunks them
// (guessed as 1024). Atomic: "<path>.tmp.<pid>", fsync, rename.
void write_hdf5_shard(const std::string& path, const Hdf5ShardArrays& a);

// h5py's guess_chunk (h5py/_hl/filters.py) for a fixed-size dataset of `shape` and item size.
std::vector<uint64_t> h5py_guess_chunk(const std::vector<uint64_t>& shape, size_t item_size);

// Collects records in memory and writes the shard at the end (the dataset shapes depend on N),
// atomically as write_hdf5_shard does. A writer of several files hands their stage() to
// commit_together (core/fs.hpp), so that no file appears under its name unless all were written.
// Destroyed before close() or stage(): the temporary is removed (and on SIGINT/SIGTERM/SIGHUP, as
// AtomicFile's).
class Hdf5ShardWriter {
  public:
    // Creates the temporary "<path>.tmp.<pid>" (error naming `path` if it cannot be).
    Hdf5ShardWriter(std::string path, int max_seq_length, int max_predictions_per_seq);
    ~Hdf5ShardWriter();
    Hdf5ShardWriter(Hdf5ShardWriter&&) noexcept;
    // Error if the record cannot round-trip through the schema: wrong lengths, values outside the
    // stored types, or weights other than 1.0 for the first k predictions (positions > 0) then 0.0
    // with position and id 0 (NVIDIA's reader would derive different weights).
    void write(const PretrainingRecord& r);
    void close();  // writes the datasets, fsync, rename to `path`; idempotent
    // The datasets written into the temporary, which is returned for commit_together (which
    // syncs and renames it); nothing under `path` yet; the writer is closed after it
    std::unique_ptr<AtomicFile> stage();
    uint64_t records() const { return records_; }
    const std::string& path() const { return path_; }

  private:
    void finish();  // writes the datasets into the temporary; idempotent
    std::string path_;
    Hdf5ShardArrays a_;
    uint64_t records_ = 0;
    std::unique_ptr<AtomicFile> file_;  // null once closed
    bool finished_ = false;
};

// Layout of one dataset as stored (for tests and `describe`-style reports).
struct Hdf5DatasetLayout {
    std::string name, type_name;          // type_name as in Hdf5DatasetInfo, plus "LE"/"BE" order
    std::vector<uint64_t> shape, chunks;  // chunks empty: not chunked
    int deflate_level = -1;               // -1: no deflate filter
    bool shuffle = false, fletcher32 = false;
    int num_filters = 0;
    bool fill_time_alloc = false;
    bool fill_value_default = true;  // the library default fill value (0)
};
// Every dataset in the root group, sorted by name.
std::vector<Hdf5DatasetLayout> hdf5_layout(const std::string& path);

}  // namespace bertbench::io
