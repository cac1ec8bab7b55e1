// The official SQuAD metric against the goldens: ../shared/golden/squad (expected stdout, stderr
// with unanswered questions, per-question normalisation/EM/F1) and squad_pipeline's evaluate_*
// for both prediction runs; plus the v2.0 metric on a small hand-computed case.
#include "train/squad_metric.hpp"

#include <gtest/gtest.h>

#include <cstdlib>
#include <limits>
#include <nlohmann/json.hpp>
#include <sstream>
#include <string>

#include "core/error.hpp"
#include "core/fs.hpp"
#include "core/py_json.hpp"
#include "test_util.hpp"

namespace bertbench::train {
namespace {

using testing::golden;

SquadEvalOutput run(const std::string& dataset, const std::string& preds) {
    return squad_evaluate(nlohmann::json::parse(read_file(dataset)), nlohmann::json::parse(read_file(preds)),
                          dataset, preds);
}

void expect_per_question(const std::string& per_question, const std::string& preds_path) {
    const auto preds = nlohmann::json::parse(read_file(preds_path));
    std::istringstream in(read_file(per_question));
    int n = 0;
    for (std::string line; std::getline(in, line); ++n) {
        const auto q = nlohmann::json::parse(line);
        if (q["prediction"].is_null()) {  // unanswered: not in predictions.json
            EXPECT_FALSE(preds.contains(q["id"].get<std::string>()));
            continue;
        }
        const std::string pred = q["prediction"].get<std::string>();
        EXPECT_EQ(pred, preds[q["id"].get<std::string>()].get<std::string>());
        EXPECT_EQ(squad_normalize_answer(pred), q["normalized_prediction"].get<std::string>()) << line;
        if (q.contains("ground_truths")) {
            const auto gts = q["ground_truths"].get<std::vector<std::string>>();
            const auto norm = q["normalized_ground_truths"].get<std::vector<std::string>>();
            bool em = false;
            double f1 = 0;
            for (size_t i = 0; i < gts.size(); ++i) {
                EXPECT_EQ(squad_normalize_answer(gts[i]), norm[i]) << line;
                em = em || squad_exact_match(pred, gts[i]);
                f1 = std::max(f1, squad_f1(pred, gts[i]));
            }
            EXPECT_EQ(em, q["exact_match"].get<bool>()) << line;
            EXPECT_EQ(py_float_repr(f1), py_float_repr(q["f1"].get<double>())) << line;
        }
    }
    EXPECT_GT(n, 10);
}

TEST(SquadMetric, OfficialGoldenStdoutStderr) {
    const auto out = run(golden("squad/dataset-v1.1.json"), golden("squad/predictions.json"));
    EXPECT_FALSE(out.version_2);
    EXPECT_EQ(out.stdout_text, read_file(golden("squad/expected_stdout.txt")));
    EXPECT_EQ(out.stderr_text, read_file(golden("squad/expected_stderr.txt")));
    expect_per_question(golden("squad/per_question.jsonl"), golden("squad/predictions.json"));
}

TEST(SquadMetric, PipelineRunsMatchEvaluateOutput) {
    for (const char* r : {"384", "128"}) {
        const std::string dir = golden(std::string("squad_pipeline/predictions_") + r + "/");
        const auto out = run(golden("squad_pipeline/dataset-v1.1.json"), dir + "predictions.json");
        EXPECT_EQ(out.stdout_text, read_file(dir + "evaluate_stdout.txt")) << r;
        EXPECT_EQ(out.stderr_text, read_file(dir + "evaluate_stderr.txt")) << r;
        expect_per_question(dir + "evaluate_per_question.jsonl", dir + "predictions.json");
    }
}

TEST(SquadMetric, NormalisationRules) {
    EXPECT_EQ(squad_normalize_answer("The  Cat's «hat»\u00a0and an apple, a\tthe"), "cats «hat» and apple");
    EXPECT_EQ(squad_normalize_answer("theatre anthem a-b"), "theatre anthem ab");
    EXPECT_EQ(squad_normalize_answer("\xc3\xa9the the\xc3\xa9"), "\xc3\xa9the the\xc3\xa9");  // \b is Unicode
    EXPECT_EQ(squad_normalize_answer("\xce\x9f\xce\x94\xce\x9f\xce\xa3"), "\xce\xbf\xce\xb4\xce\xbf\xcf\x82");
    EXPECT_DOUBLE_EQ(squad_f1("x b c", "b c d"), 2.0 / 3.0);
    EXPECT_DOUBLE_EQ(squad_f1("a b c", "b c d"), 0.8);  // "a" is an article
    EXPECT_EQ(squad_f1("x", "y"), 0.0);
}

// Three SQuAD 2.0 questions: a answerable ("red car"), b and c not; predicted "the red", "", "x".
const nlohmann::json kThreeV2 = nlohmann::json::parse(R"({"version":"v2.0","data":[{"paragraphs":[{"context":"c","qas":[
    {"id":"a","answers":[{"text":"red car","answer_start":0}],"is_impossible":false},
    {"id":"b","answers":[],"is_impossible":true},
    {"id":"c","answers":[],"is_impossible":true}]}]}]})");
const nlohmann::json kThreeV2Predictions = nlohmann::json::parse(R"({"a":"the red","b":"","c":"x"})");

TEST(SquadMetric, Version2Splits) {
    const nlohmann::json& dataset = kThreeV2;
    const nlohmann::json& preds = kThreeV2Predictions;
    const auto out = squad_evaluate(dataset, preds, "d", "p");
    EXPECT_TRUE(out.version_2);
    // a: EM 0, F1 2/3 (p=1, r=1/2); b: 1/1; c: 0/0. Figures as Python computes them.
    EXPECT_EQ(out.stdout_text,
              "{\n  \"exact\": 33.333333333333336,\n  \"f1\": 55.55555555555555,\n  \"total\": 3,\n"
              "  \"HasAns_exact\": 0.0,\n  \"HasAns_f1\": 66.66666666666666,\n  \"HasAns_total\": 1,\n"
              "  \"NoAns_exact\": 50.0,\n  \"NoAns_f1\": 50.0,\n  \"NoAns_total\": 2\n}\n");
    EXPECT_THROW(squad_evaluate(dataset, nlohmann::json::parse(R"({"a":"x"})"), "d", "p"), Error);
}

// evaluate-v2.0.py's --na-prob-file on the same questions (figures worked from its definitions):
// probabilities above --na-prob-thresh score as the empty answer; the best-threshold search walks
// the questions by probability (b -inf, a 1, c 2.5) from the 2 without an answer on the raw
// scores: exact 2, 2, 1 (never above the start: thresh 0.0); F1 2, 2 + 2/3 at a's 1 (an int, kept
// as the file gives it), 1 + 2/3.
TEST(SquadMetric, Version2NoAnswerProbabilities) {
    const nlohmann::json& dataset = kThreeV2;
    const nlohmann::json& preds = kThreeV2Predictions;
    nlohmann::ordered_json probs = nlohmann::ordered_json::parse(R"({"c": 2.5, "a": 1, "x": 0.1})");
    probs["b"] = -std::numeric_limits<double>::infinity();
    const std::string best = "  \"best_exact\": 66.66666666666667,\n  \"best_exact_thresh\": 0.0,\n"
                             "  \"best_f1\": 88.88888888888887,\n  \"best_f1_thresh\": 1\n}\n";
    // at 3.0 none is above: Version2Splits' figures, then the search's
    EXPECT_EQ(squad_evaluate(dataset, preds, "d", "p", {&probs, "n", 3.0}).stdout_text,
              "{\n  \"exact\": 33.333333333333336,\n  \"f1\": 55.55555555555555,\n  \"total\": 3,\n"
              "  \"HasAns_exact\": 0.0,\n  \"HasAns_f1\": 66.66666666666666,\n  \"HasAns_total\": 1,\n"
              "  \"NoAns_exact\": 50.0,\n  \"NoAns_f1\": 50.0,\n  \"NoAns_total\": 2,\n" + best);
    // at 1.0 (its default): c (2.5) taken as unanswered, which it is: 1 where "x" scored 0
    EXPECT_EQ(squad_evaluate(dataset, preds, "d", "p", {&probs, "n", 1.0}).stdout_text,
              "{\n  \"exact\": 66.66666666666667,\n  \"f1\": 88.88888888888887,\n  \"total\": 3,\n"
              "  \"HasAns_exact\": 0.0,\n  \"HasAns_f1\": 66.66666666666666,\n  \"HasAns_total\": 1,\n"
              "  \"NoAns_exact\": 100.0,\n  \"NoAns_f1\": 100.0,\n  \"NoAns_total\": 2,\n" + best);
    // at 0.5: a (1) and c (2.5) taken as unanswered: a scores 0, c 1
    EXPECT_EQ(squad_evaluate(dataset, preds, "d", "p", {&probs, "n", 0.5}).stdout_text,
              "{\n  \"exact\": 66.66666666666667,\n  \"f1\": 66.66666666666667,\n  \"total\": 3,\n"
              "  \"HasAns_exact\": 0.0,\n  \"HasAns_f1\": 0.0,\n  \"HasAns_total\": 1,\n"
              "  \"NoAns_exact\": 100.0,\n  \"NoAns_f1\": 100.0,\n  \"NoAns_total\": 2,\n" + best);
    // a question without a probability (its KeyError), a v1.1 dataset (no such option there)
    nlohmann::ordered_json short_of = nlohmann::ordered_json::parse(R"({"a": 0.5, "b": 0.5})");
    EXPECT_NE(testing::error_of([&] { squad_evaluate(dataset, preds, "d", "p", {&short_of, "n.json", 1.0}); })
                  .find("n.json: no probability for question \"c\" of d"),
              std::string::npos);
    auto v1 = dataset;
    v1["version"] = "1.1";
    for (auto& qa : v1["data"][0]["paragraphs"][0]["qas"]) qa["is_impossible"] = false, qa["answers"] = {{{"text", "c"}}};
    EXPECT_NE(testing::error_of([&] { squad_evaluate(v1, preds, "d", "p", {&probs, "n.json", 1.0}); })
                  .find("n.json: no-answer probabilities for a SQuAD 1.1 dataset"),
              std::string::npos);
}

// transformers' squad_evaluate as its legacy run_squad.py logs it: the expected line is what
// transformers 4.28's own squad_metrics.py prints for the same files (session 41): a repeated id
// (its last answers, its first place), an impossible question listing answers (none for it),
// an answer that normalizes to nothing, the best-threshold search over the running totals.
TEST(SquadMetric, TransformersResults) {
    const auto dataset =
        nlohmann::json::parse(R"({"version":"v2.0","data":[{"paragraphs":[{"context":"x","qas":[
        {"id":"a","answers":[{"text":"the Big cat"},{"text":"a dog"}]},
        {"id":"b","answers":[{"text":"The"}]},
        {"id":"c","answers":[],"is_impossible":true},
        {"id":"d","answers":[{"text":"plausible"}],"is_impossible":true},
        {"id":"e","answers":[{"text":"red fox jumps"}]},
        {"id":"a","answers":[{"text":"big cat"}]}]}]}]})");
    const auto preds = nlohmann::json::parse(
        R"({"a":"big cats","b":"","c":"","d":"plausible","e":"the red fox"})");
    EXPECT_EQ(
        "Results: " + py_dict_repr(squad_evaluate_transformers(dataset, preds, {}, "d", "p")),
        "Results: {'exact': 40.0, 'f1': 66.0, 'total': 5, 'HasAns_exact': 33.333333333333336, "
        "'HasAns_f1': 76.66666666666666, 'HasAns_total': 3, 'NoAns_exact': 50.0, 'NoAns_f1': 50.0, "
        "'NoAns_total': 2, 'best_exact': 60.0, 'best_exact_thresh': 0.0, 'best_f1': 70.0, "
        "'best_f1_thresh': 0.0}");
    // the best-threshold search walks the predictions' order: q2 (unanswerable, answered: -1) first
    const auto two = nlohmann::json::parse(R"({"data":[{"paragraphs":[{"context":"a cat sat","qas":[
        {"id":"q1","answers":[{"text":"cat"}]},{"id":"q2","answers":[],"is_impossible":true}]}]}]})");
    const auto answered = nlohmann::json::parse(R"({"q2":"sat","q1":"cat"})");
    EXPECT_EQ(squad_evaluate_transformers(two, answered, {"q2", "q1"}, "d", "p")["best_exact"],
              50.0);
    EXPECT_EQ(squad_evaluate_transformers(two, answered, {}, "d", "p")["best_exact"], 100.0);
    // a v1.1 set: the official metric's figures, and best_* equal to them
    const auto v1 = nlohmann::json::parse(read_file(golden("squad_pipeline/dataset-v1.1.json")));
    nlohmann::json all;
    for (const auto& a : v1["data"])
        for (const auto& p : a["paragraphs"])
            for (const auto& qa : p["qas"])
                all[qa["id"].get<std::string>()] = "the " + qa["id"].get<std::string>();
    all[v1["data"][0]["paragraphs"][0]["qas"][0]["id"].get<std::string>()] =
        v1["data"][0]["paragraphs"][0]["qas"][0]["answers"][0]["text"];
    const auto hf = squad_evaluate_transformers(v1, all, {}, "d", "p");
    const auto official = squad_evaluate(v1, all, "d", "p").metrics;
    EXPECT_EQ(hf["exact"], official["exact_match"]);
    EXPECT_EQ(hf["f1"], official["f1"]);
    EXPECT_GT(hf["f1"].get<double>(), 0.0);
    EXPECT_EQ(hf["best_f1"], hf["f1"]);
    EXPECT_EQ(hf["best_exact"], hf["exact"]);
    all.erase(all.begin());  // a missing prediction: its KeyError
    const std::string msg =
        testing::error_of([&] { squad_evaluate_transformers(v1, all, {}, "d", "p"); });
    EXPECT_NE(msg.find("p: no prediction for question"), std::string::npos) << msg;
}

}  // namespace
}  // namespace bertbench::train
