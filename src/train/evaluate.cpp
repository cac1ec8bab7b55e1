// Pretraining evaluation (MLPerf run_pretraining.py metric_fn): streaming weighted sums in double.
#include "train/evaluate.hpp"

#include <cmath>

#include "core/error.hpp"
#include "data/pretrain_reader.hpp"

namespace bertbench::train {
namespace {

// log-sum-exp of one logits row, in double; also returns the argmax (lowest index on ties).
double log_sum_exp(const float* row, int n, int* argmax) {
    int best = 0;
    for (int j = 1; j < n; ++j)
        if (row[j] > row[best]) best = j;
    *argmax = best;
    const double mx = row[best];
    double s = 0;
    for (int j = 0; j < n; ++j) s += std::exp(static_cast<double>(row[j]) - mx);
    return mx + std::log(s);
}

}  // namespace

nlohmann::json EvalMetrics::to_json() const {
    return {{"masked_lm_accuracy", masked_lm_accuracy},
            {"masked_lm_loss", masked_lm_loss},
            {"next_sentence_accuracy", next_sentence_accuracy},
            {"next_sentence_loss", next_sentence_loss},
            {"examples", examples},
            {"predictions", predictions}};
}

void EvalAccumulator::add(const model::BertPretrainer& engine, const model::Batch& batch,
                          int vocab_size) {
    const int num_p = batch.num_predictions();
    const std::span<const float> mlm = engine.mlm_logits();
    BB_CHECK(mlm.size() >= static_cast<size_t>(num_p) * vocab_size);
    for (int p = 0; p < num_p; ++p) {
        const double w = batch.masked_weights[p];
        if (w == 0) continue;
        const float* row = mlm.data() + static_cast<size_t>(p) * vocab_size;
        int arg = 0;
        const double lse = log_sum_exp(row, vocab_size, &arg);
        const int label = batch.masked_ids[p];
        mlm_loss_ += w * (lse - row[label]);
        mlm_correct_ += arg == label ? w : 0.0;
        mlm_weight_ += w;
        ++predictions_;
    }
    const std::span<const float> nsp = engine.nsp_logits();
    BB_CHECK(nsp.size() >= static_cast<size_t>(batch.batch_size) * 2);
    for (int b = 0; b < batch.batch_size; ++b) {
        int arg = 0;
        const double lse = log_sum_exp(nsp.data() + 2 * b, 2, &arg);
        const int label = batch.next_sentence_labels[b];
        nsp_loss_ += lse - nsp[2 * b + label];
        nsp_correct_ += arg == label ? 1.0 : 0.0;
        ++examples_;
    }
}

EvalMetrics EvalAccumulator::result() const {
    EvalMetrics m;
    // tf.metrics.accuracy/mean return 0 when the weight total is 0 (div_no_nan).
    m.masked_lm_accuracy = mlm_weight_ > 0 ? mlm_correct_ / mlm_weight_ : 0.0;
    m.masked_lm_loss = mlm_weight_ > 0 ? mlm_loss_ / mlm_weight_ : 0.0;
    m.next_sentence_accuracy = examples_ > 0 ? nsp_correct_ / examples_ : 0.0;
    m.next_sentence_loss = examples_ > 0 ? nsp_loss_ / examples_ : 0.0;
    m.examples = examples_;
    m.predictions = predictions_;
    return m;
}

void EvalAccumulator::all_reduce(dist::Comm& comm) {
    if (comm.size() == 1) return;
    double d[5] = {mlm_correct_, mlm_loss_, mlm_weight_, nsp_correct_, nsp_loss_};
    int64_t n[2] = {examples_, predictions_};
    comm.all_reduce_sum(std::span<double>(d, 5));
    comm.all_reduce_sum(std::span<int64_t>(n, 2));
    mlm_correct_ = d[0], mlm_loss_ = d[1], mlm_weight_ = d[2], nsp_correct_ = d[3], nsp_loss_ = d[4];
    examples_ = n[0], predictions_ = n[1];
}

EvalMetrics evaluate(model::BertPretrainer& engine, std::span<const float> params, int vocab_size,
                     const EvalOptions& options) {
    if (options.files.empty()) fail("--eval_input_file: expected at least one file, got none");
    data::PretrainReaderConfig rc;
    rc.files = options.files;
    rc.max_seq_length = options.max_seq_length;
    rc.max_predictions_per_seq = options.max_predictions_per_seq;
    rc.batch_size = options.batch_size;
    rc.training = false;
    rc.shuffle_buffer = 0;
    rc.skip_corrupt_records = options.skip_corrupt_records;
    rc.vocab_size = vocab_size;  // token and masked ids checked where the record is decoded
    rc.type_vocab_size = options.type_vocab_size;
    if (options.comm != nullptr && options.comm->size() > 1) {
        rc.rank = options.comm->rank();
        rc.world_size = options.comm->size();
        rc.shard_by_record = true;
    }
    data::PretrainReader reader(rc);
    EvalAccumulator acc;
    model::Batch batch;
    for (int64_t step = 0; options.max_eval_steps <= 0 || step < options.max_eval_steps; ++step) {
        if (!reader.next(batch)) break;
        engine.forward(params, batch, false, 0, 0);
        acc.add(engine, batch, vocab_size);
    }
    if (options.comm != nullptr) acc.all_reduce(*options.comm);
    const EvalMetrics m = acc.result();
    if (m.examples == 0)
        fail("eval input {}: expected at least one record, got none", options.files.front());
    return m;
}

}  // namespace bertbench::train
