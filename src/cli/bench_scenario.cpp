// `bench --scenario` (see bench_scenario.hpp): flags, checks before measuring, the runs on
// bertbench's SUT, accuracy mode with the official metric, the reports (JSON, raw log, SVG), the
// schedule for an external SUT and the report of its raw log.
#include "cli/bench_scenario.hpp"

#include <fmt/ranges.h>
#include <omp.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <iostream>
#include <map>
#include <numeric>
#include <unordered_map>

#include "bench/report.hpp"
#include "bench/scenario.hpp"
#include "bench/scenario_sut.hpp"
#include "cli/precision_flags.hpp"
#include "core/error.hpp"
#include "core/fs.hpp"
#include "core/log.hpp"
#include "core/sysinfo.hpp"
#include "data/tokenizer.hpp"
#include "data/vocab.hpp"
#include "model/checkpoint.hpp"
#include "train/squad_metric.hpp"

namespace bertbench::cli {

void ScenarioOptions::add(Flags& f) {
    flags = &f;
    const auto own = [&](const char* name, auto* value, const char* help) {
        f.add(name, value, help);
        own_flags.push_back(name);
    };
    own("scenario", &scenario,
        "MLPerf Inference scenario over a SQuAD query set (--data: run_squad.py eval features, "
        "each query at its real length): singlestream | offline | server (docs/benchmark.md "
        "\"Scenarios\"); --batch_size is the most queries one batch takes");
    own("scenario_mode", &mode,
        "performance | accuracy (LoadGen's AccuracyOnly: every query once, the predictions "
        "scored with the official SQuAD metric; needs --predict_file, --vocab_file, --init_checkpoint)");
    own("server_target_qps", &target_qps, "server: the Poisson arrival rate, queries/s");
    own("latency_bound_ms", &latency_bound_ms,
        "server: the bound on the 99th-percentile latency (a valid run also meets early stopping; MLPerf BERT: 130)");
    own("server_find_peak", &find_peak,
        "server: search the highest valid rate (double/halve from --server_target_qps, or from "
        "half the warm-up's capacity, then bisect to --peak_precision)");
    own("peak_precision", &peak_precision, "server_find_peak: stop when (invalid - valid) <= this x valid");
    own("peak_max_runs", &peak_max_runs, "server_find_peak: at most this many runs");
    own("min_duration_s", &min_duration_s,
        "a run shorter than this is INVALID (60 for a 2-core CPU; MLPerf submissions: 600)");
    own("min_query_count", &min_query_count,
        "a run of fewer queries is INVALID (100 here; MLPerf's per-scenario counts apply to submissions)");
    own("expected_latency_ms", &expected_latency_ms,
        "singlestream: sizes the query count to --min_duration_s (0: one median query's warm-up time)");
    own("expected_qps", &expected_qps,
        "offline: sizes the query count to --min_duration_s (0: the warm-up's full-batch capacity)");
    own("scenario_queries", &scenario_queries,
        "LoadGen's performance sample count: the performance set is the first N features of --data "
        "(0: all), in the order --qsl_rng_seed shuffles them");
    own("scenario_seed", &seed, "LoadGen's three seeds below, where not given one by one");
    own("qsl_rng_seed", &qsl_rng_seed, "LoadGen's (mlperf.conf): the order of the performance set");
    own("sample_index_rng_seed", &sample_index_rng_seed, "LoadGen's (mlperf.conf): the draws of each issue's query");
    own("schedule_rng_seed", &schedule_rng_seed, "LoadGen's (mlperf.conf): the Server arrivals");
    own("scenario_log", &log_path, "write the raw per-query log (bertbench-scenario-log/1) to this file");
    own("accuracy_log", &accuracy_log,
        "accuracy mode: also write the logits as LoadGen's mlperf_log_accuracy.json (seq_id, qsl_idx = "
        "the feature's index, data = its (tokens, 2) float32 start/end logits in hex), which MLPerf's "
        "language/bert/accuracy-squad.py scores");
    own("mlperf_summary", &mlperf_summary,
        "performance mode: also write the run (find_peak: the peak rate's) as LoadGen's "
        "mlperf_log_summary.txt (its layout and figures; docs/benchmark.md \"Scenarios\")");
    own("schedule_out", &schedule_out,
        "write the query schedule (bertbench-scenario-schedule/1) for an external SUT and exit "
        "without measuring");
    own("summarize_log", &summarize_log,
        "report a raw log written by another SUT (bertbench-scenario-log/1) with the same statistics");
    own("predict_file", &predict_file, "accuracy: the SQuAD JSON the features were made from (dev-v1.1.json)");
    own("vocab_file", &vocab_file, "accuracy: the WordPiece vocabulary of the features");
    own("init_checkpoint", &init_checkpoint,
        "a fine-tuned SQuAD checkpoint (any format `squad` reads); performance mode without it: random weights");
    own("do_lower_case", &do_lower_case, "accuracy: as run_squad.py");
    own("doc_stride", &doc_stride, "accuracy: as run_squad.py");
    own("max_query_length", &max_query_length, "accuracy: as run_squad.py");
}

void ScenarioOptions::refuse_unused() const {
    if (active()) return;
    for (const std::string& name : own_flags)
        if (flags->is_set(name))
            fail("--{}: used by a scenario run only (--scenario=singlestream|offline|server, or --summarize_log); "
                 "a sweep (--mode) times --model or --bert_config_file with random weights and does not read it",
                 name);
}

namespace {

using bench::Scenario;

int one_int(const std::string& list, const std::string& flag) {
    const std::vector<std::string> items = split_list(list, flag);
    if (items.size() != 1) fail("--{}: --scenario takes one value (one report per run), got \"{}\"", flag, list);
    char* end = nullptr;
    const long v = std::strtol(items[0].c_str(), &end, 10);
    if (*end != '\0' || v <= 0 || v > 1'000'000) fail("--{}: expected a positive integer, got \"{}\"", flag, items[0]);
    return static_cast<int>(v);
}

// Accuracy with --data: its features must be the predict file's in content, not only in unique_id
// (features made with another --max_query_length or --doc_stride can share the ids, and their
// logits would be decoded against the predict file's token maps). `settings` names the flags.
void check_same_features(const std::vector<bench::Query>& data, const std::vector<bench::Query>& expected,
                         const std::string& data_files, const std::string& settings) {
    std::map<int64_t, const bench::Query*> by_id;
    for (const bench::Query& q : expected) by_id[q.unique_id] = &q;
    const auto hint = [&] { return fmt::format("(hint: the eval features of --predict_file made with {})", settings); };
    if (data.size() != expected.size())
        fail("--data={}: {} features; --predict_file gives {} with {} {}", data_files, data.size(), expected.size(),
             settings, hint());
    for (const bench::Query& q : data) {
        const auto it = by_id.find(q.unique_id);
        if (it == by_id.end())
            fail("--data={}: feature unique_id {} is not one of --predict_file's {}", data_files, q.unique_id, hint());
        if (q.input_ids != it->second->input_ids || q.segment_ids != it->second->segment_ids)
            fail("--data={}: feature unique_id {}: its tokens differ from the one --predict_file gives {}", data_files,
                 q.unique_id, hint());
    }
}

// LoadGen's mlperf_log_accuracy.json of an accuracy run: one entry per eval feature in QSL order
// (qsl_idx = its index), data = the float32 bytes of its (tokens, 2) start/end logits as hex, the
// real tokens only unless `padded` (accuracy-squad.py pads the rest with -10000).
std::string accuracy_log_json(const std::vector<data::SquadFeature>& features,
                              const std::vector<train::SquadRawResult>& results, bool padded) {
    std::unordered_map<int64_t, const train::SquadRawResult*> by_id;
    for (const auto& r : results) by_id[r.unique_id] = &r;
    std::string out = "[\n";
    for (size_t i = 0; i < features.size(); ++i) {
        const auto it = by_id.find(features[i].unique_id);
        if (it == by_id.end()) fail("--accuracy_log: no logits for feature unique_id {}", features[i].unique_id);
        const train::SquadRawResult& r = *it->second;
        size_t n = r.start_logits.size();
        if (!padded) n = static_cast<size_t>(std::count(features[i].input_mask.begin(), features[i].input_mask.end(), 1));
        std::string hex;
        hex.reserve(16 * n);
        for (size_t t = 0; t < n; ++t)
            for (const double v : {r.start_logits[t], r.end_logits[t]}) {
                const float f = static_cast<float>(v);
                unsigned char b[4];
                std::memcpy(b, &f, 4);  // little-endian, as numpy's frombuffer reads it here
                for (const unsigned char c : b) hex += fmt::format("{:02X}", c);
            }
        out += fmt::format("{{ \"seq_id\" : {}, \"qsl_idx\" : {}, \"data\" : \"{}\" }}{}\n", i, i, hex,
                           i + 1 < features.size() ? "," : "");
    }
    return out + "]\n";
}

// One of LoadGen's seeds: its own flag, else --scenario_seed.
uint64_t seed_of(const ScenarioOptions& o, const char* flag, uint64_t value) {
    return o.flags != nullptr && o.flags->is_set(flag) ? value : o.seed;
}

bench::ScenarioSettings settings_of(const ScenarioOptions& o, Scenario sc, int batch_size) {
    bench::ScenarioSettings s;
    s.scenario = sc;
    if (sc == Scenario::server && o.target_qps > 0) s.target_qps = o.target_qps;
    s.latency_bound_ms = o.latency_bound_ms;
    s.batch_size = sc == Scenario::singlestream ? 1 : batch_size;
    s.qsl_rng_seed = seed_of(o, "qsl_rng_seed", o.qsl_rng_seed);
    s.sample_index_rng_seed = seed_of(o, "sample_index_rng_seed", o.sample_index_rng_seed);
    s.schedule_rng_seed = seed_of(o, "schedule_rng_seed", o.schedule_rng_seed);
    s.min_duration_s = o.min_duration_s;
    s.min_query_count = o.min_query_count;
    return s;
}

void check_options(const ScenarioOptions& o) {
    if (o.mode != "performance" && o.mode != "accuracy")
        fail("--scenario_mode: expected performance or accuracy, got \"{}\"", o.mode);
    bench::check_latency_bound(o.latency_bound_ms, "--latency_bound_ms");
    if (!(o.min_duration_s >= 0 && o.min_duration_s <= 1e7))
        fail("--min_duration_s: expected 0 .. 1e7 seconds, got {}", o.min_duration_s);
    if (o.min_query_count < 1 || o.min_query_count > bench::kMaxIssues)
        fail("--min_query_count: expected 1 .. {}, got {}", bench::kMaxIssues, o.min_query_count);
    if (o.target_qps < 0) fail("--server_target_qps: expected > 0, got {}", o.target_qps);
    if (o.target_qps > 0) bench::check_server_rate(o.target_qps, o.min_query_count);
    if (o.scenario_queries < 0) fail("--scenario_queries: expected >= 0, got {}", o.scenario_queries);
    if (!(o.peak_precision > 0 && o.peak_precision < 1))
        fail("--peak_precision: expected 0 < p < 1, got {}", o.peak_precision);
    if (o.peak_max_runs < 1) fail("--peak_max_runs: expected >= 1, got {}", o.peak_max_runs);
    if (o.expected_latency_ms < 0) fail("--expected_latency_ms: expected >= 0, got {}", o.expected_latency_ms);
    if (o.expected_qps < 0) fail("--expected_qps: expected >= 0, got {}", o.expected_qps);
    if (o.expected_latency_ms > 0 && o.expected_latency_ms < 1e-6)  // LoadGen's integer ns: it would be 0, "unknown"
        fail("--expected_latency_ms={:g}: expected at least 1e-06 (1 ns, LoadGen's unit) or 0 (the warm-up's)",
             o.expected_latency_ms);
    if (!o.mlperf_summary.empty() && o.mode == "accuracy")
        fail("--mlperf_summary: a performance run's summary (LoadGen writes none in AccuracyOnly); not with "
             "--scenario_mode=accuracy");
}

// LoadGen's target_qps (test_settings_internal.cc), what a performance run is sized by: server
// the target; singlestream 1e9 / the expected latency in integer ns (--expected_latency_ms, else
// `latency_ms`); offline the expected throughput (--expected_qps, else `qps`). 0: unknown.
double loadgen_target_qps(Scenario sc, const ScenarioOptions& o, double latency_ms, double qps) {
    if (sc == Scenario::server) return o.target_qps;
    if (sc == Scenario::offline) return o.expected_qps > 0 ? o.expected_qps : qps;
    const int64_t ns = std::llround((o.expected_latency_ms > 0 ? o.expected_latency_ms : latency_ms) * 1e6);
    return ns > 0 ? 1e9 / static_cast<double>(ns) : 0;
}

void write_summary(const std::string& path, const bench::RunLog& l, const bench::ScenarioStats& st) {
    if (path.empty()) return;
    write_file_atomic(path, bench::mlperf_summary_txt(l, st));
    log::info("wrote {} (LoadGen's mlperf_log_summary.txt)", path);
}

// The report shared by bertbench's own runs and --summarize_log: settings and statistics.
nlohmann::json run_json(const bench::RunLog& log, const bench::ScenarioStats& st) {
    const bench::ScenarioSettings& s = log.settings;
    return {{"sut", log.sut},
            {"scenario", bench::scenario_name(s.scenario)},
            {"target_qps", s.target_qps ? nlohmann::json(*s.target_qps) : nlohmann::json(nullptr)},
            {"latency_bound_ms", s.latency_bound_ms},
            {"batch_size", s.batch_size},
            {"threads", log.threads},
            {"min_duration_s", s.min_duration_s},
            {"min_query_count", s.min_query_count},
            {"stats", stats_json(st)}};
}

nlohmann::json report_shell(const std::string& source, const ScenarioContext& c) {
    return {{"format", "bertbench-scenario-report/1"},
            {"source", source},
            {"definitions", bench::scenario_definitions()},
            {"definitions_doc", "docs/benchmark.md \"Scenarios\""},
            {"system_info", sysinfo::system_info()},
            {"build_info", bench::build_info_with_gemm()},
            {"flags", c.flags}};
}

void write_json(const std::string& path, const nlohmann::json& j) {
    if (path.empty()) return;
    write_file_atomic(path, j.dump(2) + "\n");
    log::info("wrote {}", path);
}

// p50/p90/p99 latency against the offered load of each server run, with the bound drawn.
void write_svg(const std::string& path, const std::vector<std::pair<bench::RunLog, bench::ScenarioStats>>& runs,
               const std::string& title) {
    if (path.empty()) return;
    bench::LineChart chart;
    chart.title = title;
    chart.x_label = "offered load (target queries/s)";
    chart.y_label = "latency (ms)";
    chart.series = {{"p50", {}}, {"p90", {}}, {"p99", {}}};
    for (const auto& [l, st] : runs) {
        const double x = l.settings.target_qps.value_or(st.samples_per_s);
        chart.series[0].points.emplace_back(x, st.latency_ms_p50);
        chart.series[1].points.emplace_back(x, st.latency_ms_p90);
        chart.series[2].points.emplace_back(x, st.latency_ms_p99);
    }
    if (!runs.empty())
        chart.hline = {fmt::format("bound {:g} ms", runs.front().first.settings.latency_bound_ms),
                       runs.front().first.settings.latency_bound_ms};
    write_file_atomic(path, bench::line_chart_svg(chart));
    log::info("wrote {}", path);
}

int summarize_only(const ScenarioOptions& o, const ScenarioContext& c) {
    const std::string text = read_file(o.summarize_log);
    nlohmann::json j;
    try {
        j = nlohmann::json::parse(text);
    } catch (const nlohmann::json::exception&) {
        fail("--summarize_log={}: not valid JSON (expected a bertbench-scenario-log/1 raw log)", o.summarize_log);
    }
    // What the log lacks (a log of an older bertbench or peer) comes from the flags; rules given
    // as flags judge the log by them instead of its own
    const std::string where = "--summarize_log=" + o.summarize_log;
    std::vector<std::string> missing;
    bench::RunLog l = bench::parse_log_json(j, where, settings_of(o, Scenario::singlestream, 1), &missing);
    const auto absent = [&](const char* key) { return std::count(missing.begin(), missing.end(), key) > 0; };
    if (!missing.empty())
        log::warn("{}: the log names no {}: taken from the flags{}{}", where, fmt::join(missing, ", "),
                  absent("performance_sample_count") ? " (performance_sample_count: the highest query index + 1)" : "",
                  absent("accuracy_sample_count") ? " (accuracy_sample_count: the performance set's)" : "");
    const auto given = [&](const char* flag) { return o.flags != nullptr && o.flags->is_set(flag); };
    if (!c.plot_path.empty() && l.settings.scenario != Scenario::server)
        fail("--plot: a server run's latency percentiles against load; {} is a log of --scenario={}, which draws none", where,
             bench::scenario_name(l.settings.scenario));
    if (given("min_duration_s")) l.settings.min_duration_s = o.min_duration_s;
    if (given("min_query_count")) l.settings.min_query_count = o.min_query_count;
    if (given("latency_bound_ms")) {
        if (l.settings.scenario != Scenario::server)
            fail("--latency_bound_ms: judges a server run; {} is a log of --scenario={}", where,
                 bench::scenario_name(l.settings.scenario));
        l.settings.latency_bound_ms = o.latency_bound_ms;
    }
    // the flags that stand in for what a log lacks: said when the log has it
    for (const auto& [flag, key] : {std::pair{"qsl_rng_seed", "qsl_rng_seed"},
                                    {"sample_index_rng_seed", "sample_index_rng_seed"},
                                    {"schedule_rng_seed", "schedule_rng_seed"},
                                    {"scenario_seed", "qsl_rng_seed"},
                                    {"server_target_qps", "loadgen_target_qps"},
                                    {"expected_qps", "loadgen_target_qps"},
                                    {"expected_latency_ms", "loadgen_target_qps"}})
        if (given(flag) && !absent(key))
            log::warn("--{}: not used: {} names its own {} (the flag stands in only where a log lacks it)", flag,
                      where, key);
    if (absent("loadgen_target_qps"))
        l.settings.loadgen_target_qps = l.settings.target_qps.value_or(loadgen_target_qps(l.settings.scenario, o, 0, 0));
    if (l.performance_sample_count == 0)
        for (const bench::LogEntry& e : l.entries)
            l.performance_sample_count = std::max<int64_t>(l.performance_sample_count, e.q + 1);
    const bench::ScenarioStats st = bench::summarize(l);
    std::cout << bench::stats_line(l, st) << "\n";
    nlohmann::json rep = report_shell("summarize_log " + o.summarize_log, c);
    rep["scenario"] = bench::scenario_name(l.settings.scenario);
    rep["mode"] = "performance";
    rep["run"] = run_json(l, st);
    write_json(c.json_path, rep);
    if (l.settings.scenario == Scenario::server) write_svg(c.plot_path, {{l, st}}, l.sut + " server");
    write_summary(o.mlperf_summary, l, st);
    return 0;
}

}  // namespace

int run_bench_scenario(const ScenarioOptions& o, const ScenarioContext& c) {
    check_options(o);
    if (!o.summarize_log.empty()) {
        if (!o.scenario.empty()) fail("--summarize_log: reports a raw log; give it without --scenario");
        // what measures or feeds a run: nothing here runs (an error, not a silent no-op)
        for (const char* flag : {"model", "bert_config_file", "dtype", "threads", "batch_size", "seq_len", "data",
                                 "squad_layout", "task", "skip_corrupt_records", "scenario_mode", "server_find_peak",
                                 "peak_precision", "peak_max_runs", "scenario_queries", "scenario_log", "accuracy_log",
                                 "schedule_out", "predict_file", "vocab_file", "init_checkpoint", "do_lower_case",
                                 "doc_stride", "max_query_length"})
            if (o.flags->is_set(flag))
                fail("--{}: not used by --summarize_log, which reports the SUT's raw log as it is (its settings, "
                     "threads and batches are the log's; the rules --min_duration_s, --min_query_count and "
                     "--latency_bound_ms may judge it)",
                     flag);
        return summarize_only(o, c);
    }
    const Scenario sc = bench::parse_scenario(o.scenario, "--scenario");
    const bool accuracy = o.mode == "accuracy";
    if (c.cuda) fail("--scenario with --device=cuda: not yet (the scenarios run the CPU engine)");
    if (c.task_given && c.task != "squad") fail("--scenario: runs the SQuAD span model; expected --task=squad, got --task={}", c.task);
    if (sc == Scenario::server && !o.find_peak && !(o.target_qps > 0))
        fail("--scenario=server: expected --server_target_qps=<queries/s> (or --server_find_peak)");
    if (o.find_peak && sc != Scenario::server) fail("--server_find_peak: needs --scenario=server");
    if (accuracy && o.find_peak) fail("--server_find_peak: a performance search; not with --scenario_mode=accuracy");
    // A flag of another scenario or mode: an error, not a silent no-op
    const auto only = [&](const char* flag, bool applies, const char* where) {
        if (o.flags->is_set(flag) && !applies)
            fail("--{}: {} only; not used by --scenario={} --scenario_mode={}", flag, where, o.scenario, o.mode);
    };
    only("server_target_qps", sc == Scenario::server, "--scenario=server");
    for (const char* flag : {"peak_precision", "peak_max_runs"}) only(flag, o.find_peak, "--server_find_peak");
    only("expected_latency_ms", sc == Scenario::singlestream, "--scenario=singlestream");
    only("latency_bound_ms", sc == Scenario::server, "--scenario=server");
    only("expected_qps", sc == Scenario::offline, "--scenario=offline");
    only("accuracy_log", accuracy, "--scenario_mode=accuracy");
    // accuracy mode sends every query once (LoadGen's AccuracyOnly): no performance set, no minimums
    for (const char* flag : {"scenario_queries", "min_duration_s", "min_query_count", "expected_qps", "expected_latency_ms"})
        only(flag, !accuracy, "--scenario_mode=performance (accuracy mode sends every query once)");
    for (const char* flag : {"predict_file", "vocab_file", "do_lower_case", "doc_stride", "max_query_length"})
        only(flag, accuracy, "--scenario_mode=accuracy (a performance run times --data's features)");
    only("batch_size", sc != Scenario::singlestream,
         "--scenario=offline or server (singlestream sends one query at a time: batch 1)");
    if (!c.plot_path.empty() && sc != Scenario::server)
        fail("--plot: a server run's latency percentiles against load; --scenario={} draws none", o.scenario);
    const int seq_len = one_int(c.seq_len, "seq_len"), batch_size = one_int(c.batch_size, "batch_size");
    const int threads = one_int(c.threads, "threads");
    if (threads > sysinfo::cpus_available())
        fail("--threads={}: only {} CPUs are available to this process", threads, sysinfo::cpus_available());
    if (split_list(c.dtype, "dtype").size() != 1) fail("--dtype: --scenario takes one value (one report per run), got \"{}\"", c.dtype);
    const ops::Precision dtype = parse_dtype(c.dtype, "dtype");
    if (accuracy && (o.predict_file.empty() || o.vocab_file.empty() || o.init_checkpoint.empty()))
        fail("--scenario_mode=accuracy: expected --predict_file (the SQuAD JSON), --vocab_file and --init_checkpoint "
             "(a fine-tuned span model)");
    if (accuracy) {  // named and checked before the checkpoint is read
        check_input_file(o.predict_file, "--predict_file", "a SQuAD JSON file (dev-v1.1.json)");
        check_input_file(o.vocab_file, "--vocab_file", "a file (vocab.txt, one WordPiece per line)");
    }
    if (accuracy && !o.accuracy_log.empty() &&
        (seq_len != 384 || o.doc_stride != 128 || o.max_query_length != 64 || !o.do_lower_case))
        log::warn("--accuracy_log={}: MLPerf's accuracy-squad.py indexes the features of --seq_len=384 --doc_stride=128 "
                  "--max_query_length=64 lower-cased; this run's ({}/{}/{}{}) are others: that script cannot score "
                  "this log (the metric printed here can)",
                  o.accuracy_log, seq_len, o.doc_stride, o.max_query_length, o.do_lower_case ? "" : ", cased");

    // The SUT: the span model, fine-tuned weights or (performance) random ones.
    omp_set_num_threads(threads);
    train::SquadModel span_model;
    if (!o.init_checkpoint.empty()) {
        // run/model.ckpt-N names our run/model.ckpt-N.safetensors, as on squad and eval
        span_model = train::load_squad_model(model::resolve_checkpoint_name(o.init_checkpoint, "--init_checkpoint"),
                                             "--init_checkpoint", c.bert_config_file,
                                             c.model_given ? c.model : "", seq_len);
    } else {
        span_model.config = c.config;
        span_model.table = std::make_unique<model::ParamTable>(c.config, model::Heads::squad);
        span_model.params.resize(span_model.table->total_floats());
        span_model.table->initialize(span_model.params, 42);
    }
    const model::BertConfig& config = span_model.config;
    if (seq_len > config.max_position_embeddings)
        fail("--seq_len={}: longer than max_position_embeddings ({}) of the model", seq_len, config.max_position_embeddings);
    // The query set (and, for accuracy, the predict file's examples and features).
    std::optional<train::SquadEvalSet> eval;
    if (accuracy) {
        const data::Vocab vocab = data::Vocab::load(o.vocab_file);
        data::FullTokenizer tokenizer(vocab, o.do_lower_case);
        eval = train::squad_eval_set(
            o.predict_file, tokenizer, {seq_len, o.doc_stride, o.max_query_length, false},
            {false, false, "a SQuAD v1.1 file such as dev-v1.1.json: accuracy mode scores v1.1, as MLPerf Inference's BERT does"});
        if (!train::squad_has_answers(eval->doc))
            fail("--predict_file={}: no question has answers: the official metric has nothing to score", o.predict_file);
    }
    if (c.data_files.empty() && !eval)
        fail("--scenario: expected --data=<run_squad.py eval features, eval.tf_record>");
    std::vector<bench::Query> queries =
        c.data_files.empty() ? bench::queries_of(eval->features)
                             : bench::read_squad_queries(c.data_files, seq_len, config.vocab_size, c.skip_corrupt_records);
    if (accuracy && !c.data_files.empty())
        check_same_features(queries, bench::queries_of(eval->features), fmt::format("{}", fmt::join(c.data_files, ",")),
                            fmt::format("--seq_len={} --doc_stride={} --max_query_length={}{}", seq_len, o.doc_stride,
                                        o.max_query_length, o.do_lower_case ? "" : " cased"));
    bench::ScenarioSettings settings = settings_of(o, sc, batch_size);
    settings.every_query_once = accuracy;
    settings.accuracy_sample_count = static_cast<int64_t>(queries.size());
    if (!accuracy && o.scenario_queries > static_cast<int64_t>(queries.size()))
        log::warn("--scenario_queries={}: the query set holds {} features; all of them are the performance set "
                  "(LoadGen caps its performance sample count at the QSL's size alike)",
                  o.scenario_queries, queries.size());
    if (!accuracy) queries = bench::select_queries(queries, o.scenario_queries, settings.qsl_rng_seed);
    const int n = static_cast<int>(queries.size());
    std::vector<int> by_length(static_cast<size_t>(n));
    std::iota(by_length.begin(), by_length.end(), 0);
    std::stable_sort(by_length.begin(), by_length.end(), [&](int a, int b) {
        return queries[static_cast<size_t>(a)].input_ids.size() < queries[static_cast<size_t>(b)].input_ids.size();
    });
    const int median = by_length[static_cast<size_t>(n / 2)];
    const int median_tokens = static_cast<int>(queries[static_cast<size_t>(median)].input_ids.size());
    const std::string sut = fmt::format("bertbench-{}", ops::precision_name(dtype));

    if (!o.schedule_out.empty()) {  // for an external SUT: nothing measured
        if (!o.mlperf_summary.empty())
            fail("--mlperf_summary: --schedule_out measures nothing; give it to --summarize_log with the SUT's raw log");
        if (o.find_peak) fail("--schedule_out: one schedule per rate; give --server_target_qps without --server_find_peak");
        for (const auto& [flag, path] : {std::pair{"json", c.json_path}, {"plot", c.plot_path},
                                         {"scenario_log", o.log_path}, {"accuracy_log", o.accuracy_log}})
            if (!path.empty())
                fail("--{}: --schedule_out measures nothing, so there is no run to write; give it to --summarize_log "
                     "with the SUT's raw log", flag);
        settings.loadgen_target_qps = loadgen_target_qps(sc, o, 0, 0);
        if (!accuracy && settings.loadgen_target_qps == 0)
            log::warn("--schedule_out: no --{} given: the schedule has --min_query_count={} issues and may end before "
                      "--min_duration_s={:g}",
                      sc == Scenario::singlestream ? "expected_latency_ms" : "expected_qps", o.min_query_count,
                      o.min_duration_s);
        const int64_t count = accuracy ? n : bench::performance_issue_count(settings);
        const bench::Schedule s = bench::make_schedule(settings, std::move(queries), count);
        write_file_atomic(o.schedule_out, bench::schedule_json(s) + "\n");
        log::info("wrote {}: {} {} issues of {} queries", o.schedule_out, s.issues.size(), o.scenario, n);
        return 0;
    }

    const bool padded = c.squad_layout == "padded";
    bench::EngineSut engine(span_model, dtype, settings.batch_size, seq_len, padded, queries, accuracy);
    const bench::RunBatch run = [&](const std::vector<int>& qs) { engine.run(qs); };

    // Warm-up, and the checks of what cannot be met, before anything is measured.
    const double one_ms = engine.time_batch({median}, 3);
    const double batch_ms = engine.time_batch(std::vector<int>(static_cast<size_t>(settings.batch_size), median), 3);
    const double capacity = 1e3 * settings.batch_size / batch_ms;
    log::info("warm-up: one median query ({} tokens) {:.3f} ms; a batch of {} of them {:.3f} ms: {:.2f} queries/s",
              median_tokens, one_ms, settings.batch_size, batch_ms, capacity);
    {
        bench::ScenarioSettings check = settings;
        if (o.find_peak) check.target_qps.reset();
        if (auto why = bench::unmeetable_target(check, one_ms, median_tokens, capacity)) fail("{}", *why);
    }
    nlohmann::json rep = report_shell("bertbench", c);
    rep["scenario"] = o.scenario;
    rep["mode"] = o.mode;
    // the model as given: its bert_config.json, its preset, or the config its checkpoint carries
    rep["model"] = !c.bert_config_file.empty() ? c.bert_config_file
                   : c.model_given || o.init_checkpoint.empty()
                       ? c.model
                       : fmt::format("the config of --init_checkpoint (L{} H{} A{})", config.num_hidden_layers,
                                     config.hidden_size, config.num_attention_heads);
    rep["dtype"] = ops::precision_name(dtype);
    rep["seq_len"] = seq_len;
    rep["squad_layout"] = padded ? "padded" : "real";
    rep["weights"] = o.init_checkpoint.empty() ? "random" : o.init_checkpoint;
    rep["query_set"] = {{"files", c.data_files.empty() ? std::vector<std::string>{o.predict_file} : c.data_files},
                        {"queries", n},
                        {"median_tokens", median_tokens}};
    rep["warmup"] = {{"one_query_ms", one_ms}, {"full_batch_ms", batch_ms}, {"capacity_qps", capacity}};
    const bench::SutClock clock = bench::SutClock::steady();
    const auto measure = [&](const bench::ScenarioSettings& s, int64_t count) {
        bench::RunLog l = bench::run_schedule(bench::make_schedule(s, queries, count), run, clock, sut, threads);
        const bench::ScenarioStats st = bench::summarize(l);
        if (!accuracy) std::cout << bench::stats_line(l, st) << std::endl;
        return std::pair{std::move(l), st};
    };
    const auto write_log = [&](const bench::RunLog& l) {
        if (o.log_path.empty()) return;
        write_file_atomic(o.log_path, bench::log_json(l).dump() + "\n");
        log::info("wrote {}", o.log_path);
    };

    if (accuracy) {
        const auto [acc_log, st] = measure(settings, n);
        train::SquadPredictOptions popt;
        popt.do_lower_case = o.do_lower_case;
        const train::SquadPredictions preds = train::squad_write_predictions(
            eval->examples, eval->features, engine.results(), popt,
            c.data_files.empty() ? "the accuracy run" : "the accuracy run over --data");
        const train::SquadEvalOutput metric = train::squad_evaluate(
            eval->doc, nlohmann::json::parse(preds.predictions_json), o.predict_file, "the accuracy run's predictions");
        std::fwrite(metric.stdout_text.data(), 1, metric.stdout_text.size(), stdout);
        rep["run"] = run_json(acc_log, st);
        // AccuracyOnly judges the predictions only: no duration, count or latency rule applies
        rep["run"]["stats"]["result"] = "accuracy run: performance rules not applied";
        rep["run"]["stats"]["invalid_reasons"] = nlohmann::json::array();
        rep["accuracy"] = metric.metrics;
        if (!o.accuracy_log.empty()) {
            write_file_atomic(o.accuracy_log, accuracy_log_json(eval->features, engine.results(), padded));
            log::info("wrote {} (LoadGen's mlperf_log_accuracy.json format)", o.accuracy_log);
        }
        write_log(acc_log);
        write_json(c.json_path, rep);
        return 0;
    }
    if (o.find_peak) {
        std::vector<std::pair<bench::RunLog, bench::ScenarioStats>> runs;
        nlohmann::json tried = nlohmann::json::array();
        const double start = o.target_qps > 0 ? o.target_qps : 0.5 * capacity;
        // capped at capacity: the rates a single server run refuses (the queue would grow without
        // bound) are not run, whatever a short run's p99 would say of them
        const bench::PeakSearch peak = bench::find_peak(start, o.peak_precision, o.peak_max_runs, capacity, [&](double qps) {
            bench::ScenarioSettings s = settings;
            s.target_qps = s.loadgen_target_qps = qps;
            runs.push_back(measure(s, bench::performance_issue_count(s)));
            tried.push_back(run_json(runs.back().first, runs.back().second));
            return runs.back().second.latency_met;  // as LoadGen's FindPeakPerformance: the latency rule
        });
        const std::pair<bench::RunLog, bench::ScenarioStats>* peak_run = nullptr;
        for (const auto& r : runs)
            if (peak.peak_qps && r.first.settings.target_qps == peak.peak_qps) peak_run = &r;
        const bench::ScenarioStats* at_peak = peak_run ? &peak_run->second : nullptr;
        // `run`, as every performance report has one: the peak rate's (none without a peak)
        rep["run"] = peak_run ? run_json(peak_run->first, peak_run->second) : nlohmann::json(nullptr);
        rep["runs"] = tried;
        rep["peak"] = {{"peak_qps", peak.peak_qps ? nlohmann::json(*peak.peak_qps) : nlohmann::json(nullptr)},
                       {"peak_run_result", at_peak ? nlohmann::json(at_peak->valid ? "VALID" : "INVALID") : nlohmann::json(nullptr)},
                       {"at_capacity", peak.at_cap},
                       {"rule", fmt::format("double/halve from {:g} queries/s until a rate within the latency bound and "
                                            "one over it bracket the peak, then bisect until (over - within) <= {:g} x "
                                            "within; at most {} runs; no rate above the warm-up capacity {:g} "
                                            "queries/s (a single run refuses those): the start and each doubling "
                                            "are capped at it, and a run within the bound at it ends the search; "
                                            "the peak run's own result (minimums, early stopping) beside it",
                                            std::min(start, capacity), o.peak_precision, o.peak_max_runs, capacity)}};
        std::string peak_result;
        if (at_peak) {
            for (const std::string& r : at_peak->invalid_reasons) peak_result += (peak_result.empty() ? ": " : "; ") + r;
            peak_result = (at_peak->valid ? "VALID" : "INVALID") + peak_result;
        }
        std::cout << (peak.peak_qps ? fmt::format("{} server peak: {:.3f} queries/s with p99 <= {:g} ms ({} runs{}); "
                                                  "that run: {}\n", sut, *peak.peak_qps, o.latency_bound_ms, runs.size(),
                                                  peak.at_cap ? "; the warm-up capacity, above which no rate was run" : "",
                                                  peak_result)
                                    : fmt::format("{} server: no rate within the latency bound among the {} tried\n", sut,
                                                  runs.size()));
        if (peak_run) {
            write_log(peak_run->first);
            write_summary(o.mlperf_summary, peak_run->first, peak_run->second);
        }
        if (!peak.peak_qps)
            for (const auto& [flag, file] : {std::pair<std::string, std::string>{"mlperf_summary", o.mlperf_summary},
                                             {"scenario_log", o.log_path}})
                if (!file.empty())
                    log::warn("--{}={}: not written: no rate was within the latency bound", flag, file);
        write_svg(c.plot_path, runs, sut + " server, " + sysinfo::cpu_model());
        write_json(c.json_path, rep);
        return peak.peak_qps ? 0 : 1;
    }
    settings.loadgen_target_qps = loadgen_target_qps(sc, o, one_ms, capacity);
    const auto [run_log, st] = measure(settings, bench::performance_issue_count(settings));
    rep["run"] = run_json(run_log, st);
    write_log(run_log);
    write_summary(o.mlperf_summary, run_log, st);
    if (sc == Scenario::server) write_svg(c.plot_path, {{run_log, st}}, sut + " server, " + sysinfo::cpu_model());
    write_json(c.json_path, rep);
    return 0;
}

}  // namespace bertbench::cli
