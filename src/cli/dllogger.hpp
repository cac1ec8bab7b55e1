// --json-summary of NVIDIA DeepLearningExamples' PyTorch scripts: dllogger's JSON stream, one line
// per log call as dllogger.JSONStreamBackend writes it,
//   DLLL {"timestamp": "1700000000.5", "datetime": "2023-11-14 22:13:20.500000", "elapsedtime":
//         "0.0", "type": "LOG", "step": "PARAMETER" | [epoch, step] | [], "data": {...}}
// (json.dumps spacing), after the scripts' METADATA lines (each summary metric's unit). bertbench
// writes it once the run is over, from its own logs (train_log.jsonl, results.json,
// predict_speed.json, eval_results.json in --output_dir), with the entries run_pretraining.py /
// run_squad.py log: the config and seed, the loss every --log_freq
// updates, and the final summary (e2e_train_time, training_sequences_per_second, final_loss,
// e2e_inference_time, inference_sequences_per_second, exact_match, F1). Timestamps are when the
// file is written.
#pragma once

#include <cstdint>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

namespace bertbench::cli {

// Before any work: `path` (--json-summary) must be a file name that is none of `inputs`' files
// (each a path or a comma list of paths and globs);
// its directory is created when the summary is written, as NVIDIA's run_squad.py does.
void check_dllogger_path(const std::string& path, const std::vector<std::string>& inputs);

struct DlloggerRun {
    std::string output_dir;      // the run's outputs (train_log.jsonl, results.json, ...)
    nlohmann::json config;       // the effective flags (the "Config" PARAMETER entry)
    int64_t seed = 0;
    double log_freq = 1;         // updates between loss entries (< 1: every update)
    int64_t batch_size_per_gpu = 0;  // per rank and micro-step, as NVIDIA logs it
    double learning_rate = 0;
    // run_squad.py's --max_steps: its training_sequences_per_second counts max_steps updates of
    // the global batch when > 0 (one fewer than it runs), the training features x
    // --num_train_epochs when -1 (its default; a fractional epoch counted whole, as there),
    // otherwise every sequence trained.
    double squad_max_steps = -1;
    double squad_epochs = 0;
    // run_squad.py's loop: updates per epoch (0: not known, epoch 0) and micro-batches per update
    int64_t squad_updates_per_epoch = 0;
    int64_t squad_accumulation = 1;
    // run_squad.py's PARAMETER entries: model_weights_num (its BertForQuestionAnswering, the
    // vocabulary padded to a multiple of 8; < 0: not logged), training_samples (examples),
    // training_features, steps (num_train_optimization_steps, a float there), eval_samples,
    // eval_features, predict_batch_size
    int64_t squad_weights = -1;
    int64_t squad_train_examples = 0, squad_train_features = 0;
    double squad_steps = 0;
    int64_t squad_eval_examples = 0, squad_eval_features = 0, squad_predict_batch_size = 0;
    // run_pretraining.py's {"checkpoint_step": update} PARAMETER entry after the loss entry of
    // each update it saves at: the multiples of this many updates and the run's last (0: none,
    // as with --skip_checkpoint)
    int64_t checkpoint_every = 0;
};

// run_pretraining.py's entries. Writes atomically; logs where.
void write_pretrain_dllogger(const std::string& path, const DlloggerRun& run);
// run_squad.py's entries: training ones when `trained`, inference ones when `predicted`, the
// metric when `scored` (this run wrote eval_results.json).
void write_squad_dllogger(const std::string& path, const DlloggerRun& run, bool trained,
                          bool predicted, bool scored);

}  // namespace bertbench::cli
