// The scenarios' times are int64 nanoseconds (LoadGen's clock): a latency bound or a Server rate
// that would wrap them is refused by name, from a flag or from a raw log, instead of being run
// (a bound of 1e13 ms used to put every query over it; a rate of 1e-12/s scheduled arrivals at
// -9.2e9 s).
#include <gtest/gtest.h>

#include <limits>
#include <string>

#include "bench/scenario.hpp"
#include "test_util.hpp"

namespace bertbench::bench {
namespace {

using testing::error_of;

TEST(ScenarioLimits, LatencyBoundWithinInt64Nanoseconds) {
    EXPECT_EQ(error_of([] { check_latency_bound(1e10, "--latency_bound_ms"); }), "");  // 1e7 s
    for (const double ms : {1e13, 1e300, 0.0, -1.0, std::numeric_limits<double>::quiet_NaN()}) {
        const std::string e = error_of([&] { check_latency_bound(ms, "--latency_bound_ms"); });
        EXPECT_NE(e.find("--latency_bound_ms: expected > 0 and at most 1e+10 ms, got "), std::string::npos) << ms << ": " << e;
    }
    // a raw log's bound (--summarize_log): the same rule, naming the log and the field
    nlohmann::json log = {{"format", "bertbench-scenario-log/1"}, {"sut", "x"}, {"threads", 1},
                          {"scenario", "server"}, {"target_qps", 50.0}, {"latency_bound_ms", 1e13}, {"batch_size", 1},
                          {"entries", {{{"q", 0}, {"tokens", 9}, {"arrival", 0.0}, {"start", 0.0}, {"done", 0.004}, {"batch", 1}}}}};
    const std::string e = error_of([&] { parse_log_json(log, "log.json", ScenarioSettings{}); });
    EXPECT_NE(e.find("log.json: field \"latency_bound_ms\": expected > 0 and at most 1e+10 ms, got 1e+13"),
              std::string::npos) << e;
    log["latency_bound_ms"] = 1e10;
    EXPECT_EQ(parse_log_json(log, "log.json", ScenarioSettings{}).settings.latency_bound_ms, 1e10);
}

TEST(ScenarioLimits, ServerRateWhoseScheduleWouldWrap) {
    EXPECT_EQ(error_of([] { check_server_rate(1e-6, 100); }), "");  // 1e8 s: the limit
    EXPECT_NE(error_of([] { check_server_rate(1e-12, 3); })
                  .find("--server_target_qps=1e-12: 3 arrivals at this rate take 3e+12 s on average, expected at most "
                        "1e+08 s"),
              std::string::npos);
    // make_schedule itself (what --schedule_out writes): an error, not arrivals at negative times
    ScenarioSettings s;
    s.scenario = Scenario::server;
    s.target_qps = 1e-12;
    s.min_duration_s = 1;
    s.min_query_count = 3;
    Query q;
    q.input_ids.assign(9, 7);
    q.segment_ids.assign(9, 0);
    const std::string e = error_of([&] { make_schedule(s, {q}, 3); });
    EXPECT_NE(e.find("--server_target_qps=1e-12: an arrival "), std::string::npos) << e;
    EXPECT_NE(e.find(" s after the start, expected at most 1e+08 s"), std::string::npos) << e;
}

}  // namespace
}  // namespace bertbench::bench
