// PretrainReader: eval mode reads every record once in file order (values checked against the
// goldens' independent .jsonl decode), training batches are deterministic by seed and each epoch
// is a permutation, restore() resumes exactly (also across epoch ends), rank shares are disjoint
// and complete, and schema errors name the file and record.
#include "data/pretrain_reader.hpp"

#include <gtest/gtest.h>
#include <unistd.h>

#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <functional>
#include <map>

#include "core/error.hpp"
#include "io/example.hpp"
#include "io/tfrecord.hpp"
#include "test_util.hpp"

namespace bertbench::data {
namespace {

using testing::golden;

std::vector<std::string> multi_shards() {
    std::vector<std::string> out;
    for (int i = 0; i < 3; ++i)
        out.push_back(
            golden(fmt::format("pretraining/public_128_multi_s1_d1.tfrecord-0000{}-of-00003", i)));
    return out;
}

// One sequence of a batch as a comparable value.
struct Seq {
    std::vector<int32_t> ids, segs, mpos, mids;
    std::vector<float> mw;
    int32_t nsl = 0;
    bool operator==(const Seq&) const = default;
    bool operator<(const Seq& o) const {
        return std::tie(ids, mpos, mids, nsl) < std::tie(o.ids, o.mpos, o.mids, o.nsl);
    }
};

std::vector<Seq> split(const model::Batch& b) {
    // Invariants of the unpadded batch, checked on every batch the tests see.
    EXPECT_EQ(b.seq_offsets.size(), static_cast<size_t>(b.batch_size) + 1);
    EXPECT_EQ(b.input_ids.size(), static_cast<size_t>(b.num_tokens()));
    EXPECT_EQ(b.segment_ids.size(), b.input_ids.size());
    EXPECT_EQ(b.next_sentence_labels.size(), static_cast<size_t>(b.batch_size));
    const size_t P = b.masked_index.size();
    EXPECT_TRUE(b.masked_ids.size() == P && b.masked_weights.size() == P &&
                b.masked_seq.size() == P);
    std::vector<Seq> out(b.batch_size);
    for (int s = 0; s < b.batch_size; ++s) {
        for (int i = b.seq_offsets[s]; i < b.seq_offsets[s + 1]; ++i) {
            out[s].ids.push_back(b.input_ids[i]);
            out[s].segs.push_back(b.segment_ids[i]);
        }
        out[s].nsl = b.next_sentence_labels[s];
    }
    for (size_t p = 0; p < P; ++p) {
        const int s = b.masked_seq[p];
        EXPECT_GE(b.masked_index[p], b.seq_offsets[s]);
        EXPECT_LT(b.masked_index[p], b.seq_offsets[s + 1]);
        out[s].mpos.push_back(b.masked_index[p] - b.seq_offsets[s]);
        out[s].mids.push_back(b.masked_ids[p]);
        out[s].mw.push_back(b.masked_weights[p]);
    }
    return out;
}

std::vector<Seq> read_all(PretrainReaderConfig c, std::vector<int>* batch_sizes = nullptr) {
    PretrainReader r(std::move(c));
    model::Batch b;
    std::vector<Seq> all;
    while (r.next(b)) {
        if (batch_sizes) batch_sizes->push_back(b.batch_size);
        for (auto& s : split(b)) all.push_back(std::move(s));
    }
    EXPECT_FALSE(r.next(b));  // stays at the end
    return all;
}

std::vector<Seq> read_batches(PretrainReader& r, int n) {
    std::vector<Seq> out;
    model::Batch b;
    for (int i = 0; i < n; ++i) {
        EXPECT_TRUE(r.next(b));
        EXPECT_EQ(b.batch_size, r.config().batch_size);
        for (auto& s : split(b)) out.push_back(std::move(s));
    }
    return out;
}

TEST(PretrainReader, EvalModeMatchesJsonlInFileOrder) {
    PretrainReaderConfig c;
    c.files = {golden("pretraining/public_128_s12345_d2.tfrecord")};
    c.training = false;
    c.batch_size = 64;
    std::vector<int> sizes;
    const auto all = read_all(c, &sizes);
    ASSERT_EQ(all.size(), 1868u);
    ASSERT_EQ(sizes.size(), 30u);  // 29 x 64 + 12
    EXPECT_EQ(sizes.back(), 1868 - 29 * 64);

    std::ifstream in(golden("pretraining/public_128_s12345_d2.tfrecord.jsonl"));
    std::string line;
    size_t i = 0, bad = 0;
    while (std::getline(in, line) && i < all.size()) {
        const auto j = nlohmann::json::parse(line);
        Seq want;
        const auto ids = j["input_ids"].get<std::vector<int32_t>>();
        const auto mask = j["input_mask"].get<std::vector<int32_t>>();
        const auto segs = j["segment_ids"].get<std::vector<int32_t>>();
        for (size_t t = 0; t < ids.size(); ++t)
            if (mask[t] == 1) {
                want.ids.push_back(ids[t]);
                want.segs.push_back(segs[t]);
            }
        const auto pos = j["masked_lm_positions"].get<std::vector<int32_t>>();
        const auto mid = j["masked_lm_ids"].get<std::vector<int32_t>>();
        const auto w = j["masked_lm_weights"].get<std::vector<float>>();
        for (size_t p = 0; p < pos.size(); ++p)
            if (w[p] != 0.0f) {
                want.mpos.push_back(pos[p]);
                want.mids.push_back(mid[p]);
                want.mw.push_back(w[p]);
            }
        want.nsl = j["next_sentence_labels"][0].get<int32_t>();
        if (!(all[i] == want) && bad++ < 3) ADD_FAILURE() << "record " << i << " differs";
        ++i;
    }
    EXPECT_EQ(i, 1868u);
    EXPECT_EQ(bad, 0u);
}

TEST(PretrainReader, TrainingDeterministicBySeedAndEpochsArePermutations) {
    PretrainReaderConfig c;
    c.files = {golden("eval_pick/public_128_eval100.tfrecord")};
    c.batch_size = 25;
    c.shuffle_buffer = 30;
    c.seed = 42;
    PretrainReader a(c), b(c);
    const auto sa = read_batches(a, 12), sb = read_batches(b, 12);  // 3 epochs of 100
    EXPECT_TRUE(sa == sb);
    c.seed = 43;
    PretrainReader d(c);
    EXPECT_FALSE(read_batches(d, 12) == sa);

    c.training = false;
    auto ordered = read_all(c);
    ASSERT_EQ(ordered.size(), 100u);
    std::sort(ordered.begin(), ordered.end());
    for (int e = 0; e < 3; ++e) {
        std::vector<Seq> epoch(sa.begin() + 100 * e, sa.begin() + 100 * (e + 1));
        EXPECT_FALSE(std::equal(epoch.begin(), epoch.begin() + 10,
                                read_all(c).begin()));  // shuffled, not file order
        std::sort(epoch.begin(), epoch.end());
        EXPECT_TRUE(epoch == ordered) << "epoch " << e << " is not a permutation of the file";
    }
    EXPECT_FALSE(
        std::equal(sa.begin(), sa.begin() + 100, sa.begin() + 100));  // new order per epoch
}

TEST(PretrainReader, RestoreResumesExactly) {
    for (int buffer : {0, 7, 1000}) {
        PretrainReaderConfig c;
        c.files = multi_shards();
        c.batch_size = 100;
        c.shuffle_buffer = buffer;
        c.seed = 9;
        PretrainReader a(c);
        read_batches(a, 8);  // 800 of 949 records
        const std::string saved = a.state().dump();
        const auto want = read_batches(a, 5);  // crosses the epoch end
        EXPECT_EQ(a.state()["epoch"], 1);
        PretrainReader b(c);
        b.restore(nlohmann::json::parse(saved));
        EXPECT_TRUE(read_batches(b, 5) == want) << "shuffle_buffer " << buffer;
        // Restoring a running reader rewinds it too.
        a.restore(nlohmann::json::parse(saved));
        EXPECT_TRUE(read_batches(a, 5) == want) << "shuffle_buffer " << buffer;
    }
}

TEST(PretrainReader, RestoreRejectsOtherConfig) {
    PretrainReaderConfig c;
    c.files = multi_shards();
    PretrainReader a(c);
    auto s = a.state();
    c.seed = 1;
    PretrainReader b(c);
    try {
        b.restore(s);
        FAIL() << "no error";
    } catch (const Error& e) {
        EXPECT_NE(std::string(e.what()).find("got seed 12345 in the cursor, 1 now"), std::string::npos)
            << e.what();
    }
    EXPECT_THROW(b.restore(nlohmann::json::object()), Error);
}

TEST(PretrainReader, RankSharesAreDisjointAndComplete) {
    PretrainReaderConfig c;
    c.files = multi_shards();
    c.training = false;
    c.batch_size = 16;
    auto all = read_all(c);
    ASSERT_EQ(all.size(), 949u);
    std::sort(all.begin(), all.end());
    for (int world : {2, 3, 4, 5}) {  // 2, 3: files split; 4, 5: records split
        std::vector<Seq> joined;
        for (int r = 0; r < world; ++r) {
            c.rank = r;
            c.world_size = world;
            auto part = read_all(c);
            EXPECT_GT(part.size(), 0u);
            joined.insert(joined.end(), part.begin(), part.end());
        }
        std::sort(joined.begin(), joined.end());
        EXPECT_TRUE(joined == all) << "world_size " << world;
    }
    c.rank = 2;
    c.world_size = 2;
    EXPECT_THROW(PretrainReader bad(c), Error);
}

// A file that holds no record (prepare's output for an empty text shard) is left out before the
// split by file: with it, 4 ranks over {empty, 3 files} would give rank 0 nothing, and 2 ranks over
// {1 file, empty} would stop rank 1 at its first batch.
TEST(PretrainReader, EmptyFilesAreLeftOutOfTheRanksSplit) {
    const std::string empty = ::testing::TempDir() + "/empty_shard.tfrecord";
    std::ofstream(empty).close();
    PretrainReaderConfig c;
    c.files = multi_shards();
    c.training = false;
    c.batch_size = 16;
    auto all = read_all(c);
    std::sort(all.begin(), all.end());
    c.files.insert(c.files.begin(), empty);
    std::vector<Seq> joined;
    for (int r = 0; r < 4; ++r) {
        c.rank = r;
        c.world_size = 4;
        auto part = read_all(c);
        EXPECT_GT(part.size(), 0u) << "rank " << r;
        joined.insert(joined.end(), part.begin(), part.end());
    }
    std::sort(joined.begin(), joined.end());
    EXPECT_TRUE(joined == all);
    c.files = {multi_shards()[0], empty};
    c.training = true;
    c.batch_size = 4;
    c.world_size = 2;
    for (int r = 0; r < 2; ++r) {
        c.rank = r;
        PretrainReader rr(c);
        EXPECT_EQ(read_batches(rr, 3).size(), 12u) << "rank " << r;
    }
}

// Data parallel (issue 12): with record sharding, N ranks x b sequences per batch see exactly
// the sequences of 1 rank x N*b, rank r taking the single stream's records g % N == r. Eval uses
// shard_by_record even with >= N files; training does with file order (shuffle_buffer 0).
TEST(PretrainReader, RecordShardsInterleaveToTheSingleProcessStream) {
    for (bool training : {false, true}) {
        PretrainReaderConfig c;
        c.files = multi_shards();  // 3 files: without shard_by_record, 2 ranks would split files
        c.training = training;
        c.shuffle_buffer = 0;
        c.batch_size = 8;
        PretrainReader one(c);
        const auto all = read_batches(one, 12);
        c.batch_size = 4;
        c.world_size = 2;
        c.shard_by_record = true;
        std::vector<std::vector<Seq>> part;
        for (int r = 0; r < 2; ++r) {
            c.rank = r;
            PretrainReader rr(c);
            part.push_back(read_batches(rr, 12));
        }
        ASSERT_EQ(all.size(), 96u);
        for (size_t k = 0; k < 48; ++k) {
            ASSERT_TRUE(part[0][k] == all[2 * k]) << "training " << training << " record " << 2 * k;
            ASSERT_TRUE(part[1][k] == all[2 * k + 1]) << "training " << training << " record " << 2 * k + 1;
        }
    }
}

TEST(PretrainReader, SchemaErrorNamesFileAndRecord) {
    PretrainReaderConfig c;
    c.files = {golden("pretraining/public_512_s12345_d1.tfrecord")};
    c.max_seq_length = 128;
    c.max_predictions_per_seq = 20;
    PretrainReader r(c);
    model::Batch b;
    try {
        r.next(b);
        FAIL() << "no error";
    } catch (const Error& e) {
        const std::string m = e.what();
        EXPECT_NE(m.find("public_512_s12345_d1.tfrecord: record "), std::string::npos) << m;
        EXPECT_NE(m.find("feature input_ids: expected 128 values, got 512"), std::string::npos)
            << m;
    }
    EXPECT_FALSE(r.next(b));
}

// A small valid record (T = 8 tokens, P = 3 predictions, 5 real tokens).
io::PretrainingRecord small_record() {
    io::PretrainingRecord r;
    r.input_ids = {101, 7, 8, 102, 9, 0, 0, 0};
    r.input_mask = {1, 1, 1, 1, 1, 0, 0, 0};
    r.segment_ids = {0, 0, 0, 0, 1, 0, 0, 0};
    r.masked_lm_positions = {1, 4, 0};
    r.masked_lm_ids = {17, 19, 0};
    r.masked_lm_weights = {1.0f, 1.0f, 0.0f};
    r.next_sentence_labels = 1;
    return r;
}

// The error PretrainReader gives for a one-record file holding `rec` (or "" if it reads).
std::string reader_error(const io::PretrainingRecord& rec, const std::string& path) {
    {
        io::TfRecordWriter w(path);
        w.write(io::encode_example(io::pretraining_example(rec)));
        w.close();
    }
    PretrainReaderConfig c;
    c.files = {path};
    c.training = false;
    c.batch_size = 1;
    c.max_seq_length = 8;
    c.max_predictions_per_seq = 3;
    PretrainReader r(c);
    model::Batch b;
    try {
        while (r.next(b)) {
        }
    } catch (const Error& e) {
        return e.what();
    }
    return "";
}

// int64 ids narrowed to the batch's int32 used to wrap (2^32 + 5 read as 5), and NaN or negative
// masked_lm_weights reached the loss. Each is now an error naming the file, record and feature,
// and the batch is left as it was.
TEST(PretrainReader, RejectsIdsOutsideInt32AndBadWeights) {
    const std::string path = (std::filesystem::temp_directory_path() /
                              ("bb_narrow_" + std::to_string(getpid()) + ".tfrecord"))
                                 .string();
    ASSERT_EQ(reader_error(small_record(), path), "");
    struct Case {
        std::function<void(io::PretrainingRecord&)> damage;
        const char* expected;
    };
    const int64_t wrap = (int64_t{1} << 32) + 5;
    const Case cases[] = {
        {[&](auto& r) { r.input_ids[2] = wrap; }, "feature input_ids: expected an id in [0, 2^31)"},
        {[&](auto& r) { r.input_ids[0] = -1; }, "feature input_ids"},
        {[&](auto& r) { r.segment_ids[1] = wrap; }, "feature segment_ids"},
        {[&](auto& r) { r.masked_lm_ids[1] = wrap; }, "feature masked_lm_ids"},
        {[&](auto& r) { r.masked_lm_ids[0] = INT64_MIN; }, "feature masked_lm_ids"},
        {[&](auto& r) { r.masked_lm_positions[0] = wrap; }, "feature masked_lm_positions"},
        {[&](auto& r) { r.masked_lm_weights[0] = std::nanf(""); }, "feature masked_lm_weights"},
        {[&](auto& r) { r.masked_lm_weights[2] = -1.0f; }, "feature masked_lm_weights"},
        {[&](auto& r) { r.masked_lm_weights[1] = INFINITY; }, "feature masked_lm_weights"},
        {[&](auto& r) { r.next_sentence_labels = wrap; }, "feature next_sentence_labels"},
    };
    for (const Case& c : cases) {
        io::PretrainingRecord rec = small_record();
        c.damage(rec);
        const std::string e = reader_error(rec, path);
        EXPECT_NE(e.find(path + ": record 0: "), std::string::npos) << e;
        EXPECT_NE(e.find(c.expected), std::string::npos) << e;
        model::Batch b;
        b.seq_offsets.push_back(0);
        EXPECT_THROW(append_pretraining_record(b, rec, "r"), Error);
        EXPECT_EQ(b.batch_size, 0);
        EXPECT_TRUE(b.input_ids.empty() && b.masked_ids.empty());
    }
    std::filesystem::remove(path);
}

// The model's table an id is outside of is named, and so is its cause: a segment id past
// type_vocab_size is about token types, not the vocabulary (QA4 nit: the hint said vocabulary).
TEST(PretrainReader, IdsOutsideTheModelNameTheirTable) {
    const auto error_for = [](const std::function<void(io::PretrainingRecord&)>& damage) {
        io::PretrainingRecord rec = small_record();
        damage(rec);
        model::Batch b;
        b.seq_offsets.push_back(0);
        return testing::error_of([&] { append_pretraining_record(b, rec, "r: record 0", 200, 2); });
    };
    std::string e = error_for([](auto& r) { r.segment_ids[4] = 2; });
    EXPECT_NE(e.find("feature segment_ids: expected an id in [0, 2) (type_vocab_size"),
              std::string::npos) << e;
    EXPECT_NE(e.find("more token types than bert_config.json's type_vocab_size"),
              std::string::npos) << e;
    EXPECT_EQ(e.find("vocabulary"), std::string::npos) << e;
    e = error_for([](auto& r) { r.input_ids[1] = 200; });
    EXPECT_NE(e.find("another vocabulary than bert_config.json's"), std::string::npos) << e;
}

// A reader state from a checkpoint is untrusted: values nested ~70,000 levels deep used to
// overflow the stack in restore()'s error path (it serialised them); messages are short now.
TEST(PretrainReader, RestoreDescribesHugeValuesBriefly) {
    PretrainReaderConfig c;
    c.files = multi_shards();
    PretrainReader r(c);
    nlohmann::json deep = 0;
    for (int i = 0; i < 70000; ++i) {
        nlohmann::json outer = nlohmann::json::array();
        outer.push_back(std::move(deep));
        deep = std::move(outer);
    }
    nlohmann::json s = r.state();
    s["seed"] = std::move(deep);
    std::string e;
    try {
        r.restore(s);
    } catch (const Error& err) {
        e = err.what();
    }
    EXPECT_NE(e.find(" in the cursor, 12345 now"), std::string::npos) << e.substr(0, 300);
    EXPECT_LT(e.size(), 400u);
    s = r.state();
    s["files"] = std::string(1 << 20, 'f');
    try {
        r.restore(s);
        FAIL() << "no error";
    } catch (const Error& err) {
        EXPECT_LT(std::string(err.what()).size(), 400u);
    }
}

}  // namespace
}  // namespace bertbench::data
