// The query set and bertbench's SUT of `bench --scenario` (see scenario_sut.hpp).
#include "bench/scenario_sut.hpp"

#include <algorithm>
#include <limits>
#include <map>
#include <random>

#include "bench/runner.hpp"
#include "core/error.hpp"
#include "core/timing.hpp"
#include "model/bert.hpp"

namespace bertbench::bench {

namespace {

// A query of a feature's first `real` tokens (its leading input_mask == 1 positions).
template <typename Ids>
Query real_query(int64_t unique_id, const Ids& input_ids, const Ids& segment_ids, size_t real) {
    Query q;
    q.unique_id = unique_id;
    q.input_ids.assign(input_ids.begin(), input_ids.begin() + static_cast<long>(real));
    q.segment_ids.assign(segment_ids.begin(), segment_ids.begin() + static_cast<long>(real));
    return q;
}

}  // namespace

std::vector<Query> read_squad_queries(const std::vector<std::string>& files, int seq_len, int vocab_size,
                                      bool skip_corrupt_records) {
    std::vector<Query> out;
    try {
        for_each_squad_feature(files, seq_len, vocab_size, skip_corrupt_records, [&](const SquadFeatureRecord& r) {
            out.push_back(real_query(r.unique_id, r.input_ids, r.segment_ids, r.real));
            return true;
        });
    } catch (const Error& e) {  // not a TFRecord file at all: say what --data should be
        const std::string what = e.what();
        if (what.find("[tfrecord]") == std::string::npos) throw;
        fail("{} (--data: expected run_squad.py eval features, a TFRecord of tf.train.Examples: eval.tf_record)", what);
    }
    if (out.empty())
        fail("--data={}: no record: expected run_squad.py eval features (eval.tf_record: unique_ids, input_ids, "
             "input_mask, segment_ids)",
             files.empty() ? std::string() : files.front());
    return out;
}

std::vector<Query> queries_of(const std::vector<data::SquadFeature>& features) {
    std::vector<Query> out;
    for (const data::SquadFeature& f : features) {
        size_t n = 0;
        while (n < f.input_mask.size() && f.input_mask[n] == 1) ++n;
        out.push_back(real_query(f.unique_id, f.input_ids, f.segment_ids, n));
    }
    return out;
}

std::vector<Query> select_queries(const std::vector<Query>& all, int n, uint64_t qsl_rng_seed) {
    const size_t count = n <= 0 ? all.size() : std::min(all.size(), static_cast<size_t>(n));
    std::vector<Query> out;
    out.reserve(count);
    // LoadGen b66003e's GenerateLoadableSets shuffles the first N samples only (since a8d4d783,
    // "Add accuracy_sample_count"; before it, all of them, of which the first N were taken)
    for (const size_t i : loaded_set_order(count, qsl_rng_seed)) out.push_back(all[i]);
    return out;
}

struct EngineSut::Impl {
    const train::SquadModel& m;
    int seq_len;
    bool padded, keep_logits;
    const std::vector<Query>& queries;
    model::BertSquad engine;
    model::Batch batch;
    std::map<int, train::SquadRawResult> results;  // by query index
    std::vector<int32_t> ids, mask, seg;

    Impl(const train::SquadModel& model, ops::Precision dtype, int max_batch, int seq, bool pad,
         const std::vector<Query>& qs, bool keep)
        : m(model), seq_len(seq), padded(pad), keep_logits(keep), queries(qs),
          engine(*model.table, model::Plan{max_batch, seq, 0, true}, model::EngineOptions{dtype}) {
        for (const Query& q : queries)
            if (static_cast<int>(q.input_ids.size()) > seq_len)
                fail("query unique_id {}: {} tokens, longer than --seq_len={}", q.unique_id, q.input_ids.size(),
                     seq_len);
    }

    void build(const std::vector<int>& qs) {
        batch = model::Batch{};
        batch.seq_offsets.push_back(0);
        const size_t S = static_cast<size_t>(seq_len);
        for (int qi : qs) {
            const Query& q = queries[static_cast<size_t>(qi)];
            if (padded) {  // run_squad.py's padding: id 0, mask 0, segment 0
                const size_t n = q.input_ids.size();
                ids.assign(S, 0), mask.assign(S, 0), seg.assign(S, 0);
                std::copy(q.input_ids.begin(), q.input_ids.end(), ids.begin());
                std::copy(q.segment_ids.begin(), q.segment_ids.end(), seg.begin());
                std::fill(mask.begin(), mask.begin() + static_cast<long>(n), 1);
                model::append_padded_sequence(batch, ids, mask, seg,
                                              fmt::format("query unique_id {}", q.unique_id));
            } else {
                batch.input_ids.insert(batch.input_ids.end(), q.input_ids.begin(), q.input_ids.end());
                batch.segment_ids.insert(batch.segment_ids.end(), q.segment_ids.begin(), q.segment_ids.end());
                batch.seq_offsets.push_back(batch.seq_offsets.back() + static_cast<int32_t>(q.input_ids.size()));
                ++batch.batch_size;
            }
        }
    }

    void run(const std::vector<int>& qs, bool record) {
        build(qs);
        engine.forward(m.params, batch, {}, {}, false, 0, 0);
        if (!record || !keep_logits) return;
        const std::span<const float> start = engine.start_logits(), end = engine.end_logits();
        for (size_t b = 0; b < qs.size(); ++b) {
            const size_t o = static_cast<size_t>(batch.seq_offsets[b]),
                         len = static_cast<size_t>(batch.seq_offsets[b + 1]) - o;
            train::SquadRawResult r;
            r.unique_id = queries[static_cast<size_t>(qs[b])].unique_id;
            r.start_logits.assign(static_cast<size_t>(seq_len), -std::numeric_limits<double>::infinity());
            r.end_logits = r.start_logits;
            std::copy(start.begin() + static_cast<long>(o), start.begin() + static_cast<long>(o + len),
                      r.start_logits.begin());
            std::copy(end.begin() + static_cast<long>(o), end.begin() + static_cast<long>(o + len),
                      r.end_logits.begin());
            results[qs[b]] = std::move(r);
        }
    }
};

EngineSut::EngineSut(const train::SquadModel& m, ops::Precision dtype, int max_batch, int seq_len, bool padded,
                     const std::vector<Query>& queries, bool keep_logits)
    : impl_(std::make_unique<Impl>(m, dtype, max_batch, seq_len, padded, queries, keep_logits)) {}
EngineSut::~EngineSut() = default;

void EngineSut::run(const std::vector<int>& queries) { impl_->run(queries, true); }

double EngineSut::time_batch(const std::vector<int>& queries, int reps) {
    std::vector<double> ms;
    impl_->run(queries, false);  // untimed: the first run at this shape
    for (int k = 0; k < std::max(1, reps); ++k) {
        const double t0 = now_ms();
        impl_->run(queries, false);
        ms.push_back(now_ms() - t0);
    }
    std::sort(ms.begin(), ms.end());
    return ms[ms.size() / 2];
}

std::vector<train::SquadRawResult> EngineSut::results() const {
    std::vector<train::SquadRawResult> out;
    for (const auto& [q, r] : impl_->results) out.push_back(r);
    return out;
}

}  // namespace bertbench::bench
