// The one training loop (loop.hpp). Dropout masks are a pure function of (seed, global step), so
// the resume state is: weights, adam_m/adam_v, optimizer scalars, global step, the loss scaler,
// the task's data cursor and its state (written and read back in loop_checkpoint.cpp).
#include "train/loop.hpp"

#include <fcntl.h>
#include <omp.h>
#include <pthread.h>
#include <signal.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <chrono>
#include <cmath>
#include <filesystem>
#include <limits>
#include <sstream>
#include <thread>

#include "core/error.hpp"
#include "core/flags.hpp"
#include "core/fs.hpp"
#include "core/log.hpp"
#include "core/sysinfo.hpp"
#include "dist/comm.hpp"
#include "model/checkpoint.hpp"
#include "ops/bf16.hpp"
#include "train/data_parallel.hpp"
#include "train/preflight.hpp"

namespace bertbench::train {
namespace fs = std::filesystem;
using nlohmann::json;

namespace {

std::atomic<int> g_stop_signal{0};

// SIGINT/SIGTERM during a run. First one: finish the update, checkpoint, exit 128 + signal. A
// second one: die at once (not the first one delivered twice: watch()). No thread ever runs a
// signal handler: the signals are blocked in the calling thread before any other thread of the
// run exists (the reader thread and libgomp's pool inherit the mask) and a watcher thread takes
// them with sigwaitinfo(). A handler would run on
// whichever compute thread the kernel picked, with its frame pushed onto that thread's stack;
// oneDNN 2.6's sgemm (Debian libdnnl2) corrupts the heap when that happens inside it
// (docs/engine.md, "Signals"). A signal the process inherited as ignored (SIGINT of a script's
// background job) stays ignored.
// SIGPIPE is ignored from here on, for the rest of the process: under `bertbench ... | tee log`
// Ctrl-C stops tee too, and the next log line would otherwise kill the run with SIGPIPE (141)
// after its checkpoint but before results.json and the stop message. A write to the closed pipe
// now just fails (log lines are best effort) and the stop ends with its own exit status, 130.
class StopSignals {
public:
    StopSignals() {
        g_stop_signal = 0;
        signal(SIGPIPE, SIG_IGN);
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
        pid_t first_sender = 0;
        std::chrono::steady_clock::time_point first_at;
        for (;;) {
            siginfo_t info{};
            const int sig = sigwaitinfo(&set_, &info);
            if (sig < 0) continue;
            if (closing_) return;
            if (g_stop_signal == 0) {
                g_stop_signal = sig;
                first_sender = info.si_code == SI_USER ? info.si_pid : 0;
                first_at = std::chrono::steady_clock::now();
                log::info("signal {}: stopping after this optimizer update (and the evaluation "
                          "in progress, if any) with a checkpoint (a second signal stops at once, "
                          "without one)",
                          sig);
                continue;
            }
            // The same signal from the same process within a second is the first one delivered
            // twice, not a second request: coreutils' timeout signals the command and then its
            // process group (which the command is in). Ctrl-C twice comes from the kernel.
            if (sig == g_stop_signal && info.si_code == SI_USER && info.si_pid == first_sender &&
                first_sender != 0 && std::chrono::steady_clock::now() - first_at < std::chrono::seconds(1)) {
                log::info("signal {} again from process {} within a second: the same stop request "
                          "(as timeout(1) sends it to the command and to its process group)", sig, first_sender);
                first_sender = 0;  // a third one is a second request
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

}  // namespace

optim::LossScaler check_run_options(const RunOptions& o) {
    optim::LossScaler scaler =
        optim::LossScaler::from_flag(o.loss_scale, o.initial_loss_scale, o.loss_scale_window);
    if (o.save_checkpoints_steps < 0)
        fail("--save_checkpoints_steps: expected >= 0, got {}", o.save_checkpoints_steps);
    if (o.keep_checkpoint_max < 0)
        fail("--keep_checkpoint_max: expected >= 0, got {}", o.keep_checkpoint_max);
    // bf16 units treat subnormal inputs as zero (AVX512-BF16's vdpbf16ps, AMX's tdpbf16ps), where
    // fp32 and the emulation keep them: a scale below 1 pushes small gradients down there
    if (o.precision == ops::Precision::bf16 && ops::bf16_native() &&
        scaler.mode() == optim::LossScaler::Mode::fixed && scaler.scale() < 1)
        log::warn("--loss_scale={}: below 1 with --dtype=bf16; this CPU's bf16 dot products treat "
                  "values below fp32's normal range (1.2e-38) as zero, so the gradients scaled down "
                  "there are lost, where fp32 keeps them (bf16 needs no loss scaling)",
                  o.loss_scale);
    return scaler;
}

std::vector<json> truncate_jsonl(const std::string& path, const char* key, int64_t limit) {
    std::vector<json> kept;
    if (!fs::exists(path)) return kept;
    std::istringstream in(read_file(path));
    std::string line, out;
    for (size_t no = 1; std::getline(in, line); ++no) {
        if (line.empty()) continue;
        json j = json::parse(line, nullptr, false);
        if (j.is_discarded() || !j.is_object() || !j.contains(key)) {
            // Only the last line can be torn (a write cut short by a kill): it is dropped. A
            // damaged line with lines after it is the log's damage, said, not silently cut.
            std::string rest;
            while (std::getline(in, rest))
                if (!rest.empty())
                    fail("{}: line {}: expected a JSON object with \"{}\", got {} (the log is damaged; "
                         "hint: remove the line, or the file to start the log afresh)",
                         path, no, key, j.is_discarded() ? "text that is not JSON" : "no such field");
            break;
        }
        if (!j[key].is_number_integer())
            fail("{}: line {}: \"{}\": expected an integer, got {} (the log is damaged; hint: "
                 "remove the line, or the file to start the log afresh)",
                 path, no, key, j[key].dump());
        if (j[key].get<int64_t>() > limit) break;
        out += line + "\n";
        kept.push_back(std::move(j));
    }
    write_file_atomic(path, out);
    return kept;
}

JsonlLog::JsonlLog(const std::string& path) : path_(path) {
    file_ = std::fopen(path.c_str(), "ab");
    if (!file_) fail("{}: cannot open for appending (hint: is --output_dir writable?)", path);
}
JsonlLog::~JsonlLog() {
    if (file_) std::fclose(file_);
}
void JsonlLog::write(const json& j) {
    const std::string s = j.dump() + "\n";
    if (std::fwrite(s.data(), 1, s.size(), file_) != s.size() || std::fflush(file_) != 0)
        fail("{}: write failed (disk full?)", path_);
}

model::BertConfig resolve_config(const std::string& bert_config_file, const std::string& preset,
                                 const std::string& resume_from, const std::string& init_checkpoint) {
    if (!bert_config_file.empty() && !preset.empty())
        fail("--bert_config_file and --model: expected one of them, got both");
    if (!bert_config_file.empty()) {
        model::BertConfig c = model::BertConfig::from_json_file(bert_config_file);
        c.validate(bert_config_file);
        return c;
    }
    if (!preset.empty()) return model::BertConfig::preset(preset);
    const std::string& from = !resume_from.empty() ? resume_from : init_checkpoint;
    model::BertConfig saved;  // a TensorFlow checkpoint carries none
    if (!from.empty() && model::checkpoint_config(from, &saved)) return saved;
    fail("--bert_config_file: expected a bert_config.json (or --model=<preset>), got none "
         "(hint: --model=tiny for a quick try)");
}

// ---------------------------------------------------------------------------------------------

TrainLoop::TrainLoop(const LoopOptions& options, const json& flags_json, Task& task)
    : o_(options), flags_json_(flags_json), task_(task) {}
TrainLoop::~TrainLoop() = default;

int64_t TrainLoop::global_step() const { return updater_->global_step(); }
int64_t TrainLoop::samples() const { return updater_->global_step() * o_.train_batch_size; }
double TrainLoop::elapsed() const { return state_.elapsed_s + (now_s() - segment_start_); }
bool TrainLoop::is_boundary() const {
    return updater_->global_step() % o_.steps_per_update == 0;
}
std::string TrainLoop::path(const char* name) const {
    return (fs::path(o_.output_dir) / name).string();
}
int TrainLoop::local_batch(int global_batch, const std::string& flag) const {
    return dp_->local_batch(global_batch, flag);
}

void TrainLoop::setup() {
    // Data parallel under mpirun (nothing changes without it): rank 0 alone logs and writes.
    dp_ = std::make_unique<DataParallel>(dist::world());
    root_ = dp_->is_root();
    dist::quiet_other_ranks();
    scaler_ = check_run_options(o_);
    if (o_.output_dir.empty())
        fail("--output_dir: expected a directory for checkpoints and logs, got none");
    if (o_.train_batch_size < 1) fail("--train_batch_size: expected >= 1, got {}", o_.train_batch_size);
    if (o_.steps_per_update < 1) fail("--steps_per_update: expected >= 1, got {}", o_.steps_per_update);
    if (dp_->active()) {
        if (o_.do_train) dp_->local_batch(o_.train_batch_size, "train_batch_size");
        if (scaler_.mode() == optim::LossScaler::Mode::dynamic)
            fail("--loss_scale=dynamic: not supported under mpirun yet (every rank must agree on "
                 "skipping an overflowing update; hint: a fixed --loss_scale)");
        if (o_.skip_nonfinite_steps)
            fail("--skip_nonfinite_steps: not supported under mpirun yet (every rank must agree "
                 "on skipping an update)");
    }
    // Sample counts (step x batch) must fit in int64 with room to spare; a resumed step is
    // checked against the same bound.
    if (o_.num_train_steps > kMaxRunSamples / o_.train_batch_size)
        fail("--num_train_steps: expected at most {} (2^53 sequences at --train_batch_size={}), "
             "got {}", kMaxRunSamples / o_.train_batch_size, o_.train_batch_size,
             o_.num_train_steps);
    // The run ends on an optimizer update: micro-steps past the last one would compute gradients
    // that are never applied (the reference drops them) and leave no checkpoint of their own.
    // (--stop_steps counts updates on every command line that has it: always whole ones.)
    const int64_t k = o_.steps_per_update, t = o_.num_train_steps, whole = t / k * k;
    if (o_.do_train && t > 0 && t % k != 0)
        fail("--num_train_steps={}: expected a multiple of --steps_per_update={} (the run stops on an "
             "optimizer update; the last {} micro-step(s) would be gradients never applied) (hint: "
             "--num_train_steps={}{})",
             t, k, t % k, whole > 0 ? whole : k, whole > 0 ? fmt::format(" or {}", whole + k) : std::string());
    const int cpus = sysinfo::cpus_available();
    const int threads = o_.threads > 0 ? o_.threads : cpus;
    if (o_.threads < 0 || threads > cpus)
        fail("--threads={}: expected 1..{} (CPUs available to this process{})", o_.threads, cpus,
             sysinfo::cpus_binding_hint());
    omp_set_num_threads(threads);
    if (o_.do_train) o_.schedule.validate();  // its flags' errors before any set-up is said

    make_output_dir(o_.output_dir, "--output_dir");
    if (root_ && !o_.output_dir_locked) lock_output_dir();
    // one --output_dir for the job: a node-local one would keep the other ranks' view of the
    // checkpoints apart from what rank 0 writes, found only when the run resumes
    dist::require_shared_directory(dp_->comm(), o_.output_dir, "output_dir");
    resume_from_ = latest_checkpoint(o_.output_dir);
    task_.prepare(resume_from_);
    dp_->set_table(task_.table());
    dp_->set_device(o_.device());  // a GPU's gradients: NCCL, or averaged through host memory
    check_outputs_are_not_inputs();
    if (root_) remove_stale_temporaries(o_.output_dir);
    global_batch_ = static_cast<int64_t>(o_.train_batch_size) * o_.steps_per_update;
    if (dp_->active())  // rank 0 alone logs
        log::info("mpirun: {} ranks x {} sequences per micro-step each = {} per micro-step; x {} "
                  "micro-steps = global batch {} per update", dp_->size(),
                  o_.train_batch_size / dp_->size(), o_.train_batch_size, o_.steps_per_update,
                  global_batch_);
}

// One run in an --output_dir at a time: a second would resume from the first's checkpoints while
// they are written, interleave its lines into the same logs and move the first's mlperf.log aside.
void TrainLoop::lock_output_dir() { output_dir_lock_ = DirectoryLock(o_.output_dir, "--output_dir"); }

// No input may be one of the files the run writes in --output_dir (by inode: a symlink or hard
// link counts), or the run would overwrite it; none of them may be a directory (the run would
// fail at its end, writing it).
void TrainLoop::check_outputs_are_not_inputs() const {
    check_run_outputs_not_directories(o_.output_dir, "--output_dir", run_output_names());
    std::vector<std::string> inputs = task_.inputs();
    if (!o_.init_checkpoint.empty())
        for (std::string& f : model::checkpoint_files(o_.init_checkpoint)) inputs.push_back(std::move(f));
    for (const std::string& name : run_output_names())
        for (const std::string& in : inputs)
            if (same_file((fs::path(o_.output_dir) / name).string(), in))
                fail("--output_dir={}: the run writes its {} there, and that is the input file {}{}; "
                     "writing it would destroy the input (hint: another --output_dir, or the input "
                     "moved out of it)",
                     o_.output_dir, name, in, fs::path(in).filename() == name ? "" : " (the same file)");
}

void TrainLoop::write_config_json() {
    if (!root_) return;
    const model::ParamTable& table = task_.table();
    json summary = {{"flags", flags_json_},
                    {"bert_config", table.config().to_json()},
                    {"global_batch_size", global_batch_},
                    {"number_of_ranks", dp_->size()},
                    {"per_rank_batch_size", o_.train_batch_size / dp_->size()},
                    {"threads", omp_get_max_threads()},  // rank 0's: --threads=0 resolved
                    {"parameters", table.num_parameters()}};
    const json extra = task_.config_json();
    for (const auto& [k, v] : extra.items()) summary[k] = v;
    json j = summary;
    j["command"] = o_.command;
    j["resumed_from"] = resume_from_;
    j["system"] = sysinfo::system_info();
    j["build"] = sysinfo::build_info();
    write_file_atomic(path("config.json"), j.dump(2) + "\n");
    log::info("effective configuration (saved in {}/config.json):\n{}", o_.output_dir,
              summary.dump(2));
}

void TrainLoop::write_curves() {
    if (!root_) return;
    CurvesData d;
    d.title = fmt::format("bertbench {}: {}, {}, global batch {} ({} x {})", o_.command,
                          task_.model_line(),
                          o_.optimizer.kind == optim::OptimizerKind::lamb ? "LAMB" : "AdamW",
                          global_batch_, o_.train_batch_size, o_.steps_per_update);
    d.loss = loss_curve_;
    task_.add_curves(d);
    write_file_atomic(path("curves.svg"), render_curves_svg(d));
}

void TrainLoop::abort(const std::string& reason) noexcept {
    try {
        if (!started_ || state_.finished) return;
        task_.on_abort();
        abort_reason_ = reason;
        write_results("aborted");
        write_curves();
    } catch (...) {
        // The original error is what the user needs to see.
    }
}

void TrainLoop::write_results(const std::string& status) {
    if (!root_) return;
    json j = {
        {"status", status},
        {"wall_time_s", final_wall_s_ >= 0 ? final_wall_s_ : elapsed()},
        // this process's part: its run_start -> run_stop, and the sequences of its updates
        {"segment_wall_time_s", (final_wall_s_ >= 0 ? final_wall_s_ : elapsed()) - state_.elapsed_s},
        {"segment_samples", segment_update_samples_},
        {"initialization_s", started_ ? json(initialization_s()) : json(nullptr)},
        {"global_step", updater_->global_step()},
        {"updates", updater_->optimizer().update_count()},
        {"samples", samples()},
        {"skipped_nonfinite_steps", state_.skipped_steps},
        {"dtype", ops::precision_name(o_.precision)},
        {"bf16_emulated", ops::bf16_emulated(o_.precision)},
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
        {"number_of_ranks", dp_->size()},
        {"per_rank_batch_size", o_.train_batch_size / dp_->size()},
        {"peak_rss_mb", sysinfo::peak_rss_mb()},
        {"last_checkpoint", last_checkpoint_},
        // a run in several processes: its times sum the segments (not one MLPerf run)
        {"resumed_from", resume_from_.empty() ? json(nullptr) : json(resume_from_)},
    };
    task_.add_results(j);
    if (!abort_reason_.empty()) j["reason"] = abort_reason_;
    write_file_atomic(path("results.json"), j.dump(2) + "\n");
}

int TrainLoop::run() {
    run_entry_ = now_s();
    run_entry_ms_ = std::chrono::duration_cast<std::chrono::milliseconds>(
                        std::chrono::system_clock::now().time_since_epoch()).count();
    StopSignals signals;
    try {
        setup();
        load_or_init();
        // Before the first step, every rank: the same flags and model, and its data readable.
        // --threads may differ (Intel's launcher splits a node's cores unevenly over its ranks;
        // the all-reduced gradients keep the replicas equal whatever each rank's threads).
        json same = json::object();
        for (const auto& [name, value] : flags_json_.items())
            if (name != "threads") same["--" + name] = value;
        same["bert_config.json"] = task_.table().config().to_json();
        dist::require_same_json_on_all_ranks(dp_->comm(), same, "flags and model config",
                                             "start every rank with the same command line and bert_config.json");
        // ... the same files behind those flags (each rank expands the globs itself: a shard
        // missing on one host would re-shard the data silently) and the same starting point (an
        // --output_dir that is not one directory for every rank resumes them at different steps).
        const std::vector<std::string> inputs = task_.inputs();
        if (dp_->comm().size() > 1)  // files read only to be compared
            dist::require_same_json_on_all_ranks(
                dp_->comm(),
                {{"input files", dist::file_fingerprints(inputs)}, {"the step resumed from", global_step()}},
                "input files and step resumed from",
                "every rank must see the same input files and the same --output_dir: a shared file system, or "
                "identical copies at the same paths on every host");
        std::string not_ready;
        try {
            task_.check_before_start();
        } catch (const Error& e) {
            if (!dp_->active()) throw;
            not_ready = e.what();
        }
        dp_->require_all_ok(not_ready);
        if (!resume_from_.empty() || !o_.init_checkpoint.empty()) {
            const std::string& from = !resume_from_.empty() ? resume_from_ : o_.init_checkpoint;
            std::vector<float> copy;
            check_finite_params(task_.table(), backend::host_view(o_.device(), params_->get(), params_->size(), copy),
                                from);
            // A file of the same name and size with other weights on one rank would train
            // replicas that belong to no one model until the first checkpoint's check.
            dp_->require_same_weights(params_->span(), "at the start (from " + from + ")",
                                      "every rank must load the same checkpoint file");
        }
        if (state_.finished) {  // nothing is written (an archived, read-only run checks too)
            log::info("the run in {} already finished ({}) at step {}; nothing to do "
                      "(results.json)", o_.output_dir, state_.status, global_step());
            return 0;
        }
        if (root_ && !changed_flags_.is_null()) JsonlLog(path("changed_flags.jsonl")).write(changed_flags_);
        write_config_json();
        // Logs of a killed run may run past its last checkpoint: keep what the checkpoint covers.
        const auto num = [](const json& j, const char* key) {
            const auto it = j.find(key);
            return it != j.end() && it->is_number() ? it->get<double>()
                                                    : std::numeric_limits<double>::quiet_NaN();
        };
        if (root_) {
            const std::vector<json> kept = truncate_jsonl(path("train_log.jsonl"), "step", global_step());
            for (const json& j : kept) loss_curve_.push_back({num(j, "samples"), num(j, "loss")});
            // one line per update: a resumed log ends at the checkpoint's step unless it lost lines
            const int64_t last = kept.empty() ? 0 : kept.back()["step"].get<int64_t>();
            if (!resume_from_.empty() && last < global_step())
                log::warn("{}: expected its lines up to step {} (the checkpoint's), found {}; the resumed run "
                          "appends to it as it is (it and curves.svg miss those steps)",
                          path("train_log.jsonl"), global_step(),
                          kept.empty() ? std::string("none") : fmt::format("lines up to step {}", last));
        }
        task_.on_start(*this, resume_from_.empty());
        started_ = true;
        segment_start_ = now_s();
        if (!o_.do_train) return finish(task_.run_without_training(*this));
        return train();
    } catch (const Error& e) {
        abort(e.what());  // results.json (and the task's logs), then the error as usual
        throw;
    }
}

int TrainLoop::finish(const std::string& status, bool finished) {
    final_wall_s_ = elapsed();  // at run_stop: the final checkpoint's write is not the run's time
    // results.json and curves.svg before the checkpoint that marks the run finished: a run stopped
    // between the two resumes from its last checkpoint and ends again, where the other order left a
    // finished run without its results, which no rerun would write
    const std::string saved = last_checkpoint_;
    if (o_.do_train) last_checkpoint_ = checkpoint_path(o_.output_dir, updater_->global_step());
    write_results(status);
    write_curves();
    if (!o_.do_train) return 0;
    state_.finished = finished;
    state_.status = status;
    try {
        save_checkpoint(true);
    } catch (...) {
        state_.finished = false;  // abort() rewrites results.json: the run did not end
        last_checkpoint_ = saved;
        throw;
    }
    return 0;
}

int TrainLoop::train() {
    task_.open_training_data(data_cursor_);
    JsonlLog train_log(root_ ? path("train_log.jsonl") : "/dev/null");
    log::Progress progress(10.0);
    std::string status;
    int64_t updates_this_segment = 0;
    double upd_loss = 0, upd_norm = 0, upd_t0 = now_s();
    int upd_norms = 0;  // micro-steps of this update that measured a norm (after_accumulation: 1)
    std::vector<std::pair<std::string, double>> upd_parts;
    int upd_micro = 0, upd_counted = 0;  // micro-steps in this update; of them not skipped
    bool skip_rest_of_update = false;
    int64_t upd_tokens = 0;
    int nonfinite_in_a_row = 0;  // micro-steps that ran and were non-finite, since the last clean one
    // Steps are named from 1, as train_log.jsonl numbers them: the failing one is the first not logged
    const auto fail_nonfinite = [&](const std::string& what) {
        abort_reason_ = what;
        task_.on_abort();
        state_.finished = true;
        state_.status = "aborted";
        write_results("aborted");
        write_curves();
        const std::string limit = o_.skip_nonfinite_steps
            ? fmt::format(", {} micro-steps in a row (--skip_nonfinite_limit={}: the model diverged)",
                          nonfinite_in_a_row, o_.skip_nonfinite_limit)
            : "";
        fail("step {}: {} (expected finite){}; last good checkpoint: {} (hint: lower --learning_rate{})",
             updater_->global_step() + 1, what, limit, last_checkpoint_.empty() ? "none" : last_checkpoint_,
             o_.skip_nonfinite_steps || dp_->active() ? "" : ", or --skip_nonfinite_steps to skip such steps");
    };

    const int64_t stop_at = last_step();
    while (updater_->global_step() < stop_at) {
        const int64_t gs = updater_->global_step();
        if (upd_micro == 0) upd_t0 = now_s();
        upd_tokens += task_.next_batch();
        bool skipped = skip_rest_of_update;
        optim::MicroStepResult r;
        StepLoss l;
        if (!skipped) {
            const MicroStepOutcome m =
                micro_step(task_, params_->span(), grads_->span(), {*updater_, dp_.get(), &scaler_},
                           static_cast<uint64_t>(o_.seed), static_cast<uint64_t>(gs));
            l = m.loss;
            r = m.result;
            using Status = MicroStepOutcome::Status;
            const bool nonfinite = m.status == Status::nonfinite_loss || m.status == Status::nonfinite_grad;
            nonfinite_in_a_row = nonfinite ? nonfinite_in_a_row + 1 : 0;
            const bool give_up = !o_.skip_nonfinite_steps ||
                                 (o_.skip_nonfinite_limit > 0 && nonfinite_in_a_row >= o_.skip_nonfinite_limit);
            switch (m.status) {
                case Status::done:
                    if (!m.message.empty()) log::info("{}", m.message);
                    break;
                case Status::nonfinite_loss:
                    if (give_up) fail_nonfinite(fmt::format("training loss is {}", l.loss));
                    log::warn("step {}: training loss is {}; skipping this update", gs + 1, l.loss);
                    skipped = true;
                    break;
                case Status::overflow:
                    log::warn("{}", m.message);
                    skipped = true;
                    break;
                case Status::nonfinite_grad:
                    if (give_up)
                        fail_nonfinite(fmt::format("gradient global norm is not finite, with a finite loss {}",
                                                   l.loss));
                    log::warn("{}; skipping this update", m.message);
                    skipped = true;
                    break;
            }
            if (skipped) ++state_.skipped_steps;
        }
        if (skipped) {
            // The whole optimizer update this micro-step belongs to is dropped: its remaining
            // micro-steps are skipped too and the accumulator is cleared at its boundary. The
            // step counter (LR schedule, dropout, data order) advances as if it had run.
            skip_rest_of_update = true;
            if (gs % o_.steps_per_update == o_.steps_per_update - 1) {
                updater_->clear_accumulator();
                skip_rest_of_update = false;
            }
            updater_->set_global_step(gs + 1);
            r.learning_rate = updater_->schedule().at(gs);
        } else {
            upd_loss += l.loss;
            if (upd_parts.empty()) upd_parts = l.parts;
            else
                for (size_t i = 0; i < upd_parts.size(); ++i) upd_parts[i].second += l.parts[i].second;
            if (r.norm_measured) upd_norm += r.grad_norm, ++upd_norms;
            ++upd_counted;
        }
        ++upd_micro;
        if (!is_boundary()) continue;
        // Under mpirun: all ranks' tokens, and whether a signal reached any rank (every rank
        // then stops after this same update).
        int stop_signal = g_stop_signal;
        if (dp_->active()) {
            int64_t v[2] = {upd_tokens, stop_signal != 0 ? 1 : 0};
            dp_->comm().all_reduce_sum(std::span<int64_t>(v, 2));
            upd_tokens = v[0];
            if (v[1] > 0 && stop_signal == 0) stop_signal = SIGTERM;
        }

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
        const double k = upd_counted > 0 ? upd_counted : std::numeric_limits<double>::quiet_NaN();
        const double loss = upd_loss / k;
        json line = {{"step", step}, {"update", updater_->optimizer().update_count()}, {"loss", loss}};
        for (const auto& [name, v] : upd_parts) line[name] = v / k;
        line["learning_rate"] = r.learning_rate;
        line["grad_norm"] = upd_norms > 0 ? upd_norm / upd_norms : std::numeric_limits<double>::quiet_NaN();
        line["samples"] = samples();
        line["sequences_per_second"] = global_batch_ / dt;
        line["tokens_per_second"] = upd_tokens / dt;
        line["loss_scale"] = scaler_.enabled() ? json(scaler_.scale()) : json(nullptr);
        train_log.write(line);
        loss_curve_.push_back({static_cast<double>(samples()), loss});
        upd_loss = upd_norm = 0;
        upd_norms = 0;
        upd_parts.clear();
        upd_micro = upd_counted = 0;
        upd_tokens = 0;
        {
            const double rate = state_.timed_s > 0 ? state_.timed_samples / state_.timed_s
                                                   : global_batch_ / dt;
            const double left = (stop_at - step) * o_.train_batch_size / rate;
            const std::string note = task_.progress_note();
            if (root_) progress.update(fmt::format("step {}/{} loss {:.4f}{}{} {:.1f} seq/s lr {:.3g} ETA {}",
                                        step, stop_at, loss, note.empty() ? "" : " ", note, rate,
                                        r.learning_rate, log::duration(left)));
        }
        status = task_.after_update(*this);
        if (!status.empty()) break;
        // A signal during the evaluation after_update may have run stops the run now rather than
        // one update later (one process; under mpirun the ranks agree on it at the next update).
        if (stop_signal == 0 && !dp_->active()) stop_signal = g_stop_signal;
        if (o_.save_checkpoints_steps > 0 && step < stop_at &&
            (o_.save_at_multiples ? step % o_.save_checkpoints_steps == 0
                                  : step - std::max<int64_t>(last_saved_step_, 0) >= o_.save_checkpoints_steps))
            save_checkpoint(false);
        if (stop_signal != 0) {
            const int sig = stop_signal;
            (void)task_.at_end(*this, kPaused);  // goes on in a later process: its MLPerf block closed
            final_wall_s_ = elapsed();            // as finish(): the checkpoint's write is not the run's time
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
    // Stopped by --stop_steps (NVIDIA's --steps_this_run) short of --num_train_steps: the run is
    // not finished; running the command again (a later stop, or none) continues it, as the
    // references' reruns continue from the output directory's latest checkpoint
    const int64_t stopped_at = updater_->global_step();
    const bool stopped_early = status.empty() && stopped_at < o_.num_train_steps;
    status = task_.at_end(*this, stopped_early ? kPaused : status);
    if (stopped_early) {
        finish(fmt::format("stopped at step {} of {} ({}); not finished: run again with a later {}, or without it, "
                           "to continue", stopped_at, o_.num_train_steps, o_.stop_flag, o_.stop_flag), false);
        status = "stopped (" + o_.stop_flag + "), not finished";  // the closing line below; the rest said above
        log::info("stopped at step {} of --num_train_steps={} ({}): checkpoint {}; the same command with a later {} "
                  "(or none) continues the run", stopped_at, o_.num_train_steps, o_.stop_flag, last_checkpoint_,
                  o_.stop_flag);
    } else {
        finish(status);
    }
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
    log::info("{} {}: step {}, {} samples, wall {:.1f} s, {} (results.json, curves.svg in {})",
              o_.command, status, updater_->global_step(), samples(),
              final_wall_s_ >= 0 ? final_wall_s_ : elapsed(), rate, o_.output_dir);
    return 0;
}

}  // namespace bertbench::train
