// Fuzz target: bytes -> SQuAD JSON file -> examples (prediction and training mode, v1.1 and v2.0)
// -> features with a tiny vocabulary and short windows, under google's rules and transformers'
// (its tokenizer and windows; its stride 17 exceeds the windows of longer questions), and
// run_qa.py's examples and features (BertTokenizerFast's tokens and offsets, overlapping windows;
// each window's offsets inside its context and ascending). fuzz/ links
// the reader layers only, so write_predictions in src/train is not reached from here. Bad input
// must end in bertbench::Error; anything else (a crash, a sanitizer report, another exception) is
// a bug.
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <string>
#include <string_view>
#include <vector>

#include "core/error.hpp"
#include "data/fast_tokenizer.hpp"
#include "data/squad.hpp"
#include "data/squad_qa.hpp"
#include "data/tokenizer.hpp"
#include "data/vocab.hpp"

namespace {

const bertbench::data::Vocab& tiny_vocab() {
    static const bertbench::data::Vocab v = bertbench::data::Vocab::from_text(
        "[PAD]\n[UNK]\n[CLS]\n[SEP]\nthe\na\nof\nriver\n##s\n##ing\nbo\nwent\nhome\n.\n,\n?\nwho\n1\n2\n",
        "fuzz-vocab");
    return v;
}

void run(std::string_view text, bool training, bool v2, bool transformers) {
    using namespace bertbench;
    const nlohmann::json doc = data::parse_squad_json(text, "fuzz.json");
    const auto examples = data::read_squad_examples(doc, "fuzz.json", {training, v2}, nullptr);
    data::FullTokenizer tok(
        tiny_vocab(), true,
        transformers ? data::TokenizerRules::transformers : data::TokenizerRules::google);
    size_t n = 0;
    data::convert_examples_to_features(examples, tok,
                                       {24, transformers ? 17 : 5, 6, training, transformers},
                                       [&](data::SquadFeature&& f) {
                                           if (f.input_ids.size() != 24 || f.tokens.size() > 24)
                                               std::abort();  // window invariant
                                           ++n;
                                       });
    (void)n;
}

void run_qa(std::string_view text, bool lower) {
    using namespace bertbench;
    const nlohmann::json doc = data::parse_squad_json(text, "fuzz.json");
    const auto examples = data::read_qa_examples(doc, "fuzz.json");
    data::FastBertTokenizer tok(tiny_vocab(), lower);
    const auto features = data::prepare_qa_features(examples, tok, {24, 5}, "fuzz.json");
    for (const auto& f : features) {
        const auto& e = examples.at(static_cast<size_t>(f.input.example_index));
        const auto chars = static_cast<int32_t>(data::utf8_to_u32(e.context).size());
        if (f.input.input_ids.size() != 24 || f.begin.size() != f.end.size()) std::abort();
        for (size_t i = 0; i < f.begin.size(); ++i)  // spans inside the context, in order
            if (f.begin[i] < 0 || f.begin[i] >= f.end[i] || f.end[i] > chars ||
                (i > 0 && f.begin[i] < f.begin[i - 1]))
                std::abort();
    }
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
    const std::string_view text(reinterpret_cast<const char*>(data), size);
    for (int mode = 0; mode < 8; ++mode) {
        try {
            run(text, (mode & 1) != 0, (mode & 2) != 0, (mode & 4) != 0);
        } catch (const bertbench::Error&) {
        }
    }
    for (const bool lower : {true, false}) {
        try {
            run_qa(text, lower);
        } catch (const bertbench::Error&) {
        }
    }
    return 0;
}
