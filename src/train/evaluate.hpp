// Pretraining evaluation: masked-LM accuracy, masked-LM loss, NSP accuracy and NSP loss over an
// eval set, as MLPerf run_pretraining.py metric_fn computes them with tf.metrics (streaming over
// every eval batch, not an average of per-batch values):
//   masked_lm_accuracy = Σw·[argmax = label] / Σw      masked_lm_loss = Σw·CE / Σw
//   next_sentence_accuracy = #correct / #examples       next_sentence_loss = ΣCE / #examples
// and the Estimator's own `loss`: the mean over eval batches of each batch's total_loss, the
// model_fn's Σw·CE / (Σw + 1e-5) + ΣCE / #examples of that batch (tf.metrics.mean(loss)).
#pragma once
#include <cstdint>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "model/batch.hpp"
#include "dist/comm.hpp"
#include "model/bert.hpp"

namespace bertbench::train {

struct EvalMetrics {
    double masked_lm_accuracy = 0, masked_lm_loss = 0;
    double next_sentence_accuracy = 0, next_sentence_loss = 0;
    double loss = 0;                        // the Estimator's: the batches' mean total_loss
    int64_t examples = 0, predictions = 0;  // sequences; masked positions with weight > 0
    nlohmann::json to_json() const;
};

// The streaming sums of tf.metrics.accuracy / tf.metrics.mean, in double.
class EvalAccumulator {
public:
    // Adds one batch's forward (training=false): the engine's per-row cross-entropy (a float
    // log-sum-exp, as TF's fp32 log_softmax) and argmax (ties to the lowest id, as tf.argmax),
    // which the forward sums in double into `batch_losses`.
    void add(const model::Losses& batch_losses);
    EvalMetrics result() const;
    // Data parallel: every rank's sums added (collective; exact for the counts and Σw of the
    // accuracy, so it equals one process over the same records), batch by batch for `loss`
    // (rank r's batch b is its share of the global batch b: EvalOptions::comm).
    void all_reduce(dist::Comm& comm);

private:
    double mlm_correct_ = 0, mlm_loss_ = 0, mlm_weight_ = 0;
    double nsp_correct_ = 0, nsp_loss_ = 0;
    int64_t examples_ = 0, predictions_ = 0;
    std::vector<double> batches_;  // per batch: Σw·CE, Σw, ΣCE, #examples
};

// run_pretraining.py's eval_results.txt: "key = value" lines of the Estimator's result, keys
// sorted (global_step, loss, the four metrics).
std::string eval_results_txt(const EvalMetrics& m, int64_t global_step);

struct EvalOptions {
    std::vector<std::string> files;  // expanded
    int batch_size = 8;              // --eval_batch_size
    int max_seq_length = 128;
    int max_predictions_per_seq = 20;
    int64_t max_eval_steps = 100;    // batches; <= 0 = the whole eval set
    bool skip_corrupt_records = false;  // skip records whose CRC does not match
    int type_vocab_size = 0;  // segment ids below it, checked where decoded (0: unchecked)
    // Data parallel: each rank evaluates every N-th record (record stride whatever the number of
    // files, so max_eval_steps batches of batch_size = global / N cover exactly the records one
    // process would) and the sums are all-reduced. nullptr: one process.
    dist::Comm* comm = nullptr;
};

// Runs the eval set (fixed file order, each record once) with dropout off. `engine` must be
// planned for options.batch_size sequences.
EvalMetrics evaluate(model::BertPretrainer& engine, std::span<const float> params,
                     int vocab_size, const EvalOptions& options);

}  // namespace bertbench::train
