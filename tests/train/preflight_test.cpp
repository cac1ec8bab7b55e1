// check_input_records on HDF5 inputs (QA4 §1-3): an HDF5 name in any letter case is checked as
// HDF5 (not as a TFRecord), HDF5 records count towards "expected records, got none", and a
// truncated or width-mismatched HDF5 shard is an error naming the file before the first step.
// Inputs: the golden HDF5 twin (1868 records, T 128, P 20) and copies of it.
#include "train/preflight.hpp"

#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <string>
#include <vector>

#include "test_util.hpp"

namespace bertbench::train {
namespace {

using testing::error_of;
using testing::golden;
using testing::TmpDir;
namespace fs = std::filesystem;

const std::string kGoldenH5 = "hdf5/public_128_s12345_d2.hdf5";

// The pre-flight's error for `files` at the golden widths ("" if none).
std::string preflight_error(const std::vector<std::string>& files, int T = 128, int P = 20,
                            const model::BertConfig& config = {}) {
    return error_of([&] { check_input_records(files, T, P, config, "input_file", false); });
}

TEST(Preflight, Hdf5NameInAnyCaseIsCheckedAsHdf5) {
    TmpDir dir("bb_preflight");
    for (const char* name : {"UP.HDF5", "b.H5", "c.Hdf5"}) {
        fs::copy_file(golden(kGoldenH5), dir.file(name));
        EXPECT_EQ(preflight_error({dir.file(name)}), "") << name;
        // ... and with --skip_corrupt_records, not skipped as a corrupt TFRecord
        EXPECT_EQ(error_of([&] {
                      check_input_records({dir.file(name)}, 128, 20, {}, "input_file", true);
                  }),
                  "")
            << name;
    }
}

TEST(Preflight, Hdf5RecordsCountNextToAnEmptyTfRecord) {
    TmpDir dir("bb_preflight");
    std::ofstream(dir.file("empty.tfrecord")).flush();
    const std::string h5 = golden(kGoldenH5), empty = dir.file("empty.tfrecord");
    EXPECT_EQ(preflight_error({h5, empty}), "");
    EXPECT_EQ(preflight_error({empty, h5}), "");
    // nothing anywhere is still an error, naming the first file
    const std::string msg = preflight_error({empty});
    EXPECT_NE(msg.find("expected records, got none in 1 file(s) (first: " + empty),
              std::string::npos)
        << msg;
}

TEST(Preflight, TruncatedHdf5IsFoundBeforeTheFirstStep) {
    TmpDir dir("bb_preflight");
    const std::string half = dir.file("half.hdf5");
    {
        const std::string bytes = testing::slurp(golden(kGoldenH5));
        std::ofstream(half, std::ios::binary).write(bytes.data(), bytes.size() / 2);
    }
    // listed after a good file: the reader would reach it only mid-run
    const std::string msg = preflight_error({golden(kGoldenH5), half});
    EXPECT_NE(msg.find("--input_file: [hdf5] " + half), std::string::npos) << msg;
    EXPECT_NE(msg.find("found by the check of every input before the first step"),
              std::string::npos)
        << msg;
}

TEST(Preflight, Hdf5OfOtherWidthsIsAnErrorNamingFileAndDataset) {
    const std::string h5 = golden(kGoldenH5);
    std::string msg = preflight_error({h5}, 64, 20);
    EXPECT_NE(msg.find(h5), std::string::npos) << msg;
    EXPECT_NE(msg.find("dataset input_ids"), std::string::npos) << msg;
    EXPECT_NE(msg.find("--max_seq_length"), std::string::npos) << msg;
    // wider predictions than the flag allows (narrower ones are read, as NVIDIA's loader does)
    msg = preflight_error({h5}, 128, 10);
    EXPECT_NE(msg.find("dataset masked_lm_positions"), std::string::npos) << msg;
    EXPECT_EQ(preflight_error({h5}, 128, 40), "");
}

TEST(Preflight, Hdf5FirstRecordIdsAreCheckedAgainstTheModel) {
    model::BertConfig small;
    small.vocab_size = 1000;  // the golden records hold ids up to ~30000
    const std::string h5 = golden(kGoldenH5);
    std::string msg = preflight_error({h5}, 128, 20, small);
    EXPECT_NE(msg.find(h5 + ": record 0: input_ids["), std::string::npos) << msg;
    EXPECT_NE(msg.find("outside the model's vocabulary [0, 1000)"), std::string::npos) << msg;
    model::BertConfig one_type;
    one_type.type_vocab_size = 1;  // record 0 is a pair: segment ids 0 and 1
    msg = preflight_error({h5}, 128, 20, one_type);
    EXPECT_NE(msg.find("outside the model's token types [0, 1)"), std::string::npos) << msg;
}

// The eval set's count checks every record it counts (the start-up check reads record 0 only): a
// later record's id beyond the model's vocabulary stops the run before training.
TEST(Preflight, EvalRecordsAreCheckedWhenCounted) {
    const std::string eval = golden("eval_pick/public_128_eval100.tfrecord");
    model::BertConfig small;
    small.vocab_size = 28996;  // record 0's ids are below it, a later record's are not
    EXPECT_EQ(preflight_error({eval}, 128, 20, small), "");
    const model::BertConfig base;  // vocabulary 30522: every record passes, the same count
    EXPECT_EQ(eval_records({eval}, 0, false, 128, 20), eval_records({eval}, 0, false, 128, 20, &base));
    try {
        eval_records({eval}, 0, false, 128, 20, &small);
        ADD_FAILURE() << "no error";
    } catch (const Error& e) {
        const std::string msg = e.what();
        EXPECT_NE(msg.find(eval + ": record "), std::string::npos) << msg;
        EXPECT_EQ(msg.find(eval + ": record 0:"), std::string::npos) << msg;
        EXPECT_NE(msg.find("outside the model's vocabulary [0, 28996)"), std::string::npos) << msg;
    }
}

}  // namespace
}  // namespace bertbench::train
