// MLPerf log: the encoding against Python's own json.dumps (what mllog.py uses), and a simulated
// closed BERT run checked against the compliance rules of mlcommons/logging
// compliance_checker/training_5.0.0 (common.yaml, closed_common.yaml, closed_bert.yaml) by
// scripts/mlperf_log_check.py, which re-implements them; the checker rejecting bad runs.
#include "train/mlperf_log.hpp"

#include <gtest/gtest.h>
#include <stdlib.h>

#include <algorithm>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <map>
#include <sstream>
#include <vector>

#include "../cli/run_util.hpp"
#include "core/error.hpp"
#include "core/py_json.hpp"
#include "test_util.hpp"

namespace bertbench::train {
namespace {

std::vector<std::string> capture_lines(const std::function<void(MlperfLogger&)>& body) {
    std::vector<std::string> lines;
    int64_t t = 1700000000000;
    MlperfLogger log([&](std::string_view l) { lines.emplace_back(l); }, [&] { return t += 1000; });
    body(log);
    return lines;
}

TEST(MlperfLog, FloatReprMatchesPython) {
    EXPECT_EQ(py_float_repr(4e-4), "0.0004");
    EXPECT_EQ(py_float_repr(1e-6), "1e-06");
    EXPECT_EQ(py_float_repr(1e-5), "1e-05");
    EXPECT_EQ(py_float_repr(1e-4), "0.0001");
    EXPECT_EQ(py_float_repr(1.0), "1.0");
    EXPECT_EQ(py_float_repr(-0.0), "-0.0");
    EXPECT_EQ(py_float_repr(0.72), "0.72");
    EXPECT_EQ(py_float_repr(1e16), "1e+16");
    EXPECT_EQ(py_float_repr(1234567890123456.0), "1234567890123456.0");
    EXPECT_EQ(py_float_repr(1.5e300), "1.5e+300");
    EXPECT_EQ(py_float_repr(0.1 + 0.2), "0.30000000000000004");
    EXPECT_EQ(py_float_repr(0.999), "0.999");
}

// Our encoder vs Python's json.dumps on the same values (Python parses the values from JSON that
// nlohmann writes with round-trip precision, keeping key order).
TEST(MlperfLog, EncodingMatchesPythonJsonDumps) {
    MlJson values = MlJson::array();
    for (double x : {4e-4, 1e-6, 0.9, 0.999, 0.01, 1.0, 100.0, 1e16, 1e15, 123.456, 5e-324,
                     1.7976931348623157e308, -2.5e-7, 0.72, 0.7200000000000001, 3.0e-5})
        values.push_back(x);
    for (int64_t i : {int64_t{0}, int64_t{-1}, int64_t{512}, int64_t{9007199254740993}}) values.push_back(i);
    values.push_back(true);
    values.push_back(nullptr);
    values.push_back("plain");
    values.push_back("quote\" backslash\\ tab\t nl\n cr\r bell\x07 del\x7f");
    values.push_back("caf\xc3\xa9 \xe4\xb8\xad \xf0\x9f\x98\x80");  // é, 中, 😀 (surrogates)
    values.push_back(MlJson{{"file", "x.cpp"}, {"lineno", 3}, {"epoch_num", 150000}, {"z", {1, 2.5}}});
    const std::string ours = python_json_dumps(values);

    std::string tmpl = (std::filesystem::temp_directory_path() / "bb_mllog_XXXXXX").string();
    ASSERT_NE(mkdtemp(tmpl.data()), nullptr);
    const std::string in = tmpl + "/in.json", out = tmpl + "/out.txt";
    std::ofstream(in) << values.dump();
    const std::string cmd = "/usr/bin/python3 -c 'import json,sys,collections; "
                            "v=json.load(open(sys.argv[1]),object_pairs_hook=collections.OrderedDict); "
                            "open(sys.argv[2],\"w\").write(json.dumps(v))' " + in + " " + out;
    ASSERT_EQ(std::system(cmd.c_str()), 0) << cmd;
    std::stringstream want;
    want << std::ifstream(out).rdbuf();
    std::filesystem::remove_all(tmpl);
    EXPECT_EQ(ours, want.str());
}

TEST(MlperfLog, LineLayoutIsMllogs) {
    const auto lines = capture_lines([](MlperfLogger& log) { log.eval_accuracy(0.72, 150000); });
    ASSERT_EQ(lines.size(), 1u);
    const int line = __LINE__ - 2;
    EXPECT_EQ(lines[0], ":::MLLOG {\"namespace\": \"\", \"time_ms\": 1700000001000, \"event_type\": "
                        "\"POINT_IN_TIME\", \"key\": \"eval_accuracy\", \"value\": 0.72, \"metadata\": "
                        "{\"file\": \"tests/train/mlperf_log_test.cpp\", \"lineno\": " +
                            std::to_string(line) + ", \"epoch_num\": 150000, \"samples_count\": 150000}}");
}

// A closed BERT run as the trainer logs it: eval every 150,000 samples until 0.720.
void simulated_run(MlperfLogger& log, std::vector<double> accuracies) {
    log.cache_clear();
    log.init_start();
    log.submission_info("bertbench", "1xCPU-2core");
    BertRunParams p;
    p.global_batch_size = 256;
    p.gradient_accumulation_steps = 2;
    p.opt_base_learning_rate = 4e-4;
    p.opt_lamb_epsilon = 1e-6;
    p.opt_learning_rate_training_steps = 13700;
    p.opt_learning_rate_warmup_steps = 287;
    p.num_warmup_steps = 287;
    p.start_warmup_step = -76;
    p.seed = 12345;
    p.max_sequence_length = 512;
    p.train_samples = 13700 * 256;
    log.run_params(p);
    log.init_stop();
    log.run_start();
    const int64_t interval = 150000;
    int64_t samples = 0;
    bool reached = false;
    for (double acc : accuracies) {
        log.block_start(samples, interval);
        samples += interval;
        log.block_stop(samples - interval);
        log.eval_start(samples);
        log.eval_stop(samples);
        log.eval_accuracy(acc, samples);
        if (acc >= 0.72) {
            reached = true;
            break;
        }
    }
    log.run_stop(reached);
}

// scripts/mlperf_log_check.py's verdict on these lines (one line per violation, then FAIL).
bertbench::testing::RunResult check_lines(const std::vector<std::string>& lines, const std::string& args = "") {
    const bertbench::testing::TmpDir d("bb_mllog");
    std::ofstream f(d.file("mlperf.log"));
    for (const auto& l : lines) f << l << "\n";
    f.close();
    return bertbench::testing::check_mlperf_log(d.file("mlperf.log"), args);
}

TEST(MlperfLog, SimulatedClosedBertRunPassesTheRules) {
    const auto lines = capture_lines([](MlperfLogger& log) { simulated_run(log, {0.35, 0.61, 0.705, 0.7203}); });
    const auto r = check_lines(lines, "--division=closed");
    EXPECT_EQ(r.exit_code, 0) << r.out;
    EXPECT_NE(r.out.find("passes MLPerf Training 5.0.0's rules for bert, closed division"), std::string::npos)
        << r.out;
    // The values read back are the ones logged.
    std::map<std::string, MlJson> by_key;
    for (const auto& l : lines) by_key[MlJson::parse(l.substr(9))["key"]] = MlJson::parse(l.substr(9));
    EXPECT_EQ(by_key["opt_base_learning_rate"]["value"].get<double>(), 4e-4);
    EXPECT_EQ(by_key["start_warmup_step"]["value"].get<int64_t>(), -76);
    EXPECT_EQ(by_key["eval_accuracy"]["metadata"]["epoch_num"].get<int64_t>(), 600000);
    EXPECT_EQ(by_key["eval_accuracy"]["metadata"]["samples_count"].get<int64_t>(), 600000);
    EXPECT_EQ(by_key["run_stop"]["metadata"]["status"], "success");
    EXPECT_NE(lines[0].find("\"key\": \"cache_clear\", \"value\": true"), std::string::npos);
    const auto lamb_eps = std::find_if(lines.begin(), lines.end(),
                                       [](auto& l) { return l.find("opt_lamb_epsilon") != std::string::npos; });
    ASSERT_NE(lamb_eps, lines.end());
    EXPECT_NE(lamb_eps->find("\"value\": 1e-06,"), std::string::npos) << *lamb_eps;
}

// The checker can fail: each bad run below breaks one rule and is reported with that rule alone.
TEST(MlperfLog, RuleCheckerRejectsBadRuns) {
    const auto rejected_for = [](const std::vector<std::string>& lines, const std::string& why) {
        const auto r = check_lines(lines);
        EXPECT_EQ(r.exit_code, 1) << r.out;
        EXPECT_EQ(bertbench::testing::count_of(r.out, "\n"), 2u) << "one violation, then FAIL:\n" << r.out;
        EXPECT_NE(r.out.find(why), std::string::npos) << r.out;
    };
    // a closed run that never reaches 0.720
    rejected_for(capture_lines([](MlperfLogger& log) { simulated_run(log, {0.35, 0.61}); }),
                 "eval_accuracy: no value in [0.720, 1.0)");
    // ... and one without a hyperparameter closed_bert.yaml requires
    auto lines = capture_lines([](MlperfLogger& log) { simulated_run(log, {0.75}); });
    std::erase_if(lines, [](auto& l) { return l.find("\"opt_lamb_beta_2\"") != std::string::npos; });
    rejected_for(lines, "opt_lamb_beta_2: expected exactly one, found 0");
    // run_start before init_stop
    lines = capture_lines([](MlperfLogger& log) { simulated_run(log, {0.75}); });
    const auto at = [&](const char* key) {
        return std::find_if(lines.begin(), lines.end(), [&](auto& l) {
            return l.find(std::string("\"key\": \"") + key + "\"") != std::string::npos;
        });
    };
    std::iter_swap(at("run_start"), at("init_stop"));
    const auto r = check_lines(lines);
    EXPECT_EQ(r.exit_code, 1);
    EXPECT_NE(r.out.find("run_start: before init_stop"), std::string::npos) << r.out;
    // a line that is not mllog's layout
    lines = capture_lines([](MlperfLogger& log) { simulated_run(log, {0.75}); });
    const size_t md = lines[3].find(", \"lineno\"");
    ASSERT_NE(md, std::string::npos);
    lines[3].erase(md, lines[3].find_first_of(",}", md + 1) - md);
    rejected_for(lines, "line 4: ");
    // The open division has no accuracy floor and no hyperparameter keys (open_bert.yaml).
    lines = capture_lines([](MlperfLogger& log) { simulated_run(log, {0.35, 0.61}); });
    for (auto& l : lines)
        if (const size_t p = l.find("\"value\": \"closed\""); p != std::string::npos) l.replace(p + 10, 6, "open");
    std::erase_if(lines, [](auto& l) { return l.find("\"opt_lamb_beta_2\"") != std::string::npos; });
    EXPECT_EQ(check_lines(lines).exit_code, 0) << check_lines(lines).out;
    EXPECT_EQ(check_lines(lines, "--division=closed").exit_code, 1);
    // A key required exactly once, twice: with one value the checker only warns (an error under
    // its --werror), with two values it fails the log.
    lines = capture_lines([](MlperfLogger& log) { simulated_run(log, {0.75}); });
    const auto train_samples = at("train_samples");
    ASSERT_NE(train_samples, lines.end());
    lines.insert(train_samples, *train_samples);
    auto w = check_lines(lines);
    EXPECT_EQ(w.exit_code, 0) << w.out;
    EXPECT_NE(w.out.find("warning: train_samples: expected exactly one, found 2 (all with the value"), std::string::npos)
        << w.out;
    EXPECT_EQ(check_lines(lines, "--werror").exit_code, 1);
    const auto first = at("train_samples");
    const size_t p = first->find("\"value\": ");
    ASSERT_NE(p, std::string::npos);
    first->insert(p + 9, "1");  // the first of the two now says 1<n>
    rejected_for(lines, "train_samples: expected exactly one, found 2");
    // Beyond the checker (what its result summarizer would time wrongly): a second run_start,
    // a time going backwards, a resumed run.
    lines = capture_lines([](MlperfLogger& log) { simulated_run(log, {0.75}); });
    lines.insert(at("run_start") + 1, *at("run_start"));  // at the same time: not out of order
    rejected_for(lines, "run_start: expected exactly one, found 2 (the checker only warns");
    lines = capture_lines([](MlperfLogger& log) { simulated_run(log, {0.75}); });
    const auto stop = at("run_stop");
    const size_t t = stop->find("\"time_ms\": 17");
    ASSERT_NE(t, std::string::npos);
    stop->replace(t + 11, 2, "16");  // 16... ms: before every line above it
    rejected_for(lines, "run_stop: time_ms 16");
    lines = capture_lines([](MlperfLogger& log) { simulated_run(log, {0.75}); });
    std::string resumed = capture_lines([](MlperfLogger& log) { log.resumed(150000, 586); }).front();
    const auto eval_start = at("eval_start");  // the resume's line at the time of the line it precedes
    resumed.replace(resumed.find("\"time_ms\": ") + 11, 13, eval_start->substr(eval_start->find("\"time_ms\": ") + 11, 13));
    lines.insert(eval_start, resumed);
    rejected_for(lines, "bertbench_resume: a new process resumed the run here (at 150000 samples)");
}

// A resumed segment logs the hyperparameters whose values changed, and only those.
TEST(MlperfLog, RunParamsLogsWhatChanged) {
    BertRunParams p;
    p.opt_base_learning_rate = 4e-4;
    p.train_samples = 1000;
    MlJson logged;
    auto lines = capture_lines([&](MlperfLogger& log) { logged = log.run_params(p); });
    EXPECT_EQ(lines.size(), 18u);
    EXPECT_EQ(logged["opt_base_learning_rate"], 4e-4);
    EXPECT_TRUE(capture_lines([&](MlperfLogger& log) { log.run_params(p, logged); }).empty());
    p.opt_base_learning_rate = 2e-4;
    p.number_of_ranks = 2;
    lines = capture_lines([&](MlperfLogger& log) { logged = log.run_params(p, logged); });
    ASSERT_EQ(lines.size(), 2u);
    EXPECT_NE(lines[0].find("\"key\": \"number_of_ranks\", \"value\": 2,"), std::string::npos) << lines[0];
    EXPECT_NE(lines[1].find("\"key\": \"opt_base_learning_rate\", \"value\": 0.0002,"), std::string::npos) << lines[1];
    EXPECT_EQ(logged["opt_base_learning_rate"], 2e-4);
}

TEST(MlperfLog, FileSinkAppendsLinesAndDisabledLoggerIsSilent) {
    std::string tmpl = (std::filesystem::temp_directory_path() / "bb_mllog_XXXXXX").string();
    ASSERT_NE(mkdtemp(tmpl.data()), nullptr);
    const std::string path = tmpl + "/mlperf.log";
    {
        auto log = MlperfLogger::open(path, false);
        log->init_start();
        log->set_enabled(false);
        log->init_stop();
        log->set_enabled(true);
        log->run_stop(false);
    }
    { MlperfLogger::open(path, false)->seed(7); }
    std::ifstream f(path);
    std::vector<std::string> lines;
    for (std::string l; std::getline(f, l);) lines.push_back(l);
    ASSERT_EQ(lines.size(), 3u);
    EXPECT_NE(lines[0].find("\"key\": \"init_start\""), std::string::npos);
    EXPECT_NE(lines[1].find("\"status\": \"aborted\""), std::string::npos);
    EXPECT_NE(lines[2].find("\"key\": \"seed\", \"value\": 7,"), std::string::npos);
    std::filesystem::remove_all(tmpl);
    EXPECT_THROW(MlperfLogger::open(tmpl + "/no/such/dir/x.log", false), Error);
}

}  // namespace
}  // namespace bertbench::train
