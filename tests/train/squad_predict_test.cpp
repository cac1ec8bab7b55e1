// write_predictions against ../shared/golden/squad_pipeline: decoding the golden logits of both
// runs (R=384 and R=128) reproduces predictions.json and nbest_predictions.json byte for byte and the
// verbose log line for line; the unit goldens of _get_best_indexes, _compute_softmax and
// get_final_text; Python repr floats; SQuAD 2.0's null answer; errors for mismatched raw results.
#include "train/squad_predict.hpp"

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <limits>
#include <nlohmann/json.hpp>
#include <sstream>
#include <string>
#include <vector>

#include "core/error.hpp"
#include "core/fs.hpp"
#include "core/py_json.hpp"
#include "data/squad.hpp"
#include "test_util.hpp"

namespace bertbench::train {
namespace {

using testing::read_jsonl;
std::string shared() { return testing::shared_dir(); }
std::string pipe_dir() { return shared() + "/golden/squad_pipeline/"; }

TEST(PyJson, FloatReprLikePython) {
    EXPECT_EQ(py_float_repr(0.0), "0.0");
    EXPECT_EQ(py_float_repr(-0.0), "-0.0");
    EXPECT_EQ(py_float_repr(1.0), "1.0");
    EXPECT_EQ(py_float_repr(9.5), "9.5");
    EXPECT_EQ(py_float_repr(0.1), "0.1");
    EXPECT_EQ(py_float_repr(66.66666666666667), "66.66666666666667");
    EXPECT_EQ(py_float_repr(1e-4), "0.0001");
    EXPECT_EQ(py_float_repr(1e-5), "1e-05");
    EXPECT_EQ(py_float_repr(1.9285592644004883e-06), "1.9285592644004883e-06");
    EXPECT_EQ(py_float_repr(1e16), "1e+16");
    EXPECT_EQ(py_float_repr(1234567890123456.0), "1234567890123456.0");
    EXPECT_EQ(py_float_repr(-2.5e-300), "-2.5e-300");
    EXPECT_EQ(py_float_repr(1.5e300), "1.5e+300");
    std::string s;
    append_py_json_float(s, std::numeric_limits<double>::infinity());
    EXPECT_EQ(s, "Infinity");
    s.clear();
    append_py_json_string(s, "caf\xc3\xa9 \xf0\x9f\x98\x80 \"q\"\\\n\x7f\xc2\x85");
    EXPECT_EQ(s, "\"caf\\u00e9 \\ud83d\\ude00 \\\"q\\\"\\\\\\n\\u007f\\u0085\"");
}

TEST(SquadPredict, UnitGoldens) {
    int n = 0;
    for (const auto& c : read_jsonl(pipe_dir() + "unit/get_best_indexes.jsonl")) {
        const auto logits = c["logits"].get<std::vector<double>>();
        EXPECT_EQ(squad_best_indexes(logits, c["n_best_size"].get<int>()), c["result"].get<std::vector<int>>())
            << c.dump();
        ++n;
    }
    for (const auto& c : read_jsonl(pipe_dir() + "unit/compute_softmax.jsonl")) {
        const auto got = squad_softmax(c["scores"].get<std::vector<double>>());
        const auto want = c["result"].get<std::vector<double>>();
        ASSERT_EQ(got.size(), want.size());
        for (size_t i = 0; i < got.size(); ++i) EXPECT_EQ(py_float_repr(got[i]), py_float_repr(want[i])) << c.dump();
        ++n;
    }
    for (const auto& c : read_jsonl(pipe_dir() + "unit/get_final_text.jsonl")) {
        std::string log;
        const std::string got = squad_final_text(c["pred_text"].get<std::string>(), c["orig_text"].get<std::string>(),
                                                 c["do_lower_case"].get<bool>(), &log);
        EXPECT_EQ(got, c["result"].get<std::string>()) << c.dump();
        std::string want_log = c["verbose_log"].get<std::string>();
        std::string got_log;
        std::istringstream in(log);
        for (std::string line; std::getline(in, line);) got_log += "INFO:tensorflow:" + line + "\n";
        EXPECT_EQ(got_log, want_log) << c.dump();
        ++n;
    }
    EXPECT_GT(n, 20);
}

struct Decoded {
    std::vector<data::SquadExample> examples;
    std::vector<data::SquadFeature> features;
    std::vector<SquadRawResult> results;
};

Decoded decode_inputs(int msl, int stride) {
    static const data::Vocab vocab = data::Vocab::load(shared() + "/golden/vocab.txt");
    Decoded d;
    const std::string path = pipe_dir() + "dataset-v1.1.json";
    d.examples = data::read_squad_examples(data::parse_squad_json(read_file(path), path), path, {false, false});
    data::FullTokenizer tok(vocab, true);
    data::convert_examples_to_features(d.examples, tok, {msl, stride, 64, false},
                                       [&](data::SquadFeature&& f) { d.features.push_back(std::move(f)); });
    d.results = read_squad_raw_results(pipe_dir() + fmt::format("predictions_{}/logits.jsonl", msl));
    return d;
}

TEST(SquadPredict, GoldenLogitsReproducePredictionsByteForByte) {
    for (auto [msl, stride] : {std::pair{384, 128}, std::pair{128, 32}}) {
        SCOPED_TRACE(msl);
        const Decoded d = decode_inputs(msl, stride);
        const std::string dir = pipe_dir() + fmt::format("predictions_{}/", msl);
        std::string log;
        const SquadPredictions p = squad_write_predictions(d.examples, d.features, d.results, {}, "logits", &log);
        EXPECT_EQ(p.predictions_json, read_file(dir + "predictions.json"));
        EXPECT_EQ(p.nbest_json, read_file(dir + "nbest_predictions.json"));
        EXPECT_TRUE(p.null_odds_json.empty());
        std::string got_log = fmt::format("INFO:tensorflow:Writing predictions to: predictions_{0}/predictions.json\n"
                                          "INFO:tensorflow:Writing nbest to: predictions_{0}/nbest_predictions.json\n",
                                          msl);
        std::istringstream in(log);
        for (std::string line; std::getline(in, line);) got_log += "INFO:tensorflow:" + line + "\n";
        EXPECT_EQ(got_log, read_file(dir + "write_predictions_verbose.log"));
        // Best indexes as write_predictions took them.
        const auto best = read_jsonl(dir + "best_indexes.jsonl");
        ASSERT_EQ(best.size(), d.results.size());
        for (size_t i = 0; i < best.size(); ++i) {
            EXPECT_EQ(squad_best_indexes(d.results[i].start_logits, 20), best[i]["start_indexes"].get<std::vector<int>>());
            EXPECT_EQ(squad_best_indexes(d.results[i].end_logits, 20), best[i]["end_indexes"].get<std::vector<int>>());
        }
        // The raw-results writer round-trips the golden file byte for byte.
        EXPECT_EQ(squad_raw_results_jsonl(d.results), read_file(dir + "logits.jsonl"));
    }
}

std::string error_of(const Decoded& d, const std::vector<SquadRawResult>& results) {
    try {
        squad_write_predictions(d.examples, d.features, results, {}, "raw.jsonl");
    } catch (const Error& e) {
        return e.what();
    }
    return "";
}

TEST(SquadPredict, MismatchedRawResultsAreErrors) {
    const Decoded d = decode_inputs(384, 128);
    auto missing = d.results;
    missing.pop_back();
    EXPECT_NE(error_of(d, missing).find("no result for unique_id 1000000096"), std::string::npos) << error_of(d, missing);
    auto extra = d.results;
    extra.push_back(extra.back());
    extra.back().unique_id = 7;
    EXPECT_NE(error_of(d, extra).find("unique_id 7 is not one of the 97 features"), std::string::npos);
    auto short_logits = d.results;
    short_logits[3].end_logits.resize(128);
    EXPECT_NE(error_of(d, short_logits).find("expected 384 start and end logits"), std::string::npos);
}

TEST(SquadPredict, Version2NullAnswer) {
    static const data::Vocab vocab = data::Vocab::load(shared() + "/golden/vocab.txt");
    const std::string text = R"({"data":[{"paragraphs":[{"context":"Bo went home early.","qas":[)"
                             R"({"id":"a","question":"Who?","answers":[]},{"id":"b","question":"Where?","answers":[]}]}]}]})";
    const auto ex = data::read_squad_examples(data::parse_squad_json(text, "f"), "f", {false, true});
    data::FullTokenizer tok(vocab, true);
    std::vector<data::SquadFeature> fs;
    data::convert_examples_to_features(ex, tok, {16, 8, 8, false}, [&](data::SquadFeature&& f) { fs.push_back(std::move(f)); });
    ASSERT_EQ(fs.size(), 2u);
    // Question a: null score 4+4 = 8 beats "bo" (5+1 = 6): diff 2 > 0 -> "". b: "home" 3+3.5 vs null 0.
    std::vector<SquadRawResult> rs(2);
    for (int i = 0; i < 2; ++i) {
        rs[i].unique_id = fs[i].unique_id;
        rs[i].start_logits.assign(16, -5.0);
        rs[i].end_logits.assign(16, -5.0);
    }
    rs[0].start_logits[0] = 4, rs[0].end_logits[0] = 4, rs[0].start_logits[4] = 5, rs[0].end_logits[4] = 1;
    rs[1].start_logits[0] = 0, rs[1].end_logits[0] = 0, rs[1].start_logits[6] = 3, rs[1].end_logits[6] = 3.5;
    SquadPredictOptions opt;
    opt.version_2_with_negative = true;
    auto p = squad_write_predictions(ex, fs, rs, opt, "raw");
    EXPECT_EQ(p.predictions_json, "{\n    \"a\": \"\",\n    \"b\": \"home\"\n}\n");
    EXPECT_EQ(p.null_odds_json, "{\n    \"a\": 2.0,\n    \"b\": -6.5\n}\n");
    EXPECT_NE(p.nbest_json.find("\"text\": \"\",\n            \"probability\""), std::string::npos);
    opt.null_score_diff_threshold = 2.5;  // a's diff 2 no longer exceeds it
    p = squad_write_predictions(ex, fs, rs, opt, "raw");
    EXPECT_EQ(p.predictions_json, "{\n    \"a\": \"Bo\",\n    \"b\": \"home\"\n}\n");
    // No window's null score below run_squad.py's initial 1e6: its null logits stay the ints 0,
    // which json.dumps writes "0" (the "empty" fallback's are the floats 0.0)
    rs[0].start_logits[0] = rs[0].end_logits[0] = 1e6;
    p = squad_write_predictions(ex, fs, rs, opt, "raw");
    EXPECT_NE(p.nbest_json.find("\"text\": \"\",\n            \"probability\": "), std::string::npos);
    const size_t a_null = p.nbest_json.find("\"start_logit\": 0,\n            \"end_logit\": 0\n");
    EXPECT_NE(a_null, std::string::npos) << p.nbest_json;
    EXPECT_LT(a_null, p.nbest_json.find("\"b\": ["));  // question a's, not b's (its null is the float 0.0)
    EXPECT_NE(p.nbest_json.find("\"start_logit\": 0.0,\n            \"end_logit\": 0.0\n"), std::string::npos);
}

// NVIDIA's get_answers (its PyTorch run_squad.py, the NVIDIA line's decoder): each window's n-best
// is deduplicated on its own and the lists merged, so one text found in two windows is listed
// twice, where write_predictions lists it once; the best answer is the same. Checked besides
// against NVIDIA's unmodified get_answers on 34 dev-set settings (docs/squad.md).
TEST(SquadPredict, NvidiaAnswersKeepEachWindowsCandidates) {
    static const data::Vocab vocab = data::Vocab::load(shared() + "/golden/vocab.txt");
    const std::string text = R"({"data":[{"paragraphs":[{"context":"Bo went home early and then home again )"
                             R"(with the dog and the cat.","qas":[{"id":"a","question":"Where?","answers":[]}]}]}]})";
    for (const bool v2 : {false, true}) {
        const auto ex = data::read_squad_examples(data::parse_squad_json(text, "f"), "f", {false, v2});
        data::FullTokenizer tok(vocab, true);
        std::vector<data::SquadFeature> fs;
        data::convert_examples_to_features(ex, tok, {12, 4, 4, false},
                                           [&](data::SquadFeature&& f) { fs.push_back(std::move(f)); });
        ASSERT_GE(fs.size(), 3u);
        // "home" scored in every window where it is the window's own (max context): 2 + 2 + w
        std::vector<SquadRawResult> rs(fs.size());
        int homes = 0;
        for (size_t i = 0; i < fs.size(); ++i) {
            rs[i].unique_id = fs[i].unique_id;
            rs[i].start_logits.assign(12, -5.0);
            rs[i].end_logits.assign(12, -5.0);
            rs[i].start_logits[0] = rs[i].end_logits[0] = -1.0 - static_cast<double>(i);  // null scores
            for (int k = 0; k < static_cast<int>(fs[i].tokens.size()); ++k)
                if (fs[i].tokens[static_cast<size_t>(k)] == "home" && fs[i].max_context(k)) {
                    rs[i].start_logits[static_cast<size_t>(k)] = 2.0 + 0.5 * static_cast<double>(i);
                    rs[i].end_logits[static_cast<size_t>(k)] = 2.0;
                    ++homes;
                }
        }
        ASSERT_EQ(homes, 2) << "the two 'home's in two windows";
        SquadPredictOptions opt;
        opt.version_2_with_negative = v2;
        opt.n_best_size = 3;
        const auto count = [](const std::string& s, const std::string& what) {
            int n = 0;
            for (size_t p = s.find(what); p != std::string::npos; p = s.find(what, p + 1)) ++n;
            return n;
        };
        const SquadPredictions google = squad_write_predictions(ex, fs, rs, opt, "raw");
        opt.nvidia_answers = true;
        const SquadPredictions nvidia = squad_write_predictions(ex, fs, rs, opt, "raw");
        EXPECT_EQ(google.predictions_json, "{\n    \"a\": \"home\"\n}\n");
        EXPECT_EQ(nvidia.predictions_json, google.predictions_json);
        EXPECT_EQ(count(google.nbest_json, "\"text\": \"home\""), 1) << google.nbest_json;
        EXPECT_EQ(count(nvidia.nbest_json, "\"text\": \"home\""), 2) << nvidia.nbest_json;
        EXPECT_EQ(count(nvidia.nbest_json, "\"text\": "), v2 ? 3 : 2) << nvidia.nbest_json;
        if (v2) {  // the question's own null logits: the lowest null score, the last window's
            const std::string last = py_float_repr(-1.0 - static_cast<double>(fs.size() - 1));
            EXPECT_NE(nvidia.nbest_json.find("\"text\": \"\",\n            \"probability\""), std::string::npos)
                << nvidia.nbest_json;
            EXPECT_NE(nvidia.nbest_json.find("\"start_logit\": " + last), std::string::npos) << nvidia.nbest_json;
        }
        opt.n_best_size = 1;  // the merged list is cut again: one "home", the later window's
        const SquadPredictions one = squad_write_predictions(ex, fs, rs, opt, "raw");
        EXPECT_EQ(count(one.nbest_json, "\"text\": "), 1) << one.nbest_json;
        EXPECT_EQ(count(one.nbest_json, "\"probability\": 1.0"), 1) << one.nbest_json;
    }
}

// A question whose context has no word piece has no feature: write_predictions still answers it
// ("empty"), NVIDIA's get_answers never meets it and leaves it out of both files.
TEST(SquadPredict, NvidiaAnswersLeaveOutQuestionsWithoutFeatures) {
    static const data::Vocab vocab = data::Vocab::load(shared() + "/golden/vocab.txt");
    const std::string text = R"({"data":[{"paragraphs":[{"context":"   ","qas":[{"id":"a","question":"Who?",)"
                             R"("answers":[]}]},{"context":"Bo went home.","qas":[{"id":"b","question":"Where?",)"
                             R"("answers":[]}]}]}]})";
    const auto ex = data::read_squad_examples(data::parse_squad_json(text, "f"), "f", {false, false});
    data::FullTokenizer tok(vocab, true);
    std::vector<data::SquadFeature> fs;
    data::convert_examples_to_features(ex, tok, {16, 8, 8, false}, [&](data::SquadFeature&& f) { fs.push_back(std::move(f)); });
    ASSERT_EQ(fs.size(), 1u);
    std::vector<SquadRawResult> rs(1);
    rs[0].unique_id = fs[0].unique_id;
    rs[0].start_logits.assign(16, 0.0);
    rs[0].end_logits.assign(16, 0.0);
    SquadPredictOptions opt;
    const SquadPredictions google = squad_write_predictions(ex, fs, rs, opt, "raw");
    EXPECT_NE(google.predictions_json.find("\"a\": \"empty\""), std::string::npos) << google.predictions_json;
    opt.nvidia_answers = true;
    const SquadPredictions nvidia = squad_write_predictions(ex, fs, rs, opt, "raw");
    EXPECT_EQ(nvidia.predictions_json.find("\"a\""), std::string::npos) << nvidia.predictions_json;
    EXPECT_EQ(nvidia.nbest_json.find("\"a\""), std::string::npos) << nvidia.nbest_json;
    EXPECT_NE(nvidia.predictions_json.find("\"b\": "), std::string::npos) << nvidia.predictions_json;
}

// transformers' compute_predictions_logits (its legacy run_squad.py, the Intel PyTorch line's
// decoder): a span's text is convert_tokens_to_string, which keeps a leading "##", so a span
// starting inside a word falls back to the whole original words; a 2.0 n-best of the null answer
// alone gets the "empty" nonce in front (write_predictions fails there); a literal [PAD] ends a
// window's tokens. Each as transformers 4.28's own code decodes the same logits (session 41's
// audit).
TEST(SquadPredict, TransformersAnswers) {
    static const data::Vocab vocab = data::Vocab::load(shared() + "/golden/vocab.txt");
    const std::string text = R"({"data":[{"paragraphs":[{"context":"Bo saw an unaffable )"
                             R"(gnu.","qas":[{"id":"a","question":"Who?","answers":[]}]}]}]})";
    const auto ex =
        data::read_squad_examples(data::parse_squad_json(text, "f"), "f", {false, false});
    data::FullTokenizer tok(vocab, true, data::TokenizerRules::transformers);
    std::vector<data::SquadFeature> fs;
    data::convert_examples_to_features(ex, tok, {32, 8, 8, false},
                                       [&](data::SquadFeature&& f) { fs.push_back(std::move(f)); });
    ASSERT_EQ(fs.size(), 1u);
    int piece = -1;  // the first continuation piece of the context
    for (int k = 0; k < static_cast<int>(fs[0].tokens.size()) && piece < 0; ++k)
        if (fs[0].in_doc(k) && fs[0].tokens[static_cast<size_t>(k)].rfind("##", 0) == 0) piece = k;
    ASSERT_GT(piece, 0) << "a word split into pieces";
    std::vector<SquadRawResult> rs(1);
    rs[0].unique_id = fs[0].unique_id;
    rs[0].start_logits.assign(32, 0.0);
    rs[0].end_logits.assign(32, 0.0);
    rs[0].start_logits[static_cast<size_t>(piece)] = rs[0].end_logits[static_cast<size_t>(piece)] =
        5.0;
    SquadPredictOptions opt;
    opt.n_best_size = 1;
    opt.tokenizer_rules = data::TokenizerRules::transformers;
    const std::string google = squad_write_predictions(ex, fs, rs, opt, "raw").predictions_json;
    opt.transformers_answers = true;
    const std::string hf = squad_write_predictions(ex, fs, rs, opt, "raw").predictions_json;
    EXPECT_EQ(hf, "{\n    \"a\": \"unaffable\"\n}\n");
    EXPECT_NE(google, hf);  // the piece without its "##", found inside the word
    EXPECT_EQ(google.find("unaffable"), std::string::npos) << google;

    // 2.0, only the null span among the candidates (the best start is [CLS])
    rs[0].start_logits.assign(32, 0.0);
    rs[0].start_logits[0] = 3.0, rs[0].end_logits[0] = 1.0;
    opt.version_2_with_negative = true;
    opt.null_score_diff_threshold = 5.0;  // above the null score: the nonce is the answer
    const SquadPredictions p = squad_write_predictions(ex, fs, rs, opt, "raw");
    EXPECT_EQ(p.predictions_json, "{\n    \"a\": \"empty\"\n}\n");
    EXPECT_EQ(p.null_odds_json, "{\n    \"a\": 4.0\n}\n");
    EXPECT_LT(p.nbest_json.find("\"text\": \"empty\""), p.nbest_json.find("\"text\": \"\""))
        << p.nbest_json;
    opt.null_score_diff_threshold = 0.0;
    EXPECT_EQ(squad_write_predictions(ex, fs, rs, opt, "raw").predictions_json,
              "{\n    \"a\": \"\"\n}\n");

    // a literal [PAD] ends the window's tokens: nothing after it can be the answer
    const std::string padded = R"({"data":[{"paragraphs":[{"context":"alpha [PAD] beta gamma",)"
                               R"("qas":[{"id":"a","question":"Who?","answers":[]}]}]}]})";
    const auto ex2 =
        data::read_squad_examples(data::parse_squad_json(padded, "f"), "f", {false, false});
    fs.clear();
    data::convert_examples_to_features(ex2, tok, {32, 8, 8, false},
                                       [&](data::SquadFeature&& f) { fs.push_back(std::move(f)); });
    ASSERT_EQ(fs.size(), 1u);
    const auto beta =
        std::find(fs[0].tokens.begin(), fs[0].tokens.end(), "beta") - fs[0].tokens.begin();
    ASSERT_LT(beta, 32);
    rs[0].unique_id = fs[0].unique_id;
    rs[0].start_logits.assign(32, 0.0);
    rs[0].end_logits.assign(32, 0.0);
    rs[0].start_logits[static_cast<size_t>(beta)] = rs[0].end_logits[static_cast<size_t>(beta)] =
        5.0;
    opt.version_2_with_negative = false;
    EXPECT_EQ(squad_write_predictions(ex2, fs, rs, opt, "raw").predictions_json,
              "{\n    \"a\": \"empty\"\n}\n");
    opt.transformers_answers = false;
    EXPECT_EQ(squad_write_predictions(ex2, fs, rs, opt, "raw").predictions_json,
              "{\n    \"a\": \"beta\"\n}\n");
}

// A feature's logits twice in --raw_results (issue 28 item 6): the second line would silently
// replace the first; refused, naming the file, the line and the first line.
TEST(SquadPredict, RepeatedUniqueIdInRawResultsIsRefused) {
    testing::TmpDir dir("bb_raw_results");
    const std::string path = dir.file("logits.jsonl");
    write_file_atomic(path,
                      "{\"unique_id\":1000000000,\"start_logits\":[0.5],\"end_logits\":[0.25]}\n"
                      "{\"unique_id\":1000000001,\"start_logits\":[0.5],\"end_logits\":[0.25]}\n"
                      "{\"unique_id\":1000000000,\"start_logits\":[9.0],\"end_logits\":[9.0]}\n");
    const std::string msg = testing::error_of([&] { read_squad_raw_results(path); });
    EXPECT_NE(msg.find("--raw_results " + path + ": line 3: unique_id 1000000000: expected each "
                       "feature once, got it again (first on line 1)"),
              std::string::npos)
        << msg;
    write_file_atomic(path, "{\"unique_id\":7,\"start_logits\":[1],\"end_logits\":[2]}\n");
    EXPECT_EQ(read_squad_raw_results(path).size(), 1u);
    // non-finite logits as Python's json (and squad_raw_results_jsonl) write them: read back
    SquadRawResult r;
    r.unique_id = 9;
    r.start_logits = {std::numeric_limits<double>::quiet_NaN(), 1.5};
    r.end_logits = {std::numeric_limits<double>::infinity(), -std::numeric_limits<double>::infinity()};
    write_file_atomic(path, squad_raw_results_jsonl({r}));
    const std::vector<SquadRawResult> back = read_squad_raw_results(path);
    ASSERT_EQ(back.size(), 1u);
    EXPECT_TRUE(std::isnan(back[0].start_logits[0]));
    EXPECT_EQ(back[0].start_logits[1], 1.5);
    EXPECT_EQ(back[0].end_logits, r.end_logits);
    write_file_atomic(path, "{\"unique_id\":7,\"start_logits\":[Nan],\"end_logits\":[2]}\n");  // not Python's
    EXPECT_THROW(read_squad_raw_results(path), Error);
}

}  // namespace
}  // namespace bertbench::train
