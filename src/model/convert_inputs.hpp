// `bertbench convert`'s input side: a checkpoint of any format read into a list of named tensors
// (TF names, raw little-endian bytes), and the helpers the output side shares (model/convert.cpp).
#pragma once

#include <cstddef>
#include <cstdint>
#include <map>
#include <string>
#include <vector>

#include "io/safetensors.hpp"
#include "io/tf_bundle.hpp"
#include "model/checkpoint.hpp"
#include "model/config.hpp"

namespace bertbench::model {

struct Tensor {
    std::string name;  // TF name
    io::DType dtype = io::DType::F32;
    std::vector<int64_t> shape;
    std::vector<uint8_t> bytes;
};

struct Loaded {
    std::vector<Tensor> tensors;
    std::vector<std::string> skipped;
    std::map<std::string, std::string> metadata;  // ours only
    std::vector<std::string> files;               // input files (for the same-inode check)
};

// Every tensor of the checkpoint at `path` (of `format`, detect_checkpoint_format's), under its TF
// name; what is not a model tensor (optimizer state, ints, buffers) listed in `skipped`.
Loaded read_checkpoint_tensors(const std::string& path, CheckpointFormat format);
// The TF dtype of a safetensors one (every one read has one).
io::TfDType to_tf(io::DType d);
// [rows, cols] -> [cols, rows] for elements of `es` bytes.
std::vector<uint8_t> transpose(const std::vector<uint8_t>& src, int64_t rows, int64_t cols, size_t es);
// A float tensor's values as fp32 (F32 bit for bit); false for other dtypes.
bool to_f32(const Tensor& t, std::vector<float>* out);
// NVIDIA's vocabulary padding (checkpoint.hpp vocab_padding_rows) dropped from the input's word
// embeddings and MLM output bias, each noted in `notes`.
void drop_vocab_padding(const BertConfig& config, std::vector<Tensor>& tensors, std::vector<std::string>& notes);
// Every model tensor of the input must have the shape `config` gives it (a config of another size
// would be written beside the weights, and found wrong only by whatever loads them).
void check_config_fits(const BertConfig& config, const std::string& config_source, const std::vector<Tensor>& tensors);

}  // namespace bertbench::model
