// The pretraining record decoder: tf.train.Example bytes -> PretrainingRecord (FixedLenFeature
// schema, io/example.hpp) -> unpadded batch (data/pretrain_reader.hpp append_pretraining_record),
// as the reader thread does for every record. The schema lengths are taken from the record's own
// input_ids / masked_lm_positions so that mutated records reach the batch conversion; the batch's
// invariants (what the model relies on) are then checked.
#include <cmath>
#include <cstdint>
#include <string_view>

#include "data/pretrain_reader.hpp"
#include "fuzz_util.hpp"
#include "io/example.hpp"

using namespace bertbench;

namespace {

void check_batch(const model::Batch& b) {
    if (b.seq_offsets.size() != static_cast<size_t>(b.batch_size) + 1) std::abort();
    for (int s = 0; s < b.batch_size; ++s)
        if (b.seq_offsets[s + 1] <= b.seq_offsets[s]) std::abort();
    const size_t N = static_cast<size_t>(b.num_tokens());
    if (b.input_ids.size() != N || b.segment_ids.size() != N) std::abort();
    for (size_t i = 0; i < N; ++i)
        if (b.input_ids[i] < 0 || b.segment_ids[i] < 0) std::abort();
    const size_t P = b.masked_index.size();
    if (b.masked_ids.size() != P || b.masked_weights.size() != P || b.masked_seq.size() != P)
        std::abort();
    for (size_t p = 0; p < P; ++p) {
        const int s = b.masked_seq[p];
        if (s < 0 || s >= b.batch_size) std::abort();
        if (b.masked_index[p] < b.seq_offsets[s] || b.masked_index[p] >= b.seq_offsets[s + 1])
            std::abort();
        const float w = b.masked_weights[p];
        if (b.masked_ids[p] < 0 || !(w > 0) || !std::isfinite(w)) std::abort();
    }
    if (b.next_sentence_labels.size() != static_cast<size_t>(b.batch_size)) std::abort();
    for (int32_t l : b.next_sentence_labels)
        if (l != 0 && l != 1) std::abort();
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
    fuzz::expect_clean([&] {
        const io::Example e =
            io::decode_example(std::string_view(reinterpret_cast<const char*>(data), size), "fuzz");
        const io::Feature* ids = e.find("input_ids");
        const io::Feature* pos = e.find("masked_lm_positions");
        const int T = ids ? static_cast<int>(std::min<size_t>(ids->size(), 4096)) : 128;
        const int P = pos ? static_cast<int>(std::min<size_t>(pos->size(), 4096)) : 20;
        io::PretrainingRecord rec;
        io::parse_pretraining_example(e, T > 0 ? T : 128, P > 0 ? P : 20, "fuzz: record 0", rec);
        model::Batch batch;
        batch.seq_offsets.push_back(0);
        data::append_pretraining_record(batch, rec, "fuzz: record 0");
        check_batch(batch);
        // A second record into the same batch (offsets shift by the first's tokens).
        data::append_pretraining_record(batch, rec, "fuzz: record 1");
        check_batch(batch);
    });
    return 0;
}
