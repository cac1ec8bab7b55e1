// tf.train.Example: our own small protobuf codec. Encoding writes the Features map in insertion
// order, byte-identical to what the pure-Python protobuf runtime writes (see the goldens'
// README; libprotobuf's C++ map would use hash order). Decoding accepts any feature order,
// packed or unpacked repeated fields and skips unknown fields; malformed input throws Error.
// Wire format: Example{1: Features{1: map entry{1: key, 2: Feature{1: BytesList, 2: FloatList,
// 3: Int64List}}}}, each list's values in field 1 (numbers packed when encoding).
#pragma once

#include <cstdint>
#include <span>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

namespace bertbench::io {

struct Feature {
    enum class Kind { int64, float32, bytes } kind = Kind::int64;
    std::vector<int64_t> ints;       // kind == int64
    std::vector<float> floats;       // kind == float32
    std::vector<std::string> bytes;  // kind == bytes
    size_t size() const;             // number of values of its kind
};

struct Example {
    std::vector<std::pair<std::string, Feature>> features;  // insertion order = wire order

    const Feature* find(std::string_view name) const;  // nullptr if absent
    void add_int64(std::string name, std::span<const int64_t> v);
    void add_int64(std::string name, std::span<const int32_t> v);
    void add_float(std::string name, std::span<const float> v);
    void add_bytes(std::string name, std::span<const std::string> v);
};

std::string encode_example(const Example& e);
// Appends the encoding to `out` (reuse one buffer across records).
void encode_example(const Example& e, std::string& out);
// `where` prefixes the error message (e.g. "file:record 12"). A repeated feature name keeps
// the last value (protobuf map semantics) at the position of its first occurrence.
Example decode_example(std::string_view bytes, std::string_view where = "example");

// The MLPerf BERT pretraining schema (create_pretraining_data.py writes it, run_pretraining.py
// and pick_eval_samples.py read it with tf.FixedLenFeature): five int64 lists, one float list and
// a one-element int64 list, in this order on the wire.
struct PretrainingRecord {
    std::vector<int64_t> input_ids, input_mask, segment_ids;  // (max_seq_length)
    std::vector<int64_t> masked_lm_positions, masked_lm_ids;  // (max_predictions_per_seq)
    std::vector<float> masked_lm_weights;                     // (max_predictions_per_seq)
    int64_t next_sentence_labels = 0;                         // (1)
};
inline constexpr const char* kPretrainingFeatureNames[7] = {
    "input_ids",     "input_mask",        "segment_ids",         "masked_lm_positions",
    "masked_lm_ids", "masked_lm_weights", "next_sentence_labels"};

// FixedLenFeature semantics: each of the 7 features must be present with its type and exact
// length (others are ignored); otherwise Error "<where>: feature <name>: expected ..., got ...".
void parse_pretraining_example(const Example& e, int max_seq_length, int max_predictions_per_seq,
                               std::string_view where, PretrainingRecord& out);
// The 7 features in the reference order (what create_pretraining_data.py writes).
Example pretraining_example(const PretrainingRecord& r);

}  // namespace bertbench::io
