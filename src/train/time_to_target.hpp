// MLPerf's metric for one training run: the time and the samples to a target masked-LM accuracy.
// MLPerf scores a run by run_stop - run_start (the result summarizer reads the two time_ms of
// mlperf.log), and run_stop follows the evaluation that reached the target; initialisation
// (init_start .. init_stop, before run_start) is not counted. The samples are those trained when
// that evaluation ran (eval_accuracy's epoch_num for BERT). A run that does not reach its target
// reports how far it got: the best accuracy and when (samples, seconds after run_start).
#pragma once

#include <cstdint>
#include <nlohmann/json.hpp>
#include <string>

namespace bertbench::train {

struct TimeToTarget {
    double target = 0.720;  // --target_mlm_accuracy
    int64_t evals = 0;
    double last_accuracy = -1, best_accuracy = -1;  // -1 before any evaluation
    int64_t best_samples = -1;                      // samples trained at the best evaluation
    double best_elapsed_s = -1;                     // run_start -> the end of that evaluation
    bool reached = false;
    int64_t samples_to_target = -1;  // samples trained at the first evaluation >= target
    double time_to_target_s = -1;    // run_start -> the end of that evaluation

    // One evaluation of the model after `samples` training sequences, ending `elapsed_s` after
    // run_start (summed over resumed segments). True when this evaluation reaches the target
    // (accuracy >= target); a later one does not move samples/time to target.
    bool record(double accuracy, int64_t samples, double elapsed_s);

    // Checkpointed state (merged into train_state). The keys of the first seven are those
    // pretraining checkpoints have always held; best_samples/best_elapsed_s are optional (a
    // checkpoint written before they existed leaves them unknown, -1). `samples`: the samples the
    // checkpoint had seen (its bound for every count).
    nlohmann::json state() const;
    void restore(const nlohmann::json& j, int64_t samples);

    // results.json: target_reached, samples_to_target, time_to_target_s (null when not reached),
    // best accuracy and when, and the definition.
    void add_results(nlohmann::json& j) const;

    // The closing line: "time to target 392.1 s, 54400 samples ..." or "target ... not reached
    // ...: best 0.1361 at 54400 samples (392.1 s after run_start) ...". `samples_trained` and
    // `elapsed_s`: where the run ended; `initialization_s` < 0 when not known.
    std::string summary(int64_t samples_trained, double elapsed_s, double initialization_s) const;
};

}  // namespace bertbench::train
