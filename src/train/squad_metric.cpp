// evaluate-v1.1.py / evaluate-v2.0.py; see squad_metric.hpp. Sums are taken in the scripts' order
// (dataset order) so the floats printed are the same.
#include "train/squad_metric.hpp"

#include <utf8proc.h>

#include <algorithm>
#include <map>
#include <unordered_map>

#include "core/error.hpp"
#include "core/py_json.hpp"
#include "data/squad.hpp"
#include "data/unicode_text.hpp"

namespace bertbench::train {

namespace {

// Python re's \w for str patterns: str.isalnum() or '_'.
bool is_word(char32_t c) {
    if (c < 0x80) return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '_';
    switch (utf8proc_category(static_cast<utf8proc_int32_t>(c))) {
        case UTF8PROC_CATEGORY_LU: case UTF8PROC_CATEGORY_LL: case UTF8PROC_CATEGORY_LT:
        case UTF8PROC_CATEGORY_LM: case UTF8PROC_CATEGORY_LO: case UTF8PROC_CATEGORY_ND:
        case UTF8PROC_CATEGORY_NL: case UTF8PROC_CATEGORY_NO:
            return true;
        default:
            return false;
    }
}

bool is_ascii_punct(char32_t c) {
    return (c >= 33 && c <= 47) || (c >= 58 && c <= 64) || (c >= 91 && c <= 96) || (c >= 123 && c <= 126);
}

std::vector<std::u32string> normalized_tokens(std::string_view s) {
    const std::u32string in = data::utf8_to_u32(s);
    std::vector<char32_t> chars(in.begin(), in.end()), lowered;
    data::uni::py_lower(chars, lowered);
    std::u32string t;
    for (char32_t c : lowered)
        if (!is_ascii_punct(c)) t += c;
    // re.sub(r'\b(a|an|the)\b', ' ', t): boundaries are judged on t itself.
    std::u32string u;
    const size_t n = t.size();
    for (size_t i = 0; i < n;) {
        size_t match = 0;
        if (i == 0 || !is_word(t[i - 1])) {
            for (std::u32string_view w : {std::u32string_view(U"a"), std::u32string_view(U"an"),
                                          std::u32string_view(U"the")}) {
                if (t.compare(i, w.size(), w) == 0 && (i + w.size() == n || !is_word(t[i + w.size()]))) {
                    match = w.size();
                    break;
                }
            }
        }
        if (match) {
            u += U' ';
            i += match;
        } else {
            u += t[i++];
        }
    }
    return data::py_split(u);
}

std::string join_utf8(const std::vector<std::u32string>& toks) {
    std::u32string j;
    for (size_t i = 0; i < toks.size(); ++i) {
        if (i) j += U' ';
        j += toks[i];
    }
    return data::u32_to_utf8(j);
}

// Counter(a) & Counter(b) summed.
size_t common_count(const std::vector<std::u32string>& a, const std::vector<std::u32string>& b) {
    std::map<std::u32string, long> ca;
    for (const auto& x : a) ++ca[x];
    size_t same = 0;
    for (const auto& x : b) {
        auto it = ca.find(x);
        if (it != ca.end() && it->second > 0) --it->second, ++same;
    }
    return same;
}

double f1_of(const std::vector<std::u32string>& pred, const std::vector<std::u32string>& gold) {
    const size_t same = common_count(pred, gold);
    if (same == 0) return 0;
    const double precision = 1.0 * static_cast<double>(same) / static_cast<double>(pred.size());
    const double recall = 1.0 * static_cast<double>(same) / static_cast<double>(gold.size());
    return (2 * precision * recall) / (precision + recall);
}

std::string dumps_float(double x) {
    std::string s;
    append_py_json_float(s, x);
    return s;
}

const nlohmann::json& need(const nlohmann::json& j, const char* key, const std::string& where) {
    if (!j.is_object() || !j.contains(key)) fail("{}: missing \"{}\"", where, key);
    return j[key];
}

// Every question of the dataset in file order: id and answer texts.
struct Question {
    std::string id;
    std::vector<std::string> answers;
    bool impossible = false;
};

std::vector<Question> questions_of(const nlohmann::json& dataset, const std::string& where) {
    const auto& data = need(dataset, "data", where);
    if (!data.is_array()) fail("{}: \"data\" must be a list", where);
    std::vector<Question> out;
    for (const auto& article : data) {
        const auto& paragraphs = need(article, "paragraphs", where);
        if (!paragraphs.is_array()) fail("{}: \"paragraphs\" must be a list", where);
        for (const auto& p : paragraphs) {
            const auto& qas = need(p, "qas", where);
            if (!qas.is_array()) fail("{}: \"qas\" must be a list", where);
            for (const auto& qa : qas) {
                Question q;
                const auto& id = need(qa, "id", where);
                if (!id.is_string()) fail("{}: a question id is not a string ({})", where, id.dump());
                q.id = id.get<std::string>();
                const auto& answers = need(qa, "answers", fmt::format("{}: question \"{}\"", where, q.id));
                if (!answers.is_array()) fail("{}: question \"{}\": \"answers\" must be a list", where, q.id);
                for (const auto& a : answers) {
                    const auto& text = need(a, "text", fmt::format("{}: question \"{}\"", where, q.id));
                    if (!text.is_string()) fail("{}: question \"{}\": an answer text is not a string", where, q.id);
                    q.answers.push_back(text.get<std::string>());
                }
                q.impossible = qa.contains("is_impossible") && qa["is_impossible"].is_boolean() &&
                               qa["is_impossible"].get<bool>();
                out.push_back(std::move(q));
            }
        }
    }
    return out;
}

const std::string* prediction_of(const nlohmann::json& preds, const std::string& id, const std::string& where) {
    const auto it = preds.find(id);
    if (it == preds.end()) return nullptr;
    if (!it->is_string())
        fail("{}: the prediction for question \"{}\": expected a string, found {}", where, id, it->type_name());
    return &it->get_ref<const std::string&>();
}

}  // namespace

std::string squad_normalize_answer(std::string_view s) { return join_utf8(normalized_tokens(s)); }

bool squad_exact_match(std::string_view prediction, std::string_view ground_truth) {
    return squad_normalize_answer(prediction) == squad_normalize_answer(ground_truth);
}

double squad_f1(std::string_view prediction, std::string_view ground_truth) {
    return f1_of(normalized_tokens(prediction), normalized_tokens(ground_truth));
}

namespace {

// evaluate-v2.0.py's dataset: a question without an answer (is_impossible), or "version" "v2.0"
// (the official SQuAD 2.0 files say so, and a 2.0 file may hold answerable questions only).
bool is_version_2(const nlohmann::json& dataset, const std::vector<Question>& questions) {
    if (std::any_of(questions.begin(), questions.end(), [](const Question& q) { return q.impossible; })) return true;
    const auto v = dataset.find("version");
    return v != dataset.end() && v->is_string() && v->get<std::string>() == "v2.0";
}

// evaluate-v2.0.py's (and transformers' get_raw_scores') per-question scores: exact and F1 against
// the answers that normalize to something ("" when none), in dataset order by unique id (a
// repeated id keeps its first position and last score). A question without a prediction is an
// error: `script` (evaluate-v2.0.py, transformers' squad_evaluate) stops there with KeyError.
struct V2Scores {
    std::vector<std::string> order;
    std::unordered_map<std::string, std::pair<double, double>> scores;  // exact, f1
    std::unordered_map<std::string, bool> has_ans;
};

V2Scores v2_scores(const std::vector<Question>& questions, const nlohmann::json& predictions,
                   const std::string& predictions_where, std::string_view script) {
    V2Scores out;
    for (const Question& q : questions) {
        if (!out.has_ans.count(q.id)) out.order.push_back(q.id);
        out.has_ans[q.id] = !q.answers.empty();
    }
    for (const Question& q : questions) {
        std::vector<std::vector<std::u32string>> golds;
        for (const auto& a : q.answers) {
            auto t = normalized_tokens(a);
            if (!t.empty()) golds.push_back(std::move(t));
        }
        if (golds.empty()) golds.emplace_back();  // only the empty answer is correct
        const std::string* pred = prediction_of(predictions, q.id, predictions_where);
        if (!pred)  // the CLI prints evaluate-v2.0.py's "Missing prediction" lines first
            fail("{}: no prediction for question \"{}\" ({} prints \"Missing prediction\" and "
                 "then stops with KeyError)",
                 predictions_where, q.id, script);
        const auto p = normalized_tokens(*pred);
        const std::string pn = join_utf8(p);
        double em = 0, f1 = 0;
        for (size_t i = 0; i < golds.size(); ++i) {
            const double e = join_utf8(golds[i]) == pn ? 1 : 0;
            double f;
            if (golds[i].empty() || p.empty())
                f = golds[i] == p ? 1 : 0;
            else
                f = f1_of(p, golds[i]);
            if (i == 0 || e > em) em = e;
            if (i == 0 || f > f1) f1 = f;
        }
        out.scores[q.id] = {em, f1};
    }
    return out;
}

// evaluate-v2.0.py's make_eval_dict and its HasAns_/NoAns_ splits (sums in dataset order), in its
// key order: exact, f1, total, then the same prefixed for the questions with and without answers.
nlohmann::ordered_json v2_metrics(const V2Scores& v2) {
    nlohmann::ordered_json out;
    const auto add = [&](const std::string& prefix, const std::vector<std::string>& ids) {
        double em = 0, f1 = 0;
        for (const auto& id : ids) em += v2.scores.at(id).first, f1 += v2.scores.at(id).second;
        const double total = static_cast<double>(ids.size());
        out[prefix + "exact"] = 100.0 * em / total, out[prefix + "f1"] = 100.0 * f1 / total;
        out[prefix + "total"] = ids.size();
    };
    add("", v2.order);
    std::vector<std::string> with, without;
    for (const auto& id : v2.order) (v2.has_ans.at(id) ? with : without).push_back(id);
    if (!with.empty()) add("HasAns_", with);
    if (!without.empty()) add("NoAns_", without);
    return out;
}

// find_all_best_thresh (evaluate-v2.0.py; transformers' copy): the questions walked in `walk`'s
// order (each id with its no-answer probability, stably sorted by it), starting from the number
// without an answer, an answerable one adding its raw score and an unanswerable one -1 when
// something was predicted (0 for ""); the best running total (first reached) and the probability
// that reached it (0.0 when none beat the start), over all the dataset's questions.
void add_best_thresholds(nlohmann::ordered_json& out, const V2Scores& raw, const nlohmann::json& predictions,
                         std::vector<std::pair<std::string, nlohmann::json>> walk) {
    std::stable_sort(walk.begin(), walk.end(),
                     [](const auto& a, const auto& b) { return a.second.template get<double>() < b.second.template get<double>(); });
    const double without = static_cast<double>(std::count_if(
        raw.order.begin(), raw.order.end(), [&](const auto& id) { return !raw.has_ans.at(id); }));
    for (const bool f1 : {false, true}) {
        double cur = without, best = cur;
        nlohmann::json thresh = 0.0;
        for (const auto& [id, prob] : walk) {
            if (!raw.scores.count(id)) continue;  // not a question of the dataset
            const auto& [em, f] = raw.scores.at(id);
            cur += raw.has_ans.at(id) ? (f1 ? f : em)
                                      : (predictions[id].get_ref<const std::string&>().empty() ? 0 : -1);
            if (cur > best) best = cur, thresh = prob;
        }
        const std::string key = f1 ? "best_f1" : "best_exact";
        out[key] = 100.0 * best / static_cast<double>(raw.order.size());
        out[key + "_thresh"] = thresh;
    }
}

}  // namespace

std::string squad_missing_prediction_lines(const nlohmann::json& dataset, const nlohmann::json& predictions,
                                           const std::string& dataset_where) {
    const std::vector<Question> questions = questions_of(dataset, dataset_where);
    std::string out;
    if (!predictions.is_object() || !is_version_2(dataset, questions)) return out;
    for (const Question& q : questions)
        if (!predictions.contains(q.id)) out += "Missing prediction for " + q.id + "\n";
    return out;
}

bool squad_scorable(const nlohmann::json& dataset, const std::string& dataset_where) {
    return dataset.contains("version") || is_version_2(dataset, questions_of(dataset, dataset_where));
}

SquadEvalOutput squad_evaluate(const nlohmann::json& dataset, const nlohmann::json& predictions,
                               const std::string& dataset_where, const std::string& predictions_where,
                               const SquadNaProbs& na) {
    if (!predictions.is_object())
        fail("{}: expected a JSON object of question id -> answer text, found {}", predictions_where,
             predictions.type_name());
    const std::vector<Question> questions = questions_of(dataset, dataset_where);
    SquadEvalOutput out;
    out.version_2 = is_version_2(dataset, questions);
    if (!out.version_2) {
        if (na.probs)
            fail("{}: no-answer probabilities for a SQuAD 1.1 dataset, {} (evaluate-v1.1.py takes "
                 "none; they are for a SQuAD 2.0 dataset's evaluate-v2.0.py)", na.where, dataset_where);
        if (dataset.contains("version")) {
            const auto& v = dataset["version"];
            const std::string vs = v.is_string() ? v.get<std::string>() : v.dump();
            if (vs != "1.1")
                out.stderr_text += "Evaluation expects v-1.1, but got dataset with v-" + vs + "\n";
        } else {
            fail("{}: missing \"version\" (evaluate-v1.1.py reads it)", dataset_where);
        }
        double f1 = 0;
        long exact = 0;
        for (const Question& q : questions) {
            const std::string* pred = prediction_of(predictions, q.id, predictions_where);
            if (!pred) {
                out.stderr_text += "Unanswered question " + q.id + " will receive score 0.\n";
                continue;
            }
            if (q.answers.empty())
                fail("{}: question \"{}\" has no answers (evaluate-v1.1.py needs at least one)", dataset_where, q.id);
            const auto p = normalized_tokens(*pred);
            const std::string pn = join_utf8(p);
            bool em = false;
            double best = 0;
            for (size_t i = 0; i < q.answers.size(); ++i) {
                const auto g = normalized_tokens(q.answers[i]);
                em = em || join_utf8(g) == pn;
                const double s = f1_of(p, g);
                if (i == 0 || s > best) best = s;
            }
            exact += em ? 1 : 0;
            f1 += best;
        }
        if (questions.empty()) fail("{}: the dataset has no questions", dataset_where);
        const double total = static_cast<double>(questions.size());
        const double em_pct = 100.0 * static_cast<double>(exact) / total, f1_pct = 100.0 * f1 / total;
        out.stdout_text = "{\"exact_match\": " + dumps_float(em_pct) + ", \"f1\": " + dumps_float(f1_pct) + "}\n";
        out.metrics = nlohmann::ordered_json{{"exact_match", em_pct}, {"f1", f1_pct}};
        return out;
    }

    // v2.0: scores per unique id (a repeated id keeps its first position and last score).
    const V2Scores raw = v2_scores(questions, predictions, predictions_where, "evaluate-v2.0.py");
    if (raw.order.empty()) fail("{}: the dataset has no questions", dataset_where);
    // apply_no_ans_threshold: a question whose probability is above the threshold scores as the
    // empty answer does (1 when it has none, else 0); without a file every probability is 0.0.
    std::vector<std::pair<std::string, nlohmann::json>> walk;
    if (na.probs) {
        if (!na.probs->is_object())
            fail("{}: expected a JSON object of question id -> no-answer probability, found {}", na.where,
                 na.probs->type_name());
        for (const auto& [id, p] : na.probs->items()) {
            if (!p.is_number())
                fail("{}: question \"{}\": expected a number (its no-answer probability), found {}", na.where,
                     id, p.type_name());
            walk.emplace_back(id, p);
        }
    }
    V2Scores v2 = raw;
    for (const auto& id : raw.order) {
        double p = 0.0;
        if (na.probs) {
            const auto it = na.probs->find(id);
            if (it == na.probs->end())
                fail("{}: no probability for question \"{}\" of {} (evaluate-v2.0.py stops with KeyError)",
                     na.where, id, dataset_where);
            p = it->get<double>();
        }
        if (p > na.thresh) v2.scores[id] = {raw.has_ans.at(id) ? 0.0 : 1.0, raw.has_ans.at(id) ? 0.0 : 1.0};
    }
    out.metrics = v2_metrics(v2);
    if (na.probs) add_best_thresholds(out.metrics, raw, predictions, std::move(walk));
    std::string text;  // json.dumps(metrics, indent=2)
    for (const auto& [key, value] : out.metrics.items())
        text += (text.empty() ? "{\n  \"" : ",\n  \"") + key + "\": " +
                (value.is_number_float() ? dumps_float(value.get<double>()) : value.dump());
    out.stdout_text += text + "\n}\n";
    return out;
}

nlohmann::ordered_json squad_evaluate_transformers(const nlohmann::json& dataset,
                                                   const nlohmann::json& predictions,
                                                   const std::vector<std::string>& prediction_order,
                                                   const std::string& dataset_where,
                                                   const std::string& predictions_where) {
    if (!predictions.is_object())
        fail("{}: expected a JSON object of question id -> answer text, found {}",
             predictions_where, predictions.type_name());
    std::vector<Question> questions = questions_of(dataset, dataset_where);
    for (Question& q : questions)  // SquadProcessor: an impossible question has no answers
        if (q.impossible) q.answers.clear();
    const V2Scores v2 =
        v2_scores(questions, predictions, predictions_where, "transformers' squad_evaluate");
    if (v2.order.empty()) fail("{}: the dataset has no questions", dataset_where);
    nlohmann::ordered_json out = v2_metrics(v2);
    // find_all_best_thresh with every no-answer probability 0: the questions in the predictions'
    // order (run_squad.py's are in the dataset's order, which an empty list stands for)
    std::vector<std::pair<std::string, nlohmann::json>> walk;
    for (const auto& id : prediction_order.empty() ? v2.order : prediction_order) walk.emplace_back(id, 0.0);
    add_best_thresholds(out, v2, predictions, std::move(walk));
    return out;
}

namespace {

std::string flat_dict(const nlohmann::ordered_json& dict, const char* quote, bool json) {
    std::string out = "{";
    for (const auto& [key, value] : dict.items()) {
        if (out.size() > 1) out += ", ";
        out += quote + key + quote + ": ";
        out += value.is_number_float()
                   ? (json ? dumps_float(value.get<double>()) : py_float_repr(value.get<double>()))
                   : value.dump();
    }
    return out + "}";
}

}  // namespace

std::string py_dict_repr(const nlohmann::ordered_json& dict) {
    return flat_dict(dict, "'", false);
}

std::string py_json_dumps(const nlohmann::ordered_json& dict) {
    return flat_dict(dict, "\"", true);
}

}  // namespace bertbench::train
