// BertConfig: the fields of a Google-style bert_config.json, presets, and validation.
// Reference: google-research/bert modeling.py BertConfig. Field names are bert_config.json's.
#pragma once

#include <nlohmann/json.hpp>

#include <string>

namespace bertbench::model {

// Upper bounds validate() enforces (far above any published BERT; they keep the parameter
// table's size products inside 64 bits).
inline constexpr int kMaxVocabSize = 1 << 24;
inline constexpr int kMaxHiddenSize = 1 << 16;
inline constexpr int kMaxLayers = 1024;
inline constexpr int kMaxAttentionHeads = 1 << 12;
inline constexpr int kMaxIntermediateSize = 1 << 18;
inline constexpr int kMaxPositions = 1 << 17;
inline constexpr int kMaxTypeVocabSize = 1 << 16;

struct BertConfig {
    int vocab_size = 30522;
    int hidden_size = 768;
    int num_hidden_layers = 12;
    int num_attention_heads = 12;
    int intermediate_size = 3072;
    std::string hidden_act = "gelu";  // "gelu" (tanh approximation, the reference) | "gelu_new"
                                      // (same) | "gelu_erf" (erf form, HF "gelu") | "relu"
    float hidden_dropout_prob = 0.1f;
    float attention_probs_dropout_prob = 0.1f;
    int max_position_embeddings = 512;
    int type_vocab_size = 2;
    float initializer_range = 0.02f;
    double layer_norm_eps = 1e-12;  // every LayerNorm's epsilon (HF's layer_norm_eps; modeling.py's 1e-12)

    int head_size() const { return hidden_size / num_attention_heads; }

    // tiny (L2 H128 A2 I512), mini (L4 H256 A4 I1024), small (L4 H512 A8 I2048),
    // medium (L8 H512 A8 I2048), base (L12 H768 A12 I3072), large (L24 H1024 A16 I4096).
    static BertConfig preset(const std::string& name);  // Error naming the unknown preset
    // Reads bert_config.json; unknown keys are ignored (as the reference does); vocab_size,
    // hidden_size, num_hidden_layers, num_attention_heads and intermediate_size are required (an
    // Error names the missing ones), other missing keys keep their defaults; wrong types or values
    // are an Error naming the file and field. Nesting deeper than 64 levels is an Error.
    static BertConfig from_json_file(const std::string& path);
    static BertConfig from_json(const nlohmann::json& j, const std::string& where);
    nlohmann::json to_json() const;
    // to_json with every key, layer_norm_eps too where it is the default: what two configs are
    // compared by (a key one side leaves out is then not skipped)
    nlohmann::json to_json_complete() const;
    // Throws Error("<where>: <field>: expected ..., got ...") on an inconsistent config
    // (hidden_size not divisible by heads, non-positive sizes or sizes above the kMax* bounds,
    // dropout outside [0,1), unknown act).
    void validate(const std::string& where) const;
};

}  // namespace bertbench::model
