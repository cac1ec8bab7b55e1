// FastBertTokenizer and run_qa.py's windows (data/fast_tokenizer.hpp, data/squad_qa.hpp) against
// HuggingFace's own Rust tokenizers: tests/reference/hf_fast_tokenizer_golden.jsonl holds what
// tokenizers 0.13 (its Node binding; tests/reference/hf_fast_tokenizer_golden.js says how it was
// made) returns for every text of ../shared/golden/tokenization (ids and character offsets) and,
// for every question of the two SQuAD goldens, the question's and context's tokens and the windows
// run_qa.py's tokenizer call cuts at four max_length/stride settings (or the library's error).
// And 300 random texts over a hostile alphabet, cased and uncased.
// Left out: the byte-string texts (a Python str is never invalid UTF-8) and those the goldens flag
// as Unicode-version sensitive (tokenizers classifies by its crates' older Unicode tables,
// bertbench by utf8proc's: U+11F00, a mark since Unicode 15, is dropped here and kept there).
#include "data/fast_tokenizer.hpp"

#include <gtest/gtest.h>

#include <map>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "core/error.hpp"
#include "data/squad_qa.hpp"
#include "data/unicode_text.hpp"
#include "test_util.hpp"

namespace bertbench::data {
namespace {

using testing::golden;
using testing::read_json;
using testing::read_jsonl;

std::vector<nlohmann::json> hf_golden() {
    const char* src = std::getenv("BB_SOURCE_DIR");
    return read_jsonl(std::string(src ? src : ".") +
                      "/tests/reference/hf_fast_tokenizer_golden.jsonl");
}

std::vector<int32_t> flat_spans(const TokenSpans& t, size_t from = 0) {
    std::vector<int32_t> v;
    for (size_t i = from; i < t.size(); ++i) v.push_back(t.begin[i]), v.push_back(t.end[i]);
    return v;
}

TEST(FastTokenizer, TextsAsHuggingFaceTokenizers) {
    const Vocab vocab = Vocab::load(golden("vocab.txt"));
    std::map<std::pair<bool, int>, std::string> inputs;
    for (const bool lower : {true, false})
        for (const auto& c : read_jsonl(golden(std::string("tokenization/tokenization_") +
                                               (lower ? "uncased" : "cased") + ".jsonl")))
            if (c["input"].is_string() && !c["unicode_version_sensitive"].get<bool>())
                inputs[{lower, c["id"].get<int>()}] = c["input"].get<std::string>();
    FastBertTokenizer uncased(vocab, true), cased(vocab, false);
    int checked = 0, offsets_checked = 0;
    for (const auto& g : hf_golden()) {
        if (g["kind"] != "text") continue;
        const bool lower = g["lower"].get<bool>();
        const int id = g["id"].get<int>();
        if (!inputs.count({lower, id})) continue;
        TokenSpans t;
        (lower ? uncased : cased).encode(inputs.at({lower, id}), t);
        EXPECT_EQ(t.ids, g["ids"].get<std::vector<int32_t>>())
            << (lower ? "uncased" : "cased") << " case " << id;
        std::vector<int32_t> want;
        for (const auto& o : g["offsets"])
            want.push_back(o[0].get<int32_t>()), want.push_back(o[1].get<int32_t>());
        EXPECT_EQ(flat_spans(t), want) << (lower ? "uncased" : "cased") << " case " << id;
        ++checked;
        offsets_checked += static_cast<int>(t.size());
    }
    EXPECT_GT(checked, 600);
    EXPECT_GT(offsets_checked, 5000);
}

TEST(FastTokenizer, HostileRandomTextsAsHuggingFaceTokenizers) {
    // 300 texts drawn from a hostile alphabet (accents and loose combining marks, CJK, Hangul
    // jamo, controls and format characters, odd spaces, emoji, special tokens, private-use and
    // unassigned code points), cased and uncased
    const Vocab vocab = Vocab::load(golden("vocab.txt"));
    FastBertTokenizer uncased(vocab, true), cased(vocab, false);
    int checked = 0;
    for (const auto& g : hf_golden()) {
        if (g["kind"] != "random") continue;
        const bool lower = g["lower"].get<bool>();
        const std::string text = g["text"].get<std::string>();
        TokenSpans t;
        (lower ? uncased : cased).encode(text, t);
        std::vector<int32_t> want;
        for (const auto& o : g["offsets"])
            want.push_back(o[0].get<int32_t>()), want.push_back(o[1].get<int32_t>());
        EXPECT_EQ(t.ids, g["ids"].get<std::vector<int32_t>>())
            << (lower ? "uncased: " : "cased: ") << text;
        EXPECT_EQ(flat_spans(t), want) << (lower ? "uncased: " : "cased: ") << text;
        ++checked;
    }
    EXPECT_EQ(checked, 600);
}

TEST(FastTokenizer, RunQaWindowsAsHuggingFaceTokenizers) {
    const Vocab vocab = Vocab::load(golden("vocab.txt"));
    std::map<std::tuple<std::string, bool, int>, nlohmann::json> contexts;
    const auto lines = hf_golden();
    for (const auto& g : lines)
        if (g["kind"] == "context")
            contexts[{g["file"].get<std::string>(), g["lower"].get<bool>(),
                      g["context"].get<int>()}] = g;
    std::map<std::string, std::vector<QaExample>> examples;
    int windows = 0, errors = 0;
    for (const auto& g : lines) {
        if (g["kind"] != "features") continue;
        const std::string file = g["file"].get<std::string>();
        if (!examples.count(file)) examples[file] = read_qa_examples(read_json(golden(file)), file);
        const bool lower = g["lower"].get<bool>();
        const QaExample& e = examples[file].at(g["question"].get<size_t>());
        const std::string where = file + " question " + e.id;
        FastBertTokenizer tok(vocab, lower);
        TokenSpans q, c;
        tok.encode(uni::py_lstrip(e.question), q);
        tok.encode(e.context, c);
        EXPECT_EQ(q.ids, g["question_ids"].get<std::vector<int32_t>>()) << where;
        const auto& want_c = contexts.at({file, lower, g["context"].get<int>()});
        EXPECT_EQ(c.ids, want_c["ids"].get<std::vector<int32_t>>()) << where;
        EXPECT_EQ(flat_spans(c), want_c["offsets"].get<std::vector<int32_t>>()) << where;
        for (const auto& [setting, want] : g["windows"].items()) {
            QaFeatureOptions opt;
            opt.max_seq_length = std::stoi(setting);
            opt.doc_stride = std::stoi(setting.substr(setting.find('/') + 1));
            std::string error;
            const auto got =
                qa_windows(static_cast<int>(q.size()), static_cast<int>(c.size()), opt, &error);
            if (want.is_string()) {
                const std::string w = want.get<std::string>();
                EXPECT_TRUE(got.empty()) << where << " " << setting;
                EXPECT_NE(error.find(w.substr(w.find(':') + 2)), std::string::npos)
                    << error << " vs " << w;
                ++errors;
                continue;
            }
            std::vector<std::pair<int, int>> w;
            for (const auto& p : want) w.emplace_back(p[0].get<int>(), p[1].get<int>());
            EXPECT_EQ(got, w) << where << " " << setting;
            windows += static_cast<int>(w.size());
        }
    }
    EXPECT_GT(windows, 1500);
    EXPECT_GT(errors, 30);
}

}  // namespace
}  // namespace bertbench::data
