// The pretraining task of MLPerf BERT run_pretraining.py on the one training loop (loop.hpp):
// the pretraining heads, the TFRecord/HDF5 reader, online evaluation to a target masked-LM
// accuracy on a cadence of samples, mlperf.log and eval_log.jsonl.
#include "train/pretrain.hpp"

#include <fcntl.h>
#include <unistd.h>

#include <algorithm>
#include <cmath>
#include <filesystem>
#include <functional>
#include <limits>
#include <memory>

#include "core/error.hpp"
#include "core/fs.hpp"
#include "core/log.hpp"
#include "core/sysinfo.hpp"
#include "data/pretrain_reader.hpp"
#include "data/shard_source.hpp"
#include "dist/comm.hpp"
#include "model/bert.hpp"
#include "optim/update.hpp"
#include "train/data_parallel.hpp"
#include "train/evaluate.hpp"
#include "train/loop.hpp"
#include "train/mlperf_log.hpp"
#include "train/preflight.hpp"
#include "train/time_to_target.hpp"

namespace bertbench::train {
namespace fs = std::filesystem;
using nlohmann::json;

namespace {

// MLPerf's cache_clear: the run's input files leave the page cache before the timed run, so
// that the first epoch reads them from storage (the reference's harness drops every cache; this
// drops the files the run reads, which needs no privilege). True when every file was dropped.
bool drop_page_cache(const std::vector<std::string>& files) {
    bool all = true;
    for (const std::string& f : files) {
        std::string why;
        const int fd = open_regular_file(f, &why);  // a FIFO's plain open would wait for a writer
        all = fd >= 0 && ::posix_fadvise(fd, 0, 0, POSIX_FADV_DONTNEED) == 0 && all;
        if (fd >= 0) ::close(fd);
    }
    return all;
}

LoopOptions loop_options(const PretrainOptions& o) {
    LoopOptions l;
    static_cast<RunOptions&>(l) = o;
    l.command = "pretrain";
    l.do_train = o.do_train;
    l.steps_per_update = o.steps_per_update;
    l.num_train_steps = o.num_train_steps;
    l.stop_steps = o.stop_steps;
    l.skip_nonfinite_steps = o.skip_nonfinite_steps;
    l.skip_nonfinite_limit = o.skip_nonfinite_limit;
    l.clip_mode = o.clip_mode;
    l.clip_norm = o.clip_norm;
    l.warmup_updates_excluded = o.warmup_updates_excluded;
    l.optimizer.kind = optim::parse_optimizer_kind(o.optimizer);
    // LAMB and Keras AdamWeightDecay take their constants from the flags; google's AdamW fixes them
    if (l.optimizer.kind == optim::OptimizerKind::lamb ||
        o.optimizer_variant == optim::OptimizerVariant::keras) {
        l.optimizer.beta_1 = o.lamb_beta_1;
        l.optimizer.beta_2 = o.lamb_beta_2;
        l.optimizer.epsilon = std::pow(10.0, o.log_epsilon);
        l.optimizer.weight_decay_rate = o.lamb_weight_decay_rate;
    } else {
        l.optimizer = optim::OptimizerConfig::adamw_reference();
    }
    l.optimizer.variant = o.optimizer_variant;
    l.optimizer.validate();
    l.schedule.learning_rate = o.learning_rate;
    l.schedule.num_train_steps = o.num_train_steps;
    l.schedule.num_warmup_steps = o.num_warmup_steps;
    l.schedule.start_warmup_step = o.start_warmup_step;
    l.schedule.poly_power = o.poly_power;
    l.schedule.decay_learning_rate = o.decay_learning_rate;
    l.schedule.update_counter = o.schedule_update_counter;
    l.schedule.poly_warmup = o.nvidia_poly_warmup;
    l.fixed_flags = {"train_batch_size", "steps_per_update", "max_seq_length",
                     "max_predictions_per_seq", "seed", "optimizer", "optimizer_variant"};
    l.checked_flags = {
        "learning_rate", "poly_power", "optimizer", "lamb_beta_1", "lamb_beta_2",
        "lamb_weight_decay_rate", "log_epsilon", "num_train_steps", "num_warmup_steps",
        "start_warmup_step", "train_batch_size", "steps_per_update", "max_seq_length",
        "max_predictions_per_seq", "seed", "bert_config_file", "model", "input_file",
        "shuffle_buffer", "do_eval", "eval_input_file", "eval_every_samples", "eval_batch_size",
        "max_eval_steps", "target_mlm_accuracy", "dtype", "precision", "loss_scale",
        "clip_by_global_norm_after_gradient_allreduce", "allreduce_post_accumulation", "last_layer_subset",
        "warmup_proportion", "max_steps"};  // NVIDIA PyTorch's schedule, on its line
    return l;
}

class PretrainTask final : public Task {
public:
    explicit PretrainTask(const PretrainOptions& o) : o_(o) { ttt_.target = o.target_mlm_accuracy; }

    void prepare(const std::string& resume_from) override {
        if (!o_.do_train && !o_.do_eval)
            fail("--do_train/--do_eval: expected at least one of them to be true, got neither");
        if (o_.eval_batch_size < 1)
            fail("--eval_batch_size: expected >= 1, got {}", o_.eval_batch_size);
        if (o_.max_eval_steps < 0)
            fail("--max_eval_steps: expected >= 0 (0 = the whole eval set), got {}", o_.max_eval_steps);
        if (o_.max_predictions_per_seq < 1)
            fail("--max_predictions_per_seq: expected >= 1, got {}", o_.max_predictions_per_seq);
        if (o_.shuffle_buffer < 0)
            fail("--shuffle_buffer: expected >= 0, got {}", o_.shuffle_buffer);
        if (o_.eval_every_samples < 0 || o_.eval_every_samples > kMaxRunSamples)
            fail("--eval_every_samples: expected 0..{} (0 = the default cadence), got {}", kMaxRunSamples,
                 o_.eval_every_samples);
        if (o_.first_eval_samples > kMaxRunSamples)  // a checkpoint could not hold it
            fail("--steps_before_eval_start: its first evaluation at {} samples (rounded up to "
                 "--steps_between_eval): expected at most {}", o_.first_eval_samples, kMaxRunSamples);
        if (o_.skip_nonfinite_limit < 0)
            fail("--skip_nonfinite_limit: expected >= 0 (0 = no limit), got {}", o_.skip_nonfinite_limit);
        if (o_.warmup_updates_excluded < 0)
            fail("--warmup_updates_excluded: expected >= 0, got {}", o_.warmup_updates_excluded);
        if (!(o_.target_mlm_accuracy >= 0 && o_.target_mlm_accuracy <= 1))
            fail("--target_mlm_accuracy: expected a masked-LM accuracy in [0, 1] (MLPerf BERT: "
                 "0.720), got {}", o_.target_mlm_accuracy);
        config_ = resolve_config(o_.bert_config_file, o_.model, resume_from, o_.init_checkpoint);
        if (o_.max_seq_length < 2 || o_.max_seq_length > config_.max_position_embeddings)
            fail("--max_seq_length={}: expected 2..{} (max_position_embeddings of the model)",
                 o_.max_seq_length, config_.max_position_embeddings);
        if (o_.do_train) train_files_ = expand_globs(o_.input_file, "input_file");
        if (o_.do_eval)
            eval_files_ = expand_globs(o_.eval_input_file.empty() ? o_.input_file : o_.eval_input_file,
                                       o_.eval_input_file.empty() ? "input_file" : "eval_input_file");
        if (o_.do_train && o_.input_file.empty())
            fail("--input_file: expected TFRecord files (glob or comma list), got none");
        const int64_t global_batch = static_cast<int64_t>(o_.train_batch_size) * o_.steps_per_update;
        eval_interval_ = o_.eval_every_samples > 0 ? o_.eval_every_samples
                                                   : optim::mlperf_eval_interval_samples(global_batch);
        next_eval_samples_ = o_.first_eval_samples > 0 ? o_.first_eval_samples : eval_interval_;
        // Under mpirun -np N the batches are global: each rank takes 1/N (the loop has checked
        // --train_batch_size; docs/distributed.md).
        const int ranks = dist::world().size();
        if (o_.do_eval && o_.eval_batch_size % ranks != 0)
            fail("--eval_batch_size: {} is the GLOBAL eval batch, split over {} ranks; expected a "
                 "multiple of {}", o_.eval_batch_size, ranks, ranks);
        local_train_batch_ = o_.train_batch_size / ranks;
        local_eval_batch_ = std::max(1, o_.eval_batch_size / ranks);
        if (o_.do_eval) {  // an eval set smaller than the batch: the arena for its records, not for the flag
            eval_set_records_ = eval_records(eval_files_, o_.eval_batch_size, o_.skip_corrupt_records,
                                             o_.max_seq_length, o_.max_predictions_per_seq);
            local_eval_batch_ = static_cast<int>(
                std::clamp<int64_t>((eval_set_records_ + ranks - 1) / ranks, 1, local_eval_batch_));
        }
        table_ = std::make_unique<model::ParamTable>(config_, model::Heads::pretraining);
        make_engines();
    }
    const model::ParamTable& table() const override { return *table_; }
    std::vector<std::string> inputs() const override {
        std::vector<std::string> in = data_files();
        if (!o_.bert_config_file.empty()) in.push_back(o_.bert_config_file);
        return in;
    }
    std::vector<std::string> data_files() const override {
        std::vector<std::string> in = train_files_;
        in.insert(in.end(), eval_files_.begin(), eval_files_.end());
        return in;
    }
    // Everything the run will read, checked before its first step (and before mlperf.log opens).
    void check_before_start() override {
        if (o_.do_train)
            check_input_records(train_files_, o_.max_seq_length, o_.max_predictions_per_seq,
                                config_, "input_file", o_.skip_corrupt_records);
        if (o_.do_eval)
            check_input_records(eval_files_, o_.max_seq_length, o_.max_predictions_per_seq, config_,
                                o_.eval_input_file.empty() ? "input_file" : "eval_input_file",
                                o_.skip_corrupt_records);
    }
    json config_json() const override {
        return {{"eval_every_samples", eval_interval_},
                {"train_files", train_files_},
                {"eval_files", eval_files_}};
    }
    std::string model_line() const override {
        return fmt::format("L{} H{} A{} I{}, seq {}", config_.num_hidden_layers, config_.hidden_size,
                           config_.num_attention_heads, config_.intermediate_size,
                           o_.max_seq_length);
    }

    json state() const override {
        json j = ttt_.state();
        j["next_eval_samples"] = next_eval_samples_;
        // Where mlperf.log stood (its length, the block then open): a resume cuts what a killed
        // process logged after this checkpoint, as train_log.jsonl's lines past its step.
        std::error_code ec;
        const uintmax_t bytes = root_ && mllog_ ? fs::file_size(mlperf_path_, ec) : 0;
        if (root_ && mllog_ && !ec) {
            j["mlperf_log_bytes"] = bytes;
            j["mlperf_open_block"] = mllog_->block_open() ? block_first_ : -1;
            j["mlperf_run_params"] = logged_params_;
        }
        return j;
    }
    // Counts bounded by what the run can have reached (the eval schedule and the eval count
    // only by kMaxRunSamples: changed eval flags and repeated resumes move them legitimately).
    void restore_state(const json& j, int64_t samples) override {
        next_eval_samples_ = saved_int(j, "next_eval_samples", 0, kMaxRunSamples);
        ttt_.restore(j, samples);
        if (j.contains("mlperf_log_bytes")) {  // checkpoints since 2026-12-02
            saved_log_bytes_ = saved_int(j, "mlperf_log_bytes", 0, std::numeric_limits<int64_t>::max());
            saved_open_block_ = saved_int(j, "mlperf_open_block", -1, samples, "a block's first sample");
        }
        if (const auto it = j.find("mlperf_run_params"); it != j.end()) {  // checkpoints since 2026-12-04
            if (!it->is_object())
                fail("\"mlperf_run_params\": expected an object (the hyperparameters mlperf.log holds), got {}",
                     it->type_name());
            logged_params_ = *it;
        }
    }
    // The reader's cursor: the records handed out in its epoch are at most the sequences seen;
    // the epoch is bounded only by kMaxRunSamples (a resume with another rank count moves it on
    // without reading a record).
    void check_data_cursor(const json& cursor, int64_t samples) const override {
        saved_int(cursor, "epoch", 0, kMaxRunSamples);
        saved_int(cursor, "records_in_epoch", 0, samples,
                  "at most the sequences seen, global step x train_batch_size");
    }

    void on_start(TrainLoop& loop, bool fresh) override {
        const auto num = [](const json& j, const char* key) {
            const auto it = j.find(key);
            return it != j.end() && it->is_number() ? it->get<double>()
                                                    : std::numeric_limits<double>::quiet_NaN();
        };
        root_ = loop.is_root();  // under mpirun only rank 0 writes eval_log.jsonl and mlperf.log
        first_epoch_ = loop.first_epoch();
        if (root_)
            for (const json& j : truncate_jsonl(loop.path("eval_log.jsonl"), "step", loop.global_step()))
                acc_curve_.push_back({num(j, "samples"), num(j, "masked_lm_accuracy")});
        mlperf_path_ = root_ ? loop.path("mlperf.log") : "/dev/null";
        const bool continued = root_ && !fresh && cut_mlperf_log();
        if (root_ && fresh && fs::exists(mlperf_path_)) {
            // A start that failed or was killed before its first checkpoint: one run, one log.
            std::string aside;
            for (int k = 1; aside.empty() || fs::exists(aside); ++k)
                aside = fmt::format("{}.failed-start-{}", mlperf_path_, k);
            fs::rename(mlperf_path_, aside);
            log::info("{} was left by a start that ended before its first checkpoint; moved to {} "
                      "so that this run's log is one compliant run", mlperf_path_, aside);
        }
        mllog_ = MlperfLogger::open(mlperf_path_, false);
        if (!fresh) {
            mllog_->continue_run(continued ? saved_open_block_ : -1);
            mllog_->resumed(loop.samples(), loop.global_step());
            // what --allow_changed_flags changed (or another rank count): logged again with the
            // value now in effect; a checkpoint that predates the record logs none of them
            if (logged_params_.is_object()) logged_params_ = mllog_->run_params(run_params(loop), logged_params_);
        }
        if (fresh) {
            mllog_->init_start(loop.run_entry_ms());  // the set-up so far is initialisation too
            // MLPerf's "<count>x<system>": the ranks and what computes (the GPU on --device=cuda)
            const std::string machine = o_.backend ? o_.backend->describe() : sysinfo::cpu_model();
            mllog_->submission_info("bertbench", fmt::format("{}x{}", dist::world().size(), machine),
                                    "open", "research");
            logged_params_ = mllog_->run_params(run_params(loop));
            std::vector<std::string> inputs = train_files_;
            if (o_.do_eval) inputs.insert(inputs.end(), eval_files_.begin(), eval_files_.end());
            const bool cleared = drop_page_cache(inputs);
            if (root_)
                log::info("cache_clear: {} the page cache of the {} input file(s) (posix_fadvise DONTNEED)",
                          cleared ? "dropped" : "could not drop", inputs.size());
            mllog_->cache_clear(cleared);
            mllog_->init_stop();
            mllog_->run_start();
        }
        if (o_.do_train && mllog_->block_open()) {
            block_first_ = saved_open_block_;  // the checkpoint's block goes on
        } else if (o_.do_train) {
            block_first_ = loop.samples();
            // a resume after a pause starts mid-interval: its block runs to the next evaluation
            const int64_t to_eval = next_eval_samples_ - block_first_;
            mllog_->block_start(block_first_, o_.do_eval && !fresh && to_eval > 0 ? to_eval : eval_interval_);
        }
    }
    // The hyperparameters as mlperf.log records them, from the flags in effect.
    BertRunParams run_params(const TrainLoop& loop) const {
        BertRunParams rp;
        rp.global_batch_size = loop.global_batch();
        rp.gradient_accumulation_steps = o_.steps_per_update;
        rp.number_of_ranks = dist::world().size();
        // the optimizer's values as it runs them (google's AdamW: its fixed ones)
        const optim::OptimizerConfig& oc = loop.options().optimizer;
        rp.opt_name = oc.kind == optim::OptimizerKind::lamb ? "lamb" : "adamw";
        rp.opt_base_learning_rate = o_.learning_rate;
        rp.opt_lamb_epsilon = oc.epsilon;
        rp.opt_lamb_learning_rate_decay_poly_power = o_.poly_power;
        rp.opt_learning_rate_training_steps = o_.num_train_steps;
        rp.opt_learning_rate_warmup_steps = o_.num_warmup_steps;
        rp.num_warmup_steps = o_.num_warmup_steps;
        rp.start_warmup_step = o_.start_warmup_step;
        rp.opt_lamb_beta_1 = oc.beta_1;
        rp.opt_lamb_beta_2 = oc.beta_2;
        rp.opt_lamb_weight_decay_rate = oc.weight_decay_rate;
        rp.max_sequence_length = o_.max_seq_length;
        rp.seed = o_.seed;
        rp.train_samples = o_.num_train_steps * o_.train_batch_size;
        // what an evaluation reads: rank 0 counts (it alone writes the log), checking each record
        rp.eval_samples = !root_ || !o_.do_eval
                              ? 0
                              : eval_records(eval_files_, o_.max_eval_steps > 0 ? o_.max_eval_steps * o_.eval_batch_size : 0,
                                             o_.skip_corrupt_records, o_.max_seq_length, o_.max_predictions_per_seq,
                                             &config_);
        return rp;
    }
    // A resume's mlperf.log cut back to its length at the checkpoint (what a killed process
    // logged after it would repeat: evaluations, a block never stopped). False, said in a
    // warning, where the checkpoint predates that record or the log is shorter than it was then:
    // the resumed segment then appends to the log as it is.
    bool cut_mlperf_log() const {
        if (saved_log_bytes_ < 0) return false;
        std::error_code ec;
        const uintmax_t size = fs::file_size(mlperf_path_, ec);
        if (ec || size < static_cast<uintmax_t>(saved_log_bytes_)) {
            log::warn("{}: expected at least the {} bytes it held at the checkpoint, found {}; the "
                      "resumed run appends to it as it is", mlperf_path_, saved_log_bytes_,
                      ec ? "no file" : fmt::format("{} bytes", size));
            return false;
        }
        if (size > static_cast<uintmax_t>(saved_log_bytes_)) {
            fs::resize_file(mlperf_path_, static_cast<uintmax_t>(saved_log_bytes_), ec);
            if (ec) fail("{}: cannot cut it back to its length at the checkpoint: {}", mlperf_path_, ec.message());
            log::info("{}: cut back to its {} bytes at the checkpoint ({} bytes logged after it by "
                      "the stopped process, which this run repeats)", mlperf_path_, saved_log_bytes_,
                      size - static_cast<uintmax_t>(saved_log_bytes_));
        }
        return true;
    }

    // --nodo_train runs never reach the loop: cmd_pretrain hands them to run_pretrain_eval_only
    // (eval_checkpoint.hpp), which is not a resume.
    std::string run_without_training(TrainLoop&) override {
        fail("pretrain: internal: the training loop runs only with --do_train");
    }

    data::PretrainReaderConfig reader_config() const {
        data::PretrainReaderConfig rc;
        rc.files = train_files_;
        rc.max_seq_length = o_.max_seq_length;
        rc.max_predictions_per_seq = o_.max_predictions_per_seq;
        rc.batch_size = local_train_batch_;
        rc.rank = dist::world().rank();
        rc.world_size = dist::world().size();
        rc.training = true;
        rc.seed = static_cast<uint64_t>(o_.seed);
        rc.shuffle_buffer = o_.shuffle_buffer;
        rc.skip_corrupt_records = o_.skip_corrupt_records;
        rc.vocab_size = config_.vocab_size, rc.type_vocab_size = config_.type_vocab_size;
        return rc;
    }
    std::string data_cursor_mismatch(const json& cursor) const override {
        return data::cursor_mismatch(reader_config(), cursor);
    }
    void open_training_data(const json& cursor) override {
        reader_ = std::make_unique<data::PretrainReader>(reader_config());
        if (!cursor.is_null()) {
            reader_->restore(cursor);
        } else if (first_epoch_ > 0) {  // another rank count or other data: a fresh epoch
            json st = reader_->state();
            st["epoch"] = first_epoch_;
            st["records_in_epoch"] = 0;
            reader_->restore(st);
        }
    }
    json data_cursor() const override { return reader_ ? reader_->state() : json(nullptr); }
    int64_t next_batch() override {
        reader_->next(batch_);
        return batch_.num_tokens();
    }
    StepLoss forward(std::span<const float> params, uint64_t seed, uint64_t step) override {
        return at_batch().forward(params, seed, step);
    }
    void backward(std::span<float> grads, std::span<const float> params, float scale) override {
        at_batch().backward(grads, params, scale);
    }
    bool set_backward_hook(model::GradientsReady hook) override {
        return at_batch().set_backward_hook(std::move(hook));
    }
    void weights_changed() override {
        engine_->weights_changed();
        if (eval_engine_) eval_engine_->weights_changed();
    }

    std::string after_update(TrainLoop& loop) override {
        if (!o_.do_eval || loop.samples() < next_eval_samples_) return "";
        mllog_->block_stop(block_first_);
        const bool reached = run_eval(loop);
        while (next_eval_samples_ <= loop.samples()) next_eval_samples_ += eval_interval_;
        if (reached) return "success";
        block_first_ = loop.samples();
        // a next block only if the run trains on (an evaluation at the last step ends the run)
        if (loop.global_step() < loop.last_step()) mllog_->block_start(block_first_, eval_interval_);
        return "";
    }
    std::string at_end(TrainLoop& loop, const std::string& stopped) override {
        if (stopped == kPaused) {  // the run goes on later: its evaluation points and run_stop stay its own
            if (mllog_->block_open()) mllog_->block_stop(block_first_);
            return stopped;
        }
        std::string status = stopped;
        if (status.empty()) {
            // End of training: a last evaluation unless one just ran at this step.
            if (mllog_->block_open()) mllog_->block_stop(block_first_);
            if (o_.do_eval && (acc_curve_.empty() ||
                               acc_curve_.back().x != static_cast<double>(loop.samples())))
                run_eval(loop);
            status = !o_.do_eval ? "completed (no evaluation)"
                     : ttt_.reached ? "success" : "target not reached";
        }
        mllog_->run_stop(status == "success");
        if (o_.do_eval)
            log::info("{}", ttt_.summary(loop.samples(), loop.elapsed(), loop.initialization_s()));
        // run_pretraining.py's do_train + do_eval writes its (one, final) evaluation there.
        if (root_ && last_eval_step_ >= 0)
            write_file_atomic(loop.path("eval_results.txt"), eval_results_txt(last_eval_, last_eval_step_));
        return status;
    }
    void on_abort() noexcept override {
        if (mllog_ && mllog_->run_open()) mllog_->close_aborted();
    }
    std::string progress_note() const override {
        return fmt::format("mlm_acc {}",
                           ttt_.last_accuracy >= 0 ? fmt::format("{:.4f}", ttt_.last_accuracy) : "-");
    }
    void add_results(json& j) const override {
        const auto opt = [](double v) { return v >= 0 ? json(v) : json(nullptr); };
        j["target_mlm_accuracy"] = o_.do_eval ? json(o_.target_mlm_accuracy) : json(nullptr);
        j["final_masked_lm_accuracy"] = opt(ttt_.last_accuracy);
        j["best_masked_lm_accuracy"] = opt(ttt_.best_accuracy);
        j["evaluations"] = ttt_.evals;
        ttt_.add_results(j);
        j["wall_time_definition"] = "run_start -> run_stop (MLPerf), summed over resumed segments";
    }
    void add_curves(CurvesData& d) const override {
        d.accuracy = acc_curve_;
        d.target = o_.do_eval ? o_.target_mlm_accuracy : -1;
    }

private:
    // The training arena is planned for the training batch alone; an eval batch larger than it
    // gets its own forward-only arena (much smaller per sequence) instead of inflating training's.
    void make_engines() {
        const int plan_batch = o_.do_train ? local_train_batch_ : local_eval_batch_;
        const bool own_eval_engine = o_.do_train && o_.do_eval && local_eval_batch_ > plan_batch;
        model::EngineOptions engine_options{o_.precision};
        engine_options.backend = o_.backend;
        engine_options.last_layer_subset = o_.last_layer_subset;
        bool eval_arena = false;
        try {
            engine_ = std::make_unique<model::BertPretrainer>(
                *table_,
                model::Plan{plan_batch, o_.max_seq_length, o_.max_predictions_per_seq, !o_.do_train},
                engine_options);
            eval_arena = true;
            if (own_eval_engine)
                eval_engine_ = std::make_unique<model::BertPretrainer>(
                    *table_,
                    model::Plan{local_eval_batch_, o_.max_seq_length, o_.max_predictions_per_seq,
                                true},
                    engine_options);
        } catch (const std::bad_alloc&) {
            // How large: the arena grows with the batch, so a one-sequence plan tells the size.
            eval_arena = eval_arena || !o_.do_train;
            const int batch = eval_arena ? o_.eval_batch_size : o_.train_batch_size;
            engine_.reset();
            eval_engine_.reset();
            std::string size = "size unknown";
            try {
                const model::BertPretrainer one(
                    *table_, model::Plan{1, o_.max_seq_length, o_.max_predictions_per_seq, eval_arena},
                    engine_options);
                size = fmt::format("about {:.1f} MiB = {} x {:.1f} MiB per sequence",
                                   one.arena_bytes() * double(batch) / (1 << 20), batch,
                                   one.arena_bytes() / double(1 << 20));
            } catch (const std::bad_alloc&) {
            }
            fail("out of memory allocating {} ({}; parameters {:.1f} MiB; training batch {}, eval "
                 "batch {}, sequence length {}, {} predictions per sequence) (hint: {}; a "
                 "smaller --eval_batch_size; a shorter --max_seq_length needs records made for it)",
                 eval_arena ? "the eval activation arena" : "the training activation arena", size,
                 table_->total_floats() * 4.0 / (1 << 20), o_.train_batch_size, o_.eval_batch_size,
                 o_.max_seq_length, o_.max_predictions_per_seq, o_.batch_hint);
        }
        log::info("model: {} parameters ({:.1f} MiB); activation arena {:.1f} MiB for batch {} x "
                  "seq {} x {} predictions{}; {} optimizer state {:.1f} MiB",
                  table_->num_parameters(), table_->total_floats() * 4.0 / (1 << 20),
                  engine_->arena_bytes() / double(1 << 20), plan_batch, o_.max_seq_length,
                  o_.max_predictions_per_seq,
                  eval_engine_ ? fmt::format(" (+ {:.1f} MiB forward-only for eval batch {}{})",
                                             eval_engine_->arena_bytes() / double(1 << 20), o_.eval_batch_size,
                                             eval_set_records_ < o_.eval_batch_size
                                                 ? fmt::format(": the eval set's {} records", eval_set_records_)
                                                 : std::string())
                               : std::string(),
                  o_.optimizer, table_->total_floats() * 8.0 / (1 << 20));
    }

    // One online evaluation, logged; true when it reaches the target (the run then stops).
    bool run_eval(TrainLoop& loop) {
        const int64_t samples = loop.samples();
        mllog_->eval_start(samples);
        EvalOptions eo;
        eo.files = eval_files_;
        eo.batch_size = local_eval_batch_;
        eo.comm = &dist::world();  // under mpirun: every N-th record per rank, sums all-reduced
        eo.max_seq_length = o_.max_seq_length;
        eo.max_predictions_per_seq = o_.max_predictions_per_seq;
        eo.max_eval_steps = o_.max_eval_steps;
        eo.skip_corrupt_records = o_.skip_corrupt_records;
        eo.type_vocab_size = config_.type_vocab_size;
        const double t0 = now_s();
        const EvalMetrics m = evaluate(eval_engine_ ? *eval_engine_ : *engine_, loop.params(),
                                       config_.vocab_size, eo);
        const double dt = now_s() - t0;
        mllog_->eval_accuracy(m.masked_lm_accuracy, samples);
        mllog_->eval_stop(samples);
        const bool reached = ttt_.record(m.masked_lm_accuracy, samples, loop.elapsed());
        json line = m.to_json();
        line["step"] = loop.global_step();
        line["samples"] = samples;
        line["eval_seconds"] = dt;
        line["elapsed_s"] = loop.elapsed();
        if (root_) JsonlLog(loop.path("eval_log.jsonl")).write(line);
        acc_curve_.push_back({static_cast<double>(samples), m.masked_lm_accuracy});
        last_eval_ = m;
        // eval_results.txt's global_step is the reference's counter: updates where its
        // global_step counts them (NGC TF, TF2: schedule_update_counter = K), else micro-steps.
        last_eval_step_ = loop.global_step() / o_.schedule_update_counter;
        log::info("eval at {} samples (step {}): masked_lm_accuracy {:.4f} masked_lm_loss {:.4f} "
                  "next_sentence_accuracy {:.4f} ({} examples, {:.1f} s)",
                  samples, loop.global_step(), m.masked_lm_accuracy, m.masked_lm_loss,
                  m.next_sentence_accuracy, m.examples, dt);
        return reached;
    }

    const PretrainOptions& o_;
    model::BertConfig config_;
    std::unique_ptr<model::ParamTable> table_;
    PretrainStep at_batch() {  // the training engine at the current batch, as micro_step drives it
        PretrainStep s(*engine_, &dist::world());
        s.set_batch(batch_);
        return s;
    }
    std::unique_ptr<model::BertPretrainer> engine_;
    std::unique_ptr<model::BertPretrainer> eval_engine_;  // only for an eval batch > training's
    EvalMetrics last_eval_;       // this segment's last evaluation, at global step last_eval_step_
    int64_t last_eval_step_ = -1;
    std::unique_ptr<data::PretrainReader> reader_;
    std::unique_ptr<MlperfLogger> mllog_;
    std::vector<std::string> train_files_, eval_files_;
    model::Batch batch_;
    int64_t eval_interval_ = 0, next_eval_samples_ = 0, block_first_ = 0;
    std::string mlperf_path_;
    int64_t saved_log_bytes_ = -1, saved_open_block_ = -1;  // restore_state's (-1: not saved)
    nlohmann::json logged_params_;  // the hyperparameters mlperf.log holds (null: not known)
    TimeToTarget ttt_;  // evaluations, best accuracy, time and samples to target
    std::vector<CurvePoint> acc_curve_;
    int local_train_batch_ = 0, local_eval_batch_ = 1;  // per rank (the flags are global)
    int64_t eval_set_records_ = 0;  // with --do_eval: the eval files' records, counted up to --eval_batch_size
    bool root_ = true;
    uint64_t first_epoch_ = 0;
};

}  // namespace

int run_pretraining(const PretrainOptions& options, const nlohmann::json& flags_json) {
    const LoopOptions lo = loop_options(options);
    PretrainTask task(options);
    return TrainLoop(lo, flags_json, task).run();
}

}  // namespace bertbench::train
