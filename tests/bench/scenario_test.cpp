// The MLPerf scenario machinery (bench/scenario.hpp): the schedules, the SUT loop on a fake SUT
// with a known service time and a virtual clock, the percentile and validity rules, the
// unmeetable-target check, the peak search and the raw log's round trip.
#include "bench/scenario.hpp"
#include "bench/scenario_sut.hpp"

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <functional>
#include <limits>

#include "core/error.hpp"

namespace bertbench::bench {
namespace {

std::vector<Query> make_queries(const std::vector<int>& lengths) {
    std::vector<Query> qs;
    for (size_t i = 0; i < lengths.size(); ++i) {
        Query q;
        q.unique_id = 1000000000 + static_cast<int64_t>(i);
        q.input_ids.assign(static_cast<size_t>(lengths[i]), 7);
        q.segment_ids.assign(static_cast<size_t>(lengths[i]), 0);
        qs.push_back(q);
    }
    return qs;
}

// The issues of a performance run of `s` sized for LoadGen's target_qps `qps`.
int64_t issues_at(ScenarioSettings s, double qps) {
    s.loadgen_target_qps = qps;
    return performance_issue_count(s);
}

ScenarioSettings server(double qps, int batch, uint64_t seed = 1) {
    ScenarioSettings s;
    s.scenario = Scenario::server;
    s.target_qps = qps;
    s.batch_size = batch;
    s.sample_index_rng_seed = s.schedule_rng_seed = seed;
    s.min_duration_s = 0;
    s.min_query_count = 1;
    return s;
}

// A virtual clock: run_batch advances it by the batch's service time; wait_until jumps.
struct FakeSut {
    double t = 100.0;  // an arbitrary epoch: the loop must subtract its start
    double per_batch = 0.004, per_token = 0.00001;
    const Schedule* s = nullptr;
    std::vector<std::vector<int>> batches;
    SutClock clock() {
        return {[this] { return t; }, [this](double until) { t = std::max(t, until); }};
    }
    RunBatch run() {
        return [this](const std::vector<int>& qs) {
            batches.push_back(qs);
            double tokens = 0;
            for (int q : qs) tokens += static_cast<double>(s->queries[static_cast<size_t>(q)].input_ids.size());
            t += per_batch + per_token * tokens;
        };
    }
};

TEST(ScenarioSchedule, PoissonArrivalsAreSeededWithTheTargetMeanRate) {
    const int64_t n = 20000;
    const double qps = 50;
    const Schedule a = make_schedule(server(qps, 4, 7), make_queries({10, 20, 30}), n);
    const Schedule b = make_schedule(server(qps, 4, 7), make_queries({10, 20, 30}), n);
    const Schedule c = make_schedule(server(qps, 4, 8), make_queries({10, 20, 30}), n);
    ASSERT_EQ(a.issues.size(), static_cast<size_t>(n));
    double prev = 0;
    for (size_t i = 0; i < a.issues.size(); ++i) {
        ASSERT_TRUE(a.issues[i].t.has_value());
        EXPECT_GE(*a.issues[i].t, prev);
        prev = *a.issues[i].t;
        EXPECT_EQ(*a.issues[i].t, *b.issues[i].t);
        EXPECT_EQ(a.issues[i].q, b.issues[i].q);  // the same draws from the same seed
    }
    EXPECT_NE(*a.issues.back().t, *c.issues.back().t);
    // n exponential gaps of mean 1/qps: the last arrival has mean n/qps and standard deviation
    // sqrt(n)/qps; 5 standard deviations
    const double rate = static_cast<double>(n) / *a.issues.back().t;
    EXPECT_NEAR(rate, qps, qps * 5 / std::sqrt(static_cast<double>(n)));
    // and the gaps' coefficient of variation is that of an exponential (1), not of a fixed rate (0)
    double sum = 0, sum2 = 0;
    for (size_t i = 1; i < a.issues.size(); ++i) {
        const double g = *a.issues[i].t - *a.issues[i - 1].t;
        sum += g, sum2 += g * g;
    }
    const double m = sum / (n - 1), sd = std::sqrt(sum2 / (n - 1) - m * m);
    EXPECT_NEAR(sd / m, 1.0, 0.05);
}

// LoadGen's own sequences (mlcommons/inference b66003e: GenerateLoadableSets and GenerateQueries
// of loadgen.cc, compiled with a 97-sample QSL of performance_sample_count 97 and all three seeds
// equal, their output copied here): the performance set's order, the Server arrivals in ns and
// their samples, SingleStream's draws and count, Offline's contiguous samples.
TEST(ScenarioSchedule, LoadGensOwnSequences) {
    std::vector<int> lengths(97, 30);
    const std::vector<Query> all = make_queries(lengths);
    const auto sample = [&](const Schedule& s, size_t i) {  // the issue's QSL index
        return s.queries[static_cast<size_t>(s.issues[i].q)].unique_id - 1000000000;
    };
    const auto seeded = [](Scenario sc, uint64_t seed, double duration_s, int64_t count) {
        ScenarioSettings s;
        s.scenario = sc;
        s.qsl_rng_seed = s.sample_index_rng_seed = s.schedule_rng_seed = seed;
        s.min_duration_s = duration_s;
        s.min_query_count = count;
        return s;
    };
    const std::vector<size_t> order = loaded_set_order(97, 7);
    EXPECT_EQ(std::vector<size_t>(order.begin(), order.begin() + 8), (std::vector<size_t>{35, 92, 50, 53, 80, 66, 23, 15}));
    ScenarioSettings sv = seeded(Scenario::server, 7, 1.0, 20);
    sv.target_qps = 30;
    const Schedule server = make_schedule(sv, select_queries(all, 0, 7), issues_at(sv, 30));
    ASSERT_EQ(server.issues.size(), 34u);
    const std::vector<std::pair<int64_t, int64_t>> first = {
        {0, 17}, {8597165, 12}, {21402238, 30}, {148965442, 27}, {169233551, 59}, {181506476, 38}};
    for (size_t i = 0; i < first.size(); ++i) {
        EXPECT_EQ(std::llround(*server.issues[i].t * 1e9), first[i].first) << i;
        EXPECT_EQ(sample(server, i), first[i].second) << i;
    }
    EXPECT_EQ(std::llround(*server.issues.back().t * 1e9), 1049428392);
    EXPECT_EQ(sample(server, 33), 4);
    const ScenarioSettings ss = seeded(Scenario::singlestream, 12345, 0.5, 150);
    const Schedule single = make_schedule(ss, select_queries(all, 0, 12345), issues_at(ss, 1e9 / 7e6));
    ASSERT_EQ(single.issues.size(), 150u);
    const std::vector<int64_t> draws = {3, 14, 67, 96, 59, 64, 50, 40};
    for (size_t i = 0; i < draws.size(); ++i) EXPECT_EQ(sample(single, i), draws[i]) << i;
    const ScenarioSettings off = seeded(Scenario::offline, 3, 1.0, 5);
    const Schedule offline = make_schedule(off, select_queries(all, 0, 3), issues_at(off, 30));
    ASSERT_EQ(offline.issues.size(), 33u);
    const std::vector<int64_t> contiguous = {46, 65, 54, 35, 5, 68, 43, 72};  // equal lengths: no reordering
    for (size_t i = 0; i < contiguous.size(); ++i) EXPECT_EQ(sample(offline, i), contiguous[i]) << i;
}

TEST(ScenarioSchedule, OfflineAndSingleStreamShapes) {
    ScenarioSettings s;
    s.scenario = Scenario::offline;
    s.batch_size = 8;
    const Schedule off = make_schedule(s, make_queries({5, 40, 20, 40}), 6);
    std::vector<int> lengths;
    for (const Issue& is : off.issues) {
        ASSERT_TRUE(is.t.has_value());
        EXPECT_EQ(*is.t, 0.0);
        lengths.push_back(static_cast<int>(off.queries[static_cast<size_t>(is.q)].input_ids.size()));
    }
    EXPECT_TRUE(std::is_sorted(lengths.rbegin(), lengths.rend()));  // longest first
    // LoadGen's offline samples: the query set in order, repeated (6 of 4: 0 1 2 3 0 1), then
    // sorted by length, stable
    std::vector<int> qs;
    for (const Issue& is : off.issues) qs.push_back(is.q);
    EXPECT_EQ(qs, (std::vector<int>{1, 3, 1, 2, 0, 0}));
    // Each issue's query drawn uniformly with replacement (LoadGen's performance draw): over many
    // issues every query about equally often; accuracy's every_query_once: each once, in order.
    s.scenario = Scenario::singlestream;
    std::vector<int> seen(4, 0);
    for (const Issue& is : make_schedule(s, make_queries({5, 40, 20, 40}), 4000).issues) ++seen[static_cast<size_t>(is.q)];
    for (int c : seen) EXPECT_NEAR(c, 1000, 150);
    s.every_query_once = true;
    const Schedule once = make_schedule(s, make_queries({5, 40, 20, 40}), 4);
    for (size_t i = 0; i < 4; ++i) EXPECT_EQ(once.issues[i].q, static_cast<int>(i));
    s.every_query_once = false;
    s.scenario = Scenario::offline;
    EXPECT_FALSE(off.settings.target_qps.has_value());
    s.scenario = Scenario::singlestream;
    const Schedule ss = make_schedule(s, make_queries({5, 40}), 3);
    EXPECT_EQ(ss.settings.batch_size, 1);
    for (const Issue& is : ss.issues) EXPECT_FALSE(is.t.has_value());
    const nlohmann::json j = nlohmann::json::parse(schedule_json(ss));
    EXPECT_EQ(j["format"], "bertbench-scenario-schedule/1");
    EXPECT_TRUE(j["issues"][0]["t"].is_null());
    EXPECT_EQ(j["queries"][1]["input_ids"].size(), 40u);
    EXPECT_EQ(j["queries"][1]["id"], 1);
    EXPECT_TRUE(j["target_qps"].is_null());
}

TEST(ScenarioSchedule, IssueCountCoversDurationAndCount) {
    ScenarioSettings s;
    s.min_duration_s = 10;
    s.min_query_count = 100;
    EXPECT_EQ(issues_at(s, 0), 100);
    EXPECT_EQ(issues_at(s, 1.0), 100);  // 21 at 1 query/s
    // singlestream: LoadGen's queries at 0, 10 ms, ..., 20 s (the first at or past 2 x 10 s)
    EXPECT_EQ(issues_at(s, 100), 2001);
    EXPECT_EQ(issues_at(s, 1 / 0.007), 2859);  // ceil(20 s / 7 ms) + 1
    s.scenario = Scenario::offline;
    EXPECT_EQ(issues_at(s, 100), 1100);   // offline: 1.1 x 10 s x 100 /s
    EXPECT_EQ(issues_at(s, 33.33), 366);  // 366.63, truncated as LoadGen's
    s.scenario = Scenario::server;
    s.target_qps = 100;
    EXPECT_EQ(issues_at(s, 100), 100);  // server: its arrivals reach the duration
    const Schedule sch = make_schedule(s, make_queries({10, 20}), 100);
    ASSERT_GE(sch.issues.size(), 2u);
    EXPECT_LT(*sch.issues[sch.issues.size() - 2].t, 10.0);  // generated while the previous was
    EXPECT_GE(*sch.issues.back().t, 10.0);                  // before the duration
    EXPECT_GT(sch.issues.size(), 900u);                     // about 10 s x 100 q/s
    s.every_query_once = true;  // accuracy: each query once, whatever the duration
    EXPECT_EQ(make_schedule(s, make_queries({10, 20}), 2).issues.size(), 2u);
}

// LoadGen's SingleStream "ends naturally" after the issue that makes min_query_count and is
// itself at or past min_duration_s (so the run's last issue meets LoadGen's min-duration clock):
// the rest of the generated issues are not made.
TEST(ScenarioLoop, SingleStreamEndsOnceBothMinimumsAreMet) {
    ScenarioSettings s;
    s.min_duration_s = 0.503;
    s.min_query_count = 20;
    const Schedule sch = make_schedule(s, make_queries({100}), 1000);
    FakeSut sut;  // 5 ms a query
    sut.s = &sch;
    const RunLog log = run_schedule(sch, sut.run(), sut.clock(), "fake", 1);
    EXPECT_EQ(log.entries.size(), 102u);  // the 102nd is issued at 0.505 s, the first past 0.503
    EXPECT_GE(log.entries.back().arrival, 0.503);
    EXPECT_LT(log.entries[100].arrival, 0.503);
    EXPECT_TRUE(summarize(log).min_duration_met);
    EXPECT_TRUE(summarize(log).valid);
    s.min_query_count = 150;  // the count, not the duration, decides
    const Schedule more = make_schedule(s, make_queries({100}), 1000);
    sut.s = &more;
    EXPECT_EQ(run_schedule(more, sut.run(), sut.clock(), "fake", 1).entries.size(), 150u);
    s.every_query_once = true;  // accuracy: every query, whatever the minimums (it ended at 150)
    const Schedule all = make_schedule(s, make_queries(std::vector<int>(400, 100)), 400);
    sut.s = &all;
    EXPECT_EQ(run_schedule(all, sut.run(), sut.clock(), "fake", 1).entries.size(), 400u);
}

TEST(ScenarioLoop, ServerInvariantsOnAFakeSut) {
    const int B = 4;
    Schedule s = make_schedule(server(400, B), make_queries({30, 60, 120, 250, 384}), 3000);
    FakeSut sut;
    sut.s = &s;
    const RunLog log = run_schedule(s, sut.run(), sut.clock(), "fake", 1);
    ASSERT_EQ(log.entries.size(), s.issues.size());
    std::vector<int> batch_sizes;
    double prev_start = -1, prev_done = 0;
    int64_t prev_batch = 0;
    size_t batch_first = 0;
    for (size_t i = 0; i < log.entries.size(); ++i) {
        const LogEntry& e = log.entries[i];
        EXPECT_EQ(e.q, s.issues[i].q);
        EXPECT_DOUBLE_EQ(e.arrival, *s.issues[i].t);
        EXPECT_GE(e.start, e.arrival) << i;  // no query starts before it arrives
        EXPECT_GE(e.start, prev_start) << i;  // FIFO: issue order = start order
        EXPECT_GT(e.done, e.start);
        if (e.batch != prev_batch) {  // a new batch: the SUT was free and idles for nothing
            EXPECT_EQ(e.batch, prev_batch + 1);
            EXPECT_NEAR(e.start, std::max(prev_done, e.arrival), 1e-12) << i;  // the clock's epoch rounds
            if (i > 0) batch_sizes.push_back(static_cast<int>(i - batch_first));
            batch_first = i;
            prev_batch = e.batch;
        } else {
            EXPECT_EQ(e.start, log.entries[i - 1].start);
            EXPECT_EQ(e.done, log.entries[i - 1].done);
        }
        prev_start = e.start, prev_done = e.done;
    }
    batch_sizes.push_back(static_cast<int>(log.entries.size() - batch_first));
    ASSERT_EQ(batch_sizes.size(), sut.batches.size());
    size_t i = 0;
    for (size_t b = 0; b < batch_sizes.size(); ++b) {
        EXPECT_LE(batch_sizes[b], B);
        EXPECT_EQ(static_cast<int>(sut.batches[b].size()), batch_sizes[b]);
        const size_t next = i + static_cast<size_t>(batch_sizes[b]);
        // no waiting for a fuller batch, and nothing arrived left behind: a batch below B means the
        // next issue had not arrived when it started
        if (batch_sizes[b] < B && next < log.entries.size()) {
            EXPECT_GT(log.entries[next].arrival, log.entries[i].start) << "batch " << b;
        }
        i = next;
    }
    // dynamic batching happened (the rate keeps a batch-1 SUT of ~5 ms busy) and the statistics
    // read the same log: latency = done - arrival
    EXPECT_GT(*std::max_element(batch_sizes.begin(), batch_sizes.end()), 1);
    const ScenarioStats st = summarize(log);
    double worst = 0;
    for (const LogEntry& e : log.entries) worst = std::max(worst, 1e3 * (e.done - e.arrival));
    EXPECT_NEAR(st.latency_ms_max, worst, 0.5e-6);  // LoadGen's integer ns
    EXPECT_EQ(st.batches, static_cast<int64_t>(batch_sizes.size()));
    EXPECT_DOUBLE_EQ(st.mean_batch_size, 3000.0 / static_cast<double>(batch_sizes.size()));
}

TEST(ScenarioLoop, SingleStreamChainsEachQueryToThePrevious) {
    ScenarioSettings ss;
    ss.batch_size = 8;  // ignored: singlestream is batch 1
    Schedule s = make_schedule(ss, make_queries({10, 300}), 7);
    FakeSut sut;
    sut.s = &s;
    const RunLog log = run_schedule(s, sut.run(), sut.clock(), "fake", 1);
    EXPECT_EQ(log.entries[0].arrival, 0.0);
    for (size_t i = 0; i < log.entries.size(); ++i) {
        const LogEntry& e = log.entries[i];
        if (i > 0) {
            EXPECT_EQ(e.arrival, log.entries[i - 1].done);
        }
        EXPECT_EQ(e.start, e.arrival);
        EXPECT_EQ(e.batch, static_cast<int64_t>(i + 1));
        const double service = sut.per_batch + sut.per_token * e.tokens;
        EXPECT_NEAR(e.done - e.start, service, 1e-9);
    }
}

TEST(ScenarioLoop, OfflineTakesFullBatchesAtTimeZero) {
    ScenarioSettings s;
    s.scenario = Scenario::offline;
    s.batch_size = 3;
    Schedule sch = make_schedule(s, make_queries({10, 20, 30, 40}), 10);
    FakeSut sut;
    sut.s = &sch;
    const RunLog log = run_schedule(sch, sut.run(), sut.clock(), "fake", 1);
    std::vector<size_t> sizes;
    for (const auto& b : sut.batches) sizes.push_back(b.size());
    EXPECT_EQ(sizes, (std::vector<size_t>{3, 3, 3, 1}));
    for (const LogEntry& e : log.entries) EXPECT_EQ(e.arrival, 0.0);
}

// Latencies 1..100 ms, one per query.
RunLog hundred(Scenario sc) {
    RunLog log;
    log.sut = std::string("hundred");
    log.settings.scenario = sc;
    log.settings.target_qps = sc == Scenario::server ? std::optional<double>(10.0) : std::nullopt;
    log.settings.min_duration_s = 0;
    log.settings.min_query_count = 1;
    for (int i = 0; i < 100; ++i) {
        const double a = 0.1 * i;
        log.entries.push_back({i % 3, 50, a, a, a + 1e-3 * (100 - i), i + 1});
    }
    return log;
}

// The summary of a run sized for LoadGen's target_qps `qps` over a query set of 3.
std::string summary_of(RunLog log, double qps) {
    log.settings.loadgen_target_qps = qps;
    log.performance_sample_count = 3;
    return mlperf_summary_txt(log, summarize(log));
}

// LoadGen's percentile (results.cc): sorted[floor(n x p)], 0-based, so the 91st of 100 for p90.
TEST(ScenarioStats, LoadGenPercentiles) {
    const ScenarioStats st = summarize(hundred(Scenario::singlestream));
    EXPECT_NEAR(st.latency_ms_p50, 51, 1e-9);
    EXPECT_NEAR(st.latency_ms_p90, 91, 1e-9);
    EXPECT_NEAR(st.latency_ms_p95, 96, 1e-9);
    EXPECT_NEAR(st.latency_ms_p99, 100, 1e-9);
    EXPECT_NEAR(st.latency_ms_p999, 100, 1e-9);
    EXPECT_NEAR(st.latency_ms_max, 100, 1e-9);
    EXPECT_NEAR(st.latency_ms_mean, 50.5, 1e-9);
    EXPECT_EQ(st.queries, 100);
    EXPECT_EQ(st.batches, 100);
    EXPECT_TRUE(st.valid);
    EXPECT_NEAR(st.duration_s, 9.9 + 0.001, 1e-9);
    EXPECT_NEAR(st.min_duration_clock_s, 9.9, 1e-9);  // singlestream: the last issue
    EXPECT_NEAR(st.tokens_per_s, 5000 / st.duration_s, 1e-9);
    // Early stopping's 90th-percentile estimate, as LoadGen's code gives it for these latencies:
    // 98 ms (sorted[100 - 3]).
    EXPECT_NEAR(st.latency_ms_early_stopping.value_or(-1), 98, 1e-9);
}

// LoadGen's early stopping, against its own code (loadgen/early_stopping.cc and results.cc
// of mlcommons/inference b66003e, compiled and run on these counts and latencies):
// SingleStream needs 64 queries (h(1) = 63 at p = 0.9); a Server run with no query over the
// bound 459 (h(0) = 459 at p = 0.99), with 2 over it 838, with 4 over it 1157; and the
// SingleStream estimates of latencies 1, 2, ..., n.
TEST(ScenarioStats, EarlyStoppingAsLoadGen) {
    EXPECT_EQ(early_stopping_min_passing(1, 0.90), 63);
    EXPECT_EQ(early_stopping_min_passing(0, 0.99), 459);
    EXPECT_EQ(early_stopping_min_passing(2, 0.99) + 2, 838);
    EXPECT_EQ(early_stopping_min_passing(4, 0.99) + 4, 1157);
    for (const auto& [n, estimate] : std::vector<std::pair<int, double>>{{200, 191}, {1000, 923}, {5000, 4551}}) {
        RunLog ss;
        ss.settings.min_duration_s = 0;
        ss.settings.min_query_count = 1;
        for (int i = 0; i < n; ++i) ss.entries.push_back({0, 10, 0.1 * i, 0.1 * i, 0.1 * i + 1e-3 * (i + 1), i});
        EXPECT_NEAR(summarize(ss).latency_ms_early_stopping.value_or(-1), estimate, 1e-6) << n;
    }
    RunLog log = hundred(Scenario::singlestream);
    log.entries.resize(63);
    ScenarioStats st = summarize(log);
    EXPECT_FALSE(st.valid);
    EXPECT_FALSE(st.latency_ms_early_stopping.has_value());  // LoadGen gives none either
    EXPECT_TRUE(stats_json(st)["latency_ms_early_stopping_p90"].is_null());
    EXPECT_NE(st.invalid_reasons.at(0).find("early stopping: 63 queries, need at least 64"),
              std::string::npos) << st.invalid_reasons.at(0);
    log = hundred(Scenario::server);
    log.settings.latency_bound_ms = 1000;
    st = summarize(log);
    EXPECT_EQ(st.overlatency_queries, 0);
    EXPECT_NE(st.invalid_reasons.at(0).find("early stopping: 0 queries over the bound need 459 queries in all, got 100"),
              std::string::npos) << st.invalid_reasons.at(0);
}

TEST(ScenarioStats, ValidityRulesNameTheirReasons) {
    RunLog log = hundred(Scenario::server);
    log.settings.min_duration_s = 60;
    log.settings.min_query_count = 500;
    log.settings.latency_bound_ms = 98.5;  // between two latencies (their last bits vary by build)
    ScenarioStats st = summarize(log);
    EXPECT_FALSE(st.valid);
    ASSERT_EQ(st.invalid_reasons.size(), 4u);
    EXPECT_NE(st.invalid_reasons[0].find("100 queries < min_query_count 500"), std::string::npos);
    EXPECT_NE(st.invalid_reasons[1].find("last scheduled arrival 9.900 s < min_duration_s 60 s"),
              std::string::npos) << st.invalid_reasons[1];
    EXPECT_NE(st.invalid_reasons[2].find("99th-percentile latency 100.000 ms > latency bound 98.5 ms"),
              std::string::npos);
    EXPECT_NE(st.invalid_reasons[3].find("early stopping: 2 queries over the bound"), std::string::npos);
    EXPECT_NE(stats_line(log, st).find("INVALID"), std::string::npos);
    EXPECT_EQ(stats_json(st)["result"], "INVALID");
    log.settings.latency_bound_ms = 100;  // p99 == bound: valid on latency; too few for early stopping
    log.settings.min_duration_s = 0;
    log.settings.min_query_count = 100;
    st = summarize(log);
    ASSERT_EQ(st.invalid_reasons.size(), 1u);
    EXPECT_NE(st.invalid_reasons[0].find("early stopping"), std::string::npos);
    log.settings.scenario = Scenario::offline;  // no latency bound nor early stopping offline
    log.settings.latency_bound_ms = 1;
    EXPECT_TRUE(summarize(log).valid);
}

// LoadGen's mlperf_log_summary.txt (results.cc LogSummary) of the hundred latencies 1..100 ms:
// the figures worked by hand from LoadGen's definitions (p90 = sorted[90] = 91 ms; early stopping
// keeps t = 3 over its estimate, sorted[97] = 98 ms; QPS w/ loadgen overhead = 99 / the last issue
// 9.9 s; w/o = 1 / the mean 50.5 ms), in LoadGen's layout and integer nanoseconds.
TEST(ScenarioSummary, SingleStreamAsLoadGenWritesIt) {
    const RunLog log = hundred(Scenario::singlestream);
    const std::string txt = summary_of(log, 12.5);
    const std::string rule = "================================================\n";
    EXPECT_EQ(txt, rule + "MLPerf Results Summary\n" + rule +
                       "SUT name : hundred\n"
                       "Scenario : SingleStream\n"
                       "Mode     : PerformanceOnly\n"
                       "90.0th percentile latency (ns) : 91000000\n"
                       "Result is : VALID\n"
                       "  Min duration satisfied : Yes\n"
                       "  Min queries satisfied : Yes\n"
                       "  Early stopping satisfied: Yes\n"
                       "Early Stopping Result:\n"
                       " * Processed at least 64 queries (100).\n"
                       " * Would discard 2 highest latency queries.\n"
                       " * Early stopping 90.0th percentile estimate: 98000000\n"
                       " * Not enough queries processed for 99.0th percentile\n"
                       " early stopping estimate (would need to process at\n"
                       " least 662 total queries).\n"
                       "\n" + rule + "Additional Stats\n" + rule +
                       "QPS w/ loadgen overhead         : 10.00\n"
                       "QPS w/o loadgen overhead        : 19.80\n"
                       "\n"
                       "Min latency (ns)                : 1000000\n"
                       "Max latency (ns)                : 100000000\n"
                       "Mean latency (ns)               : 50500000\n"
                       "50.00 percentile latency (ns)   : 51000000\n"
                       "90.00 percentile latency (ns)   : 91000000\n"
                       "95.00 percentile latency (ns)   : 96000000\n"
                       "97.00 percentile latency (ns)   : 98000000\n"
                       "99.00 percentile latency (ns)   : 100000000\n"
                       "99.90 percentile latency (ns)   : 100000000\n"
                       "\n" + rule + "Test Parameters Used\n" + rule +
                       "samples_per_query : 1\n"
                       "target_qps : 12.5\n"
                       "target_latency (ns): 0\n"
                       "max_async_queries : 1\n"
                       "min_duration (ms): 0\n"
                       "max_duration (ms): 0\n"
                       "min_query_count : 1\n"
                       "max_query_count : 0\n"
                       "qsl_rng_seed : 0\n"
                       "sample_index_rng_seed : 0\n"
                       "schedule_rng_seed : 0\n"
                       "accuracy_log_rng_seed : 0\n"
                       "accuracy_log_probability : 0\n"
                       "accuracy_log_sampling_target : 0\n"
                       "print_timestamps : 0\n"
                       "performance_issue_unique : 0\n"
                       "performance_issue_same : 0\n"
                       "performance_issue_same_index : 0\n"
                       "performance_sample_count : 3\n"
                       "accuracy_sample_count : 3\n"
                       "\nNo warnings encountered during test.\n"
                       "\nNo errors encountered during test.\n");
}

// Server over its bound (p99 100 ms > 50.5 ms, 50 queries over it) and offline: the constraint
// lines, LoadGen's recommendations and early-stopping verdict, the scenario's own figures.
TEST(ScenarioSummary, ServerAndOfflineLines) {
    RunLog log = hundred(Scenario::server);
    log.settings.latency_bound_ms = 50.5;
    log.settings.min_query_count = 200;
    const std::string server = summary_of(log, 10);
    const auto has = [](const std::string& txt, const std::string& line) {
        EXPECT_NE(txt.find(line), std::string::npos) << "missing: " << line << "\nin:\n" << txt;
    };
    has(server, "Scenario : Server\nMode     : PerformanceOnly\nCompleted samples per second    : 10.00\n");
    has(server, "Result is : INVALID\n  Performance constraints satisfied : NO\n  Min duration satisfied : Yes\n"
                "  Min queries satisfied : NO\n  Early stopping satisfied: NO\nRecommendations:\n"
                " * Reduce target QPS to improve latency.\n"
                " * The test exited early, before enough queries were issued.\n"
                "   See the detailed log for why this may have occurred.\nEarly Stopping Result:\n"
                " * Run unsuccessful.\n * Processed 100 queries.\n");
    has(server, fmt::format(" * Would need to run at least {} more queries,\n",
                            early_stopping_min_passing(50, 0.99) + 50 - 100));
    has(server, "Scheduled samples per second : 10.00\nMin latency (ns)                : 1000000\n");
    has(server, "target_qps : 10\ntarget_latency (ns): 50500000\nmax_async_queries : 0\n");
    log.settings.latency_bound_ms = 1000;  // none over: valid on latency, 459 queries needed
    log.settings.min_query_count = 1;
    has(summary_of(log, 10), "  Performance constraints satisfied : Yes\n");
    log = hundred(Scenario::offline);
    log.settings.min_duration_s = 60;
    const std::string offline = summary_of(log, 5.5);
    has(offline, "Scenario : Offline\nMode     : PerformanceOnly\nSamples per second: 10.1\nResult is : INVALID\n"
                 "  Min duration satisfied : NO\n  Min queries satisfied : Yes\n  Early stopping satisfied: Yes\n"
                 "Recommendations:\n * Increase expected QPS so the loadgen pre-generates a larger (coalesced) query.\n"
                 "\n================================================\nAdditional Stats\n");
    has(offline, "samples_per_query : 100\ntarget_qps : 5.5\ntarget_latency (ns): 0\nmax_async_queries : 1\n"
                 "min_duration (ms): 60000\nmax_duration (ms): 0\nmin_query_count : 1\n");
    EXPECT_EQ(offline.find("Early Stopping Result"), std::string::npos);
    log.settings.min_query_count = 500;  // the count judged is the one printed (LoadGen's Offline: 1)
    has(summary_of(log, 5.5), "  Min queries satisfied : NO\n");
    has(summary_of(log, 5.5), "max_duration (ms): 0\nmin_query_count : 500\nmax_query_count : 0\n");
    EXPECT_NE(offline.find("\nNo errors encountered during test.\n"), std::string::npos);
    // a singlestream run short of its duration ran out of generated queries: LoadGen's error
    log = hundred(Scenario::singlestream);
    log.settings.min_duration_s = 60;
    has(summary_of(log, 10), "\nNo warnings encountered during test.\n\n1 ERROR encountered. "
                                                       "See detailed log.\n");
}

TEST(ScenarioChecks, UnmeetableTargetsAreNamedBeforeMeasuring) {
    ScenarioSettings s = server(20, 4);
    s.latency_bound_ms = 130;
    EXPECT_FALSE(unmeetable_target(s, 50, 170, 100).has_value());
    const auto slow = unmeetable_target(s, 140, 170, 100);
    ASSERT_TRUE(slow.has_value());
    EXPECT_NE(slow->find("--latency_bound_ms=130"), std::string::npos) << *slow;
    EXPECT_NE(slow->find("170 tokens"), std::string::npos) << *slow;
    const auto fast = unmeetable_target(s, 50, 170, 15);
    ASSERT_TRUE(fast.has_value());
    EXPECT_NE(fast->find("--server_target_qps=20"), std::string::npos) << *fast;
    ScenarioSettings accuracy = s;  // an accuracy run: every query once, no latency rule
    accuracy.every_query_once = true;
    EXPECT_FALSE(unmeetable_target(accuracy, 140, 170, 15).has_value());
    s.scenario = Scenario::offline;
    EXPECT_FALSE(unmeetable_target(s, 1e9, 170, 1).has_value());
}

TEST(ScenarioPeak, BracketsThenBisectsToThePrecision) {
    const double peak = 37;
    for (double start : {1.0, 37.0, 500.0}) {
        const PeakSearch p = find_peak(start, 0.02, 30, 1e9, [&](double q) { return q <= peak; });
        ASSERT_TRUE(p.peak_qps.has_value()) << start;
        EXPECT_LE(*p.peak_qps, peak);
        EXPECT_GE(*p.peak_qps, peak / 1.02) << start;
        EXPECT_EQ(p.tried.front().first, start);
        for (const auto& [q, ok] : p.tried) EXPECT_EQ(ok, q <= peak);
    }
    const PeakSearch none = find_peak(10, 0.05, 4, 1e9, [](double) { return false; });
    EXPECT_FALSE(none.peak_qps.has_value());
    EXPECT_EQ(none.tried.size(), 4u);
}

// A rate above the capacity (the one a single server run refuses) is never run, even where every
// run would pass (a short run's p99 does not see the queue grow): the peak is then the capacity.
TEST(ScenarioPeak, NoRateAboveTheCapacity) {
    const PeakSearch all_pass = find_peak(30, 0.02, 10, 100, [](double) { return true; });
    EXPECT_EQ(all_pass.tried, (std::vector<std::pair<double, bool>>{{30, true}, {60, true}, {100, true}}));
    EXPECT_EQ(all_pass.peak_qps.value_or(0), 100);
    EXPECT_TRUE(all_pass.at_cap);
    const PeakSearch above = find_peak(500, 0.02, 10, 100, [](double) { return true; });
    EXPECT_EQ(above.tried, (std::vector<std::pair<double, bool>>{{100, true}}));
    const PeakSearch below = find_peak(30, 0.02, 30, 100, [](double q) { return q <= 80; });
    for (const auto& [q, ok] : below.tried) EXPECT_LE(q, 100) << q;
    EXPECT_EQ(below.tried[2], (std::pair<double, bool>{100, false}));
    ASSERT_TRUE(below.peak_qps.has_value());
    EXPECT_GE(*below.peak_qps, 80 / 1.02);
    EXPECT_FALSE(below.at_cap);
}

TEST(ScenarioLog, RoundTripReproducesTheStatistics) {
    Schedule s = make_schedule(server(300, 2, 3), make_queries({17, 33, 250}), 500);
    FakeSut sut;
    sut.s = &s;
    RunLog log = run_schedule(s, sut.run(), sut.clock(), "fake-int8", 2);
    log.settings.min_duration_s = 0.5;
    log.settings.min_query_count = 10;
    const nlohmann::json j = nlohmann::json::parse(log_json(log).dump());
    EXPECT_EQ(j["format"], "bertbench-scenario-log/1");
    EXPECT_EQ(j["entries"].size(), 500u);
    ScenarioSettings defaults;
    std::vector<std::string> missing;
    const RunLog back = parse_log_json(j, "log.json", defaults, &missing);
    EXPECT_TRUE(missing.empty()) << missing.front();
    EXPECT_EQ(back.sut, "fake-int8");
    EXPECT_EQ(back.threads, 2);
    EXPECT_EQ(back.performance_sample_count, 3);
    EXPECT_EQ(back.settings.schedule_rng_seed, log.settings.schedule_rng_seed);
    EXPECT_EQ(back.settings.min_duration_s, 0.5);
    EXPECT_EQ(back.settings.min_query_count, 10);
    EXPECT_EQ(stats_json(summarize(back)), stats_json(summarize(log)));
    nlohmann::json bad = j;
    bad["entries"][3].erase("done");
    try {
        parse_log_json(bad, "log.json", log.settings);
        FAIL() << "expected an error";
    } catch (const Error& e) {
        EXPECT_NE(std::string(e.what()).find("log.json: entries[3]: field \"done\" missing"), std::string::npos)
            << e.what();
    }
    EXPECT_THROW(parse_log_json(nlohmann::json{{"format", "x"}}, "log.json", log.settings), Error);
    // a time before the run's start is refused; the entries' order does not change the figures
    nlohmann::json early = j;
    early["entries"][2]["arrival"] = -1.0;
    try {
        parse_log_json(early, "log.json", log.settings);
        FAIL() << "expected an error";
    } catch (const Error& e) {
        EXPECT_NE(std::string(e.what()).find("log.json: entries[2]: expected 0 <= arrival <= start <= done"),
                  std::string::npos) << e.what();
    }
    // numbers no run can log, each named: a float read as an integer once gave a negative
    // tokens/s, a negative batch ordinal a wrong mean batch
    const std::pair<std::function<void(nlohmann::json&)>, std::string> impossible[] = {
        {[](nlohmann::json& b) { b["entries"][1]["tokens"] = 1e300; }, "entries[1]: field \"tokens\": expected an integer"},
        {[](nlohmann::json& b) { b["entries"][1]["tokens"] = -1; }, "entries[1]: field \"tokens\": expected at least 1"},
        {[](nlohmann::json& b) { b["entries"][1]["batch"] = -3; }, "entries[1]: field \"batch\": expected a batch's ordinal"},
        {[](nlohmann::json& b) { b["entries"][1]["q"] = 3; }, "entries[1]: field \"q\": expected a query of the set, 0 .. 2"},
        {[](nlohmann::json& b) { b["entries"][1]["done"] = std::numeric_limits<double>::infinity(); },
         "entries[1]: field \"done\": expected a finite number"},
        {[](nlohmann::json& b) { b["batch_size"] = 0; }, "field \"batch_size\": expected at least 1, got 0"},
        {[](nlohmann::json& b) { b["threads"] = 0; }, "field \"threads\": expected at least 1, got 0"},
        {[](nlohmann::json& b) { b["min_query_count"] = 0; }, "field \"min_query_count\": expected at least 1, got 0"}};
    for (const auto& [damage, message] : impossible) {
        nlohmann::json b = j;
        damage(b);
        try {
            parse_log_json(b, "log.json", log.settings);
            ADD_FAILURE() << "expected an error: " << message;
        } catch (const Error& e) {
            EXPECT_NE(std::string(e.what()).find("log.json: " + message), std::string::npos) << e.what();
        }
    }
    nlohmann::json reversed = j;
    std::reverse(reversed["entries"].begin(), reversed["entries"].end());
    EXPECT_EQ(stats_json(summarize(parse_log_json(reversed, "log.json", defaults, &missing))),
              stats_json(summarize(log)));
    // the optional settings: absent ones are the defaults' and listed; a seed is 64 bits in decimal
    nlohmann::json older = j;
    older.erase("performance_sample_count");
    older.erase("qsl_rng_seed");
    defaults.qsl_rng_seed = 99;
    missing.clear();
    const RunLog again = parse_log_json(older, "log.json", defaults, &missing);
    EXPECT_EQ(missing, (std::vector<std::string>{"qsl_rng_seed", "performance_sample_count"}));
    EXPECT_EQ(again.settings.qsl_rng_seed, 99u);
    EXPECT_EQ(again.performance_sample_count, 0);
    for (const char* seed : {"-1", "18446744073709551616", "0x10", " 7", "7.0", ""}) {
        nlohmann::json b = j;
        b["qsl_rng_seed"] = seed;
        try {
            parse_log_json(b, "log.json", defaults);
            FAIL() << "expected an error for " << seed;
        } catch (const Error& e) {
            EXPECT_NE(std::string(e.what()).find("log.json: field \"qsl_rng_seed\": expected a 64-bit seed in decimal"),
                      std::string::npos) << e.what();
        }
    }
    nlohmann::json big = j;
    big["qsl_rng_seed"] = "18446744073709551615";
    EXPECT_EQ(parse_log_json(big, "log.json", defaults).settings.qsl_rng_seed, UINT64_MAX);
}

}  // namespace
}  // namespace bertbench::bench
