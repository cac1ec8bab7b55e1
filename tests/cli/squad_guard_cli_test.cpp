// `bertbench squad` and `squad-eval` where the reference has no one answer or an input would cost
// outputs, on the real binary: a NaN logit is refused where run_squad.py's Python sort would rank
// it (run_qa.py's numpy order takes it); bad raw results leave --transformers_qa's output
// directory empty; a predict file the metric cannot score is refused before anything is written;
// a question id holding a NUL is printed whole by the metric's lines; one process per
// --output_dir, whatever the mode; decoding given logits removes a model run's files; an output
// name taken by a directory is refused first.
#include <gtest/gtest.h>

#include <filesystem>
#include <string>

#include "core/fs.hpp"
#include "run_util.hpp"
#include "test_util.hpp"

namespace bertbench::testing {
namespace {

namespace fs = std::filesystem;

struct GuardTmp {
    TmpDir tmp{"bb_squadguard"};
    const std::string path = tmp.path.string();
    std::string file(const std::string& name, const std::string& text) const {
        write_file_atomic(tmp.file(name), text);
        return tmp.file(name);
    }
};

constexpr const char* kOneQuestion =
    R"({"version": "1.1", "data": [{"title": "t", "paragraphs": [{"context": "alpha beta gamma delta epsilon",
    "qas": [{"id": "q1", "question": "which", "answers": [{"text": "gamma", "answer_start": 11}]}QAS]}]}]})";

std::string dataset(const std::string& more_questions = "") {
    std::string s = kOneQuestion;
    s.replace(s.find("QAS"), 3, more_questions);
    return s;
}

// One result line of 16 start and end logits, 5.0 at position 5, `start3` at start position 3.
std::string logits(int64_t unique_id, const std::string& start3 = "0.0") {
    std::string start, end;
    for (int k = 0; k < 16; ++k) {
        start += std::string(k ? ", " : "") + (k == 3 ? start3 : k == 5 ? "5.0" : "0.0");
        end += std::string(k ? ", " : "") + (k == 5 ? "5.0" : "0.0");
    }
    return "{\"unique_id\": " + std::to_string(unique_id) + ", \"start_logits\": [" + start +
           "], \"end_logits\": [" + end + "]}\n";
}

std::string predict(const std::string& out, const std::string& file, const std::string& raw) {
    return "squad --vocab_file=" + golden("vocab.txt") + " --do_predict --predict_file=" + file +
           " --raw_results=" + raw +
           " --threads=1 --max_seq_length=16 --doc_stride=8 --max_query_length=4 --output_dir=" + out;
}

TEST(SquadGuardCli, NanLogitsAreRefusedWherePythonWouldSortThem) {
    const GuardTmp tmp;
    const std::string data = tmp.file("d.json", dataset());
    const std::string nan = tmp.file("nan.jsonl", logits(1000000000, "NaN"));
    for (const char* path : {"", " --transformers_squad"}) {
        const auto r = run_bertbench(predict(tmp.path + "/out", data, nan) + path);
        EXPECT_EQ(r.exit_code, 1) << r.out;
        EXPECT_NE(r.out.find("unique_id 1000000000: start_logits[3] is NaN, expected numbers"), std::string::npos)
            << r.out;
        EXPECT_FALSE(fs::exists(tmp.path + "/out")) << path;
    }
    // run_qa.py's utils_qa sorts with numpy, which orders NaN last: decoded
    const auto qa = run_bertbench(predict(tmp.path + "/qa", data, nan) + " --transformers_qa");
    EXPECT_EQ(qa.exit_code, 0) << qa.out;
    EXPECT_TRUE(fs::exists(tmp.path + "/qa/predictions.json"));
}

TEST(SquadGuardCli, BadRawResultsLeaveTransformersQaNothing) {
    const GuardTmp tmp;
    const std::string data = tmp.file("d.json", dataset());
    const std::string wrong = tmp.file("wrong.jsonl", logits(1000000001));
    const auto r = run_bertbench(predict(tmp.path + "/out", data, wrong) + " --transformers_qa");
    EXPECT_EQ(r.exit_code, 1) << r.out;
    EXPECT_NE(r.out.find("unique_id 1000000001 is not one of the 1 features made from the predict file"),
              std::string::npos)
        << r.out;
    EXPECT_FALSE(fs::exists(tmp.path + "/out"));
}

TEST(SquadGuardCli, AFileTheMetricCannotScoreIsRefusedBeforeWriting) {
    const GuardTmp tmp;
    const std::string data = tmp.file("d.json", dataset(R"(, {"id": "q2", "question": "none"})"));
    const std::string raw = tmp.file("r.jsonl", logits(1000000000) + logits(1000000001));
    const auto r = run_bertbench(predict(tmp.path + "/out", data, raw));
    EXPECT_EQ(r.exit_code, 1) << r.out;
    EXPECT_NE(r.out.find("question \"q2\""), std::string::npos) << r.out;
    EXPECT_FALSE(fs::exists(tmp.path + "/out"));
}

// Decoding --raw_results in a directory holding a model run's raw_results.jsonl and
// predict_speed.json: those are not this prediction's logits and speed, so they go (logged); the
// run's own raw_results.jsonl given as --raw_results stays, with its speed.
TEST(SquadGuardCli, RawResultsRemoveTheModelRunsFiles) {
    const GuardTmp tmp;
    const std::string data = tmp.file("d.json", dataset()), out = tmp.path + "/out";
    const std::string raw = tmp.file("r.jsonl", logits(1000000000));
    fs::create_directories(out);
    write_file_atomic(out + "/raw_results.jsonl", logits(1000000000, "9.0"));
    write_file_atomic(out + "/predict_speed.json", "{}\n");
    const auto own = run_bertbench(predict(out, data, out + "/raw_results.jsonl"));
    EXPECT_EQ(own.exit_code, 0) << own.out;
    EXPECT_EQ(read_file(out + "/raw_results.jsonl"), logits(1000000000, "9.0"));
    EXPECT_TRUE(fs::exists(out + "/predict_speed.json"));
    const auto other = run_bertbench(predict(out, data, raw));
    EXPECT_EQ(other.exit_code, 0) << other.out;
    for (const char* name : {"raw_results.jsonl", "predict_speed.json"}) EXPECT_FALSE(fs::exists(out + "/" + name)) << name;
    EXPECT_NE(other.out.find("removed a previous run's " + out + "/raw_results.jsonl, " + out +
                             "/predict_speed.json (this run decodes --raw_results)"),
              std::string::npos) << other.out;
    EXPECT_TRUE(fs::exists(out + "/predictions.json"));
}

// An output's name taken by a directory: refused before the first file is written (it failed at
// that output, the ones before it written).
TEST(SquadGuardCli, AnOutputNameTakenByADirectoryIsRefusedFirst) {
    const GuardTmp tmp;
    const std::string data = tmp.file("d.json", dataset()), out = tmp.path + "/out";
    const std::string raw = tmp.file("r.jsonl", logits(1000000000));
    for (const char* name : {"nbest_predictions.json", "eval_results.json", "null_odds.json"}) {
        fs::remove_all(out);
        fs::create_directories(out + "/" + name + "/x");
        const auto r = run_bertbench(predict(out, data, raw));
        EXPECT_EQ(r.exit_code, 1) << r.out;
        EXPECT_NE(r.out.find("--output_dir=" + out + ": " + out + "/" + name + " is a directory, expected a file "
                             "name or nothing"), std::string::npos) << r.out;
        size_t entries = 0;
        for ([[maybe_unused]] const auto& e : fs::directory_iterator(out)) ++entries;
        EXPECT_EQ(entries, 1u) << name;  // the directory alone
    }
}

// Prediction writes in --output_dir as a run does: a second process in the same directory (here
// flock(1) holding its lock) is refused before writing, instead of mixing two models' files.
TEST(SquadGuardCli, PredictionIsOneProcessPerOutputDir) {
    const GuardTmp tmp;
    const std::string data = tmp.file("d.json", dataset());
    const std::string raw = tmp.file("r.jsonl", logits(1000000000));
    const std::string out = tmp.path + "/out";
    fs::create_directories(out);
    const auto r = run_shell("flock " + out + " " + bertbench_path() + " " + predict(out, data, raw));
    EXPECT_EQ(r.exit_code, 1) << r.out;
    EXPECT_NE(r.out.find("--output_dir=" + out + ": another bertbench run is using this directory now"),
              std::string::npos) << r.out;
    EXPECT_FALSE(fs::exists(out + "/predictions.json"));
    EXPECT_EQ(run_bertbench(predict(out, data, raw)).exit_code, 0);  // once it is free
    EXPECT_TRUE(fs::exists(out + "/predictions.json"));
}

// The command holds the lock from the start to its end, for every mode: --features_only (which
// trains nothing) too, and the training loop does not take it a second time.
TEST(SquadGuardCli, FeaturesOnlyIsOneProcessPerOutputDir) {
    const GuardTmp tmp;
    const std::string data = tmp.file("d.json", dataset());
    const std::string out = tmp.path + "/out";
    fs::create_directories(out);
    const std::string cmd = "squad --vocab_file=" + golden("vocab.txt") + " --do_train --train_file=" + data +
                            " --features_only --threads=1 --max_seq_length=16 --doc_stride=8 "
                            "--max_query_length=4 --output_dir=" + out;
    const auto r = run_shell("flock " + out + " " + bertbench_path() + " " + cmd);
    EXPECT_EQ(r.exit_code, 1) << r.out;
    EXPECT_NE(r.out.find("--output_dir=" + out + ": another bertbench run is using this directory now"),
              std::string::npos) << r.out;
    EXPECT_FALSE(fs::exists(out + "/train.tf_record"));
    const auto free = run_bertbench(cmd);
    EXPECT_EQ(free.exit_code, 0) << free.out;
    EXPECT_TRUE(fs::exists(out + "/train.tf_record"));
}

TEST(SquadGuardCli, MetricLinesPrintAnIdWithANulWhole) {
    const GuardTmp tmp;
    std::string with_nul = dataset(R"(, {"id": "a\u0000b", "question": "w", "answers": [{"text": "beta", "answer_start": 6}]})");
    const std::string data = tmp.file("d.json", with_nul);
    const std::string preds = tmp.file("p.json", R"({"q1": "gamma"})");
    const auto r = run_bertbench("squad-eval " + data + " " + preds);
    EXPECT_NE(r.out.find(std::string("Unanswered question a\0b will receive score 0.\n", 46)), std::string::npos)
        << r.out;
}

}  // namespace
}  // namespace bertbench::testing
