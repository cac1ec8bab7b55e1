// ShardSource: format dispatch by extension for the pretraining reader (see shard_source.hpp).
#include "data/shard_source.hpp"

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
        hdf5_ = std::make_shared<const io::Hdf5ShardArrays>(
            io::read_hdf5_shard(path, max_seq_length, max_predictions_per_seq));
    else
        tfrecord_ = std::make_unique<io::TfRecordReader>(path, skip_corrupt);
}

bool ShardSource::next(ShardRecord& out) {
    if (tfrecord_) {
        out.hdf5.reset();
        return tfrecord_->next(out.payload);
    }
    if (row_ >= hdf5_->records) return false;
    out.payload.clear();
    out.hdf5 = hdf5_;
    out.row = row_++;
    return true;
}

uint64_t ShardSource::index() const {
    return tfrecord_ ? tfrecord_->index() : row_;
}

}  // namespace bertbench::data
