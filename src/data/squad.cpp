// SQuAD examples and features as run_squad.py makes them; see squad.hpp. Where the reference
// indexes a Python list with a position that can be -1 (an answer starting on the context's
// leading whitespace), the same negative-index and slice semantics are applied (py_at, py_slice),
// so such files give the reference's result rather than a crash or a different answer.
#include "data/squad.hpp"

#include <algorithm>
#include <unordered_map>

#include "core/json_safe.hpp"
#include "core/error.hpp"
#include "core/py_json.hpp"
#include "data/unicode_text.hpp"

namespace bertbench::data {

std::u32string utf8_to_u32(std::string_view utf8) {
    std::vector<char32_t> cps;
    uni::decode_utf8_ignore(utf8, cps);
    return std::u32string(cps.begin(), cps.end());
}

std::string u32_to_utf8(std::u32string_view s) {
    std::string out;
    out.reserve(s.size());
    for (char32_t c : s) uni::append_utf8(out, c);
    return out;
}

std::vector<std::u32string> py_split(std::u32string_view s) {
    std::vector<std::u32string> out;
    size_t i = 0;
    while (i < s.size()) {
        while (i < s.size() && uni::py_isspace(s[i])) ++i;
        const size_t b = i;
        while (i < s.size() && !uni::py_isspace(s[i])) ++i;
        if (i > b) out.emplace_back(s.substr(b, i - b));
    }
    return out;
}

std::u32string py_split_join(std::u32string_view s) {
    std::u32string out;
    for (const auto& w : py_split(s)) {
        if (!out.empty()) out += U' ';
        out += w;
    }
    return out;
}

namespace {

// Python list[i] for a possibly negative i; Error when out of range either way.
template <typename T>
const T& py_at(const std::vector<T>& v, int64_t i, const std::string& what) {
    const int64_t n = static_cast<int64_t>(v.size());
    const int64_t k = i < 0 ? i + n : i;
    if (k < 0 || k >= n) fail("{}: index {} outside a list of {} (expected a position inside the context)", what, i, n);
    return v[static_cast<size_t>(k)];
}

// " ".join(v[a:b]) with Python slice semantics (negative bounds count from the end, clamped).
template <typename S>
S py_slice_join(const std::vector<S>& v, int64_t a, int64_t b) {
    const int64_t n = static_cast<int64_t>(v.size());
    auto norm = [n](int64_t x) { return x < 0 ? std::max<int64_t>(x + n, 0) : std::min(x, n); };
    a = norm(a), b = norm(b);
    S out;
    for (int64_t i = a; i < b; ++i) {
        if (i > a) out += ' ';
        out += v[static_cast<size_t>(i)];
    }
    return out;
}

// read_squad_examples' is_whitespace: only these five characters split the context.
bool squad_whitespace(char32_t c) { return c == ' ' || c == '\t' || c == '\r' || c == '\n' || c == 0x202F; }

const nlohmann::json& member(const nlohmann::json& obj, const char* key, const std::string& where) {
    if (!obj.is_object()) fail("{}: expected an object with \"{}\", found {}", where, key, obj.type_name());
    const auto it = obj.find(key);
    if (it == obj.end()) fail("{}: missing \"{}\"", where, key);
    return *it;
}

const std::string& string_member(const nlohmann::json& obj, const char* key, const std::string& where) {
    const auto& v = member(obj, key, where);
    if (!v.is_string()) fail("{}: \"{}\" must be a string, found {}", where, key, v.type_name());
    return v.get_ref<const std::string&>();
}

const nlohmann::json& array_member(const nlohmann::json& obj, const char* key, const std::string& where) {
    const auto& v = member(obj, key, where);
    if (!v.is_array()) fail("{}: \"{}\" must be a list, found {}", where, key, v.type_name());
    return v;
}

std::u32string py_repr_free_join(const std::vector<std::u32string>& v) {
    std::u32string out;
    for (size_t i = 0; i < v.size(); ++i) {
        if (i) out += U' ';
        out += v[i];
    }
    return out;
}

}  // namespace

nlohmann::json parse_squad_json(std::string_view text, const std::string& where) {
    return json_safe::parse(text, where, "a SQuAD dataset (JSON with data/paragraphs/qas)");
}

std::vector<SquadExample> read_squad_examples(const nlohmann::json& doc, const std::string& where,
                                              const SquadReadOptions& opt,
                                              std::vector<std::string>* warnings) {
    const auto& data = array_member(doc, "data", where);
    std::vector<SquadExample> examples;
    // Predictions, n-best lists and the official metric are keyed by question id: a repeated id
    // would silently score one question's answer against another's.
    std::unordered_map<std::string, std::string> first_seen;  // id -> where
    size_t a_index = 0;
    for (const auto& entry : data) {
        const std::string at_entry = fmt::format("{}: data[{}]", where, a_index++);
        const auto& paragraphs = array_member(entry, "paragraphs", at_entry);
        size_t p_index = 0;
        for (const auto& paragraph : paragraphs) {
            const std::string at_par = fmt::format("{}.paragraphs[{}]", at_entry, p_index++);
            const std::u32string context = utf8_to_u32(string_member(paragraph, "context", at_par));
            std::vector<std::u32string> words;
            std::vector<int64_t> char_to_word_offset;
            char_to_word_offset.reserve(context.size());
            bool prev_ws = true;
            for (char32_t c : context) {
                if (squad_whitespace(c)) {
                    prev_ws = true;
                } else {
                    if (prev_ws) words.emplace_back(1, c);
                    else words.back() += c;
                    prev_ws = false;
                }
                char_to_word_offset.push_back(static_cast<int64_t>(words.size()) - 1);
            }
            std::vector<std::string> doc_tokens;
            doc_tokens.reserve(words.size());
            for (const auto& w : words) doc_tokens.push_back(u32_to_utf8(w));

            const auto& qas = array_member(paragraph, "qas", at_par);
            size_t q_index = 0;
            for (const auto& qa : qas) {
                const std::string at_q0 = fmt::format("{}.qas[{}]", at_par, q_index++);
                const std::string& qas_id = string_member(qa, "id", at_q0);
                const std::string at_q = fmt::format("{}: question \"{}\"", where, qas_id);
                // predictions are keyed by id; training never reads it (merged data repeats ids)
                if (const auto [it, fresh] = first_seen.emplace(qas_id, at_q0); !fresh && !opt.is_training)
                    fail("{} ({}): expected each question id once, got it again (first at {})",
                         at_q, at_q0.substr(where.size() + 2), it->second.substr(where.size() + 2));
                SquadExample ex;
                ex.qas_id = qas_id;
                ex.question_text = string_member(qa, "question", at_q);
                // is_impossible (SQuAD 2.0) is only honoured with --version_2_with_negative.
                bool impossible = false;
                if (qa.is_object() && qa.contains("is_impossible")) {
                    const auto& v = qa["is_impossible"];  // Python's truth: a number 0 / 1 too
                    if (!v.is_boolean() && !v.is_number())
                        fail("{}: \"is_impossible\" must be true or false (or a number, read as Python's truth), "
                             "found {}", at_q, v.type_name());
                    impossible = v.is_boolean() ? v.get<bool>() : v.get<double>() != 0;
                }
                if (impossible && !opt.version_2_with_negative)
                    fail("{}: is_impossible is true (a SQuAD 2.0 file), expected a SQuAD 1.1 file "
                         "(hint: {})", at_q, opt.v2_hint);
                // For training, every answer's span must lie inside its context (the reference
                // would crash or silently index from the end); prediction never reads answer_start
                // (the metric reads the answers' text only), nor does training for an impossible
                // question, as in the reference.
                if (opt.is_training && qa.contains("answers") && !(impossible && opt.version_2_with_negative)) {
                    const auto& answers = array_member(qa, "answers", at_q);
                    for (const auto& ans : answers) {
                        const std::u32string text = utf8_to_u32(string_member(ans, "text", at_q));
                        const auto& st = member(ans, "answer_start", at_q);
                        if (!st.is_number_integer())
                            fail("{}: answer_start must be an integer, found {}", at_q, st.type_name());
                        const int64_t s = st.get<int64_t>();
                        if (s < 0 || static_cast<uint64_t>(s) + text.size() > context.size() ||
                            (text.empty() && static_cast<uint64_t>(s) >= context.size()))
                            fail("{}: answer_start {} with a {}-character answer lies outside its "
                                 "{}-character context (expected 0 <= answer_start, answer_start + "
                                 "len(text) <= len(context){})", at_q, s, text.size(), context.size(),
                                 text.empty() ? " and, for an empty answer, answer_start < len(context)" : "");
                    }
                }
                if (opt.is_training) {
                    if (opt.version_2_with_negative) {
                        member(qa, "is_impossible", at_q);  // the reference reads it: KeyError if absent
                        ex.is_impossible = impossible;
                    }
                    const auto& answers = array_member(qa, "answers", at_q);
                    if (answers.size() != 1 && !ex.is_impossible)
                        fail("{}: for training, each question should have exactly 1 answer, found {}",
                             at_q, answers.size());
                    if (!ex.is_impossible) {
                        const auto& answer = answers[0];
                        const std::string& text_utf8 = string_member(answer, "text", at_q);
                        const std::u32string text = utf8_to_u32(text_utf8);
                        if (text.empty())
                            fail("{}: the training answer text is empty (expected the answer's words)", at_q);
                        const int64_t offset = answer["answer_start"].get<int64_t>();
                        const int64_t length = static_cast<int64_t>(text.size());
                        ex.start_position = py_at(char_to_word_offset, offset, at_q);
                        ex.end_position = py_at(char_to_word_offset, offset + length - 1, at_q);
                        const std::u32string actual =
                            py_slice_join(words, ex.start_position, ex.end_position + 1);
                        const std::u32string cleaned = py_repr_free_join(py_split(text));
                        if (actual.find(cleaned) == std::u32string::npos) {
                            if (warnings)
                                warnings->push_back(fmt::format("Could not find answer: '{}' vs. '{}'",
                                                                u32_to_utf8(actual), u32_to_utf8(cleaned)));
                            continue;
                        }
                        ex.orig_answer_text = text_utf8;
                    } else {
                        ex.start_position = ex.end_position = -1;
                        ex.orig_answer_text = std::string();
                    }
                }
                ex.doc_tokens = doc_tokens;
                examples.push_back(std::move(ex));
            }
        }
    }
    return examples;
}

bool check_is_max_context(const std::vector<DocSpan>& spans, int cur_span_index, int position) {
    double best_score = 0;
    int best = -1;
    for (size_t i = 0; i < spans.size(); ++i) {
        const DocSpan& s = spans[i];
        const int end = s.start + s.length - 1;
        if (position < s.start || position > end) continue;
        const int left = position - s.start, right = end - position;
        // The product is rounded to double before the sum, as in Python: a fused multiply-add
        // (which -march=haswell would allow) changes which span wins on exact ties.
        volatile double context_bonus = 0.01 * static_cast<double>(s.length);
        const double score = static_cast<double>(std::min(left, right)) + context_bonus;
        if (best < 0 || score > best_score) best_score = score, best = static_cast<int>(i);
    }
    return cur_span_index == best;
}

std::pair<int, int> improve_answer_span(const std::vector<std::string>& doc_tokens, int input_start,
                                        int input_end, FullTokenizer& tokenizer,
                                        std::string_view orig_answer_text) {
    std::vector<std::string> pieces;
    tokenizer.tokenize(orig_answer_text, nullptr, &pieces, nullptr);
    std::string want;
    for (size_t i = 0; i < pieces.size(); ++i) {
        if (i) want += ' ';
        want += pieces[i];
    }
    for (int s = input_start; s <= input_end; ++s)
        for (int e = input_end; e >= s; --e)
            if (py_slice_join(doc_tokens, s, e + 1) == want) return {s, e};
    return {input_start, input_end};
}

void convert_examples_to_features(const std::vector<SquadExample>& examples, FullTokenizer& tokenizer,
                                  const SquadFeatureOptions& opt,
                                  const std::function<void(SquadFeature&&)>& output) {
    if (opt.max_seq_length - opt.max_query_length - 3 <= 0)
        fail("--max_seq_length={} must be greater than --max_query_length={} + 3 (run_squad.py rejects "
             "this too)", opt.max_seq_length, opt.max_query_length);
    if (opt.doc_stride < 1) fail("--doc_stride={}: expected a positive number of tokens", opt.doc_stride);
    const Vocab& vocab = tokenizer.vocab();
    const int32_t cls_id = vocab.require("[CLS]"), sep_id = vocab.require("[SEP]");
    int64_t unique_id = 1000000000;
    std::vector<std::string> query_tokens, all_doc_tokens;
    std::vector<int32_t> query_ids, all_doc_ids;
    std::vector<int> tok_to_orig, orig_to_tok;
    for (size_t example_index = 0; example_index < examples.size(); ++example_index) {
        const SquadExample& ex = examples[example_index];
        const std::string at = fmt::format("question \"{}\"", ex.qas_id);
        query_tokens.clear(), query_ids.clear();
        tokenizer.tokenize(ex.question_text, nullptr, &query_tokens, &query_ids);
        if (static_cast<int>(query_tokens.size()) > opt.max_query_length) {
            query_tokens.resize(static_cast<size_t>(opt.max_query_length));
            query_ids.resize(static_cast<size_t>(opt.max_query_length));
        }
        tok_to_orig.clear(), orig_to_tok.clear(), all_doc_tokens.clear(), all_doc_ids.clear();
        for (size_t i = 0; i < ex.doc_tokens.size(); ++i) {
            orig_to_tok.push_back(static_cast<int>(all_doc_tokens.size()));
            const size_t before = all_doc_tokens.size();
            tokenizer.tokenize(ex.doc_tokens[i], nullptr, &all_doc_tokens, &all_doc_ids);
            for (size_t k = before; k < all_doc_tokens.size(); ++k) tok_to_orig.push_back(static_cast<int>(i));
        }
        int64_t tok_start = -1, tok_end = -1;
        if (opt.is_training && !ex.is_impossible) {
            tok_start = py_at(orig_to_tok, ex.start_position, at);
            if (ex.end_position < static_cast<int64_t>(ex.doc_tokens.size()) - 1)
                tok_end = py_at(orig_to_tok, ex.end_position + 1, at) - 1;
            else
                tok_end = static_cast<int64_t>(all_doc_tokens.size()) - 1;
            const auto [s, e] = improve_answer_span(all_doc_tokens, static_cast<int>(tok_start),
                                                    static_cast<int>(tok_end), tokenizer,
                                                    ex.orig_answer_text.value_or(""));
            tok_start = s, tok_end = e;
        }
        const int q = static_cast<int>(query_tokens.size());
        const int max_tokens_for_doc = opt.max_seq_length - q - 3;
        std::vector<DocSpan> spans;
        const int n_doc = static_cast<int>(all_doc_tokens.size());
        for (int start = 0; start < n_doc;) {
            const int length = std::min(n_doc - start, max_tokens_for_doc);
            spans.push_back({start, length});
            if (start + length == n_doc) break;
            start += opt.transformers_windows ? opt.doc_stride : std::min(length, opt.doc_stride);
        }
        for (size_t si = 0; si < spans.size(); ++si) {
            const DocSpan& span = spans[si];
            SquadFeature f;
            f.unique_id = unique_id;
            f.example_index = static_cast<int>(example_index);
            f.doc_span_index = static_cast<int>(si);
            f.tokens.reserve(static_cast<size_t>(q + span.length + 3));
            f.input_ids.reserve(static_cast<size_t>(opt.max_seq_length));
            f.tokens.emplace_back("[CLS]");
            f.input_ids.push_back(cls_id);
            for (int i = 0; i < q; ++i) {
                f.tokens.push_back(query_tokens[static_cast<size_t>(i)]);
                f.input_ids.push_back(query_ids[static_cast<size_t>(i)]);
            }
            f.tokens.emplace_back("[SEP]");
            f.input_ids.push_back(sep_id);
            f.segment_ids.assign(f.tokens.size(), 0);
            f.doc_offset = static_cast<int>(f.tokens.size());
            for (int i = 0; i < span.length; ++i) {
                const size_t k = static_cast<size_t>(span.start + i);
                f.token_to_orig.push_back(tok_to_orig[k]);
                f.token_is_max_context.push_back(
                    check_is_max_context(spans, static_cast<int>(si), span.start + i) ? 1 : 0);
                f.tokens.push_back(all_doc_tokens[k]);
                f.input_ids.push_back(all_doc_ids[k]);
                f.segment_ids.push_back(1);
            }
            f.tokens.emplace_back("[SEP]");
            f.input_ids.push_back(sep_id);
            f.segment_ids.push_back(1);
            f.input_mask.assign(f.input_ids.size(), 1);
            f.input_ids.resize(static_cast<size_t>(opt.max_seq_length), 0);
            f.input_mask.resize(static_cast<size_t>(opt.max_seq_length), 0);
            f.segment_ids.resize(static_cast<size_t>(opt.max_seq_length), 0);
            if (opt.is_training) {
                if (ex.is_impossible) {
                    f.start_position = 0, f.end_position = 0;
                } else {
                    const int64_t doc_start = span.start, doc_end = span.start + span.length - 1;
                    if (!(tok_start >= doc_start && tok_end <= doc_end)) {
                        f.start_position = 0, f.end_position = 0;
                    } else {
                        const int64_t off = q + 2;
                        f.start_position = static_cast<int>(tok_start - doc_start + off);
                        f.end_position = static_cast<int>(tok_end - doc_start + off);
                    }
                }
            }
            f.is_impossible = ex.is_impossible;
            output(std::move(f));
            ++unique_id;
        }
    }
}

io::Example squad_feature_example(const SquadFeature& f, bool is_training) {
    io::Example e;
    const int64_t uid[1] = {f.unique_id};
    e.add_int64("unique_ids", std::span<const int64_t>(uid));
    e.add_int64("input_ids", std::span<const int32_t>(f.input_ids));
    e.add_int64("input_mask", std::span<const int32_t>(f.input_mask));
    e.add_int64("segment_ids", std::span<const int32_t>(f.segment_ids));
    if (is_training) {
        const int64_t sp[1] = {f.start_position.value_or(0)}, ep[1] = {f.end_position.value_or(0)};
        const int64_t imp[1] = {f.is_impossible ? 1 : 0};
        e.add_int64("start_positions", std::span<const int64_t>(sp));
        e.add_int64("end_positions", std::span<const int64_t>(ep));
        e.add_int64("is_impossible", std::span<const int64_t>(imp));
    }
    return e;
}

}  // namespace bertbench::data
