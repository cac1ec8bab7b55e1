// `bertbench bench --scenario=singlestream|offline|server` (and --summarize_log): MLPerf Inference
// scenarios over a SQuAD query set, their flags and their reports. docs/benchmark.md "Scenarios".
#pragma once

#include <cstdint>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "core/flags.hpp"
#include "model/config.hpp"

namespace bertbench::cli {

struct ScenarioOptions {
    std::string scenario, mode = "performance", log_path, schedule_out, summarize_log, accuracy_log, mlperf_summary;
    std::string predict_file, vocab_file, init_checkpoint;
    double target_qps = 0, latency_bound_ms = 130, min_duration_s = 60;
    double expected_latency_ms = 0, expected_qps = 0, peak_precision = 0.05;
    int64_t min_query_count = 100;
    uint64_t seed = 0, qsl_rng_seed = 0, sample_index_rng_seed = 0, schedule_rng_seed = 0;
    int scenario_queries = 0, peak_max_runs = 10, doc_stride = 128, max_query_length = 64;
    bool find_peak = false, do_lower_case = true;
    const Flags* flags = nullptr;  // which of the seeds were given
    std::vector<std::string> own_flags;  // the flags add() registers
    void add(Flags& flags);
    bool active() const { return !scenario.empty() || !summarize_log.empty(); }
    // Without --scenario/--summarize_log: Error naming the first of its flags given (a sweep
    // would silently not read it: --init_checkpoint, --mlperf_summary, ...).
    void refuse_unused() const;
};

// What `bench` parsed that a scenario run uses (one value of each list).
struct ScenarioContext {
    std::string model, bert_config_file, dtype, threads, batch_size, seq_len, squad_layout;
    std::string json_path, plot_path, task;
    bool task_given = false, model_given = false, skip_corrupt_records = false, cuda = false;
    model::BertConfig config;
    std::vector<std::string> data_files;
    nlohmann::json flags;
};

int run_bench_scenario(const ScenarioOptions& o, const ScenarioContext& c);

}  // namespace bertbench::cli
