// LoadGen's mlperf_log_summary.txt of a performance run (see scenario.hpp): the layout of
// loadgen/results.cc PerformanceSummary::LogSummary and test_settings_internal.cc LogSummary
// (mlcommons/inference b66003e), every figure taken from ScenarioStats.
#include <cmath>
#include <iomanip>
#include <sstream>

#include <fmt/format.h>

#include "bench/scenario.hpp"

namespace bertbench::bench {

namespace {

// LoadGen's DoubleToString: fixed, `precision` decimals.
std::string fixed(double v, int precision = 2) {
    std::ostringstream o;
    o << std::fixed << std::setprecision(precision) << v;
    return o.str();
}

// A double as LoadGen's summary streams one (std::ostream's default: 6 significant digits).
std::string streamed(double v) {
    std::ostringstream o;
    o << v;
    return o.str();
}

// LoadGen's latencies are integer nanoseconds.
int64_t ns(double ms) { return std::llround(ms * 1e6); }

const char* loadgen_scenario(Scenario s) {
    return s == Scenario::singlestream ? "SingleStream" : s == Scenario::offline ? "Offline" : "Server";
}

const char* yes(bool b) { return b ? "Yes" : "NO"; }

}  // namespace

std::string mlperf_summary_txt(const RunLog& log, const ScenarioStats& st) {
    const ScenarioSettings& s = log.settings;
    const std::string rule = "================================================\n";
    std::string o = rule + "MLPerf Results Summary\n" + rule;
    o += "SUT name : " + log.sut + "\n";
    o += std::string("Scenario : ") + loadgen_scenario(s.scenario) + "\n";
    o += "Mode     : PerformanceOnly\n";
    const auto n = static_cast<double>(st.queries);
    switch (s.scenario) {
        case Scenario::singlestream:
            o += fmt::format("90.0th percentile latency (ns) : {}\n", ns(st.latency_ms_p90));
            break;
        case Scenario::server:
            // LoadGen: (samples - 1) / the final query's completion
            o += "Completed samples per second    : " +
                 fixed(st.final_query_done_s > 0 ? (n - 1) / st.final_query_done_s : 0) + "\n";
            break;
        case Scenario::offline:
            o += "Samples per second: " + streamed(st.samples_per_s) + "\n";
            break;
    }
    const bool perf_met = s.scenario != Scenario::server || st.latency_met;
    o += fmt::format("Result is : {}\n", st.valid ? "VALID" : "INVALID");
    if (s.scenario == Scenario::server) o += fmt::format("  Performance constraints satisfied : {}\n", yes(perf_met));
    o += fmt::format("  Min duration satisfied : {}\n", yes(st.min_duration_met));
    o += fmt::format("  Min queries satisfied : {}\n", yes(st.min_queries_met));
    o += fmt::format("  Early stopping satisfied: {}\n", yes(st.early_stopping_met));
    if (!st.valid) {
        o += "Recommendations:\n";
        if (!perf_met) o += " * Reduce target QPS to improve latency.\n";
        if (!st.min_duration_met)
            o += s.scenario == Scenario::singlestream
                     ? " * Decrease the expected latency so the loadgen pre-generates more queries.\n"
                 : s.scenario == Scenario::server
                     ? " * Increase the target QPS so the loadgen pre-generates more queries.\n"
                     : " * Increase expected QPS so the loadgen pre-generates a larger (coalesced) query.\n";
        if (!st.min_queries_met)
            o += " * The test exited early, before enough queries were issued.\n"
                 "   See the detailed log for why this may have occurred.\n";
    }
    if (s.scenario == Scenario::singlestream) {
        o += "Early Stopping Result:\n";
        if (!st.early_stopping_met) {
            o += fmt::format(" * Only processed {} queries.\n * Need to process at least {} queries for early stopping.\n",
                             st.queries, st.early_stopping_least_queries);
        } else {
            o += fmt::format(" * Processed at least {} queries ({}).\n * Would discard {} highest latency queries.\n"
                             " * Early stopping 90.0th percentile estimate: {}\n",
                             st.early_stopping_least_queries, st.queries, st.early_stopping_discarded,
                             ns(st.latency_ms_early_stopping.value_or(0)));
            o += st.queries < st.early_stopping_least_queries_p99
                     ? fmt::format(" * Not enough queries processed for 99.0th percentile\n early stopping estimate "
                                   "(would need to process at\n least {} total queries).\n",
                                   st.early_stopping_least_queries_p99)
                     : fmt::format(" * Early stopping 99.0th percentile estimate: {}\n",
                                   ns(st.latency_ms_early_stopping_p99.value_or(0)));
        }
    } else if (s.scenario == Scenario::server) {
        o += "Early Stopping Result:\n";
        o += st.early_stopping_met
                 ? std::string(" * Run successful.\n")
                 : fmt::format(" * Run unsuccessful.\n * Processed {} queries.\n * Would need to run at least {} more "
                               "queries,\n with the run being successful if every additional\n query were under "
                               "latency.\n",
                               st.queries, st.early_stopping_least_queries - st.queries);
    }
    o += "\n" + rule + "Additional Stats\n" + rule;
    if (s.scenario == Scenario::singlestream) {
        // LoadGen: (samples - 1) / the last issue; 1 / the mean latency
        o += "QPS w/ loadgen overhead         : " +
             fixed(st.min_duration_clock_s > 0 ? (n - 1) / st.min_duration_clock_s : 0) + "\n";
        o += "QPS w/o loadgen overhead        : " + fixed(st.latency_ms_mean > 0 ? 1e3 / st.latency_ms_mean : 0) +
             "\n\n";
    } else if (s.scenario == Scenario::server) {
        o += "Scheduled samples per second : " + fixed(st.scheduled_qps) + "\n";
    }
    o += fmt::format("Min latency (ns)                : {}\n", ns(st.latency_ms_min));
    o += fmt::format("Max latency (ns)                : {}\n", ns(st.latency_ms_max));
    o += fmt::format("Mean latency (ns)               : {}\n", ns(st.latency_ms_mean));
    const std::pair<double, double> percentiles[] = {{50, st.latency_ms_p50}, {90, st.latency_ms_p90},
                                                     {95, st.latency_ms_p95}, {97, st.latency_ms_p97},
                                                     {99, st.latency_ms_p99}, {99.9, st.latency_ms_p999}};
    for (const auto& [p, ms] : percentiles)
        o += fixed(p) + fmt::format(" percentile latency (ns)   : {}\n", ns(ms));
    o += "\n" + rule + "Test Parameters Used\n" + rule;
    // Offline coalesces every issue into one query (LoadGen: samples_per_query = the issues)
    const bool offline = s.scenario == Scenario::offline;
    o += fmt::format("samples_per_query : {}\n", offline ? st.queries : 1);
    o += "target_qps : " + streamed(s.loadgen_target_qps) + "\n";
    o += fmt::format("target_latency (ns): {}\n", s.scenario == Scenario::server ? ns(s.latency_bound_ms) : 0);
    o += fmt::format("max_async_queries : {}\n", s.scenario == Scenario::server ? 0 : 1);
    o += fmt::format("min_duration (ms): {}\n", std::llround(s.min_duration_s * 1e3));
    o += "max_duration (ms): 0\n";
    // the count the issues were judged by ("Min queries satisfied" above), where LoadGen's Offline
    // prints 1 (its one coalesced query, which cannot fall short)
    o += fmt::format("min_query_count : {}\n", s.min_query_count);
    o += "max_query_count : 0\n";
    o += fmt::format("qsl_rng_seed : {}\nsample_index_rng_seed : {}\nschedule_rng_seed : {}\n", s.qsl_rng_seed,
                     s.sample_index_rng_seed, s.schedule_rng_seed);
    o += "accuracy_log_rng_seed : 0\naccuracy_log_probability : 0\naccuracy_log_sampling_target : 0\n"
         "print_timestamps : 0\nperformance_issue_unique : 0\nperformance_issue_same : 0\n"
         "performance_issue_same_index : 0\n";
    o += fmt::format("performance_sample_count : {}\naccuracy_sample_count : {}\n", log.performance_sample_count,
                     s.accuracy_sample_count > 0 ? s.accuracy_sample_count : log.performance_sample_count);
    // A singlestream run ends naturally only with both minimums met; otherwise LoadGen's issue
    // loop ran out of generated queries, which it logs as an error
    const bool ran_out = s.scenario == Scenario::singlestream && !(st.min_queries_met && st.min_duration_met);
    o += "\nNo warnings encountered during test.\n";
    o += ran_out ? "\n1 ERROR encountered. See detailed log.\n" : "\nNo errors encountered during test.\n";
    return o;
}

}  // namespace bertbench::bench
