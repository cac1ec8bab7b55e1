// safetensors: an 8-byte little-endian header length N, N bytes of JSON
// ({name: {dtype, shape, data_offsets: [begin, end]}, "__metadata__": {string: string}}), then the
// raw little-endian tensor bytes. Spec: huggingface/safetensors README ("Format").
// The reader trusts nothing in the file: header size, JSON nesting, dtype, shape, offsets (inside
// the data section, begin <= end, end - begin == numel * dtype size, no overlaps, no holes) are all
// validated before any tensor byte is read; a bad file is an Error naming the file and tensor. Our
// writer records the data section's CRC-32C (__metadata__["data_crc32c"]); the reader checks it
// before the first tensor byte is read.
#pragma once

#include <bit>
#include <cstddef>
#include <cstdint>
#include <map>
#include <memory>
#include <span>
#include <string>
#include <vector>

#include "core/fs.hpp"

namespace bertbench::io {

enum class DType { F64, F32, F16, BF16, I64, I32, I16, I8, U8, BOOL };

size_t dtype_size(DType dtype);                         // bytes per element
const char* dtype_name(DType dtype);                    // "F32"
bool parse_dtype(const std::string& name, DType* out);  // false for an unknown name

// IEEE binary16 -> fp32 (exact); inline: the fp16 tensor loops of every reader call it per element.
inline float half_to_float(uint16_t h) {
    const uint32_t sign = (h & 0x8000u) << 16;
    const uint32_t exp = (h >> 10) & 0x1Fu;
    uint32_t mant = h & 0x3FFu;
    uint32_t bits;
    if (exp == 0) {
        if (mant == 0) {
            bits = sign;
        } else {  // subnormal: renormalise
            int e = -1;
            do {
                ++e;
                mant <<= 1;
            } while ((mant & 0x400u) == 0);
            bits = sign | static_cast<uint32_t>(127 - 15 - e) << 23 | (mant & 0x3FFu) << 13;
        }
    } else if (exp == 0x1F) {
        bits = sign | 0x7F800000u | mant << 13;
    } else {
        bits = sign | (exp + 127 - 15) << 23 | mant << 13;
    }
    return std::bit_cast<float>(bits);
}

struct TensorInfo {
    std::string name;
    DType dtype = DType::F32;
    std::vector<int64_t> shape;  // empty = scalar (numel 1)
    size_t begin = 0, end = 0;   // byte offsets into the data section
    size_t numel() const;
    std::string shape_str() const;  // "[768, 3072]"
};

class SafetensorsReader {
  public:
    // Opens and validates `path` (memory-mapped). Error naming the file on any problem.
    explicit SafetensorsReader(const std::string& path);
    // Validates an in-memory file image; `label` names it in errors (used by tests and fuzzing).
    static SafetensorsReader from_bytes(std::string bytes, const std::string& label);
    SafetensorsReader(SafetensorsReader&&) noexcept = default;
    SafetensorsReader& operator=(SafetensorsReader&&) noexcept = default;

    const std::string& path() const { return path_; }
    const std::map<std::string, std::string>& metadata() const { return metadata_; }
    const std::vector<TensorInfo>& tensors() const { return tensors_; }  // in data-offset order
    const TensorInfo* find(const std::string& name) const;               // nullptr if absent
    const TensorInfo& at(const std::string& name) const;  // Error naming file and tensor if absent

    std::span<const std::byte> bytes(const TensorInfo& t) const;  // raw little-endian data
    // Copies a tensor into `out` as fp32, converting from F32/F64/F16/BF16. Error (naming file and
    // tensor) if `out.size()` != numel or the dtype is not a float type.
    void read_f32(const std::string& name, std::span<float> out) const;
    std::vector<float> read_f32(const std::string& name) const;
    // Integer tensors (I64/I32/I16/I8/U8/BOOL) widened to int64.
    std::vector<int64_t> read_i64(const std::string& name) const;

  private:
    SafetensorsReader() = default;
    void parse();
    // The data section against the header's data_crc32c (our writer's), once, before the first
    // tensor byte is read: opening a file to look at its header and names (format detection, its
    // config) costs no pass over the data. Error naming the file on a mismatch.
    void check_data() const;

    std::string path_;
    FileBytes bytes_;                  // the mapped file or from_bytes' image
    const std::byte* file_ = nullptr;  // whole file
    size_t file_size_ = 0;
    const std::byte* data_ = nullptr;  // data section
    size_t data_size_ = 0;
    std::map<std::string, std::string> metadata_;
    std::vector<TensorInfo> tensors_;
    std::map<std::string, size_t> index_;
    uint32_t crc_ = 0;                  // the header's data_crc32c
    mutable bool crc_pending_ = false;  // a data_crc32c not yet checked (check_data)
};

// Collects tensors and writes them in one atomic write (core/fs.hpp AtomicFile). Tensors are
// stored in the order added, contiguously; the header is padded with spaces so that the data
// section starts 64-byte aligned in the file.
class SafetensorsWriter {
  public:
    explicit SafetensorsWriter(std::string path);

    void set_metadata(const std::string& key, const std::string& value);
    // Borrows `data` (nbytes = numel * dtype size): it must stay alive until write().
    void add(const std::string& name, DType dtype, std::vector<int64_t> shape, const void* data,
             size_t nbytes);
    // Copies the data.
    void add_copy(const std::string& name, DType dtype, std::vector<int64_t> shape,
                  const void* data, size_t nbytes);
    void add_f32(const std::string& name, std::vector<int64_t> shape, std::span<const float> v) {
        add_copy(name, DType::F32, std::move(shape), v.data(), v.size_bytes());
    }
    void add_i32(const std::string& name, std::vector<int64_t> shape, std::span<const int32_t> v) {
        add_copy(name, DType::I32, std::move(shape), v.data(), v.size_bytes());
    }
    void add_i64(const std::string& name, std::vector<int64_t> shape, std::span<const int64_t> v) {
        add_copy(name, DType::I64, std::move(shape), v.data(), v.size_bytes());
    }
    bool has(const std::string& name) const;
    void write();  // Error naming the file on an I/O failure
    // The file written and synced under its temporary name, for commit_together (core/fs.hpp)
    std::unique_ptr<AtomicFile> stage();

  private:
    struct Entry {
        std::string name;
        DType dtype;
        std::vector<int64_t> shape;
        const void* data;
        size_t nbytes;
        std::shared_ptr<std::vector<std::byte>> owned;
    };
    std::string path_;
    std::map<std::string, std::string> metadata_;
    std::vector<Entry> entries_;
    std::map<std::string, size_t> index_;
};

}  // namespace bertbench::io
