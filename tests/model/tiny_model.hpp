// The whole-model tests' tiny odd config (V 37, H 12, 3 heads, I 13, 2 layers, dropout 0.1 on both
// sites), their batch of mixed sequence lengths (5, 9, 3 tokens; 5 predictions, one of them a
// padding prediction of weight 0; NSP labels 0, 1, 1), and parameters: the reference init plus
// uniform noise in ±0.1, so that LayerNorm gammas, betas and biases are not 1 and 0.
#pragma once

#include <cmath>
#include <cstdint>
#include <random>
#include <span>
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

// The precision tests' model: V 512, H 64, 4 heads, I 160, dropout 0.1 on both sites.
inline model::BertConfig small_config(int layers = 2) {
    model::BertConfig c;
    c.vocab_size = 512;
    c.hidden_size = 64;
    c.num_attention_heads = 4;
    c.intermediate_size = 160;
    c.num_hidden_layers = layers;
    c.max_position_embeddings = 64;
    c.hidden_dropout_prob = 0.1f;
    c.attention_probs_dropout_prob = 0.1f;
    return c;
}

// The precision tests' parameters: the table's initialisation times `scale` (4: activations,
// logits and gradients well away from the initialisation's scale).
inline std::vector<float> scaled_params(const model::ParamTable& table, uint64_t seed, float scale = 4.0f) {
    std::vector<float> p(table.total_floats());
    table.initialize(p, seed);
    for (float& x : p) x *= scale;
    return p;
}

// A batch of random tokens of the given lengths for config c: segment 0 for the first half of each
// sequence, `predictions` masked positions from position 1 on (random ids, weight 1), random NSP
// labels.
inline model::Batch random_batch(const model::BertConfig& c, const std::vector<int>& lengths, int predictions,
                                 uint64_t seed) {
    std::mt19937_64 rng(seed);
    model::Batch b;
    b.batch_size = static_cast<int>(lengths.size());
    b.seq_offsets.push_back(0);
    for (int s = 0; s < b.batch_size; ++s) {
        const int len = lengths[static_cast<size_t>(s)], start = b.seq_offsets.back();
        for (int t = 0; t < len; ++t) {
            b.input_ids.push_back(static_cast<int32_t>(rng() % c.vocab_size));
            b.segment_ids.push_back(t < len / 2 ? 0 : 1);
        }
        b.seq_offsets.push_back(start + len);
        for (int p = 1; p <= predictions && p < len; ++p) {
            b.masked_index.push_back(start + p);
            b.masked_ids.push_back(static_cast<int32_t>(rng() % c.vocab_size));
            b.masked_weights.push_back(1.0f);
            b.masked_seq.push_back(s);
        }
        b.next_sentence_labels.push_back(static_cast<int32_t>(rng() % 2));
    }
    return b;
}

// ‖got − want‖₂ / ‖want‖₂; infinite when the sizes differ.
inline double rel_l2(std::span<const float> got, std::span<const float> want) {
    if (got.size() != want.size()) return INFINITY;
    double num = 0, den = 0;
    for (size_t i = 0; i < want.size(); ++i) {
        num += (double(got[i]) - want[i]) * (double(got[i]) - want[i]);
        den += double(want[i]) * want[i];
    }
    return std::sqrt(num / std::max(den, 1e-300));
}

}  // namespace bertbench::testing
