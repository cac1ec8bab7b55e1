// run_squad.py's examples, features and FeatureWriter TFRecords against the goldens in
// ../shared/golden/squad_pipeline (produced by the unmodified reference): every field of every
// example and feature, the skip warnings, the .tf_record files byte for byte (including main()'s
// random.Random(12345) shuffle), the unit cases of _check_is_max_context and _improve_answer_span,
// and the one-line errors for bad files.
#include <gtest/gtest.h>
#include <nlohmann/json.hpp>
#include <unistd.h>

#include <cstdlib>
#include <filesystem>
#include <sstream>
#include <string>
#include <vector>

#include "core/error.hpp"
#include "test_util.hpp"
#include "core/fs.hpp"
#include "core/pyrandom.hpp"
#include "data/squad.hpp"
#include "io/tfrecord.hpp"

namespace bertbench::data {
namespace {

using testing::read_jsonl;
std::string shared() { return testing::shared_dir(); }
std::string pipe_dir() { return shared() + "/golden/squad_pipeline/"; }

const Vocab& vocab() {
    static const Vocab v = Vocab::load(shared() + "/golden/vocab.txt");
    return v;
}

std::vector<SquadExample> load(const std::string& file, bool training, std::vector<std::string>* warn) {
    const std::string path = pipe_dir() + file;
    return read_squad_examples(parse_squad_json(read_file(path), path), path, {training, false}, warn);
}

void expect_example(const SquadExample& got, const nlohmann::json& want) {
    EXPECT_EQ(got.qas_id, want["qas_id"].get<std::string>());
    EXPECT_EQ(got.question_text, want["question_text"].get<std::string>()) << got.qas_id;
    EXPECT_EQ(got.doc_tokens, want["doc_tokens"].get<std::vector<std::string>>()) << got.qas_id;
    if (want["orig_answer_text"].is_null()) {
        EXPECT_FALSE(got.orig_answer_text.has_value()) << got.qas_id;
        EXPECT_TRUE(want["start_position"].is_null());
    } else {
        EXPECT_EQ(got.orig_answer_text.value_or("<none>"), want["orig_answer_text"].get<std::string>());
        EXPECT_EQ(got.start_position, want["start_position"].get<int64_t>()) << got.qas_id;
        EXPECT_EQ(got.end_position, want["end_position"].get<int64_t>()) << got.qas_id;
    }
    EXPECT_EQ(got.is_impossible, want["is_impossible"].get<bool>());
}

TEST(SquadExamples, EvalMatchesReference) {
    const auto got = load("dataset-v1.1.json", false, nullptr);
    const auto want = read_jsonl(pipe_dir() + "examples_eval.jsonl");
    ASSERT_EQ(got.size(), want.size());
    for (size_t i = 0; i < got.size(); ++i) expect_example(got[i], want[i]);
}

TEST(SquadExamples, TrainMatchesReferenceAndWarnings) {
    std::vector<std::string> warnings;
    const auto got = load("train-v1.1.json", true, &warnings);
    const auto want = read_jsonl(pipe_dir() + "examples_train.jsonl");
    ASSERT_EQ(got.size(), want.size());
    for (size_t i = 0; i < got.size(); ++i) expect_example(got[i], want[i]);
    std::string log;
    for (const auto& w : warnings) log += "WARNING:tensorflow:" + w + "\n";
    EXPECT_EQ(log, read_file(pipe_dir() + "examples_train.log"));
}

void expect_feature(const SquadFeature& f, const nlohmann::json& w, bool training) {
    const std::string at = std::to_string(f.unique_id);
    ASSERT_EQ(f.unique_id, w["unique_id"].get<int64_t>());
    EXPECT_EQ(f.example_index, w["example_index"].get<int>()) << at;
    EXPECT_EQ(f.doc_span_index, w["doc_span_index"].get<int>()) << at;
    EXPECT_EQ(f.tokens, w["tokens"].get<std::vector<std::string>>()) << at;
    // The dicts: same keys in the same (ascending) order, same values.
    std::vector<std::pair<std::string, int>> map_got, map_want;
    std::vector<std::pair<std::string, bool>> ctx_got, ctx_want;
    for (size_t i = 0; i < f.token_to_orig.size(); ++i) {
        map_got.emplace_back(std::to_string(f.doc_offset + static_cast<int>(i)), f.token_to_orig[i]);
        ctx_got.emplace_back(std::to_string(f.doc_offset + static_cast<int>(i)), f.token_is_max_context[i] != 0);
    }
    for (const auto& [k, v] : w["token_to_orig_map"].items()) map_want.emplace_back(k, v.get<int>());
    for (const auto& [k, v] : w["token_is_max_context"].items()) ctx_want.emplace_back(k, v.get<bool>());
    // nlohmann's object sorts keys as strings; compare as sets of pairs.
    std::sort(map_got.begin(), map_got.end()), std::sort(ctx_got.begin(), ctx_got.end());
    EXPECT_EQ(map_got, map_want) << at;
    EXPECT_EQ(ctx_got, ctx_want) << at;
    EXPECT_EQ(f.input_ids, w["input_ids"].get<std::vector<int32_t>>()) << at;
    EXPECT_EQ(f.input_mask, w["input_mask"].get<std::vector<int32_t>>()) << at;
    EXPECT_EQ(f.segment_ids, w["segment_ids"].get<std::vector<int32_t>>()) << at;
    if (training) {
        EXPECT_EQ(f.start_position.value_or(-99), w["start_position"].get<int>()) << at;
        EXPECT_EQ(f.end_position.value_or(-99), w["end_position"].get<int>()) << at;
    } else {
        EXPECT_TRUE(w["start_position"].is_null());
        EXPECT_FALSE(f.start_position.has_value());
    }
    EXPECT_EQ(f.is_impossible, w["is_impossible"].get<bool>());
}

struct SquadRun {
    int msl, stride;
};

std::vector<SquadFeature> features(const std::vector<SquadExample>& ex, SquadRun r, bool training) {
    FullTokenizer tok(vocab(), true);
    std::vector<SquadFeature> out;
    convert_examples_to_features(ex, tok, {r.msl, r.stride, 64, training},
                                 [&](SquadFeature&& f) { out.push_back(std::move(f)); });
    return out;
}

std::string tfrecord_bytes(const std::vector<SquadFeature>& fs, bool training) {
    char tmpl[] = "/tmp/bb_squad_XXXXXX";
    const std::string dir = mkdtemp(tmpl);
    const std::string path = dir + "/out.tf_record";
    {
        io::TfRecordWriter w(path);
        for (const auto& f : fs) w.write(io::encode_example(squad_feature_example(f, training)));
        w.close();
    }
    std::string bytes = read_file(path);
    std::filesystem::remove_all(dir);
    return bytes;
}

TEST(SquadFeatures, AllRunsMatchReferenceJsonl) {
    const auto eval_ex = load("dataset-v1.1.json", false, nullptr);
    const auto train_ex = load("train-v1.1.json", true, nullptr);
    for (SquadRun r : {SquadRun{384, 128}, SquadRun{128, 32}})
        for (bool training : {false, true}) {
            SCOPED_TRACE(fmt::format("R={} training={}", r.msl, training));
            const auto got = features(training ? train_ex : eval_ex, r, training);
            const auto want = read_jsonl(pipe_dir() + fmt::format("features_{}_{}.jsonl", r.msl,
                                                                  training ? "train" : "eval"));
            ASSERT_EQ(got.size(), want.size());
            for (size_t i = 0; i < got.size(); ++i) expect_feature(got[i], want[i], training);
        }
}

TEST(SquadFeatures, TfRecordsByteIdentical) {
    const auto eval_ex = load("dataset-v1.1.json", false, nullptr);
    auto train_ex = load("train-v1.1.json", true, nullptr);
    EXPECT_EQ(tfrecord_bytes(features(eval_ex, {384, 128}, false), false),
              read_file(pipe_dir() + "features_384_eval.tf_record"));
    EXPECT_EQ(tfrecord_bytes(features(train_ex, {384, 128}, true), true),
              read_file(pipe_dir() + "features_384_train.tf_record"));
    // main(): random.Random(12345).shuffle(train_examples) before conversion.
    PyRandom rng(12345);
    rng.shuffle(train_ex);
    std::vector<std::string> order;
    for (const auto& e : train_ex) order.push_back(e.qas_id);
    const auto want_order = nlohmann::json::parse(read_file(pipe_dir() + "train_main_shuffled_384.order.json"));
    EXPECT_EQ(nlohmann::json(order), want_order);
    EXPECT_EQ(tfrecord_bytes(features(train_ex, {384, 128}, true), true),
              read_file(pipe_dir() + "train_main_shuffled_384.tf_record"));
}

TEST(SquadFeatures, CheckIsMaxContextUnit) {
    int cases = 0;
    for (const auto& c : read_jsonl(pipe_dir() + "unit/check_is_max_context.jsonl")) {
        std::vector<DocSpan> spans;
        for (const auto& s : c["doc_spans"]) spans.push_back({s[0].get<int>(), s[1].get<int>()});
        const auto want = c["max_context_span_index_by_position"].get<std::vector<int>>();
        for (size_t pos = 0; pos < want.size(); ++pos) {
            int got = -1;
            for (size_t i = 0; i < spans.size(); ++i)
                if (check_is_max_context(spans, static_cast<int>(i), static_cast<int>(pos))) got = static_cast<int>(i);
            EXPECT_EQ(got, want[pos]) << c["note"] << " position " << pos;
        }
        ++cases;
    }
    EXPECT_GT(cases, 2);
}

TEST(SquadFeatures, ImproveAnswerSpanUnit) {
    FullTokenizer tok(vocab(), true);
    int cases = 0;
    for (const auto& c : read_jsonl(pipe_dir() + "unit/improve_answer_span.jsonl")) {
        const auto got = improve_answer_span(c["doc_tokens"].get<std::vector<std::string>>(),
                                             c["input_start"].get<int>(), c["input_end"].get<int>(), tok,
                                             c["orig_answer_text"].get<std::string>());
        EXPECT_EQ(got.first, c["result"][0].get<int>()) << c.dump();
        EXPECT_EQ(got.second, c["result"][1].get<int>()) << c.dump();
        ++cases;
    }
    EXPECT_GT(cases, 1);
}

std::string error_of(const std::string& text, bool training, bool v2 = false) {
    try {
        read_squad_examples(parse_squad_json(text, "f.json"), "f.json", {training, v2}, nullptr);
    } catch (const Error& e) {
        return e.what();
    }
    return "";
}

TEST(SquadExamples, BadInputIsOneLineError) {
    const std::string ok_q = R"({"id":"q1","question":"Who?","answers":[{"text":"Bo","answer_start":0}]})";
    auto file = [](const std::string& qa, const std::string& ctx = "Bo went home.") {
        return R"({"version":"1.1","data":[{"title":"t","paragraphs":[{"context":")" + ctx +
               R"(","qas":[)" + qa + "]}]}]}";
    };
    EXPECT_TRUE(error_of(file(ok_q), true).empty());
    EXPECT_NE(error_of("{not json", false).find("not valid JSON"), std::string::npos);
    EXPECT_NE(error_of(R"({"version":"1.1"})", false).find("missing \"data\""), std::string::npos);
    EXPECT_NE(error_of(R"({"data":[{"title":"x"}]})", false).find("missing \"paragraphs\""), std::string::npos);
    EXPECT_NE(error_of(R"({"data":[{"paragraphs":[{"context":"x"}]}]})", false).find("missing \"qas\""),
              std::string::npos);
    const std::string q7 = file(R"({"id":"q7","question":"Who?","answers":[{"text":"home.","answer_start":11}]})");
    const std::string outside = error_of(q7, true);
    EXPECT_NE(outside.find("q7"), std::string::npos) << outside;
    EXPECT_NE(outside.find("outside"), std::string::npos) << outside;
    EXPECT_TRUE(error_of(q7, false).empty());  // prediction never reads answer_start, as the reference
    const std::string empty_answer =
        error_of(file(R"({"id":"q8","question":"Who?","answers":[{"text":"","answer_start":13}]})"), true);
    EXPECT_NE(empty_answer.find("and, for an empty answer, answer_start < len(context)"), std::string::npos)
        << empty_answer;
    const std::string v2 = file(R"({"id":"q9","question":"Who?","answers":[],"is_impossible":true})");
    EXPECT_NE(error_of(v2, false).find("--version_2_with_negative"), std::string::npos);
    EXPECT_TRUE(error_of(v2, true, true).empty());
    const std::string two = file(R"({"id":"q3","question":"Who?","answers":[{"text":"Bo","answer_start":0},{"text":"Bo","answer_start":0}]})");
    EXPECT_NE(error_of(two, true).find("exactly 1 answer"), std::string::npos);
    EXPECT_TRUE(error_of(two, false).empty());
    EXPECT_NE(error_of(R"({"data":[{"paragraphs":[{"context":"x","qas":[],"n":1E444}]}]})", false).find("f.json"),
              std::string::npos);  // nlohmann's out_of_range becomes an Error too
    std::string deep(100000, '[');
    EXPECT_NE(error_of(deep, false).find("deeper"), std::string::npos);
    FullTokenizer tok(vocab(), true);
    try {
        convert_examples_to_features({}, tok, {67, 128, 64, false}, [](SquadFeature&&) {});
        ADD_FAILURE() << "expected an error for max_seq_length 67 with max_query_length 64";
    } catch (const Error& e) {
        EXPECT_NE(std::string(e.what()).find("max_query_length"), std::string::npos);
    }
}

TEST(SquadExamples, Version2TrainingImpossible) {
    const std::string text = R"({"data":[{"paragraphs":[{"context":"Bo went home.","qas":[)"
                             R"({"id":"a","question":"Who?","answers":[{"text":"Bo","answer_start":0}],"is_impossible":false},)"
                             R"({"id":"b","question":"Why?","answers":[],"is_impossible":true}]}]}]})";
    const auto ex = read_squad_examples(parse_squad_json(text, "f"), "f", {true, true}, nullptr);
    ASSERT_EQ(ex.size(), 2u);
    EXPECT_FALSE(ex[0].is_impossible);
    EXPECT_TRUE(ex[1].is_impossible);
    EXPECT_EQ(ex[1].start_position, -1);
    FullTokenizer tok(vocab(), true);
    std::vector<SquadFeature> fs;
    convert_examples_to_features(ex, tok, {32, 8, 8, true}, [&](SquadFeature&& f) { fs.push_back(std::move(f)); });
    ASSERT_EQ(fs.size(), 2u);
    EXPECT_EQ(fs[0].start_position.value_or(-1), 4);  // [CLS] who ? [SEP] bo
    EXPECT_EQ(fs[1].start_position.value_or(-1), 0);
    EXPECT_TRUE(fs[1].is_impossible);
    const auto e = squad_feature_example(fs[1], true);
    ASSERT_EQ(e.features.size(), 7u);
    EXPECT_EQ(e.features[6].first, "is_impossible");
    EXPECT_EQ(e.features[6].second.ints.at(0), 1);
}

// transformers' windows (squad --transformers_squad): the same as google's while doc_stride fits
// in a window; above it window k starts at k x doc_stride, skipping the tokens between (its
// tokenizer's overflow with a negative stride), where google's start where the last one ended.
TEST(SquadFeatures, TransformersWindowsWithALongStride) {
    std::string context;
    for (int i = 0; i < 40; ++i) context += "the ";
    const std::string text = R"({"data":[{"paragraphs":[{"context":")" + context +
                             R"(","qas":[{"id":"a","question":"Who?","answers":[]}]}]}]})";
    const auto ex = read_squad_examples(parse_squad_json(text, "f"), "f", {false, false}, nullptr);
    FullTokenizer tok(vocab(), true);
    const auto starts = [&](int stride, bool transformers) {  // each window's first word, length
        std::vector<std::pair<int, size_t>> out;
        SquadFeatureOptions opt{20, stride, 8, false, transformers};  // 15 document tokens a window
        convert_examples_to_features(ex, tok, opt, [&](SquadFeature&& f) {
            out.emplace_back(f.token_to_orig.front(), f.token_to_orig.size());
        });
        return out;
    };
    using W = std::vector<std::pair<int, size_t>>;
    EXPECT_EQ(starts(20, false), (W{{0, 15}, {15, 15}, {30, 10}}));
    EXPECT_EQ(starts(20, true), (W{{0, 15}, {20, 15}}));
    EXPECT_EQ(starts(10, true), starts(10, false));
    EXPECT_EQ(starts(15, true), starts(15, false));
}

// A question id used twice (issue 28 item 6): predictions and the official metric are keyed by
// id, so the second would silently take the first's place: refused in prediction. Training never
// reads an id (merged and augmented training sets repeat them): read, as run_squad.py reads them.
TEST(SquadExamples, RepeatedQuestionIdIsRefusedInPrediction) {
    const std::string q = R"({"id":"q1","question":"Who?","answers":[{"text":"Bo","answer_start":0}]})";
    const std::string two_paragraphs =
        R"({"version":"1.1","data":[{"title":"t","paragraphs":[{"context":"Bo went home.","qas":[)" +
        q + R"(]},{"context":"Bo ran.","qas":[)" + q + "]}]}]}";
    const std::vector<SquadExample> read = read_squad_examples(nlohmann::json::parse(two_paragraphs), "f.json", {true, false});
    ASSERT_EQ(read.size(), 2u);
    EXPECT_EQ(read[1].qas_id, "q1");
    const std::string msg = error_of(two_paragraphs, false);
    EXPECT_NE(msg.find("f.json: question \"q1\" (data[0].paragraphs[1].qas[0]): expected each "
                       "question id once, got it again (first at data[0].paragraphs[0].qas[0])"),
              std::string::npos)
        << msg;
    EXPECT_EQ(msg.find('\n'), std::string::npos) << msg;
}

// What run_squad.py never reads is not checked: an impossible training question's answers (its
// answer_start may lie anywhere), and is_impossible is read with Python's truth (0 / 1 too).
TEST(SquadExamples, WhatTheReferenceNeverReadsIsNotChecked) {
    const std::string impossible = R"({"version":"v2.0","data":[{"title":"t","paragraphs":[{"context":"Bo went.",
        "qas":[{"id":"q1","question":"Who?","answers":[{"text":"Bo","answer_start":99}],"is_impossible":true},
               {"id":"q2","question":"Who?","answers":[{"text":"Bo","answer_start":0}],"is_impossible":0}]}]}]})";
    const std::vector<SquadExample> read = read_squad_examples(nlohmann::json::parse(impossible), "f.json", {true, true});
    ASSERT_EQ(read.size(), 2u);
    EXPECT_TRUE(read[0].is_impossible);
    EXPECT_FALSE(read[1].is_impossible);
    EXPECT_EQ(read[1].start_position, 0);
    // without --version_2_with_negative the answer is read (and refused where it cannot be)
    EXPECT_NE(error_of(impossible, true).find("is_impossible is true (a SQuAD 2.0 file)"), std::string::npos);
}

}  // namespace
}  // namespace bertbench::data
