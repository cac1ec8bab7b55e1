// `bertbench squad-eval DATASET PREDICTIONS`: the official SQuAD metric. Prints exactly what
// evaluate-v1.1.py prints ({"exact_match": ..., "f1": ...}; "Unanswered question ..." on stderr),
// or for a SQuAD 2.0 dataset (any is_impossible question) what evaluate-v2.0.py prints without
// --na-prob-file (exact/f1/total and the HasAns_/NoAns_ splits). --transformers: the dict
// transformers' legacy run_squad.py logs as "Results: {...}" (train::squad_evaluate_transformers).
#include <cstdio>
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

}  // namespace

int cmd_squad_eval(int argc, char** argv) {
    Flags flags("squad-eval",
                "Score SQuAD predictions with the official metric (evaluate-v1.1.py; evaluate-v2.0.py for a "
                "SQuAD 2.0 dataset). Output is byte-identical to the official script's.");
    bool transformers = false;
    flags.add("transformers", &transformers,
              "print transformers' squad_evaluate instead, as its legacy run_squad.py logs it: "
              "Results: {'exact': ..., 'f1': ..., ...} (not in the official scripts)");
    flags.allow_positional("DATASET PREDICTIONS");
    if (!flags.parse(argc, argv)) return 0;
    const auto& pos = flags.positional();
    if (pos.size() != 2)
        fail("expected two arguments, DATASET (e.g. dev-v1.1.json) and PREDICTIONS (predictions.json), got {}",
             pos.size());
    const nlohmann::json dataset = json_safe::parse(read_file(pos[0]), pos[0], "a SQuAD dataset (JSON)");
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
    const auto out = train::squad_evaluate(dataset, predictions, pos[0], pos[1]);
    std::fwrite(out.stderr_text.data(), 1, out.stderr_text.size(), stderr);
    std::fwrite(out.stdout_text.data(), 1, out.stdout_text.size(), stdout);
    return 0;
}

}  // namespace bertbench::cli
