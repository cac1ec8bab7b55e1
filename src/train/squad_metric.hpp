// The official SQuAD metrics. v1.1: evaluate-v1.1.py (allenai/bi-att-flow 4900454) — exact match and
// token F1 after normalize_answer (str.lower, ASCII string.punctuation removed, the words a/an/the
// removed with Python re's Unicode \b, Python str.split whitespace), max over the ground truths,
// divided by ALL questions; unanswered questions warned about on stderr. v2.0: evaluate-v2.0.py's
// exact/f1/total with HasAns_/NoAns_ splits, and with --na-prob-file its best-threshold search.
// Output text is what the scripts print, byte for byte (json.dumps, repr floats).
#pragma once

#include <nlohmann/json.hpp>

#include <string>
#include <string_view>
#include <vector>

namespace bertbench::train {

std::string squad_normalize_answer(std::string_view s);
bool squad_exact_match(std::string_view prediction, std::string_view ground_truth);
double squad_f1(std::string_view prediction, std::string_view ground_truth);  // evaluate-v1.1.py f1_score

struct SquadEvalOutput {
    bool version_2 = false;
    std::string stdout_text, stderr_text;  // what the official script prints
    nlohmann::ordered_json metrics;        // the printed dict, in its key order
};

// evaluate-v2.0.py's --na-prob-file and --na-prob-thresh: each question's no-answer probability
// (run_squad.py's null_odds.json, an object in its file order; null: none given, each 0.0) and the
// threshold above which a question is taken as answered with nothing (its default 1.0). With a
// file, the best thresholds are searched as it does (best_exact(_thresh), best_f1(_thresh)).
struct SquadNaProbs {
    const nlohmann::ordered_json* probs = nullptr;
    std::string where;  // the file, for errors
    double thresh = 1.0;
};

// A dataset with any "is_impossible": true question gets the v2.0 metric, otherwise v1.1.
// `dataset` is the parsed dataset file, `predictions` the parsed predictions.json (an object of
// question id -> answer text). Error naming the files for a malformed dataset or prediction, and
// for no-answer probabilities given with a v1.1 dataset (evaluate-v1.1.py takes none).
SquadEvalOutput squad_evaluate(const nlohmann::json& dataset, const nlohmann::json& predictions,
                               const std::string& dataset_where, const std::string& predictions_where,
                               const SquadNaProbs& na = {});
// Whether squad_evaluate can score `dataset` at all: evaluate-v1.1.py reads its "version" key, so a
// v1.1 dataset without one is an error there (a v2.0 one, any question impossible, needs none).
bool squad_scorable(const nlohmann::json& dataset, const std::string& dataset_where);
// evaluate-v2.0.py's stdout before it stops with KeyError when predictions are missing: a
// "Missing prediction for <id>" line per such question, in dataset order ("" for a v1.1 dataset,
// where a missing prediction scores 0, or none missing). squad_evaluate then fails naming one.
std::string squad_missing_prediction_lines(const nlohmann::json& dataset, const nlohmann::json& predictions,
                                           const std::string& dataset_where);

// transformers' squad_evaluate (data/metrics/squad_metrics.py) as its legacy run_squad.py calls
// it: evaluate-v2.0.py's scores on any dataset (an impossible question has no answers), a missing
// prediction an error (its KeyError), and find_all_best_thresh with every no-answer probability 0,
// which walks the questions in `prediction_order` (the predictions' ids as their file lists them;
// run_squad.py's are in the dataset's order, which an empty list stands for).
// The keys in its order: exact, f1, total, HasAns_*, NoAns_*, best_exact(_thresh), best_f1(_thresh).
nlohmann::ordered_json squad_evaluate_transformers(const nlohmann::json& dataset,
                                                   const nlohmann::json& predictions,
                                                   const std::vector<std::string>& prediction_order,
                                                   const std::string& dataset_where,
                                                   const std::string& predictions_where);
// Python's repr of a dict of str keys (plain names) and int/float values: {'exact': 81.5, 'total': 3}.
std::string py_dict_repr(const nlohmann::ordered_json& dict);
// json.dumps of the same: {"exact_match": 81.5, "total": 3}.
std::string py_json_dumps(const nlohmann::ordered_json& dict);

}  // namespace bertbench::train
