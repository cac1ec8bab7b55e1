// Checkpoints: a ParamTable's tensors saved under their TensorFlow names as F32 in one safetensors
// file, with the BertConfig (JSON) and free string metadata in __metadata__, plus any extra
// tensors (optimizer slots as "<name>/adam_m", step counters, RNG state ...) for resume.
// Loading checks every name, dtype and shape against the table. Also: import of a Hugging Face
// BERT safetensors file (Linear weights [out, in] transposed to TF kernels [in, out]).
#pragma once

#include <functional>
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
    // found shape, and the file. Tensors in the file that the table lacks are ignored. With
    // `missing`, an absent tensor is not an error: its name is appended and the buffer left as
    // it was (fine-tuning from a checkpoint without the task's head).
    void load_table(const ParamTable& table, std::span<float> buffer,
                    const std::string& suffix = "",
                    std::vector<std::string>* missing = nullptr) const;
    // An extra tensor, with its shape checked when `expected_shape` is given.
    std::vector<float> read_f32(const std::string& name,
                                const std::vector<int64_t>* expected_shape = nullptr) const;
    std::vector<int64_t> read_i64(const std::string& name) const;
    const io::SafetensorsReader& file() const { return file_; }

  private:
    io::SafetensorsReader file_;
};

// Error naming `path` (the checkpoint that saved `saved`) and `want_name` where the two configs
// differ in anything that changes the model's tensors or function (sizes, activation; not dropout
// or the init scale).
void check_config_agrees(const BertConfig& saved, const BertConfig& want, const std::string& path,
                         const std::string& want_name);
// Loads weights: load_table(table, params) after checking the saved config (if any) against
// table.config() (Error naming the first differing field).
void load_checkpoint(const std::string& path, const ParamTable& table, std::span<float> params);
// The same, but tensors the file lacks keep their values; returns their names.
std::vector<std::string> load_checkpoint_present(const std::string& path, const ParamTable& table,
                                                 std::span<float> params);

// ---- Hugging Face import ----

struct HfName {
    std::string tf_name;     // "bert/encoder/layer_0/attention/self/query/kernel"
    bool transpose = false;  // HF Linear weight [out, in] -> TF kernel [in, out]
};
// Maps one HF tensor name (with or without the "bert." prefix of BertForPreTraining, and
// DistributedDataParallel's "module.") to its TF name; NVIDIA's LinearActivation modules
// ("dense_act", as in bert.encoder.layer.N.intermediate.dense_act.weight) are "dense". Returns
// false for names with no TF counterpart.
bool hf_to_tf_name(const std::string& hf_name, HfName* out);
// Error naming `path` and the tensor unless the encoder layer index in an HF name
// ("[bert.]encoder.layer.<i>.") is a decimal without sign or leading zeros below `num_layers`
// (0: below 2^31). A name like layer.4294967296. or layer.-1. used to be skipped as unexpected,
// leaving a layer at its initialisation with exit 0. Names without such an index pass.
void check_hf_layer_index(const std::string& path, const std::string& hf_name, int num_layers = 0);

struct ImportReport {
    std::vector<std::string> loaded;      // TF names filled from the file
    std::vector<std::string> missing;     // TF names of the table absent from the file (untouched)
    std::vector<std::string> unexpected;  // HF names with no place in the table
    std::vector<std::string> ignored;     // known non-parameters / tied copies (position_ids,
                                          // cls.predictions.decoder.weight)
    std::string summary() const;          // one line
};

// NVIDIA's PyTorch scripts pad the vocabulary to a multiple of 8 in the model (run_pretraining.py,
// run_squad.py: vocab_size += 8 - vocab_size % 8), so their checkpoints' word embeddings and MLM
// output bias have up to 7 rows more than bert_config.json's vocab_size; no token id reaches
// them. The number of such rows when `got` is `want` ([vocab_size, ...]) padded so and `tf_name`
// is one of those two tensors, else 0. Importers keep the first vocab_size rows (the MLM softmax
// then leaves out the padding rows' logits, which NVIDIA's includes).
int64_t vocab_padding_rows(const BertConfig& config, const std::string& tf_name, const std::vector<int64_t>& want,
                           const std::vector<int64_t>& got);

// One tensor of a file with HF (or NVIDIA) names, for import_hf_tensors.
struct HfSourceTensor {
    std::string name;            // as in the file
    std::vector<int64_t> shape;  // as in the file (Linear weights [out, in])
};
// The import behind import_hf_safetensors and import_torch_checkpoint: maps each name, checks its
// shape against the table and calls read(i, dst) to fill tensor i as fp32 in file layout.
ImportReport import_hf_tensors(const std::string& path, const std::vector<HfSourceTensor>& tensors,
                               const std::function<void(size_t, std::span<float>)>& read,
                               const ParamTable& table, std::span<float> params);

// Fills `params` (laid out by `table`) from a HF BERT safetensors file; tensors the file lacks are
// left untouched and listed in `missing`. A shape mismatch is an Error naming both names, the
// expected and the found shape. F32/F64/F16/BF16 accepted.
ImportReport import_hf_safetensors(const std::string& path, const ParamTable& table,
                                   std::span<float> params);

// The same from a PyTorch checkpoint (io/torch_checkpoint.hpp: HF's pytorch_model.bin, NVIDIA's
// ckpt_<step>.pt, zip or legacy): its state dict only; optimizer state and the rest are listed
// in `ignored` (one entry per top-level key). fp16/bf16/fp64 storages are widened to fp32.
ImportReport import_torch_checkpoint(const std::string& path, const ParamTable& table,
                                     std::span<float> params);

// The inverse of hf_to_tf_name for export: the HF name of a TF table name (BertForPreTraining /
// BertForQuestionAnswering layout: "bert." prefix, cls.*, qa_outputs.*). False when it has none.
bool tf_to_hf_name(const std::string& tf_name, std::string* hf_name, bool* transpose);

// ---- TensorFlow checkpoint (tensor bundle) import: model/checkpoint_tf.cpp ----

struct TfImportReport {
    std::vector<std::string> loaded;      // table tensors restored
    std::vector<std::string> missing;     // table tensors absent (only cls/squad/* allowed, left
                                          // as initialised, for a table with the SQuAD head)
    std::vector<std::string> ignored;     // optimizer state: .../adam_m, .../adam_v,
                                          // .../GradientAccumulator, .../Adam*, global_step ...
    std::vector<std::string> unexpected;  // other variables with no place in the table
    std::string summary() const;          // one line: counts and the first few names of each
};

// Restores the table's tensors (TF names) from the bundle PREFIX.index / PREFIX.data-*, as the
// reference's assignment map does: only the model's variables; optimizer slots, global_step and
// anything else are reported and ignored (the optimizer starts at zero, the step at 0). A missing
// table tensor (except cls/squad/* for Heads::squad; any, with `missing_ok`: the report lists
// them) or a shape mismatch is an Error naming the tensors, expected and found shapes and the
// prefix; nothing is written to `params` then. Float tensors are DT_FLOAT, DT_HALF, DT_BFLOAT16
// or DT_DOUBLE (converted to fp32).
TfImportReport import_tf_checkpoint(const std::string& prefix, const ParamTable& table,
                                    std::span<float> params, bool missing_ok = false);

// ---- --init_checkpoint, whatever its format ----

enum class CheckpointFormat {
    bertbench,       // our safetensors checkpoint (TF names, config in metadata)
    hf_safetensors,  // Hugging Face BERT safetensors
    tf_bundle,       // TensorFlow checkpoint prefix (PREFIX.index exists)
    pytorch,         // torch.save file (zip or legacy): pytorch_model.bin, NVIDIA's ckpt_N.pt
};
const char* checkpoint_format_name(CheckpointFormat f);
// Whether a TF variable name is training state besides the model: an optimizer slot (adam_m,
// adam_v, GradientAccumulator, Adam, Momentum, ...), a step counter, our bertbench/* resume state.
bool optimizer_state(const std::string& name);
// The encoder layer of a TF-named weight ("bert/encoder/layer_<i>/...": i); -1 for any other
// name, an optimizer slot included.
int64_t encoder_layer_of(const std::string& tf_name);
// Error naming `where` when a TF-named weight belongs to an encoder layer at or beyond
// `num_layers` ("bert/encoder/layer_<i>/...", i >= num_layers): every format's reader refuses
// it, as a model read without its last layers is another model.
void refuse_deeper_layers(const std::vector<std::string>& tf_names, const std::string& where,
                          int num_layers);

// By magic bytes, never by trial: TF when PATH.index exists; a zip archive ("PK\3\4") or torch's
// legacy magic-number pickle is PyTorch; 8 bytes of length then '{' is safetensors, ours when it
// has "format" metadata or TF-named weights. Error naming `path` and its first bytes otherwise.
CheckpointFormat detect_checkpoint_format(const std::string& path);
// A checkpoint named as TF names it: where `path` is neither a file nor a TF prefix but
// PATH.safetensors is a file (bertbench's checkpoint of that name: run/model.ckpt-2000 for
// run/model.ckpt-2000.safetensors), that file, said in one line naming `flag`; else `path`.
std::string resolve_checkpoint_name(const std::string& path, const std::string& flag);
// The files a checkpoint name reads, for the checks that no output is one of them: the name
// resolved as resolve_checkpoint_name resolves it (NAME.safetensors, a TF directory's latest), then
// a TF prefix's (or its .index's or data shard's) PREFIX.index and every PREFIX.data-* beside it;
// a Hugging Face or PyTorch file's BERT config.json beside it (checkpoint_config reads it).
std::vector<std::string> checkpoint_files(const std::string& name);
// The files that inputs given as comma lists and globs (paths_of_list's) read, a checkpoint
// name's as checkpoint_files gives them.
std::vector<std::string> files_read(const std::vector<std::string>& lists);
// The config a checkpoint carries: ours in its metadata; a Hugging Face file (safetensors or
// PyTorch) in save_pretrained's config.json beside it, where that has "model_type": "bert" (said
// once). False otherwise (TF bundles; HF files without it).
bool checkpoint_config(const std::string& path, BertConfig* out);

// Fills `params` (already initialised by the caller) from any of the three formats, as the
// reference's assignment map does: tensors the file lacks (e.g. the SQuAD head of a pretraining
// checkpoint) keep their initial values and are named in the report. With `missing`, they are
// listed there and the report is returned, not logged: the caller decides
// (require_no_missing_weights), then logs it. Without it, a bertbench or TF checkpoint lacking a
// tensor other than the SQuAD head is an error, another format's missing tensors a warning, and
// the report is logged. Errors name `flag` (e.g. "--init_checkpoint") and the file; also when the
// file has none of the tensors.
std::string load_init_checkpoint(const std::string& path, const ParamTable& table,
                                 std::span<float> params,
                                 const std::string& flag = "--init_checkpoint",
                                 std::vector<std::string>* missing = nullptr);
// For a model that only runs (eval, prediction): an Error naming `flag`, the file, how many of the
// table's tensors `missing` lists and the first of them, unless `allow` (the user's
// --allow_missing_weights): a missing weight would silently run at its initial value.
void require_no_missing_weights(const std::vector<std::string>& missing, const ParamTable& table,
                                const std::string& flag, const std::string& path, bool allow);

}  // namespace bertbench::model
