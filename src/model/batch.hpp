// An unpadded pretraining batch: the real tokens of B sequences packed back to back.
// Dense layers run on the N = seq_offsets[B] real tokens; attention runs per sequence; the MLM
// head runs only on the P gathered masked positions. Equal, by construction and by test, to the
// reference's padded computation with the -10000 additive attention mask.
#pragma once

#include <algorithm>
#include <cstdint>
#include <vector>

namespace bertbench::model {

struct Batch {
    int batch_size = 0;                      // B
    std::vector<int32_t> seq_offsets;        // (B+1) token offsets; sequence b is [o[b], o[b+1])
    std::vector<int32_t> input_ids;          // (N) token ids
    std::vector<int32_t> segment_ids;        // (N) token type ids (0/1)
    // Position of token i within its sequence is i - seq_offsets[b] (position embeddings).
    std::vector<int32_t> masked_index;       // (P) index into the packed tokens (0..N-1)
    std::vector<int32_t> masked_ids;         // (P) label token ids
    std::vector<float> masked_weights;       // (P) label weights (reference: 1.0; padding dropped)
    std::vector<int32_t> masked_seq;         // (P) which sequence each prediction belongs to
    std::vector<int32_t> next_sentence_labels;  // (B) 0 = IsNext, 1 = random next sentence

    int num_tokens() const { return seq_offsets.empty() ? 0 : seq_offsets.back(); }
    int num_predictions() const { return static_cast<int>(masked_index.size()); }
    int max_seq_len() const {
        int m = 0;
        for (int b = 0; b < batch_size; ++b) m = std::max(m, seq_offsets[b + 1] - seq_offsets[b]);
        return m;
    }
};

}  // namespace bertbench::model
