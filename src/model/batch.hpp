// An unpadded pretraining batch: the real tokens of B sequences packed back to back.
// Dense layers run on the N = seq_offsets[B] real tokens; attention runs per sequence; the MLM
// head runs only on the P gathered masked positions. Equal, by construction and by test, to the
// reference's padded computation with the -10000 additive attention mask.
// Padded-query layout (key_lengths, for run_squad.py features): each sequence carries all its
// max_seq_length positions, padding included, and only the first key_lengths[b] rows are
// attention keys. Every row then runs through the encoder as the reference's padded rows do
// (its mask only hides keys), so the logits of padding positions, and a loss whose softmax spans
// all max_seq_length positions, are the reference's.
#pragma once

#include <algorithm>
#include <cstdint>
#include <span>
#include <string>
#include <vector>

#include "core/error.hpp"

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
    // (B) or empty. Non-empty: sequence b's first key_lengths[b] rows (1..T_b) are the attention
    // keys/values and all T_b rows are queries (the padded-query layout above). Empty: every row
    // is a key (the unpadded layout: real tokens only).
    std::vector<int32_t> key_lengths;

    int num_tokens() const { return seq_offsets.empty() ? 0 : seq_offsets.back(); }
    int num_predictions() const { return static_cast<int>(masked_index.size()); }
    int max_seq_len() const {
        int m = 0;
        for (int b = 0; b < batch_size; ++b) m = std::max(m, seq_offsets[b + 1] - seq_offsets[b]);
        return m;
    }
};

// Appends one padded feature (run_squad.py InputFeatures / the tf.train.Example of FeatureWriter):
// input_ids, input_mask, segment_ids, each max_seq_length long, as a sequence of max_seq_length
// rows whose first Σinput_mask rows are keys (Batch::key_lengths). The batch must be empty or
// already in this layout. Checked before the batch changes: equal lengths (>= 1), input_mask
// ones then zeros with at least one 1, ids and segment ids >= 0; otherwise
// Error "<where>: ...". (Ids are checked against the vocabulary by the engine.)
inline void append_padded_sequence(Batch& batch, std::span<const int32_t> input_ids,
                                   std::span<const int32_t> input_mask,
                                   std::span<const int32_t> segment_ids, const std::string& where) {
    const size_t S = input_ids.size();
    if (S == 0 || input_mask.size() != S || segment_ids.size() != S)
        fail("{}: padded feature: {} input_ids, {} input_mask, {} segment_ids values, expected "
             "the same number (max_seq_length >= 1) of each",
             where, input_ids.size(), input_mask.size(), segment_ids.size());
    if (batch.batch_size > 0 && static_cast<int>(batch.key_lengths.size()) != batch.batch_size)
        fail("{}: padded feature appended to a batch of {} unpadded sequences (expected a batch "
             "built by append_padded_sequence only)",
             where, batch.batch_size);
    size_t keys = 0;
    while (keys < S && input_mask[keys] == 1) ++keys;
    for (size_t i = keys; i < S; ++i)
        if (input_mask[i] != 0)
            fail("{}: input_mask[{}] = {}, expected ones followed by zeros (run_squad.py "
                 "features: 1 for real tokens, then 0 for padding)",
                 where, i, input_mask[i]);
    if (keys == 0)
        fail("{}: input_mask has no 1 (expected at least the [CLS] token to be real)", where);
    for (size_t i = 0; i < S; ++i) {
        if (input_ids[i] < 0) fail("{}: input_ids[{}] = {}, expected >= 0", where, i, input_ids[i]);
        if (segment_ids[i] < 0)
            fail("{}: segment_ids[{}] = {}, expected >= 0", where, i, segment_ids[i]);
    }
    if (batch.seq_offsets.empty()) batch.seq_offsets.push_back(0);
    batch.input_ids.insert(batch.input_ids.end(), input_ids.begin(), input_ids.end());
    batch.segment_ids.insert(batch.segment_ids.end(), segment_ids.begin(), segment_ids.end());
    batch.seq_offsets.push_back(batch.seq_offsets.back() + static_cast<int32_t>(S));
    batch.key_lengths.push_back(static_cast<int32_t>(keys));
    ++batch.batch_size;
}

// A batch of B = input_ids.size() / max_seq_length padded features stored back to back (B×S
// row-major, as a decoded batch of tf.train.Examples); each goes through append_padded_sequence.
inline Batch padded_batch(std::span<const int32_t> input_ids, std::span<const int32_t> input_mask,
                          std::span<const int32_t> segment_ids, int max_seq_length,
                          const std::string& where) {
    const size_t S = max_seq_length > 0 ? static_cast<size_t>(max_seq_length) : 0;
    if (S == 0 || input_ids.size() % S != 0 || input_mask.size() != input_ids.size() ||
        segment_ids.size() != input_ids.size())
        fail("{}: padded batch: {} input_ids, {} input_mask, {} segment_ids values, expected "
             "the same multiple of max_seq_length = {}",
             where, input_ids.size(), input_mask.size(), segment_ids.size(), max_seq_length);
    Batch batch;
    batch.seq_offsets.push_back(0);
    for (size_t b = 0; b < input_ids.size() / S; ++b)
        append_padded_sequence(batch, input_ids.subspan(b * S, S), input_mask.subspan(b * S, S),
                               segment_ids.subspan(b * S, S),
                               where + ": feature " + std::to_string(b));
    return batch;
}

}  // namespace bertbench::model
