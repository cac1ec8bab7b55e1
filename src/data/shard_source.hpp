// One input shard of the pretraining pipeline, its format chosen by extension: NVIDIA HDF5 for
// ".hdf5"/".h5" (any case), TFRecord for every other name. A glob or comma list may mix both;
// each file is read by its own extension. TFRecords stream record by record; an HDF5 shard is
// checked on open and read in blocks of rows (io::kHdf5BlockBytes), each shared by its pending
// records, so memory follows the rows read, never the count a file declares.
// Records are handed out undecoded so that a resumed reader can skip them cheaply.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <string_view>
#include <utility>

#include "io/example.hpp"
#include "io/hdf5_shard.hpp"
#include "io/tfrecord.hpp"

namespace bertbench::data {

// A record not yet decoded: TFRecord payload bytes, or a row of a block of an HDF5 shard.
struct ShardRecord {
    std::string payload;                              // TFRecord: tf.train.Example bytes
    std::shared_ptr<const io::Hdf5ShardArrays> hdf5;  // HDF5: a block of rows ...
    uint64_t row = 0;                                 // ... and the record's row in the block

    // The record in the MLPerf schema (HDF5: weights derived as NVIDIA's loader does).
    // `where` prefixes errors ("file: record 12").
    void decode(int max_seq_length, int max_predictions_per_seq, std::string_view where,
                io::PretrainingRecord& out) const;
};

class ShardSource {
  public:
    // Opens `path` (HDF5: checks schema and storage against the two widths now, reads no rows;
    // its masked_lm_* may be narrower than max_predictions_per_seq, as NVIDIA's loader allows).
    // skip_corrupt applies to TFRecords (see TfRecordReader).
    ShardSource(const std::string& path, bool skip_corrupt, int max_seq_length,
                int max_predictions_per_seq);
    bool next(ShardRecord& out);  // the next record; false at the end of the file
    uint64_t index() const;       // index of the record next() returns next

  private:
    std::unique_ptr<io::TfRecordReader> tfrecord_;
    std::unique_ptr<io::Hdf5ShardReader> hdf5_;
    std::shared_ptr<const io::Hdf5ShardArrays> block_;  // rows [block_first_, + block_->records)
    uint64_t block_first_ = 0, row_ = 0;
};

// False for a shard that holds no record: a 0-byte TFRecord file (a TFRecord with a record has
// bytes), an HDF5 shard of 0 rows (opened and checked as ShardSource opens it). True otherwise,
// a file that cannot be read included (its reader reports it).
bool shard_holds_records(const std::string& path, int max_seq_length, int max_predictions_per_seq);

// (max_seq_length, max_predictions_per_seq) of a pretraining file's records: an HDF5 shard's
// dataset widths, or the lengths of input_ids and masked_lm_positions in a TFRecord's first
// record. Error naming the file when it has no record or those features.
std::pair<int, int> record_widths(const std::string& path);

}  // namespace bertbench::data
