// Checks a run makes before its first step, so that a bad input fails in seconds rather than
// hours in (issue 14 §3): the first record of every TFRecord and HDF5 file against the MLPerf
// schema and sequence length, the framing of every TFRecord (a truncated file), every HDF5 file's
// metadata, and every weight finite after a checkpoint is loaded.
#pragma once

#include <cstdint>
#include <span>
#include <string>
#include <vector>

#include "model/config.hpp"
#include "model/param_table.hpp"

namespace bertbench::train {

// Reads the first record of each file and checks it against `max_seq_length` /
// `max_predictions_per_seq` (its token ids below the model's `vocab_size`: records of a larger
// vocabulary fail here; its segment ids below `type_vocab_size`). A TFRecord's is parsed with the
// FixedLenFeature schema, then the other records' framing is walked (TfRecordReader::skip:
// headers only) where the TFRecords add up to at most kFramingCheckBytes (beyond that reading them
// would cost minutes; a bad record then stops the run where it is read) and records are not
// skipped (`skip_corrupt`). An HDF5 file (io::is_hdf5_path) is opened as the reader opens it (a
// truncated file, its datasets' names, types and shapes: metadata) and its first row decoded.
// Error naming the flag, the file and what is wrong; also when no file, of either format, holds
// a record.
constexpr uint64_t kFramingCheckBytes = uint64_t(2) << 30;
void check_input_records(const std::vector<std::string>& files, int max_seq_length,
                         int max_predictions_per_seq, const model::BertConfig& config,
                         const std::string& flag, bool skip_corrupt);

// The sequences one evaluation covers (MLPerf's eval_samples): each record of the eval files
// once, at most `limit` of them (--max_eval_steps batches; 0: no limit). With `check`, each
// record counted is decoded and its ids checked against that model's tables (an error naming the
// record), so a bad eval record stops a run before training, not at its first evaluation.
int64_t eval_records(const std::vector<std::string>& files, int64_t limit, bool skip_corrupt, int max_seq_length,
                     int max_predictions_per_seq, const model::BertConfig* check = nullptr);

// Error naming the tensor, the flat index into it and the value of the first NaN or Inf weight;
// `source` names where the weights came from (a checkpoint path).
void check_finite_params(const model::ParamTable& table, std::span<const float> params,
                         const std::string& source);

}  // namespace bertbench::train
