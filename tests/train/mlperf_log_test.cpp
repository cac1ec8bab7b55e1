// MLPerf log: the encoding against Python's own json.dumps (what mllog.py uses), and a simulated
// closed BERT run checked against the compliance rules of mlcommons/logging
// compliance_checker/training_5.0.0 (common.yaml, closed_common.yaml, closed_bert.yaml),
// re-implemented below rule by rule.
#include "train/mlperf_log.hpp"

#include <gtest/gtest.h>
#include <stdlib.h>

#include <cstdio>
#include <filesystem>
#include <fstream>
#include <map>
#include <set>
#include <sstream>
#include <vector>

#include "core/error.hpp"
#include "core/py_json.hpp"

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

// ---- The training_5.0.0 rules, as the compliance checker applies them in log order. ----
struct Line {
    std::string key, event_type;
    MlJson value, metadata;
    double ts;
};

std::vector<std::string> check_closed_bert(const std::vector<std::string>& text) {
    std::vector<std::string> bad;
    std::vector<Line> lines;
    for (const auto& t : text) {
        if (t.rfind(":::MLLOG ", 0) != 0) {
            bad.push_back("line without :::MLLOG prefix: " + t);
            continue;
        }
        MlJson j = MlJson::parse(t.substr(9));
        std::vector<std::string> order;
        for (const auto& [k, v] : j.items()) order.push_back(k);
        if (order != std::vector<std::string>{"namespace", "time_ms", "event_type", "key", "value", "metadata"})
            bad.push_back("field order: " + t);
        if (!j["metadata"].contains("file") || !j["metadata"].contains("lineno"))
            bad.push_back("metadata without file/lineno: " + t);
        lines.push_back({j["key"], j["event_type"], j["value"], j["metadata"], j["time_ms"].get<double>()});
    }
    std::map<std::string, int> count;
    bool init_started = false, init_stopped = false, run_started = false, division_seen = false;
    double first_init = 9e99, compile_mins = 0;
    bool accuracy_reached = false;
    auto has = [](const MlJson& md, const char* k) { return md.contains(k); };
    for (const auto& l : lines) {
        ++count[l.key];
        const auto& md = l.metadata;
        const auto fail_if = [&](bool cond, const std::string& what) {
            if (cond) bad.push_back(l.key + ": " + what);
        };
        if (l.key == "submission_division") {
            fail_if(l.value != "closed" && l.value != "open", "value not closed/open");
            compile_mins = l.value == "open" ? 240 : 30;
            division_seen = true;
        } else if (l.key == "submission_benchmark") {
            static const std::set<std::string> ok{"retinanet", "stable_diffusion", "dlrm_dcnv2", "bert",
                                                  "rgat", "llama2_70b_lora", "llama31_405b"};
            fail_if(!l.value.is_string() || !ok.count(l.value.get<std::string>()), "unknown benchmark");
        } else if (l.key == "gradient_accumulation_steps") {
            fail_if(!l.value.is_number() || !(l.value.get<double>() > 0), "value not > 0");
        } else if (l.key == "cache_clear") {
            fail_if(l.value.is_null(), "no value");
        } else if (l.key == "init_start") {
            fail_if(init_stopped || run_started, "after init_stop/run_start");
            init_started = true;
            first_init = std::min(first_init, l.ts);
        } else if (l.key == "init_stop") {
            fail_if(!init_started || run_started, "order");
            fail_if(!(l.ts - first_init < compile_mins * 60 * 1e3), "init took longer than allowed");
            init_stopped = true;
        } else if (l.key == "run_start") {
            fail_if(!init_stopped, "before init_stop");
            run_started = true;
        } else if (l.key == "run_stop") {
            fail_if(!run_started, "before run_start");
            fail_if(!has(md, "status"), "no status");
        } else if (l.key == "block_start") {
            fail_if(!run_started, "before run_start");
            fail_if(!has(md, "epoch_count") && !has(md, "samples_count"), "no epoch_count/samples_count");
            if (has(md, "epoch_count")) {
                fail_if(!has(md, "first_epoch_num"), "epoch_count without first_epoch_num");
                fail_if(!(md["epoch_count"].get<double>() > 0), "epoch_count not > 0");
            }
            if (has(md, "samples_count")) fail_if(!(md["samples_count"].get<double>() >= 0), "samples_count < 0");
        } else if (l.key == "block_stop") {
            fail_if(!has(md, "first_epoch_num") && !has(md, "samples_count"), "no first_epoch_num/samples_count");
        } else if (l.key == "eval_start" || l.key == "eval_stop") {
            fail_if(!has(md, "epoch_num") && !has(md, "samples_count"), "no epoch_num/samples_count");
        } else if (l.key == "eval_accuracy") {
            fail_if(!has(md, "epoch_num"), "no epoch_num (closed_bert.yaml)");
            const double v = l.value.get<double>();
            accuracy_reached |= v >= 0.720 && v < 1.0;
        } else if (l.key == "train_samples" || l.key == "eval_samples") {
            fail_if(l.value == "", "empty value");
        }
        // event types follow the key's kind
        static const std::set<std::string> starts{"init_start", "run_start", "block_start", "eval_start"};
        static const std::set<std::string> ends{"init_stop", "run_stop", "block_stop", "eval_stop"};
        const std::string want = starts.count(l.key) ? "INTERVAL_START" : ends.count(l.key) ? "INTERVAL_END" : "POINT_IN_TIME";
        fail_if(l.event_type != want, "event_type " + l.event_type + ", expected " + want);
    }
    for (const char* k : {"submission_division", "init_stop", "run_start", "run_stop", "train_samples",
                          "eval_samples", "submission_benchmark", "gradient_accumulation_steps",
                          "global_batch_size", "opt_base_learning_rate", "opt_lamb_epsilon",
                          "opt_learning_rate_training_steps", "opt_learning_rate_warmup_steps",
                          "num_warmup_steps", "start_warmup_step", "opt_lamb_beta_1", "opt_lamb_beta_2",
                          "opt_lamb_weight_decay_rate"})
        if (count[k] != 1) bad.push_back(std::string(k) + ": expected EXACTLY_ONE, got " + std::to_string(count[k]));
    for (const char* k : {"cache_clear", "init_start", "eval_accuracy"})
        if (count[k] < 1) bad.push_back(std::string(k) + ": expected AT_LEAST_ONE");
    if (count["block_start"] + count["epoch_start"] < 1) bad.push_back("no block_start/epoch_start");
    if (count["block_stop"] + count["epoch_stop"] < 1) bad.push_back("no block_stop/epoch_stop");
    if (count["eval_start"] + count["block_start"] < 1) bad.push_back("no eval_start/block_start");
    if (!accuracy_reached) bad.push_back("eval_accuracy: no value in [0.720, 1.0)");
    if (!division_seen) bad.push_back("no submission_division");
    return bad;
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

TEST(MlperfLog, SimulatedClosedBertRunPassesTheRules) {
    const auto lines = capture_lines([](MlperfLogger& log) { simulated_run(log, {0.35, 0.61, 0.705, 0.7203}); });
    const auto bad = check_closed_bert(lines);
    std::string all;
    for (const auto& b : bad) all += b + "\n";
    EXPECT_TRUE(bad.empty()) << all;
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

// The checker above can fail: a run that never reaches the target, and one missing a key.
TEST(MlperfLog, RuleCheckerRejectsBadRuns) {
    auto lines = capture_lines([](MlperfLogger& log) { simulated_run(log, {0.35, 0.61}); });
    auto bad = check_closed_bert(lines);
    ASSERT_EQ(bad.size(), 1u);
    EXPECT_NE(bad[0].find("0.720"), std::string::npos);
    lines = capture_lines([](MlperfLogger& log) { simulated_run(log, {0.75}); });
    lines.erase(std::remove_if(lines.begin(), lines.end(),
                               [](auto& l) { return l.find("\"opt_lamb_beta_2\"") != std::string::npos; }),
                lines.end());
    bad = check_closed_bert(lines);
    ASSERT_EQ(bad.size(), 1u);
    EXPECT_NE(bad[0].find("opt_lamb_beta_2"), std::string::npos);
    lines = capture_lines([](MlperfLogger& log) {
        log.run_start();  // before init_stop
    });
    bad = check_closed_bert(lines);
    EXPECT_TRUE(std::any_of(bad.begin(), bad.end(), [](auto& b) { return b == "run_start: before init_stop"; }));
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
