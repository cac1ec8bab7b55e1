#include "train/preflight.hpp"

#include <cmath>
#include <filesystem>
#include <utility>

#include "core/error.hpp"
#include "io/example.hpp"
#include "io/tfrecord.hpp"

namespace bertbench::train {

void check_input_records(const std::vector<std::string>& files, int max_seq_length,
                         int max_predictions_per_seq, const model::BertConfig& config,
                         const std::string& flag, bool skip_corrupt) {
    const int vocab_size = config.vocab_size;
    size_t tfrecord_files = 0, empty = 0;
    uint64_t bytes = 0;
    for (const std::string& path : files) {
        std::error_code ec;
        const auto size = std::filesystem::file_size(path, ec);
        if (!ec) bytes += size;
    }
    const bool walk = !skip_corrupt && bytes <= kFramingCheckBytes;
    std::string payload;
    io::PretrainingRecord rec;
    for (const std::string& path : files) {
        if (path.ends_with(".hdf5") || path.ends_with(".h5")) continue;
        ++tfrecord_files;
        try {
            io::TfRecordReader reader(path, skip_corrupt);
            if (!reader.next(payload)) {
                ++empty;
                continue;
            }
            const std::string where = path + ": record 0";
            io::parse_pretraining_example(io::decode_example(payload, where), max_seq_length,
                                          max_predictions_per_seq, where, rec);
            for (const auto& [name, ids] : {std::pair{"input_ids", &rec.input_ids},
                                            std::pair{"masked_lm_ids", &rec.masked_lm_ids}})
                for (size_t i = 0; i < ids->size(); ++i)
                    if ((*ids)[i] < 0 || (*ids)[i] >= vocab_size)
                        fail("{}: {}[{}] = {}, outside the model's vocabulary [0, {}) (expected "
                             "records made with the model's vocabulary)", where, name, i, (*ids)[i],
                             vocab_size);
            for (size_t i = 0; i < rec.segment_ids.size(); ++i)
                if (rec.segment_ids[i] < 0 || rec.segment_ids[i] >= config.type_vocab_size)
                    fail(
                        "{}: segment_ids[{}] = {}, outside the model's token types [0, {}) "
                        "(expected records for a model of type_vocab_size > {})",
                        where, i, rec.segment_ids[i], config.type_vocab_size, rec.segment_ids[i]);
            if (walk)
                while (reader.skip()) {
                }
        } catch (const Error& e) {
            fail("--{}: {} (found by the check of every input before the first step)", flag,
                 e.what());
        }
    }
    if (tfrecord_files > 0 && empty == tfrecord_files)
        fail("--{}: expected records, got none in {} file(s){} (first: {})", flag, empty,
             skip_corrupt ? " (--skip_corrupt_records skipped every record there was)" : "",
             files[0]);
}

void check_finite_params(const model::ParamTable& table, std::span<const float> params,
                         const std::string& source) {
    for (const model::ParamInfo& p : table.entries()) {
        const std::span<const float> v = params.subspan(p.offset, p.size);
        for (size_t i = 0; i < v.size(); ++i)
            if (!std::isfinite(v[i]))
                fail("{}: tensor {}: value {} at flat index {} (expected finite weights; the "
                     "checkpoint is damaged or came from a diverged run)",
                     source, p.name, v[i], i);
    }
}

}  // namespace bertbench::train
