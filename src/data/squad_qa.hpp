// SQuAD evaluation data as transformers' run_qa.py (v4.10; Intel's BERT-base PyTorch quickstarts)
// makes it: the examples as the `squad` dataset's loading script yields them from a SQuAD file
// (articles, paragraphs, questions in file order; context and question unchanged), and
// prepare_validation_features: the question lstripped (str.isspace), the pair encoded by
// BertTokenizerFast (data/fast_tokenizer.hpp) with truncation="only_second", max_length,
// stride=doc_stride, return_overflowing_tokens and padding="max_length". Each window is
// [CLS] question [SEP] context tokens [SEP] [PAD]... with token type 1 from the first context
// token to the last [SEP]; windows of the context hold L = max_length - len(question) - 3 tokens,
// start at 0, L - stride, 2 (L - stride), ... and stop at the first that reaches the context's end
// (tokenizers' Encoding::truncate; `stride` is the overlap in tokens, not the step of
// google's doc_stride). A context that fits is one window.
#pragma once

#include <nlohmann/json.hpp>

#include <cstdint>
#include <string>
#include <vector>

#include "data/fast_tokenizer.hpp"
#include "data/squad.hpp"

namespace bertbench::data {

struct QaExample {
    std::string id, question, context;
    nlohmann::json answers;  // the question's "answers" list as in the file (the metric's references)
};

// The questions of a parsed SQuAD file in order. Error naming `where` (and the question) when
// data/paragraphs/qas/context/question/id is missing or of the wrong type.
std::vector<QaExample> read_qa_examples(const nlohmann::json& doc, const std::string& where);

// One window: the model's input (unique_id 1000000000 + its index, example_index, input_ids,
// input_mask, segment_ids; no tokens or maps) and the input characters of its context tokens.
struct QaFeature {
    SquadFeature input;
    int context_begin = 0;          // position of the first context token
    std::vector<int32_t> begin, end;  // per context token: [begin, end) in code points of the context
};

struct QaFeatureOptions {
    int max_seq_length = 384, doc_stride = 128;
};

// prepare_validation_features over `examples`. Error naming `where` and the question id where
// tokenizers fails: the question leaves no room for the context ("Truncation error: Sequence to
// truncate too short to respect the provided max_length") or the stride is not below the
// context's room when the context must be cut (its assertion `stride < max_len`).
std::vector<QaFeature> prepare_qa_features(const std::vector<QaExample>& examples,
                                           FastBertTokenizer& tokenizer, const QaFeatureOptions& opt,
                                           const std::string& where);
// The windows [begin, end) over `context_tokens` tokens for a question of `question_tokens`
// (exposed for the tests); empty when the tokenizer fails as above.
std::vector<std::pair<int, int>> qa_windows(int question_tokens, int context_tokens, const QaFeatureOptions& opt,
                                            std::string* error = nullptr);

}  // namespace bertbench::data
