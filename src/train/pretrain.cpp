// The pretraining run of MLPerf BERT run_pretraining.py: training loop, online evaluation to a
// target, logs (train_log.jsonl, eval_log.jsonl, mlperf.log, results.json, curves.svg) and
// checkpoints with bit-exact resume. Dropout masks are a pure function of (seed, global step), so
// the resume state is: weights, adam_m/adam_v, optimizer scalars, global step, reader cursor.
#include "train/pretrain.hpp"

#include <omp.h>
#include <pthread.h>
#include <signal.h>

#include <algorithm>
#include <atomic>
#include <charconv>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <limits>
#include <memory>
#include <sstream>
#include <thread>

#include "core/aligned.hpp"
#include "core/error.hpp"
#include "core/fs.hpp"
#include "core/json_safe.hpp"
#include "core/log.hpp"
#include "core/sysinfo.hpp"
#include "data/pretrain_reader.hpp"
#include "model/bert.hpp"
#include "model/checkpoint.hpp"
#include "optim/clip.hpp"
#include "optim/loss_scale.hpp"
#include "optim/update.hpp"
#include "train/evaluate.hpp"
#include "train/mlperf_log.hpp"
#include "train/preflight.hpp"
#include "train/svg_plot.hpp"

namespace bertbench::train {
namespace fs = std::filesystem;
using nlohmann::json;

namespace {

std::atomic<int> g_stop_signal{0};

// SIGINT/SIGTERM during a run. First one: finish the update, checkpoint, exit 0. A second one: die
// at once. No thread ever runs a signal handler: the signals are blocked in the calling thread
// before any other thread of the run exists (the reader thread and libgomp's pool inherit the
// mask) and a watcher thread takes them with sigwait(). A handler would run on whichever compute
// thread the kernel picked, with its frame pushed onto that thread's stack; oneDNN 2.6's sgemm
// (Debian libdnnl2) corrupts the heap when that happens inside it (docs/engine.md, "Signals").
// A signal the process inherited as ignored (SIGINT of a script's background job) stays ignored.
class StopSignals {
public:
    StopSignals() {
        g_stop_signal = 0;
        sigemptyset(&set_);
        for (const int sig : {SIGINT, SIGTERM}) {
            struct sigaction current {};
            sigaction(sig, nullptr, &current);
            if (current.sa_handler == SIG_IGN) continue;
            sigaddset(&set_, sig);
            wake_ = sig;
        }
        if (wake_ == 0) return;
        pthread_sigmask(SIG_BLOCK, &set_, &old_mask_);
        watcher_ = std::thread([this] { watch(); });
    }
    ~StopSignals() {
        if (wake_ == 0) return;
        closing_ = true;
        pthread_kill(watcher_.native_handle(), wake_);  // ends its sigwait; `closing_` says why
        watcher_.join();
        pthread_sigmask(SIG_SETMASK, &old_mask_, nullptr);
    }
    StopSignals(const StopSignals&) = delete;
    StopSignals& operator=(const StopSignals&) = delete;

private:
    void watch() {
        for (;;) {
            int sig = 0;
            if (sigwait(&set_, &sig) != 0) continue;
            if (closing_) return;
            if (g_stop_signal == 0) {
                g_stop_signal = sig;
                log::info("signal {}: stopping after this optimizer update with a checkpoint "
                          "(a second signal stops at once, without one)",
                          sig);
                continue;
            }
            // Second signal: its default action, termination, with this thread as the target.
            signal(sig, SIG_DFL);
            pthread_sigmask(SIG_UNBLOCK, &set_, nullptr);
            raise(sig);
        }
    }

    sigset_t set_{}, old_mask_{};
    int wake_ = 0;  // a member of set_ (0: both ignored, nothing to watch)
    std::atomic<bool> closing_{false};
    std::thread watcher_;
};

double now_s() {
    return std::chrono::duration<double>(std::chrono::steady_clock::now().time_since_epoch())
        .count();
}

// The step of "model.ckpt-<step>.safetensors"; -1 for other names. A step that does not fit in
// int64 is an error naming the file (a stray file would otherwise win or crash the resume).
int64_t checkpoint_step(const fs::path& file) {
    const std::string name = file.filename().string();
    if (name.rfind("model.ckpt-", 0) != 0 || !name.ends_with(".safetensors")) return -1;
    const std::string num = name.substr(11, name.size() - 11 - 12);
    if (num.empty() || num.find_first_not_of("0123456789") != std::string::npos) return -1;
    int64_t step = 0;
    const auto [end, ec] = std::from_chars(num.data(), num.data() + num.size(), step);
    if (ec != std::errc() || end != num.data() + num.size())
        fail("{}: expected a checkpoint step that fits in 64 bits, got {} (not a checkpoint "
             "bertbench wrote; hint: move it out of --output_dir)", file.string(), num);
    return step;
}

std::string fmt_duration(double s) {
    if (!std::isfinite(s) || s < 0) return "?";
    const int64_t t = static_cast<int64_t>(s + 0.5);
    if (t >= 3600) return fmt::format("{}h{:02}m", t / 3600, (t / 60) % 60);
    if (t >= 60) return fmt::format("{}m{:02}s", t / 60, t % 60);
    return fmt::format("{}s", t);
}

model::BertConfig resolve_config(const PretrainOptions& o, const std::string& resume_from) {
    if (!o.bert_config_file.empty() && !o.model.empty())
        fail("--bert_config_file and --model: expected one of them, got both");
    if (!o.bert_config_file.empty()) {
        model::BertConfig c = model::BertConfig::from_json_file(o.bert_config_file);
        c.validate(o.bert_config_file);
        return c;
    }
    if (!o.model.empty()) return model::BertConfig::preset(o.model);
    const std::string& from = !resume_from.empty() ? resume_from : o.init_checkpoint;
    model::BertConfig saved;  // a TensorFlow checkpoint carries none
    if (!from.empty() && model::checkpoint_config(from, &saved)) return saved;
    fail("--bert_config_file: expected a bert_config.json (or --model=<preset>), got none "
         "(hint: --model=tiny for a quick try)");
}

struct TrainState {
    int64_t next_eval_samples = 0;
    int64_t evals = 0;
    double best_accuracy = -1, last_accuracy = -1;
    int64_t skipped_steps = 0;
    double elapsed_s = 0;            // run_start -> now, summed over resumed segments
    double timed_s = 0;              // compute time of the timed (post-warm-up) updates
    int64_t timed_samples = 0;
    int64_t timed_tokens = 0;        // real (unpadded) tokens of those updates
    bool target_reached = false;
    double time_to_target_s = -1;
    int64_t samples_to_target = -1;
    bool finished = false;
    std::string status;

    json to_json() const {
        return {{"next_eval_samples", next_eval_samples}, {"evals", evals},
                {"best_accuracy", best_accuracy}, {"last_accuracy", last_accuracy},
                {"skipped_steps", skipped_steps}, {"elapsed_s", elapsed_s},
                {"timed_s", timed_s}, {"timed_samples", timed_samples}, {"timed_tokens", timed_tokens},
                {"target_reached", target_reached}, {"time_to_target_s", time_to_target_s},
                {"samples_to_target", samples_to_target}, {"finished", finished},
                {"status", status}};
    }
    static TrainState from_json(const json& j) {
        TrainState s;
        s.next_eval_samples = j.at("next_eval_samples").get<int64_t>();
        s.evals = j.at("evals").get<int64_t>();
        s.best_accuracy = j.at("best_accuracy").get<double>();
        s.last_accuracy = j.at("last_accuracy").get<double>();
        s.skipped_steps = j.at("skipped_steps").get<int64_t>();
        s.elapsed_s = j.at("elapsed_s").get<double>();
        s.timed_s = j.at("timed_s").get<double>();
        s.timed_samples = j.at("timed_samples").get<int64_t>();
        s.timed_tokens = j.value("timed_tokens", int64_t{0});
        s.target_reached = j.at("target_reached").get<bool>();
        s.time_to_target_s = j.at("time_to_target_s").get<double>();
        s.samples_to_target = j.at("samples_to_target").get<int64_t>();
        s.finished = j.at("finished").get<bool>();
        s.status = j.at("status").get<std::string>();
        return s;
    }
};

// Keeps the lines of a JSONL log whose `key` is <= limit (a resumed run rewrites what the killed
// one logged after its last checkpoint). Returns the kept lines parsed.
std::vector<json> truncate_jsonl(const std::string& path, const char* key, int64_t limit) {
    std::vector<json> kept;
    if (!fs::exists(path)) return kept;
    std::istringstream in(read_file(path));
    std::string line, out;
    while (std::getline(in, line)) {
        if (line.empty()) continue;
        json j = json::parse(line, nullptr, false);
        if (j.is_discarded() || !j.contains(key)) break;  // a torn last line
        if (!j[key].is_number_integer())
            fail("{}: line {}: \"{}\": expected an integer, got {} (the log is damaged; hint: "
                 "remove the line, or the file to start the log afresh)",
                 path, kept.size() + 1, key, j[key].dump());
        if (j[key].get<int64_t>() > limit) break;
        out += line + "\n";
        kept.push_back(std::move(j));
    }
    write_file_atomic(path, out);
    return kept;
}

// An append-only JSONL log, flushed per line.
class JsonlLog {
public:
    explicit JsonlLog(const std::string& path) : path_(path) {
        file_ = std::fopen(path.c_str(), "ab");
        if (!file_) fail("{}: cannot open for appending (hint: is --output_dir writable?)", path);
    }
    ~JsonlLog() {
        if (file_) std::fclose(file_);
    }
    void write(const json& j) {
        const std::string s = j.dump() + "\n";
        if (std::fwrite(s.data(), 1, s.size(), file_) != s.size() || std::fflush(file_) != 0)
            fail("{}: write failed (disk full?)", path_);
    }

private:
    std::string path_;
    std::FILE* file_ = nullptr;
};

class Run {
public:
    Run(const PretrainOptions& o, const json& flags_json) : o_(o), flags_json_(flags_json) {}
    int main();
    // After an error cut a started run short: mlperf.log gets its run_stop (aborted) and
    // results.json says aborted and why. Nothing when the run had not started or has stopped.
    void abort(const std::string& reason) noexcept;

private:
    void setup();
    void check_outputs_are_not_inputs() const;
    void check_resumed_flags(const json& old_flags);
    void check_before_start() const;
    void write_config_json();
    void load_or_init();
    void save_checkpoint(bool final_one);
    void prune_checkpoints();
    EvalMetrics run_eval(int64_t samples);
    void write_results(const std::string& status);
    void write_curves();
    bool is_boundary() const { return updater_->global_step() % o_.steps_per_update == 0; }
    int64_t samples() const { return updater_->global_step() * o_.train_batch_size; }
    double elapsed() const { return state_.elapsed_s + (now_s() - segment_start_); }

    const PretrainOptions& o_;
    json flags_json_;
    model::BertConfig config_;
    std::unique_ptr<model::ParamTable> table_;
    AlignedVector<float> params_, grads_;
    std::unique_ptr<optim::ParameterUpdater> updater_;
    std::unique_ptr<model::BertPretrainer> engine_;
    std::unique_ptr<model::BertPretrainer> eval_engine_;  // only for an eval batch > training's
    optim::LossScaler scaler_;
    std::unique_ptr<data::PretrainReader> reader_;
    std::unique_ptr<MlperfLogger> mllog_;
    std::vector<std::string> train_files_, eval_files_;
    std::string resume_from_;
    json reader_state_;
    int64_t global_batch_ = 0, eval_interval_ = 0, last_saved_step_ = -1;
    std::string last_checkpoint_;
    TrainState state_;
    double segment_start_ = 0;
    std::vector<CurvePoint> loss_curve_, acc_curve_;
    std::string abort_reason_;
    double segment_update_s_ = 0;          // every update of this process, warm-up included
    int64_t segment_update_samples_ = 0;
};

void Run::setup() {
    scaler_ = optim::LossScaler::from_flag(o_.loss_scale, o_.initial_loss_scale,
                                           o_.loss_scale_window);
    if (o_.output_dir.empty())
        fail("--output_dir: expected a directory for checkpoints and logs, got none");
    if (!o_.do_train && !o_.do_eval)
        fail("--do_train/--do_eval: expected at least one of them to be true, got neither");
    if (o_.train_batch_size < 1) fail("--train_batch_size: expected >= 1, got {}", o_.train_batch_size);
    if (o_.eval_batch_size < 1) fail("--eval_batch_size: expected >= 1, got {}", o_.eval_batch_size);
    if (o_.steps_per_update < 1) fail("--steps_per_update: expected >= 1, got {}", o_.steps_per_update);
    if (o_.max_predictions_per_seq < 1)
        fail("--max_predictions_per_seq: expected >= 1, got {}", o_.max_predictions_per_seq);
    if (o_.save_checkpoints_steps < 0)
        fail("--save_checkpoints_steps: expected >= 0, got {}", o_.save_checkpoints_steps);
    if (o_.keep_checkpoint_max < 0)
        fail("--keep_checkpoint_max: expected >= 0, got {}", o_.keep_checkpoint_max);
    if (o_.shuffle_buffer < 0) fail("--shuffle_buffer: expected >= 0, got {}", o_.shuffle_buffer);
    const int cpus = sysinfo::cpus_available();
    const int threads = o_.threads > 0 ? o_.threads : cpus;
    if (o_.threads < 0 || threads > cpus)
        fail("--threads={}: expected 1..{} (CPUs available to this process)", o_.threads, cpus);
    omp_set_num_threads(threads);

    std::error_code ec;
    fs::create_directories(o_.output_dir, ec);
    if (ec || !fs::is_directory(o_.output_dir))
        fail("--output_dir={}: cannot create the directory ({})", o_.output_dir, ec.message());
    resume_from_ = latest_checkpoint(o_.output_dir);

    config_ = resolve_config(o_, resume_from_);
    if (o_.max_seq_length < 2 || o_.max_seq_length > config_.max_position_embeddings)
        fail("--max_seq_length={}: expected 2..{} (max_position_embeddings of the model)",
             o_.max_seq_length, config_.max_position_embeddings);
    if (o_.do_train) train_files_ = expand_globs(o_.input_file, "input_file");
    if (o_.do_eval)
        eval_files_ = expand_globs(o_.eval_input_file.empty() ? o_.input_file : o_.eval_input_file,
                                   o_.eval_input_file.empty() ? "input_file" : "eval_input_file");
    if (o_.do_train && o_.input_file.empty())
        fail("--input_file: expected TFRecord files (glob or comma list), got none");
    check_outputs_are_not_inputs();
    remove_stale_temporaries(o_.output_dir);

    global_batch_ = static_cast<int64_t>(o_.train_batch_size) * o_.steps_per_update;
    eval_interval_ = o_.eval_every_samples > 0 ? o_.eval_every_samples
                                               : optim::mlperf_eval_interval_samples(global_batch_);
    table_ = std::make_unique<model::ParamTable>(config_, model::Heads::pretraining);
    // The training arena is planned for the training batch alone; an eval batch larger than it
    // gets its own forward-only arena (much smaller per sequence) instead of inflating training's.
    const int plan_batch = o_.do_train ? o_.train_batch_size : o_.eval_batch_size;
    const bool own_eval_engine = o_.do_train && o_.do_eval && o_.eval_batch_size > plan_batch;
    const model::EngineOptions engine_options{config_.hidden_act == "gelu_erf", o_.precision};
    const char* allocating = "the parameters";
    try {
        params_.assign(table_->total_floats(), 0.0f);
        allocating = o_.do_train ? "the training activation arena" : "the eval activation arena";
        engine_ = std::make_unique<model::BertPretrainer>(
            *table_,
            model::Plan{plan_batch, o_.max_seq_length, o_.max_predictions_per_seq, !o_.do_train},
            engine_options);
        allocating = "the eval activation arena";
        if (own_eval_engine)
            eval_engine_ = std::make_unique<model::BertPretrainer>(
                *table_,
                model::Plan{o_.eval_batch_size, o_.max_seq_length, o_.max_predictions_per_seq, true},
                engine_options);
    } catch (const std::bad_alloc&) {
        // How large: the arena grows with the batch, so a one-sequence plan tells the size.
        std::string size = fmt::format("{:.1f} MiB", table_->total_floats() * 4.0 / (1 << 20));
        const bool eval_arena = std::string(allocating) == "the eval activation arena";
        const int batch = eval_arena ? o_.eval_batch_size : o_.train_batch_size;
        engine_.reset();
        eval_engine_.reset();
        if (std::string(allocating) != "the parameters") {
            size = "size unknown";
            try {
                const model::BertPretrainer one(
                    *table_,
                    model::Plan{1, o_.max_seq_length, o_.max_predictions_per_seq,
                                eval_arena || !o_.do_train},
                    engine_options);
                size = fmt::format("about {:.1f} MiB = {} x {:.1f} MiB per sequence",
                                   one.arena_bytes() * double(batch) / (1 << 20), batch,
                                   one.arena_bytes() / double(1 << 20));
            } catch (const std::bad_alloc&) {
            }
        }
        fail("out of memory allocating {} ({}; parameters {:.1f} MiB; training batch {}, eval "
             "batch {}, sequence length {}, {} predictions per sequence) (hint: a smaller "
             "--train_batch_size with a larger --steps_per_update keeps the global batch; a "
             "smaller --eval_batch_size; a shorter --max_seq_length needs records made for it)",
             allocating, size, table_->total_floats() * 4.0 / (1 << 20), o_.train_batch_size,
             o_.eval_batch_size, o_.max_seq_length, o_.max_predictions_per_seq);
    }
    log::info("model: {} parameters ({:.1f} MiB); activation arena {:.1f} MiB for batch {} x "
              "seq {} x {} predictions{}; optimizer state {:.1f} MiB",
              table_->num_parameters(), table_->total_floats() * 4.0 / (1 << 20),
              engine_->arena_bytes() / double(1 << 20), plan_batch, o_.max_seq_length,
              o_.max_predictions_per_seq,
              eval_engine_ ? fmt::format(" (+ {:.1f} MiB forward-only for eval batch {})",
                                         eval_engine_->arena_bytes() / double(1 << 20),
                                         o_.eval_batch_size)
                           : std::string(),
              table_->total_floats() * 8.0 / (1 << 20));
}

// No input may be one of the files the run writes in --output_dir (by inode: a symlink or hard
// link counts), or the run would overwrite it.
void Run::check_outputs_are_not_inputs() const {
    std::vector<std::string> inputs = train_files_;
    inputs.insert(inputs.end(), eval_files_.begin(), eval_files_.end());
    for (const std::string* p : {&o_.bert_config_file, &o_.init_checkpoint})
        if (!p->empty()) inputs.push_back(*p);
    for (const char* name : {"config.json", "results.json", "mlperf.log", "train_log.jsonl",
                             "eval_log.jsonl", "curves.svg", "changed_flags.jsonl"})
        check_output_not_input((fs::path(o_.output_dir) / name).string(), "--output_dir", inputs,
                               "--input_file/--eval_input_file/--bert_config_file/--init_checkpoint");
}

// Flags that would silently fork a resumed run (schedule, optimizer, batch, model, data, eval
// schedule and target): each difference from the checkpoint's is named; --allow_changed_flags
// goes on and records them in changed_flags.jsonl and the log.
void Run::check_resumed_flags(const json& old_flags) {
    static const char* const kKeys[] = {
        "learning_rate", "poly_power", "optimizer", "lamb_beta_1", "lamb_beta_2",
        "lamb_weight_decay_rate", "log_epsilon", "num_train_steps", "num_warmup_steps",
        "start_warmup_step", "train_batch_size", "steps_per_update", "max_seq_length",
        "max_predictions_per_seq", "seed", "bert_config_file", "model", "input_file",
        "shuffle_buffer", "eval_input_file", "eval_every_samples", "eval_batch_size",
        "max_eval_steps", "target_mlm_accuracy", "dtype", "precision", "loss_scale"};
    if (!old_flags.is_object()) return;
    json changes = json::array();
    std::string text;
    for (const char* k : kKeys) {
        if (!old_flags.contains(k) || !flags_json_.contains(k) || old_flags[k] == flags_json_[k])
            continue;
        changes.push_back({{"flag", k}, {"checkpoint", old_flags[k]}, {"now", flags_json_[k]}});
        text += fmt::format("{}--{} (checkpoint {}, now {})", text.empty() ? "" : ", ", k,
                            old_flags[k].dump(), flags_json_[k].dump());
    }
    if (changes.empty()) return;
    if (!o_.allow_changed_flags)
        fail("{}: resuming with {} flag(s) changed from the run being resumed: {} (hint: the same "
             "flags resume it; a new --output_dir starts a different run; --allow_changed_flags "
             "continues with the new values and records the change)",
             resume_from_, changes.size(), text);
    log::warn("--allow_changed_flags: resuming {} with changed flags: {} (recorded in {}/"
              "changed_flags.jsonl)", resume_from_, text, o_.output_dir);
    JsonlLog((fs::path(o_.output_dir) / "changed_flags.jsonl").string())
        .write({{"resumed_from", resume_from_}, {"changes", changes}});
}

// Everything the run will read, checked before its first step (and before mlperf.log opens): the
// first record of every training and eval file, and the loaded weights all finite.
void Run::check_before_start() const {
    if (o_.do_train)
        check_first_records(train_files_, o_.max_seq_length, o_.max_predictions_per_seq,
                            "input_file", o_.skip_corrupt_records);
    if (o_.do_eval)
        check_first_records(eval_files_, o_.max_seq_length, o_.max_predictions_per_seq,
                            o_.eval_input_file.empty() ? "input_file" : "eval_input_file",
                            o_.skip_corrupt_records);
    const std::string& from = !resume_from_.empty() ? resume_from_ : o_.init_checkpoint;
    if (!from.empty()) check_finite_params(*table_, params_, from);
}

void Run::write_config_json() {
    json j = {{"command", "pretrain"},
              {"flags", flags_json_},
              {"bert_config", config_.to_json()},
              {"global_batch_size", global_batch_},
              {"eval_every_samples", eval_interval_},
              {"parameters", table_->num_parameters()},
              {"train_files", train_files_},
              {"eval_files", eval_files_},
              {"resumed_from", resume_from_},
              {"system", sysinfo::system_info()},
              {"build", sysinfo::build_info()}};
    write_file_atomic((fs::path(o_.output_dir) / "config.json").string(), j.dump(2) + "\n");
    log::info("effective configuration (saved in {}/config.json):\n{}", o_.output_dir,
              json{{"flags", flags_json_}, {"bert_config", config_.to_json()},
                   {"global_batch_size", global_batch_}, {"eval_every_samples", eval_interval_},
                   {"parameters", table_->num_parameters()}}
                  .dump(2));
}

void Run::load_or_init() {
    optim::OptimizerConfig oc;
    oc.kind = optim::parse_optimizer_kind(o_.optimizer);
    if (oc.kind == optim::OptimizerKind::lamb) {
        oc.beta_1 = o_.lamb_beta_1;
        oc.beta_2 = o_.lamb_beta_2;
        oc.epsilon = std::pow(10.0, o_.log_epsilon);
        oc.weight_decay_rate = o_.lamb_weight_decay_rate;
    } else {
        oc = optim::OptimizerConfig::adamw_reference();
    }
    oc.validate();
    optim::LrSchedule sched;
    sched.learning_rate = o_.learning_rate;
    sched.num_train_steps = o_.num_train_steps;
    sched.num_warmup_steps = o_.num_warmup_steps;
    sched.start_warmup_step = o_.start_warmup_step;
    sched.poly_power = o_.poly_power;
    if (o_.do_train) sched.validate();
    try {
        updater_ = std::make_unique<optim::ParameterUpdater>(*table_, oc, sched, o_.steps_per_update);
        if (o_.do_train) grads_.assign(table_->total_floats(), 0.0f);
    } catch (const std::bad_alloc&) {
        fail("out of memory allocating the optimizer state and gradients ({:.1f} MiB for {} "
             "parameters; they do not depend on the batch) (hint: a smaller model)",
             table_->total_floats() * 16.0 / (1 << 20), table_->num_parameters());
    }
    state_.next_eval_samples = o_.first_eval_samples > 0 ? o_.first_eval_samples : eval_interval_;

    if (!resume_from_.empty()) {
        log::info("resuming from {}", resume_from_);
        const model::CheckpointReader r(resume_from_);
        model::load_checkpoint(resume_from_, *table_, params_);
        r.load_table(*table_, updater_->optimizer().m(), "/adam_m");
        r.load_table(*table_, updater_->optimizer().v(), "/adam_v");
        const std::vector<int64_t> steps = r.read_i64("bertbench/global_step");
        const std::vector<int64_t> updates = r.read_i64("bertbench/update_count");
        const std::vector<int64_t> shape{2};
        const std::vector<float> powers = r.read_f32("bertbench/beta_powers", &shape);
        if (steps.size() != 1 || updates.size() != 1)
            fail("{}: bertbench/global_step: expected one value, got {}", resume_from_,
                 steps.size());
        updater_->set_global_step(steps[0]);
        updater_->optimizer().set_scalars(updates[0], powers[0], powers[1]);
        const auto& md = r.metadata();
        const auto get = [&](const char* key) {
            const auto it = md.find(key);
            if (it == md.end())
                fail("{}: __metadata__: expected \"{}\", got none (hint: not a checkpoint "
                     "written by bertbench pretrain)", resume_from_, key);
            return json_safe::parse(it->second,
                                    fmt::format("{}: __metadata__[\"{}\"]", resume_from_, key),
                                    "JSON written by bertbench pretrain");
        };
        try {
            state_ = TrainState::from_json(get("train_state"));
        } catch (const json::exception& e) {  // a field missing or of the wrong type
            fail("{}: __metadata__[\"train_state\"]: {} (expected the run state bertbench "
                 "pretrain writes; the checkpoint is damaged — hint: resume from an earlier "
                 "checkpoint or start a new --output_dir)",
                 resume_from_, e.what());
        }
        if (scaler_.enabled()) {
            if (md.find("loss_scaler") == md.end())
                fail("{}: __metadata__: expected \"loss_scaler\" for --loss_scale={}, got none (the "
                     "checkpoint was written without loss scaling; hint: --allow_changed_flags "
                     "does not apply, start a new --output_dir)",
                     resume_from_, o_.loss_scale);
            scaler_.restore(get("loss_scaler"));
        }
        const json old_flags = get("flags");
        for (const char* k : {"train_batch_size", "steps_per_update", "max_seq_length",
                              "max_predictions_per_seq", "seed", "optimizer"})
            if (old_flags.contains(k) && flags_json_.contains(k) && old_flags[k] != flags_json_[k])
                fail("--{}: expected {} as in the checkpoint {} being resumed, got {} (hint: use "
                     "a new --output_dir for a different run)",
                     k, json_safe::brief(old_flags[k]), resume_from_,
                     json_safe::brief(flags_json_[k]));
        if (o_.do_train) reader_state_ = get("reader_state");
        last_saved_step_ = steps[0];
        last_checkpoint_ = resume_from_;
        check_resumed_flags(get("flags"));
    } else if (!o_.init_checkpoint.empty()) {
        table_->initialize(params_, static_cast<uint64_t>(o_.seed));
        model::load_init_checkpoint(o_.init_checkpoint, *table_, params_);  // any format
    } else {
        table_->initialize(params_, static_cast<uint64_t>(o_.seed));
    }
}

void Run::save_checkpoint(bool final_one) {
    const int64_t step = updater_->global_step();
    if (step == last_saved_step_ && !final_one) return;
    BB_CHECK(is_boundary());  // the gradient accumulator is zero: not part of the state
    const std::string path = checkpoint_path(o_.output_dir, step);
    const double t0 = now_s();
    TrainState st = state_;
    st.elapsed_s = elapsed();
    model::CheckpointWriter w(path, *table_);
    w.add_table(params_);
    w.add_table(updater_->optimizer().m(), "/adam_m");
    w.add_table(updater_->optimizer().v(), "/adam_v");
    const int64_t gs = step, uc = updater_->optimizer().update_count();
    w.add_i64("bertbench/global_step", std::span<const int64_t>(&gs, 1));
    w.add_i64("bertbench/update_count", std::span<const int64_t>(&uc, 1));
    const float powers[2] = {updater_->optimizer().beta1_power(),
                             updater_->optimizer().beta2_power()};
    w.add_f32("bertbench/beta_powers", powers);
    w.set_metadata("flags", flags_json_.dump());
    w.set_metadata("train_state", st.to_json().dump());
    if (scaler_.enabled()) w.set_metadata("loss_scaler", scaler_.state().dump());
    w.set_metadata("reader_state", reader_ ? reader_->state().dump() : "null");
    w.set_metadata("dropout", fmt::format("philox(seed={}, step=global_step)", o_.seed));
    w.commit();
    last_saved_step_ = step;
    last_checkpoint_ = path;
    log::info("saved checkpoint {} ({:.2f} s)", path, now_s() - t0);
    prune_checkpoints();
}

void Run::prune_checkpoints() {
    if (o_.keep_checkpoint_max <= 0) return;
    std::vector<std::pair<int64_t, std::string>> found;
    for (const auto& e : fs::directory_iterator(o_.output_dir)) {
        const int64_t step = checkpoint_step(e.path());
        if (step >= 0) found.emplace_back(step, e.path().string());
    }
    std::sort(found.begin(), found.end());
    for (size_t i = 0; i + o_.keep_checkpoint_max < found.size(); ++i) {
        std::error_code ec;
        fs::remove(found[i].second, ec);
    }
}

EvalMetrics Run::run_eval(int64_t samples) {
    mllog_->eval_start(samples);
    EvalOptions eo;
    eo.files = eval_files_;
    eo.batch_size = o_.eval_batch_size;
    eo.max_seq_length = o_.max_seq_length;
    eo.max_predictions_per_seq = o_.max_predictions_per_seq;
    eo.max_eval_steps = o_.max_eval_steps;
    eo.skip_corrupt_records = o_.skip_corrupt_records;
    const double t0 = now_s();
    const EvalMetrics m =
        evaluate(eval_engine_ ? *eval_engine_ : *engine_, params_, config_.vocab_size, eo);
    const double dt = now_s() - t0;
    mllog_->eval_accuracy(m.masked_lm_accuracy, samples);
    mllog_->eval_stop(samples);
    ++state_.evals;
    state_.last_accuracy = m.masked_lm_accuracy;
    state_.best_accuracy = std::max(state_.best_accuracy, m.masked_lm_accuracy);
    json line = m.to_json();
    line["step"] = updater_->global_step();
    line["samples"] = samples;
    line["eval_seconds"] = dt;
    line["elapsed_s"] = elapsed();
    JsonlLog((fs::path(o_.output_dir) / "eval_log.jsonl").string()).write(line);
    acc_curve_.push_back({static_cast<double>(samples), m.masked_lm_accuracy});
    log::info("eval at {} samples (step {}): masked_lm_accuracy {:.4f} masked_lm_loss {:.4f} "
              "next_sentence_accuracy {:.4f} ({} examples, {:.1f} s)",
              samples, updater_->global_step(), m.masked_lm_accuracy, m.masked_lm_loss,
              m.next_sentence_accuracy, m.examples, dt);
    return m;
}

void Run::write_curves() {
    CurvesData d;
    d.title = fmt::format("bertbench pretrain: L{} H{} A{} I{}, {}, global batch {} ({} x {}), "
                          "seq {}",
                          config_.num_hidden_layers, config_.hidden_size,
                          config_.num_attention_heads, config_.intermediate_size,
                          o_.optimizer == "lamb" ? "LAMB" : "AdamW", global_batch_,
                          o_.train_batch_size, o_.steps_per_update, o_.max_seq_length);
    d.loss = loss_curve_;
    d.accuracy = acc_curve_;
    d.target = o_.do_eval ? o_.target_mlm_accuracy : -1;
    write_file_atomic((fs::path(o_.output_dir) / "curves.svg").string(), render_curves_svg(d));
}

void Run::abort(const std::string& reason) noexcept {
    try {
        if (!mllog_ || !mllog_->run_open()) return;
        mllog_->close_aborted();
        abort_reason_ = reason;
        write_results("aborted");
        write_curves();
    } catch (...) {
        // The original error is what the user needs to see.
    }
}

void Run::write_results(const std::string& status) {
    const auto opt = [](double v) { return v >= 0 ? json(v) : json(nullptr); };
    json j = {
        {"status", status},
        {"target_mlm_accuracy", o_.do_eval ? json(o_.target_mlm_accuracy) : json(nullptr)},
        {"final_masked_lm_accuracy", opt(state_.last_accuracy)},
        {"best_masked_lm_accuracy", opt(state_.best_accuracy)},
        {"evaluations", state_.evals},
        {"samples_to_target", state_.samples_to_target >= 0 ? json(state_.samples_to_target)
                                                            : json(nullptr)},
        {"time_to_target_s", opt(state_.time_to_target_s)},
        {"wall_time_s", elapsed()},
        {"wall_time_definition", "run_start -> run_stop (MLPerf), summed over resumed segments"},
        {"global_step", updater_->global_step()},
        {"updates", updater_->optimizer().update_count()},
        {"samples", samples()},
        {"skipped_nonfinite_steps", state_.skipped_steps},
        {"dtype", ops::precision_name(o_.precision)},
        {"loss_scale", scaler_.enabled() ? json(scaler_.scale()) : json(nullptr)},
        {"loss_scale_overflows", scaler_.overflows()},
        {"train_sequences_per_second",
         state_.timed_s > 0 ? json(state_.timed_samples / state_.timed_s) : json(nullptr)},
        {"train_tokens_per_second",
         state_.timed_s > 0 ? json(state_.timed_tokens / state_.timed_s) : json(nullptr)},
        {"train_throughput_definition",
         fmt::format("sequences of the optimizer updates after the first {} of each process "
                     "segment / their summed compute time (reader wait + forward + backward + "
                     "update; evaluation, checkpoints and logging excluded)",
                     o_.warmup_updates_excluded)},
        {"train_sequences_per_second_including_warmup",
         segment_update_s_ > 0 ? json(segment_update_samples_ / segment_update_s_)
                               : json(nullptr)},
        {"global_batch_size", global_batch_},
        {"peak_rss_mb", sysinfo::peak_rss_mb()},
        {"last_checkpoint", last_checkpoint_},
    };
    if (!abort_reason_.empty()) j["reason"] = abort_reason_;
    write_file_atomic((fs::path(o_.output_dir) / "results.json").string(), j.dump(2) + "\n");
}

int Run::main() {
    StopSignals signals;
    setup();
    load_or_init();
    check_before_start();
    write_config_json();
    const std::string dir = o_.output_dir;
    const std::string train_log_path = (fs::path(dir) / "train_log.jsonl").string();
    const std::string eval_log_path = (fs::path(dir) / "eval_log.jsonl").string();
    const int64_t start_step = updater_->global_step();
    // Logs of a killed run may run past its last checkpoint: keep what the checkpoint covers.
    const auto num = [](const json& j, const char* key) {
        const auto it = j.find(key);
        return it != j.end() && it->is_number() ? it->get<double>()
                                                : std::numeric_limits<double>::quiet_NaN();
    };
    for (const json& j : truncate_jsonl(train_log_path, "step", start_step))
        loss_curve_.push_back({num(j, "samples"), num(j, "loss")});
    for (const json& j : truncate_jsonl(eval_log_path, "step", start_step))
        acc_curve_.push_back({num(j, "samples"), num(j, "masked_lm_accuracy")});
    if (state_.finished) {
        log::info("the run in {} already finished ({}) at step {}; nothing to do (results.json)",
                  dir, state_.status, start_step);
        return 0;
    }

    const bool fresh = resume_from_.empty();
    const std::string mlperf_path = (fs::path(dir) / "mlperf.log").string();
    if (fresh && fs::exists(mlperf_path)) {
        // A start that failed or was killed before its first checkpoint: one run, one log.
        std::string aside;
        for (int k = 1; aside.empty() || fs::exists(aside); ++k)
            aside = fmt::format("{}.failed-start-{}", mlperf_path, k);
        fs::rename(mlperf_path, aside);
        log::info("{} was left by a start that ended before its first checkpoint; moved to {} so "
                  "that this run's log is one compliant run", mlperf_path, aside);
    }
    mllog_ = MlperfLogger::open(mlperf_path, false);
    if (!fresh) mllog_->continue_run();
    if (fresh) {
        mllog_->init_start();
        mllog_->submission_info("bertbench", sysinfo::cpu_model(), "open", "research");
        BertRunParams rp;
        rp.global_batch_size = global_batch_;
        rp.gradient_accumulation_steps = o_.steps_per_update;
        rp.opt_base_learning_rate = o_.learning_rate;
        rp.opt_lamb_epsilon = std::pow(10.0, o_.log_epsilon);
        rp.opt_learning_rate_training_steps = o_.num_train_steps;
        rp.opt_learning_rate_warmup_steps = o_.num_warmup_steps;
        rp.num_warmup_steps = o_.num_warmup_steps;
        rp.start_warmup_step = o_.start_warmup_step;
        rp.opt_lamb_beta_1 = o_.lamb_beta_1;
        rp.opt_lamb_beta_2 = o_.lamb_beta_2;
        rp.opt_lamb_weight_decay_rate = o_.lamb_weight_decay_rate;
        rp.max_sequence_length = o_.max_seq_length;
        rp.seed = o_.seed;
        rp.train_samples = o_.num_train_steps * o_.train_batch_size;
        rp.eval_samples = o_.max_eval_steps > 0 ? o_.max_eval_steps * o_.eval_batch_size : 0;
        mllog_->run_params(rp);
        mllog_->cache_clear(true);
        mllog_->init_stop();
        mllog_->run_start();
    }
    segment_start_ = now_s();

    // Eval-only run (--nodo_train): one evaluation of the initial weights.
    if (!o_.do_train) {
        const EvalMetrics m = run_eval(samples());
        std::cout << m.to_json().dump(2) << "\n";
        state_.finished = true;
        state_.status = m.masked_lm_accuracy >= o_.target_mlm_accuracy ? "success"
                                                                         : "target not reached";
        mllog_->run_stop(state_.status == "success");
        write_results(state_.status);
        write_curves();
        return 0;
    }

    data::PretrainReaderConfig rc;
    rc.files = train_files_;
    rc.max_seq_length = o_.max_seq_length;
    rc.max_predictions_per_seq = o_.max_predictions_per_seq;
    rc.batch_size = o_.train_batch_size;
    rc.training = true;
    rc.seed = static_cast<uint64_t>(o_.seed);
    rc.shuffle_buffer = o_.shuffle_buffer;
    rc.skip_corrupt_records = o_.skip_corrupt_records;
    reader_ = std::make_unique<data::PretrainReader>(rc);
    if (!reader_state_.is_null()) reader_->restore(reader_state_);

    JsonlLog train_log(train_log_path);
    log::Progress progress(10.0);
    model::Batch batch;
    std::string status;
    int64_t updates_this_segment = 0;
    double upd_loss = 0, upd_mlm = 0, upd_nsp = 0, upd_norm = 0, upd_t0 = now_s();
    int upd_micro = 0, upd_counted = 0;  // micro-steps in this update; of them not skipped
    bool skip_rest_of_update = false;
    int64_t upd_tokens = 0;
    int64_t block_first = samples();
    mllog_->block_start(block_first, eval_interval_);
    const auto fail_nonfinite = [&](const std::string& what) {
        status = "aborted";
        state_.finished = true;
        state_.status = status;
        mllog_->block_stop(block_first);
        mllog_->run_stop(false);
        write_results(status);
        write_curves();
        fail("step {}: {} (expected finite); last good checkpoint: {} (hint: lower "
             "--learning_rate, or --skip_nonfinite_steps to skip such steps)",
             updater_->global_step(), what, last_checkpoint_.empty() ? "none" : last_checkpoint_);
    };

    const int64_t stop_at = o_.stop_steps > 0 ? std::min(o_.stop_steps, o_.num_train_steps)
                                              : o_.num_train_steps;
    while (updater_->global_step() < stop_at) {
        const int64_t gs = updater_->global_step();
        if (upd_micro == 0) upd_t0 = now_s();
        reader_->next(batch);
        bool skipped = skip_rest_of_update;
        optim::MicroStepResult r;
        model::Losses l;
        if (!skipped) {
            l = engine_->forward(params_, batch, true, static_cast<uint64_t>(o_.seed),
                                 static_cast<uint64_t>(gs));
            if (!std::isfinite(l.total)) {
                if (!o_.skip_nonfinite_steps)
                    fail_nonfinite(fmt::format("training loss is {}", l.total));
                log::warn("step {}: training loss is {}; skipping this update", gs, l.total);
                skipped = true;
            } else {
                optim::fill_zero(grads_);
                engine_->backward(grads_, params_, batch, scaler_.scale());
                // Dynamic loss scaling: an overflow skips the update and halves the scale; a
                // fixed scale's overflow is a non-finite gradient like any other (below).
                if (!scaler_.unscale(grads_) &&
                    scaler_.mode() == optim::LossScaler::Mode::dynamic) {
                    log::warn("{}", scaler_.on_overflow(gs));
                    skipped = true;
                } else try {
                    r = updater_->micro_step(params_, grads_);
                    if (r.applied) {  // new weights: the bf16 engines copy them again
                        engine_->weights_changed();
                        if (eval_engine_) eval_engine_->weights_changed();
                        if (const std::string m = scaler_.on_clean_update(gs); !m.empty())
                            log::info("{}", m);
                    }
                } catch (const Error& e) {
                    if (!o_.skip_nonfinite_steps)
                        fail_nonfinite(fmt::format("gradient global norm is not finite, with a "
                                                   "finite loss {}", l.total));
                    log::warn("{}; skipping this update", e.what());
                    skipped = true;
                }
            }
            if (skipped) ++state_.skipped_steps;
        }
        if (skipped) {
            // The whole optimizer update this micro-step belongs to is dropped: its remaining
            // micro-steps are skipped too and the accumulator is cleared at its boundary. The
            // step counter (LR schedule, dropout, data order) advances as if it had run.
            skip_rest_of_update = true;
            if (gs % o_.steps_per_update == o_.steps_per_update - 1) {
                const std::span<float> acc = updater_->grad_accum();
                std::fill(acc.begin(), acc.end(), 0.0f);
                skip_rest_of_update = false;
            }
            updater_->set_global_step(gs + 1);
            r.learning_rate = updater_->schedule().at(gs);
        } else {
            upd_loss += l.total;
            upd_mlm += l.mlm_loss;
            upd_nsp += l.nsp_loss;
            upd_norm += r.grad_norm;
            ++upd_counted;
        }
        ++upd_micro;
        upd_tokens += batch.num_tokens();
        if (!is_boundary()) continue;

        // ---- one optimizer update done ----
        const double dt = now_s() - upd_t0;
        ++updates_this_segment;
        segment_update_s_ += dt;
        segment_update_samples_ += global_batch_;
        if (updates_this_segment > o_.warmup_updates_excluded) {
            state_.timed_s += dt;
            state_.timed_samples += global_batch_;
            state_.timed_tokens += upd_tokens;
        }
        const int64_t step = updater_->global_step();
        // Means over the update's micro-batches (NaN -> null when all were skipped).
        const double nan = std::numeric_limits<double>::quiet_NaN();
        const double k = upd_counted > 0 ? upd_counted : nan;
        const double loss = upd_loss / k;
        train_log.write({{"step", step},
                         {"update", updater_->optimizer().update_count()},
                         {"loss", loss},
                         {"mlm_loss", upd_mlm / k},
                         {"nsp_loss", upd_nsp / k},
                         {"learning_rate", r.learning_rate},
                         {"grad_norm", upd_norm / k},
                         {"samples", samples()},
                         {"sequences_per_second", global_batch_ / dt},
                         {"tokens_per_second", upd_tokens / dt},
                         {"loss_scale", scaler_.enabled() ? json(scaler_.scale()) : json(nullptr)}});
        loss_curve_.push_back({static_cast<double>(samples()), loss});
        upd_loss = upd_mlm = upd_nsp = upd_norm = 0;
        upd_micro = upd_counted = 0;
        upd_tokens = 0;
        {
            const double rate = state_.timed_s > 0 ? state_.timed_samples / state_.timed_s
                                                   : global_batch_ / dt;
            const double left = (stop_at - step) * o_.train_batch_size / rate;
            progress.update(fmt::format(
                "step {}/{} loss {:.4f} mlm_acc {} {:.1f} seq/s lr {:.3g} ETA {}", step,
                stop_at, loss,
                state_.last_accuracy >= 0 ? fmt::format("{:.4f}", state_.last_accuracy) : "-",
                rate, r.learning_rate, fmt_duration(left)));
        }

        bool stop = false;
        if (o_.do_eval && samples() >= state_.next_eval_samples) {
            mllog_->block_stop(block_first);
            const EvalMetrics m = run_eval(samples());
            while (state_.next_eval_samples <= samples()) state_.next_eval_samples += eval_interval_;
            if (m.masked_lm_accuracy >= o_.target_mlm_accuracy) {
                state_.target_reached = true;
                state_.samples_to_target = samples();
                state_.time_to_target_s = elapsed();
                stop = true;
            } else {
                block_first = samples();
                mllog_->block_start(block_first, eval_interval_);
            }
        }
        if (stop) {
            status = "success";
            break;
        }
        if (o_.save_checkpoints_steps > 0 &&
            step - std::max<int64_t>(last_saved_step_, 0) >= o_.save_checkpoints_steps &&
            step < stop_at)
            save_checkpoint(false);
        if (g_stop_signal != 0) {
            const int sig = g_stop_signal;
            save_checkpoint(false);
            write_results("interrupted");
            write_curves();
            progress.finish("");
            log::info("stopped by signal {} after step {}; checkpoint {}. Resume by running the "
                      "same command again (same --output_dir). Exit status {} (128 + signal: "
                      "interrupted, not finished).",
                      sig, step, last_checkpoint_, 128 + sig);
            return 128 + sig;
        }
    }
    progress.finish("");
    if (status.empty()) {
        // End of training: a last evaluation unless one just ran at this step.
        if (o_.do_eval && (acc_curve_.empty() ||
                           acc_curve_.back().x != static_cast<double>(samples()))) {
            mllog_->block_stop(block_first);
            const EvalMetrics m = run_eval(samples());
            if (m.masked_lm_accuracy >= o_.target_mlm_accuracy) {
                state_.target_reached = true;
                state_.samples_to_target = samples();
                state_.time_to_target_s = elapsed();
            }
        } else {
            mllog_->block_stop(block_first);
        }
        status = !o_.do_eval ? "completed (no evaluation)"
                 : state_.target_reached ? "success" : "target not reached";
    }
    mllog_->run_stop(status == "success");
    state_.finished = true;
    state_.status = status;
    save_checkpoint(true);
    write_results(status);
    write_curves();
    // With no update past the warm-up ones there is no throughput figure: say so, and give the
    // rate that includes the warm-up updates (labelled as such) rather than "0.0 seq/s".
    const std::string rate =
        state_.timed_s > 0
            ? fmt::format("{:.1f} seq/s", state_.timed_samples / state_.timed_s)
        : segment_update_s_ > 0
            ? fmt::format("throughput not measured (every update was among the first {} left out "
                          "as warm-up; {:.1f} seq/s including them)",
                          o_.warmup_updates_excluded,
                          segment_update_samples_ / segment_update_s_)
            : std::string("no updates timed");
    log::info("pretraining {}: step {}, {} samples, best masked-LM accuracy {}, wall {:.1f} s, "
              "{} (results.json, curves.svg, mlperf.log in {})",
              status, updater_->global_step(), samples(),
              state_.best_accuracy >= 0 ? fmt::format("{:.4f}", state_.best_accuracy) : "-",
              elapsed(), rate, dir);
    return 0;
}

}  // namespace

std::string checkpoint_path(const std::string& dir, int64_t step) {
    return (fs::path(dir) / fmt::format("model.ckpt-{}.safetensors", step)).string();
}

std::string latest_checkpoint(const std::string& dir) {
    std::error_code ec;
    if (!fs::is_directory(dir, ec)) return "";
    int64_t best = -1;
    std::string path;
    for (const auto& e : fs::directory_iterator(dir, ec)) {
        const int64_t s = checkpoint_step(e.path());
        if (s > best) best = s, path = e.path().string();
    }
    return path;
}

int run_pretraining(const PretrainOptions& options, const nlohmann::json& flags_json) {
    Run run(options, flags_json);
    try {
        return run.main();
    } catch (const Error& e) {
        run.abort(e.what());  // results.json and a compliant run_stop, then the error as usual
        throw;
    }
}

}  // namespace bertbench::train
