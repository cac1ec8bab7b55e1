// write_predictions and its helpers; see squad_predict.hpp. Text positions are code points
// (std::u32string), as Python's str indexes them.
#include "train/squad_predict.hpp"

#include <algorithm>
#include <cmath>
#include <limits>
#include <numeric>
#include <sstream>
#include <unordered_map>
#include <unordered_set>

#include "core/error.hpp"
#include "core/fs.hpp"
#include "core/json_safe.hpp"
#include "core/py_json.hpp"
#include "data/tokenizer.hpp"
#include "train/py_ordered_dict.hpp"

namespace bertbench::train {

using data::u32_to_utf8;
using data::utf8_to_u32;

std::vector<SquadRawResult> read_squad_raw_results(const std::string& path) {
    const std::string text = read_file(path);
    std::vector<SquadRawResult> out;
    std::unordered_map<int64_t, size_t> line_of;  // unique_id -> line: each feature once
    size_t pos = 0, line_no = 0;
    while (pos < text.size()) {
        size_t end = text.find('\n', pos);
        if (end == std::string::npos) end = text.size();
        const std::string_view line(text.data() + pos, end - pos);
        pos = end + 1;
        ++line_no;
        if (line.find_first_not_of(" \t\r") == std::string_view::npos) continue;
        const std::string where = fmt::format("--raw_results {}: line {}", path, line_no);
        const nlohmann::json j = json_safe::parse(quote_py_nonfinite(line), where,
                                                  "one JSON object per line (unique_id, start_logits, end_logits)", 4);
        SquadRawResult r;
        if (!j.is_object() || !j.contains("unique_id") || !j["unique_id"].is_number_integer())
            fail("{}: expected an object with an integer \"unique_id\"", where);
        r.unique_id = j["unique_id"].get<int64_t>();
        if (const auto [it, fresh] = line_of.emplace(r.unique_id, line_no); !fresh)
            fail("{}: unique_id {}: expected each feature once, got it again (first on line {})",
                 where, r.unique_id, it->second);
        for (const char* key : {"start_logits", "end_logits"}) {
            if (!j.contains(key) || !j[key].is_array())
                fail("{}: unique_id {}: expected \"{}\" as a list of numbers", where, r.unique_id, key);
            auto& dst = key[0] == 's' ? r.start_logits : r.end_logits;
            for (const auto& v : j[key]) {
                if (const auto x = v.is_string() ? py_nonfinite_value(v.get_ref<const std::string&>()) : std::nullopt) {
                    dst.push_back(*x);
                    continue;
                }
                if (!v.is_number())
                    fail("{}: unique_id {}: \"{}\" holds a {}, expected numbers", where, r.unique_id, key,
                         v.type_name());
                dst.push_back(v.get<double>());
            }
        }
        out.push_back(std::move(r));
    }
    return out;
}

std::string squad_raw_results_jsonl(const std::vector<SquadRawResult>& results) {
    std::string out;
    for (const auto& r : results) {
        out += fmt::format("{{\"unique_id\":{},\"start_logits\":[", r.unique_id);
        for (size_t i = 0; i < r.start_logits.size(); ++i) {
            if (i) out += ',';
            append_py_json_float(out, r.start_logits[i]);
        }
        out += "],\"end_logits\":[";
        for (size_t i = 0; i < r.end_logits.size(); ++i) {
            if (i) out += ',';
            append_py_json_float(out, r.end_logits[i]);
        }
        out += "]}\n";
    }
    return out;
}

std::vector<int> squad_best_indexes(std::span<const double> logits, int n_best_size) {
    std::vector<int> idx(logits.size());
    std::iota(idx.begin(), idx.end(), 0);
    // sorted(..., reverse=True) keeps equal keys in their original order.
    std::stable_sort(idx.begin(), idx.end(), [&](int a, int b) {
        return logits[static_cast<size_t>(a)] > logits[static_cast<size_t>(b)];
    });
    if (n_best_size < 0) n_best_size = 0;
    if (idx.size() > static_cast<size_t>(n_best_size)) idx.resize(static_cast<size_t>(n_best_size));
    return idx;
}

std::vector<double> squad_softmax(std::span<const double> scores) {
    if (scores.empty()) return {};
    double max_score = scores[0];
    for (double s : scores)
        if (s > max_score) max_score = s;
    std::vector<double> probs;
    probs.reserve(scores.size());
    double total = 0.0;
    for (double s : scores) {
        probs.push_back(std::exp(s - max_score));
        total += probs.back();
    }
    for (double& p : probs) p /= total;
    return probs;
}

namespace {

// _strip_spaces: the text without U+0020 and, per kept character, its index in the text.
void strip_spaces(const std::u32string& s, std::u32string& ns, std::vector<int>& ns_to_s) {
    ns.clear(), ns_to_s.clear();
    for (size_t i = 0; i < s.size(); ++i) {
        if (s[i] == U' ') continue;
        ns_to_s.push_back(static_cast<int>(i));
        ns += s[i];
    }
}

void log_line(std::string* log, const std::string& msg) {
    if (log) *log += msg + "\n";
}

}  // namespace

std::string squad_final_text(std::string_view pred_text_utf8, std::string_view orig_text_utf8,
                             bool do_lower_case, std::string* verbose_log, data::TokenizerRules rules) {
    data::BasicTokenizer tokenizer(do_lower_case, rules);
    data::TokenList toks;
    tokenizer.tokenize(orig_text_utf8, toks);
    std::string tok_utf8;
    for (size_t i = 0; i < toks.size(); ++i) {
        if (i) tok_utf8 += ' ';
        tok_utf8 += toks[i];
    }
    const std::u32string tok_text = utf8_to_u32(tok_utf8), pred = utf8_to_u32(pred_text_utf8),
                         orig = utf8_to_u32(orig_text_utf8);
    const size_t found = tok_text.find(pred);
    if (found == std::u32string::npos) {
        log_line(verbose_log, fmt::format("Unable to find text: '{}' in '{}'", pred_text_utf8, orig_text_utf8));
        return std::string(orig_text_utf8);
    }
    const int64_t start = static_cast<int64_t>(found);
    const int64_t end = start + static_cast<int64_t>(pred.size()) - 1;
    std::u32string orig_ns, tok_ns;
    std::vector<int> orig_map, tok_map;
    strip_spaces(orig, orig_ns, orig_map);
    strip_spaces(tok_text, tok_ns, tok_map);
    if (orig_ns.size() != tok_ns.size()) {
        log_line(verbose_log, fmt::format("Length not equal after stripping spaces: '{}' vs '{}'",
                                          u32_to_utf8(orig_ns), u32_to_utf8(tok_ns)));
        return std::string(orig_text_utf8);
    }
    // tok_s_to_ns_map inverted: position in tok_text -> position without spaces (-1: a space).
    std::vector<int> tok_s_to_ns(tok_text.size(), -1);
    for (size_t i = 0; i < tok_map.size(); ++i) tok_s_to_ns[static_cast<size_t>(tok_map[i])] = static_cast<int>(i);
    auto project = [&](int64_t p) -> int64_t {
        if (p < 0 || p >= static_cast<int64_t>(tok_s_to_ns.size())) return -1;
        const int ns = tok_s_to_ns[static_cast<size_t>(p)];
        if (ns < 0 || ns >= static_cast<int>(orig_map.size())) return -1;
        return orig_map[static_cast<size_t>(ns)];
    };
    const int64_t orig_start = project(start);
    if (orig_start < 0) {
        log_line(verbose_log, "Couldn't map start position");
        return std::string(orig_text_utf8);
    }
    const int64_t orig_end = project(end);
    if (orig_end < 0) {
        log_line(verbose_log, "Couldn't map end position");
        return std::string(orig_text_utf8);
    }
    if (orig_end < orig_start) return "";
    return u32_to_utf8(std::u32string_view(orig).substr(static_cast<size_t>(orig_start),
                                                        static_cast<size_t>(orig_end - orig_start + 1)));
}

namespace {

struct NbestEntry {
    std::string text;
    double start_logit = 0, end_logit = 0;
    bool int_logits = false;  // the reference's int 0s (json.dumps writes 0, not 0.0)
};

}  // namespace

SquadPredictions squad_write_predictions(const std::vector<data::SquadExample>& examples,
                                         const std::vector<data::SquadFeature>& features,
                                         const std::vector<SquadRawResult>& results,
                                         const SquadPredictOptions& opt, const std::string& results_where,
                                         std::string* verbose_log) {
    std::vector<std::vector<size_t>> by_example(examples.size());
    std::unordered_set<int64_t> feature_ids;
    for (size_t i = 0; i < features.size(); ++i) {
        const auto ei = static_cast<size_t>(features[i].example_index);
        BB_CHECK(ei < examples.size());
        by_example[ei].push_back(i);
        feature_ids.insert(features[i].unique_id);
    }
    std::unordered_map<int64_t, const SquadRawResult*> by_id;
    for (const auto& r : results) {
        if (!feature_ids.count(r.unique_id))
            fail("{}: unique_id {} is not one of the {} features made from the predict file (ids {}..{}); "
                 "expected raw results from the same --predict_file, --max_seq_length, --doc_stride and "
                 "--max_query_length", results_where, r.unique_id, features.size(),
                 features.empty() ? 0 : features.front().unique_id,
                 features.empty() ? 0 : features.back().unique_id);
        // The reference ranks the logits with Python's sorted(), which only compares with `<`:
        // where a NaN lands depends on the sort's internals (its runs and merges, which changed
        // with Python 3.11), so no ranking is the reference's. A model that outputs NaN has failed.
        for (const auto* v : {&r.start_logits, &r.end_logits})
            for (size_t k = 0; k < v->size(); ++k)
                if (std::isnan((*v)[k]))
                    fail(
                        "{}: unique_id {}: {}[{}] is NaN, expected numbers (Python's sort, which "
                        "ranks the n-best, has no order for NaN)",
                        results_where, r.unique_id,
                        v == &r.start_logits ? "start_logits" : "end_logits", k);
        by_id[r.unique_id] = &r;
    }
    for (const auto& f : features) {
        const auto it = by_id.find(f.unique_id);
        const std::string& qid = examples[static_cast<size_t>(f.example_index)].qas_id;
        if (it == by_id.end())
            fail("{}: no result for unique_id {} (question \"{}\"); expected one line per feature ({} features)",
                 results_where, f.unique_id, qid, features.size());
        const size_t n = f.input_ids.size();
        if (it->second->start_logits.size() != n || it->second->end_logits.size() != n)
            fail("{}: unique_id {} (question \"{}\"): expected {} start and end logits (max_seq_length), "
                 "found {} and {}", results_where, f.unique_id, qid, n, it->second->start_logits.size(),
                 it->second->end_logits.size());
    }

    struct Prelim {
        size_t feature_index;
        int start, end;
        double start_logit, end_logit;
        bool int_logits = false;
    };
    const auto by_score = [](const auto& a, const auto& b) {
        return a.start_logit + a.end_logit > b.start_logit + b.end_logit;
    };
    OrderedMap<std::string> all_predictions;
    OrderedMap<std::vector<std::pair<NbestEntry, double>>> all_nbest;
    OrderedMap<double> scores_diff;
    std::vector<std::string> without_null_odds;
    std::vector<Prelim> prelim;
    std::vector<NbestEntry> nbest;
    std::unordered_set<std::string> seen;
    for (size_t ei = 0; ei < examples.size(); ++ei) {
        const data::SquadExample& example = examples[ei];
        const auto& feats = by_example[ei];
        // NVIDIA's get_answers walks the features: a question without one (a context with no word
        // piece) gets no entry at all; write_predictions gives it the "empty" nonce.
        if (opt.nvidia_answers && feats.empty()) continue;
        // The text of a candidate span: the window's WordPieces joined and de-tokenized, projected
        // onto the original words by get_final_text.
        const auto answer_text = [&](const Prelim& p) {
            const data::SquadFeature& f = features[feats[p.feature_index]];
            std::string tok_text;
            for (int k = p.start; k <= p.end; ++k) {
                if (k > p.start) tok_text += ' ';
                tok_text += f.tokens[static_cast<size_t>(k)];
            }
            auto replace_all = [](std::string& s, std::string_view from) {
                std::string out;
                size_t i = 0;
                for (size_t j; (j = s.find(from, i)) != std::string::npos; i = j + from.size())
                    out.append(s, i, j - i);
                out.append(s, i, std::string::npos);
                s = std::move(out);
            };
            replace_all(tok_text, " ##");
            if (!opt.transformers_answers) replace_all(tok_text, "##");
            tok_text = u32_to_utf8(data::py_split_join(utf8_to_u32(tok_text)));
            const int a = f.orig_index(p.start), b = f.orig_index(p.end);
            std::string orig_text;
            for (int k = a; k <= b; ++k) {
                if (k > a) orig_text += ' ';
                orig_text += example.doc_tokens[static_cast<size_t>(k)];
            }
            return squad_final_text(tok_text, orig_text, opt.do_lower_case, verbose_log,
                                    opt.tokenizer_rules);
        };
        // Up to n_best_size entries from the candidates in score order (stable), each text once
        // (the null span's "" included).
        const auto take_nbest = [&](std::vector<Prelim>& cands) {
            std::stable_sort(cands.begin(), cands.end(), by_score);
            seen.clear();
            std::vector<NbestEntry> out;
            for (const Prelim& p : cands) {
                if (static_cast<int>(out.size()) >= opt.n_best_size) break;
                std::string final_text = p.start > 0 ? answer_text(p) : "";
                if (!seen.insert(final_text).second && p.start > 0) continue;
                out.push_back({std::move(final_text), p.start_logit, p.end_logit, p.int_logits});
            }
            return out;
        };
        prelim.clear();
        nbest.clear();
        // run_squad.py starts the null score at 1e6 (NVIDIA's at infinity) and its logits as the
        // ints 0: still ints when no window's null score is below that (or it is NaN), and
        // json.dumps writes them "0"
        double score_null = opt.nvidia_answers ? std::numeric_limits<double>::infinity() : 1000000;
        size_t min_null_feature_index = 0;
        double null_start_logit = 0, null_end_logit = 0;
        bool null_int = true;
        for (size_t fi = 0; fi < feats.size(); ++fi) {
            const data::SquadFeature& f = features[feats[fi]];
            const SquadRawResult& r = *by_id.at(f.unique_id);
            const auto starts = squad_best_indexes(r.start_logits, opt.n_best_size);
            const auto ends = squad_best_indexes(r.end_logits, opt.n_best_size);
            if (opt.version_2_with_negative) {
                const double s = r.start_logits[0] + r.end_logits[0];
                if (s < score_null) {
                    score_null = s, min_null_feature_index = fi;
                    null_start_logit = r.start_logits[0], null_end_logit = r.end_logits[0];
                    null_int = false;
                }
            }
            // transformers keeps a window's tokens up to its first [PAD] (the first pad id of
            // its padded input_ids), so a literal [PAD] in the text ends the window there
            const auto end = opt.transformers_answers
                                 ? std::find(f.tokens.begin(), f.tokens.end(), "[PAD]")
                                 : f.tokens.end();
            const int n_tokens = static_cast<int>(end - f.tokens.begin());
            for (int s : starts)
                for (int e : ends) {
                    if (s >= n_tokens || e >= n_tokens) continue;
                    if (!f.in_doc(s) || !f.in_doc(e)) continue;
                    if (!f.max_context(s)) continue;
                    if (e < s) continue;
                    if (e - s + 1 > opt.max_answer_length) continue;
                    prelim.push_back({fi, s, e, r.start_logits[static_cast<size_t>(s)],
                                      r.end_logits[static_cast<size_t>(e)], false});
                }
            if (opt.nvidia_answers) {  // each window's n-best on its own, appended in window order
                for (NbestEntry& e : take_nbest(prelim)) nbest.push_back(std::move(e));
                prelim.clear();
            }
        }
        if (opt.nvidia_answers) {
            // the merged lists and the null answer, in score order (stable), the first n_best_size
            if (opt.version_2_with_negative)
                nbest.push_back({"", null_start_logit, null_end_logit, null_int});
            std::stable_sort(nbest.begin(), nbest.end(), by_score);
            if (static_cast<int>(nbest.size()) > opt.n_best_size)
                nbest.resize(static_cast<size_t>(opt.n_best_size));
        } else {
            if (opt.version_2_with_negative)
                prelim.push_back(
                    {min_null_feature_index, 0, 0, null_start_logit, null_end_logit, null_int});
            nbest = take_nbest(prelim);
            if (opt.version_2_with_negative && !seen.count(""))
                nbest.push_back({"", null_start_logit, null_end_logit, null_int});
            // transformers: a 2.0 list of the null answer alone gets the nonce in front
            if (opt.transformers_answers && opt.version_2_with_negative && nbest.size() == 1)
                nbest.insert(nbest.begin(), {"empty", 0.0, 0.0});
        }
        if (nbest.empty()) nbest.push_back({"empty", 0.0, 0.0});

        std::vector<double> totals;
        const NbestEntry* best_non_null = nullptr;
        for (const auto& e : nbest) {
            totals.push_back(e.start_logit + e.end_logit);
            if (!best_non_null && !e.text.empty()) best_non_null = &e;
        }
        const auto probs = squad_softmax(totals);
        std::vector<std::pair<NbestEntry, double>> nbest_json;
        for (size_t i = 0; i < nbest.size(); ++i) nbest_json.emplace_back(nbest[i], probs[i]);

        if (!opt.version_2_with_negative) {
            all_predictions.set(example.qas_id, nbest[0].text);
        } else if (best_non_null == nullptr) {
            // The reference raises AttributeError here (no non-null candidate at all); we predict
            // no answer and write no null odds for this question.
            all_predictions.set(example.qas_id, "");
            without_null_odds.push_back(example.qas_id);
        } else {
            const double diff = score_null - best_non_null->start_logit - best_non_null->end_logit;
            scores_diff.set(example.qas_id, diff);
            all_predictions.set(example.qas_id, diff > opt.null_score_diff_threshold ? "" : best_non_null->text);
        }
        all_nbest.set(example.qas_id, std::move(nbest_json));
    }

    SquadPredictions out;
    out.without_null_odds = std::move(without_null_odds);
    out.predictions_json = dump_indent4(all_predictions, [](std::string& o, const std::string& v) {
        append_py_json_string(o, v);
    });
    out.nbest_json = dump_indent4(all_nbest, [](std::string& o, const std::vector<std::pair<NbestEntry, double>>& v) {
        o += "[\n";
        for (size_t i = 0; i < v.size(); ++i) {
            o += "        {\n            \"text\": ";
            append_py_json_string(o, v[i].first.text);
            o += ",\n            \"probability\": ";
            append_py_json_float(o, v[i].second);
            const auto logit = [&](double x) {
                if (v[i].first.int_logits) o += "0";
                else append_py_json_float(o, x);
            };
            o += ",\n            \"start_logit\": ";
            logit(v[i].first.start_logit);
            o += ",\n            \"end_logit\": ";
            logit(v[i].first.end_logit);
            o += i + 1 < v.size() ? "\n        },\n" : "\n        }\n";
        }
        o += "    ]";
    });
    if (opt.version_2_with_negative)
        out.null_odds_json = dump_indent4(scores_diff, [](std::string& o, double v) { append_py_json_float(o, v); });
    return out;
}

SquadEvalSet squad_eval_set(const std::string& predict_file, data::FullTokenizer& tokenizer,
                            const data::SquadFeatureOptions& opt, data::SquadReadOptions read,
                            std::vector<std::string>* warnings) {
    SquadEvalSet out;
    out.doc = data::parse_squad_json(read_file(predict_file), predict_file);
    read.is_training = false;
    out.examples = data::read_squad_examples(out.doc, predict_file, read, warnings);
    data::SquadFeatureOptions o = opt;
    o.is_training = false;
    data::convert_examples_to_features(out.examples, tokenizer, o,
                                       [&](data::SquadFeature&& f) { out.features.push_back(std::move(f)); });
    return out;
}

bool squad_has_answers(const nlohmann::json& doc) {
    for (const auto& a : doc["data"])
        for (const auto& p : a["paragraphs"])
            for (const auto& qa : p["qas"])
                if (qa.contains("answers") && qa["answers"].is_array() &&
                    (!qa["answers"].empty() || qa.contains("is_impossible")))
                    return true;
    return false;
}

}  // namespace bertbench::train
