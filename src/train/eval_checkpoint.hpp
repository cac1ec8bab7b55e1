// Evaluation of one pretraining checkpoint, as run_pretraining.py --do_eval --nodo_train does it:
// load the weights (any format load_init_checkpoint reads), check them and the eval records, run
// the eval set once with dropout off (evaluate.hpp). `bertbench eval` and the eval-only form of
// `bertbench pretrain` share it. An eval-only run is not a resume: it reads the training run's
// directory (its latest checkpoint) but writes only its own eval_results.{txt,json}.
#pragma once

#include <cstdint>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "model/config.hpp"
#include "ops/bf16.hpp"
#include "train/evaluate.hpp"
#include "train/pretrain.hpp"

namespace bertbench::train {

struct CheckpointEvalOptions {
    std::string checkpoint;           // the weights (any format)
    std::string bert_config_file;     // or `model`, a preset; else the checkpoint's own config
    std::string model;
    std::vector<std::string> files;   // expanded eval records
    std::string files_flag = "input_file";  // the flag that named them, for messages
    int eval_batch_size = 8;          // GLOBAL: under mpirun each rank takes 1/N
    int max_seq_length = 128;
    int max_predictions_per_seq = 20;
    int64_t max_eval_steps = 100;     // batches; 0 = the whole eval set
    bool skip_corrupt_records = false;
    ops::Precision precision = ops::Precision::fp32;
    // Tensors a partial checkpoint (e.g. a Hugging Face file) lacks: initialised as pretraining
    // initialises them with this seed, as the reference keeps TF's initial values; -1 = zeros.
    int64_t init_seed = -1;
    bool allow_missing_weights = false;  // else a tensor the checkpoint lacks is an Error
    backend::Backend* backend = nullptr;  // --device: where the engine runs (null: the CPU)
};

// Loads, checks and evaluates; `config` (optional) receives the model config used. Errors name
// the flag and file. Collective under mpirun (every rank calls it; the metrics are global).
EvalMetrics evaluate_checkpoint(const CheckpointEvalOptions& options,
                                model::BertConfig* config = nullptr);

// The step in a bertbench checkpoint's name ("model.ckpt-<step>.safetensors"), or -1.
int64_t checkpoint_name_step(const std::string& path);

// `pretrain --do_eval --nodo_train`: evaluates --init_checkpoint, or without it the latest
// checkpoint in --output_dir, once; writes eval_results.txt (run_pretraining.py's "key = value"
// lines) and eval_results.json in --output_dir and nothing else there. Error (exit 1) when there
// is no checkpoint to evaluate. Returns the exit status.
int run_pretrain_eval_only(const PretrainOptions& options, const nlohmann::json& flags_json);

}  // namespace bertbench::train
