// The pretraining record decoder: tf.train.Example bytes -> PretrainingRecord (FixedLenFeature
// schema, io/example.hpp) -> unpadded batch (data/pretrain_reader.hpp append_pretraining_record),
// as the reader thread does for every record. The schema lengths are taken from the record's own
// input_ids / masked_lm_positions so that mutated records reach the batch conversion; the batch's
// invariants (what the model relies on) are then checked.
#include <algorithm>
#include <cstdint>
#include <string_view>

#include "data/pretrain_reader.hpp"
#include "fuzz_util.hpp"
#include "io/example.hpp"

using namespace bertbench;

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
        fuzz::check_batch_invariants(batch);
        // A second record into the same batch (offsets shift by the first's tokens).
        data::append_pretraining_record(batch, rec, "fuzz: record 1");
        fuzz::check_batch_invariants(batch);
    });
    return 0;
}
