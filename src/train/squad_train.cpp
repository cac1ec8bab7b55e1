// SQuAD fine-tuning as a task of the one training loop, and prediction (squad_train.hpp).
#include "train/squad_train.hpp"

#include <algorithm>
#include <optional>
#include <cmath>
#include <limits>
#include <memory>
#include <numeric>

#include "core/error.hpp"
#include "core/log.hpp"
#include "core/pyrandom.hpp"
#include "dist/comm.hpp"
#include "model/batch.hpp"
#include "model/bert.hpp"
#include "model/checkpoint.hpp"
#include "train/loop.hpp"
#include "train/preflight.hpp"

namespace bertbench::train {
using nlohmann::json;

namespace {

// google-research/bert run_squad.py: int(examples / batch * epochs) updates of TF's schedule.
SquadPlan google_plan(const SquadTrainOptions& o, int64_t num_examples) {
    SquadPlan p;
    p.updates = static_cast<int64_t>(static_cast<double>(num_examples) / o.train_batch_size *
                                     o.num_train_epochs);
    if (p.updates < 1)
        fail("--num_train_epochs={}: {} training examples in batches of {} make {} training "
             "steps, expected at least 1 (run_squad.py: int(examples / train_batch_size * "
             "epochs))", o.num_train_epochs, num_examples, o.train_batch_size, p.updates);
    p.optimizer = optim::OptimizerConfig::adamw_reference();
    p.schedule.learning_rate = o.learning_rate;
    p.schedule.num_train_steps = p.updates;
    p.schedule.num_warmup_steps =
        static_cast<int64_t>(static_cast<double>(p.updates) * o.warmup_proportion);
    p.summary = fmt::format("{} steps, warm-up {} (run_squad.py: int(examples / batch x epochs))",
                            p.updates, p.schedule.num_warmup_steps);
    if (o.ngc_tf_adam) {  // NGC TF's optimization.py: adjusted_init_lr = lr / (1 - W/T)
        const double left = 1.0 - static_cast<double>(p.schedule.num_warmup_steps) /
                                       static_cast<double>(p.updates);
        if (!(left > 0))
            fail("--warmup_proportion={}: NGC TF's run_squad.py decays from lr / (1 - warm-up / "
                 "steps) = lr / 0 with a warm-up of all {} steps; expected a shorter warm-up",
                 o.warmup_proportion, p.updates);
        p.schedule.decay_learning_rate = o.learning_rate / left;
        p.summary += fmt::format("; NGC TF's decay from lr / (1 - {}/{}) = {}",
                                 p.schedule.num_warmup_steps, p.updates, p.schedule.decay_learning_rate);
        p.own_schedule = true;
    }
    return p;
}

// NVIDIA PyTorch run_squad.py (SquadTrainOptions::Nvidia): its loop's update count and its
// optimizer's schedule, which run past each other (t_total counts examples, the loop features).
SquadPlan nvidia_plan(const SquadTrainOptions& o, int64_t num_examples, int64_t num_features) {
    const SquadTrainOptions::Nvidia& n = o.nvidia;
    SquadPlan p;
    // int(len(train_examples) / train_batch_size / K) * num_train_epochs, // world_size
    double t_total = static_cast<double>(static_cast<int64_t>(
                         static_cast<double>(num_examples) / n.micro_batch / n.accumulation)) *
                     o.num_train_epochs;
    if (n.ranks > 1) t_total = std::floor(t_total / n.ranks);
    const auto epochs = static_cast<int64_t>(o.num_train_epochs);
    const int64_t per_rank = (num_features + n.ranks - 1) / n.ranks;      // DistributedSampler
    const int64_t batches = (per_rank + n.micro_batch - 1) / n.micro_batch;  // the last partial
    p.updates_per_epoch = batches / n.accumulation;
    p.t_total = t_total;
    p.updates = epochs * p.updates_per_epoch;
    if (n.max_steps > 0)  // `if global_step > max_steps: break` before each micro-batch
        p.updates = std::min(p.updates, static_cast<int64_t>(std::floor(n.max_steps)) + 1);
    if (!(t_total > 0) || p.updates < 1)
        fail("--num_train_epochs={}: NVIDIA's run_squad.py makes {} updates ({} whole epochs of "
             "{} features in micro-batches of {}, {} per update) and t_total = int({} examples / "
             "{} / {}) x epochs = {}, expected both > 0", o.num_train_epochs, p.updates, epochs,
             num_features, n.micro_batch, n.accumulation, num_examples, n.micro_batch,
             n.accumulation, t_total);
    p.optimizer = optim::OptimizerConfig::adamw_reference();
    if (n.fused_adam) p.optimizer.epsilon = 1e-8;  // apex FusedAdam's default
    p.schedule.learning_rate = o.learning_rate;
    p.schedule.num_train_steps = p.updates;
    p.schedule.warmup_linear = {t_total, o.warmup_proportion, n.fused_adam ? 1 : 0};
    // The first update whose x = (u - 1 + offset) / t_total reaches 1.
    const int64_t zero_from = static_cast<int64_t>(std::ceil(t_total)) + 1 - (n.fused_adam ? 1 : 0);
    p.summary = fmt::format(
        "{} updates ({} epochs over {} features{}); warmup_linear over t_total = {} (from "
        "examples, not features{}); {}", p.updates, epochs, num_features,
        n.max_steps > 0 ? fmt::format(", at most --max_steps={} + 1", n.max_steps) : "", t_total,
        zero_from <= p.updates ? fmt::format(": the learning rate is 0 from update {} on", zero_from)
                               : "",
        n.fused_adam ? "FusedAdam (--fp16: eps 1e-8, LinearWarmUpScheduler one update ahead)"
                     : "BertAdam (eps 1e-6)");
    p.schedule.validate();  // the warm-up fraction, before any output
    p.own_schedule = true;
    return p;
}

}  // namespace

SquadPlan squad_plan(const SquadTrainOptions& o, int64_t num_examples, int64_t num_features) {
    return o.nvidia.micro_batch > 0 ? nvidia_plan(o, num_examples, num_features)
                                    : google_plan(o, num_examples);
}

void check_squad_train_flags(const SquadTrainOptions& o) {
    (void)check_run_options(o);  // the loop builds the scaler again from the same flags
    if (!(o.num_train_epochs > 0 && o.num_train_epochs < 1e6))
        fail("--num_train_epochs={}: expected a positive number below 1e6", o.num_train_epochs);
    if (o.nvidia.micro_batch > 0)  // NVIDIA's line: its scheduler's range, named
        optim::LrSchedule::WarmupLinear{1, o.warmup_proportion, o.nvidia.fused_adam ? 1 : 0}.validate();
    else if (!(o.warmup_proportion >= 0 && o.warmup_proportion <= 1))
        fail("--warmup_proportion={}: expected a fraction in [0, 1]", o.warmup_proportion);
    if (!(o.learning_rate >= 0 && o.learning_rate <= std::numeric_limits<float>::max()))
        fail("--learning_rate={}: expected 0 .. {:g} (the optimizer's float)", o.learning_rate,
             std::numeric_limits<float>::max());
}

namespace {

// Appends feature f to `batch` in the padded-query layout (all max_seq_length rows, the real
// tokens as keys: run_squad.py's padded computation).
void append_feature(model::Batch& batch, const data::SquadFeature& f) {
    model::append_padded_sequence(batch, f.input_ids, f.input_mask, f.segment_ids,
                                  fmt::format("squad feature unique_id {}", f.unique_id));
}

void clear_batch(model::Batch& batch) {
    batch = model::Batch{};
    batch.seq_offsets.push_back(0);
}

class SquadTask final : public Task {
public:
    SquadTask(const SquadTrainOptions& o, int64_t num_examples,
              const std::vector<data::SquadFeature>& features, const SquadPlan& plan)
        : o_(o), num_examples_(num_examples), features_(features), plan_(plan) {}

    void prepare(const std::string& resume_from) override {
        if (features_.empty())
            fail("--train_file: expected training features, got none (every question was "
                 "skipped or the file has no questions)");
        config_ = resolve_config(o_.bert_config_file, o_.model, resume_from, o_.init_checkpoint);
        if (o_.max_seq_length > config_.max_position_embeddings)
            fail("--max_seq_length={}: the model was only trained up to sequence length {} "
                 "(max_position_embeddings)", o_.max_seq_length, config_.max_position_embeddings);
        for (const data::SquadFeature& f : features_)
            if (!f.start_position || !f.end_position)
                fail("squad feature unique_id {}: expected training start/end positions, got none",
                     f.unique_id);
        table_ = std::make_unique<model::ParamTable>(config_, model::Heads::squad);
        // Under mpirun each rank computes train_batch_size / N of every global batch (the loop
        // has checked that N divides it).
        local_batch_ = o_.train_batch_size / dist::world().size();
        model::EngineOptions engine_options{o_.precision};
        engine_options.backend = o_.backend;
        try {
            engine_ = std::make_unique<model::BertSquad>(
                *table_, model::Plan{local_batch_, o_.max_seq_length, 0, false}, engine_options);
        } catch (const std::bad_alloc&) {
            fail("out of memory allocating the training activation arena (batch {} x seq {}) "
                 "(hint: a smaller --train_batch_size)", o_.train_batch_size, o_.max_seq_length);
        }
        log::info("model: {} parameters ({:.1f} MiB); activation arena {:.1f} MiB for batch {} x "
                  "seq {}", table_->num_parameters(), table_->total_floats() * 4.0 / (1 << 20),
                  engine_->arena_bytes() / double(1 << 20), local_batch_, o_.max_seq_length);
    }
    const model::ParamTable& table() const override { return *table_; }
    std::vector<std::string> inputs() const override {
        std::vector<std::string> in = o_.inputs;
        if (!o_.bert_config_file.empty()) in.push_back(o_.bert_config_file);
        return in;
    }
    std::vector<std::string> data_files() const override { return o_.data_files; }
    json config_json() const override {
        json j = {{"num_train_examples", num_examples_},
                  {"num_train_features", features_.size()},
                  {"num_train_epochs", o_.num_train_epochs}};
        if (plan_.own_schedule) j["schedule"] = plan_.summary;
        return j;
    }
    std::string model_line() const override {
        return fmt::format("SQuAD span model, L{} H{} A{} I{}, seq {}", config_.num_hidden_layers,
                           config_.hidden_size, config_.num_attention_heads,
                           config_.intermediate_size, o_.max_seq_length);
    }
    std::string run_without_training(TrainLoop&) override {
        fail("squad: internal: the training loop runs only with --do_train");
    }

    // Data order: the features repeated epoch after epoch, each epoch a permutation keyed by
    // (seed, epoch), batches running across epoch boundaries (the reference's repeat() before
    // batch(); its shuffle(100) is unseeded, so no order could match it). Under mpirun rank r
    // takes the r-th slice of train_batch_size / N of each global batch: N ranks see the
    // sequences one process would, in the same order. Cursor: the features of the global batches
    // handed out (the same on every rank).
    void on_start(TrainLoop& loop, bool) override { first_epoch_ = loop.first_epoch(); }
    // features_read is global step x train_batch_size plus, after a resume with another rank
    // count, the skipped rest of an epoch: bounded by kMaxRunSamples, and the epoch so that
    // epoch x features stays below it too.
    void check_data_cursor(const json& cursor, int64_t) const override {
        saved_int(cursor, "features_read", 0, kMaxRunSamples);
        if (cursor.contains("epoch"))
            saved_int(cursor, "epoch", 0,
                      kMaxRunSamples / std::max<int64_t>(1, static_cast<int64_t>(features_.size())),
                      "epoch x features within 2^53");
    }
    void open_training_data(const json& cursor) override {
        if (o_.write_features) o_.write_features();
        next_ = 0;
        if (!cursor.is_null()) {
            if (!cursor.is_object() || !cursor.contains("features_read") ||
                !cursor["features_read"].is_number_integer() ||
                cursor["features_read"].get<int64_t>() < 0)
                fail("checkpoint reader_state: expected {{\"features_read\": N, ...}}, got {}",
                     cursor.dump());
            next_ = cursor["features_read"].get<int64_t>();
        } else if (first_epoch_ > 0) {  // resumed with another rank count: a fresh epoch
            next_ = static_cast<int64_t>(first_epoch_) * static_cast<int64_t>(features_.size());
        }
    }
    json data_cursor() const override {
        return {{"features_read", next_},
                {"epoch", static_cast<uint64_t>(next_ / static_cast<int64_t>(features_.size()))}};
    }
    int64_t next_batch() override {
        clear_batch(batch_);
        starts_.clear();
        ends_.clear();
        const int64_t n = static_cast<int64_t>(features_.size());
        const int64_t first = next_ + static_cast<int64_t>(dist::world().rank()) * local_batch_;
        for (int64_t k = first; k < first + local_batch_; ++k) {
            const int64_t epoch = k / n;
            if (epoch != order_epoch_) {
                order_.resize(features_.size());
                std::iota(order_.begin(), order_.end(), 0);
                const uint32_t key[3] = {static_cast<uint32_t>(o_.seed),
                                         static_cast<uint32_t>(static_cast<uint64_t>(o_.seed) >> 32),
                                         static_cast<uint32_t>(epoch)};
                PyRandom rng;
                rng.seed_words(key);
                rng.shuffle(order_);
                order_epoch_ = epoch;
            }
            const data::SquadFeature& f = features_[order_[static_cast<size_t>(k % n)]];
            append_feature(batch_, f);
            starts_.push_back(*f.start_position);
            ends_.push_back(*f.end_position);
        }
        next_ += o_.train_batch_size;
        return batch_.num_tokens();
    }
    StepLoss forward(std::span<const float> params, uint64_t seed, uint64_t step) override {
        return at_batch().forward(params, seed, step);
    }
    void backward(std::span<float> grads, std::span<const float> params, float scale) override {
        at_batch().backward(grads, params, scale);
    }
    void weights_changed() override { engine_->weights_changed(); }
    std::string at_end(TrainLoop&, const std::string& status) override {
        return status.empty() ? "completed" : status;  // kPaused too: nothing to close
    }
    void add_results(json& j) const override {
        j["task"] = "squad";
        j["num_train_examples"] = num_examples_;
        j["num_train_features"] = features_.size();
    }

private:
    const SquadTrainOptions& o_;
    int64_t num_examples_;
    const std::vector<data::SquadFeature>& features_;
    const SquadPlan& plan_;  // run_squad_training's, which outlives the task
    model::BertConfig config_;
    std::unique_ptr<model::ParamTable> table_;
    SquadStep at_batch() {  // the engine at the current batch, as micro_step drives it
        SquadStep s(*engine_, &dist::world());
        s.set_batch(batch_, starts_, ends_);
        return s;
    }
    std::unique_ptr<model::BertSquad> engine_;
    model::Batch batch_;
    std::vector<int32_t> starts_, ends_;
    std::vector<int> order_;
    int64_t order_epoch_ = -1, next_ = 0;
    int local_batch_ = 0;
    uint64_t first_epoch_ = 0;
};

}  // namespace

int run_squad_training(const SquadTrainOptions& o, int64_t num_train_examples,
                       const std::vector<data::SquadFeature>& features, const json& flags_json) {
    LoopOptions l;
    static_cast<RunOptions&>(l) = o;
    l.command = "squad";
    check_squad_train_flags(o);
    const SquadPlan plan =
        squad_plan(o, num_train_examples, static_cast<int64_t>(features.size()));
    l.num_train_steps = plan.updates;
    l.clip_mode = o.clip_after_allreduce ? optim::ClipMode::after_accumulation : optim::ClipMode::per_micro_batch;
    l.optimizer = plan.optimizer;
    l.schedule = plan.schedule;
    l.fixed_flags = {"train_batch_size", "max_seq_length", "doc_stride", "max_query_length",
                     "seed", "train_file", "do_lower_case", "vocab_file"};
    l.checked_flags = {"learning_rate", "num_train_epochs", "warmup_proportion",
                       "bert_config_file", "model", "init_checkpoint", "dtype", "precision",
                       "loss_scale", "clip_by_global_norm_after_gradient_allreduce"};
    SquadTask task(o, num_train_examples, features, plan);
    return TrainLoop(l, flags_json, task).run();
}

SquadModel load_squad_model(const std::string& checkpoint, const std::string& flag,
                            const std::string& bert_config_file, const std::string& preset,
                            int max_seq_length, bool allow_missing_weights) {
    SquadModel m;
    m.config = resolve_config(bert_config_file, preset, "", checkpoint);
    if (max_seq_length > m.config.max_position_embeddings)
        fail("--max_seq_length={}: the model was only trained up to sequence length {} "
             "(max_position_embeddings)", max_seq_length, m.config.max_position_embeddings);
    m.table = std::make_unique<model::ParamTable>(m.config, model::Heads::squad);
    m.params.assign(m.table->total_floats(), 0.0f);
    if (allow_missing_weights) m.table->initialize(m.params, 12345);  // "left as initialised": so they are
    std::vector<std::string> missing;
    const std::string loaded = model::load_init_checkpoint(checkpoint, *m.table, m.params, flag, &missing);
    // Of the squad table's tensors outside the encoder and the embeddings, the span head is trained
    // and the pooler (which the span head does not read) is not: it may be absent.
    for (const std::string& name : missing)
        if (const model::ParamInfo& p = m.table->at(name); p.layer < 0 && !p.embedding && p.trained)
            fail("{}={}: expected a fine-tuned SQuAD checkpoint with the span head, got none "
                 "({} is absent: a pretraining checkpoint?) (hint: --do_train fine-tunes it "
                 "first)", flag, checkpoint, name);
    std::erase_if(missing, [&](const std::string& name) { return !m.table->at(name).trained; });
    model::require_no_missing_weights(missing, *m.table, flag, checkpoint, allow_missing_weights);
    // as eval refuses them: a NaN weight would give NaN logits (decoded into nothing, or a "VALID"
    // scenario of NaN answers), and int8 could not quantize it
    check_finite_params(*m.table, m.params, checkpoint);
    log::info("{}", loaded);
    return m;
}

SquadInference squad_infer(const SquadModel& m, const std::vector<data::SquadFeature>& features,
                           int batch_size, ops::Precision precision, backend::Backend* backend) {
    SquadInference out;
    if (features.empty()) return out;
    const int S = static_cast<int>(features.front().input_ids.size());
    model::EngineOptions engine_options{precision};
    engine_options.backend = backend;
    // No batch holds more than every feature (TF's Estimator makes one batch of them): the arena
    // is sized for what runs, not for the flag.
    const int flag_batch = batch_size;
    batch_size = static_cast<int>(std::min<size_t>(static_cast<size_t>(batch_size), features.size()));
    std::optional<model::BertSquad> made;
    try {
        made.emplace(*m.table, model::Plan{batch_size, S, 0, true}, engine_options);
    } catch (const std::bad_alloc&) {
        fail("out of memory allocating the prediction activation arena (batch {} x seq {}) (hint: a "
             "smaller --predict_batch_size than {})", batch_size, S, flag_batch);
    }
    model::BertSquad& engine = *made;
    std::unique_ptr<backend::Buffer<float>> on_device;  // the weights where the engine runs
    const std::span<const float> params = backend::device_view(backend, std::span<const float>(m.params), on_device);
    model::Batch batch;
    log::Progress progress(5.0);
    out.results.reserve(features.size());
    const size_t n = features.size();
    for (size_t first = 0; first < n; first += static_cast<size_t>(batch_size)) {
        const size_t last = std::min(n, first + static_cast<size_t>(batch_size));
        clear_batch(batch);
        for (size_t i = first; i < last; ++i) append_feature(batch, features[i]);
        const double t0 = now_s();
        engine.forward(params, batch, {}, {}, false, 0, 0);
        out.batch_seconds.push_back(now_s() - t0);
        const std::span<const float> start = engine.start_logits(), end = engine.end_logits();
        for (size_t i = first; i < last; ++i) {
            const int b = static_cast<int>(i - first);
            const size_t o = static_cast<size_t>(batch.seq_offsets[b]);
            SquadRawResult r;
            r.unique_id = features[i].unique_id;
            r.start_logits.assign(start.begin() + o, start.begin() + o + S);
            r.end_logits.assign(end.begin() + o, end.begin() + o + S);
            out.results.push_back(std::move(r));
        }
        out.sequences += static_cast<int64_t>(last - first);
        progress.update(fmt::format("predict {}/{} features", last, n));
    }
    progress.finish("");
    return out;
}

}  // namespace bertbench::train
