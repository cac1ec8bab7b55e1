// BertConfig: presets, bert_config.json parsing and validation.
// Reference: google-research/bert modeling.py BertConfig.from_json_file (unknown keys ignored).
// A Hugging Face config.json shares the field names; it is recognised by "model_type" and its
// "gelu" (erf form in HF) is mapped to "gelu_erf", because Google's "gelu" is the tanh form.
#include "model/config.hpp"

#include <algorithm>
#include <cctype>
#include <cmath>
#include <iterator>
#include <limits>
#include <string>

#include "core/error.hpp"
#include "core/fs.hpp"
#include "core/json_safe.hpp"
#include "core/log.hpp"
#include "ops/layernorm.hpp"

namespace bertbench::model {
namespace {

BertConfig make(int layers, int hidden, int heads, int intermediate) {
    BertConfig c;
    c.num_hidden_layers = layers;
    c.hidden_size = hidden;
    c.num_attention_heads = heads;
    c.intermediate_size = intermediate;
    return c;
}

const char* type_name(const nlohmann::json& v) {
    if (v.is_number_integer()) return "an integer";
    if (v.is_number_float()) return "a float";
    return v.type_name();
}

int get_int(const nlohmann::json& j, const char* key, int fallback, const std::string& where) {
    if (!j.contains(key)) return fallback;
    const nlohmann::json& v = j.at(key);
    // Accept 768.0 as 768 (some writers emit floats), not 768.5.
    if (v.is_number_float()) {
        const double d = v.get<double>();
        if (d == std::floor(d) && std::abs(d) < 2147483647.0) return static_cast<int>(d);
        fail("{}: {}: expected an integer, got {} (hint: sizes are whole numbers)", where, key,
             json_safe::brief(v));
    }
    if (!v.is_number_integer())
        fail("{}: {}: expected an integer, got {} {}", where, key, type_name(v),
             json_safe::brief(v));
    if (v.is_number_unsigned() && v.get<uint64_t>() > uint64_t{std::numeric_limits<int>::max()})
        fail("{}: {}: expected an integer that fits in 32 bits, got {}", where, key,
             json_safe::brief(v));
    const int64_t x = v.get<int64_t>();
    if (x < std::numeric_limits<int>::min() || x > std::numeric_limits<int>::max())
        fail("{}: {}: expected an integer that fits in 32 bits, got {}", where, key,
             json_safe::brief(v));
    return static_cast<int>(x);
}

double get_double(const nlohmann::json& j, const char* key, double fallback, const std::string& where) {
    if (!j.contains(key)) return fallback;
    const nlohmann::json& v = j.at(key);
    if (!v.is_number())
        fail("{}: {}: expected a number, got {} {}", where, key, type_name(v),
             json_safe::brief(v));
    return v.get<double>();
}

float get_float(const nlohmann::json& j, const char* key, float fallback,
                const std::string& where) {
    return static_cast<float>(get_double(j, key, fallback, where));
}

}  // namespace

BertConfig BertConfig::preset(const std::string& name) {
    if (name == "tiny") return make(2, 128, 2, 512);
    if (name == "mini") return make(4, 256, 4, 1024);
    if (name == "small") return make(4, 512, 8, 2048);
    if (name == "medium") return make(8, 512, 8, 2048);
    if (name == "base") return make(12, 768, 12, 3072);
    if (name == "large") return make(24, 1024, 16, 4096);
    fail(
        "model preset: expected one of tiny, mini, small, medium, base, large, got \"{}\" "
        "(hint: or give --bert_config_file)",
        name);
}

BertConfig BertConfig::from_json(const nlohmann::json& j, const std::string& where) {
    if (!j.is_object()) fail("{}: expected a JSON object, got {}", where, type_name(j));
    // The sizes that define the model have no default in a file (a silent BERT-base would hide a
    // typo); the rest default to the reference's values.
    std::string missing;
    for (const char* key : {"vocab_size", "hidden_size", "num_hidden_layers",
                            "num_attention_heads", "intermediate_size"})
        if (!j.contains(key)) missing += (missing.empty() ? "" : ", ") + std::string(key);
    if (!missing.empty())
        fail(
            "{}: expected the fields vocab_size, hidden_size, num_hidden_layers, "
            "num_attention_heads and intermediate_size, got no {} (hint: a bert_config.json "
            "states every size of the model; or use --model=<preset>)",
            where, missing);
    BertConfig c;
    c.vocab_size = get_int(j, "vocab_size", c.vocab_size, where);
    c.hidden_size = get_int(j, "hidden_size", c.hidden_size, where);
    c.num_hidden_layers = get_int(j, "num_hidden_layers", c.num_hidden_layers, where);
    c.num_attention_heads = get_int(j, "num_attention_heads", c.num_attention_heads, where);
    c.intermediate_size = get_int(j, "intermediate_size", c.intermediate_size, where);
    c.max_position_embeddings =
        get_int(j, "max_position_embeddings", c.max_position_embeddings, where);
    c.type_vocab_size = get_int(j, "type_vocab_size", c.type_vocab_size, where);
    c.hidden_dropout_prob = get_float(j, "hidden_dropout_prob", c.hidden_dropout_prob, where);
    c.attention_probs_dropout_prob =
        get_float(j, "attention_probs_dropout_prob", c.attention_probs_dropout_prob, where);
    c.initializer_range = get_float(j, "initializer_range", c.initializer_range, where);
    const bool hf = j.contains("model_type");
    if (j.contains("hidden_act")) {
        const nlohmann::json& v = j.at("hidden_act");
        if (!v.is_string())
            fail("{}: hidden_act: expected a string, got {} {}", where, type_name(v),
                 json_safe::brief(v));
        c.hidden_act = v.get<std::string>();
        // google's modeling.py lower-cases the name (get_activation); HF's ACT2FN does not.
        if (!hf)
            std::transform(c.hidden_act.begin(), c.hidden_act.end(), c.hidden_act.begin(),
                           [](unsigned char ch) { return static_cast<char>(std::tolower(ch)); });
        // HF ACT2FN: "gelu" is the erf form and "gelu_new" the tanh form.
        if (hf && c.hidden_act == "gelu") c.hidden_act = "gelu_erf";
        // Keys only transformers writes, without model_type (hand-edited, or written by a tool that
        // drops it): the file is ambiguous, and its "gelu" is read as google's. Said, not guessed.
        const char* const hf_keys[] = {"architectures", "transformers_version", "torch_dtype", "pad_token_id"};
        const auto key = std::find_if(std::begin(hf_keys), std::end(hf_keys),
                                      [&](const char* k) { return j.contains(k); });
        // once per file and process (a command may read its config more than once)
        if (!hf && c.hidden_act == "gelu" && key != std::end(hf_keys) && log::first_time("gelu-hf-keys " + where))
            log::warn("{}: \"gelu\" read as google's tanh form (no model_type), but the file has Hugging "
                      "Face's key \"{}\", and to transformers \"gelu\" is the erf form (hint: add "
                      "\"model_type\": \"bert\" for HF's reading, or \"hidden_act\": \"gelu_new\" to keep tanh)",
                      where, *key);
    }
    // Hugging Face variants of the architecture that bertbench would run silently as BERT's.
    if (j.contains("position_embedding_type") && j.at("position_embedding_type") != "absolute")
        fail("{}: position_embedding_type: expected \"absolute\" (BERT's learned positions; bertbench "
             "has no relative ones), got {}", where, json_safe::brief(j.at("position_embedding_type")));
    if (j.contains("is_decoder") && j.at("is_decoder") != false)
        fail("{}: is_decoder: expected false (BERT's bidirectional encoder), got {}", where,
             json_safe::brief(j.at("is_decoder")));
    c.layer_norm_eps = get_double(j, "layer_norm_eps", c.layer_norm_eps, where);
    return c;
}

BertConfig BertConfig::from_json_file(const std::string& path) {
    const std::string text = read_file(path);
    const nlohmann::json j = json_safe::parse(text, path, "a JSON object (bert_config.json)");
    BertConfig c = from_json(j, path);
    c.validate(path);
    return c;
}

nlohmann::json BertConfig::to_json() const {
    // A float field as the user wrote it: 0.1, not the float's exact double 0.10000000149011612
    // (the shortest decimal that reads back as the same float).
    const auto as_given = [](float v) { return std::strtod(fmt::format("{}", v).c_str(), nullptr); };
    nlohmann::json j{
        {"attention_probs_dropout_prob", as_given(attention_probs_dropout_prob)},
        {"hidden_act", hidden_act},
        {"hidden_dropout_prob", as_given(hidden_dropout_prob)},
        {"hidden_size", hidden_size},
        {"initializer_range", as_given(initializer_range)},
        {"intermediate_size", intermediate_size},
        {"max_position_embeddings", max_position_embeddings},
        {"num_attention_heads", num_attention_heads},
        {"num_hidden_layers", num_hidden_layers},
        {"type_vocab_size", type_vocab_size},
        {"vocab_size", vocab_size},
    };
    // google's bert_config.json has no such key (its LayerNorm's is 1e-12): written only when
    // another, so configs and checkpoints of the reference's eps stay as they were
    if (layer_norm_eps != ops::kLayerNormEps) j["layer_norm_eps"] = layer_norm_eps;
    return j;
}

nlohmann::json BertConfig::to_json_complete() const {
    nlohmann::json j = to_json();
    j["layer_norm_eps"] = layer_norm_eps;
    return j;
}

void BertConfig::validate(const std::string& where) const {
    const std::pair<const char*, int> sizes[] = {
        {"vocab_size", vocab_size},
        {"hidden_size", hidden_size},
        {"num_hidden_layers", num_hidden_layers},
        {"num_attention_heads", num_attention_heads},
        {"intermediate_size", intermediate_size},
        {"max_position_embeddings", max_position_embeddings},
        {"type_vocab_size", type_vocab_size},
    };
    for (const auto& [name, value] : sizes)
        if (value <= 0) fail("{}: {}: expected a positive integer, got {}", where, name, value);
    // Named here, at the config: otherwise the first flag checked against it reported it
    // ("--max_seq_length=128: expected 2..1").
    if (max_position_embeddings < 2)
        fail(
            "{}: max_position_embeddings: expected at least 2 (a sequence holds [CLS] and [SEP]), "
            "got {}",
            where, max_position_embeddings);
    // Upper bounds far above any published BERT (large: V 30522, H 1024, L 24, A 16, I 4096,
    // 512 positions) that keep every size product well inside 64 bits; ParamTable then checks
    // the total against the machine's memory.
    const std::pair<const char*, int> limits[] = {
        {"vocab_size", kMaxVocabSize},
        {"hidden_size", kMaxHiddenSize},
        {"num_hidden_layers", kMaxLayers},
        {"num_attention_heads", kMaxAttentionHeads},
        {"intermediate_size", kMaxIntermediateSize},
        {"max_position_embeddings", kMaxPositions},
        {"type_vocab_size", kMaxTypeVocabSize},
    };
    for (size_t i = 0; i < std::size(sizes); ++i)
        if (sizes[i].second > limits[i].second)
            fail(
                "{}: {}: expected at most {}, got {} (hint: bertbench bounds every size; BERT-large "
                "has vocab_size 30522, hidden_size 1024, 24 layers, 16 heads, intermediate_size "
                "4096)",
                where, sizes[i].first, limits[i].second, sizes[i].second);
    if (hidden_size % num_attention_heads != 0)
        fail(
            "{}: hidden_size: expected a multiple of num_attention_heads ({}), got {} "
            "(hint: head size = hidden_size / num_attention_heads must be whole)",
            where, num_attention_heads, hidden_size);
    const std::pair<const char*, float> probs[] = {
        {"hidden_dropout_prob", hidden_dropout_prob},
        {"attention_probs_dropout_prob", attention_probs_dropout_prob},
    };
    for (const auto& [name, p] : probs)
        if (!(p >= 0.0f && p < 1.0f))
            fail("{}: {}: expected a probability in [0, 1), got {}", where, name, p);
    if (!(initializer_range > 0.0f && std::isfinite(initializer_range)))
        fail("{}: initializer_range: expected a positive number, got {}", where, initializer_range);
    if (!(layer_norm_eps > 0.0 && layer_norm_eps < 1.0))
        fail("{}: layer_norm_eps: expected a number in (0, 1) (the reference's 1e-12), got {}", where, layer_norm_eps);
    if (hidden_act != "gelu" && hidden_act != "gelu_new" && hidden_act != "gelu_erf" &&
        hidden_act != "relu")
        fail("{}: hidden_act: expected one of gelu, gelu_new, gelu_erf, relu, got {}{}", where,
             json_safe::quoted(hidden_act),
             hidden_act == "tanh" || hidden_act == "linear" || hidden_act.empty()
                 ? " (google's modeling.py takes it; bertbench's engine has no such FFN activation)"
                 : "");
}

}  // namespace bertbench::model
