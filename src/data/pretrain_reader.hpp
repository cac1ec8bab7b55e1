// The training input pipeline: MLPerf-schema TFRecord shards or NVIDIA HDF5 shards (chosen per
// file by extension, data/shard_source.hpp) -> unpadded model::Batch.
// Reference: run_pretraining.py input_fn (shuffled shards, repeat, record shuffle buffer, fixed
// order for eval). Everything random derives from (seed, epoch[, rank]), so the cursor is just
// (epoch, records consumed in that epoch) and restore() re-reads and skips (no decoding) to it.
// Sharding across ranks: with >= world_size files holding records (empty ones are left out), rank r
// reads the i-th of them with i % world_size == r;
// with fewer files (or shard_by_record), every rank reads all files in the same order and keeps
// records g % N == r (g counts records across the files of the epoch).
#pragma once

#include <condition_variable>
#include <cstdint>
#include <deque>
#include <exception>
#include <memory>
#include <mutex>
#include <nlohmann/json.hpp>
#include <string>
#include <thread>
#include <vector>

#include "io/example.hpp"
#include "model/batch.hpp"

namespace bertbench::data {

// Appends one decoded record to an unpadded batch: its real tokens (input_mask == 1, which must
// be a prefix) and the masked predictions with non-zero weight. Every value is checked before the
// batch changes: ids in [0, 2^31) (the batch is int32) and, where given (> 0), token and masked
// ids below vocab_size and segment ids below type_vocab_size; positions inside the real tokens,
// weights finite and >= 0, next_sentence_labels 0 or 1; otherwise Error "<where>: feature
// <name>: ...".
void append_pretraining_record(model::Batch& batch, const io::PretrainingRecord& record,
                               const std::string& where, int vocab_size = 0,
                               int type_vocab_size = 0);

struct PretrainReaderConfig {
    std::vector<std::string> files;    // already expanded (core/fs.hpp expand_globs)
    int max_seq_length = 128;          // schema check: input_ids etc. have this many values
    int max_predictions_per_seq = 20;  // schema check: masked_lm_* have this many values
    int batch_size = 32;               // sequences per batch (per rank)
    bool training = true;              // false: eval (fixed order, each record once, then end)
    uint64_t seed = 12345;
    int shuffle_buffer = 1000;  // records; 0 = file order (training only)
    int rank = 0, world_size = 1;
    // Record stride even with >= world_size files. Data-parallel eval uses it: then the ranks'
    // first k records are exactly the single process's first world_size * k records.
    bool shard_by_record = false;
    int prefetch_batches = 4;  // bounded queue between the reader thread and next()
    bool skip_corrupt_records = false;
    // The model's bert_config.json sizes: a token or masked id >= vocab_size, or a segment id >=
    // type_vocab_size, is an error naming the file and record where it is decoded. 0: unchecked.
    int vocab_size = 0, type_vocab_size = 0;
};

// Why `state` (a PretrainReader::state()) cannot continue in a reader of `config`: "" when
// restore() can, else the first field that differs, e.g. "files [\"a\"] in the cursor, [\"b\"] now"
// (other data files, seed, shuffle_buffer, ranks). A field missing is an error (not a cursor).
std::string cursor_mismatch(const PretrainReaderConfig& config, const nlohmann::json& state);

class PretrainReader {
  public:
    explicit PretrainReader(PretrainReaderConfig config);  // validates the config; no I/O yet
    ~PretrainReader();                                     // stops and joins the thread
    PretrainReader(const PretrainReader&) = delete;
    PretrainReader& operator=(const PretrainReader&) = delete;

    // The next batch (training: always batch_size sequences, forever; eval: the last batch may
    // be smaller, then false). A schema or I/O error on the reader thread is rethrown here.
    bool next(model::Batch& batch);

    // Cursor of the next batch next() will return: {"epoch", "records_in_epoch", plus the
    // config fields it depends on (seed, files, rank, world_size, shuffle_buffer, training)}.
    nlohmann::json state() const;
    // Continue from a state() of a reader with the same config; the following batches equal
    // those the saved reader would have returned. Error naming the field on a mismatch.
    void restore(const nlohmann::json& state);

    uint64_t records_read() const { return records_read_; }  // delivered through next()
    const PretrainReaderConfig& config() const { return config_; }

  private:
    struct Item;
    void start();
    void stop();
    void produce(uint64_t epoch, uint64_t skip);

    PretrainReaderConfig config_;
    uint64_t epoch_ = 0, records_in_epoch_ = 0, records_read_ = 0;
    bool ended_ = false;

    std::thread thread_;
    mutable std::mutex mutex_;
    std::condition_variable not_empty_, not_full_;
    std::deque<std::unique_ptr<Item>> queue_;
    bool stop_ = false, running_ = false;
};

}  // namespace bertbench::data
