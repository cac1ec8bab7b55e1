// SQuAD answer decoding, exactly as google-research/bert run_squad.py (eedf571) write_predictions:
// _get_best_indexes (stable descending sort over ALL max_seq_length logits, first n), the candidate
// filter in the reference's order, prelim ranking by start_logit + end_logit (two float32 values
// added in double, stable), n-best dedup by final text, get_final_text with its three fallbacks,
// _compute_softmax in double, and the JSON files as json.dumps(..., indent=4) + "\n" writes them
// (repr floats, ensure_ascii). SQuAD 2.0: the min-null-score slice, null_odds.json and
// --null_score_diff_threshold. NVIDIA's PyTorch run_squad.py get_answers on request
// (SquadPredictOptions::nvidia_answers).
#pragma once

#include <cstdint>
#include <nlohmann/json.hpp>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "data/squad.hpp"

namespace bertbench::train {

// One eval feature's logits (max_seq_length each, padding positions included), as main() holds
// them: float32 values converted to Python floats.
struct SquadRawResult {
    int64_t unique_id = 0;
    std::vector<double> start_logits, end_logits;
};

// Reads raw results in the format of predictions_R/logits.jsonl: one JSON object per line with
// unique_id, start_logits, end_logits. Error naming the file and line for anything else.
std::vector<SquadRawResult> read_squad_raw_results(const std::string& path);
// The same format, one line per result (floats as Python repr).
std::string squad_raw_results_jsonl(const std::vector<SquadRawResult>& results);

std::vector<int> squad_best_indexes(std::span<const double> logits, int n_best_size);
std::vector<double> squad_softmax(std::span<const double> scores);
// get_final_text(pred_text, orig_text, do_lower_case). When `verbose_log` is non-null, the message
// the reference logs with --verbose_logging (without "INFO:tensorflow:") is appended, one per line.
// `rules`: whose BasicTokenizer re-tokenizes the original text (data/tokenizer.hpp).
std::string squad_final_text(std::string_view pred_text, std::string_view orig_text, bool do_lower_case,
                             std::string* verbose_log = nullptr,
                             data::TokenizerRules rules = data::TokenizerRules::google);

struct SquadPredictOptions {
    int n_best_size = 20, max_answer_length = 30;
    bool do_lower_case = true;
    data::TokenizerRules tokenizer_rules = data::TokenizerRules::google;  // NVIDIA's line: its own
    // NVIDIA's run_squad.py get_answers instead of write_predictions: each window's candidates
    // ranked and deduplicated by text on their own (up to n_best_size per window), the windows'
    // lists merged with the null answer (2.0; this question's, where NVIDIA's script appends the
    // last question's null logits to every question), ranked again and cut to n_best_size; no
    // dedup across windows. The null score starts at infinity (google: 1e6). The best answer is
    // the same as write_predictions'; the n-best lists and probabilities differ. A question with
    // no feature (its context has no word piece) is left out (google: "empty").
    bool nvidia_answers = false;
    // transformers' compute_predictions_logits (its legacy run_squad.py): write_predictions except
    // that a span's text is tokenizer.convert_tokens_to_string (" ##" joined, a leading "##"
    // kept, so get_final_text falls back to the original words), a window's tokens end at its
    // first [PAD] (a literal one in the text too), and in 2.0 a list holding only the null answer
    // gets the "empty" nonce in front (write_predictions fails there).
    bool transformers_answers = false;
    bool version_2_with_negative = false;
    double null_score_diff_threshold = 0.0;
};

struct SquadPredictions {
    std::string predictions_json, nbest_json, null_odds_json;  // file contents (null_odds: 2.0 only)
    // 2.0: the questions predicted "" without a null_odds.json entry (no non-empty answer among
    // their n-best, where the reference raises AttributeError)
    std::vector<std::string> without_null_odds;
};

// write_predictions. Every feature needs exactly one result with its unique_id and logits of its
// max_seq_length; otherwise Error naming `results_where`, the unique_id and the question id.
SquadPredictions squad_write_predictions(const std::vector<data::SquadExample>& examples,
                                         const std::vector<data::SquadFeature>& features,
                                         const std::vector<SquadRawResult>& results,
                                         const SquadPredictOptions& opt, const std::string& results_where,
                                         std::string* verbose_log = nullptr);

// The eval side of `squad --do_predict`, shared with `bench --scenario_mode=accuracy`: the
// predict file parsed, read_squad_examples (not training) and convert_examples_to_features.
struct SquadEvalSet {
    nlohmann::json doc;  // the parsed predict file (the official metric's dataset)
    std::vector<data::SquadExample> examples;
    std::vector<data::SquadFeature> features;
};
SquadEvalSet squad_eval_set(const std::string& predict_file, data::FullTokenizer& tokenizer,
                            const data::SquadFeatureOptions& opt, data::SquadReadOptions read,
                            std::vector<std::string>* warnings = nullptr);
// Whether a SQuAD dataset is labelled, so that the official metric can score it: a question with
// answers, or a SQuAD 2.0 one with is_impossible and an answers array (empty: no answer is right).
bool squad_has_answers(const nlohmann::json& doc);

}  // namespace bertbench::train
