// Pretraining evaluation (MLPerf run_pretraining.py metric_fn): streaming weighted sums in double
// of the engine's per-row losses and predictions.
#include "train/evaluate.hpp"

#include <algorithm>

#include "core/error.hpp"
#include "core/log.hpp"
#include "core/py_json.hpp"
#include "core/timing.hpp"
#include "data/pretrain_reader.hpp"

namespace bertbench::train {
nlohmann::json EvalMetrics::to_json() const {
    return {{"masked_lm_accuracy", masked_lm_accuracy},
            {"masked_lm_loss", masked_lm_loss},
            {"next_sentence_accuracy", next_sentence_accuracy},
            {"next_sentence_loss", next_sentence_loss},
            {"loss", loss},
            {"examples", examples},
            {"predictions", predictions}};
}

void EvalAccumulator::add(const model::Losses& l) {
    mlm_loss_ += l.mlm_loss_sum;
    mlm_correct_ += l.mlm_correct;
    mlm_weight_ += l.mlm_weight;
    predictions_ += l.mlm_count;
    nsp_loss_ += l.nsp_loss_sum;
    nsp_correct_ += l.nsp_correct;
    examples_ += l.nsp_count;
    batches_.insert(batches_.end(), {l.mlm_loss_sum, l.mlm_weight, l.nsp_loss_sum,
                                     static_cast<double>(l.nsp_count)});
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
    const size_t n = batches_.size() / 4;
    for (size_t b = 0; b < n; ++b) {
        const double* v = &batches_[4 * b];
        m.loss += v[0] / (v[1] + 1e-5) + (v[3] > 0 ? v[2] / v[3] : 0.0);
    }
    if (n > 0) m.loss /= static_cast<double>(n);
    return m;
}

std::string eval_results_txt(const EvalMetrics& m, int64_t global_step) {
    std::string text = fmt::format("global_step = {}\n", global_step);
    text += "loss = " + py_float_repr(m.loss) + "\n";
    text += "masked_lm_accuracy = " + py_float_repr(m.masked_lm_accuracy) + "\n";
    text += "masked_lm_loss = " + py_float_repr(m.masked_lm_loss) + "\n";
    text += "next_sentence_accuracy = " + py_float_repr(m.next_sentence_accuracy) + "\n";
    text += "next_sentence_loss = " + py_float_repr(m.next_sentence_loss) + "\n";
    return text;
}

void EvalAccumulator::all_reduce(dist::Comm& comm) {
    if (comm.size() == 1) return;
    double d[5] = {mlm_correct_, mlm_loss_, mlm_weight_, nsp_correct_, nsp_loss_};
    int64_t n[2] = {examples_, predictions_};
    comm.all_reduce_sum(std::span<double>(d, 5));
    comm.all_reduce_sum(std::span<int64_t>(n, 2));
    mlm_correct_ = d[0], mlm_loss_ = d[1], mlm_weight_ = d[2], nsp_correct_ = d[3], nsp_loss_ = d[4];
    examples_ = n[0], predictions_ = n[1];
    // The batches of the global batch: every rank's count, then the per-batch sums, padded to
    // the longest (a rank whose records ran out has fewer).
    std::vector<int64_t> counts(static_cast<size_t>(comm.size()), 0);
    counts[static_cast<size_t>(comm.rank())] = static_cast<int64_t>(batches_.size());
    comm.all_reduce_sum(std::span<int64_t>(counts));
    batches_.resize(static_cast<size_t>(*std::max_element(counts.begin(), counts.end())), 0.0);
    comm.all_reduce_sum(std::span<double>(batches_));
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
    // A long evaluation (BERT-large's 10,000 MLPerf eval sequences on a CPU) shows its progress
    // once it has run a few seconds; a short one (the demo's, under a second) prints nothing.
    log::Progress progress;
    const bool root = options.comm == nullptr || options.comm->rank() == 0;
    const int global_batch = options.batch_size * (options.comm != nullptr ? options.comm->size() : 1);
    const double t0 = now_s();
    bool shown = false;
    for (int64_t step = 0; options.max_eval_steps <= 0 || step < options.max_eval_steps; ++step) {
        if (!reader.next(batch)) break;
        acc.add(engine.forward(params, batch, false, 0, 0));
        const double t = now_s() - t0, per_batch = t / static_cast<double>(step + 1);
        if (!root || t < 5.0) continue;
        std::string line = fmt::format("evaluating: {} batches of {} sequences, {:.1f} s each", step + 1,
                                       global_batch, per_batch);
        if (options.max_eval_steps > 0)
            line += fmt::format(" (--max_eval_steps={}: at most {} left)", options.max_eval_steps,
                                log::duration(per_batch * static_cast<double>(options.max_eval_steps - step - 1)));
        progress.update(line);
        shown = true;
    }
    if (shown) progress.finish("");
    if (options.comm != nullptr) acc.all_reduce(*options.comm);
    const EvalMetrics m = acc.result();
    if (m.examples == 0)
        fail("eval input {}: expected at least one record, got none", options.files.front());
    return m;
}

}  // namespace bertbench::train
