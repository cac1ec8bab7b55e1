// tf.train.Example codec: decode(encode) of every golden record is the identity on bytes,
// decoded values equal the goldens' .jsonl, hand-made wire variants (unpacked, reordered,
// unknown fields, duplicate keys) decode, and a seeded mutation run never crashes (ASan in CI).
#include "io/example.hpp"

#include <gtest/gtest.h>

#include <chrono>
#include <fstream>
#include <nlohmann/json.hpp>
#include <random>

#include "core/error.hpp"
#include "io_test_util.hpp"

namespace bertbench::io {
namespace {

using testing::golden;
using testing::golden_tfrecords;
using testing::read_records;

TEST(Example, GoldenRecordsRoundTripByteIdentical) {
    size_t n = 0;
    for (const auto& path : golden_tfrecords()) {
        const auto records = read_records(path);
        for (size_t i = 0; i < records.size(); ++i) {
            const Example e = decode_example(records[i]);
            ASSERT_EQ(e.features.size(), 7u) << path << " record " << i;
            ASSERT_TRUE(encode_example(e) == records[i]) << path << " record " << i;
            ++n;
        }
    }
    EXPECT_EQ(n, 4620u);  // 1868+516+976+3x~316 pretraining + 311 picked
}

// Decoded values of the first `limit` records of both decoded goldens equal their .jsonl.
void check_against_jsonl(size_t limit) {
    const char* names[] = {"input_ids",           "input_mask",    "segment_ids",
                           "masked_lm_positions", "masked_lm_ids", "masked_lm_weights",
                           "next_sentence_labels"};
    for (const char* base : {"pretraining/public_128_s12345_d2.tfrecord",
                             "pretraining/public_512_s12345_d1.tfrecord"}) {
        const auto records = read_records(golden(base));
        std::ifstream in(golden(std::string(base) + ".jsonl"));
        ASSERT_TRUE(in) << base;
        std::string line;
        size_t i = 0;
        while (i < limit && std::getline(in, line)) {
            ASSERT_LT(i, records.size()) << base;
            const auto j = nlohmann::json::parse(line);
            const Example e = decode_example(records[i]);
            ASSERT_EQ(e.features.size(), j.size());
            size_t k = 0;
            for (auto it = j.begin(); it != j.end(); ++it, ++k) {
                // nlohmann::json sorts keys; compare by name and check wire order separately.
                const Feature* f = e.find(it.key());
                ASSERT_NE(f, nullptr) << base << " record " << i << " " << it.key();
                if (it.key() == "masked_lm_weights") {
                    ASSERT_EQ(f->kind, Feature::Kind::float32);
                    ASSERT_EQ(f->floats, it->get<std::vector<float>>()) << base << " record " << i;
                } else {
                    ASSERT_EQ(f->kind, Feature::Kind::int64);
                    ASSERT_EQ(f->ints, it->get<std::vector<int64_t>>()) << base << " record " << i;
                }
            }
            for (size_t w = 0; w < 7; ++w) ASSERT_EQ(e.features[w].first, names[w]);
            ++i;
        }
        EXPECT_EQ(i, std::min(limit, records.size())) << base;
    }
}

TEST(Example, GoldenValuesMatchJsonl) {
    check_against_jsonl(200);
}
// All 2384 records: about 10 s in a Debug+ASan build, hence "Slow".
TEST(Example, GoldenValuesMatchJsonlAllSlow) {
    check_against_jsonl(SIZE_MAX);
}

TEST(Example, EncodeKnownBytes) {
    // Hand-computed: Example{features{feature{"a": int64_list{1, 300, -1}}}}.
    Example e;
    const int64_t v[] = {1, 300, -1};
    e.add_int64("a", v);
    // payload 1+2+10 = 13; Int64List 15; Feature 17; map entry 3+2+17 = 22; Features 24.
    const std::string want = std::string(
                                 "\x0a\x18\x0a\x16\x0a\x01"
                                 "a"
                                 "\x12\x11\x1a\x0f\x0a\x0d\x01\xac\x02",
                                 16) +
                             std::string("\xff\xff\xff\xff\xff\xff\xff\xff\xff\x01", 10);
    EXPECT_EQ(encode_example(e), want);
    ASSERT_EQ(want.size(), 26u);
    const Example back = decode_example(encode_example(e));
    ASSERT_EQ(back.features.size(), 1u);
    EXPECT_EQ(back.features[0].second.ints, std::vector<int64_t>({1, 300, -1}));

    Example f;
    const float w[] = {1.0f, 0.0f};
    const int32_t small[] = {7};
    f.add_float("w", w);
    f.add_int64("n", small);
    const std::string s = encode_example(f);
    const Example fb = decode_example(s);
    ASSERT_NE(fb.find("w"), nullptr);
    EXPECT_EQ(fb.find("w")->floats, std::vector<float>({1.0f, 0.0f}));
    EXPECT_EQ(fb.find("n")->ints, std::vector<int64_t>({7}));
    EXPECT_EQ(fb.features[0].first, "w");  // insertion order kept
    EXPECT_EQ(fb.find("zz"), nullptr);
}

TEST(Example, DecodesUnpackedReorderedUnknownAndDuplicateKeys) {
    // map entry with value before key, unpacked int64 (wire type 0), unpacked floats (wire 5),
    // an unknown varint field 9 in Feature, and key "k" repeated (last value wins).
    std::string feat_int = std::string("\x1a\x04\x08\x05\x08\x06", 6) + "\x48\x01";  // ints 5, 6
    std::string entry1 = "\x12" + std::string(1, char(feat_int.size())) + feat_int + "\x0a\x01k";
    std::string fl = std::string("\x0d\x00\x00\x80\x3f", 5);  // float 1.0 (unpacked)
    std::string feat_fl = "\x12" + std::string(1, char(fl.size())) + fl;
    std::string entry2 = "\x0a\x01w\x12" + std::string(1, char(feat_fl.size())) + feat_fl;
    std::string feat_k2 = std::string("\x1a\x03\x0a\x01\x09", 5);  // ints {9}
    std::string entry3 = "\x0a\x01k\x12" + std::string(1, char(feat_k2.size())) + feat_k2;
    std::string features;
    for (const auto& en : {entry1, entry2, entry3})
        features += "\x0a" + std::string(1, char(en.size())) + en;
    const std::string bytes = "\x0a" + std::string(1, char(features.size())) + features;
    const Example e = decode_example(bytes);
    ASSERT_EQ(e.features.size(), 2u);
    EXPECT_EQ(e.features[0].first, "k");
    EXPECT_EQ(e.features[0].second.ints, std::vector<int64_t>({9}));
    EXPECT_EQ(e.features[1].second.floats, std::vector<float>({1.0f}));
    EXPECT_TRUE(decode_example("").features.empty());
}

TEST(Example, MalformedIsErrorWithWhere) {
    const std::string good = read_records(golden("eval_pick/public_128_eval100.tfrecord"))[0];
    for (size_t cut : {size_t(1), size_t(5), good.size() / 2, good.size() - 1}) {
        try {
            decode_example(std::string_view(good).substr(0, cut), "f.tfrecord: record 3");
            FAIL() << "no error for a record cut at " << cut;
        } catch (const Error& e) {
            EXPECT_NE(std::string(e.what()).find("f.tfrecord: record 3"), std::string::npos);
            EXPECT_NE(std::string(e.what()).find("malformed"), std::string::npos);
        }
    }
    EXPECT_THROW(decode_example(std::string("\x0f", 1)), Error);                      // wire type 7
    EXPECT_THROW(decode_example(std::string("\x0a\xff\xff\xff\xff\x0f", 6)), Error);  // huge len
    EXPECT_THROW(decode_example(std::string(12, '\x80')), Error);  // endless varint
}

// Seeded mutations of golden records: decode must give a clean Error or a valid Example; under
// ASan any out-of-bounds read fails the test. Bounded to a few thousand iterations (< 5 s).
TEST(Example, MutationNeverCrashes) {
    const auto records = read_records(golden("eval_pick/public_128_eval100.tfrecord"));
    std::mt19937_64 rng(20261122);
    const auto start = std::chrono::steady_clock::now();
    int errors = 0, decoded = 0;
    for (int it = 0; it < 4000; ++it) {
        std::string r = records[rng() % records.size()];
        const int edits = 1 + static_cast<int>(rng() % 4);
        for (int k = 0; k < edits && !r.empty(); ++k) {
            const size_t pos = rng() % r.size();
            switch (rng() % 5) {
                case 0:
                    r[pos] = static_cast<char>(r[pos] ^ (1 << (rng() % 8)));
                    break;
                case 1:
                    r[pos] = static_cast<char>(rng());
                    break;
                case 2:
                    r.resize(pos);
                    break;
                case 3:
                    r.insert(pos, std::string(1 + rng() % 8, static_cast<char>(rng())));
                    break;
                case 4:
                    r.erase(pos, 1 + rng() % 16);
                    break;
            }
        }
        try {
            const Example e = decode_example(r);
            ++decoded;
            (void)encode_example(e);  // whatever decoded must encode
        } catch (const Error&) {
            ++errors;
        }
    }
    const double s =
        std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
    EXPECT_GT(errors, 100);
    EXPECT_GT(decoded, 100);
    EXPECT_LT(s, 30.0);  // generous for ASan on a loaded machine; typically well under 1 s
}

}  // namespace
}  // namespace bertbench::io
