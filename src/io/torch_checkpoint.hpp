// PyTorch checkpoints (torch.save of a state dict, Hugging Face's pytorch_model.bin, NVIDIA's
// ckpt_<step>.pt), read without running any code, in both of torch's containers:
// - zip (torch >= 1.6): <archive>/data.pkl (the object pickle; storages as persistent ids
//   ('storage', torch.<T>Storage, key, location, numel)), <archive>/data/<key> (raw little-endian
//   storages, stored uncompressed), <archive>/version, sometimes <archive>/byteorder;
// - legacy (torch <= 1.5): pickles of the magic number, the protocol version (1001) and sys_info,
//   the object pickle, the list of storage keys, then per key an int64 element count and the data.
// The object pickle runs on io/pickle.hpp's restricted VM. The state dict is the top-level dict,
// or its "model" / "state_dict" entry (NVIDIA); everything else (optimizer state, master params,
// epoch, files, data_loader) is ignored and listed. Every size read is checked against the bytes
// present before anything is allocated; tensors are views of the mapped file.
// Reference: torch/serialization.py (_save, _legacy_save, _load, _legacy_load), torch 1.13.
#pragma once

#include <cstddef>
#include <cstdint>
#include <span>
#include <string>
#include <vector>

#include "io/safetensors.hpp"  // DType

namespace bertbench::io {

enum class TorchFormat { none, zip, legacy };
// From a file's first bytes (at least 16 for the legacy magic): a zip local header "PK\3\4", or
// the legacy magic-number pickle (\x80 <proto> \x8a\x0a <0x1950a86a20f9469cfc6c little-endian>).
TorchFormat torch_format(std::span<const std::byte> head);
const char* torch_format_name(TorchFormat f);  // "zip", "legacy"

struct TorchTensor {
    std::string name;            // the state dict key
    DType dtype = DType::F32;    // the storage's
    std::vector<int64_t> shape;  // empty = scalar
    size_t numel = 1;
    std::string shape_str() const;
    // Where the elements are: the storage's bytes (inside the file), offset and strides in elements.
    std::string storage;  // its key in the file
    const std::byte* data = nullptr;
    size_t storage_numel = 0;
    int64_t offset = 0;
    std::vector<int64_t> stride;
    bool contiguous = true;
};

class TorchCheckpointReader {
  public:
    // Opens, maps and parses `path`; Error naming the file (and the entry, key or global) on
    // anything malformed or refused.
    explicit TorchCheckpointReader(const std::string& path);
    // An in-memory file image (tests, fuzzing); `label` names it in errors.
    static TorchCheckpointReader from_bytes(std::string bytes, const std::string& label);
    TorchCheckpointReader(TorchCheckpointReader&&) noexcept = default;
    TorchCheckpointReader& operator=(TorchCheckpointReader&&) noexcept = default;

    const std::string& path() const { return path_; }
    TorchFormat format() const { return format_; }
    const std::string& state_dict_key() const { return sd_key_; }  // "", "model", "state_dict"
    const std::vector<TorchTensor>& tensors() const { return tensors_; }  // in file order
    const TorchTensor* find(const std::string& name) const;
    // What was not read: "optimizer (12 tensors)", "epoch (an int 3)" ...
    const std::vector<std::string>& ignored() const { return ignored_; }
    std::string ignored_summary() const;  // one line ("" when nothing was ignored)

    bool is_float(const TorchTensor& t) const;  // F32/F16/BF16/F64
    // The tensor as fp32 (F32 copied bit for bit; F16, BF16 widened exactly; F64 rounded), strides
    // followed. Error naming the file and tensor if out.size() != numel or it is not float.
    void read_f32(const TorchTensor& t, std::span<float> out) const;
    std::vector<float> read_f32(const TorchTensor& t) const;

  private:
    TorchCheckpointReader() = default;
    void parse();
    void parse_zip();
    void parse_legacy();

    std::string path_;
    FileBytes bytes_;  // the mapped file or from_bytes' image
    const std::byte* file_ = nullptr;
    size_t file_size_ = 0;
    TorchFormat format_ = TorchFormat::none;
    std::string sd_key_;
    std::vector<TorchTensor> tensors_;
    std::vector<size_t> index_;  // tensors_ sorted by name
    std::vector<std::string> ignored_;
};

// Writes a zip-format checkpoint that torch.load(path, weights_only=True) reads as an
// OrderedDict of contiguous fp32 CPU tensors, in the order given (atomically; at most 4 GiB,
// no zip64). Entries are stored, 64-byte aligned, with CRC-32s, as torch writes them.
struct TorchOutTensor {
    std::string name;
    std::vector<int64_t> shape;
    std::span<const float> values;  // numel(shape) floats, borrowed until the call returns
};
// Tensors whose `values` are the same span (data and size) share one storage, as torch.save writes
// tied weights. under_key: the state dict inside {under_key: state dict} (NVIDIA's {"model": ...}).
void write_torch_checkpoint(const std::string& path, const std::vector<TorchOutTensor>& tensors,
                            const std::string& under_key = "");

}  // namespace bertbench::io
