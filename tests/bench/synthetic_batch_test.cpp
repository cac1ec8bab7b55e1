// The benchmark's synthetic batches are valid unpadded batches of the requested shape.
#include <gtest/gtest.h>

#include <set>

#include "bench/runner.hpp"

namespace bertbench::bench {
namespace {

TEST(SyntheticBatch, ShapeAndInvariants) {
    const auto c = model::BertConfig::preset("tiny");
    const model::Batch b = synthetic_batch(c, 3, 37, default_max_predictions(37), 5);
    ASSERT_EQ(b.batch_size, 3);
    ASSERT_EQ(b.num_tokens(), 3 * 37);
    EXPECT_EQ(b.max_seq_len(), 37);
    EXPECT_EQ(b.num_predictions(), 3 * default_max_predictions(37));
    for (int32_t id : b.input_ids) EXPECT_LT(id, c.vocab_size);
    std::set<int32_t> seen;
    for (int i = 0; i < b.num_predictions(); ++i) {
        const int s = b.masked_seq[i];
        EXPECT_GT(b.masked_index[i], b.seq_offsets[s]);  // never [CLS]
        EXPECT_LT(b.masked_index[i], b.seq_offsets[s + 1] - 1);
        EXPECT_TRUE(seen.insert(b.masked_index[i]).second) << "position masked twice";
    }
    EXPECT_EQ(b.next_sentence_labels.size(), 3u);
}

TEST(SyntheticBatch, MlperfPredictionCounts) {
    EXPECT_EQ(default_max_predictions(128), 20);
    EXPECT_EQ(default_max_predictions(512), 76);
}

}  // namespace
}  // namespace bertbench::bench
