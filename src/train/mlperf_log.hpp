// MLPerf compliance log lines, byte-compatible with mlcommons/logging mllog.py:
//   :::MLLOG {"namespace": "", "time_ms": 1700000000000, "event_type": "POINT_IN_TIME",
//             "key": "eval_accuracy", "value": 0.72, "metadata": {"file": "src/train/x.cpp",
//             "lineno": 12, "epoch_num": 150000}}
// (one line; json.dumps spacing, ensure_ascii, Python float repr). Typed helpers cover every key
// a closed BERT run needs (compliance_checker/training_5.0.0 common/closed_common/closed_bert.yaml);
// for BERT "epochs" are samples: epoch_num = samples trained so far. See docs/training.md.
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <mutex>
#include <nlohmann/json.hpp>
#include <source_location>
#include <string>
#include <string_view>

namespace bertbench::train {

using MlJson = nlohmann::ordered_json;  // insertion order = mllog's key order

// json.dumps(value) with Python's defaults (", " / ": " separators, ensure_ascii=True, float repr,
// NaN/Infinity spelled as Python does).
std::string python_json_dumps(const MlJson& value);

// One encoded line, without the newline (mllog.py _encode_log).
std::string encode_mllog(std::string_view name_space, int64_t time_ms,
                         std::string_view event_type, std::string_view key, const MlJson& value,
                         const MlJson& metadata);

// The hyperparameters a closed BERT submission logs once, between init_start and init_stop.
struct BertRunParams {
    int64_t global_batch_size = 0;         // sequences per optimizer update, all ranks
    int64_t number_of_ranks = 1;           // mpirun's processes (MLPerf HPC's key)
    int64_t gradient_accumulation_steps = 1;
    double opt_base_learning_rate = 0;
    double opt_lamb_epsilon = 1e-6;
    int64_t opt_learning_rate_training_steps = 0;  // --num_train_steps, as the reference logs it
    int64_t opt_learning_rate_warmup_steps = 0;
    int64_t num_warmup_steps = 0;
    int64_t start_warmup_step = 0;
    double opt_lamb_beta_1 = 0.9;
    double opt_lamb_beta_2 = 0.999;
    double opt_lamb_weight_decay_rate = 0.01;
    std::string opt_name = "lamb";               // the reference's: lamb (adamw on that flag)
    double opt_lamb_learning_rate_decay_poly_power = 1.0;
    int64_t max_sequence_length = 512;
    int64_t seed = 0;
    int64_t train_samples = 0;  // samples the run may train on (updates x global batch)
    int64_t eval_samples = 10000;
};

class MlperfLogger {
public:
    using Sink = std::function<void(std::string_view line)>;  // gets each line without '\n'
    using Clock = std::function<int64_t()>;                     // ms since the Unix epoch

    // Lines go to `sink`; `clock` defaults to the system clock. Thread-safe.
    explicit MlperfLogger(Sink sink, Clock clock = {}, std::string name_space = "");
    // Appends to `path` (flushed per line, so a crash keeps every line written; not atomic by
    // design: a log) and, if `also_stdout`, prints each line to stdout. Error naming the path.
    static std::unique_ptr<MlperfLogger> open(const std::string& path, bool also_stdout);

    // Disabled loggers write nothing (ranks other than 0).
    void set_enabled(bool enabled) { enabled_ = enabled; }
    bool enabled() const { return enabled_; }

    // The generic calls (mllog event/start/end). metadata: extra fields after "file", "lineno".
#if defined(__cpp_lib_source_location)
    using Loc = std::source_location;
#else
    // clang 14 with libstdc++ has no std::source_location (it needs __builtin_source_location,
    // clang 15); the older builtins give the caller's file and line the same way.
    struct Loc {
        const char* file = "";
        unsigned line_number = 0;
        static constexpr Loc current(const char* f = __builtin_FILE(),
                                     unsigned l = __builtin_LINE()) {
            return {f, l};
        }
        constexpr const char* file_name() const { return file; }
        constexpr unsigned line() const { return line_number; }
    };
#endif
    void event(std::string_view key, const MlJson& value = nullptr,
               const MlJson& metadata = MlJson::object(), Loc loc = Loc::current());
    void start(std::string_view key, const MlJson& value = nullptr,
               const MlJson& metadata = MlJson::object(), Loc loc = Loc::current());
    void end(std::string_view key, const MlJson& value = nullptr,
             const MlJson& metadata = MlJson::object(), Loc loc = Loc::current());

    // Submission info: benchmark "bert", division "closed"|"open", status "onprem"|"cloud"|
    // "research"|"preview"|"available".
    void submission_info(std::string_view org, std::string_view platform,
                         std::string_view division = "closed", std::string_view status = "onprem",
                         std::string_view benchmark = "bert", Loc loc = Loc::current());
    void cache_clear(bool value = true, Loc loc = Loc::current());
    // `time_ms` (ms since the epoch; -1: now): the run's own start, when the log opens after it
    // (MLPerf's init_start is the first thing its main() does).
    void init_start(int64_t time_ms = -1, Loc loc = Loc::current());
    void init_stop(Loc loc = Loc::current());
    void run_start(Loc loc = Loc::current());
    void run_stop(bool success, Loc loc = Loc::current());  // metadata status success|aborted
    // A block of training between evaluations; all counts in samples.
    void block_start(int64_t first_epoch_num, int64_t epoch_count, Loc loc = Loc::current());
    void block_stop(int64_t first_epoch_num, Loc loc = Loc::current());
    void eval_start(int64_t epoch_num, Loc loc = Loc::current());
    void eval_stop(int64_t epoch_num, Loc loc = Loc::current());
    void eval_accuracy(double accuracy, int64_t epoch_num, Loc loc = Loc::current());
    void seed(int64_t seed, Loc loc = Loc::current());
    // The BertRunParams keys, one POINT_IN_TIME line each, in the order of the struct: every key
    // whose value differs from (or is missing in) `logged`, the values the log already holds (a
    // fresh run: none, so every key). Returns the values now in effect, for the next call.
    MlJson run_params(const BertRunParams& p, const MlJson& logged = MlJson::object(),
                      Loc loc = Loc::current());
    // bertbench's own key (MLPerf has no resume): a new process continues the run here, at
    // `samples` sequences (global step `step`); run_stop - run_start then includes the time no
    // process ran, which scripts/mlperf_log_check.py reports.
    void resumed(int64_t samples, int64_t step, Loc loc = Loc::current());

    // True between run_start and run_stop. close_aborted() ends an open run that an error cut
    // short the way a compliant log ends: eval_stop / block_stop of what is open, then run_stop
    // with status aborted. It does nothing when no run is open.
    bool run_open() const { return run_open_; }
    bool block_open() const { return open_block_ >= 0; }
    // A resumed segment: its run_start is in the log, and the block that began at open_block
    // samples (-1: none) is still open there.
    void continue_run(int64_t open_block = -1) {
        run_open_ = true;
        open_block_ = open_block;
    }
    void close_aborted(Loc loc = Loc::current());

private:
    void log(std::string_view event_type, std::string_view key, const MlJson& value,
             const MlJson& metadata, const Loc& loc, int64_t time_ms = -1);

    Sink sink_;
    Clock clock_;
    std::string namespace_;
    bool enabled_ = true;
    std::mutex mutex_;
    bool run_open_ = false;
    int64_t open_block_ = -1, open_eval_ = -1;  // first_epoch_num / epoch_num; -1 = none open
};

// Strips the source-tree prefix from a compiler file name ("/work/main/src/train/t.cpp" ->
// "src/train/t.cpp"), as mllog's root_dir does.
std::string relative_source_path(std::string_view file);

}  // namespace bertbench::train
