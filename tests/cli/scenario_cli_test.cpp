// `bertbench bench --scenario` end to end on the tiny model and the golden run_squad.py eval
// features (max_seq_length 384): a run's raw log reproduces its report through --summarize_log;
// a short run is INVALID with its reason; the server report, peak search and SVG; an unmeetable
// bound fails before measuring; bad query files are one-line errors; the schedule for an external
// SUT; accuracy mode scores as `squad --do_predict` does.
#include <gtest/gtest.h>

#include <cstring>

#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <regex>
#include <sstream>

#include "cli/run_util.hpp"
#include "test_util.hpp"

namespace bertbench {
namespace {

using testing::golden;
using testing::read_json;
using testing::run_bertbench;
namespace fs = std::filesystem;

std::string tmp(const std::string& name) {
    return ::testing::TempDir() + "/scenario_" + name;
}
std::string tiny() {
    return "bench --task=squad --model=tiny --seq_len=384 --threads=1 --data=" +
           golden("squad_pipeline/features_384_eval.tf_record") + " ";
}

// A performance sample count above the query set: all of it, as LoadGen caps it, said in a warning.
TEST(ScenarioCli, ScenarioQueriesAboveTheSetTakeItAllAndSaySo) {
    const std::string json_path = tmp("capped.json");
    const auto r = run_bertbench(tiny() + "--scenario=offline --batch_size=4 --scenario_queries=1000000 "
                                 "--min_duration_s=0 --min_query_count=8 --expected_qps=40 --json=" + json_path);
    ASSERT_EQ(r.exit_code, 0) << r.out;
    const size_t all = testing::read_jsonl(golden("squad_pipeline/features_384_eval.jsonl")).size();
    EXPECT_NE(r.out.find("warning: --scenario_queries=1000000: the query set holds " + std::to_string(all) +
                         " features; all of them"), std::string::npos) << r.out;
    EXPECT_EQ(read_json(json_path)["query_set"]["queries"], all);
}

TEST(ScenarioCli, OfflineLogReproducesTheReport) {
    const std::string json_path = tmp("offline.json"), log = tmp("offline_log.json"), again = tmp("again.json");
    const std::string summary = tmp("offline_summary.txt"), summary_again = tmp("offline_summary_again.txt");
    const auto r = run_bertbench(tiny() + "--scenario=offline --batch_size=4 --scenario_queries=20 --min_duration_s=0 "
                                 "--min_query_count=30 --expected_qps=40 --sample_index_rng_seed=18446744073709551615 --json=" +
                                 json_path + " --scenario_log=" + log + " --mlperf_summary=" + summary);
    ASSERT_EQ(r.exit_code, 0) << r.out;
    EXPECT_NE(r.out.find("bertbench-fp32 offline: 30 queries"), std::string::npos) << r.out;
    const nlohmann::json j = read_json(json_path);
    EXPECT_EQ(j["format"], "bertbench-scenario-report/1");
    EXPECT_TRUE(j["definitions"].contains("latency"));
    EXPECT_EQ(j["squad_layout"], "real");
    EXPECT_EQ(j["query_set"]["queries"], 20);
    const nlohmann::json& st = j["run"]["stats"];
    EXPECT_EQ(st["queries"], 30);
    EXPECT_EQ(st["result"], "VALID");
    EXPECT_LE(st["mean_batch_size"].get<double>(), 4.0);
    EXPECT_GE(st["mean_batch_size"].get<double>(), 30.0 / 8);  // offline: full batches of 4 (the last partial)
    EXPECT_GT(st["tokens_per_second"].get<double>(), st["samples_per_second"].get<double>());
    const nlohmann::json raw = read_json(log);
    EXPECT_EQ(raw["format"], "bertbench-scenario-log/1");
    EXPECT_EQ(raw["entries"].size(), 30u);
    EXPECT_EQ(raw["sample_index_rng_seed"], "18446744073709551615");  // 64 bits, beyond a double's integers
    // the log alone (its settings, seeds and query set's size) gives the same report and summary
    const auto s = run_bertbench("bench --summarize_log=" + log + " --json=" + again + " --mlperf_summary=" + summary_again);
    ASSERT_EQ(s.exit_code, 0) << s.out;
    EXPECT_EQ(s.out.find("warning"), std::string::npos) << s.out;
    EXPECT_EQ(read_json(again)["run"], j["run"]);
    // an offline log draws no latency plot: refused by name, not ignored
    const auto p = run_bertbench("bench --summarize_log=" + log + " --plot=" + tmp("offline_plot.svg"));
    EXPECT_EQ(p.exit_code, 1) << p.out;
    EXPECT_NE(p.out.find("--plot: a server run's latency percentiles against load; --summarize_log=" + log +
                         " is a log of --scenario=offline"), std::string::npos) << p.out;
    const std::string txt = read_file(summary);
    // LoadGen's accuracy_sample_count: the whole query set (the reference's eval features)
    const size_t all = testing::read_jsonl(golden("squad_pipeline/features_384_eval.jsonl")).size();
    std::ostringstream samples;
    samples << st["samples_per_second"].get<double>();
    for (const std::string& line : {"Scenario : Offline\nMode     : PerformanceOnly\nSamples per second: " + samples.str(),
                                   std::string("Result is : VALID\n"), std::string("samples_per_query : 30\ntarget_qps : 40\n"),
                                   std::string("sample_index_rng_seed : 18446744073709551615\n"),
                                   "performance_sample_count : 20\naccuracy_sample_count : " + std::to_string(all) + "\n"})
        EXPECT_NE(txt.find(line), std::string::npos) << line << "\nnot in\n" << txt;
    EXPECT_EQ(read_file(summary_again), txt);
    // a log without them (an older SUT's): the flags', said so; a rule given as a flag judges by it
    nlohmann::json old = raw;
    for (const char* key : {"qsl_rng_seed", "sample_index_rng_seed", "schedule_rng_seed", "loadgen_target_qps", "performance_sample_count"})
        old.erase(key);
    write_file_atomic(tmp("old_log.json"), old.dump());
    const auto o = run_bertbench("bench --summarize_log=" + tmp("old_log.json") + " --expected_qps=40 "
                                 "--sample_index_rng_seed=18446744073709551615 --min_duration_s=600 --mlperf_summary=" +
                                 summary_again);
    ASSERT_EQ(o.exit_code, 0) << o.out;
    EXPECT_NE(o.out.find("the log names no qsl_rng_seed, sample_index_rng_seed, schedule_rng_seed, loadgen_target_qps, "
                         "performance_sample_count: taken from the flags"), std::string::npos) << o.out;
    const std::string judged = read_file(summary_again);
    EXPECT_NE(judged.find("  Min duration satisfied : NO\n"), std::string::npos) << judged;
    const auto params = [](const std::string& t) {
        const size_t from = t.find("target_qps :"), to = t.find("min_duration (ms)");
        return t.substr(from, to - from);
    };
    EXPECT_EQ(params(judged), params(txt));
    // the minimums it was judged by (the log's min_query_count, 30; not LoadGen's Offline 1)
    EXPECT_NE(judged.find("min_duration (ms): 600000\nmax_duration (ms): 0\nmin_query_count : 30\n"), std::string::npos)
        << judged;
    EXPECT_NE(judged.find("sample_index_rng_seed : 18446744073709551615\n"), std::string::npos) << judged;
    EXPECT_NE(judged.find("performance_sample_count : 20\n"), std::string::npos) << judged;
    // what LoadGen writes no summary for: refused before any work
    for (const std::string& extra : {std::string("--scenario_mode=accuracy"), std::string("--schedule_out=" + tmp("never.json"))}) {
        const auto bad = run_bertbench(tiny() + "--scenario=offline --mlperf_summary=" + tmp("never.txt") + " " + extra);
        EXPECT_EQ(bad.exit_code, 1) << bad.out;
        EXPECT_NE(bad.out.find("--mlperf_summary"), std::string::npos) << bad.out;
        EXPECT_FALSE(fs::exists(tmp("never.txt")));
    }
    // ... nor a run's files with --schedule_out, which measures nothing
    for (const std::string flag : {"--json=", "--scenario_log="}) {
        const auto bad = run_bertbench(tiny() + "--scenario=offline --expected_qps=100 --schedule_out=" + tmp("never.json") +
                                       " " + flag + tmp("never2.json"));
        EXPECT_EQ(bad.exit_code, 1) << bad.out;
        EXPECT_NE(bad.out.find(flag.substr(0, flag.size() - 1) + ": --schedule_out measures nothing"), std::string::npos) << bad.out;
        EXPECT_FALSE(fs::exists(tmp("never.json")));
    }
    // --summarize_log runs nothing: a flag of a run is refused by name, a fallback the log makes
    // unnecessary is said
    for (const std::string& flag : {std::string("--model=large"), std::string("--dtype=int8"), "--accuracy_log=" + tmp("never.json")}) {
        const auto bad = run_bertbench("bench --summarize_log=" + log + " " + flag);
        EXPECT_EQ(bad.exit_code, 1) << bad.out;
        EXPECT_NE(bad.out.find(flag.substr(0, flag.find('=')) + ": not used by --summarize_log"), std::string::npos) << bad.out;
    }
    const auto seeded = run_bertbench("bench --summarize_log=" + log + " --qsl_rng_seed=7");
    EXPECT_EQ(seeded.exit_code, 0) << seeded.out;
    EXPECT_NE(seeded.out.find("warning: --qsl_rng_seed: not used: --summarize_log=" + log + " names its own qsl_rng_seed"),
              std::string::npos) << seeded.out;
    const auto bound = run_bertbench("bench --summarize_log=" + log + " --latency_bound_ms=100");
    EXPECT_EQ(bound.exit_code, 1) << bound.out;
    EXPECT_NE(bound.out.find("--latency_bound_ms: judges a server run; --summarize_log=" + log +
                             " is a log of --scenario=offline"), std::string::npos) << bound.out;
}

TEST(ScenarioCli, ShortRunIsInvalidWithItsReason) {
    const std::string json_path = tmp("short.json");
    const auto r = run_bertbench(tiny() + "--scenario=singlestream --min_query_count=5 --min_duration_s=60 "
                                 "--expected_latency_ms=100000 --json=" + json_path);
    ASSERT_EQ(r.exit_code, 0) << r.out;
    const nlohmann::json st = read_json(json_path)["run"]["stats"];
    EXPECT_EQ(st["queries"], 5);
    EXPECT_EQ(st["result"], "INVALID");
    ASSERT_EQ(st["invalid_reasons"].size(), 2u);  // LoadGen's reasons, both
    EXPECT_NE(st["invalid_reasons"][0].get<std::string>().find("< min_duration_s 60 s"), std::string::npos);
    EXPECT_NE(st["invalid_reasons"][1].get<std::string>().find("early stopping: 5 queries, need at least 64"),
              std::string::npos);
    EXPECT_EQ(st["batches"], 5);
    EXPECT_NE(r.out.find("90th-percentile latency"), std::string::npos) << r.out;
}

TEST(ScenarioCli, ServerPeakSearchReportsEveryRateAndPlotsThem) {
    const std::string json_path = tmp("peak.json"), svg = tmp("peak.svg"), raw = tmp("peak.log.json"),
                      summary = tmp("peak_summary.txt");
    fs::remove(raw);
    fs::remove(summary);
    const auto r = run_bertbench(tiny() + "--scenario=server --server_find_peak --peak_max_runs=3 --batch_size=4 "
                                 "--min_duration_s=0 --min_query_count=20 --json=" + json_path + " --plot=" + svg +
                                 " --scenario_log=" + raw + " --mlperf_summary=" + summary);
    ASSERT_TRUE(r.exit_code == 0 || r.exit_code == 1) << r.out;  // 1: no valid rate among the 3
    // the peak run's raw log and summary; with no peak, neither, and each said
    for (const auto& [flag, file] : {std::pair<std::string, std::string>{"--scenario_log", raw}, {"--mlperf_summary", summary}}) {
        EXPECT_EQ(fs::exists(file), r.exit_code == 0) << flag << "\n" << r.out;
        EXPECT_EQ(r.out.find("warning: " + flag + "=" + file + ": not written: no rate was within the latency bound") !=
                      std::string::npos,
                  r.exit_code == 1) << r.out;
    }
    const nlohmann::json j = read_json(json_path);
    // half the capacity, then the capacity: within the bound there it ends the search (2 runs)
    const size_t runs = j["runs"].size();
    ASSERT_TRUE(runs == 3 || (runs == 2 && j["peak"]["at_capacity"] == true)) << j.dump(1);
    for (const auto& run : j["runs"]) {
        EXPECT_GT(run["target_qps"].get<double>(), 0);
        EXPECT_EQ(run["latency_bound_ms"], 130);
        EXPECT_TRUE(run["stats"]["latency_ms"].contains("p99"));
    }
    EXPECT_TRUE(j["peak"].contains("rule"));
    EXPECT_EQ(j["run"].is_null(), r.exit_code == 1) << r.out;  // the peak rate's run, none without one
    std::ifstream in(svg);
    std::stringstream ss;
    ss << in.rdbuf();
    EXPECT_NE(ss.str().find("bound 130 ms"), std::string::npos);
    EXPECT_NE(ss.str().find(">p99<"), std::string::npos);
    EXPECT_EQ(testing::count_of(ss.str(), "<circle"), 3 * runs);  // p50/p90/p99 at each rate
}

// A short search with a generous bound: every run passes the latency rule, but no rate above the
// warm-up capacity is run (a single server run refuses those: its queue would grow without bound),
// so the peak is the capacity, said so. The report's `run` is the peak rate's, as documented.
TEST(ScenarioCli, PeakSearchRunsNoRateAboveTheCapacity) {
    const std::string json_path = tmp("peak_cap.json");
    const auto r = run_bertbench(tiny() + "--scenario=server --server_find_peak --peak_max_runs=4 --batch_size=4 "
                                 "--latency_bound_ms=100000 --min_duration_s=0 --min_query_count=20 --json=" + json_path);
    ASSERT_EQ(r.exit_code, 0) << r.out;
    const nlohmann::json j = read_json(json_path);
    const double capacity = j["warmup"]["capacity_qps"].get<double>();
    ASSERT_EQ(j["runs"].size(), 2u) << r.out;  // half the capacity, then the capacity: within the bound
    for (const auto& run : j["runs"]) EXPECT_LE(run["target_qps"].get<double>(), capacity) << r.out;
    EXPECT_EQ(j["peak"]["peak_qps"].get<double>(), capacity);
    EXPECT_EQ(j["peak"]["at_capacity"], true);
    EXPECT_NE(r.out.find("(2 runs; the warm-up capacity, above which no rate was run)"), std::string::npos) << r.out;
    EXPECT_EQ(j["run"], j["runs"][1]);
}

TEST(ScenarioCli, UnmeetableBoundFailsBeforeMeasuring) {
    const std::string json_path = tmp("unmeetable.json");
    fs::remove(json_path);
    const auto r = run_bertbench(tiny() + "--scenario=server --server_target_qps=10 --latency_bound_ms=0.001 --json=" + json_path);
    EXPECT_NE(r.exit_code, 0);
    EXPECT_NE(r.out.find("--latency_bound_ms=0.001: one query of median length"), std::string::npos) << r.out;
    EXPECT_EQ(testing::count_of(r.out, "error"), 1u) << r.out;
    EXPECT_FALSE(fs::exists(json_path));
    EXPECT_EQ(r.out.find("queries in"), std::string::npos) << r.out;  // no run was measured
    const auto fast = run_bertbench(tiny() + "--scenario=server --server_target_qps=100000 --json=" + json_path);
    EXPECT_NE(fast.exit_code, 0);
    EXPECT_NE(fast.out.find("--server_target_qps=100000: above the"), std::string::npos) << fast.out;
    EXPECT_FALSE(fs::exists(json_path));
}

// bench's sweep flags do nothing in a scenario run: refused by name, before anything is read.
TEST(ScenarioCli, SweepFlagsAreRefusedWithAScenario) {
    for (const char* flag : {"--md=x.md", "--profile", "--format=json", "--mode=train", "--steps=5"}) {
        const auto r = run_bertbench("bench --scenario=offline --model=tiny --data=/nonexistent " + std::string(flag));
        EXPECT_EQ(r.exit_code, 1) << flag << "\n" << r.out;
        const std::string name = std::string(flag).substr(0, std::string(flag).find('='));
        EXPECT_NE(r.out.find(name + ": not used by a scenario run"), std::string::npos) << r.out;
    }
}

// ... and the other way round: a sweep does not read a scenario's flags (--init_checkpoint would
// time the default model with random weights, --mlperf_summary would write nothing).
TEST(ScenarioCli, ScenarioFlagsAreRefusedWithoutAScenario) {
    for (const char* flag : {"--init_checkpoint=model.safetensors", "--mlperf_summary=s.txt",
                             "--scenario_log=l.json", "--accuracy_log=a.json", "--doc_stride=64",
                             "--server_target_qps=5"}) {
        const auto r = run_bertbench("bench --mode=infer --model=tiny --steps=1 " + std::string(flag));
        EXPECT_EQ(r.exit_code, 1) << flag << "\n" << r.out;
        const std::string name = std::string(flag).substr(0, std::string(flag).find('='));
        EXPECT_NE(r.out.find(name + ": used by a scenario run only"), std::string::npos) << r.out;
        EXPECT_EQ(r.out.find("seq/s"), std::string::npos) << r.out;
    }
}

// A flag of another scenario or mode is refused before measuring, not ignored.
TEST(ScenarioCli, AnotherScenariosFlagsAreRefused) {
    for (const auto& [flags, says] : std::vector<std::pair<std::string, std::string>>{
             {"--scenario=offline --server_target_qps=5", "--server_target_qps: --scenario=server only"},
             {"--scenario=singlestream --expected_qps=5", "--expected_qps: --scenario=offline only"},
             {"--scenario=offline --expected_latency_ms=5", "--expected_latency_ms: --scenario=singlestream only"},
             {"--scenario=offline --accuracy_log=a.json", "--accuracy_log: --scenario_mode=accuracy only"},
             {"--scenario=offline --plot=p.svg", "--plot: a server run's latency percentiles against load"},
             {"--scenario=server --server_target_qps=5 --peak_max_runs=3", "--peak_max_runs: --server_find_peak only"}}) {
        const auto r = run_bertbench("bench --model=tiny --data=" + golden("vocab.txt") + " " + flags);
        EXPECT_EQ(r.exit_code, 1) << flags << "\n" << r.out;
        EXPECT_NE(r.out.find(says), std::string::npos) << r.out;
    }
}

// A run sized beyond 2^27 queries stops with one line before anything is allocated (a rate of
// 1e12/s scheduled every arrival at 0 ns and grew without end; --min_duration_s=1e300 overflowed).
TEST(ScenarioCli, RunsTooLargeToScheduleAreOneLineErrors) {
    fs::remove(tmp("never.json"));  // what a failed earlier run may have left
    for (const auto& [flags, says] : std::vector<std::pair<std::string, std::string>>{
             {"--scenario=server --server_target_qps=1e12 --min_duration_s=1 --schedule_out=" + tmp("never.json"),
              "--server_target_qps=1e+12 x --min_duration_s=1: expected at most 134217728 queries"},
             {"--scenario=offline --expected_qps=1e12",
              "--min_duration_s=60 at 1e+12 queries/s (--expected_qps, or the warm-up's rate without it): 6.6e+13 "
              "queries, expected at most 134217728"},
             {"--scenario=offline --min_duration_s=1e300", "--min_duration_s: expected 0 .. 1e7 seconds, got 1e+300"},
             {"--scenario=offline --expected_qps=-5", "--expected_qps: expected >= 0, got -5"},
             {"--scenario=singlestream --expected_latency_ms=-2", "--expected_latency_ms: expected >= 0, got -2"},
             {"--scenario=offline --min_query_count=1000000000000", "--min_query_count: expected 1 .. 134217728"},
             // int64 ns: a bound of 1e13 ms wrapped (every query over it), a rate of 1e-12/s scheduled
             // arrivals at -9.2e9 s
             {"--scenario=server --server_target_qps=10 --latency_bound_ms=1e13",
              "--latency_bound_ms: expected > 0 and at most 1e+10 ms, got 1e+13"},
             {"--scenario=server --server_target_qps=1e-12 --min_query_count=3 --schedule_out=" + tmp("never.json"),
              "--server_target_qps=1e-12: 3 arrivals at this rate take 3e+12 s on average, expected at most 1e+08 s"},
             // below LoadGen's 1 ns it was 0 ns: "unknown", and the run was sized from the warm-up
             {"--scenario=singlestream --expected_latency_ms=1e-7",
              "--expected_latency_ms=1e-07: expected at least 1e-06 (1 ns, LoadGen's unit) or 0"},
             // a bound only Server applies: written into the report and never checked, before
             {"--scenario=singlestream --latency_bound_ms=0.05",
              "--latency_bound_ms: --scenario=server only; not used by --scenario=singlestream"},
             {"--scenario=offline --latency_bound_ms=0.05",
              "--latency_bound_ms: --scenario=server only; not used by --scenario=offline"},
             // singlestream's batch is 1: a --batch_size was recorded in the report and never used
             {"--scenario=singlestream --batch_size=8",
              "--batch_size: --scenario=offline or server (singlestream sends one query at a time: batch 1) only"},
             // the accuracy run's tokenization: a performance run times --data's features as they are
             {"--scenario=offline --doc_stride=0",
              "--doc_stride: --scenario_mode=accuracy (a performance run times --data's features) only; not used "
              "by --scenario=offline --scenario_mode=performance"},
             {"--scenario=offline --predict_file=/nonexistent.json", "--predict_file: --scenario_mode=accuracy"},
             // accuracy mode sends every query once: the performance run's sizes and minimums do not apply
             {"--scenario=offline --scenario_mode=accuracy --min_query_count=5",
              "--min_query_count: --scenario_mode=performance (accuracy mode sends every query once) only"},
             // its inputs named before the checkpoint is read
             {"--scenario=offline --scenario_mode=accuracy --predict_file=/nonexistent.json --vocab_file=" +
                  golden("vocab.txt") + " --init_checkpoint=/nonexistent.ckpt",
              "--predict_file=/nonexistent.json: No such file or directory, expected a SQuAD JSON file"}}) {
        const auto r = run_bertbench(tiny() + flags);
        EXPECT_EQ(r.exit_code, 1) << flags << "\n" << r.out;
        EXPECT_NE(r.out.find(says), std::string::npos) << r.out;
        EXPECT_EQ(r.out.find("queries in"), std::string::npos) << r.out;  // nothing measured
    }
    EXPECT_FALSE(std::filesystem::exists(tmp("never.json")));
    // ... and a raw log's bound, as --summarize_log reads it
    const std::string log = tmp("huge_bound_log.json");
    std::ofstream(log) << R"({"format": "bertbench-scenario-log/1", "sut": "x", "threads": 1, "scenario": "server",
        "target_qps": 50, "latency_bound_ms": 1e13, "batch_size": 1,
        "entries": [{"q": 0, "tokens": 9, "arrival": 0, "start": 0, "done": 0.004, "batch": 1}]})";
    const auto r = run_bertbench("bench --summarize_log=" + log);
    EXPECT_EQ(r.exit_code, 1) << r.out;
    EXPECT_NE(r.out.find("--summarize_log=" + log + ": field \"latency_bound_ms\": expected > 0 and at most 1e+10 ms, "
                         "got 1e+13"), std::string::npos) << r.out;
    // ... and its times: 1e10 s wrapped in int64 ns to a negative latency, and the run was VALID
    std::ofstream(log) << R"({"format": "bertbench-scenario-log/1", "sut": "x", "threads": 1, "scenario": "server",
        "target_qps": 50, "latency_bound_ms": 100, "batch_size": 1,
        "entries": [{"q": 0, "tokens": 9, "arrival": 0, "start": 0, "done": 1e10, "batch": 1}]})";
    const auto t = run_bertbench("bench --summarize_log=" + log);
    EXPECT_EQ(t.exit_code, 1) << t.out;
    EXPECT_NE(t.out.find("entries[0]: expected 0 <= arrival <= start <= done <= 1e+09 (seconds after the run's "
                         "start), got 0 / 0 / 10000000000"), std::string::npos) << t.out;
    // a bound given as a flag judges the log by it (a rule, as --min_duration_s), not the log's own
    std::ofstream(log) << R"({"format": "bertbench-scenario-log/1", "sut": "x", "threads": 1, "scenario": "server",
        "target_qps": 50, "latency_bound_ms": 100, "batch_size": 1,
        "entries": [{"q": 0, "tokens": 9, "arrival": 0, "start": 0, "done": 0.004, "batch": 1}]})";
    const auto b = run_bertbench("bench --summarize_log=" + log + " --latency_bound_ms=2 --json=" + tmp("bound.json"));
    EXPECT_EQ(b.exit_code, 0) << b.out;
    EXPECT_EQ(read_json(tmp("bound.json"))["run"]["latency_bound_ms"], 2.0) << b.out;
}

TEST(ScenarioCli, QueryFilesThatAreNotSquadFeaturesAreOneLineErrors) {
    const std::string pre = golden("pretraining/public_128_s12345_d2.tfrecord");
    const auto a = run_bertbench("bench --scenario=offline --model=tiny --seq_len=128 --data=" + pre);
    EXPECT_NE(a.exit_code, 0);
    EXPECT_NE(a.out.find(pre + ": record 0: feature unique_ids missing (expected a run_squad.py feature record"),
              std::string::npos) << a.out;
    EXPECT_EQ(a.out.find('\n'), a.out.size() - 1) << a.out;
    const std::string text = golden("vocab.txt");
    const auto b = run_bertbench("bench --scenario=offline --model=tiny --seq_len=384 --data=" + text);
    EXPECT_NE(b.exit_code, 0);
    EXPECT_NE(b.out.find(text), std::string::npos) << b.out;
    EXPECT_EQ(b.out.find('\n'), b.out.size() - 1) << b.out;
}

// Accuracy mode scores SQuAD v1.1 (MLPerf Inference's BERT): a SQuAD 2.0 file is refused with a
// hint bench can act on, not `squad`'s --version_2_with_negative, which bench has not.
TEST(ScenarioCli, AccuracyModeRefusesASquad2File) {
    const std::string v1 = tmp("v1.json"), v2 = tmp("v2.json"), dir = tmp("v2run");
    const std::string doc = R"({"version": "V", "data": [{"title": "t", "paragraphs": [{"context": "alpha beta",
        "qas": [{"id": "q1", "question": "which", "answers": A}]}]}]})";
    std::ofstream(v1) << std::regex_replace(doc, std::regex("A"), R"([{"text": "beta", "answer_start": 6}])");
    std::ofstream(v2) << std::regex_replace(doc, std::regex("A"), R"([], "is_impossible": true)");
    fs::remove_all(dir);  // a span model: one update on one question
    const auto t = run_bertbench("squad --model=tiny --vocab_file=" + golden("vocab.txt") + " --train_file=" + v1 +
                                 " --do_train --max_seq_length=32 --max_query_length=8 --train_batch_size=1 --num_train_epochs=1 "
                                 "--threads=1 --output_dir=" + dir);
    ASSERT_EQ(t.exit_code, 0) << t.out;
    const auto a = run_bertbench("bench --task=squad --seq_len=32 --max_query_length=8 --threads=1 --scenario=offline --scenario_mode=accuracy "
                                 "--init_checkpoint=" + dir + "/model.ckpt-1 --vocab_file=" + golden("vocab.txt") +
                                 " --predict_file=" + v2);
    EXPECT_EQ(a.exit_code, 1) << a.out;
    EXPECT_NE(a.out.find(v2 + ": question \"q1\": is_impossible is true (a SQuAD 2.0 file), expected a SQuAD 1.1 "
                         "file (hint: a SQuAD v1.1 file such as dev-v1.1.json: accuracy mode scores v1.1"),
              std::string::npos) << a.out;
    EXPECT_EQ(a.out.find("--version_2_with_negative"), std::string::npos) << a.out;
    const size_t error = a.out.find("bertbench bench: error: ");
    EXPECT_EQ(a.out.find('\n', error), a.out.size() - 1) << a.out;  // one line, the last
}

TEST(ScenarioCli, ScheduleForAnExternalSut) {
    const std::string out = tmp("schedule.json");
    const auto r = run_bertbench(tiny() + "--scenario=server --server_target_qps=25 --batch_size=2 --scenario_seed=9 "
                                 "--schedule_rng_seed=16159082839903944936 --min_duration_s=2 --min_query_count=10 "
                                 "--schedule_out=" + out);
    ASSERT_EQ(r.exit_code, 0) << r.out;
    const nlohmann::json j = read_json(out);
    EXPECT_EQ(j["format"], "bertbench-scenario-schedule/1");
    EXPECT_EQ(j["scenario"], "server");
    EXPECT_EQ(j["target_qps"], 25);
    EXPECT_EQ(j["batch_size"], 2);
    EXPECT_EQ(j["qsl_rng_seed"], "9");  // --scenario_seed where a seed is not given by name
    EXPECT_EQ(j["sample_index_rng_seed"], "9");
    // mlperf.conf's, above 2^63: in decimal, which a peer's JSON reader keeps whole
    EXPECT_EQ(j["schedule_rng_seed"], "16159082839903944936");
    // LoadGen's server generation: Poisson arrivals until the one before the last is past 2 s
    const auto& issues = j["issues"];
    ASSERT_GE(issues.size(), 10u);
    EXPECT_LT(issues[issues.size() - 2]["t"].get<double>(), 2.0);
    EXPECT_GE(issues.back()["t"].get<double>(), 2.0);
    const size_t queries = j["queries"].size();
    EXPECT_EQ(j["performance_sample_count"], queries);
    for (const auto& q : j["queries"]) EXPECT_EQ(q["input_ids"].size(), q["segment_ids"].size());
    for (const auto& is : j["issues"]) EXPECT_LT(is["q"].get<size_t>(), queries);
    EXPECT_EQ(r.out.find("queries in"), std::string::npos) << r.out;  // nothing measured
}

// A tiny span model fine-tuned for a few steps, then `squad --do_predict` and the accuracy mode
// on the same checkpoint and dev set: the padded layout is the reference's computation (the same
// EM/F1); the real layout (padding not computed) is scored the same way.
TEST(ScenarioCli, AccuracyModeScoresAsSquadDoPredict) {
    const std::string dir = tmp("acc"), dev = golden("squad_pipeline/dataset-v1.1.json");
    fs::remove_all(dir);
    const auto t = run_bertbench("squad --model=tiny --vocab_file=" + golden("vocab.txt") + " --train_file=" +
                                 golden("squad_pipeline/train-v1.1.json") + " --predict_file=" + dev +
                                 " --do_train --do_predict --max_seq_length=128 --doc_stride=64 --train_batch_size=16 "
                                 "--num_train_epochs=1 --threads=1 --output_dir=" + dir);
    ASSERT_EQ(t.exit_code, 0) << t.out;
    const nlohmann::json want = nlohmann::json::parse(std::ifstream(dir + "/eval_results.json"));
    const std::string key = "predicting with ";
    const size_t at = t.out.find(key);
    ASSERT_NE(at, std::string::npos) << t.out;
    const std::string ckpt = t.out.substr(at + key.size(), t.out.find(',', at) - at - key.size());
    for (const auto& [layout, dtype] : {std::pair{"padded", "fp32"}, std::pair{"real", "fp32"},
                                        std::pair{"real", "bf16"}, std::pair{"real", "int8"}}) {
        const std::string json_path = tmp(std::string("acc_") + layout + dtype + ".json");
        // the padded run names the checkpoint as --init_checkpoint takes it everywhere: without .safetensors
        ASSERT_TRUE(ckpt.ends_with(".safetensors")) << ckpt;
        const std::string name = layout == std::string("padded") ? ckpt.substr(0, ckpt.size() - 12) : ckpt;
        const auto a = run_bertbench("bench --task=squad --seq_len=128 --threads=1 --batch_size=8 "
                                     "--scenario=offline --scenario_mode=accuracy --doc_stride=64 --vocab_file=" +
                                     golden("vocab.txt") + " --predict_file=" + dev + " --init_checkpoint=" + name +
                                     " --squad_layout=" + layout + " --dtype=" + dtype + " --json=" + json_path +
                                     " --accuracy_log=" + json_path + ".accuracy");
        ASSERT_EQ(a.exit_code, 0) << a.out;
        const nlohmann::json report = read_json(json_path);  // the model and layout that ran
        EXPECT_EQ(report["model"].get<std::string>().rfind("the config of --init_checkpoint (L", 0), 0u) << report["model"];
        EXPECT_EQ(report["flags"]["squad_layout"], layout);
        EXPECT_EQ(report["flags"]["seq_len"], "128");
        // not MLPerf's 384/128/64 features: the reference's script could not index this log
        EXPECT_NE(a.out.find("accuracy-squad.py indexes the features of --seq_len=384 --doc_stride=128 "
                             "--max_query_length=64 lower-cased; this run's (128/64/64) are others"),
                  std::string::npos) << a.out;
        // LoadGen's mlperf_log_accuracy.json, read as accuracy-squad.py reads it: per feature
        // (qsl_idx) float32 hex, reshaped (-1, 2) into start/end logits; the padded run's equal
        // squad --do_predict's raw logits, the real run's cover the real tokens only.
        const nlohmann::json acc = read_json(json_path + ".accuracy");
        const auto raw = testing::read_jsonl(dir + "/raw_results.jsonl");
        ASSERT_EQ(acc.size(), raw.size());
        size_t shorter = 0;
        for (size_t i = 0; i < acc.size(); ++i) {
            ASSERT_EQ(acc[i]["qsl_idx"], i);
            const std::string hex = acc[i]["data"];
            std::vector<float> v(hex.size() / 8);
            for (size_t k = 0; k < v.size(); ++k) {
                uint32_t bits = 0;
                for (int b = 3; b >= 0; --b)  // little-endian bytes
                    bits = bits << 8 | static_cast<uint32_t>(std::stoul(hex.substr(8 * k + 2 * b, 2), nullptr, 16));
                std::memcpy(&v[k], &bits, 4);
            }
            const size_t tokens = v.size() / 2;
            shorter += tokens < 128;
            if (std::string(layout) != "padded" || std::string(dtype) != "fp32") continue;
            ASSERT_EQ(tokens, 128u);
            for (size_t pos = 0; pos < tokens; ++pos) {
                const double s0 = raw[i]["start_logits"][pos], e0 = raw[i]["end_logits"][pos];
                ASSERT_NEAR(v[2 * pos], s0, 1e-4 * std::max(1.0, std::abs(s0))) << i << " " << pos;
                ASSERT_NEAR(v[2 * pos + 1], e0, 1e-4 * std::max(1.0, std::abs(e0))) << i << " " << pos;
            }
        }
        EXPECT_EQ(shorter > 0, std::string(layout) == "real") << layout;
        const nlohmann::json j = read_json(json_path);
        const nlohmann::json& got = j["accuracy"];
        EXPECT_EQ(j["mode"], "accuracy");
        EXPECT_EQ(j["dtype"], dtype);
        EXPECT_EQ(j["run"]["stats"]["queries"], j["query_set"]["queries"]);
        if (std::string(layout) == "padded") {
            EXPECT_EQ(got["exact_match"], want["exact_match"]) << got.dump() << " vs " << want.dump();
            EXPECT_EQ(got["f1"], want["f1"]) << got.dump() << " vs " << want.dump();
        } else {
            EXPECT_GE(got["f1"].get<double>(), 0.0);
            EXPECT_LE(got["f1"].get<double>(), 100.0);
        }
    }
    // --data: the reference's features of the predict file (384/128/64) are scored; features of
    // other settings with the same unique_ids are refused before anything runs, not decoded
    // against the predict file's token maps.
    const std::string features = golden("squad_pipeline/features_384_eval.tf_record");
    const std::string acc = "bench --task=squad --seq_len=384 --threads=1 --batch_size=8 --scenario=offline "
                            "--scenario_mode=accuracy --vocab_file=" + golden("vocab.txt") + " --predict_file=" + dev +
                            " --init_checkpoint=" + ckpt + " --data=" + features;
    auto a = run_bertbench(acc);
    ASSERT_EQ(a.exit_code, 0) << a.out;
    a = run_bertbench(acc + " --max_query_length=32");
    EXPECT_EQ(a.exit_code, 1) << a.out;
    EXPECT_NE(a.out.find("error: --data=" + features + ": feature unique_id 10000000"), std::string::npos) << a.out;
    EXPECT_NE(a.out.find(": its tokens differ from the one --predict_file gives (hint: the eval features of "
                         "--predict_file made with --seq_len=384 --doc_stride=128 --max_query_length=32)"),
              std::string::npos) << a.out;
    EXPECT_EQ(a.out.find("queries in"), std::string::npos) << a.out;
}

}  // namespace
}  // namespace bertbench
