// ShardSource: format dispatch by extension for the pretraining reader (see shard_source.hpp).
#include "data/shard_source.hpp"

#include <algorithm>
#include <filesystem>
#include <limits>

#include "core/error.hpp"

namespace bertbench::data {

void ShardRecord::decode(int max_seq_length, int max_predictions_per_seq, std::string_view where,
                         io::PretrainingRecord& out) const {
    if (hdf5) {
        io::decode_hdf5_record(*hdf5, row, where, out);
        return;
    }
    io::parse_pretraining_example(io::decode_example(payload, where), max_seq_length,
                                  max_predictions_per_seq, where, out);
}

ShardSource::ShardSource(const std::string& path, bool skip_corrupt, int max_seq_length,
                         int max_predictions_per_seq) {
    if (io::is_hdf5_path(path))
        hdf5_ = std::make_unique<io::Hdf5ShardReader>(path, max_seq_length,
                                                      max_predictions_per_seq, true);
    else
        tfrecord_ = std::make_unique<io::TfRecordReader>(path, skip_corrupt);
}

bool shard_holds_records(const std::string& path, int max_seq_length, int max_predictions_per_seq) {
    if (io::is_hdf5_path(path))
        return io::Hdf5ShardReader(path, max_seq_length, max_predictions_per_seq, true).records() > 0;
    std::error_code ec;
    return std::filesystem::file_size(path, ec) > 0 || ec;
}

bool ShardSource::next(ShardRecord& out) {
    if (tfrecord_) {
        out.hdf5.reset();
        return tfrecord_->next(out.payload);
    }
    const uint64_t n = hdf5_->records();
    if (row_ >= n) return false;
    if (!block_ || row_ - block_first_ >= block_->records) {
        block_.reset();  // the last reference here: the next block replaces it, not joins it
        block_first_ = row_;
        block_ = std::make_shared<const io::Hdf5ShardArrays>(
            hdf5_->read_rows(row_, std::min(hdf5_->block_rows(), n - row_)));
        io::check_hdf5_arrays(hdf5_->path(), *block_);
    }
    out.payload.clear();
    out.hdf5 = block_;
    out.row = row_ - block_first_;
    ++row_;
    return true;
}

uint64_t ShardSource::index() const {
    return tfrecord_ ? tfrecord_->index() : row_;
}

std::pair<int, int> record_widths(const std::string& path) {
    if (io::is_hdf5_path(path)) {
        const io::Hdf5ShardReader r(path, 0, 0);
        return {r.max_seq_length(), r.max_predictions_per_seq()};
    }
    io::TfRecordReader reader(path, false);
    std::string payload;
    if (!reader.next(payload))
        fail("{}: expected a pretraining record to take the widths from, got an empty file", path);
    const io::Example ex = io::decode_example(payload, path + ": record 0");
    const auto width = [&](const char* name) {
        const io::Feature* f = ex.find(name);
        if (f == nullptr || f->kind != io::Feature::Kind::int64 || f->ints.empty())
            fail("{}: record 0: expected an int64 feature {} to take the width from, got {}", path,
                 name, f == nullptr ? "none" : "another type or an empty list");
        if (f->ints.size() > static_cast<size_t>(std::numeric_limits<int>::max()))
            fail("{}: record 0: feature {}: {} values is no width", path, name, f->ints.size());
        return static_cast<int>(f->ints.size());
    };
    return {width("input_ids"), width("masked_lm_positions")};
}

}  // namespace bertbench::data
