// TFRecord framing and CRC-32C: known vectors, golden files re-written byte-identically,
// corrupt/truncated records (error text and --skip_corrupt_records counting), atomic writes.
#include "io/tfrecord.hpp"

#include <gtest/gtest.h>

#include <filesystem>
#include <random>

#include "core/error.hpp"
#include "core/fs.hpp"
#include "io_test_util.hpp"

namespace bertbench::io {
namespace {

using testing::golden;
using testing::golden_tfrecords;
using testing::read_records;
using testing::TempDir;

TEST(Crc32c, KnownVectors) {
    // RFC 3720 (iSCSI) B.4 test vectors and the classic "123456789" check value.
    EXPECT_EQ(crc32c("123456789", 9), 0xE3069283u);
    std::string zeros(32, '\0'), ones(32, '\xff'), inc(32, '\0');
    for (int i = 0; i < 32; ++i) inc[i] = static_cast<char>(i);
    EXPECT_EQ(crc32c(zeros.data(), 32), 0x8A9136AAu);
    EXPECT_EQ(crc32c(ones.data(), 32), 0x62A8AB43u);
    EXPECT_EQ(crc32c(inc.data(), 32), 0x46DD794Eu);
    EXPECT_EQ(crc32c("", 0), 0u);
    EXPECT_EQ(unmask_crc(mask_crc(0x12345678u)), 0x12345678u);
}

TEST(Crc32c, HardwareEqualsTableAndExtends) {
    std::mt19937 rng(7);
    std::string buf(4099, '\0');
    for (auto& c : buf) c = static_cast<char>(rng());
    for (int it = 0; it < 300; ++it) {
        const size_t off = rng() % 17, n = rng() % (buf.size() - off);
        const uint32_t hw = crc32c(buf.data() + off, n), sw = crc32c_portable(buf.data() + off, n);
        ASSERT_EQ(hw, sw) << "off " << off << " n " << n;
        const size_t cut = n ? rng() % n : 0;
        ASSERT_EQ(crc32c(buf.data() + off + cut, n - cut, crc32c(buf.data() + off, cut)), hw);
    }
}

TEST(TfRecord, GoldenFilesRewriteByteIdentical) {
    const auto files = golden_tfrecords();
    ASSERT_GE(files.size(), 9u);
    TempDir tmp;
    for (const auto& path : files) {
        const auto records = read_records(path);
        ASSERT_FALSE(records.empty()) << path;
        const std::string out = tmp.file("copy.tfrecord");
        TfRecordWriter w(out);
        for (const auto& r : records) w.write(r);
        EXPECT_EQ(w.records(), records.size());
        w.close();
        EXPECT_TRUE(read_file(out) == read_file(path)) << path;
        EXPECT_EQ(count_tfrecords(path), records.size());
    }
    EXPECT_EQ(count_tfrecords(golden("pretraining/public_128_s12345_d2.tfrecord")), 1868u);
    EXPECT_EQ(count_tfrecords(golden("pretraining/public_512_s12345_d1.tfrecord")), 516u);
    EXPECT_EQ(count_tfrecords(golden("eval_pick/public_512_eval111_float_edge.tfrecord")), 111u);
}

TEST(TfRecord, WriterIsAtomic) {
    TempDir tmp;
    const std::string out = tmp.file("a.tfrecord");
    {
        TfRecordWriter w(out);
        w.write("abc");
        EXPECT_FALSE(std::filesystem::exists(out));
    }  // destroyed without close(): nothing published, no temporary left
    EXPECT_FALSE(std::filesystem::exists(out));
    EXPECT_TRUE(std::filesystem::is_empty(tmp.path));
    TfRecordWriter w(out);
    w.write("");
    w.write("hello");
    w.close();
    w.close();  // idempotent
    EXPECT_EQ(std::filesystem::file_size(out), 12u + 4 + 12 + 5 + 4);
    const auto recs = read_records(out);
    ASSERT_EQ(recs.size(), 2u);
    EXPECT_EQ(recs[0], "");
    EXPECT_EQ(recs[1], "hello");
    EXPECT_THROW(w.write("x"), Error);
}

// Three records written to a temp file, then damaged by `damage`.
struct Damaged {
    TempDir tmp;
    std::string path = tmp.file("d.tfrecord");
    std::string bytes;
    Damaged() {
        TfRecordWriter w(path);
        w.write("first record");
        w.write("second record");
        w.write("third record");
        w.close();
        bytes = read_file(path);
    }
    void save() { write_file_atomic(path, bytes); }
    std::string error(bool skip = false) {
        try {
            TfRecordReader r(path, skip);
            std::string p;
            while (r.next(p)) {
            }
        } catch (const Error& e) {
            return e.what();
        }
        return "";
    }
    std::vector<std::string> read_skipping(uint64_t* skipped) {
        TfRecordReader r(path, true);
        std::vector<std::string> out;
        std::string p;
        while (r.next(p)) out.push_back(p);
        *skipped = r.corrupt_skipped();
        return out;
    }
};

constexpr size_t kRec0 = 12 + 12 + 4, kRec1 = 12 + 13 + 4;  // framed sizes of records 0, 1

TEST(TfRecord, DataCrcMismatchNamesFileRecordOffset) {
    Damaged d;
    d.bytes[kRec0 + 12 + 3] ^= 0x20;  // a payload byte of record 1
    d.save();
    const std::string e = d.error();
    EXPECT_NE(e.find(d.path), std::string::npos) << e;
    EXPECT_NE(e.find("record 1 at byte 28"), std::string::npos) << e;
    EXPECT_NE(e.find("data CRC mismatch (expected 0x"), std::string::npos) << e;
    EXPECT_NE(e.find("--skip_corrupt_records"), std::string::npos) << e;
    uint64_t skipped = 0;
    const auto recs = d.read_skipping(&skipped);
    EXPECT_EQ(skipped, 1u);
    ASSERT_EQ(recs.size(), 2u);
    EXPECT_EQ(recs[0], "first record");
    EXPECT_EQ(recs[1], "third record");
}

TEST(TfRecord, LengthCrcMismatchResynchronises) {
    Damaged d;
    d.bytes[kRec0 + 1] ^= 0x01;  // length of record 1
    d.save();
    const std::string e = d.error();
    EXPECT_NE(e.find("record 1 at byte 28: length CRC mismatch"), std::string::npos) << e;
    uint64_t skipped = 0;
    const auto recs = d.read_skipping(&skipped);
    EXPECT_EQ(skipped, 1u);
    ASSERT_EQ(recs.size(), 2u);
    EXPECT_EQ(recs[1], "third record");
}

TEST(TfRecord, TruncatedFile) {
    for (size_t cut : {size_t(5), size_t(14), size_t(23)}) {
        Damaged d;
        d.bytes.resize(d.bytes.size() - cut);
        d.save();
        const std::string e = d.error();
        EXPECT_NE(e.find("record 2 at byte " + std::to_string(kRec0 + kRec1)), std::string::npos)
            << e;
        EXPECT_NE(e.find("truncated"), std::string::npos) << e;
        uint64_t skipped = 0;
        const auto recs = d.read_skipping(&skipped);
        EXPECT_EQ(skipped, 1u);
        EXPECT_EQ(recs.size(), 2u);
    }
}

TEST(TfRecord, SeekResumesAtRecordBoundary) {
    const std::string path = golden("pretraining/public_128_multi_s1_d1.tfrecord-00001-of-00003");
    const auto all = read_records(path);
    TfRecordReader r(path);
    std::string p;
    for (int i = 0; i < 10; ++i) ASSERT_TRUE(r.next(p));
    const uint64_t off = r.offset(), idx = r.index();
    EXPECT_EQ(idx, 10u);
    TfRecordReader r2(path);
    r2.seek(off, idx);
    ASSERT_TRUE(r2.next(p));
    EXPECT_EQ(p, all[10]);
    EXPECT_EQ(r2.index(), 11u);
    EXPECT_THROW(r2.seek(r2.file_size() + 1, 0), Error);
}

// Seeded mutations of a small TFRecord file (bit flips, random bytes, truncation, insertion):
// reading gives records or a clean Error, never a crash (ASan in CI); with skip_corrupt it
// never throws at all. Bounded: 400 files.
TEST(TfRecord, MutatedFilesNeverCrash) {
    const auto records = read_records(golden("eval_pick/public_128_eval100.tfrecord"));
    TempDir tmp;
    std::string clean;
    {
        TfRecordWriter w(tmp.file("clean"));
        for (int i = 0; i < 4; ++i) w.write(records[i]);
        w.close();
        clean = read_file(tmp.file("clean"));
    }
    std::mt19937_64 rng(99);
    int errors = 0;
    for (int it = 0; it < 400; ++it) {
        std::string b = clean;
        const int edits = 1 + static_cast<int>(rng() % 3);
        for (int k = 0; k < edits && !b.empty(); ++k) {
            const size_t pos = rng() % b.size();
            switch (rng() % 4) {
                case 0:
                    b[pos] = static_cast<char>(b[pos] ^ (1 << (rng() % 8)));
                    break;
                case 1:
                    b[pos] = static_cast<char>(rng());
                    break;
                case 2:
                    b.resize(pos);
                    break;
                case 3:
                    b.insert(pos, std::string(1 + rng() % 20, static_cast<char>(rng())));
                    break;
            }
        }
        const std::string path = tmp.file("m");
        write_file_atomic(path, b);
        std::string p;
        try {
            TfRecordReader r(path);
            while (r.next(p)) {
            }
        } catch (const Error&) {
            ++errors;
        }
        TfRecordReader r(path, true);
        uint64_t good = 0;
        while (r.next(p)) ++good;
        EXPECT_LE(good, 4u);  // damage can drop records, never invent one
    }
    EXPECT_GT(errors, 300);
}

TEST(TfRecord, MissingFileError) {
    try {
        TfRecordReader r("/nonexistent/x.tfrecord");
        FAIL() << "no error";
    } catch (const Error& e) {
        EXPECT_NE(std::string(e.what()).find("/nonexistent/x.tfrecord"), std::string::npos);
    }
}

}  // namespace
}  // namespace bertbench::io
