// The engine benchmark: one (task, mode, model, seq_len, batch, threads, steps_per_update) point
// run on synthetic full-length batches, or (--data) on the real unpadded sequences of
// MLPerf-schema TFRecords (task pretraining) or run_squad.py feature TFRecords (task squad), read
// in fixed order and cycled; warm-up steps excluded, then `steps` timed steps.
// pretraining: a training step = steps_per_update x (forward + backward + clip/accumulate) + one
// LAMB update; an inference step = one forward of the pretraining model (dropout off, MLM at
// gathered positions). squad: the span model (encoder + cls/squad dense H->2); training = the same
// with run_squad.py's loss and optimization.py's AdamW; inference = encoder + span head forward.
// Definitions of every reported figure: docs/benchmark.md (and definitions(), embedded in reports).
#pragma once

#include <functional>
#include <nlohmann/json.hpp>
#include <optional>
#include <span>
#include <string>
#include <vector>

#include "model/batch.hpp"
#include "model/config.hpp"
#include "ops/bf16.hpp"

namespace bertbench::backend {
class Backend;
}

namespace bertbench::bench {

struct Point {
    std::string mode;   // "train" | "infer"
    std::string model;  // preset name or config file path
    model::BertConfig config;
    int seq_len = 128;
    int batch_size = 8;
    int threads = 1;
    int steps_per_update = 1;  // micro-batches per optimizer update (train only)
    int warmup = 2;
    int steps = 10;  // at least this many timed steps (and see min_time_s)
    std::vector<std::string> data_files;  // empty: synthetic full-length batches
    int max_predictions = 0;              // 0: default_max_predictions(seq_len)
    bool skip_corrupt_records = false;    // --data: skip TFRecord records failing their CRC
    double min_time_s = 0;  // keep timing past `steps` until the timed steps add up to this
    ops::Precision dtype = ops::Precision::fp32;  // the engine's GEMM precision
    std::string task = "pretraining";             // "pretraining" | "squad"
    // task squad, --data: "padded" = run_squad.py's computation (every feature's max_seq_length
    // rows; padding rows are queries over the real keys, model::append_padded_sequence), "real" =
    // the real tokens only (padding not computed; the same logits at real positions, but a
    // training loss whose softmax spans the real tokens only)
    std::string squad_layout = "padded";
    // pretraining: EngineOptions::last_layer_subset (the last layer's dense half on the [CLS] rows
    // and masked positions only; --last_layer_subset)
    bool last_layer_subset = false;
    // The backend the engine runs on, with the parameters, gradients and optimizer state in its
    // memory (null: the CPU's).
    backend::Backend* backend = nullptr;
};

struct PointResult {
    Point point;
    std::vector<double> step_ms;  // timed steps only
    double step_ms_median = 0, step_ms_min = 0, step_ms_max = 0;
    double latency_ms_p50 = 0, latency_ms_p90 = 0, latency_ms_p99 = 0;  // over timed steps
    double sequences_per_second = 0;      // mean sequences per step / median step time
    double tokens_per_second = 0;         // real (unpadded) tokens per second
    double padded_tokens_per_second = 0;  // batch_size * seq_len per step: the padded equivalent
    double real_token_fraction = 1;       // real / padded tokens over the timed steps
    double gflops = 0;                    // model FLOPs (real tokens) / median step time
    double ceiling_gflops = 0;            // GEMM ceiling at this thread count and dtype (0: unknown)
    double mfu = 0;                       // gflops / ceiling_gflops
    double peak_rss_mb = 0;
    double arena_mb = 0;
    // task squad: where the training targets came from ("synthetic", "features", or "cls" when
    // the --data features carry no positions, i.e. eval features: every target is [CLS])
    std::string span_labels;
    nlohmann::json to_json() const;
};

// The definitions every report embeds (what a step is, what is excluded, which tokens count).
nlohmann::json definitions();

// MLPerf's max_predictions_per_seq for a sequence length: 20 at 128, 76 at 512, proportional
// (rounded down) in between or beyond.
int default_max_predictions(int seq_len);
// The masked positions per sequence of a point: --max_predictions, else the default (none for squad).
int point_max_predictions(const Point& p);
// B full-length sequences of seq_len tokens with random ids, two segments, masked positions and
// NSP labels, deterministic by seed.
model::Batch synthetic_batch(const model::BertConfig& c, int batch_size, int seq_len,
                             int max_predictions, uint64_t seed);
// `count` full batches of the TFRecords in eval (fixed) order, cycling over the files; partial
// last batches are dropped. Error if the files hold fewer than batch_size records, or (naming the
// file and record) an id outside the model's vocab_size / type_vocab_size.
std::vector<model::Batch> read_batches(const std::vector<std::string>& files, const model::BertConfig& c,
                                       int seq_len, int max_predictions, int batch_size, int count,
                                       bool skip_corrupt_records = false);

// ---- task squad ----
// One SQuAD batch: the packed real tokens and, per sequence, the within-sequence start/end token
// positions run_squad.py's loss reads (B each).
struct SquadBatch {
    model::Batch batch;  // masked_* and next_sentence_labels empty
    std::vector<int32_t> start_positions, end_positions;  // (B) each
};
// B full-length sequences of seq_len tokens (every token real): [CLS], a query of
// min(64, seq_len/4) random ids (segment 0), [SEP], a random-id document (segment 1), [SEP]; an
// answer span of up to 30 tokens inside the document; deterministic by seed.
SquadBatch synthetic_squad_batch(const model::BertConfig& c, int batch_size, int seq_len,
                                 uint64_t seed);
// One run_squad.py feature record as read (spans valid during the call only).
struct SquadFeatureRecord {
    std::string where;  // "[squad features] <file>: record <index>"
    int64_t unique_id = 0;
    std::span<const int32_t> input_ids, input_mask, segment_ids;  // seq_len each
    size_t real = 0;                                              // leading input_mask == 1 positions
    std::optional<std::pair<int32_t, int32_t>> positions;         // start/end (training features)
};
// Each feature of the files once, in file order, checked as read_squad_batches says below; `fn`
// returns false to stop.
void for_each_squad_feature(const std::vector<std::string>& files, int seq_len, int vocab_size,
                            bool skip_corrupt_records,
                            const std::function<bool(const SquadFeatureRecord&)>& fn);
// `count` full batches of run_squad.py feature TFRecords (FeatureWriter's Examples: unique_ids,
// input_ids, input_mask, segment_ids[, start_positions, end_positions, is_impossible]; eval.tf_record
// or train.tf_record) in file order, cycled. A feature's real tokens are the leading
// input_mask == 1 positions; padded: each feature becomes all its seq_len rows with
// key_lengths = its real tokens (model::append_padded_sequence, the reference's computation);
// otherwise only its real tokens (padding dropped, not computed). Features without start/end
// positions (eval features) get 0 / 0, the [CLS] target run_squad.py gives out-of-span windows;
// *has_positions (when non-null) says whether every feature read carried them. Errors name the
// file and record: a feature missing or of the wrong length (--seq_len must equal the features'
// max_seq_length), an input_mask that is not ones then zeros, an id outside [0, vocab_size), a
// position outside the real tokens; fewer than batch_size features.
std::vector<SquadBatch> read_squad_batches(const std::vector<std::string>& files, int seq_len,
                                           int vocab_size, int batch_size, int count,
                                           bool padded, bool skip_corrupt_records = false,
                                           bool* has_positions = nullptr);
// Real tokens of a batch: Σ key_lengths for a padded-query batch, else all its tokens.
int real_tokens(const model::Batch& b);
// Error naming the flag when the point cannot run as given (seq_len beyond the model's positions,
// more threads than CPUs, ...): `bench` checks every point before it measures any; run_point checks
// again.
void check_point(const Point& p);
// Error unless the point's --data files give one batch of batch_size (the point's, or a rank's
// share under mpirun) in its task's format and shapes: `bench` reads that first batch of every
// point before it measures anything, so a wrong file is said at once, not after the GEMM ceiling.
void check_data(const Point& p, int batch_size);
// Error unless a training point can run in precision d (int8 is for inference only).
void check_train_dtype(ops::Precision d);
// Runs one point. ceiling_gflops > 0 fills mfu.
PointResult run_point(const Point& p, double ceiling_gflops = 0);

// Per-op breakdown (core/profile.hpp) of `steps` steps of a point after one warm-up step;
// labels in first-seen order; seconds per step.
struct ProfileRow {
    std::string op;
    double ms_per_step = 0;
    double share = 0;                     // of the profiled step time
    double gflops = 0, gbytes_per_s = 0;  // analytic FLOPs and bytes (docs/benchmark.md) / time
};
struct ProfileResult {
    Point point;
    double step_ms = 0;  // sum over rows
    std::vector<ProfileRow> rows;
};
ProfileResult profile_point(const Point& p, int steps);

}  // namespace bertbench::bench
