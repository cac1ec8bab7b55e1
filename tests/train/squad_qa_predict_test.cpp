// run_qa.py's decoding (train/squad_qa_predict.hpp) against
// tests/tools/qa_postprocess_reference.py, which does it on numpy itself (its argsort with its tie
// order, float32 sums, np.exp, its pairwise sum, Python's stable sort and str slices, json.dumps):
// predictions.json, nbest_predictions.json and null_odds.json byte for byte, over the features
// run_qa.py's tokenizer call makes from the two SQuAD goldens at several window shapes, with logits
// continuous and with many ties, v1.1 and v2.0, several n-best sizes, answer lengths and
// thresholds. Plus the metric over the evaluated questions only and the one-line errors.
#include "train/squad_qa_predict.hpp"

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <nlohmann/json.hpp>
#include <random>
#include <string>
#include <vector>

#include "core/error.hpp"
#include "core/fs.hpp"
#include "data/fast_tokenizer.hpp"
#include "data/squad_qa.hpp"
#include "test_util.hpp"

namespace bertbench::train {
namespace {

using testing::golden;
using testing::read_json;
using testing::TmpDir;

struct Case {
    std::string file;
    int max_seq_length, doc_stride;
    bool ties;
    SquadQaOptions opt;
};

std::vector<SquadRawResult> random_logits(const std::vector<data::QaFeature>& features,
                                          uint32_t seed, bool ties) {
    std::mt19937 rng(seed);
    std::normal_distribution<float> normal(0.0f, 3.0f);
    std::vector<SquadRawResult> out;
    for (const auto& f : features) {
        SquadRawResult r;
        r.unique_id = f.input.unique_id;
        for (auto* v : {&r.start_logits, &r.end_logits})
            for (size_t i = 0; i < f.input.input_ids.size(); ++i) {
                const float x = normal(rng);
                v->push_back(ties ? std::round(x) / 2.0f : x);  // ties: steps of 0.5
            }
        out.push_back(std::move(r));
    }
    return out;
}

// The n-best files equal but for the probabilities of the lists holding utils_qa's "empty" entry
// (start and end logit 0.0: Python floats, so numpy's softmax runs in float64 there), which may
// differ by 2 ulp; then the bytes are equal once those are replaced by the reference's.
void expect_same_nbest(const std::string& got, const std::string& want, const std::string& where) {
    const auto g = nlohmann::ordered_json::parse(got), w = nlohmann::ordered_json::parse(want);
    ASSERT_EQ(g.size(), w.size()) << where;
    std::string patched = got;
    size_t at = 0;
    for (auto gi = g.begin(), wi = w.begin(); gi != g.end(); ++gi, ++wi) {
        ASSERT_EQ(gi.key(), wi.key()) << where;
        ASSERT_EQ(gi->size(), wi->size()) << where << " " << gi.key();
        const bool wide = std::any_of(gi->begin(), gi->end(), [](const auto& e) {
            return e["text"] == "empty" && e["start_logit"] == 0.0 && e["end_logit"] == 0.0;
        });
        for (size_t k = 0; wide && k < gi->size(); ++k) {
            const double a = (*gi)[k]["probability"], b = (*wi)[k]["probability"];
            EXPECT_LE(std::abs(a - b), 2 * (std::nextafter(b, INFINITY) - b)) << where << " " << gi.key();
            // the writer prints repr(float): the same text as nlohmann's dump of the same double
            const std::string from = "\"probability\": " + nlohmann::json(a).dump();
            const size_t pos = patched.find(from, at);
            ASSERT_NE(pos, std::string::npos) << where << " " << from;
            patched.replace(pos, from.size(), "\"probability\": " + nlohmann::json(b).dump());
            at = pos;
        }
    }
    EXPECT_EQ(patched, want) << where;
}

TEST(SquadQaPredict, AsNumpyRunsUtilsQa) {
    const std::string py = testing::torch_python();
    if (std::system((py + " -c 'import numpy' >/dev/null 2>&1").c_str()) != 0)
        GTEST_SKIP() << py << " cannot import numpy (scripts/setup.sh installs python3-numpy)";
    const char* src = std::getenv("BB_SOURCE_DIR");
    const std::string reference =
        std::string(src ? src : ".") + "/tests/tools/qa_postprocess_reference.py";
    // numpy's float64 exp is libm's on CPUs without AVX-512; with it (numpy >= 1.22) it is Intel's
    // SVML, whose last bit differs from libm's for about one value in four. bertbench's float64
    // softmax (only where utils_qa's "empty" entry makes the scores float64) uses libm's.
    const bool exp64_is_libm =
        std::system((py + " -c 'import math, numpy as np; x = np.linspace(-20, 0, 4001); "
                          "exit(any(np.exp(x) != [math.exp(v) for v in x]))'").c_str()) == 0;
    if (!exp64_is_libm)
        std::printf("numpy's float64 exp is not libm's here (SVML): the probabilities of n-best "
                    "lists with utils_qa's \"empty\" entry are compared within 2 ulp\n");
    const data::Vocab vocab = data::Vocab::load(golden("vocab.txt"));
    const std::vector<Case> cases = {
        {"squad/dataset-v1.1.json", 384, 128, false, {20, 30, false, 0.0}},
        {"squad/dataset-v1.1.json", 40, 4, true, {20, 30, false, 0.0}},
        {"squad/dataset-v1.1.json", 64, 16, true, {7, 12, true, 0.5}},
        {"squad/dataset-v1.1.json", 64, 16, false, {5, 5, true, -1.5}},
        {"squad_pipeline/dataset-v1.1.json", 384, 128, true, {20, 30, true, 0.0}},
        {"squad_pipeline/dataset-v1.1.json", 128, 32, false, {3, 2, false, 0.0}},
        {"squad_pipeline/dataset-v1.1.json", 128, 32, true, {1, 1, true, 2.0}},
    };
    uint32_t seed = 1;
    for (const Case& c : cases) {
        const std::string where =
            c.file + " " + std::to_string(c.max_seq_length) + "/" + std::to_string(c.doc_stride);
        const auto examples = data::read_qa_examples(read_json(golden(c.file)), c.file);
        data::FastBertTokenizer tok(vocab, true);
        const auto features =
            data::prepare_qa_features(examples, tok, {c.max_seq_length, c.doc_stride}, c.file);
        const auto logits = random_logits(features, seed++, c.ties);
        const SquadQaPredictions got =
            squad_qa_postprocess(examples, features, logits, c.opt, "test");

        nlohmann::json in = {{"options",
                              {{"n_best_size", c.opt.n_best_size},
                               {"max_answer_length", c.opt.max_answer_length},
                               {"version_2_with_negative", c.opt.version_2_with_negative},
                               {"null_score_diff_threshold", c.opt.null_score_diff_threshold}}}};
        for (const auto& e : examples)
            in["examples"].push_back({{"id", e.id}, {"context", e.context}});
        for (size_t i = 0; i < features.size(); ++i)
            in["features"].push_back({{"example_index", features[i].input.example_index},
                                      {"context_begin", features[i].context_begin},
                                      {"begin", features[i].begin},
                                      {"end", features[i].end},
                                      {"start_logits", logits[i].start_logits},
                                      {"end_logits", logits[i].end_logits}});
        const TmpDir tmp("bb_qa_ref");
        write_file_atomic(tmp.file("in.json"), in.dump());
        ASSERT_EQ(
            std::system((py + " " + reference + " " + tmp.file("in.json") + " " + tmp.path.string())
                            .c_str()),
            0)
            << where;
        EXPECT_EQ(got.predictions_json, read_file(tmp.file("predictions.json"))) << where;
        const std::string nbest = read_file(tmp.file("nbest_predictions.json"));
        if (exp64_is_libm)
            EXPECT_EQ(got.nbest_json, nbest) << where;
        else
            expect_same_nbest(got.nbest_json, nbest, where);
        if (c.opt.version_2_with_negative) {
            EXPECT_EQ(got.null_odds_json, read_file(tmp.file("null_odds.json"))) << where;
        }
        EXPECT_GT(features.size(), examples.size() - 1) << where;
    }
}

TEST(SquadQaPredict, NumpyArgsortOrderAmongTies) {
    // numpy's introsort on 40 values with ties (insertion sort below 17, partitions above):
    // equal values do not come out in index order; the order is numpy's (checked against it by
    // AsNumpyRunsUtilsQa). Here only what any order must satisfy.
    std::vector<float> v;
    for (int i = 0; i < 40; ++i) v.push_back(static_cast<float>((i * 7) % 5));
    const auto top = numpy_argsort_top(v, 40);
    ASSERT_EQ(top.size(), 40u);
    for (size_t i = 1; i < top.size(); ++i)
        EXPECT_GE(v[static_cast<size_t>(top[i - 1])], v[static_cast<size_t>(top[i])]);
    EXPECT_EQ(numpy_argsort_top(v, 3).size(), 3u);
    EXPECT_TRUE(numpy_argsort_top(v, 0).empty());
    EXPECT_EQ(numpy_argsort_top(std::vector<float>{1.0f, NAN, 2.0f}, 1),
              std::vector<int>{1});  // NaN sorts last
}

TEST(SquadQaPredict, MetricOverTheEvaluatedQuestionsOnly) {
    std::vector<data::QaExample> ex(3);
    const char* golds[] = {"a river", "blue", "the sea"};
    for (size_t i = 0; i < ex.size(); ++i) {
        ex[i].id = {'q', static_cast<char>('0' + i)};
        ex[i].answers = nlohmann::json::array({{{"text", golds[i]}, {"answer_start", 0}}});
    }
    nlohmann::ordered_json preds = {{"q0", "river"}, {"q1", "red"}, {"q2", "sea"}};
    const auto m = squad_qa_metric(ex, preds, false, "test");
    EXPECT_DOUBLE_EQ(m["exact_match"].get<double>(), 100.0 * 2 / 3);
    EXPECT_DOUBLE_EQ(m["f1"].get<double>(), 100.0 * 2 / 3);
    ex.resize(1);  // --max_eval_samples 1: one question, one answer
    EXPECT_DOUBLE_EQ(squad_qa_metric(ex, preds, false, "test")["exact_match"].get<double>(), 100.0);
    const auto v2 = squad_qa_metric(ex, preds, true, "test");
    EXPECT_EQ(v2["total"].get<int>(), 1);
    EXPECT_TRUE(v2.contains("best_f1_thresh"));
    preds.erase("q0");  // as evaluate-v1.1.py: an unanswered question scores 0
    EXPECT_DOUBLE_EQ(squad_qa_metric(ex, preds, false, "test")["exact_match"].get<double>(), 0.0);
}

TEST(SquadQaPredict, MissingResultsAreOneLineErrors) {
    const data::Vocab vocab = data::Vocab::load(golden("vocab.txt"));
    const auto examples = data::read_qa_examples(read_json(golden("squad/dataset-v1.1.json")), "d");
    data::FastBertTokenizer tok(vocab, true);
    const auto features = data::prepare_qa_features(examples, tok, {384, 128}, "d");
    auto logits = random_logits(features, 3, false);
    logits.pop_back();
    EXPECT_NE(testing::error_of([&] {
                  squad_qa_postprocess(examples, features, logits, {}, "raw.jsonl");
              }).find("raw.jsonl: "),
              std::string::npos);
    logits = random_logits(features, 3, false);
    logits[0].start_logits.pop_back();
    EXPECT_NE(testing::error_of([&] {
                  squad_qa_postprocess(examples, features, logits, {}, "raw.jsonl");
              }).find("384 start and end logits"),
              std::string::npos);
}

}  // namespace
}  // namespace bertbench::train
