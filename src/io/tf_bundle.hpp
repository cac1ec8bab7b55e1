// TensorFlow checkpoints in the "tensor bundle" V2 format (TF 1.x Saver and TF 2.x): PREFIX.index,
// an SSTable (io/sstable.hpp) mapping "" to a BundleHeaderProto and each tensor name to a
// BundleEntryProto, and data shards PREFIX.data-SSSSS-of-NNNNN holding the raw little-endian bytes.
// Spec: ../shared/golden/tf_checkpoint/FORMAT.md (with TensorFlow source citations). The protos are
// decoded by hand (io/wire.hpp), as tf.train.Example is: four small messages, no libprotobuf.
// Every entry is validated when the index is opened (dtype, shape, size = numel x element size,
// shard id < num_shards); tensor bytes are checked against the entry's masked CRC-32C when read.
// Partitioned (sliced) variables are listed but not read (none are known in BERT checkpoints).
#pragma once

#include <cstdint>
#include <map>
#include <memory>
#include <span>
#include <string>
#include <vector>

#include "core/fs.hpp"
#include "io/sstable.hpp"

namespace bertbench::io {

// tensorflow/core/framework/types.proto values (the ones a checkpoint can hold).
enum class TfDType : int32_t {
    invalid = 0, float32 = 1, float64 = 2, int32 = 3, uint8 = 4, int16 = 5, int8 = 6, string = 7,
    complex64 = 8, int64 = 9, boolean = 10, qint8 = 11, quint8 = 12, qint32 = 13, bfloat16 = 14,
    qint16 = 15, quint16 = 16, uint16 = 17, complex128 = 18, half = 19, resource = 20,
    variant = 21, uint32 = 22, uint64 = 23,
};
const char* tf_dtype_name(TfDType d);  // "DT_FLOAT"; "DT_?" for values outside the list above
size_t tf_dtype_size(TfDType d);       // bytes per element; 0 for string/resource/variant/unknown

struct TfBundleHeader {
    int32_t num_shards = 1;
    bool big_endian = false;  // byte order of the tensor data (protos are always little-endian)
    int32_t producer = 0, min_consumer = 0;
    std::vector<int32_t> bad_consumers;
};

struct TfTensorEntry {
    std::string name;
    TfDType dtype = TfDType::invalid;
    std::vector<int64_t> shape;  // outermost first; empty = scalar
    int32_t shard_id = 0;
    uint64_t offset = 0, size = 0;  // bytes [offset, offset + size) of the shard
    uint32_t crc32c_masked = 0;
    bool partitioned = false;       // has `slices`: data lives under slice keys (not supported)
    uint64_t numel() const;
    std::string shape_str() const;  // "[768, 3072]"
};

class TfBundleReader {
  public:
    // Opens PREFIX.index and validates it (no data shard is opened until a tensor is read).
    explicit TfBundleReader(const std::string& prefix);
    // An in-memory bundle: `shards[i]` is the image of data shard i (fewer shards than the header
    // names read as missing files). `label` stands for the prefix in messages (tests, fuzzing).
    static TfBundleReader from_memory(std::string index_image, std::vector<std::string> shards,
                                      const std::string& label);
    // True when PREFIX.index exists: `prefix` names a TF checkpoint rather than a file.
    static bool is_bundle(const std::string& prefix);
    // The prefix a user's path names: "model.ckpt-28252.index" (a file) names "model.ckpt-28252",
    // and so does "model.ckpt-28252.data-00000-of-00001" (a file beside that .index); any other
    // path names itself.
    static std::string prefix_of(const std::string& path);

    const std::string& prefix() const { return prefix_; }
    std::string index_path() const { return prefix_ + ".index"; }
    std::string shard_path(int32_t shard) const;  // PREFIX.data-%05d-of-%05d
    // The shard ids the entries name, ascending: at most one per entry, so bounded by the index's
    // bytes, never by the num_shards it declares (2^31 - 1 of them once cost convert 10 GB).
    std::vector<int32_t> used_shards() const;
    const TfBundleHeader& header() const { return header_; }
    const SstInfo& table() const { return table_; }
    // Every tensor in key order (partitioned ones flagged; slice keys and the header left out).
    const std::vector<TfTensorEntry>& entries() const { return entries_; }
    const TfTensorEntry* find(const std::string& name) const;  // nullptr if absent

    // The stored bytes [offset, offset + size) of its shard, CRC-checked (for DT_STRING the
    // length checksum and the running CRC of FORMAT.md 6.2); no byte swap.
    std::vector<uint8_t> read_raw(const TfTensorEntry& e) const;
    // Reads a DT_FLOAT / DT_DOUBLE / DT_HALF / DT_BFLOAT16 tensor as fp32 (byte-swapped if the
    // bundle is big-endian). out.size() must equal numel(); otherwise, or for another dtype, Error.
    void read_f32(const TfTensorEntry& e, std::span<float> out) const;
    // DT_INT32 / DT_INT64 (and smaller integer types) widened to int64.
    std::vector<int64_t> read_i64(const TfTensorEntry& e) const;

  private:
    TfBundleReader() = default;
    void parse(std::string_view index_image);
    // Reads [offset, offset+size) of the entry's shard into dst (size bytes), bounds-checked;
    // with `alloc`, into *alloc, resized only after the shard is known to hold those bytes.
    void read_bytes(const TfTensorEntry& e, void* dst, std::vector<uint8_t>* alloc = nullptr) const;
    std::string where(const TfTensorEntry& e) const;

    std::string prefix_;
    bool in_memory_ = false;
    std::vector<std::string> shards_;  // in-memory images
    TfBundleHeader header_;
    SstInfo table_;
    std::vector<TfTensorEntry> entries_;
    std::map<std::string, size_t> index_;
};

// Writes PREFIX.index and PREFIX.data-00000-of-00001 as TF's BundleWriter does: tensors appended
// to the data file in the order added (no alignment padding), index keys sorted, the header
// {num_shards 1, LITTLE, version{producer 1}}, entries serialised like protobuf's C++ runtime
// (fields in number order, proto3 defaults omitted), masked CRC-32C per tensor, uncompressed table
// blocks. Both files are written atomically, each in full before either is renamed (the data file
// first).
class TfBundleWriter {
  public:
    explicit TfBundleWriter(std::string prefix);
    // Borrows `data` (nbytes = numel x element size) until finish(). Not for DT_STRING.
    void add(const std::string& name, TfDType dtype, std::vector<int64_t> shape, const void* data,
             size_t nbytes);
    void add_copy(const std::string& name, TfDType dtype, std::vector<int64_t> shape,
                  const void* data, size_t nbytes);
    void finish();
    // The data and index files written and synced under their temporary names, for
    // commit_together (core/fs.hpp) with the files published beside them; finish() commits these.
    std::vector<std::unique_ptr<AtomicFile>> stage();

    // The two file images without writing anything (tests and fuzz seeds).
    struct Images {
        std::string index, data;
    };
    Images build() const;

  private:
    struct Tensor {
        TfDType dtype;
        std::vector<int64_t> shape;
        const void* data;
        size_t nbytes;
        std::shared_ptr<std::vector<uint8_t>> owned;
        uint64_t offset = 0;
        uint32_t crc = 0;
    };
    std::string index_image(const std::map<std::string, Tensor>& tensors) const;

    std::string prefix_;
    std::map<std::string, Tensor> tensors_;
    std::vector<std::string> order_;  // insertion order = data order
};

}  // namespace bertbench::io
