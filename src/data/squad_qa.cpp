// run_qa.py's SQuAD evaluation data; see squad_qa.hpp.
#include "data/squad_qa.hpp"

#include "core/error.hpp"
#include "data/unicode_text.hpp"

namespace bertbench::data {
namespace {

const nlohmann::json& member(const nlohmann::json& obj, const char* key,
                             nlohmann::json::value_t type, const std::string& where,
                             const std::string& what) {
    const auto it = obj.is_object() ? obj.find(key) : obj.end();
    if (!obj.is_object() || it == obj.end() || it->type() != type)
        fail("{}: {} has no \"{}\" of the expected type", where, what, key);
    return *it;
}

}  // namespace

std::vector<QaExample> read_qa_examples(const nlohmann::json& doc, const std::string& where) {
    using T = nlohmann::json::value_t;
    std::vector<QaExample> out;
    for (const auto& article : member(doc, "data", T::array, where, "the file"))
        for (const auto& para : member(article, "paragraphs", T::array, where, "an article")) {
            const auto& context = member(para, "context", T::string, where, "a paragraph");
            for (const auto& qa : member(para, "qas", T::array, where, "a paragraph")) {
                QaExample e;
                e.id = member(qa, "id", T::string, where, "a question").get<std::string>();
                const std::string what = "question " + e.id;
                e.question = member(qa, "question", T::string, where, what).get<std::string>();
                e.context = context.get<std::string>();
                const auto it = qa.find("answers");
                e.answers = it != qa.end() ? *it : nlohmann::json::array();
                out.push_back(std::move(e));
            }
        }
    return out;
}

std::vector<std::pair<int, int>> qa_windows(int question_tokens, int context_tokens,
                                            const QaFeatureOptions& opt, std::string* error) {
    const int room = opt.max_seq_length - question_tokens - 3;
    if (context_tokens <= room) return {{0, context_tokens}};
    const auto failed = [&](const char* why) {
        if (error) *error = why;
        return std::vector<std::pair<int, int>>{};
    };
    if (room <= 0)
        return failed(
            "Truncation error: Sequence to truncate too short to respect the provided max_length");
    if (opt.doc_stride >= room)
        return failed("tokenizers panics: assertion failed: stride < max_len");
    std::vector<std::pair<int, int>> w;
    for (int start = 0;; start += room - opt.doc_stride) {
        const int stop = std::min(start + room, context_tokens);
        w.emplace_back(start, stop);
        if (stop == context_tokens) return w;
    }
}

std::vector<QaFeature> prepare_qa_features(const std::vector<QaExample>& examples,
                                           FastBertTokenizer& tokenizer,
                                           const QaFeatureOptions& opt, const std::string& where) {
    if (opt.max_seq_length < 3 || opt.doc_stride < 0)
        fail("{}: --max_seq_length {} / --doc_stride {}: expected at least 3 / 0", where,
             opt.max_seq_length, opt.doc_stride);
    const Vocab& vocab = tokenizer.vocab();
    const int32_t cls = vocab.require("[CLS]"), sep = vocab.require("[SEP]"),
                  pad = vocab.require("[PAD]");
    std::vector<QaFeature> out;
    TokenSpans q, c;
    for (size_t e = 0; e < examples.size(); ++e) {
        q.clear(), c.clear();
        tokenizer.encode(uni::py_lstrip(examples[e].question), q);
        tokenizer.encode(examples[e].context, c);
        std::string error;
        const auto windows =
            qa_windows(static_cast<int>(q.size()), static_cast<int>(c.size()), opt, &error);
        if (windows.empty())
            fail(
                "{}: question {}: {} tokens of question, {} of context, --max_seq_length {}, "
                "--doc_stride "
                "{}: {} (run_qa.py stops here)",
                where, examples[e].id, q.size(), c.size(), opt.max_seq_length, opt.doc_stride,
                error);
        for (size_t w = 0; w < windows.size(); ++w) {
            const auto [b, en] = windows[w];
            QaFeature f;
            SquadFeature& in = f.input;
            in.unique_id = 1000000000 + static_cast<int64_t>(out.size());
            in.example_index = static_cast<int>(e);
            in.doc_span_index = static_cast<int>(w);
            const auto n = static_cast<size_t>(opt.max_seq_length);
            in.input_ids.reserve(n);
            in.input_ids.push_back(cls);
            in.input_ids.insert(in.input_ids.end(), q.ids.begin(), q.ids.end());
            in.input_ids.push_back(sep);
            f.context_begin = static_cast<int>(in.input_ids.size());
            in.input_ids.insert(in.input_ids.end(), c.ids.begin() + b, c.ids.begin() + en);
            in.input_ids.push_back(sep);
            f.begin.assign(c.begin.begin() + b, c.begin.begin() + en);
            f.end.assign(c.end.begin() + b, c.end.begin() + en);
            in.input_mask.assign(in.input_ids.size(), 1);
            in.segment_ids.assign(in.input_ids.size(), 0);
            std::fill(in.segment_ids.begin() + f.context_begin, in.segment_ids.end(), 1);
            in.input_ids.resize(n, pad);
            in.input_mask.resize(n, 0);
            in.segment_ids.resize(n, 0);
            out.push_back(std::move(f));
        }
    }
    return out;
}

}  // namespace bertbench::data
