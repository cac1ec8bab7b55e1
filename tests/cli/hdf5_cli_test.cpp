// HDF5 through the real binary: `prepare --output_format=hdf5` with the golden commands' flags
// writes datasets identical to the golden .hdf5 twins in values, dtype, shape, chunks and filters
// (also in shard mode, whose rerun skips the verified shard); `bench --data=` runs on an HDF5
// shard; a mismatched shard is a one-line error naming file and dataset with a non-zero exit.
#include <gtest/gtest.h>
#include <unistd.h>

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <string>
#include <vector>

#include "cli/run_util.hpp"
#include "core/fs.hpp"
#include "io/hdf5_shard.hpp"
#include "test_util.hpp"

namespace bertbench {
namespace {
namespace fs = std::filesystem;
using testing::golden;
using testing::run_bertbench;

struct Hdf5Tmp {
    fs::path dir = fs::temp_directory_path() / ("bb_hdf5_cli_" + std::to_string(getpid()));
    Hdf5Tmp() {
        fs::remove_all(dir);
        fs::create_directories(dir);
    }
    ~Hdf5Tmp() { fs::remove_all(dir); }
    std::string file(const std::string& n) const { return (dir / n).string(); }
};

// Every dataset of `got` equals the golden's: values, dtype and byte order, shape, chunk shape,
// filter pipeline (deflate level, no shuffle/fletcher32), fill time.
void expect_same_datasets(const std::string& got, const std::string& want, int T, int P) {
    const auto a = io::hdf5_layout(got), b = io::hdf5_layout(want);
    ASSERT_EQ(a.size(), 6u) << got;
    ASSERT_EQ(a.size(), b.size());
    for (size_t k = 0; k < a.size(); ++k) {
        const std::string at = got + ": " + a[k].name;
        EXPECT_EQ(a[k].name, b[k].name) << at;
        EXPECT_EQ(a[k].type_name, b[k].type_name) << at;
        EXPECT_EQ(a[k].shape, b[k].shape) << at;
        EXPECT_EQ(a[k].chunks, b[k].chunks) << at;
        EXPECT_EQ(a[k].num_filters, b[k].num_filters) << at;
        EXPECT_EQ(a[k].deflate_level, b[k].deflate_level) << at;
        EXPECT_EQ(a[k].shuffle, b[k].shuffle) << at;
        EXPECT_EQ(a[k].fletcher32, b[k].fletcher32) << at;
        EXPECT_EQ(a[k].fill_time_alloc, b[k].fill_time_alloc) << at;
    }
    const auto x = io::read_hdf5_shard(got, T, P), y = io::read_hdf5_shard(want, T, P);
    EXPECT_EQ(x.records, y.records);
    EXPECT_TRUE(x.input_ids == y.input_ids) << "input_ids";
    EXPECT_TRUE(x.input_mask == y.input_mask) << "input_mask";
    EXPECT_TRUE(x.segment_ids == y.segment_ids) << "segment_ids";
    EXPECT_TRUE(x.masked_lm_positions == y.masked_lm_positions) << "masked_lm_positions";
    EXPECT_TRUE(x.masked_lm_ids == y.masked_lm_ids) << "masked_lm_ids";
    EXPECT_TRUE(x.next_sentence_labels == y.next_sentence_labels) << "next_sentence_labels";
}

// The golden README's commands for the two TFRecords the .hdf5 twins hold.
TEST(Hdf5Cli, PrepareWritesTheGoldenDatasets) {
    struct Golden {
        const char* name;
        int T, P, dupe;
    };
    Hdf5Tmp tmp;
    for (const Golden& r :
         {Golden{"public_128_s12345_d2", 128, 20, 2}, Golden{"public_512_s12345_d1", 512, 76, 1}}) {
        const std::string out = tmp.file(std::string(r.name) + ".hdf5");
        const auto res = run_bertbench(
            "prepare --input_file=" + golden("corpus_public.txt") + " --output_file=" + out +
            " --vocab_file=" + golden("vocab.txt") + " --do_lower_case=True --max_seq_length=" +
            std::to_string(r.T) + " --max_predictions_per_seq=" + std::to_string(r.P) +
            " --masked_lm_prob=0.15 --random_seed=12345 --dupe_factor=" + std::to_string(r.dupe) +
            " --output_format=hdf5");
        ASSERT_EQ(res.exit_code, 0) << res.out;
        expect_same_datasets(out, golden(std::string("hdf5/") + r.name + ".hdf5"), r.T, r.P);
    }
    for (const auto& e : fs::directory_iterator(tmp.dir))
        EXPECT_EQ(e.path().string().find(".tmp."), std::string::npos) << e.path();
}

TEST(Hdf5Cli, PrepareShardModeWritesHdf5AndSkipsVerifiedShards) {
    Hdf5Tmp tmp;
    fs::create_directories(tmp.dir / "in");
    fs::copy_file(golden("corpus_public.txt"), tmp.dir / "in" / "public_128_s12345_d2.txt");
    const std::string args =
        "prepare --input_dir=" + tmp.file("in") + " --output_dir=" + tmp.file("out") +
        " --vocab_file=" + golden("vocab.txt") + " --dupe_factor=2 --output_format=hdf5";
    auto res = run_bertbench(args);
    ASSERT_EQ(res.exit_code, 0) << res.out;
    const std::string out = tmp.file("out/public_128_s12345_d2.hdf5");
    expect_same_datasets(out, golden("hdf5/public_128_s12345_d2.hdf5"), 128, 20);
    res = run_bertbench(args);
    ASSERT_EQ(res.exit_code, 0) << res.out;
    EXPECT_NE(res.out.find("(1 skipped"), std::string::npos) << res.out;
}

TEST(Hdf5Cli, PrepareRejectsANameOfTheOtherFormat) {
    Hdf5Tmp tmp;
    const std::string base = "prepare --input_file=" + golden("corpus_public.txt") +
                             " --vocab_file=" + golden("vocab.txt") + " --dupe_factor=1";
    auto res =
        run_bertbench(base + " --output_format=hdf5 --output_file=" + tmp.file("x.tfrecord"));
    EXPECT_NE(res.exit_code, 0);
    EXPECT_NE(res.out.find("--output_file"), std::string::npos) << res.out;
    res = run_bertbench(base + " --output_file=" + tmp.file("x.h5"));
    EXPECT_NE(res.exit_code, 0);
    EXPECT_NE(res.out.find("--output_format=tfrecord"), std::string::npos) << res.out;
    res = run_bertbench(base + " --output_format=parquet --output_file=" + tmp.file("x.h5"));
    EXPECT_NE(res.exit_code, 0);
    EXPECT_NE(res.out.find("--output_format: expected tfrecord or hdf5"), std::string::npos)
        << res.out;
    EXPECT_TRUE(fs::is_empty(tmp.dir));
}

TEST(Hdf5Cli, BenchRunsOnAnHdf5Shard) {
    Hdf5Tmp tmp;
    const auto res = run_bertbench(
        "bench --mode=train --model=tiny --seq_len=128 --batch_size=4 --threads=1 --warmup=1 "
        "--steps=2 --ceiling_gflops=50 --json=" +
        tmp.file("b.json") + " --data=" + golden("hdf5/public_128_s12345_d2.hdf5"));
    ASSERT_EQ(res.exit_code, 0) << res.out;
    EXPECT_TRUE(fs::exists(tmp.file("b.json")));
    // The 512 shard does not fit seq_len 128's schema: one line naming file and dataset.
    const auto bad = run_bertbench(
        "bench --mode=train --model=tiny --seq_len=128 --batch_size=4 --threads=1 --warmup=0 "
        "--steps=1 --ceiling_gflops=50 --data=" +
        golden("hdf5/public_512_s12345_d1.hdf5"));
    EXPECT_NE(bad.exit_code, 0);
    EXPECT_NE(bad.out.find("public_512_s12345_d1.hdf5: dataset input_ids: expected shape"),
              std::string::npos)
        << bad.out;
}

// NVIDIA's phase-2 line passes --max_predictions_per_seq=80; MLPerf's 512 shards are 76 wide.
// NVIDIA's loader only caps the predictions with it, and so does pretrain on HDF5: the same
// training as with the shard's own width, loss for loss.
TEST(Hdf5Cli, PretrainTakesAWiderPredictionFlagAsNvidiasLoader) {
    Hdf5Tmp tmp;
    std::ofstream(tmp.file("bert_config.json"))
        << R"({"vocab_size": 30522, "hidden_size": 32, "num_hidden_layers": 1,
              "num_attention_heads": 2, "intermediate_size": 64,
              "max_position_embeddings": 512, "type_vocab_size": 2})";
    std::vector<std::vector<nlohmann::json>> logs;
    for (const char* P : {"76", "80"}) {
        const std::string out = tmp.file(std::string("p") + P);
        const auto r = run_bertbench("pretrain --input_file=" + golden("hdf5/public_512_s12345_d1.hdf5") +
                                     " --bert_config_file=" + tmp.file("bert_config.json") +
                                     " --output_dir=" + out + " --train_batch_size=4 --max_seq_length=512"
                                     " --max_predictions_per_seq=" + P +
                                     " --num_train_steps=2 --nodo_eval --threads=1");
        ASSERT_EQ(r.exit_code, 0) << r.out;
        logs.push_back(testing::read_jsonl(out + "/train_log.jsonl"));
    }
    ASSERT_EQ(logs[0].size(), 2u);
    ASSERT_EQ(logs[1].size(), 2u);
    for (size_t i = 0; i < 2; ++i) EXPECT_EQ(logs[0][i]["loss"], logs[1][i]["loss"]) << i;
}

}  // namespace
}  // namespace bertbench
