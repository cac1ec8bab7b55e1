// `bertbench squad-eval DATASET PREDICTIONS`: the official SQuAD metric. Prints exactly what
// evaluate-v1.1.py prints ({"exact_match": ..., "f1": ...}; "Unanswered question ..." on stderr), or
// for a SQuAD 2.0 dataset (any is_impossible question) what evaluate-v2.0.py prints without
// --na-prob-file (exact/f1/total and the HasAns_/NoAns_ splits).
#include <cstdio>
#include <string>

#include "cli/commands.hpp"
#include "core/json_safe.hpp"
#include "core/error.hpp"
#include "core/flags.hpp"
#include "core/fs.hpp"
#include "core/py_json.hpp"
#include "train/squad_metric.hpp"

namespace bertbench::cli {

int cmd_squad_eval(int argc, char** argv) {
    Flags flags("squad-eval",
                "Score SQuAD predictions with the official metric (evaluate-v1.1.py; evaluate-v2.0.py for a "
                "SQuAD 2.0 dataset). Output is byte-identical to the official script's.");
    flags.allow_positional("DATASET PREDICTIONS");
    if (!flags.parse(argc, argv)) return 0;
    const auto& pos = flags.positional();
    if (pos.size() != 2)
        fail("expected two arguments, DATASET (e.g. dev-v1.1.json) and PREDICTIONS (predictions.json), got {}",
             pos.size());
    const nlohmann::json dataset = json_safe::parse(read_file(pos[0]), pos[0], "a SQuAD dataset (JSON)");
    const nlohmann::json predictions =
        json_safe::parse(read_file(pos[1]), pos[1], "predictions (a JSON object of question id to answer)");
    const auto out = train::squad_evaluate(dataset, predictions, pos[0], pos[1]);
    std::fputs(out.stderr_text.c_str(), stderr);
    std::fputs(out.stdout_text.c_str(), stdout);
    return 0;
}

}  // namespace bertbench::cli
