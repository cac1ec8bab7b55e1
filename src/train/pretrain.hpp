// The MLPerf BERT pretraining run (mlcommons/training retired_benchmarks/bert run_pretraining.py)
// on the one training loop (loop.hpp): reader -> forward (dropout) -> backward -> clip/accumulate
// -> LAMB/AdamW, online evaluation every N samples until a target masked-LM accuracy, MLPerf log,
// checkpoints with exact resume, and results/curves for a person.
#pragma once
#include <cstdint>
#include <nlohmann/json.hpp>
#include <string>

#include "ops/bf16.hpp"
#include "train/loop.hpp"  // checkpoint_path, latest_checkpoint

namespace bertbench::train {

// The reference's flags (same names and defaults unless noted) plus bertbench's own.
// RunOptions: output_dir, init_checkpoint (our safetensors, a Hugging Face BERT file or a TF
// prefix), train_batch_size, checkpoints, seed, threads, precision, loss scaling.
struct PretrainOptions : RunOptions {
    std::string bert_config_file;  // bert_config.json
    std::string model;             // or a preset name (tiny, mini, small, medium, base, large)
    std::string input_file;        // comma list of globs
    std::string eval_input_file;   // comma list of globs; empty = --input_file (reference)
    int eval_batch_size = 8;
    int max_seq_length = 128;
    int max_predictions_per_seq = 20;
    bool last_layer_subset = false;    // model::EngineOptions::last_layer_subset
    int64_t num_train_steps = 100000;  // micro-steps (TF global_step)
    int64_t num_warmup_steps = 10000;
    int64_t start_warmup_step = 0;
    double learning_rate = 5e-5;
    double poly_power = 1.0;
    double decay_learning_rate = 0;    // optim::LrSchedule::decay_learning_rate (NGC TF's adam)
    int schedule_update_counter = 1;   // optim::LrSchedule::update_counter (NGC TF, TF2 lines)
    optim::LrSchedule::PolyWarmup nvidia_poly_warmup{};  // NVIDIA PyTorch's schedule (its line)
    std::string optimizer = "lamb";
    // NGC TF's LAMB (its line), Keras AdamWeightDecay (PerfZero/TF2's line); config.json records it
    optim::OptimizerVariant optimizer_variant = optim::OptimizerVariant::standard;
    double lamb_beta_1 = 0.9, lamb_beta_2 = 0.999, lamb_weight_decay_rate = 0.01;
    double log_epsilon = -6;
    int steps_per_update = 1;
    int64_t max_eval_steps = 100;           // eval batches; 0 = whole eval set
    bool do_train = true;                   // reference default False; here True
    bool do_eval = false;                   // turned on by --eval_input_file unless given
    int shuffle_buffer = 100;               // records (reference: d.shuffle(100)); 0 = file order
    int64_t eval_every_samples = 0;         // 0 = MLPerf formula for the global batch
    int64_t first_eval_samples = 0;         // first evaluation point; 0 = one eval interval
    int64_t stop_steps = 0;                 // stop at this micro-step; 0 = --num_train_steps
    // The out-of-memory hint's way to smaller micro-batches, in the command line's own flags
    std::string batch_hint = "a smaller --train_batch_size with a larger --steps_per_update keeps the global batch";
    double target_mlm_accuracy = 0.720;
    bool skip_nonfinite_steps = false;
    int skip_nonfinite_limit = 20;          // non-finite micro-steps in a row that stop the run anyway
    // run_pretraining.py --clip_by_global_norm_after_gradient_allreduce: clip the averaged (and
    // accumulated) gradient once per update instead of each micro-batch's (optim/update.hpp)
    bool clip_by_global_norm_after_gradient_allreduce = false;
    // What the command line's script makes of it (cmd_pretrain: NGC TF's Horovod clip, MLPerf's
    // AdamW without a clip): where the clip applies and its threshold in the micro-batch
    // gradient's units (+inf: no clip)
    optim::ClipMode clip_mode = optim::ClipMode::per_micro_batch;
    float clip_norm = 1.0f;
    int warmup_updates_excluded = 3;        // updates left out of the throughput figure
    bool skip_corrupt_records = false;      // skip TFRecord records whose CRC does not match
    bool allow_missing_weights = false;     // eval-only: evaluate a checkpoint lacking tensors
};

// Runs training (and/or evaluation) in options.output_dir, resuming from its latest checkpoint.
// `flags_json` is the effective command line (saved in config.json and in checkpoints).
// Returns the exit code: 0 finished; 130 (SIGINT) or 143 (SIGTERM) when a signal stopped it
// after writing a checkpoint, as shells report a process killed by that signal.
int run_pretraining(const PretrainOptions& options, const nlohmann::json& flags_json);

}  // namespace bertbench::train
