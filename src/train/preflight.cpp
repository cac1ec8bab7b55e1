#include "train/preflight.hpp"

#include <cmath>
#include <filesystem>
#include <utility>

#include "core/error.hpp"
#include "data/shard_source.hpp"
#include "io/example.hpp"
#include "io/hdf5_shard.hpp"
#include "io/tfrecord.hpp"

namespace bertbench::train {

namespace {

// A record's ids against the model's tables (both formats decode to a PretrainingRecord).
void check_record_ids(const io::PretrainingRecord& rec, const std::string& where,
                      const model::BertConfig& config) {
    for (const auto& [name, ids] : {std::pair{"input_ids", &rec.input_ids},
                                    std::pair{"masked_lm_ids", &rec.masked_lm_ids}})
        for (size_t i = 0; i < ids->size(); ++i)
            if ((*ids)[i] < 0 || (*ids)[i] >= config.vocab_size)
                fail("{}: {}[{}] = {}, outside the model's vocabulary [0, {}) (expected records "
                     "made with the model's vocabulary)",
                     where, name, i, (*ids)[i], config.vocab_size);
    for (size_t i = 0; i < rec.segment_ids.size(); ++i)
        if (rec.segment_ids[i] < 0 || rec.segment_ids[i] >= config.type_vocab_size)
            fail("{}: segment_ids[{}] = {}, outside the model's token types [0, {}) (expected "
                 "records for a model of type_vocab_size > {})",
                 where, i, rec.segment_ids[i], config.type_vocab_size, rec.segment_ids[i]);
}

}  // namespace

void check_input_records(const std::vector<std::string>& files, int max_seq_length,
                         int max_predictions_per_seq, const model::BertConfig& config,
                         const std::string& flag, bool skip_corrupt) {
    size_t empty = 0;
    uint64_t tfrecord_bytes = 0;  // only TFRecords' framing is walked
    for (const std::string& path : files) {
        std::error_code ec;
        const auto size = std::filesystem::file_size(path, ec);
        if (!ec && !io::is_hdf5_path(path)) tfrecord_bytes += size;
    }
    const bool walk = !skip_corrupt && tfrecord_bytes <= kFramingCheckBytes;
    std::string payload;
    io::PretrainingRecord rec;
    for (const std::string& path : files) {
        try {
            const std::string where = path + ": record 0";
            if (io::is_hdf5_path(path)) {
                // As ShardSource opens it (masked_lm_* may be narrower than the flag): opening
                // checks the file, the datasets' names, types and shapes; then one row is read.
                const io::Hdf5ShardReader reader(path, max_seq_length, max_predictions_per_seq,
                                                 true);
                if (reader.records() == 0) {
                    ++empty;
                    continue;
                }
                const io::Hdf5ShardArrays row = reader.read_rows(0, 1);
                io::check_hdf5_arrays(path, row);
                io::decode_hdf5_record(row, 0, where, rec);
                check_record_ids(rec, where, config);
                continue;
            }
            io::TfRecordReader reader(path, skip_corrupt);
            if (!reader.next(payload)) {
                ++empty;
                continue;
            }
            io::parse_pretraining_example(io::decode_example(payload, where), max_seq_length,
                                          max_predictions_per_seq, where, rec);
            check_record_ids(rec, where, config);
            if (walk)
                while (reader.skip()) {
                }
        } catch (const Error& e) {
            fail("--{}: {} (found by the check of every input before the first step)", flag,
                 e.what());
        }
    }
    if (!files.empty() && empty == files.size())
        fail("--{}: expected records, got none in {} file(s){} (first: {})", flag, empty,
             skip_corrupt ? " (with --skip_corrupt_records: none it did not skip)" : "",
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

int64_t eval_records(const std::vector<std::string>& files, int64_t limit, bool skip_corrupt, int max_seq_length,
                     int max_predictions_per_seq, const model::BertConfig* check) {
    int64_t n = 0;
    data::ShardRecord rec;
    io::PretrainingRecord decoded;
    for (const std::string& f : files) {
        data::ShardSource src(f, skip_corrupt, max_seq_length, max_predictions_per_seq);
        for (int64_t i = 0; (limit <= 0 || n < limit) && src.next(rec); ++i, ++n) {
            if (check == nullptr) continue;
            const std::string where = fmt::format("{}: record {}", f, i);
            rec.decode(max_seq_length, max_predictions_per_seq, where, decoded);
            check_record_ids(decoded, where, *check);
        }
    }
    return n;
}

}  // namespace bertbench::train
