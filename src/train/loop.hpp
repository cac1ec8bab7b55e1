// The one training loop of bertbench, shared by pretraining (train/pretrain.cpp) and SQuAD
// fine-tuning (train/squad_train.cpp): micro-steps (forward with dropout, backward, loss
// scaling), gradient accumulation, clip + optimizer (optim::ParameterUpdater), checkpoints with
// bit-exact resume (weights, optimizer slots and scalars, global step, the task's data cursor
// and state), SIGINT/SIGTERM (checkpoint, then exit 128 + signal), progress on the terminal,
// train_log.jsonl, curves.svg, config.json and results.json. A Task brings what differs: the
// model and its engine, the training data, the evaluation and the task's own logs and results.
#pragma once

#include <algorithm>
#include <cstdint>
#include <cstdio>
#include <functional>
#include <memory>
#include <nlohmann/json.hpp>
#include <span>
#include <string>
#include <vector>

#include "backend/backend.hpp"
#include "core/fs.hpp"
#include "core/timing.hpp"
#include "model/config.hpp"
#include "model/param_table.hpp"
#include "ops/bf16.hpp"
#include "optim/loss_scale.hpp"
#include "optim/optimizer.hpp"
#include "optim/schedule.hpp"
#include "optim/update.hpp"
#include "train/micro_step.hpp"
#include "train/svg_plot.hpp"

namespace bertbench::model {
class CheckpointReader;
}  // namespace bertbench::model
namespace bertbench::train {

// The most sequences a run may see (global step x train_batch_size): 2^53, exact in a double and
// far enough from int64's limit that sums and products of counts bounded by it cannot overflow.
// Every count a checkpoint holds is checked against it, or a tighter bound, before it is used.
inline constexpr int64_t kMaxRunSamples = int64_t{1} << 53;

// A number of a checkpoint's saved state (train_state, the reader cursor): `j[key]` as an
// integer in [lo, hi], else an Error "\"key\": expected an integer in [lo, hi] (<why>), got
// <value>" (also for a missing field, a float or a string). The caller adds the file.
int64_t saved_int(const nlohmann::json& j, const char* key, int64_t lo, int64_t hi,
                  const std::string& why = "");
// The same for a finite real number in [lo, hi].
double saved_real(const nlohmann::json& j, const char* key, double lo, double hi,
                  const std::string& why = "");

// The settings of a training run that every training command has, under the same names in the
// command's options (PretrainOptions, SquadTrainOptions derive from it) and in the loop's, so a
// command hands them over in one assignment.
struct RunOptions {
    std::string output_dir;
    std::string init_checkpoint;       // any format load_init_checkpoint reads
    int train_batch_size = 32;         // sequences per micro-step
    int64_t save_checkpoints_steps = 1000;  // micro-steps; 0 = only at the end
    // Where: at the steps that are multiples of it (NVIDIA run_pretraining.py's
    // `global step % num_steps_per_checkpoint == 0`, after a resume too), not that many after the
    // previous checkpoint (TF's CheckpointSaverHook)
    bool save_at_multiples = false;
    int keep_checkpoint_max = 5;       // 0 = keep all
    int64_t seed = 12345;              // initialisation and dropout
    int threads = 0;                   // 0 = every available CPU
    bool allow_changed_flags = false;  // resume with other hyper-parameters (logged)
    // The line's --train_batch_size is per rank (NVIDIA's and NGC's): train_batch_size is it x the
    // ranks, and a resume under another mpirun -np changes it (the message says so).
    bool batch_per_rank = false;
    ops::Precision precision = ops::Precision::fp32;  // the engine's GEMMs (--dtype)
    std::string loss_scale;            // "" none, "dynamic", or a fixed factor
    double initial_loss_scale = 32768; // --loss_scale=dynamic starts here
    int loss_scale_window = 2000;      // clean updates before the dynamic scale doubles
    // With init_checkpoint (one of our checkpoints): also take the optimizer's moments (m, v)
    // from it, and restart its bias correction (NVIDIA's phase 2 continuing phase 1's LAMB state).
    bool init_optimizer_moments = false;
    // --device: the backend the engines, the parameters, the gradients and the optimizer's state
    // live on (not owned; null: the CPU's). Checkpoints are the same files on every backend.
    backend::Backend* backend = nullptr;
    backend::Backend& device() const { return backend ? *backend : backend::cpu(); }
    // The command holds --output_dir's lock (DirectoryLock) for longer than the loop runs
    // (squad: features, training, then prediction); the loop does not take it again.
    bool output_dir_locked = false;
    // The command line's own spelling of the stop flag, for the messages (NVIDIA run_pretraining.py's
    // line: --steps_this_run)
    std::string stop_flag = "--stop_steps";
};

// The checks of RunOptions' own numbers (one-line errors naming the flag), which the loop makes
// and a command may make earlier, before work of its own (squad's featurizing); returns the loss
// scaler the flags describe.
optim::LossScaler check_run_options(const RunOptions& o);

// What the loop itself needs: the run's settings, and what the task derives from its own flags.
struct LoopOptions : RunOptions {
    std::string command;               // "pretrain" / "squad": config.json, messages
    bool do_train = true;
    int steps_per_update = 1;          // micro-steps per optimizer update
    int64_t num_train_steps = 0;       // micro-steps (TF global_step); the schedule's length
    int64_t stop_steps = 0;            // stop at this micro-step; 0 = num_train_steps
    bool skip_nonfinite_steps = false;
    int skip_nonfinite_limit = 20;     // with it: this many non-finite micro-steps in a row stop the run; 0 = none
    // Where clip_by_global_norm applies (optim/update.hpp; after_accumulation is run_pretraining.py
    // --clip_by_global_norm_after_gradient_allreduce) and its threshold (+inf: no clip)
    optim::ClipMode clip_mode = optim::ClipMode::per_micro_batch;
    float clip_norm = 1.0f;
    int warmup_updates_excluded = 3;   // updates left out of the throughput figure
    optim::OptimizerConfig optimizer;
    optim::LrSchedule schedule;
    // Flags a resume may never change (error), and flags that would fork a resumed run (error
    // unless --allow_changed_flags, then recorded in changed_flags.jsonl).
    std::vector<std::string> fixed_flags, checked_flags;
};

class TrainLoop;
class DataParallel;

inline constexpr const char* kPaused = "paused (--stop_steps)";

// The training loop drives the task as a Trainable (train/micro_step.hpp) at the batch
// next_batch() read.
class Task : public Trainable {
public:
    virtual ~Task() = default;

    // ---- set-up, in this order; `resume_from` is the checkpoint being resumed or "" ----
    // Validates the task's flags, resolves the model config, builds the parameter table and the
    // engines (planned for options.train_batch_size or the task's inference batch).
    virtual void prepare(const std::string& resume_from) = 0;
    virtual const model::ParamTable& table() const = 0;
    // Files the run reads (none of them may be one the run writes: run_output_names()).
    virtual std::vector<std::string> inputs() const = 0;
    // Of them, the data the run's examples and order come from: a resume refuses one whose size
    // changed since the checkpoint (a file replaced in place) unless --allow_changed_flags.
    virtual std::vector<std::string> data_files() const = 0;
    // After the weights are initialised or loaded: checks of the data that can fail early.
    virtual void check_before_start() {}
    virtual nlohmann::json config_json() const { return nlohmann::json::object(); }
    virtual std::string model_line() const = 0;  // for config.json's log and curves.svg's title

    // ---- state kept in checkpoints (merged into train_state) ----
    virtual nlohmann::json state() const { return nlohmann::json::object(); }
    // `samples`: the sequences the checkpoint had seen (its global step x train_batch_size,
    // already checked). Every number is range-checked against what the run can have reached
    // (saved_int / saved_real); an Error names the field (the loop adds the file).
    virtual void restore_state(const nlohmann::json& /*state*/, int64_t /*samples*/) {}
    // One rank's saved data cursor (as data_cursor() returned it; never null), checked before
    // any of the checkpoint is used: an Error naming the field when a number is out of range.
    virtual void check_data_cursor(const nlohmann::json& /*cursor*/, int64_t /*samples*/) const {}
    // Why a checked cursor cannot continue in this run's data ("" when it can): other data files,
    // seed or shuffle buffer since the checkpoint (--allow_changed_flags then starts a fresh epoch).
    virtual std::string data_cursor_mismatch(const nlohmann::json& /*cursor*/) const { return ""; }

    // ---- the run ----
    // Called once the logs have been trimmed to the resumed step; `fresh` = no checkpoint.
    virtual void on_start(TrainLoop&, bool /*fresh*/) {}
    // --nodo_train: what the run does instead (e.g. one evaluation). Returns the status.
    virtual std::string run_without_training(TrainLoop&) = 0;
    virtual void open_training_data(const nlohmann::json& cursor) = 0;  // null: from the start
    virtual nlohmann::json data_cursor() const = 0;
    // Reads the next micro-batch (also for a skipped micro-step: the data order does not depend
    // on skips); returns its real tokens (tokens_per_second).
    virtual int64_t next_batch() = 0;
    // After each optimizer update. Returns "success" to stop the run (target reached), else "".
    virtual std::string after_update(TrainLoop&) { return ""; }
    // The end of the training steps (status "" when nothing stopped the run early; kPaused when
    // --stop_steps or a signal stopped it short of its end, to go on in a later process: nothing
    // that ends the run is done, no last evaluation, no MLPerf run_stop). Returns the run's final
    // status.
    virtual std::string at_end(TrainLoop&, const std::string& status) = 0;
    // An error cut a started run short.
    virtual void on_abort() noexcept {}
    // Progress-line and results.json additions.
    virtual std::string progress_note() const { return ""; }
    virtual void add_results(nlohmann::json&) const {}
    virtual void add_curves(CurvesData&) const {}
};

class TrainLoop {
public:
    TrainLoop(const LoopOptions& options, const nlohmann::json& flags_json, Task& task);
    ~TrainLoop();
    // Runs training in options.output_dir, resuming from its latest checkpoint. Returns the exit
    // status: 0 finished; 128 + signal after a SIGINT/SIGTERM checkpoint.
    int run();

    // For the task's hooks.
    const LoopOptions& options() const { return o_; }
    int64_t global_step() const;
    int64_t samples() const;  // sequences seen: global_step x train_batch_size
    int64_t global_batch() const { return global_batch_; }
    // The step this run segment trains to: --num_train_steps, or an earlier --stop_steps.
    int64_t last_step() const {
        return o_.stop_steps > 0 ? std::min(o_.stop_steps, o_.num_train_steps) : o_.num_train_steps;
    }
    double elapsed() const;   // run wall time, summed over resumed segments
    // This process's set-up before run_start (model, weights, checks of the data): MLPerf's
    // initialisation, not part of the time to train. -1 before run_start.
    double initialization_s() const { return started_ ? segment_start_ - run_entry_ : -1; }
    // When run() began, in ms since the Unix epoch (the MLPerf log's clock): its init_start.
    int64_t run_entry_ms() const { return run_entry_ms_; }
    // The weights, in the memory of options().device()
    std::span<float> params() const { return params_->span(); }
    const optim::ParameterUpdater& updater() const { return *updater_; }
    const std::string& resumed_from() const { return resume_from_; }
    std::string path(const char* name) const;  // a file in --output_dir
    // Under mpirun -np N (docs/distributed.md): rank 0 alone writes outputs; the task takes
    // train_batch_size / N sequences per micro-step (local_batch()).
    bool is_root() const { return root_; }
    DataParallel& data_parallel() { return *dp_; }
    int local_batch(int global_batch, const std::string& flag) const;
    // Resumed with another rank count: the epoch the task's reader starts at (0 otherwise).
    uint64_t first_epoch() const { return first_epoch_; }

private:
    void setup();
    void lock_output_dir();
    void check_outputs_are_not_inputs() const;
    // `old_paths`: the checkpoint's input_paths() (an empty object for older checkpoints).
    // `old_sizes`, `old_prints`: the checkpoint's data_file_sizes() and data_file_prints() (empty
    // objects for older checkpoints).
    void check_resumed_flags(const nlohmann::json& old_flags, const nlohmann::json& old_config,
                             const nlohmann::json& old_paths, const nlohmann::json& old_sizes,
                             const nlohmann::json& old_prints);
    // data_file_prints() of the task's data files, read once (at a resume's check or the first
    // save): what the run read, as its checkpoints record it.
    const nlohmann::json& input_prints();
    std::string ranks_hint(const nlohmann::json& old_batch, const nlohmann::json& now_batch) const;
    void write_config_json();
    void load_or_init();
    // Error when the checkpoint being resumed is another command's (squad resuming a pretrain run)
    void check_command_of(const model::CheckpointReader& r) const;
    void load_init_moments(const model::ParamTable& table);  // RunOptions::init_optimizer_moments
    void load_moments(const model::CheckpointReader& r);    // the optimizer's m and v
    void save_checkpoint(bool final_one);
    void prune_checkpoints();
    void write_results(const std::string& status);
    void write_curves();
    int train();
    int finish(const std::string& status, bool finished = true);  // finished: a rerun has nothing to do
    void abort(const std::string& reason) noexcept;
    bool is_boundary() const;

    const LoopOptions& o_;
    DirectoryLock output_dir_lock_;  // rank 0's flock on --output_dir (lock_output_dir)
    nlohmann::json changed_flags_;   // what --allow_changed_flags let change, written once the run goes on
    nlohmann::json input_prints_;    // input_prints(), null until read
    nlohmann::json flags_json_;
    Task& task_;
    std::unique_ptr<backend::Buffer<float>> params_, grads_;  // options().device()'s memory
    std::unique_ptr<optim::ParameterUpdater> updater_;
    optim::LossScaler scaler_;
    std::string resume_from_, last_checkpoint_, abort_reason_;
    nlohmann::json data_cursor_;  // from the checkpoint being resumed
    int64_t global_batch_ = 0, last_saved_step_ = -1;
    double segment_start_ = 0, run_entry_ = 0;  // now_s() at run_start, at run()'s entry
    int64_t run_entry_ms_ = 0;
    double final_wall_s_ = -1;  // elapsed() when the run ended or stopped, before its last checkpoint
    bool started_ = false;
    std::vector<CurvePoint> loss_curve_;
    struct State {
        int64_t skipped_steps = 0;
        double elapsed_s = 0;       // run start -> now, summed over resumed segments
        double timed_s = 0;         // compute time of the timed (post-warm-up) updates
        int64_t timed_samples = 0;
        int64_t timed_tokens = 0;   // real (unpadded) tokens of those updates
        bool finished = false;
        std::string status;
    } state_;
    double segment_update_s_ = 0;   // every update of this process, warm-up included
    int64_t segment_update_samples_ = 0;
    std::unique_ptr<DataParallel> dp_;
    bool root_ = true;
    uint64_t first_epoch_ = 0;
};

// Checkpoint file name for a global step: "<dir>/model.ckpt-<step>.safetensors".
std::string checkpoint_path(const std::string& dir, int64_t step);
constexpr const char* kCheckpointPrefix = "model.ckpt-";
// The files a training run (pretrain, squad --do_train) may write in its --output_dir besides its
// checkpoints (kCheckpointPrefix...), for the checks that no input or other output is one of them.
std::vector<std::string> run_output_names();
// The latest checkpoint in `dir` (highest step), or "" when there is none.
std::string latest_checkpoint(const std::string& dir);

// Keeps the lines of a JSONL log whose `key` is <= limit (a resumed run rewrites what the killed
// one logged after its last checkpoint). Returns the kept lines parsed.
std::vector<nlohmann::json> truncate_jsonl(const std::string& path, const char* key, int64_t limit);
// The input-file flags of `flags` (a run's flags JSON), each as absolute paths with symlinks
// resolved: {"vocab_file": "/data/vocab.txt", ...}. Saved with every checkpoint, so that a resume
// started from another directory, or spelling a path another way, is the same run.
nlohmann::json input_paths(const nlohmann::json& flags);
// Each of `files` with its size in bytes (null where it cannot be read), keyed as input_paths()
// spells paths: saved with every checkpoint, so that a data file replaced in place is found.
nlohmann::json data_file_sizes(const std::vector<std::string>& files);
// ... and the FNV-1a of its first and last 4 KiB (dist::file_fingerprints): a file replaced by
// one of the same size (a shard rewritten, its records in another order) is found too.
nlohmann::json data_file_prints(const std::vector<std::string>& files);

// An append-only JSONL log, flushed per line.
class JsonlLog {
public:
    explicit JsonlLog(const std::string& path);
    ~JsonlLog();
    JsonlLog(const JsonlLog&) = delete;
    JsonlLog& operator=(const JsonlLog&) = delete;
    void write(const nlohmann::json& j);

private:
    std::string path_;
    std::FILE* file_ = nullptr;
};

// The model: --bert_config_file, or --model=<preset>, or the config saved in the checkpoint
// being resumed (else in --init_checkpoint). Exactly one of the two flags may be given.
model::BertConfig resolve_config(const std::string& bert_config_file, const std::string& preset,
                                 const std::string& resume_from, const std::string& init_checkpoint);

}  // namespace bertbench::train
