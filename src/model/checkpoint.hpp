// Checkpoints: a ParamTable's tensors saved under their TensorFlow names as F32 in one safetensors
// file, with the BertConfig (JSON) and free string metadata in __metadata__, plus any extra
// tensors (optimizer slots as "<name>/adam_m", step counters, RNG state ...) for resume.
// Loading checks every name, dtype and shape against the table. Also: import of a Hugging Face
// BERT safetensors file (Linear weights [out, in] transposed to TF kernels [in, out]).
#pragma once

#include <map>
#include <span>
#include <string>
#include <vector>

#include "io/safetensors.hpp"
#include "model/param_table.hpp"

namespace bertbench::model {

inline constexpr const char* kCheckpointFormat = "bertbench-checkpoint-v1";

// Collects a checkpoint and writes it atomically. Buffers passed in are borrowed until commit().
class CheckpointWriter {
  public:
    CheckpointWriter(std::string path, const ParamTable& table);

    // Every table tensor as F32 under "<tf name><suffix>" from a table-laid-out buffer
    // (suffix "" = the weights; "/adam_m", "/adam_v" = optimizer slots).
    void add_table(std::span<const float> buffer, const std::string& suffix = "");
    // Any other tensor (borrowed; nbytes = numel * dtype size).
    void add_tensor(const std::string& name, io::DType dtype, std::vector<int64_t> shape,
                    const void* data, size_t nbytes);
    void add_i64(const std::string& name, std::span<const int64_t> values);  // copied, shape (n)
    void add_f32(const std::string& name, std::span<const float> values);    // copied, shape (n)
    void set_metadata(const std::string& key, const std::string& value);
    void commit();

  private:
    const ParamTable& table_;
    io::SafetensorsWriter writer_;
};

// Writes the weights plus metadata (config, heads, format, and `metadata`).
void save_checkpoint(const std::string& path, const ParamTable& table,
                     std::span<const float> params,
                     const std::map<std::string, std::string>& metadata = {});

class CheckpointReader {
  public:
    explicit CheckpointReader(const std::string& path);  // validates the file (io::Safetensors)

    const std::string& path() const { return file_.path(); }
    const std::map<std::string, std::string>& metadata() const { return file_.metadata(); }
    // The config saved in metadata "bert_config"; Error naming the file if absent or invalid.
    BertConfig config() const;
    bool has(const std::string& name) const { return file_.find(name) != nullptr; }

    // Reads every table tensor "<tf name><suffix>" into `buffer` (laid out by `table`). A missing
    // tensor, a non-F32 dtype or a shape mismatch is an Error naming the tensor, the expected and
    // found shape, and the file. Tensors in the file that the table lacks are ignored.
    void load_table(const ParamTable& table, std::span<float> buffer,
                    const std::string& suffix = "") const;
    // An extra tensor, with its shape checked when `expected_shape` is given.
    std::vector<float> read_f32(const std::string& name,
                                const std::vector<int64_t>* expected_shape = nullptr) const;
    std::vector<int64_t> read_i64(const std::string& name) const;
    const io::SafetensorsReader& file() const { return file_; }

  private:
    io::SafetensorsReader file_;
};

// Loads weights: load_table(table, params) after checking the saved config (if any) against
// table.config() (Error naming the first differing field).
void load_checkpoint(const std::string& path, const ParamTable& table, std::span<float> params);

// ---- Hugging Face import ----

struct HfName {
    std::string tf_name;     // "bert/encoder/layer_0/attention/self/query/kernel"
    bool transpose = false;  // HF Linear weight [out, in] -> TF kernel [in, out]
};
// Maps one HF tensor name (with or without the "bert." prefix of BertForPreTraining) to its TF
// name. Returns false for names with no TF counterpart.
bool hf_to_tf_name(const std::string& hf_name, HfName* out);

struct ImportReport {
    std::vector<std::string> loaded;      // TF names filled from the file
    std::vector<std::string> missing;     // TF names of the table absent from the file (untouched)
    std::vector<std::string> unexpected;  // HF names with no place in the table
    std::vector<std::string> ignored;     // known non-parameters / tied copies (position_ids,
                                          // cls.predictions.decoder.weight)
    std::string summary() const;          // one line
};

// Fills `params` (laid out by `table`) from a HF BERT safetensors file; tensors the file lacks are
// left untouched and listed in `missing`. A shape mismatch is an Error naming both names, the
// expected and the found shape. F32/F64/F16/BF16 accepted.
ImportReport import_hf_safetensors(const std::string& path, const ParamTable& table,
                                   std::span<float> params);

}  // namespace bertbench::model
