// SQuAD with a model, as google-research/bert run_squad.py: fine-tuning (--do_train) as a task of
// the one training loop (loop.hpp) — the span model over the padded features, the loss over all
// max_seq_length positions, optimization.py's AdamWeightDecay with warm-up over
// warmup_proportion and linear decay, global-norm clip 1.0 — and prediction (--do_predict): the
// raw start/end logits of every eval feature, timed per batch.
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <nlohmann/json.hpp>
#include <span>
#include <string>
#include <vector>

#include "core/aligned.hpp"
#include "data/squad.hpp"
#include "model/config.hpp"
#include "model/param_table.hpp"
#include "optim/optimizer.hpp"
#include "optim/schedule.hpp"
#include "ops/bf16.hpp"
#include "train/loop.hpp"
#include "train/squad_predict.hpp"

namespace bertbench::train {

// RunOptions: output_dir, init_checkpoint (pretrained or fine-tuned weights, any format),
// train_batch_size, checkpoints, seed, threads, precision, loss scaling.
struct SquadTrainOptions : RunOptions {
    std::string bert_config_file;   // or `model`, a preset; else the config of init_checkpoint
    std::string model;
    std::vector<std::string> inputs;      // files the command read (never overwritten)
    std::vector<std::string> data_files;  // of them, the training data's (Task::data_files)
    int max_seq_length = 384;
    double learning_rate = 5e-5;
    double num_train_epochs = 3.0;
    double warmup_proportion = 0.1;
    bool clip_after_allreduce = false;  // --clip_by_global_norm_after_gradient_allreduce
    // NVIDIA NGC TF run_squad.py's AdamWeightDecay: google's schedule, but the linear decay starts
    // from lr / (1 - W/T) so that it meets the warm-up's end (optim::LrSchedule::decay_learning_rate).
    bool ngc_tf_adam = false;
    // NVIDIA PyTorch run_squad.py's fine-tuning, on its command line (micro_batch > 0; set by
    // cli/nvidia_pt_flags). Its loop runs int(epochs) epochs over the features in micro-batches
    // of micro_batch per rank (DistributedSampler's share), an update every `accumulation` of
    // them, and stops after update max_steps + 1 when max_steps > 0; its schedule is
    // warmup_linear over t_total = int(examples / micro_batch / accumulation) * epochs (floored
    // over the ranks under the launcher), with BertAdam (eps 1e-6) or, with --fp16, FusedAdam
    // (eps 1e-8) and LinearWarmUpScheduler one step ahead (optim::LrSchedule::WarmupLinear).
    // run_squad.py's train.tf_record, written once every check of the run has passed (flags,
    // checkpoints, a resume's fixed flags), just before the first step; null: none to write.
    std::function<void()> write_features;
    struct Nvidia {
        int micro_batch = 0, accumulation = 1, ranks = 1;
        double max_steps = -1;
        bool fused_adam = false;
    };
    Nvidia nvidia;
};

// The fine-tuning's length, schedule and optimizer. run_squad.py's (google's): updates =
// int(examples / train_batch_size * epochs) (examples, not features, as the reference counts
// them), warm-up int(updates * proportion), TF's linear decay, AdamWeightDecay; NVIDIA's:
// options.nvidia. Error naming --num_train_epochs when that makes no update.
struct SquadPlan {
    int64_t updates = 0;
    optim::LrSchedule schedule;
    optim::OptimizerConfig optimizer;
    std::string summary;  // one line: the counts and the schedule, for the start-up log
    bool own_schedule = false;  // NVIDIA's or NGC TF's, not google's: stated at start-up and in config.json
    int64_t updates_per_epoch = 0;  // NVIDIA's loop (its dllogger entries' epochs); 0 for the others
    double t_total = 0;  // NVIDIA's num_train_optimization_steps (its dllogger "steps"); 0 for the others
};
SquadPlan squad_plan(const SquadTrainOptions& options, int64_t num_examples, int64_t num_features);
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
