// The engine benchmark: one (mode, model, seq_len, batch, threads, steps_per_update) point run on
// synthetic full-length batches, or (--data) on the real unpadded sequences of MLPerf-schema
// TFRecords read in fixed order and cycled; warm-up steps excluded, then `steps` timed steps.
// A training step = steps_per_update x (forward + backward + clip/accumulate) + one LAMB update.
// An inference step = one forward of the pretraining model (dropout off, MLM at gathered
// positions). Definitions of every reported figure: docs/benchmark.md (and kDefinitions, embedded
// in reports).
#pragma once

#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "model/batch.hpp"
#include "model/config.hpp"
#include "ops/bf16.hpp"

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
    nlohmann::json to_json() const;
};

// The definitions every report embeds (what a step is, what is excluded, which tokens count).
nlohmann::json definitions();

// MLPerf's max_predictions_per_seq for a sequence length: 20 at 128, 76 at 512, proportional
// (rounded down) in between or beyond.
int default_max_predictions(int seq_len);
// B full-length sequences of seq_len tokens with random ids, two segments, masked positions and
// NSP labels, deterministic by seed.
model::Batch synthetic_batch(const model::BertConfig& c, int batch_size, int seq_len,
                             int max_predictions, uint64_t seed);
// `count` full batches of the TFRecords in eval (fixed) order, cycling over the files; partial
// last batches are dropped. Error if the files hold fewer than batch_size records.
std::vector<model::Batch> read_batches(const std::vector<std::string>& files, int seq_len,
                                       int max_predictions, int batch_size, int count,
                                       bool skip_corrupt_records = false);

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
