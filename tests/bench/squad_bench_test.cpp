// The SQuAD benchmark (bench --task=squad): synthetic span batches are full-length features with a
// span inside the document; the span model's FLOPs match a hand count; run_squad.py feature
// TFRecords (the golden eval and train features, and small files written here) become batches of
// their real tokens with the features' positions; bad features are one error naming the record;
// a squad point runs train and infer and its reported GFLOP/s is its FLOPs over its median step.
#include <gtest/gtest.h>

#include <cmath>
#include <functional>
#include <string>
#include <vector>

#include "backend/guarded_backend.hpp"
#include "bench/runner.hpp"
#include "io/example.hpp"
#include "io/tfrecord.hpp"
#include "model/bert.hpp"
#include "test_util.hpp"

namespace bertbench::bench {
namespace {

using testing::error_of;
using testing::shared_dir;

// The span model's matmul FLOPs written out: per layer the Q, K, V and output projections
// (4·N·H·H multiply-adds), the FFN (2·N·H·I), QKᵀ and P·V per sequence (2·T²·H); the span head
// N·H·2; two FLOPs per multiply-add.
// keys: attention keys per sequence (the padded layout's key_lengths), else all T.
double hand_flops(const model::BertConfig& c, const std::vector<int>& lengths,
                  const std::vector<int>& keys = {}) {
    const double H = c.hidden_size, I = c.intermediate_size;
    double N = 0, attn = 0;
    for (size_t b = 0; b < lengths.size(); ++b) {
        const double t = lengths[b], k = keys.empty() ? t : keys[b];
        N += t;
        attn += 2.0 * t * k * H;
    }
    const double layer_madds = 4 * N * H * H + 2 * N * H * I + attn;
    return 2 * (c.num_hidden_layers * layer_madds + N * H * 2);
}

TEST(SquadBench, SyntheticBatchIsAFullLengthFeature) {
    const auto c = model::BertConfig::preset("tiny");
    const SquadBatch sb = synthetic_squad_batch(c, 3, 40, 5);
    const model::Batch& b = sb.batch;
    ASSERT_EQ(b.batch_size, 3);
    ASSERT_EQ(b.num_tokens(), 3 * 40);
    EXPECT_EQ(b.num_predictions(), 0);
    ASSERT_EQ(sb.start_positions.size(), 3u);
    ASSERT_EQ(sb.end_positions.size(), 3u);
    const int query = 40 / 4 - 2;  // [CLS] 8 query tokens [SEP] document [SEP]
    for (int s = 0; s < 3; ++s) {
        const int o = b.seq_offsets[s];
        EXPECT_EQ(b.input_ids[o], 101);
        EXPECT_EQ(b.input_ids[o + query + 1], 102);
        EXPECT_EQ(b.input_ids[o + 39], 102);
        EXPECT_EQ(b.segment_ids[o + query + 1], 0);
        EXPECT_EQ(b.segment_ids[o + query + 2], 1);
        // the answer lies in the document
        EXPECT_GE(sb.start_positions[s], query + 2);
        EXPECT_LE(sb.start_positions[s], sb.end_positions[s]);
        EXPECT_LT(sb.end_positions[s], 39);
        EXPECT_LT(sb.end_positions[s] - sb.start_positions[s], 30);
    }
    for (int32_t id : b.input_ids) EXPECT_LT(id, c.vocab_size);
    const SquadBatch again = synthetic_squad_batch(c, 3, 40, 5);
    EXPECT_EQ(again.batch.input_ids, b.input_ids);
    EXPECT_EQ(again.start_positions, sb.start_positions);
}

TEST(SquadBench, FlopsMatchHandCount) {
    const auto c = model::BertConfig::preset("tiny");
    const SquadBatch sb = synthetic_squad_batch(c, 2, 24, 1);
    EXPECT_DOUBLE_EQ(model::forward_flops(c, sb.batch, model::Heads::squad), hand_flops(c, {24, 24}));
    // unequal lengths: attention counts each sequence's own T²
    model::Batch b = sb.batch;
    b.seq_offsets = {0, 7, 24, 48};
    b.batch_size = 3;
    EXPECT_DOUBLE_EQ(model::forward_flops(c, b, model::Heads::squad), hand_flops(c, {7, 17, 24}));
    // the span head, not the pretraining heads: below the pretraining count by pooler + NSP and
    // above it by 2·N·H·2
    const double H = c.hidden_size;
    EXPECT_DOUBLE_EQ(model::forward_flops(c, b) - model::forward_flops(c, b, model::Heads::squad),
                     2 * 3 * H * H + 2 * 3 * H * 2 - 2 * 48 * H * 2);
    // padded layout: every row is computed, attention runs over the real keys only
    b.key_lengths = {3, 10, 24};
    EXPECT_DOUBLE_EQ(model::forward_flops(c, b, model::Heads::squad), hand_flops(c, {7, 17, 24}, {3, 10, 24}));
    EXPECT_EQ(real_tokens(b), 37);
}

// The golden features of run_squad.py (max_seq_length 384), against their JSON-lines dump (an
// independent decoding): in the real layout each batch holds the real tokens of its features
// (input_mask sums), in the padded layout all 384 rows with key_lengths = those sums; eval
// features carry no positions and get [CLS] targets, train features their own start/end.
TEST(SquadBench, ReadsGoldenFeatures) {
    const std::string dir = shared_dir() + "/golden/squad_pipeline/";
    const auto c = model::BertConfig::preset("tiny");
    for (const bool padded : {false, true})
    for (const std::string split : {"eval", "train"}) {
        SCOPED_TRACE(split + (padded ? " padded" : " real"));
        const auto feats = testing::read_jsonl(dir + "features_384_" + split + ".jsonl");
        ASSERT_GE(feats.size(), 8u);
        bool has_positions = !(split == "train");  // the call must set it either way
        const auto batches =
            read_squad_batches({dir + "features_384_" + split + ".tf_record"}, 384, c.vocab_size,
                               3, 4, padded, false, &has_positions);
        EXPECT_EQ(has_positions, split == "train") << split;
        ASSERT_EQ(batches.size(), 4u);
        size_t f = 0;
        for (const SquadBatch& sb : batches) {
            ASSERT_EQ(sb.batch.batch_size, 3);
            for (int s = 0; s < 3; ++s, ++f) {
                int real = 0;
                for (int m : feats[f]["input_mask"]) real += m;
                const int o = sb.batch.seq_offsets[s];
                const int rows = padded ? 384 : real;
                ASSERT_EQ(sb.batch.seq_offsets[s + 1] - o, rows) << split << " feature " << f;
                if (padded) {
                    ASSERT_EQ(sb.batch.key_lengths.size(), 3u);
                    EXPECT_EQ(sb.batch.key_lengths[s], real);
                } else {
                    EXPECT_TRUE(sb.batch.key_lengths.empty());
                }
                for (int t = 0; t < rows; ++t) {
                    ASSERT_EQ(sb.batch.input_ids[o + t], feats[f]["input_ids"][t].get<int>());
                    ASSERT_EQ(sb.batch.segment_ids[o + t], feats[f]["segment_ids"][t].get<int>());
                }
                const int want_start = split == "train" ? feats[f]["start_position"].get<int>() : 0;
                const int want_end = split == "train" ? feats[f]["end_position"].get<int>() : 0;
                EXPECT_EQ(sb.start_positions[s], want_start) << split << " feature " << f;
                EXPECT_EQ(sb.end_positions[s], want_end) << split << " feature " << f;
            }
        }
    }
}

// Writes features of max_seq_length S; `edit` may damage one.
void write_features(const std::string& path, int count, int S,
                    const std::function<void(int, io::Example&)>& edit = {}) {
    io::TfRecordWriter w(path);
    for (int k = 0; k < count; ++k) {
        const int real = 3 + k % (S - 2);
        std::vector<int64_t> ids(S, 0), mask(S, 0), seg(S, 0);
        for (int t = 0; t < real; ++t) {
            ids[t] = 1000 + t;
            mask[t] = 1;
            seg[t] = t > 2 ? 1 : 0;
        }
        const std::vector<int64_t> uid = {1000000000 + k};
        io::Example e;
        e.add_int64("unique_ids", uid);
        e.add_int64("input_ids", ids);
        e.add_int64("input_mask", mask);
        e.add_int64("segment_ids", seg);
        if (edit) edit(k, e);
        w.write(io::encode_example(e));
    }
    w.close();
}

TEST(SquadBench, SmallFeatureFileCyclesAndDropsPartialBatches) {
    testing::TmpDir dir;
    const std::string path = dir.file("eval.tf_record");
    write_features(path, 5, 16);
    // 5 features, batch 2: two full batches per pass (the fifth feature is dropped), cycled
    const auto batches = read_squad_batches({path}, 16, 30522, 2, 3, false);
    ASSERT_EQ(batches.size(), 3u);
    EXPECT_EQ(batches[0].batch.seq_offsets, (std::vector<int32_t>{0, 3, 7}));
    EXPECT_EQ(batches[1].batch.seq_offsets, (std::vector<int32_t>{0, 5, 11}));
    EXPECT_EQ(batches[2].batch.seq_offsets, batches[0].batch.seq_offsets);
    EXPECT_EQ(batches[2].batch.input_ids, batches[0].batch.input_ids);
}

TEST(SquadBench, BadFeaturesAreOneErrorNamingTheRecord) {
    testing::TmpDir dir;
    const std::string path = dir.file("bad.tf_record");
    const auto expect_error = [&](const std::function<void(int, io::Example&)>& edit, int seq,
                                  const std::string& want) {
        write_features(path, 3, 16, edit);
        SCOPED_TRACE(want);
        const std::string msg =
            error_of([&] { read_squad_batches({path}, seq, 30522, 2, 1, true); });
        EXPECT_NE(msg.find(want), std::string::npos) << msg;
        EXPECT_EQ(msg.find('\n'), std::string::npos) << msg;
        if (!msg.empty()) {
            EXPECT_NE(msg.find(path), std::string::npos) << msg;
        }
    };
    // --seq_len other than the features' max_seq_length
    expect_error({}, 384, "record 0: feature input_ids: expected 384 int64 value(s), got 16");
    expect_error({}, 384, "--seq_len must equal the features' max_seq_length");
    // input_mask with a hole
    expect_error(
        [](int k, io::Example& e) {
            if (k == 1) e.features[2].second.ints[6] = 1;
        },
        16, "record 1: input_mask[6] = 1: expected ones then zeros");
    // a missing feature
    expect_error(
        [](int k, io::Example& e) {
            if (k == 1) e.features.erase(e.features.begin() + 3);
        },
        16, "record 1: feature segment_ids missing");
    // an id outside the vocabulary
    expect_error(
        [](int k, io::Example& e) {
            if (k == 0) e.features[1].second.ints[0] = 40000;
        },
        16, "record 0: input_ids[0] = 40000: outside the model's vocabulary [0, 30522)");
    // a start position in the padding
    expect_error(
        [](int k, io::Example& e) {
            const std::vector<int64_t> s = {k == 1 ? 9 : 0}, t = {k == 1 ? 9 : 0};
            e.add_int64("start_positions", s);
            e.add_int64("end_positions", t);
        },
        16, "record 1: start_positions 9 / end_positions 9: expected 0 <= start <= end < 4");
    // fewer features than a batch
    write_features(path, 1, 16);
    const std::string msg = error_of([&] { read_squad_batches({path}, 16, 30522, 2, 1, false); });
    EXPECT_NE(msg.find("fewer than --batch_size=2 features"), std::string::npos) << msg;
}

// One point per mode: positive rates, and gflops × median step = the hand FLOP count (×3 when
// training) — the figure is what it claims to be.
TEST(SquadBench, PointsReportTheirFlops) {
    for (const std::string mode : {"train", "infer"}) {
        Point p;
        p.task = "squad";
        p.mode = mode;
        p.model = "tiny";
        p.config = model::BertConfig::preset("tiny");
        p.seq_len = 24;
        p.batch_size = 2;
        p.warmup = 1;
        p.steps = 2;
        const PointResult r = run_point(p, 100.0);
        EXPECT_GT(r.sequences_per_second, 0) << mode;
        EXPECT_EQ(r.step_ms.size(), 2u);
        const double flops = r.gflops * 1e9 * r.step_ms_median / 1e3;
        const double want = hand_flops(p.config, {24, 24}) * (mode == "train" ? 3 : 1);
        EXPECT_NEAR(flops, want, 1e-9 * want) << mode;
        EXPECT_NEAR(r.mfu, r.gflops / 100.0, 1e-12);
        const auto j = r.to_json();
        EXPECT_EQ(j["task"], "squad");
        EXPECT_EQ(j["optimizer"], mode == "train" ? "adamw" : "none");
        EXPECT_EQ(j["span_labels"], "synthetic");
        EXPECT_EQ(j["real_token_fraction"], 1.0);
    }
    Point bad;
    bad.task = "squat";
    bad.mode = "infer";
    bad.config = model::BertConfig::preset("tiny");
    EXPECT_NE(error_of([&] { run_point(bad); }).find("--task: expected pretraining or squad"),
              std::string::npos);
}

// Points on a backend with its own memory (what --device=cuda runs): training steps (optimizer
// included) and inference of both tasks run on the guarded backend, where any host access to the
// parameters, gradients or optimizer state would crash (tests/backend/guarded_backend.hpp).
TEST(SquadBench, PointsRunOnABackendsOwnMemory) {
    testing::GuardedBackend guarded;
    for (const std::string task : {"pretraining", "squad"})
        for (const std::string mode : {"train", "infer"}) {
            Point p;
            p.task = task;
            p.mode = mode;
            p.model = "tiny";
            p.config = model::BertConfig::preset("tiny");
            p.seq_len = 24;
            p.batch_size = 2;
            p.steps_per_update = mode == "train" ? 2 : 1;
            p.warmup = 1;
            p.steps = 2;
            p.backend = &guarded;
            EXPECT_GT(run_point(p).sequences_per_second, 0) << task << " " << mode;
        }
    EXPECT_EQ(guarded.mappings(), 0u) << "every buffer released";
}

}  // namespace
}  // namespace bertbench::bench
