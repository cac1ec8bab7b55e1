// MLPerf Inference scenarios for `bertbench bench --scenario=...` (docs/benchmark.md
// "Scenarios"): the query schedule (SingleStream, Offline, Server with Poisson arrivals), the one
// SUT loop every scenario runs on (dynamic batching, FIFO, up to batch_size, no waiting for a
// fuller batch), the statistics and validity rules of a run's raw log, the peak search of the
// Server scenario, and the two file formats an external SUT (the ONNX Runtime peer) shares:
// bertbench-scenario-schedule/1 and bertbench-scenario-log/1.
#pragma once

#include <cstdint>
#include <functional>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <vector>

namespace bertbench::bench {

enum class Scenario { singlestream, offline, server };
// Error naming `flag` for anything but singlestream | offline | server.
Scenario parse_scenario(const std::string& name, const std::string& flag);
const char* scenario_name(Scenario s);

struct ScenarioSettings {
    Scenario scenario = Scenario::singlestream;
    std::optional<double> target_qps;  // server: the Poisson rate (queries/s)
    double latency_bound_ms = 130;     // server: p99 latency <= this, and early stopping (MLPerf BERT)
    int batch_size = 1;                // the most queries one batch takes (singlestream: 1)
    // LoadGen's three seeds (mlperf.conf's names): the performance set's order, the sample draws,
    // the Server arrivals
    uint64_t qsl_rng_seed = 0, sample_index_rng_seed = 0, schedule_rng_seed = 0;
    bool every_query_once = false;     // accuracy: the query set in order, each once (no draws)
    // LoadGen's target_qps a performance run was sized by (performance_issue_count); 0: unknown
    double loadgen_target_qps = 0;
    // the whole query set's size, before the performance set is chosen from it (LoadGen's
    // accuracy_sample_count: its QSL's total); 0: the performance set's
    int64_t accuracy_sample_count = 0;
    double min_duration_s = 60;
    int64_t min_query_count = 100;
};

// One query: one SQuAD eval feature, its real tokens only.
struct Query {
    int64_t unique_id = 0;
    std::vector<int32_t> input_ids, segment_ids;
};

// An issue of a query: its arrival `t` in seconds after the run's start, or none = when the
// previous issue completes (singlestream).
struct Issue {
    int q = 0;
    std::optional<double> t;
};

struct Schedule {
    ScenarioSettings settings;
    std::vector<Query> queries;
    std::vector<Issue> issues;
};

// Issues a performance run makes, as LoadGen generates them (loadgen.cc GenerateQueries,
// test_settings_internal.cc) at LoadGen's target_qps, s.loadgen_target_qps (singlestream: 1 / the
// expected latency; offline: the expected throughput): at least min_query_count; singlestream the
// queries its fixed period (1 / target_qps, truncated to ns) schedules before twice
// min_duration_s, plus the one
// that reaches it (the run ends naturally once both minimums are met); offline
// trunc(1.1 x min_duration_s x target_qps); server: min_query_count (make_schedule adds
// arrivals up to the duration). target_qps 0 = unknown: min_query_count alone.
// At most kMaxIssues (an Error naming the flags that size it beyond).
int64_t performance_issue_count(const ScenarioSettings& s);

// Times are int64 ns (LoadGen's clock, which ends at 9.2e9 s): a latency bound is at most 1e10 ms
// (1e7 s, --min_duration_s's limit) and a Server schedule's arrivals at most kMaxScheduleS after
// the start; beyond either, an Error naming the flag.
constexpr double kMaxLatencyBoundMs = 1e10;
constexpr double kMaxScheduleS = 1e8;
// A raw log's times (--summarize_log), seconds after the start: at most 1e9 s (int64 ns then hold
// them, and every latency between them).
constexpr double kMaxLogS = 1e9;
// Error "<what>: expected > 0 and at most 1e+10 ms, got <ms>" unless 0 < ms <= kMaxLatencyBoundMs.
void check_latency_bound(double ms, const std::string& what);
// Error naming --server_target_qps unless min_query_count arrivals at `qps` (> 0) are expected
// within kMaxScheduleS.
void check_server_rate(double qps, int64_t min_query_count);

// The most issues a run schedules (2^27: 2 GiB of schedule and log); more is an Error naming the
// flags that size the run, before anything is allocated.
constexpr int64_t kMaxIssues = int64_t{1} << 27;
// The schedule of `count` issues over `queries` (LoadGen's loaded performance set, in its order:
// loaded_set_order), as LoadGen's GenerateQueries generates a performance run's: singlestream and
// server draw each issue's query uniformly with replacement (std::uniform_int_distribution<int>
// over a std::mt19937 seeded with sample_index_rng_seed, after the two shuffles GenerateQueries
// makes with it for distributions a performance run does not use), offline takes the set in
// order, repeated (LoadGen's contiguous samples); every_query_once (accuracy): the queries in
// order. singlestream: each chained to the previous; offline: all at t = 0, then sorted longest
// first (stable: bertbench's SUT policy, in the schedule so that an external SUT runs the same
// batches); server: Poisson arrivals from t = 0, exponential gaps of mean 1/target_qps
// (std::exponential_distribution over a std::mt19937 seeded with schedule_rng_seed, each gap
// truncated to ns), generated while the previous arrival is before min_duration_s or fewer than
// `count`. Checked issue for issue against LoadGen's GenerateQueries.
Schedule make_schedule(const ScenarioSettings& s, std::vector<Query> queries, int64_t count);
std::string schedule_json(const Schedule& s);  // bertbench-scenario-schedule/1, as JSON text
// LoadGen's performance set (GenerateLoadableSets): the first n samples of the query set, in the
// order std::shuffle gives them with a std::mt19937 seeded with qsl_rng_seed.
std::vector<size_t> loaded_set_order(size_t n, uint64_t qsl_rng_seed);

// ---- the SUT loop ----
struct LogEntry {
    int q = 0, tokens = 0;
    double arrival = 0, start = 0, done = 0;  // seconds after the run's start
    int64_t batch = 0;                        // ordinal of the batch that served it
};
struct RunLog {
    std::string sut;  // e.g. bertbench-int8, ort-int8
    ScenarioSettings settings;
    int threads = 1;
    int64_t performance_sample_count = 0;  // the schedule's query set (LoadGen's performance set); 0: unknown
    std::vector<LogEntry> entries;  // one per issue, in issue order
};
nlohmann::json log_json(const RunLog& log);  // bertbench-scenario-log/1
// A raw log written by any SUT; Error naming `where` and the field for anything else. The run's
// seeds (decimal strings: 64 bits), minimums, loadgen_target_qps and sample counts, which the
// schedule names and a log copies, are optional: those the log lacks are taken from `defaults`
// (performance_sample_count: 0) and listed in `*missing` when given.
RunLog parse_log_json(const nlohmann::json& j, const std::string& where, const ScenarioSettings& defaults,
                      std::vector<std::string>* missing = nullptr);

// The clock the loop runs on: now() in seconds, wait_until(t) returns at or after t. steady():
// std::chrono::steady_clock and std::this_thread::sleep_until.
struct SutClock {
    std::function<double()> now;
    std::function<void(double)> wait_until;
    static SutClock steady();
};
// Runs the queries (indices into Schedule::queries) as one batch and returns when done.
using RunBatch = std::function<void(const std::vector<int>& queries)>;
// One thread: whenever the SUT is free it takes the arrived, not yet served issues in issue order,
// at most batch_size of them, runs them as one batch and records arrival, start and completion of
// each; when none has arrived it waits until the next arrival. A chained (singlestream) issue is
// not made once min_query_count are done and min_duration_s has passed: the log ends there.
RunLog run_schedule(const Schedule& s, const RunBatch& run, const SutClock& clock,
                    const std::string& sut, int threads);

// ---- statistics (of bertbench's own runs and of any raw log: one implementation) ----
// LoadGen's early stopping (its results.cc): with 99% confidence that the latency percentile p
// holds, t queries over the latency pass among h + t when P(Bin(h + t, 1 - p) <= t) < 0.01.
// The least such h (computed here from that definition, not LoadGen's series).
int64_t early_stopping_min_passing(int64_t t, double p);

struct ScenarioStats {
    int64_t queries = 0;
    double duration_s = 0;        // run start to the last completion
    double final_query_done_s = 0;  // the completion of the last issue (LoadGen's final query)
    // The time LoadGen holds against min_duration_s: offline the last completion, server the
    // last query's scheduled arrival, singlestream the last query's issue.
    double min_duration_clock_s = 0;
    // singlestream: LoadGen's early-stopping estimate of the 90th percentile (MLPerf's reported
    // SingleStream result), sorted[n - t] for the most t over it that n queries allow (t - 1 of
    // the highest discarded); none with fewer than early_stopping_least_queries = h(1) + 1 (LoadGen
    // prints none either) and in the other scenarios. The same at the 99th percentile (from which
    // LoadGen infers MultiStream). server: the queries over the latency bound, t, and
    // early_stopping_least_queries = h(t) + t.
    std::optional<double> latency_ms_early_stopping, latency_ms_early_stopping_p99;
    int64_t early_stopping_least_queries = 0, early_stopping_least_queries_p99 = 0;
    int64_t early_stopping_discarded = 0;
    int64_t overlatency_queries = 0;
    double samples_per_s = 0;     // queries / duration_s
    double tokens_per_s = 0;      // real tokens / duration_s
    double scheduled_qps = 0;     // server: (queries - 1) / last arrival, as LoadGen's
    // done - arrival in integer ns (LoadGen's), as ms; percentiles at LoadGen's index
    // sorted[floor(n x p)], the mean truncated to ns
    double latency_ms_p50 = 0, latency_ms_p90 = 0, latency_ms_p95 = 0, latency_ms_p97 = 0, latency_ms_p99 = 0,
           latency_ms_p999 = 0, latency_ms_mean = 0, latency_ms_min = 0, latency_ms_max = 0;
    int64_t batches = 0;
    double mean_batch_size = 0;
    // LoadGen's four constraints; valid = all of them
    bool latency_met = true;  // server: p99 <= the bound (LoadGen's performance constraint)
    bool min_duration_met = true, min_queries_met = true, early_stopping_met = true;
    bool valid = true;
    std::vector<std::string> invalid_reasons;
};
ScenarioStats summarize(const RunLog& log);
nlohmann::json stats_json(const ScenarioStats& st);
// One line: the scenario's figure of merit, VALID/INVALID and the reasons.
std::string stats_line(const RunLog& log, const ScenarioStats& st);

// LoadGen's mlperf_log_summary.txt of a performance run (loadgen/results.cc LogSummary): the
// scenario's figure, the four constraints, early stopping, latencies in integer ns and the test
// parameters: target_qps the log's loadgen_target_qps, its sample counts. bertbench's settings
// stand for LoadGen's; those it has not (max_duration, max_query_count, the accuracy-log sampling,
// issue modes) are LoadGen's defaults, 0.
std::string mlperf_summary_txt(const RunLog& log, const ScenarioStats& st);

// The definitions every scenario report embeds (docs/benchmark.md "Scenarios" in full).
nlohmann::json scenario_definitions();

// ---- checks before measuring ----
// The error message when the scenario's target cannot be met, else none: server with one
// median-length query alone (one_query_ms) above the latency bound, or a target rate above
// `capacity_qps` (what the SUT serves with full batches, from the warm-up).
std::optional<std::string> unmeetable_target(const ScenarioSettings& s, double one_query_ms,
                                             int median_tokens, double capacity_qps);

// ---- Server: the highest valid rate ----
struct PeakSearch {
    std::optional<double> peak_qps;                  // the highest valid rate tried; none if none
    std::vector<std::pair<double, bool>> tried;      // (rate, valid), in the order run
    bool at_cap = false;                             // the peak is max_qps: nothing above it was run
};
// LoadGen FindPeakPerformance-style: run at `start_qps`; while valid double the rate, while
// invalid halve it, until a valid and an invalid rate bracket the peak; then bisect until
// (invalid - valid) <= precision x valid. At most `max_runs` runs in all. No rate above `max_qps`
// is run (the capacity above which a single server run is refused, unmeetable_target): the start
// and each doubling are clamped to it, and a valid run at it ends the search.
PeakSearch find_peak(double start_qps, double precision, int max_runs, double max_qps,
                     const std::function<bool(double)>& valid_at);

}  // namespace bertbench::bench
