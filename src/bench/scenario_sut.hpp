// The query set of `bench --scenario` (run_squad.py eval features, real tokens) and bertbench's
// SUT for it: the span model (encoder + span head) running a list of queries as one packed
// batch, keeping each query's logits when asked (accuracy mode). docs/benchmark.md "Scenarios".
#pragma once

#include <memory>
#include <string>
#include <vector>

#include "bench/scenario.hpp"
#include "ops/bf16.hpp"
#include "train/squad_predict.hpp"
#include "train/squad_train.hpp"

namespace bertbench::bench {

// Every feature of the files once, in file order (for_each_squad_feature's checks; Error naming
// the file and what was expected for records that are not run_squad.py features, and for files
// with no feature).
std::vector<Query> read_squad_queries(const std::vector<std::string>& files, int seq_len, int vocab_size,
                                      bool skip_corrupt_records = false);
// Queries of in-memory features (accuracy mode without --data: the features of --predict_file).
std::vector<Query> queries_of(const std::vector<data::SquadFeature>& features);
// LoadGen's performance set of performance_sample_count n (0 or >= size: all): the first n queries,
// in loaded_set_order(n, qsl_rng_seed) (scenario.hpp).
std::vector<Query> select_queries(const std::vector<Query>& all, int n, uint64_t qsl_rng_seed);

class EngineSut {
public:
    // padded: each query is its seq_len rows, padding rows as queries over the real keys (the
    // reference's computation); otherwise its real tokens only.
    EngineSut(const train::SquadModel& m, ops::Precision dtype, int max_batch, int seq_len, bool padded,
              const std::vector<Query>& queries, bool keep_logits);
    ~EngineSut();
    void run(const std::vector<int>& queries);
    // Median wall time (ms) of `reps` runs of `queries` as one batch, after one untimed run (the
    // first at that shape is a cold one) (warm-up; nothing recorded).
    double time_batch(const std::vector<int>& queries, int reps);
    // One result per query run so far (keep_logits): seq_len logits, the positions not computed
    // (real layout: padding) -infinity, so that no padding position ranks among the n best.
    std::vector<train::SquadRawResult> results() const;

private:
    struct Impl;
    std::unique_ptr<Impl> impl_;
};

}  // namespace bertbench::bench
