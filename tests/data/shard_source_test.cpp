// The pretraining reader on NVIDIA HDF5 shards: the golden .hdf5 twin yields exactly the batches
// of its TFRecord (training with shuffle buffer and two ranks, eval, resume from a cursor), a list
// may mix both formats, and a bad HDF5 shard is an error naming the file and dataset.
#include "data/shard_source.hpp"

#include <gtest/gtest.h>
#include <unistd.h>

#include <cstdlib>
#include <filesystem>
#include <string>
#include <vector>

#include "core/error.hpp"
#include "core/fs.hpp"
#include "data/pretrain_reader.hpp"
#include "test_util.hpp"

namespace bertbench::data {
namespace {

using testing::golden;

const std::string kTf128 = golden("pretraining/public_128_s12345_d2.tfrecord");
const std::string kH5128 = golden("hdf5/public_128_s12345_d2.hdf5");
const std::string kTf512 = golden("pretraining/public_512_s12345_d1.tfrecord");
const std::string kH5512 = golden("hdf5/public_512_s12345_d1.hdf5");

void expect_same(const model::Batch& a, const model::Batch& b, int k) {
    EXPECT_EQ(a.batch_size, b.batch_size) << "batch " << k;
    EXPECT_EQ(a.seq_offsets, b.seq_offsets) << "batch " << k;
    EXPECT_EQ(a.input_ids, b.input_ids) << "batch " << k;
    EXPECT_EQ(a.segment_ids, b.segment_ids) << "batch " << k;
    EXPECT_EQ(a.masked_index, b.masked_index) << "batch " << k;
    EXPECT_EQ(a.masked_ids, b.masked_ids) << "batch " << k;
    EXPECT_EQ(a.masked_weights, b.masked_weights) << "batch " << k;
    EXPECT_EQ(a.masked_seq, b.masked_seq) << "batch " << k;
    EXPECT_EQ(a.next_sentence_labels, b.next_sentence_labels) << "batch " << k;
}

// `steps` batches from a reader over `files` (fewer if eval ends).
std::vector<model::Batch> batches(PretrainReaderConfig c, const std::vector<std::string>& files,
                                  int steps) {
    c.files = files;
    PretrainReader r(c);
    std::vector<model::Batch> out;
    model::Batch b;
    while (static_cast<int>(out.size()) < steps && r.next(b)) out.push_back(b);
    return out;
}

TEST(ShardSource, Hdf5TwinGivesTheTfrecordsBatches) {
    struct Case {
        std::string tf, h5;
        int T, P;
        bool training;
        int rank, world;
    };
    const Case cases[] = {
        {kTf128, kH5128, 128, 20, true, 0, 1},  {kTf128, kH5128, 128, 20, true, 1, 2},
        {kTf128, kH5128, 128, 20, false, 0, 1}, {kTf512, kH5512, 512, 76, true, 0, 1},
        {kTf512, kH5512, 512, 76, false, 1, 2},
    };
    for (const Case& k : cases) {
        PretrainReaderConfig c;
        c.max_seq_length = k.T;
        c.max_predictions_per_seq = k.P;
        c.batch_size = 24;
        c.training = k.training;
        c.seed = 77;
        c.shuffle_buffer = 300;
        c.rank = k.rank;
        c.world_size = k.world;
        // Training: past the end of the first epoch (1868 / 24 = 78 batches).
        const auto want = batches(c, {k.tf}, 100), got = batches(c, {k.h5}, 100);
        ASSERT_EQ(got.size(), want.size()) << k.h5;
        ASSERT_GT(got.size(), 10u);
        for (size_t i = 0; i < got.size(); ++i) expect_same(got[i], want[i], static_cast<int>(i));
    }
}

TEST(ShardSource, Hdf5CursorResumesExactly) {
    PretrainReaderConfig c;
    c.files = {kH5128};
    c.batch_size = 16;
    c.seed = 3;
    c.shuffle_buffer = 100;
    PretrainReader a(c);
    model::Batch b;
    for (int i = 0; i < 130; ++i) ASSERT_TRUE(a.next(b));  // into the second epoch
    const auto state = a.state();
    std::vector<model::Batch> want;
    for (int i = 0; i < 5; ++i) {
        ASSERT_TRUE(a.next(b));
        want.push_back(b);
    }
    PretrainReader r(c);
    r.restore(state);
    for (int i = 0; i < 5; ++i) {
        ASSERT_TRUE(r.next(b));
        expect_same(b, want[i], i);
    }
}

// A list may mix formats: each file is read by its own extension.
TEST(ShardSource, MixedListReadsEachFileByExtension) {
    PretrainReaderConfig c;
    c.batch_size = 50;
    c.training = false;
    const auto mixed = batches(c, {kH5128, kTf128}, 1000);
    const auto tf = batches(c, {kTf128, kTf128}, 1000);
    ASSERT_EQ(mixed.size(), tf.size());
    for (size_t i = 0; i < tf.size(); ++i) expect_same(mixed[i], tf[i], static_cast<int>(i));
}

TEST(ShardSource, BadHdf5ShardErrorNamesFileAndDataset) {
    PretrainReaderConfig c;
    c.batch_size = 8;
    // The 128 shard has 20: a wider flag only caps (NVIDIA's loader), a narrower one cannot hold
    // its rows.
    c.max_predictions_per_seq = 10;
    c.files = {kH5128};
    PretrainReader r(c);
    model::Batch b;
    try {
        r.next(b);
        FAIL() << "expected an error";
    } catch (const Error& e) {
        const std::string msg = e.what();
        EXPECT_NE(msg.find(kH5128), std::string::npos) << msg;
        EXPECT_NE(msg.find("dataset masked_lm_positions: expected shape (N, 10)"),
                  std::string::npos)
            << msg;
    }
    // A TFRecord given a .h5 name is read as HDF5 and refused as such.
    const std::string renamed = std::filesystem::temp_directory_path() /
                                ("bb_shard_source_" + std::to_string(getpid()) + ".h5");
    write_file_atomic(renamed, read_file(kTf128));
    c.max_predictions_per_seq = 20;
    c.files = {renamed};
    PretrainReader r2(c);
    try {
        r2.next(b);
        ADD_FAILURE() << "expected an error";
    } catch (const Error& e) {
        EXPECT_NE(std::string(e.what()).find("no HDF5 signature"), std::string::npos) << e.what();
    }
    std::filesystem::remove(renamed);
}

// --max_seq_length=0 / --max_predictions_per_seq=0 (pretrain): the widths of the first file, the
// same from a TFRecord's first record as from its HDF5 twin's datasets; an empty TFRecord or one
// without the features is an error naming the file.
TEST(ShardSource, RecordWidthsFromEitherFormat) {
    EXPECT_EQ(record_widths(kTf128), std::make_pair(128, 20));
    EXPECT_EQ(record_widths(kH5128), std::make_pair(128, 20));
    EXPECT_EQ(record_widths(kTf512), std::make_pair(512, 76));
    EXPECT_EQ(record_widths(kH5512), std::make_pair(512, 76));
    const std::string empty = std::filesystem::temp_directory_path() /
                              ("bb_widths_" + std::to_string(getpid()) + ".tfrecord");
    write_file_atomic(empty, "");
    try {
        record_widths(empty);
        FAIL() << "expected an error";
    } catch (const Error& e) {
        EXPECT_NE(std::string(e.what()).find(empty + ": expected a pretraining record"),
                  std::string::npos) << e.what();
    }
    std::filesystem::remove(empty);
}

}  // namespace
}  // namespace bertbench::data
