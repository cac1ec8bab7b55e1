// `bertbench pick-eval` against the pick_eval_samples.py goldens (byte-identical, including the
// N=516 K=111 case where int(k * (N / K)) in doubles differs from integer floor(k*N/K)), and
// the schema errors of parse_pretraining_example.
#include <fmt/format.h>
#include <gtest/gtest.h>
#include <sys/wait.h>

#include <algorithm>
#include <cstdlib>
#include <filesystem>

#include "core/error.hpp"
#include "core/fs.hpp"
#include "io/example.hpp"
#include "io_test_util.hpp"

namespace bertbench::io {
namespace {

using testing::golden;
using testing::read_records;
using testing::TempDir;

// $BB_BERTBENCH, else <build>/bertbench next to <build>/tests/test_io (this executable).
std::string bertbench_binary() {
    if (const char* b = std::getenv("BB_BERTBENCH")) return b;
    std::error_code ec;
    const auto self = std::filesystem::read_symlink("/proc/self/exe", ec);
    if (ec) return "";
    const auto candidate = self.parent_path().parent_path() / "bertbench";
    return std::filesystem::exists(candidate) ? candidate.string() : "";
}

// Runs a shell command, returns its exit status, and puts stderr into `err`.
int run(const std::string& cmd, const TempDir& tmp, std::string* err) {
    const std::string err_file = tmp.file("stderr.txt");
    const int rc = std::system((cmd + " 2>" + err_file).c_str());
    *err = std::filesystem::exists(err_file) ? read_file(err_file) : "";
    return WIFEXITED(rc) ? WEXITSTATUS(rc) : -1;
}

TEST(PickEval, ByteIdenticalToGoldens) {
    const std::string bin = bertbench_binary();
    if (bin.empty())
        GTEST_SKIP() << "bertbench not built (set BB_BERTBENCH or build the bertbench target)";
    ASSERT_TRUE(std::filesystem::exists(bin)) << bin << " not built";
    struct Case {
        const char* input;
        const char* golden;
        int k, seq, pred;
    } cases[] = {
        {"pretraining/public_512_s12345_d1.tfrecord", "eval_pick/public_512_eval100.tfrecord", 100,
         512, 76},
        {"pretraining/public_128_s12345_d2.tfrecord", "eval_pick/public_128_eval100.tfrecord", 100,
         128, 20},
        {"pretraining/public_512_s12345_d1.tfrecord",
         "eval_pick/public_512_eval111_float_edge.tfrecord", 111, 512, 76},
    };
    TempDir tmp;
    for (const auto& c : cases) {
        const std::string out = tmp.file("out.tfrecord");
        std::string err;
        const std::string cmd = fmt::format(
            "'{}' pick-eval --input_tfrecord='{}' --output_tfrecord='{}' --num_examples_to_pick={} "
            "--max_seq_length={} --max_predictions_per_seq={}",
            bin, golden(c.input), out, c.k, c.seq, c.pred);
        ASSERT_EQ(run(cmd, tmp, &err), 0) << cmd << "\n" << err;
        EXPECT_TRUE(read_file(out) == read_file(golden(c.golden))) << c.golden;
        // stderr is the reference's one log line (its golden .log) but for the seconds
        std::string log_name = c.golden;
        log_name.replace(log_name.rfind(".tfrecord"), 9, ".log");
        const std::string want = read_file(golden(log_name));
        EXPECT_EQ(err.substr(0, err.find(" in ")), want.substr(0, want.find(" in "))) << err;
        EXPECT_TRUE(err.ends_with(" sec\n") && std::count(err.begin(), err.end(), '\n') == 1) << err;
    }
    // The float edge itself: Python's int(37 * (516 / 111)) is 171, floor(37*516/111) is 172.
    EXPECT_EQ(static_cast<int>(37 * (516.0 / 111.0)), 171);
    EXPECT_EQ(37 * 516 / 111, 172);
}

TEST(PickEval, SchemaMismatchIsOneLineError) {
    const std::string bin = bertbench_binary();
    if (bin.empty())
        GTEST_SKIP() << "bertbench not built (set BB_BERTBENCH or build the bertbench target)";
    TempDir tmp;
    std::string err;
    // Defaults are 512/76; the input has 128-token records.
    const std::string cmd = fmt::format(
        "'{}' pick-eval --input_tfrecord='{}' --output_tfrecord='{}' --num_examples_to_pick=5", bin,
        golden("pretraining/public_128_s12345_d2.tfrecord"), tmp.file("o.tfrecord"));
    EXPECT_EQ(run(cmd, tmp, &err), 1);
    EXPECT_NE(err.find("record 0: feature input_ids: expected 512 values, got 128"),
              std::string::npos)
        << err;
    EXPECT_FALSE(std::filesystem::exists(tmp.file("o.tfrecord")));  // nothing half-written
}

// --max_predictions_per_seq=0: records without masked positions, as prepare (and
// create_pretraining_data.py) write them with that flag; the reference picks them.
TEST(PickEval, RecordsWithoutPredictions) {
    const std::string bin = bertbench_binary();
    if (bin.empty())
        GTEST_SKIP() << "bertbench not built (set BB_BERTBENCH or build the bertbench target)";
    TempDir tmp;
    std::string err;
    const std::string in = tmp.file("p0.tfrecord"), out = tmp.file("picked.tfrecord");
    ASSERT_EQ(run(fmt::format("'{}' prepare --input_file='{}' --output_file='{}' --vocab_file='{}' --max_seq_length=32 "
                              "--max_predictions_per_seq=0 --dupe_factor=1",
                              bin, golden("corpus_public.txt"), in, golden("vocab.txt")),
                  tmp, &err),
              0) << err;
    ASSERT_EQ(run(fmt::format("'{}' pick-eval --input_tfrecord='{}' --output_tfrecord='{}' --num_examples_to_pick=3 "
                              "--max_seq_length=32 --max_predictions_per_seq=0",
                              bin, in, out),
                  tmp, &err),
              0) << err;
    const auto inputs = read_records(in), picked = read_records(out);
    ASSERT_EQ(picked.size(), 3u);
    PretrainingRecord a, b;
    for (size_t k = 0; k < 3; ++k) {
        const size_t from = static_cast<size_t>(static_cast<double>(k) * (static_cast<double>(inputs.size()) / 3.0));
        parse_pretraining_example(decode_example(picked[k]), 32, 0, "picked", a);
        parse_pretraining_example(decode_example(inputs[from]), 32, 0, "input", b);
        EXPECT_TRUE(a.masked_lm_positions.empty());
        EXPECT_EQ(std::vector<int64_t>(a.input_ids.begin(), a.input_ids.end()),
                  std::vector<int64_t>(b.input_ids.begin(), b.input_ids.end())) << k;
    }
    EXPECT_EQ(run(fmt::format("'{}' pick-eval --input_tfrecord='{}' --output_tfrecord='{}' --max_seq_length=32 "
                              "--max_predictions_per_seq=-1", bin, in, tmp.file("never")),
                  tmp, &err),
              1);
    EXPECT_NE(err.find("--max_predictions_per_seq: expected >= 0, got -1"), std::string::npos) << err;
}

// --skip_corrupt_records with a truncated tail: the picks stop short of it, so the counting pass
// is the one that says the skip (it was silent); without the flag, one line naming the file.
TEST(PickEval, SkippedTailIsSaid) {
    const std::string bin = bertbench_binary();
    if (bin.empty())
        GTEST_SKIP() << "bertbench not built (set BB_BERTBENCH or build the bertbench target)";
    TempDir tmp;
    std::string err;
    const std::string whole = read_file(golden("pretraining/public_128_s12345_d2.tfrecord"));
    const std::string in = tmp.file("cut.tfrecord");
    write_file_atomic(in, whole.substr(0, whole.size() - 10));
    const std::string cmd = fmt::format("'{}' pick-eval --input_tfrecord='{}' --output_tfrecord='{}' "
                                        "--num_examples_to_pick=5 --max_seq_length=128 --max_predictions_per_seq=20",
                                        bin, in, tmp.file("o.tfrecord"));
    ASSERT_EQ(run(cmd + " --skip_corrupt_records", tmp, &err), 0) << err;
    EXPECT_NE(err.find("cut.tfrecord: record 1867 at byte "), std::string::npos) << err;
    EXPECT_NE(err.find("truncated record"), std::string::npos) << err;
    EXPECT_NE(err.find("skipped (--skip_corrupt_records)"), std::string::npos) << err;
    EXPECT_NE(err.find("Picked 5 examples out of 1867 samples"), std::string::npos) << err;
    EXPECT_EQ(std::count(err.begin(), err.end(), '\n'), 2) << err;
    EXPECT_EQ(run(cmd, tmp, &err), 1);
    EXPECT_NE(err.find("truncated record"), std::string::npos) << err;
    EXPECT_EQ(std::count(err.begin(), err.end(), '\n'), 1) << err;
    EXPECT_EQ(read_records(tmp.file("o.tfrecord")).size(), 5u);  // the failed run left the first one's output
}

TEST(PretrainingSchema, ParseAndErrors) {
    const auto rec = read_records(golden("pretraining/public_128_s12345_d2.tfrecord"))[0];
    const Example e = decode_example(rec);
    PretrainingRecord r;
    parse_pretraining_example(e, 128, 20, "f: record 0", r);
    EXPECT_EQ(r.input_ids.size(), 128u);
    EXPECT_EQ(r.masked_lm_weights.size(), 20u);
    EXPECT_EQ(encode_example(pretraining_example(r)), rec);
    auto expect_error = [&](const Example& ex, int seq, int pred, const std::string& want) {
        try {
            parse_pretraining_example(ex, seq, pred, "f: record 0", r);
            ADD_FAILURE() << "no error; wanted " << want;
        } catch (const Error& err) {
            EXPECT_NE(std::string(err.what()).find(want), std::string::npos) << err.what();
        }
    };
    expect_error(e, 512, 20, "f: record 0: feature input_ids: expected 512 values, got 128");
    expect_error(e, 128, 76, "feature masked_lm_positions: expected 76 values, got 20");
    Example missing = e;
    missing.features.erase(missing.features.begin() + 6);
    expect_error(missing, 128, 20, "feature next_sentence_labels: expected a int64_list of 1");
    Example wrong = e;
    wrong.features[5].second.kind = Feature::Kind::int64;
    expect_error(wrong, 128, 20,
                 "feature masked_lm_weights: expected a float_list, got a int64_list");
}

}  // namespace
}  // namespace bertbench::io
