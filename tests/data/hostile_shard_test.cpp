// Pretraining shards built to hurt (issue 28), through data::PretrainReader: an HDF5 shard is read
// in blocks of rows, so the reader's memory follows the rows it has read, not the rows the shard
// holds (it used to load the whole shard on open); a token, masked or segment id outside the
// model's tables is an error naming the file and record where the record is decoded (it used to
// surface in the engine as "batch: input_ids[133] = 30522", without either).
#include <gtest/gtest.h>
#include <sys/resource.h>
#include <sys/wait.h>
#include <unistd.h>

#include <filesystem>
#include <functional>
#include <string>

#include "core/error.hpp"
#include "data/pretrain_reader.hpp"
#include "io/hdf5_shard.hpp"
#include "io/example.hpp"
#include "io/tfrecord.hpp"
#include "test_util.hpp"

namespace bertbench::data {
namespace {

using bertbench::testing::TmpDir;

using bertbench::testing::ChildOutcome;
// A child with a 60 s alarm, whose peak memory is the reader's.
ChildOutcome in_child(const std::function<void()>& f) { return bertbench::testing::run_in_child(f, 60); }

io::PretrainingRecord record(int T, int P, int64_t id) {
    io::PretrainingRecord r;
    r.input_ids.assign(size_t(T), 0);
    r.input_mask.assign(size_t(T), 0);
    r.segment_ids.assign(size_t(T), 0);
    for (int t = 0; t < 6; ++t) {
        r.input_ids[size_t(t)] = 100 + t;
        r.input_mask[size_t(t)] = 1;
    }
    r.input_ids[2] = id;
    r.masked_lm_positions.assign(size_t(P), 0);
    r.masked_lm_ids.assign(size_t(P), 0);
    r.masked_lm_weights.assign(size_t(P), 0.0f);
    r.masked_lm_positions[0] = 1;
    r.masked_lm_ids[0] = 7;
    r.masked_lm_weights[0] = 1.0f;
    return r;
}

// 200,000 records at T = 128 (186 MB in memory, a few MB gzipped): reading two batches must not
// cost the shard. The shard is written in another child so this process never holds it.
TEST(HostileShards, Hdf5ReaderMemoryFollowsRowsRead) {
    TmpDir dir("bb_hostile_shards");
    const std::string path = dir.file("big.hdf5");
    constexpr int T = 128, P = 20, N = 200000;
    const ChildOutcome w = in_child([&] {
        io::Hdf5ShardWriter writer(path, T, P);
        const io::PretrainingRecord r = record(T, P, 5);
        for (int i = 0; i < N; ++i) writer.write(r);
        writer.close();
    });
    ASSERT_EQ(w.status, 1) << w.message;  // returned
    const uint64_t declared = uint64_t(N) * (6 * T + 8 * P + 1);
    ASSERT_GT(declared, 180'000'000u);
    struct rusage self {};
    ::getrusage(RUSAGE_SELF, &self);
    const ChildOutcome o = in_child([&] {
        PretrainReaderConfig c;
        c.files = {path};
        c.max_seq_length = T;
        c.max_predictions_per_seq = P;
        c.batch_size = 16;
        c.shuffle_buffer = 100;
        PretrainReader reader(c);
        model::Batch b;
        for (int i = 0; i < 2; ++i)
            if (!reader.next(b) || b.batch_size != 16) fail("expected a batch of 16");
    });
    EXPECT_EQ(o.status, 1) << o.message;  // returned
    // A block is 8 MiB; the whole shard would be 186 MB.
    EXPECT_LT(o.max_rss_kb - self.ru_maxrss, 64 * 1024) << "peak " << o.max_rss_kb << " KB";
}

// Record 2 of 4 carries `spoil`; the same records as a TFRecord and as an HDF5 shard.
TEST(HostileShards, IdsOutsideTheModelAreNamedWhereDecoded) {
    TmpDir dir("bb_hostile_ids");
    constexpr int T = 16, P = 4;
    struct Case {
        const char* what;
        std::function<void(io::PretrainingRecord&)> spoil;
        const char* want;
    };
    const std::vector<Case> cases = {
        {"token", [](io::PretrainingRecord& r) { r.input_ids[3] = 30522; },
         "feature input_ids: expected an id in [0, 30522) (vocab_size of the model), got 30522 at "
         "index 3"},
        {"masked", [](io::PretrainingRecord& r) { r.masked_lm_ids[0] = 40000; },
         "feature masked_lm_ids: expected an id in [0, 30522) (vocab_size of the model), got "
         "40000 at index 0"},
        {"segment", [](io::PretrainingRecord& r) { r.segment_ids[1] = 2; },
         "feature segment_ids: expected an id in [0, 2) (type_vocab_size of the model), got 2 at "
         "index 1"},
    };
    for (const Case& c : cases) {
        for (const char* ext : {".tfrecord", ".hdf5"}) {
            const std::string path = dir.file(std::string(c.what) + ext);
            SCOPED_TRACE(path);
            std::vector<io::PretrainingRecord> recs(4, record(T, P, 9));
            c.spoil(recs[2]);
            if (std::string(ext) == ".hdf5") {
                io::Hdf5ShardWriter w(path, T, P);
                for (const auto& r : recs) w.write(r);
                w.close();
            } else {
                io::TfRecordWriter w(path);
                for (const auto& r : recs) w.write(io::encode_example(io::pretraining_example(r)));
                w.close();
            }
            PretrainReaderConfig rc;
            rc.files = {path};
            rc.max_seq_length = T;
            rc.max_predictions_per_seq = P;
            rc.batch_size = 4;
            rc.training = false;
            rc.vocab_size = 30522;
            rc.type_vocab_size = 2;
            const std::string msg = bertbench::testing::error_of([&] {
                PretrainReader reader(rc);
                model::Batch b;
                while (reader.next(b)) {
                }
            });
            EXPECT_NE(msg.find(path + ": record 2: "), std::string::npos) << msg;
            EXPECT_NE(msg.find(c.want), std::string::npos) << msg;
            EXPECT_EQ(msg.find('\n'), std::string::npos) << msg;
            // Unchecked (0) the reader passes them on, as before: the engine's check remains.
            rc.vocab_size = rc.type_vocab_size = 0;
            PretrainReader reader(rc);
            model::Batch b;
            EXPECT_TRUE(reader.next(b));
            EXPECT_EQ(b.batch_size, 4);
        }
    }
}

}  // namespace
}  // namespace bertbench::data
