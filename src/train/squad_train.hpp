// SQuAD with a model, as google-research/bert run_squad.py: fine-tuning (--do_train) as a task of
// the one training loop (loop.hpp) — the span model over the padded features, the loss over all
// max_seq_length positions, optimization.py's AdamWeightDecay with warm-up over
// warmup_proportion and linear decay, global-norm clip 1.0 — and prediction (--do_predict): the
// raw start/end logits of every eval feature, timed per batch.
#pragma once

#include <cstdint>
#include <memory>
#include <nlohmann/json.hpp>
#include <span>
#include <string>
#include <vector>

#include "core/aligned.hpp"
#include "data/squad.hpp"
#include "model/config.hpp"
#include "model/param_table.hpp"
#include "ops/bf16.hpp"
#include "train/loop.hpp"
#include "train/squad_predict.hpp"

namespace bertbench::train {

// RunOptions: output_dir, init_checkpoint (pretrained or fine-tuned weights, any format),
// train_batch_size, checkpoints, seed, threads, precision, loss scaling.
struct SquadTrainOptions : RunOptions {
    std::string bert_config_file;   // or `model`, a preset; else the config of init_checkpoint
    std::string model;
    std::vector<std::string> inputs;  // files the command read (never overwritten)
    int max_seq_length = 384;
    double learning_rate = 5e-5;
    double num_train_epochs = 3.0;
    double warmup_proportion = 0.1;
    bool clip_after_allreduce = false;  // --clip_by_global_norm_after_gradient_allreduce
};

// run_squad.py's schedule: num_train_steps = int(examples / train_batch_size * epochs) (examples,
// not features, as the reference counts them), num_warmup_steps = int(steps * proportion). Error
// naming --num_train_epochs when that makes no step.
int64_t squad_train_steps(int64_t num_examples, int train_batch_size, double epochs);
// Error naming the first of --num_train_epochs, --warmup_proportion, --learning_rate out of range
// (before any work: they need no data).
void check_squad_train_flags(const SquadTrainOptions& options);

// Fine-tunes on `features` (training features, start/end positions set) in options.output_dir,
// resuming from its latest checkpoint. Returns the exit status as run_pretraining does.
int run_squad_training(const SquadTrainOptions& options, int64_t num_train_examples,
                       const std::vector<data::SquadFeature>& features,
                       const nlohmann::json& flags_json);

struct SquadModel {
    model::BertConfig config;
    std::unique_ptr<model::ParamTable> table;
    AlignedVector<float> params;
};
// Loads weights with the span head for prediction from `checkpoint` (any format); the config
// from bert_config_file, the preset or the checkpoint. Error naming `flag` and the file when the
// checkpoint lacks cls/squad/output_weights or output_bias (a pretraining checkpoint).
// Any other tensor the checkpoint lacks is an Error too (model::require_no_missing_weights)
// unless `allow_missing_weights`; the pooler, which the span model never runs (Hugging Face's
// BertForQuestionAnswering has none), may be absent.
SquadModel load_squad_model(const std::string& checkpoint, const std::string& flag,
                            const std::string& bert_config_file, const std::string& preset,
                            int max_seq_length, bool allow_missing_weights = false);

struct SquadInference {
    std::vector<SquadRawResult> results;  // one per feature, in feature order
    std::vector<double> batch_seconds;    // forward time of each batch (features excluded)
    int64_t sequences = 0;
};
// The model's forward (dropout off) over the eval features in batches of `batch_size`, with
// progress on the terminal, on `backend` (null: the CPU's).
SquadInference squad_infer(const SquadModel& m, const std::vector<data::SquadFeature>& features,
                           int batch_size, ops::Precision precision, backend::Backend* backend = nullptr);

}  // namespace bertbench::train
