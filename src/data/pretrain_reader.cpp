// PretrainReader: shard order and shuffle buffer seeded from (seed, epoch[, rank]); a background
// thread decodes records into unpadded batches and hands them over through a bounded queue.
// Resume is exact because the record stream of an epoch is a pure function of the config and
// the epoch: restore() replays the stream and skips the consumed records without decoding them.
#include "data/pretrain_reader.hpp"

#include <cmath>
#include <filesystem>
#include <limits>
#include <random>
#include <string_view>

#include "core/error.hpp"
#include "core/json_safe.hpp"
#include "data/shard_source.hpp"

namespace bertbench::data {
namespace {

uint64_t splitmix64(uint64_t x) {
    x += 0x9E3779B97F4A7C15ull;
    x = (x ^ (x >> 30)) * 0xBF58476D1CE4E5B9ull;
    x = (x ^ (x >> 27)) * 0x94D049BB133111EBull;
    return x ^ (x >> 31);
}

// A generator whose stream depends only on its key, and a portable bounded draw (unlike
// std::uniform_int_distribution, whose algorithm differs between standard libraries).
class Rng {
  public:
    Rng(uint64_t seed, uint64_t epoch, uint64_t rank, uint64_t purpose)
        : gen_(splitmix64(splitmix64(splitmix64(splitmix64(seed) ^ epoch) ^ rank) ^ purpose)) {}
    uint64_t below(uint64_t n) {  // uniform in [0, n), n > 0, by rejection
        const uint64_t limit = UINT64_MAX - UINT64_MAX % n;
        uint64_t x;
        do x = gen_();
        while (x >= limit);
        return x % n;
    }

  private:
    std::mt19937_64 gen_;
};

struct RawRecord {
    ShardRecord record;  // undecoded (TFRecord bytes or an HDF5 row)
    uint32_t file = 0;   // index into config.files
    uint64_t index = 0;  // record index within that file
};

// The record stream of one rank for one epoch: files in (shuffled) order, record-level sharding
// when there are fewer files than ranks, then the shuffle buffer.
class RecordStream {
  public:
    explicit RecordStream(const PretrainReaderConfig& c) : c_(c) {
        const size_t world = static_cast<size_t>(c.world_size);
        // Under mpirun, files that hold no record (an empty text shard's output) are left out
        // before the split by file: a rank given only those would have nothing to train on.
        std::vector<uint32_t> files;
        for (size_t i = 0; i < c.files.size(); ++i)
            if (world == 1 || c.shard_by_record ||
                shard_holds_records(c.files[i], c.max_seq_length, c.max_predictions_per_seq))
                files.push_back(static_cast<uint32_t>(i));
        record_sharding_ = files.size() < world || c.shard_by_record;
        for (size_t k = 0; k < files.size(); ++k)
            if (record_sharding_ || k % world == static_cast<size_t>(c.rank)) my_files_.push_back(files[k]);
    }

    void start_epoch(uint64_t epoch) {
        order_ = my_files_;
        if (c_.training) {  // Fisher-Yates, the same on every rank for a given (seed, epoch)
            Rng rng(c_.seed, epoch, 0, 1);
            for (size_t i = order_.size(); i > 1; --i)
                std::swap(order_[i - 1], order_[rng.below(i)]);
        }
        buffer_rng_ = std::make_unique<Rng>(c_.seed, epoch, static_cast<uint64_t>(c_.rank), 2);
        buffer_.clear();
        file_pos_ = 0;
        global_ = 0;
        reader_.reset();
        source_done_ = false;
    }

    // The next record of this epoch; false at its end.
    bool next(RawRecord& out) {
        const size_t cap = c_.training ? static_cast<size_t>(c_.shuffle_buffer) : 0;
        if (cap == 0) return pull(out);
        while (!source_done_ && buffer_.size() < cap) {
            RawRecord r;
            if (!pull(r)) break;
            buffer_.push_back(std::move(r));
        }
        if (buffer_.empty()) return false;
        const size_t j = buffer_rng_->below(buffer_.size());
        std::swap(buffer_[j], buffer_.back());
        out = std::move(buffer_.back());
        buffer_.pop_back();
        return true;
    }

  private:
    bool pull(RawRecord& out) {
        const uint64_t world = static_cast<uint64_t>(c_.world_size);
        while (!source_done_) {
            if (!reader_) {
                if (file_pos_ == order_.size()) {
                    source_done_ = true;
                    break;
                }
                reader_ = std::make_unique<ShardSource>(c_.files[order_[file_pos_]],
                                                        c_.skip_corrupt_records, c_.max_seq_length,
                                                        c_.max_predictions_per_seq);
            }
            const uint64_t index = reader_->index();
            if (!reader_->next(out.record)) {
                reader_.reset();
                ++file_pos_;
                continue;
            }
            const uint64_t g = global_++;
            if (record_sharding_ && g % world != static_cast<uint64_t>(c_.rank)) continue;
            out.file = order_[file_pos_];
            out.index = index;
            return true;
        }
        return false;
    }

    const PretrainReaderConfig& c_;
    bool record_sharding_ = false;
    std::vector<uint32_t> my_files_, order_;
    size_t file_pos_ = 0;
    uint64_t global_ = 0;
    std::unique_ptr<ShardSource> reader_;
    bool source_done_ = false;
    std::vector<RawRecord> buffer_;
    std::unique_ptr<Rng> buffer_rng_;
};

std::vector<std::string> basenames(const std::vector<std::string>& files) {
    std::vector<std::string> out;
    for (const auto& f : files) out.push_back(std::filesystem::path(f).filename().string());
    return out;
}

// The batch holds int32: an int64 id outside [0, 2^31) must be an error, not wrap (2^32 + 5
// would become 5).
// `limit` > 0: the model's table size (vocab_size or type_vocab_size), named in the message.
int32_t checked_id(int64_t v, const char* feature, size_t index, const std::string& where,
                   int limit = 0, const char* limit_name = "") {
    if (v < 0 || v > std::numeric_limits<int32_t>::max())
        fail("{}: feature {}: expected an id in [0, 2^31), got {} at index {}", where, feature, v,
             index);
    if (limit > 0 && v >= limit)
        fail(
            "{}: feature {}: expected an id in [0, {}) ({} of the model), got {} at index {} "
            "(hint: {})",
            where, feature, limit, limit_name, v, index,
            std::string_view(limit_name) == "type_vocab_size"
                ? "the data has more token types than bert_config.json's type_vocab_size"
                : "the data was made with another vocabulary than bert_config.json's");
    return static_cast<int32_t>(v);
}

}  // namespace

void append_pretraining_record(model::Batch& batch, const io::PretrainingRecord& r,
                               const std::string& where, int vocab_size, int type_vocab_size) {
    const int T = static_cast<int>(r.input_mask.size());
    if (r.input_ids.size() != r.input_mask.size() || r.segment_ids.size() != r.input_mask.size() ||
        r.masked_lm_positions.size() != r.masked_lm_weights.size() ||
        r.masked_lm_ids.size() != r.masked_lm_weights.size())
        fail("{}: features: expected input_ids/input_mask/segment_ids of one length and "
             "masked_lm_positions/ids/weights of one length, got {}/{}/{} and {}/{}/{}",
             where, r.input_ids.size(), r.input_mask.size(), r.segment_ids.size(),
             r.masked_lm_positions.size(), r.masked_lm_ids.size(), r.masked_lm_weights.size());
    int n = 0;
    while (n < T && r.input_mask[n] == 1) ++n;
    for (int i = n; i < T; ++i)
        if (r.input_mask[i] != 0)
            fail("{}: feature input_mask: expected 1s followed by 0s, got {} at position {}", where,
                 r.input_mask[i], i);
    if (n == 0) fail("{}: feature input_mask: expected at least one real token, got none", where);
    // Everything is checked before the batch is touched, so a bad record leaves it as it was.
    for (int i = 0; i < n; ++i) {
        checked_id(r.input_ids[i], "input_ids", i, where, vocab_size, "vocab_size");
        checked_id(r.segment_ids[i], "segment_ids", i, where, type_vocab_size, "type_vocab_size");
    }
    for (size_t j = 0; j < r.masked_lm_weights.size(); ++j) {
        const float w = r.masked_lm_weights[j];
        if (!(w >= 0.0f && std::isfinite(w)))  // NaN, negative or infinite
            fail("{}: feature masked_lm_weights: expected a finite weight >= 0, got {} at index {}",
                 where, w, j);
        if (w == 0.0f) continue;
        const int64_t pos = r.masked_lm_positions[j];
        if (pos < 0 || pos >= n)
            fail(
                "{}: feature masked_lm_positions: expected a position in [0, {}) (the real "
                "tokens), got {} at index {}",
                where, n, pos, j);
        checked_id(r.masked_lm_ids[j], "masked_lm_ids", j, where, vocab_size, "vocab_size");
    }
    if (r.next_sentence_labels != 0 && r.next_sentence_labels != 1)
        fail("{}: feature next_sentence_labels: expected 0 or 1, got {}", where,
             r.next_sentence_labels);
    if (batch.seq_offsets.empty()) batch.seq_offsets.push_back(0);
    const int32_t off = batch.seq_offsets.back();
    const int32_t b = batch.batch_size;
    if (off > std::numeric_limits<int32_t>::max() - n)
        fail("{}: batch: expected fewer than 2^31 tokens in one batch, got {} + {}", where, off, n);
    for (int i = 0; i < n; ++i) {
        batch.input_ids.push_back(static_cast<int32_t>(r.input_ids[i]));
        batch.segment_ids.push_back(static_cast<int32_t>(r.segment_ids[i]));
    }
    for (size_t j = 0; j < r.masked_lm_weights.size(); ++j) {
        const float w = r.masked_lm_weights[j];
        if (w == 0.0f) continue;  // padding prediction
        const int64_t pos = r.masked_lm_positions[j];
        batch.masked_index.push_back(off + static_cast<int32_t>(pos));
        batch.masked_ids.push_back(static_cast<int32_t>(r.masked_lm_ids[j]));
        batch.masked_weights.push_back(w);
        batch.masked_seq.push_back(b);
    }
    batch.next_sentence_labels.push_back(static_cast<int32_t>(r.next_sentence_labels));
    batch.seq_offsets.push_back(off + n);
    batch.batch_size = b + 1;
}

struct PretrainReader::Item {
    model::Batch batch;
    uint64_t epoch = 0, records_in_epoch = 0, records = 0;
    bool end = false;
    std::exception_ptr error;
};

PretrainReader::PretrainReader(PretrainReaderConfig config) : config_(std::move(config)) {
    const auto& c = config_;
    if (c.files.empty())
        fail("[reader] input files: expected at least one TFRecord or HDF5 file, got none");
    if (c.batch_size <= 0) fail("[reader] batch_size: expected > 0, got {}", c.batch_size);
    if (c.max_seq_length <= 0 || c.max_predictions_per_seq <= 0)
        fail("[reader] max_seq_length/max_predictions_per_seq: expected > 0, got {}/{}",
             c.max_seq_length, c.max_predictions_per_seq);
    if (c.shuffle_buffer < 0)
        fail("[reader] shuffle_buffer: expected >= 0, got {}", c.shuffle_buffer);
    if (c.world_size <= 0 || c.rank < 0 || c.rank >= c.world_size)
        fail("[reader] rank {} of world_size {}: expected 0 <= rank < world_size", c.rank,
             c.world_size);
    if (c.prefetch_batches <= 0)
        fail("[reader] prefetch_batches: expected > 0, got {}", c.prefetch_batches);
    if (c.vocab_size < 0 || c.type_vocab_size < 0)
        fail("[reader] vocab_size/type_vocab_size: expected >= 0 (0: unchecked), got {}/{}",
             c.vocab_size, c.type_vocab_size);
}

PretrainReader::~PretrainReader() {
    stop();
}

void PretrainReader::start() {
    stop_ = false;
    running_ = true;
    const uint64_t epoch = epoch_, skip = records_in_epoch_;
    thread_ = std::thread([this, epoch, skip] { produce(epoch, skip); });
}

void PretrainReader::stop() {
    {
        std::lock_guard<std::mutex> lock(mutex_);
        stop_ = true;
    }
    not_full_.notify_all();
    if (thread_.joinable()) thread_.join();
    queue_.clear();
    running_ = false;
    stop_ = false;
}

void PretrainReader::produce(uint64_t epoch, uint64_t skip) {
    auto push = [this](std::unique_ptr<Item> item) {
        std::unique_lock<std::mutex> lock(mutex_);
        not_full_.wait(lock, [this] {
            return stop_ || queue_.size() < static_cast<size_t>(config_.prefetch_batches);
        });
        if (stop_) return false;
        queue_.push_back(std::move(item));
        not_empty_.notify_one();
        return true;
    };
    try {
        const auto& c = config_;
        RecordStream stream(c);
        stream.start_epoch(epoch);
        RawRecord raw;
        uint64_t in_epoch = 0;
        for (; in_epoch < skip; ++in_epoch)
            if (!stream.next(raw))
                fail(
                    "[reader] cursor: epoch {} has only {} records for rank {}, the cursor says {} "
                    "were read (hint: the data or the reader config changed since the save)",
                    epoch, in_epoch, c.rank, skip);
        io::PretrainingRecord rec;
        bool end = false;
        while (!end) {
            {
                std::lock_guard<std::mutex> lock(mutex_);
                if (stop_) return;
            }
            auto item = std::make_unique<Item>();
            item->batch.seq_offsets.push_back(0);
            while (item->batch.batch_size < c.batch_size) {
                if (!stream.next(raw)) {
                    if (!c.training) {
                        end = true;
                        break;
                    }
                    if (in_epoch == 0)
                        fail(
                            "[reader] rank {} of {}: expected records in every epoch, got none "
                            "from {} file(s) (hint: fewer records than ranks?)",
                            c.rank, c.world_size, c.files.size());
                    stream.start_epoch(++epoch);
                    in_epoch = 0;
                    continue;
                }
                ++in_epoch;
                const std::string where =
                    fmt::format("{}: record {}", c.files[raw.file], raw.index);
                raw.record.decode(c.max_seq_length, c.max_predictions_per_seq, where, rec);
                append_pretraining_record(item->batch, rec, where, c.vocab_size,
                                          c.type_vocab_size);
                ++item->records;
            }
            item->epoch = epoch;
            item->records_in_epoch = in_epoch;
            if (item->records > 0 && !push(std::move(item))) return;
        }
        auto last = std::make_unique<Item>();
        last->end = true;
        last->epoch = epoch;
        last->records_in_epoch = in_epoch;
        push(std::move(last));
    } catch (...) {
        auto failed = std::make_unique<Item>();
        failed->end = true;
        failed->error = std::current_exception();
        push(std::move(failed));
    }
}

bool PretrainReader::next(model::Batch& batch) {
    if (ended_) return false;
    if (!running_) start();
    std::unique_ptr<Item> item;
    {
        std::unique_lock<std::mutex> lock(mutex_);
        not_empty_.wait(lock, [this] { return !queue_.empty(); });
        item = std::move(queue_.front());
        queue_.pop_front();
    }
    not_full_.notify_one();
    if (item->error) {
        ended_ = true;
        std::rethrow_exception(item->error);
    }
    if (item->end) {
        ended_ = true;
        return false;
    }
    batch = std::move(item->batch);
    epoch_ = item->epoch;
    records_in_epoch_ = item->records_in_epoch;
    records_read_ += item->records;
    return true;
}

nlohmann::json PretrainReader::state() const {
    const auto& c = config_;
    return {{"epoch", epoch_},        {"records_in_epoch", records_in_epoch_},
            {"seed", c.seed},         {"shuffle_buffer", c.shuffle_buffer},
            {"rank", c.rank},         {"world_size", c.world_size},
            {"shard_by_record", c.shard_by_record},
            {"training", c.training}, {"files", basenames(c.files)}};
}

namespace {
const nlohmann::json& cursor_field(const nlohmann::json& s, const char* name) {
    if (!s.is_object() || !s.contains(name))
        fail("[reader] cursor: expected field \"{}\", got {} (hint: not a reader state)", name,
             json_safe::brief(s));
    return s.at(name);
}
}  // namespace

std::string cursor_mismatch(const PretrainReaderConfig& c, const nlohmann::json& s) {
    const std::pair<const char*, nlohmann::json> fields[] = {
        {"seed", c.seed},
        {"shuffle_buffer", c.shuffle_buffer},
        {"rank", c.rank},
        {"world_size", c.world_size},
        {"shard_by_record", c.shard_by_record},
        {"training", c.training},
        {"files", basenames(c.files)}};
    for (const auto& [name, want] : fields) {
        if (std::string_view(name) == "shard_by_record" && !s.contains(name)) continue;  // older cursors
        if (cursor_field(s, name) != want)
            return fmt::format("{} {} in the cursor, {} now", name, json_safe::brief(s.at(name)),
                               json_safe::brief(want));
    }
    return "";
}

void PretrainReader::restore(const nlohmann::json& s) {
    if (const std::string why = cursor_mismatch(config_, s); !why.empty())
        fail("[reader] cursor: expected this reader's data and flags, got {} (hint: resume with the same data "
             "and reader flags)", why);
    const auto field = [&](const char* name) -> const nlohmann::json& { return cursor_field(s, name); };
    // (nlohmann keeps an integer parsed from text unsigned when >= 0, and one set in code signed)
    const auto count = [&](const char* name) {
        const nlohmann::json& v = field(name);
        return v.is_number_unsigned() || (v.is_number_integer() && v.get<int64_t>() >= 0);
    };
    if (!count("epoch") || !count("records_in_epoch"))
        fail("[reader] cursor: epoch/records_in_epoch: expected non-negative integers, got {}/{}",
             json_safe::brief(field("epoch")), json_safe::brief(field("records_in_epoch")));
    stop();
    epoch_ = field("epoch").get<uint64_t>();
    records_in_epoch_ = field("records_in_epoch").get<uint64_t>();
    ended_ = false;
}

}  // namespace bertbench::data
