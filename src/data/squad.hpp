// SQuAD examples and features, exactly as google-research/bert run_squad.py (eedf571) makes them:
// read_squad_examples (doc tokens split on ' ', \t, \r, \n and U+202F only; char_to_word_offset; the
// training answer check with its "Could not find answer" warning; v2.0 is_impossible) and
// convert_examples_to_features (question cut to max_query_length WordPieces, doc_stride windows,
// _improve_answer_span, _check_is_max_context in double with strict >, out-of-span windows -> 0/0,
// unique_id from 1000000000), plus FeatureWriter's tf.train.Example (feature order as written there).
// Strings are UTF-8; positions and lengths the reference counts in code points are code points here.
#pragma once

#include <nlohmann/json.hpp>

#include <cstdint>
#include <functional>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "data/tokenizer.hpp"
#include "io/example.hpp"

namespace bertbench::data {

struct SquadExample {
    std::string qas_id, question_text;
    std::vector<std::string> doc_tokens;
    // Training only (nullopt / -1 in prediction mode, as the reference's None).
    std::optional<std::string> orig_answer_text;
    int64_t start_position = -1, end_position = -1;
    bool is_impossible = false;
};

struct SquadReadOptions {
    bool is_training = false;
    bool version_2_with_negative = false;
    // What a SQuAD 2.0 file read without version_2_with_negative is told to do (the flag exists
    // in `squad`, not in bench's accuracy mode, which scores SQuAD v1.1 as MLPerf Inference does).
    std::string v2_hint = "--version_2_with_negative";
};

// Parses a SQuAD JSON file's text (`where` names it in errors) with bounded nesting depth.
nlohmann::json parse_squad_json(std::string_view text, const std::string& where);
// read_squad_examples over a parsed file. Each "Could not find answer: '...' vs. '...'" message
// (without the "WARNING:tensorflow:" prefix) is appended to `warnings` when non-null. Error (naming
// `where` and the question id) for: no data/paragraphs/qas/context/question/id, a training question
// without exactly one answer, an answer_start outside its context, is_impossible without
// version_2_with_negative.
std::vector<SquadExample> read_squad_examples(const nlohmann::json& doc, const std::string& where,
                                              const SquadReadOptions& opt,
                                              std::vector<std::string>* warnings = nullptr);

struct SquadFeature {
    int64_t unique_id = 0;
    int example_index = 0, doc_span_index = 0;
    std::vector<std::string> tokens;  // [CLS] query [SEP] doc-window [SEP]
    // token_to_orig_map / token_is_max_context: defined for positions doc_offset ..
    // doc_offset + token_to_orig.size() - 1 (the document tokens), as the reference's dicts.
    int doc_offset = 0;
    std::vector<int> token_to_orig;
    std::vector<char> token_is_max_context;
    std::vector<int32_t> input_ids, input_mask, segment_ids;  // (max_seq_length), zero padded
    std::optional<int> start_position, end_position;          // training only
    bool is_impossible = false;

    bool in_doc(int position) const {
        return position >= doc_offset && position - doc_offset < static_cast<int>(token_to_orig.size());
    }
    int orig_index(int position) const { return token_to_orig[static_cast<size_t>(position - doc_offset)]; }
    bool max_context(int position) const {
        return in_doc(position) && token_is_max_context[static_cast<size_t>(position - doc_offset)] != 0;
    }
};

struct SquadFeatureOptions {
    int max_seq_length = 384, doc_stride = 128, max_query_length = 64;
    bool is_training = false;
    // transformers' squad_convert_example_to_features: window k starts at k x doc_stride even when
    // doc_stride exceeds the window's document length (the tokens between are in no window; google
    // starts the next window where the last ended). The same windows otherwise.
    bool transformers_windows = false;
};

// convert_examples_to_features; `output` receives each feature in order. Error when
// max_seq_length - max_query_length - 3 <= 0 or doc_stride < 1.
void convert_examples_to_features(const std::vector<SquadExample>& examples, FullTokenizer& tokenizer,
                                  const SquadFeatureOptions& opt,
                                  const std::function<void(SquadFeature&&)>& output);

// The pieces, exposed for the unit goldens.
struct DocSpan {
    int start = 0, length = 0;
};
// _check_is_max_context: score min(left, right) + 0.01 * length in double; a later span must be
// strictly better.
bool check_is_max_context(const std::vector<DocSpan>& spans, int cur_span_index, int position);
// _improve_answer_span over WordPiece tokens: first (start ascending, end descending) sub-span whose
// " "-join equals the " "-joined WordPieces of `orig_answer_text`, else (input_start, input_end).
std::pair<int, int> improve_answer_span(const std::vector<std::string>& doc_tokens, int input_start,
                                        int input_end, FullTokenizer& tokenizer,
                                        std::string_view orig_answer_text);

// FeatureWriter.process_feature's tf.train.Example: unique_ids, input_ids, input_mask, segment_ids
// (+ start_positions, end_positions, is_impossible when training), in that order.
io::Example squad_feature_example(const SquadFeature& f, bool is_training);

// The list of code points of a UTF-8 string and back (helpers shared with prediction).
std::u32string utf8_to_u32(std::string_view utf8);
std::string u32_to_utf8(std::u32string_view s);
// Python str.split() (no argument) and " ".join of it.
std::vector<std::u32string> py_split(std::u32string_view s);
std::u32string py_split_join(std::u32string_view s);

}  // namespace bertbench::data
