// LoadGen's performance set when the performance sample count is below the QSL's total
// (--scenario_queries=N): the set and the samples issued from it, against LoadGen b66003e itself.
// The expected values were printed by b66003e's loadgen compiled unmodified with a null SUT that
// records each issued QSL index (TestSettings: the three seeds equal; Server 1 s latency bound).
// And the query set itself, read from the golden eval features at their real lengths.
#include <gtest/gtest.h>

#include <algorithm>
#include <cstdlib>
#include <fstream>

#include "bench/scenario.hpp"
#include "bench/scenario_sut.hpp"

namespace bertbench::bench {
namespace {

// `n` queries of 30 tokens; unique_id 1000000000 + QSL index.
std::vector<Query> qsl_of(int n) {
    std::vector<Query> qs(static_cast<size_t>(n));
    for (int i = 0; i < n; ++i) {
        qs[static_cast<size_t>(i)].unique_id = 1000000000 + i;
        qs[static_cast<size_t>(i)].input_ids.assign(30, 7);
        qs[static_cast<size_t>(i)].segment_ids.assign(30, 0);
    }
    return qs;
}

std::vector<int64_t> qsl_indices(const std::vector<Query>& qs) {
    std::vector<int64_t> out;
    for (const Query& q : qs) out.push_back(q.unique_id - 1000000000);
    return out;
}

std::vector<int64_t> issued_indices(const Schedule& s) {
    std::vector<int64_t> out;
    for (const Issue& is : s.issues) out.push_back(s.queries[static_cast<size_t>(is.q)].unique_id - 1000000000);
    return out;
}

ScenarioSettings seeded_run(Scenario sc, uint64_t seed, double duration_s, int64_t count, double loadgen_qps) {
    ScenarioSettings s;
    s.scenario = sc;
    s.qsl_rng_seed = s.sample_index_rng_seed = s.schedule_rng_seed = seed;
    s.min_duration_s = duration_s;
    s.min_query_count = count;
    s.loadgen_target_qps = loadgen_qps;
    if (sc == Scenario::server) s.target_qps = loadgen_qps;
    return s;
}

// b66003e's GenerateLoadableSets shuffles the indices 0 .. N-1 only: the set is a permutation of
// the first N samples (a shuffle of all 97 would give others: 10, 65, 68, ...).
TEST(ScenarioSchedule, LoadGensPerformanceSubset) {
    // SingleStream: QSL 97, performance sample count 10, seed 0, expected latency 5 ms, 100 ms, 30
    const std::vector<Query> set10 = select_queries(qsl_of(97), 10, 0);
    EXPECT_EQ(qsl_indices(set10), (std::vector<int64_t>{0, 2, 1, 5, 9, 8, 4, 7, 6, 3}));
    const ScenarioSettings ss = seeded_run(Scenario::singlestream, 0, 0.1, 30, 200);
    const Schedule single = make_schedule(ss, set10, performance_issue_count(ss));
    EXPECT_EQ(issued_indices(single),
              (std::vector<int64_t>{7, 6, 8, 9, 8, 5, 3, 6, 0, 5, 0, 4, 0, 5, 6, 3, 7, 2, 6, 6, 3,
                                    9, 7, 6, 9, 8, 7, 4, 2, 7, 4, 8, 2, 8, 3, 7, 8, 2, 9, 9, 1}));
    // Server: QSL 66, performance sample count 7, seed 5, 100 queries/s, 500 ms, 40
    const std::vector<Query> set7 = select_queries(qsl_of(66), 7, 5);
    EXPECT_EQ(qsl_indices(set7), (std::vector<int64_t>{3, 6, 0, 1, 2, 5, 4}));
    const ScenarioSettings sv = seeded_run(Scenario::server, 5, 0.5, 40, 100);
    const Schedule server = make_schedule(sv, set7, performance_issue_count(sv));
    EXPECT_EQ(issued_indices(server),
              (std::vector<int64_t>{2, 5, 5, 1, 6, 6, 5, 4, 3, 6, 6, 0, 3, 0, 4, 2, 1, 2, 1, 2,
                                    5, 6, 3, 6, 3, 6, 5, 0, 5, 6, 4, 6, 4, 4, 1, 4, 3, 6, 4, 3}));
    // N = 0 or N >= the QSL: the whole set, shuffled as before
    EXPECT_EQ(qsl_indices(select_queries(qsl_of(12), 0, 3)), qsl_indices(select_queries(qsl_of(12), 12, 3)));
    EXPECT_EQ(select_queries(qsl_of(12), 40, 3).size(), 12u);
}

// The query set of the golden eval features: every feature once, its real tokens (as many as the
// reference's tokens list in the golden JSON lines), in file order.
TEST(ScenarioQueries, GoldenEvalFeaturesAtTheirRealLength) {
    const std::string dir = std::string(std::getenv("BB_SHARED_DIR")) + "/golden/squad_pipeline/";
    const std::vector<Query> qs = read_squad_queries({dir + "features_384_eval.tf_record"}, 384, 30522);
    std::ifstream in(dir + "features_384_eval.jsonl");
    std::string line;
    size_t i = 0;
    for (; std::getline(in, line); ++i) {
        const nlohmann::json f = nlohmann::json::parse(line);
        ASSERT_LT(i, qs.size());
        EXPECT_EQ(qs[i].unique_id, f["unique_id"].get<int64_t>());
        EXPECT_EQ(qs[i].input_ids.size(), f["tokens"].size()) << i;
        EXPECT_EQ(qs[i].segment_ids.size(), f["tokens"].size()) << i;
        EXPECT_EQ(qs[i].input_ids.front(), 101);  // [CLS]
        EXPECT_EQ(qs[i].input_ids.back(), 102);   // [SEP]
    }
    EXPECT_EQ(i, qs.size());
    // --scenario_queries: LoadGen b66003e's performance set, the file's first N features shuffled
    const std::vector<Query> a = select_queries(qs, 10, 3);
    const std::vector<size_t> order = loaded_set_order(10, 3);
    ASSERT_EQ(a.size(), 10u);
    for (size_t k = 0; k < 10; ++k) EXPECT_EQ(a[k].unique_id, qs[order[k]].unique_id) << k;
    EXPECT_TRUE(std::all_of(a.begin(), a.end(), [&](const Query& q) { return q.unique_id <= qs[9].unique_id; }));
    EXPECT_EQ(select_queries(qs, 0, 3).size(), qs.size());
}

}  // namespace
}  // namespace bertbench::bench
