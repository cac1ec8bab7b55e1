// run_qa.py's answer decoding and metric; see squad_qa_predict.hpp.
#include "train/squad_qa_predict.hpp"

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <unordered_map>
#include <unordered_set>

#include "core/error.hpp"
#include "core/py_json.hpp"
#include "data/squad.hpp"
#include "train/py_ordered_dict.hpp"
#include "train/squad_metric.hpp"

namespace bertbench::train {
namespace {

// numpy's comparison for floats: NaN sorts last
bool lt(float a, float b) {
    return a < b || (b != b && a == a);
}

// numpy's aheapsort over tosort[0, n) (1-based inside, as numpy writes it)
void heapsort(const float* v, int* tosort, int n) {
    int* a = tosort - 1;
    int i, j, l, tmp;
    for (l = n >> 1; l > 0; --l) {
        tmp = a[l];
        for (i = l, j = l << 1; j <= n;) {
            if (j < n && lt(v[a[j]], v[a[j + 1]])) j += 1;
            if (!lt(v[tmp], v[a[j]])) break;
            a[i] = a[j], i = j, j += j;
        }
        a[i] = tmp;
    }
    for (; n > 1;) {
        tmp = a[n], a[n] = a[1], n -= 1;
        for (i = 1, j = 2; j <= n;) {
            if (j < n && lt(v[a[j]], v[a[j + 1]])) j++;
            if (!lt(v[tmp], v[a[j]])) break;
            a[i] = a[j], i = j, j += j;
        }
        a[i] = tmp;
    }
}

// numpy's aquicksort (npysort/quicksort.cpp before x86-simd-sort): median of three, partitions
// over 16 elements, insertion sort below, heapsort past 2 log2(n) levels
void argsort(const float* v, int* tosort, int num) {
    int *pl = tosort, *pr = tosort + num - 1;
    int* stack[128];
    int** sptr = stack;
    int depth[64];
    int* psdepth = depth;
    int cdepth = 0;
    for (int n = num; n > 1; n >>= 1) cdepth += 2;  // npy_get_msb(num) * 2
    for (;;) {
        if (cdepth < 0) {
            heapsort(v, pl, static_cast<int>(pr - pl + 1));
        } else {
            while (pr - pl > 15) {
                int* pm = pl + ((pr - pl) >> 1);
                if (lt(v[*pm], v[*pl])) std::swap(*pm, *pl);
                if (lt(v[*pr], v[*pm])) std::swap(*pr, *pm);
                if (lt(v[*pm], v[*pl])) std::swap(*pm, *pl);
                const float vp = v[*pm];
                int* pi = pl;
                int* pj = pr - 1;
                std::swap(*pm, *pj);
                for (;;) {
                    do ++pi;
                    while (lt(v[*pi], vp));
                    do --pj;
                    while (lt(vp, v[*pj]));
                    if (pi >= pj) break;
                    std::swap(*pi, *pj);
                }
                std::swap(*pi, *(pr - 1));
                if (pi - pl < pr - pi) {
                    *sptr++ = pi + 1, *sptr++ = pr;
                    pr = pi - 1;
                } else {
                    *sptr++ = pl, *sptr++ = pi - 1;
                    pl = pi + 1;
                }
                *psdepth++ = --cdepth;
            }
            for (int* pi = pl + 1; pi <= pr; ++pi) {
                const int vi = *pi;
                const float vp = v[vi];
                int* pj = pi;
                int* pk = pi - 1;
                while (pj > pl && lt(vp, v[*pk])) *pj-- = *pk--;
                *pj = vi;
            }
        }
        if (sptr == stack) break;
        pr = *(--sptr), pl = *(--sptr), cdepth = *(--psdepth);
    }
}

// numpy's add.reduce over a contiguous 1-d array: its pairwise_sum (below 8 elements one by one
// from 0; up to 128 eight running sums combined ((r0+r1)+(r2+r3))+((r4+r5)+(r6+r7)), the rest one
// by one; n-best lists are shorter)
template <typename T>
T numpy_sum(const std::vector<T>& a) {
    const size_t n = a.size();
    T res = 0;
    size_t i = 0;
    if (n >= 8) {
        T r[8];
        for (int k = 0; k < 8; ++k) r[k] = a[static_cast<size_t>(k)];
        for (i = 8; i < n - n % 8; i += 8)
            for (size_t k = 0; k < 8; ++k) r[k] += a[i + k];
        res = ((r[0] + r[1]) + (r[2] + r[3])) + ((r[4] + r[5]) + (r[6] + r[7]));
    }
    for (; i < n; ++i) res += a[i];
    return res;
}

// numpy's float32 exp on x86 with AVX2/AVX512F (loops_exponent_log: Cody-Waite reduction, a
// rational approximation with FMAs, the exponent added to the result's bits); the probabilities
// it gives are checked byte for byte against numpy's by SquadQaPredict.AsNumpyRunsUtilsQa
float numpy_expf(float x) {
    if (std::isnan(x)) return x;
    if (x >= 88.72283935546875f) return INFINITY;
    if (x <= -103.97208404541015625f) return 0.0f;
    const float k = std::nearbyint(x * 1.442695040888963407359924681001892137f);
    float y = std::fma(k, -6.93145752e-1f, x);
    y = std::fma(k, -1.42860677e-6f, y);
    float num = std::fma(5.082762527590693718096e-04f, y, 6.757896990527504603057e-03f);
    num = std::fma(num, y, 5.114512081637298353406e-02f);
    num = std::fma(num, y, 2.473615434895520810817e-01f);
    num = std::fma(num, y, 7.257664613233124478488e-01f);
    num = std::fma(num, y, 9.999999999980870924916e-01f);
    float den = std::fma(2.159509375685829852307e-02f, y, -2.742335390411667452936e-01f);
    den = std::fma(den, y, 1.0f);
    const float poly = num / den;
    if (k < -125.0f) return std::ldexp(poly, static_cast<int>(k));  // a subnormal result
    int32_t bits;
    std::memcpy(&bits, &poly, sizeof bits);
    bits += static_cast<int32_t>(k) * (1 << 23);
    float r;
    std::memcpy(&r, &bits, sizeof r);
    return r;
}

struct Candidate {
    std::string text;
    float score = 0, start_logit = 0, end_logit = 0;
    int begin = 0, end = 0;    // characters of the context; null: 0, 0
    bool empty_nonce = false;  // utils_qa's "empty" entry (Python floats)
};

}  // namespace

std::vector<int> numpy_argsort_top(std::span<const float> v, int n) {
    std::vector<int> idx(v.size());
    for (size_t i = 0; i < idx.size(); ++i) idx[i] = static_cast<int>(i);
    if (!idx.empty()) argsort(v.data(), idx.data(), static_cast<int>(idx.size()));
    std::reverse(idx.begin(), idx.end());
    if (n < static_cast<int>(idx.size())) idx.resize(static_cast<size_t>(std::max(n, 0)));
    return idx;
}

SquadQaPredictions squad_qa_postprocess(const std::vector<data::QaExample>& examples,
                                        const std::vector<data::QaFeature>& features,
                                        const std::vector<SquadRawResult>& results,
                                        const SquadQaOptions& opt,
                                        const std::string& results_where) {
    std::unordered_map<int64_t, const SquadRawResult*> by_id;
    std::unordered_set<int64_t> feature_ids;
    for (const auto& f : features) feature_ids.insert(f.input.unique_id);
    for (const auto& r : results) {
        if (!feature_ids.count(r.unique_id))
            fail(
                "{}: unique_id {} is not one of the {} features made from the predict file; "
                "expected raw results from the same --predict_file, --max_seq_length, --doc_stride "
                "and --max_eval_samples",
                results_where, r.unique_id, features.size());
        by_id[r.unique_id] = &r;
    }
    if (results.size() != features.size())
        fail("{}: {} results for {} features; expected one per feature", results_where,
             results.size(), features.size());
    // utils_qa: example id -> its last index; the features of each example in feature order
    std::unordered_map<std::string, size_t> index_of;
    for (size_t e = 0; e < examples.size(); ++e) index_of[examples[e].id] = e;
    std::vector<std::vector<size_t>> by_example(examples.size());
    for (size_t i = 0; i < features.size(); ++i)
        by_example[index_of.at(examples[static_cast<size_t>(features[i].input.example_index)].id)]
            .push_back(i);

    OrderedMap<std::string> all_predictions;
    OrderedMap<std::vector<std::pair<Candidate, double>>> all_nbest;
    OrderedMap<double> null_odds;
    std::vector<float> start(0), end(0);
    for (size_t e = 0; e < examples.size(); ++e) {
        const data::QaExample& ex = examples[e];
        std::optional<Candidate> min_null;
        std::vector<Candidate> prelim;
        for (const size_t fi : by_example[e]) {
            const data::QaFeature& f = features[fi];
            const auto it = by_id.find(f.input.unique_id);
            const size_t width = f.input.input_ids.size();
            if (it == by_id.end() || it->second->start_logits.size() != width ||
                it->second->end_logits.size() != width)
                fail(
                    "{}: unique_id {} (question \"{}\"): expected one result with {} start and end "
                    "logits",
                    results_where, f.input.unique_id, ex.id, width);
            start.assign(it->second->start_logits.begin(), it->second->start_logits.end());
            end.assign(it->second->end_logits.begin(), it->second->end_logits.end());
            const float null_score = start[0] + end[0];
            if (!min_null || min_null->score > null_score)
                min_null = Candidate{"", null_score, start[0], end[0], 0, 0, false};
            const int first = f.context_begin, count = static_cast<int>(f.begin.size());
            const auto in_context = [&](int p) { return p >= first && p < first + count; };
            const auto starts = numpy_argsort_top(start, opt.n_best_size);
            const auto ends = numpy_argsort_top(end, opt.n_best_size);
            for (const int s : starts)
                for (const int en : ends) {
                    if (!in_context(s) || !in_context(en)) continue;
                    if (en < s || en - s + 1 > opt.max_answer_length) continue;
                    prelim.push_back({"",
                                      start[static_cast<size_t>(s)] + end[static_cast<size_t>(en)],
                                      start[static_cast<size_t>(s)], end[static_cast<size_t>(en)],
                                      f.begin[static_cast<size_t>(s - first)],
                                      f.end[static_cast<size_t>(en - first)], false});
                }
        }
        float null_score = 0;
        if (opt.version_2_with_negative) {
            if (!min_null)
                fail(
                    "{}: question {} has no feature (its windows were cut by --max_eval_samples); "
                    "utils_qa fails on it with version 2 (it sorts a None)",
                    results_where, ex.id);
            prelim.push_back(*min_null);
            null_score = min_null->score;
        }
        std::stable_sort(prelim.begin(), prelim.end(),
                         [](const Candidate& a, const Candidate& b) { return b.score < a.score; });
        if (prelim.size() > static_cast<size_t>(std::max(opt.n_best_size, 0)))
            prelim.resize(static_cast<size_t>(std::max(opt.n_best_size, 0)));
        if (opt.version_2_with_negative &&
            std::none_of(prelim.begin(), prelim.end(),
                         [](const Candidate& c) { return c.begin == 0 && c.end == 0; }))
            prelim.push_back(*min_null);
        const std::u32string context = data::utf8_to_u32(ex.context);
        for (Candidate& c : prelim) {  // Python's context[begin:end]
            const auto b =
                static_cast<size_t>(std::clamp(c.begin, 0, static_cast<int>(context.size())));
            const auto en =
                static_cast<size_t>(std::clamp(c.end, 0, static_cast<int>(context.size())));
            c.text =
                en > b ? data::u32_to_utf8(std::u32string_view(context).substr(b, en - b)) : "";
        }
        if (prelim.empty() || (prelim.size() == 1 && prelim[0].text.empty()))
            prelim.insert(prelim.begin(), Candidate{"empty", 0, 0, 0, 0, 0, true});
        // the softmax: float32, or float64 when the "empty" entry's Python floats are among them
        std::vector<double> probs(prelim.size());
        const bool wide = std::any_of(prelim.begin(), prelim.end(),
                                      [](const Candidate& c) { return c.empty_nonce; });
        if (wide) {
            double top = -INFINITY;
            for (const auto& c : prelim) top = std::max(top, static_cast<double>(c.score));
            for (size_t i = 0; i < prelim.size(); ++i) probs[i] = std::exp(prelim[i].score - top);
            const double sum = numpy_sum(probs);
            for (double& p : probs) p /= sum;
        } else {
            float top = -INFINITY;
            for (const auto& c : prelim) top = std::max(top, c.score);
            std::vector<float> ex32(prelim.size());
            for (size_t i = 0; i < prelim.size(); ++i) ex32[i] = numpy_expf(prelim[i].score - top);
            const float sum = numpy_sum(ex32);
            for (size_t i = 0; i < prelim.size(); ++i) probs[i] = ex32[i] / sum;
        }
        std::vector<std::pair<Candidate, double>> nbest;
        for (size_t i = 0; i < prelim.size(); ++i) nbest.emplace_back(prelim[i], probs[i]);
        if (!opt.version_2_with_negative) {
            all_predictions.set(ex.id, prelim[0].text);
        } else {
            size_t i = 0;
            while (i < prelim.size() && prelim[i].text.empty()) ++i;
            if (i == prelim.size())
                fail("{}: question {}: every answer is empty (utils_qa fails here with IndexError)",
                     results_where, ex.id);
            const Candidate& best = prelim[i];
            const double diff =
                best.empty_nonce
                    ? static_cast<double>(null_score) - 0.0 - 0.0
                    : static_cast<double>(null_score - best.start_logit - best.end_logit);
            null_odds.set(ex.id, diff);
            all_predictions.set(ex.id, diff > opt.null_score_diff_threshold ? "" : best.text);
        }
        all_nbest.set(ex.id, std::move(nbest));
    }

    SquadQaPredictions out;
    for (const auto& [id, text] : all_predictions.items) out.predictions[id] = text;
    out.predictions_json = dump_indent4(
        all_predictions, [](std::string& o, const std::string& v) { append_py_json_string(o, v); });
    out.nbest_json = dump_indent4(
        all_nbest, [](std::string& o, const std::vector<std::pair<Candidate, double>>& v) {
            o += "[\n";
            for (size_t i = 0; i < v.size(); ++i) {
                const Candidate& c = v[i].first;
                const auto logits = [&] {
                    o += "            \"start_logit\": ";
                    append_py_json_float(o, c.start_logit);
                    o += ",\n            \"end_logit\": ";
                    append_py_json_float(o, c.end_logit);
                    o += ",\n";
                };
                o += "        {\n";
                if (!c.empty_nonce) logits();
                o += "            \"text\": ";
                append_py_json_string(o, c.text);
                o += ",\n";
                if (c.empty_nonce) logits();
                o += "            \"probability\": ";
                append_py_json_float(o, v[i].second);
                o += i + 1 < v.size() ? "\n        },\n" : "\n        }\n";
            }
            o += "    ]";
        });
    if (opt.version_2_with_negative)
        out.null_odds_json =
            dump_indent4(null_odds, [](std::string& o, double v) { append_py_json_float(o, v); });
    return out;
}

nlohmann::ordered_json squad_qa_metric(const std::vector<data::QaExample>& examples,
                                       const nlohmann::ordered_json& predictions, bool version_2,
                                       const std::string& where) {
    // the references as one paragraph of the questions evaluated, in order
    nlohmann::json qas = nlohmann::json::array();
    for (const auto& e : examples) qas.push_back({{"id", e.id}, {"answers", e.answers}});
    const nlohmann::json dataset = {
        {"version", "1.1"}, {"data", {{{"paragraphs", {{{"context", ""}, {"qas", qas}}}}}}}};
    const nlohmann::json preds = predictions;
    if (version_2) return squad_evaluate_transformers(dataset, preds, {}, where, where);
    return squad_evaluate(dataset, preds, where, where).metrics;
}

}  // namespace bertbench::train
