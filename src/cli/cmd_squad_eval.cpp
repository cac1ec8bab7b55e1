// `bertbench squad-eval DATASET PREDICTIONS`: the official SQuAD metric. Prints exactly what
// evaluate-v1.1.py prints ({"exact_match": ..., "f1": ...}; "Unanswered question ..." on stderr),
// or for a SQuAD 2.0 dataset (any is_impossible question) what evaluate-v2.0.py prints
// (exact/f1/total and the HasAns_/NoAns_ splits; with --na-prob-file its best thresholds, and
// --na-prob-thresh, --out-file as it takes them). --transformers: the dict
// transformers' legacy run_squad.py logs as "Results: {...}" (train::squad_evaluate_transformers).
#include <cstdio>
#include <cmath>
#include <string>
#include <utility>

#include "cli/commands.hpp"
#include "core/json_safe.hpp"
#include "core/log.hpp"
#include "core/error.hpp"
#include "core/flags.hpp"
#include "core/fs.hpp"
#include "core/py_json.hpp"
#include "train/squad_metric.hpp"

namespace bertbench::cli {
namespace {

// How many of the dataset's question ids `predictions` answers, and how many questions there are
// (a dataset that is not SQuAD-shaped counts none: squad_evaluate reports it).
std::pair<size_t, size_t> matching_ids(const nlohmann::json& dataset, const nlohmann::json& predictions) {
    size_t questions = 0, matched = 0;
    if (!dataset.is_object() || !dataset.contains("data") || !dataset["data"].is_array() ||
        !predictions.is_object())
        return {0, 0};
    for (const auto& article : dataset["data"]) {
        if (!article.is_object() || !article.contains("paragraphs") || !article["paragraphs"].is_array())
            continue;
        for (const auto& p : article["paragraphs"]) {
            if (!p.is_object() || !p.contains("qas") || !p["qas"].is_array()) continue;
            for (const auto& qa : p["qas"]) {
                if (!qa.is_object() || !qa.contains("id") || !qa["id"].is_string()) continue;
                ++questions;
                matched += predictions.contains(qa["id"].get<std::string>()) ? 1 : 0;
            }
        }
    }
    return {matched, questions};
}

// evaluate-v2.0.py's --na-prob-file, read as Python's json reads it (squad's null_odds.json holds
// -Infinity where the best span scores -inf); a NaN is refused:
// the script sorts the questions by probability, an order NaN leaves undefined.
nlohmann::ordered_json read_na_probs(const std::string& path) {
    nlohmann::ordered_json probs = json_safe::parse_ordered(
        quote_py_nonfinite(read_file(path)), path,
        "no-answer probabilities (a JSON object of question id to number)");
    if (!probs.is_object()) return probs;  // squad_evaluate names what it is
    for (auto& [id, p] : probs.items()) {
        const auto x = p.is_string() ? py_nonfinite_value(p.get_ref<const std::string&>()) : std::nullopt;
        if (!x) continue;
        if (std::isnan(*x))
            fail("{}: question \"{}\": expected a number, got NaN (evaluate-v2.0.py sorts the questions "
                 "by it)", path, json_safe::printable(id));
        p = *x;
    }
    return probs;
}

}  // namespace

int cmd_squad_eval(int argc, char** argv) {
    Flags flags("squad-eval",
                "Score SQuAD predictions with the official metric (evaluate-v1.1.py; evaluate-v2.0.py for a "
                "SQuAD 2.0 dataset). Output is byte-identical to the official script's.");
    bool transformers = false;
    flags.add("transformers", &transformers,
              "print transformers' squad_evaluate instead, as its legacy run_squad.py logs it: "
              "Results: {'exact': ..., 'f1': ..., ...} (not in the official scripts)");
    // evaluate-v2.0.py's options (its short forms -n, -t, -o are not taken)
    std::string na_prob_file, out_file, out_image_dir;
    double na_prob_thresh = 1.0;
    flags.add("na-prob-file", &na_prob_file,
              "evaluate-v2.0.py's: each question's no-answer probability (squad's null_odds.json); "
              "adds its best-threshold search (best_exact, best_f1 and their thresholds)");
    flags.add("na-prob-thresh", &na_prob_thresh,
              "evaluate-v2.0.py's: a question whose probability is above this is taken as "
              "answered with nothing");
    flags.allow_infinity("na-prob-thresh");  // argparse's float() takes "inf"
    flags.add("out-file", &out_file,
              "evaluate-v2.0.py's: write the scores there as its json.dump does, instead of printing them");
    flags.add("out-image-dir", &out_image_dir, "evaluate-v2.0.py's precision-recall plots: not made here");
    flags.add_ignored("verbose", false, "(evaluate-v2.0.py parses it and prints nothing more)");
    flags.allow_positional("DATASET PREDICTIONS");
    if (!flags.parse(argc, argv)) return 0;
    const auto& pos = flags.positional();
    if (pos.size() != 2)
        fail("expected two arguments, DATASET (e.g. dev-v1.1.json) and PREDICTIONS (predictions.json), got {}",
             pos.size());
    for (size_t i = 0; i < 2; ++i)
        if (pos[i].empty()) fail("{}: expected a file name, got ''", i == 0 ? "DATASET" : "PREDICTIONS");
    if (!out_image_dir.empty())
        fail("--out-image-dir={}: evaluate-v2.0.py's precision-recall plots are not made here (hint: "
             "leave it out; the scores are the same)", out_image_dir);
    if (!(na_prob_thresh == na_prob_thresh))
        fail("--na-prob-thresh: expected a number, got nan");
    if (transformers && (!na_prob_file.empty() || !out_file.empty()))
        fail("--transformers: expected no --na-prob-file or --out-file (evaluate-v2.0.py's options; "
             "transformers' squad_evaluate as its run_squad.py logs it takes neither)");
    if (!out_file.empty()) {
        check_output_file_writable(out_file, "--out-file");
        check_output_not_input(out_file, "--out-file", {pos[0]}, "DATASET");
        check_output_not_input(out_file, "--out-file", {pos[1]}, "PREDICTIONS");
        if (!na_prob_file.empty()) check_output_not_input(out_file, "--out-file", {na_prob_file}, "--na-prob-file");
    }
    const nlohmann::json dataset = json_safe::parse(read_file(pos[0]), pos[0], "a SQuAD dataset (JSON)");
    nlohmann::ordered_json na_probs;
    train::SquadNaProbs na{nullptr, na_prob_file, na_prob_thresh};
    if (!na_prob_file.empty()) {
        na_probs = read_na_probs(na_prob_file);
        na.probs = &na_probs;
    }
    const std::string predictions_text = read_file(pos[1]);
    const nlohmann::json predictions = json_safe::parse(
        predictions_text, pos[1], "predictions (a JSON object of question id to answer)");
    // The official script says "Unanswered question ..." once per question; when none matches,
    // the likelier cause is a predictions file of another dataset: one line says so.
    if (const auto [matched, questions] = matching_ids(dataset, predictions);
        questions > 0 && matched == 0)
        log::warn("{}: none of its {} prediction id(s) is a question id of {} ({} questions): "
                  "every question scores 0 (expected the predictions of this dataset)",
                  pos[1], predictions.is_object() ? predictions.size() : 0, pos[0], questions);
    if (transformers) {
        std::vector<std::string> order;  // the ids as the file lists them
        const auto listed = json_safe::parse_ordered(predictions_text, pos[1], "predictions");
        if (listed.is_object())
            for (const auto& [id, text] : listed.items()) order.push_back(id);
        const auto results =
            train::squad_evaluate_transformers(dataset, predictions, order, pos[0], pos[1]);
        std::printf("Results: %s\n", train::py_dict_repr(results).c_str());
        return 0;
    }
    const std::string missing = train::squad_missing_prediction_lines(dataset, predictions, pos[0]);
    std::fwrite(missing.data(), 1, missing.size(), stdout);  // an id may hold a NUL
    std::fflush(stdout);
    const auto out = train::squad_evaluate(dataset, predictions, pos[0], pos[1], na);
    std::fwrite(out.stderr_text.data(), 1, out.stderr_text.size(), stderr);
    if (!out_file.empty() && out.version_2) {  // json.dump(out_eval, f): one line, no newline
        write_file_atomic(out_file, train::py_json_dumps(out.metrics));
        return 0;
    }
    if (!out_file.empty()) log::warn("--out-file={}: not written (evaluate-v1.1.py has no such option; "
                                     "the scores are printed)", out_file);
    if (!out.version_2 && flags.is_set("na-prob-thresh"))
        log::warn("--na-prob-thresh={:g}: not used (evaluate-v1.1.py has no such option: {} is a SQuAD 1.1 dataset, "
                  "every question answerable)", na_prob_thresh, pos[0]);
    std::fwrite(out.stdout_text.data(), 1, out.stdout_text.size(), stdout);
    return 0;
}

}  // namespace bertbench::cli
