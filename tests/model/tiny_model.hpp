// The whole-model tests' tiny odd config (V 37, H 12, 3 heads, I 13, 2 layers, dropout 0.1 on both
// sites), their batch of mixed sequence lengths (5, 9, 3 tokens; 5 predictions, one of them a
// padding prediction of weight 0; NSP labels 0, 1, 1), and parameters: the reference init plus
// uniform noise in ±0.1, so that LayerNorm gammas, betas and biases are not 1 and 0.
#pragma once

#include <cstdint>
#include <random>
#include <string>
#include <utility>
#include <vector>

#include "model/batch.hpp"
#include "model/bert.hpp"
#include "model/config.hpp"
#include "model/param_table.hpp"

namespace bertbench::testing {

// Every dropout site of an L-layer engine, with the name tests/tools/torch_bert.py reads its
// mask under: "embeddings", "layer_<l>/attention_probs", "layer_<l>/attention_output",
// "layer_<l>/output".
inline std::vector<std::pair<model::DropoutSite, std::string>> dropout_sites(int L) {
    using S = model::DropoutSite;
    std::vector<std::pair<S, std::string>> out = {{S{S::embeddings}, "embeddings"}};
    for (int l = 0; l < L; ++l)
        for (const auto& [kind, name] : {std::pair{S::attention_probs, "attention_probs"},
                                         std::pair{S::attention_output, "attention_output"},
                                         std::pair{S::output, "output"}})
            out.push_back({S{kind, l}, "layer_" + std::to_string(l) + "/" + name});
    return out;
}

inline model::BertConfig tiny_config(int max_position_embeddings = 16) {
    model::BertConfig c;
    c.vocab_size = 37;
    c.hidden_size = 12;
    c.num_hidden_layers = 2;
    c.num_attention_heads = 3;
    c.intermediate_size = 13;
    c.max_position_embeddings = max_position_embeddings;
    c.type_vocab_size = 2;
    c.hidden_dropout_prob = 0.1f;
    c.attention_probs_dropout_prob = 0.1f;
    c.initializer_range = 0.2f;
    return c;
}

inline model::Batch tiny_batch() {
    model::Batch b;
    b.batch_size = 3;
    b.seq_offsets = {0, 5, 14, 17};
    for (int i = 0; i < 17; ++i) {
        b.input_ids.push_back((i * 11 + 2) % 37);
        b.segment_ids.push_back(i % 4 >= 2 ? 1 : 0);
    }
    b.masked_index = {1, 3, 6, 12, 15};
    b.masked_ids = {4, 36, 0, 17, 9};
    b.masked_weights = {1.f, 1.f, 1.f, 0.f, 1.f};
    b.masked_seq = {0, 0, 1, 1, 2};
    b.next_sentence_labels = {0, 1, 1};
    return b;
}

template <typename T>
std::vector<T> make_params(const model::ParamTable& table, uint64_t seed) {
    std::vector<float> f(table.total_floats());
    table.initialize(f, seed);
    std::mt19937_64 rng(seed + 1);
    std::uniform_real_distribution<double> u(-0.1, 0.1);
    std::vector<T> p(f.size());
    for (size_t i = 0; i < f.size(); ++i) p[i] = static_cast<T>(f[i] + u(rng));
    return p;
}

}  // namespace bertbench::testing
