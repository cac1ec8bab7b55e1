// SQuAD answer decoding as transformers' run_qa.py (v4.10) does it: utils_qa's
// postprocess_qa_predictions with Intel's offset check, over the features of data/squad_qa.hpp.
// Per question, over its windows in order: the null score min(start[0] + end[0]) (float32 sums,
// the first of equal ones kept); the n_best_size largest start and end logits of each window in
// numpy.argsort's order (its introsort, ported: the same order among equal logits); each
// (start, end) pair over context tokens with start <= end < start + max_answer_length a candidate
// scored start + end in float32, duplicates from overlapping windows kept; the candidates sorted by
// score (stable, descending) and cut to n_best_size (2.0: the null answer among them, appended if
// cut); each answer's text the context's characters from its start token's first to its end token's
// last; "empty" in front when there is no candidate or only an empty one; probabilities by a
// softmax in float32 (float64 with "empty"). The answer: the best's text (2.0: "" when the null
// score minus the best non-null start and end logits exceeds --null_score_diff_threshold).
// Files as utils_qa writes them (json.dumps(..., indent=4) + "\n", keys start_logit, end_logit,
// text, probability). The probabilities as numpy 1.x computes them on an x86 CPU with AVX2 or
// AVX-512 (its SIMD float32 exp, its pairwise sum); numpy built without SIMD (libm's expf) can
// differ in their last bit.
#pragma once

#include <nlohmann/json.hpp>

#include <span>
#include <string>
#include <vector>

#include "data/squad_qa.hpp"
#include "train/squad_predict.hpp"

namespace bertbench::train {

struct SquadQaOptions {
    int n_best_size = 20, max_answer_length = 30;
    bool version_2_with_negative = false;
    double null_score_diff_threshold = 0.0;
};

struct SquadQaPredictions {
    std::string predictions_json, nbest_json, null_odds_json;  // null_odds: 2.0 only
    nlohmann::ordered_json predictions;                         // id -> answer, in question order
};

// Every feature needs exactly one result (by unique_id) with max_seq_length logits; otherwise
// Error naming `results_where`. 2.0: a question without a feature is an Error (utils_qa fails
// there); 1.1: its answer is "empty".
SquadQaPredictions squad_qa_postprocess(const std::vector<data::QaExample>& examples,
                                        const std::vector<data::QaFeature>& features,
                                        const std::vector<SquadRawResult>& results,
                                        const SquadQaOptions& opt, const std::string& results_where);

// numpy.argsort(v)[::-1][:n] with numpy's default kind (its introsort for float32, as numpy 1.x
// without AVX-512 sorts): the indices of the n largest values, largest first.
std::vector<int> numpy_argsort_top(std::span<const float> v, int n);

// The metric run_qa.py reports: datasets' "squad" (evaluate-v1.1.py's exact match and F1 over the
// given questions only, in percent: {"exact_match", "f1"}) or, for 2.0, "squad_v2" (the keys of
// squad_evaluate_transformers, every no-answer probability 0). A question without a prediction
// scores 0 in 1.1 and is an Error naming `where` in 2.0, as the two scripts do.
nlohmann::ordered_json squad_qa_metric(const std::vector<data::QaExample>& examples,
                                       const nlohmann::ordered_json& predictions, bool version_2,
                                       const std::string& where);

}  // namespace bertbench::train
