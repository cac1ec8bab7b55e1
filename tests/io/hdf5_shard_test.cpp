// NVIDIA HDF5 shards: the golden .hdf5 twins read record for record equal to their TFRecords and
// to what NVIDIA's loader yields (reader_view_sample.jsonl); their layout is what datasets.json
// states and h5py's guess_chunk predicts; our writer reproduces every dataset (values, dtype,
// shape, chunks, filters); bad files and bad values are one-line errors naming file and dataset.
#include "io/hdf5_shard.hpp"

#include <gtest/gtest.h>
#include <hdf5.h>

#include <filesystem>
#include <fstream>
#include <functional>
#include <nlohmann/json.hpp>
#include <sstream>

#include "core/error.hpp"
#include "core/fs.hpp"
#include "io/example.hpp"
#include "io_test_util.hpp"

namespace bertbench::io {
namespace {
using nlohmann::json;
using testing::golden;
using testing::TempDir;

struct Twin {
    const char* hdf5;
    const char* tfrecord;
    int T, P;
    uint64_t records;
};
constexpr Twin kTwins[] = {
    {"hdf5/public_128_s12345_d2.hdf5", "pretraining/public_128_s12345_d2.tfrecord", 128, 20, 1868},
    {"hdf5/public_512_s12345_d1.hdf5", "pretraining/public_512_s12345_d1.tfrecord", 512, 76, 516},
};

std::string error_of(const std::function<void()>& f) {
    try {
        f();
    } catch (const Error& e) {
        return e.what();
    }
    return "";
}

void expect_one_line(const std::string& msg) {
    EXPECT_FALSE(msg.empty());
    EXPECT_EQ(msg.find('\n'), std::string::npos) << msg;
}

// The records of a TFRecord file, parsed as the TFRecord pipeline parses them.
std::vector<PretrainingRecord> tfrecord_records(const std::string& path, int T, int P) {
    std::vector<PretrainingRecord> out;
    for (const auto& payload : testing::read_records(path)) {
        out.emplace_back();
        parse_pretraining_example(decode_example(payload), T, P, path, out.back());
    }
    return out;
}

TEST(Hdf5Shard, GoldenTwinsEqualTheirTfrecordsRecordByRecord) {
    for (const Twin& t : kTwins) {
        const Hdf5ShardArrays a = read_hdf5_shard(golden(t.hdf5), t.T, t.P);
        const auto want = tfrecord_records(golden(t.tfrecord), t.T, t.P);
        ASSERT_EQ(a.records, t.records) << t.hdf5;
        ASSERT_EQ(want.size(), t.records) << t.tfrecord;
        PretrainingRecord got;
        size_t bad = 0;
        for (uint64_t i = 0; i < a.records; ++i) {
            decode_hdf5_record(a, i, t.hdf5, got);
            const PretrainingRecord& w = want[i];
            const bool same = got.input_ids == w.input_ids && got.input_mask == w.input_mask &&
                              got.segment_ids == w.segment_ids &&
                              got.masked_lm_positions == w.masked_lm_positions &&
                              got.masked_lm_ids == w.masked_lm_ids &&
                              got.masked_lm_weights == w.masked_lm_weights &&
                              got.next_sentence_labels == w.next_sentence_labels;
            if (!same && bad++ == 0) ADD_FAILURE() << t.hdf5 << ": first differing record " << i;
        }
        EXPECT_EQ(bad, 0u) << t.hdf5 << ": records differing from " << t.tfrecord;
    }
}

// NVIDIA's loader takes a --max_predictions_per_seq above the shard's width (it only caps the
// predictions of a row): with predictions_up_to the rows come at the shard's own width, the same
// records; without it a wider flag is the schema error it always was.
TEST(Hdf5Shard, PredictionsUpToAWiderFlagReadTheShardsWidth) {
    const Twin& t = kTwins[1];  // 76 wide
    const Hdf5ShardArrays exact = read_hdf5_shard(golden(t.hdf5), t.T, t.P);
    const Hdf5ShardReader wider(golden(t.hdf5), t.T, 80, true);
    const Hdf5ShardArrays got = wider.read_rows(0, wider.records());
    EXPECT_EQ(got.max_predictions_per_seq, 76);
    EXPECT_EQ(got.masked_lm_positions, exact.masked_lm_positions);
    EXPECT_EQ(got.masked_lm_ids, exact.masked_lm_ids);
    EXPECT_NE(error_of([&] { Hdf5ShardReader(golden(t.hdf5), t.T, 80); })
                  .find("dataset masked_lm_positions: expected shape (N, 80)"),
              std::string::npos);
    // Narrower than the shard stays an error either way.
    EXPECT_NE(error_of([&] { Hdf5ShardReader(golden(t.hdf5), t.T, 20, true); })
                  .find("expected shape (N, 20)"),
              std::string::npos);
}

// NVIDIA's pretraining_dataset.__getitem__ from a decoded record: labels -1 except at used
// positions (README section 1).
TEST(Hdf5Shard, DecodedRecordsGiveNvidiaLoaderView) {
    std::ifstream in(golden("hdf5/reader_view_sample.jsonl"));
    ASSERT_TRUE(in) << "missing reader_view_sample.jsonl";
    std::string line;
    int lines = 0;
    while (std::getline(in, line)) {
        const json j = json::parse(line);
        const std::string file = j.at("file");
        const int P = j.at("max_pred_length");
        const int T = static_cast<int>(j.at("input_ids").size());
        const Hdf5ShardArrays a = read_hdf5_shard(golden("hdf5/" + file), T, P);
        PretrainingRecord r;
        const uint64_t index = j.at("index");
        decode_hdf5_record(a, index, file, r);
        std::vector<int64_t> labels(static_cast<size_t>(T), -1);
        for (int k = 0; k < P; ++k)
            if (r.masked_lm_weights[k] == 1.0f)
                labels[r.masked_lm_positions[k]] = r.masked_lm_ids[k];
        const std::string at = file + " record " + std::to_string(index);
        EXPECT_EQ(r.input_ids, j.at("input_ids").get<std::vector<int64_t>>()) << at;
        EXPECT_EQ(r.segment_ids, j.at("segment_ids").get<std::vector<int64_t>>()) << at;
        EXPECT_EQ(r.input_mask, j.at("input_mask").get<std::vector<int64_t>>()) << at;
        EXPECT_EQ(labels, j.at("masked_lm_labels").get<std::vector<int64_t>>()) << at;
        EXPECT_EQ(r.next_sentence_labels, j.at("next_sentence_labels").get<int64_t>()) << at;
        ++lines;
    }
    EXPECT_EQ(lines, 4);
}

// datasets.json (h5py's own report of the goldens) against hdf5_layout() and h5py_guess_chunk.
TEST(Hdf5Shard, GoldenLayoutMatchesDatasetsJsonAndGuessChunk) {
    std::ifstream in(golden("hdf5/datasets.json"));
    ASSERT_TRUE(in);
    const json all = json::parse(in);
    for (const Twin& t : kTwins) {
        const std::string name = std::filesystem::path(t.hdf5).filename().string();
        const json& want = all.at(name).at("datasets");
        const auto layout = hdf5_layout(golden(t.hdf5));
        ASSERT_EQ(layout.size(), 6u) << name;
        for (const auto& l : layout) {
            const json& w = want.at(l.name);
            const std::string at = name + ":" + l.name;
            EXPECT_EQ(l.type_name, w.at("dtype").get<std::string>() + " LE") << at;
            EXPECT_EQ(l.shape, w.at("shape").get<std::vector<uint64_t>>()) << at;
            EXPECT_EQ(l.chunks, w.at("chunks").get<std::vector<uint64_t>>()) << at;
            EXPECT_EQ(l.deflate_level, w.at("compression_opts").get<int>()) << at;
            EXPECT_EQ(l.shuffle, w.at("shuffle").get<bool>()) << at;
            EXPECT_EQ(l.fletcher32, w.at("fletcher32").get<bool>()) << at;
            EXPECT_EQ(l.num_filters, 1) << at;
            EXPECT_TRUE(l.fill_time_alloc) << at;
            EXPECT_TRUE(l.fill_value_default) << at;
            const size_t item = l.type_name.rfind("int32", 0) == 0 ? 4 : 1;
            EXPECT_EQ(h5py_guess_chunk(l.shape, item), l.chunks) << at << ": guess_chunk";
        }
    }
}

TEST(Hdf5Shard, GuessChunkFollowsH5pyLoop) {
    // Small datasets stay whole; big ones halve axis 0, then 1, ... until near the target size.
    EXPECT_EQ(h5py_guess_chunk({10, 20}, 4), (std::vector<uint64_t>{10, 20}));
    EXPECT_EQ(h5py_guess_chunk({1868, 128}, 4), (std::vector<uint64_t>{234, 16}));
    EXPECT_EQ(h5py_guess_chunk({1, 1}, 1), (std::vector<uint64_t>{1, 1}));
    EXPECT_EQ(h5py_guess_chunk({0, 20}, 4), (std::vector<uint64_t>{256, 10}));  // 0 taken as 1024
    EXPECT_EQ(h5py_guess_chunk({0}, 1), (std::vector<uint64_t>{1024}));
    const auto big = h5py_guess_chunk({4000000, 512}, 4);  // 8 GB: chunks capped below 1 MiB
    EXPECT_LT(big[0] * big[1] * 4, 1024u * 1024u);
}

// The six arrays equal, value for value.
void expect_same_values(const Hdf5ShardArrays& a, const Hdf5ShardArrays& b) {
    EXPECT_EQ(a.input_ids, b.input_ids);
    EXPECT_EQ(a.input_mask, b.input_mask);
    EXPECT_EQ(a.segment_ids, b.segment_ids);
    EXPECT_EQ(a.masked_lm_positions, b.masked_lm_positions);
    EXPECT_EQ(a.masked_lm_ids, b.masked_lm_ids);
    EXPECT_EQ(a.next_sentence_labels, b.next_sentence_labels);
}

// Writes the golden TFRecord's records with Hdf5ShardWriter: the same values, dtypes, shapes,
// chunks and filters as the golden .hdf5 (NVIDIA's writer via h5py).
TEST(Hdf5Shard, WriterReproducesGoldenDatasets) {
    TempDir dir;
    for (const Twin& t : kTwins) {
        const std::string out = dir.file(std::filesystem::path(t.hdf5).filename().string());
        Hdf5ShardWriter w(out, t.T, t.P);
        for (const auto& r : tfrecord_records(golden(t.tfrecord), t.T, t.P)) w.write(r);
        EXPECT_FALSE(std::filesystem::exists(out)) << "visible before close()";
        w.close();
        const auto got = hdf5_layout(out), want = hdf5_layout(golden(t.hdf5));
        ASSERT_EQ(got.size(), want.size());
        for (size_t k = 0; k < got.size(); ++k) {
            EXPECT_EQ(got[k].name, want[k].name);
            EXPECT_EQ(got[k].type_name, want[k].type_name) << got[k].name;
            EXPECT_EQ(got[k].shape, want[k].shape) << got[k].name;
            EXPECT_EQ(got[k].chunks, want[k].chunks) << got[k].name;
            EXPECT_EQ(got[k].deflate_level, want[k].deflate_level) << got[k].name;
            EXPECT_EQ(got[k].num_filters, want[k].num_filters) << got[k].name;
            EXPECT_EQ(got[k].fill_time_alloc, want[k].fill_time_alloc) << got[k].name;
        }
        expect_same_values(read_hdf5_shard(out, t.T, t.P), read_hdf5_shard(golden(t.hdf5), t.T, t.P));
        for (const auto& e : std::filesystem::directory_iterator(dir.path))
            EXPECT_EQ(e.path().string().find(".tmp."), std::string::npos) << e.path();
    }
}

Hdf5ShardArrays small_shard() {
    Hdf5ShardArrays a;
    a.records = 2;
    a.max_seq_length = 6;
    a.max_predictions_per_seq = 3;
    a.input_ids = {101, 7, 103, 102, 0, 0, 101, 8, 9, 102, 11, 102};
    a.input_mask = {1, 1, 1, 1, 0, 0, 1, 1, 1, 1, 1, 1};
    a.segment_ids = {0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 1, 1};
    a.masked_lm_positions = {2, 0, 0, 1, 2, 4};
    a.masked_lm_ids = {5, 0, 0, 7, 8, 9};
    a.next_sentence_labels = {0, 1};
    return a;
}

TEST(Hdf5Shard, WeightsAreOneBeforeTheFirstZeroPosition) {
    Hdf5ShardArrays a = small_shard();
    PretrainingRecord r;
    decode_hdf5_record(a, 0, "x", r);
    EXPECT_EQ(r.masked_lm_weights, (std::vector<float>{1, 0, 0}));
    decode_hdf5_record(a, 1, "x", r);  // no padding: all predictions used
    EXPECT_EQ(r.masked_lm_weights, (std::vector<float>{1, 1, 1}));
    EXPECT_EQ(r.next_sentence_labels, 1);
    // A position after the first 0 is ignored, as NVIDIA's loader ignores it (n = first 0).
    a.masked_lm_positions = {2, 0, 3, 0, 1, 2};
    decode_hdf5_record(a, 0, "x", r);
    EXPECT_EQ(r.masked_lm_weights, (std::vector<float>{1, 0, 0}));
    decode_hdf5_record(a, 1, "x", r);  // first entry 0: no predictions at all
    EXPECT_EQ(r.masked_lm_weights, (std::vector<float>{0, 0, 0}));
}

// A position listed twice counts once, with its last id, as NVIDIA's loader's one label per
// token (masked_lm_labels[positions] = ids keeps the last write); found by QA (NVIDIA's loader
// counted 670 labels where bertbench's eval counted 671 predictions).
TEST(Hdf5Shard, ARepeatedPositionCountsOnceWithItsLastId) {
    Hdf5ShardArrays a = small_shard();
    a.masked_lm_positions = {2, 3, 2, 1, 1, 0};
    a.masked_lm_ids = {5, 6, 7, 8, 9, 4};
    PretrainingRecord r;
    decode_hdf5_record(a, 0, "x", r);
    EXPECT_EQ(r.masked_lm_weights, (std::vector<float>{0, 1, 1}));  // position 2: id 7 alone
    EXPECT_EQ(r.masked_lm_ids[2], 7);
    decode_hdf5_record(a, 1, "x", r);  // positions 1, 1, then padding: the second 1 kept
    EXPECT_EQ(r.masked_lm_weights, (std::vector<float>{0, 1, 0}));
    EXPECT_EQ(r.masked_lm_ids[1], 9);
}

TEST(Hdf5Shard, BadValuesNameRecordDatasetAndValue) {
    struct Case {
        const char* dataset;
        std::function<void(Hdf5ShardArrays&)> spoil;
        const char* got;
    };
    const Case cases[] = {
        {"input_ids", [](Hdf5ShardArrays& a) { a.input_ids[7] = -3; }, "got -3"},
        {"input_mask", [](Hdf5ShardArrays& a) { a.input_mask[8] = 2; }, "got 2"},
        {"segment_ids", [](Hdf5ShardArrays& a) { a.segment_ids[9] = -1; }, "got -1"},
        {"masked_lm_positions", [](Hdf5ShardArrays& a) { a.masked_lm_positions[4] = 6; }, "got 6"},
        {"masked_lm_positions", [](Hdf5ShardArrays& a) { a.masked_lm_positions[4] = -2; },
         "got -2"},
        {"masked_lm_ids", [](Hdf5ShardArrays& a) { a.masked_lm_ids[5] = -9; }, "got -9"},
        {"next_sentence_labels", [](Hdf5ShardArrays& a) { a.next_sentence_labels[1] = 3; },
         "got 3"},
    };
    for (const Case& c : cases) {
        Hdf5ShardArrays a = small_shard();
        c.spoil(a);
        PretrainingRecord r;
        decode_hdf5_record(a, 0, "f.hdf5: record 0", r);  // record 0 is untouched
        const std::string msg = error_of([&] { decode_hdf5_record(a, 1, "f.hdf5: record 1", r); });
        expect_one_line(msg);
        EXPECT_NE(msg.find("f.hdf5: record 1: dataset " + std::string(c.dataset)),
                  std::string::npos)
            << msg;
        EXPECT_NE(msg.find(c.got), std::string::npos) << msg;
    }
    Hdf5ShardArrays a = small_shard();
    a.masked_lm_ids.pop_back();
    const std::string msg = error_of([&] { check_hdf5_arrays("f.hdf5", a); });
    EXPECT_NE(msg.find("dataset masked_lm_ids: expected 6 values"), std::string::npos) << msg;
}

TEST(Hdf5Shard, SchemaCheckNamesDatasetExpectedAndFound) {
    auto good = [] {
        std::array<Hdf5DatasetInfo, 6> info;
        for (size_t k = 0; k < 6; ++k) {
            info[k].found = info[k].is_integer = true;
            info[k].type_size = static_cast<size_t>(kHdf5Datasets[k].bytes);
            info[k].type_name = fmt::format("int{}", kHdf5Datasets[k].bytes * 8);
            info[k].dims = {10, k < 3 ? 128u : 20u};
        }
        info[5].dims = {10};
        return info;
    };
    EXPECT_EQ(check_hdf5_schema("f.h5", good(), 128, 20), 10u);
    auto info = good();
    info[4].found = false;
    std::string msg = error_of([&] { check_hdf5_schema("f.h5", info, 128, 20); });
    EXPECT_NE(msg.find("f.h5: dataset masked_lm_ids: expected an int32 dataset"), std::string::npos)
        << msg;
    info = good();
    info[1].type_name = "float32";
    info[1].is_integer = false;
    info[1].type_size = 4;
    msg = error_of([&] { check_hdf5_schema("f.h5", info, 128, 20); });
    EXPECT_NE(msg.find("dataset input_mask: expected an integer dtype (NVIDIA's writer: int8, i1), "
                       "got float32"),
              std::string::npos)
        << msg;
    info = good();  // an integer of 3 bytes (libhdf5 allows any precision): no reader converts it
    info[0].type_name = "int24";
    info[0].type_size = 3;
    msg = error_of([&] { check_hdf5_schema("f.h5", info, 128, 20); });
    EXPECT_NE(msg.find("dataset input_ids: expected an integer dtype"), std::string::npos) << msg;
    info = good();  // any width and sign of integer: NVIDIA's loader casts every dataset to int64
    info[0].type_size = 8;
    info[1].type_size = 2;
    EXPECT_EQ(check_hdf5_schema("f.h5", info, 128, 20), 10u);
    info = good();
    info[0].dims = {10, 512};
    msg = error_of([&] { check_hdf5_schema("f.h5", info, 128, 20); });
    EXPECT_NE(msg.find("dataset input_ids: expected shape (N, 128)"), std::string::npos) << msg;
    EXPECT_NE(msg.find("got (10, 512)"), std::string::npos) << msg;
    info = good();
    info[5].dims = {9};
    msg = error_of([&] { check_hdf5_schema("f.h5", info, 128, 20); });
    EXPECT_NE(msg.find("dataset next_sentence_labels: expected 10 records"), std::string::npos)
        << msg;
    info = good();
    info[5].dims = {10, 1};
    msg = error_of([&] { check_hdf5_schema("f.h5", info, 128, 20); });
    EXPECT_NE(msg.find("dataset next_sentence_labels: expected shape (N,), got (10, 1)"),
              std::string::npos)
        << msg;
}

// A shard in other integer types (libhdf5 converts on writing and reading): `types` per dataset in
// kHdf5Datasets order.
template <typename T>
void write_values(hid_t file, const char* name, hid_t type, hid_t mem, const std::vector<T>& v,
                  std::vector<hsize_t> dims) {
    const hid_t space = H5Screate_simple(static_cast<int>(dims.size()), dims.data(), nullptr);
    const hid_t ds = H5Dcreate2(file, name, type, space, H5P_DEFAULT, H5P_DEFAULT, H5P_DEFAULT);
    H5Dwrite(ds, mem, H5S_ALL, H5S_ALL, H5P_DEFAULT, v.data());
    H5Dclose(ds);
    H5Sclose(space);
}
std::string write_shard_as(const TempDir& dir, const std::string& name, const Hdf5ShardArrays& a,
                           const std::array<hid_t, 6>& types) {
    const std::string path = dir.file(name);
    const hid_t f = H5Fcreate(path.c_str(), H5F_ACC_TRUNC, H5P_DEFAULT, H5P_DEFAULT);
    const hsize_t n = a.records, T = static_cast<hsize_t>(a.max_seq_length),
                  P = static_cast<hsize_t>(a.max_predictions_per_seq);
    write_values(f, "input_ids", types[0], H5T_NATIVE_INT32, a.input_ids, {n, T});
    // libhdf5 converts no integer to an enum: an enum's bytes are written as they are
    const auto int8_as = [](hid_t type) { return H5Tget_class(type) == H5T_ENUM ? type : H5T_NATIVE_INT8; };
    write_values(f, "input_mask", types[1], int8_as(types[1]), a.input_mask, {n, T});
    write_values(f, "segment_ids", types[2], int8_as(types[2]), a.segment_ids, {n, T});
    write_values(f, "masked_lm_positions", types[3], H5T_NATIVE_INT32, a.masked_lm_positions, {n, P});
    write_values(f, "masked_lm_ids", types[4], H5T_NATIVE_INT32, a.masked_lm_ids, {n, P});
    write_values(f, "next_sentence_labels", types[5], int8_as(types[5]), a.next_sentence_labels, {n});
    H5Fclose(f);
    return path;
}

// NVIDIA's loader casts every dataset to int64 (pretraining_dataset.__getitem__), so a shard in
// int64 (h5py's default for Python ints), uint16 or big-endian types trains as its i4/i1 twin:
// the same values. A value beyond what the reader's int8/int32 hold reads as the type's limit,
// which the value checks refuse.
TEST(Hdf5Shard, OtherIntegerTypesReadAsTheirValues) {
    TempDir dir;
    const Twin& t = kTwins[0];
    const Hdf5ShardArrays want = read_hdf5_shard(golden(t.hdf5), t.T, t.P);
    const std::string wide = write_shard_as(dir, "wide.h5", want,
                                            {H5T_STD_I64LE, H5T_STD_U16LE, H5T_STD_I64BE,
                                             H5T_STD_U32LE, H5T_STD_I64LE, H5T_STD_U8LE});
    expect_same_values(read_hdf5_shard(wide, t.T, t.P), want);

    Hdf5ShardArrays big = small_shard();  // record 1's mask 300, ids 2^40: saturated, refused
    std::vector<int64_t> mask(big.input_mask.begin(), big.input_mask.end()),
        ids(big.input_ids.begin(), big.input_ids.end());
    mask[static_cast<size_t>(big.max_seq_length) + 2] = 300;
    ids[static_cast<size_t>(big.max_seq_length) + 1] = int64_t{1} << 40;
    const std::string path = write_shard_as(dir, "big.h5", big,
                                            {H5T_STD_I64LE, H5T_STD_I16LE, H5T_STD_I8LE,
                                             H5T_STD_I32LE, H5T_STD_I32LE, H5T_STD_I8LE});
    {
        const hid_t f = H5Fopen(path.c_str(), H5F_ACC_RDWR, H5P_DEFAULT);
        for (const auto& [name, v] : {std::pair{"input_ids", &ids}, std::pair{"input_mask", &mask}}) {
            const hid_t ds = H5Dopen2(f, name, H5P_DEFAULT);
            H5Dwrite(ds, H5T_NATIVE_INT64, H5S_ALL, H5S_ALL, H5P_DEFAULT, v->data());
            H5Dclose(ds);
        }
        H5Fclose(f);
    }
    const Hdf5ShardArrays sat = read_hdf5_shard(path, big.max_seq_length, big.max_predictions_per_seq);
    PretrainingRecord r;
    decode_hdf5_record(sat, 0, "big.h5: record 0", r);
    const std::string msg = error_of([&] { decode_hdf5_record(sat, 1, "big.h5: record 1", r); });
    EXPECT_NE(msg.find("record 1: dataset input_"), std::string::npos) << msg;
    EXPECT_EQ(sat.input_ids[static_cast<size_t>(big.max_seq_length) + 1], INT32_MAX);
    EXPECT_EQ(sat.input_mask[static_cast<size_t>(big.max_seq_length) + 2], INT8_MAX);
}

// h5py stores a numpy bool array as a one-byte enum {FALSE: 0, TRUE: 1}; NVIDIA's loader reads it
// as 0 and 1 (np.asarray(...).astype(np.int64)), and so does the reader, for the one-byte datasets.
TEST(Hdf5Shard, H5pyBoolMasksReadAsZeroAndOne) {
    TempDir dir;
    const Twin& t = kTwins[0];
    const Hdf5ShardArrays want = read_hdf5_shard(golden(t.hdf5), t.T, t.P);
    const hid_t boolean = H5Tenum_create(H5T_NATIVE_INT8);
    for (const signed char v : {0, 1}) H5Tenum_insert(boolean, v ? "TRUE" : "FALSE", &v);
    const std::string path = write_shard_as(dir, "bool.h5", want,
                                            {H5T_STD_I32LE, boolean, boolean, H5T_STD_I32LE, H5T_STD_I32LE, boolean});
    expect_same_values(read_hdf5_shard(path, t.T, t.P), want);
    // A bool is no token id, and another enum no bool.
    const hid_t other = H5Tenum_create(H5T_NATIVE_INT8);
    for (const signed char v : {0, 1}) H5Tenum_insert(other, v ? "YES" : "NO", &v);
    const std::string ids = write_shard_as(dir, "bool_ids.h5", small_shard(),
                                           {boolean, H5T_STD_I8LE, H5T_STD_I8LE, H5T_STD_I32LE, H5T_STD_I32LE, other});
    H5Tclose(boolean);
    H5Tclose(other);
    const std::string msg = error_of([&] { read_hdf5_shard(ids, 0, 0); });
    EXPECT_NE(msg.find("dataset input_ids: expected an integer dtype (NVIDIA's writer: int32, i4), got bool "
                       "(h5py's enum FALSE/TRUE)"),
              std::string::npos)
        << msg;
}

// Files made with libhdf5 directly, one defect each.
void write_dataset(hid_t file, const char* name, hid_t type, std::vector<hsize_t> dims) {
    size_t n = H5Tget_size(type);
    for (hsize_t d : dims) n *= d;
    write_values(file, name, type, type, std::vector<char>(n, 0), dims);  // zeros
}

// The six datasets with N = 4, T = 8, P = 2, except `skip` and with `override` replacing one.
std::string make_file(const TempDir& dir, const std::string& name, const std::string& skip,
                      const std::string& odd_name = "", hid_t odd_type = -1,
                      std::vector<hsize_t> odd_dims = {}) {
    const std::string path = dir.file(name);
    const hid_t f = H5Fcreate(path.c_str(), H5F_ACC_TRUNC, H5P_DEFAULT, H5P_DEFAULT);
    for (const auto& s : kHdf5Datasets) {
        if (s.name == skip) continue;
        hid_t type = s.bytes == 4 ? H5T_STD_I32LE : H5T_STD_I8LE;
        std::vector<hsize_t> dims{4};
        if (s.width == Hdf5DatasetSpec::Width::seq) dims.push_back(8);
        if (s.width == Hdf5DatasetSpec::Width::pred) dims.push_back(2);
        if (s.name == odd_name) {
            if (odd_type >= 0) type = odd_type;
            if (!odd_dims.empty()) dims = odd_dims;
        }
        write_dataset(f, s.name, type, dims);
    }
    H5Fclose(f);
    return path;
}

TEST(Hdf5Shard, BadFilesAreOneLineErrorsNamingFileAndDataset) {
    TempDir dir;
    auto expect = [&](const std::string& path, const std::vector<std::string>& parts) {
        const std::string msg = error_of([&] { read_hdf5_shard(path, 8, 2); });
        expect_one_line(msg);
        EXPECT_NE(msg.find(path), std::string::npos) << msg;
        for (const auto& p : parts) EXPECT_NE(msg.find(p), std::string::npos) << msg;
    };
    // A valid file of zeros reads (and is then rejected per record: no real token, see reader).
    EXPECT_EQ(read_hdf5_shard(make_file(dir, "ok.h5", ""), 8, 2).records, 4u);

    write_file_atomic(dir.file("text.hdf5"), "input_ids,input_mask\n1,2\n");
    expect(dir.file("text.hdf5"), {"expected an HDF5 file", "no HDF5 signature"});
    expect(dir.file("absent.hdf5"), {"no such file"});
    expect(make_file(dir, "missing.h5", "segment_ids"), {"dataset segment_ids", "got none"});
    expect(make_file(dir, "float.h5", "", "input_mask", H5T_IEEE_F32LE),
           {"dataset input_mask: expected an integer dtype (NVIDIA's writer: int8, i1), got float32"});
    // Other integer widths and signs read (converted), as NVIDIA's loader reads them.
    EXPECT_EQ(read_hdf5_shard(make_file(dir, "i64.h5", "", "input_ids", H5T_STD_I64LE), 8, 2).records, 4u);
    EXPECT_EQ(read_hdf5_shard(make_file(dir, "u8.h5", "", "segment_ids", H5T_STD_U8LE), 8, 2).records, 4u);
    expect(make_file(dir, "wide.h5", "", "masked_lm_ids", -1, {4, 3}),
           {"dataset masked_lm_ids: expected shape (N, 2)", "got (4, 3)",
            "--max_predictions_per_seq"});
    expect(make_file(dir, "rows.h5", "", "input_mask", -1, {5, 8}),
           {"dataset input_mask: expected 4 records", "got 5"});
    expect(make_file(dir, "rank.h5", "", "input_ids", -1, {32}),
           {"dataset input_ids: expected shape (N, 8)", "got (32,)"});
    // A big-endian int32 is still an int32: libhdf5 converts it.
    EXPECT_EQ(
        read_hdf5_shard(make_file(dir, "be.h5", "", "input_ids", H5T_STD_I32BE), 8, 2).records, 4u);
    // A group where a dataset should be.
    {
        const std::string path = make_file(dir, "group.h5", "next_sentence_labels");
        const hid_t f = H5Fopen(path.c_str(), H5F_ACC_RDWR, H5P_DEFAULT);
        H5Gclose(H5Gcreate2(f, "next_sentence_labels", H5P_DEFAULT, H5P_DEFAULT, H5P_DEFAULT));
        H5Fclose(f);
        expect(path, {"dataset next_sentence_labels: expected a dataset, got a group"});
    }
    // Truncated copies of a golden shard: the header cut, or the data.
    const std::string bytes = read_file(golden("hdf5/public_128_s12345_d2.hdf5"));
    for (size_t keep : {size_t(4), size_t(1000), bytes.size() / 2, bytes.size() - 1}) {
        const std::string path = dir.file("trunc_" + std::to_string(keep) + ".hdf5");
        write_file_atomic(path, bytes.substr(0, keep));
        const std::string msg = error_of([&] { read_hdf5_shard(path, 128, 20); });
        expect_one_line(msg);
        EXPECT_NE(msg.find(path), std::string::npos) << msg;
        EXPECT_NE(msg.find("[hdf5]"), std::string::npos) << msg;
    }
}

// A record of 4 tokens with one masked position, for writers of seq 4 and 2 predictions.
PretrainingRecord four_token_record() {
    PretrainingRecord r;
    r.input_ids = {101, 5, 6, 102};
    r.input_mask = {1, 1, 1, 1};
    r.segment_ids = {0, 0, 1, 1};
    r.masked_lm_positions = {1, 0};
    r.masked_lm_ids = {9, 0};
    r.masked_lm_weights = {1, 0};
    return r;
}

TEST(Hdf5Shard, WriterRejectsRecordsTheSchemaCannotHold) {
    TempDir dir;
    Hdf5ShardWriter w(dir.file("w.hdf5"), 4, 2);
    const PretrainingRecord r = four_token_record();
    w.write(r);
    auto bad = [&](auto spoil, const std::string& part) {
        PretrainingRecord b = r;
        spoil(b);
        const std::string msg = error_of([&] { w.write(b); });
        expect_one_line(msg);
        EXPECT_NE(msg.find("w.hdf5: record 1"), std::string::npos) << msg;
        EXPECT_NE(msg.find(part), std::string::npos) << msg;
    };
    bad([](PretrainingRecord& b) { b.masked_lm_weights = {0.5f, 0}; }, "masked_lm_weights");
    bad([](PretrainingRecord& b) { b.masked_lm_positions = {1, 2}; }, "masked_lm_weights");
    bad([](PretrainingRecord& b) { b.masked_lm_weights = {0, 1}; }, "masked_lm_weights");
    bad([](PretrainingRecord& b) { b.input_mask[0] = 300; }, "feature input_mask");
    bad([](PretrainingRecord& b) { b.input_ids[1] = int64_t(1) << 32; }, "feature input_ids");
    bad([](PretrainingRecord& b) { b.input_ids.pop_back(); }, "expected 4 values, got 3");
    EXPECT_EQ(w.records(), 1u);
    w.close();
    const Hdf5ShardArrays a = read_hdf5_shard(dir.file("w.hdf5"), 4, 2);
    PretrainingRecord back;
    decode_hdf5_record(a, 0, "w", back);
    EXPECT_EQ(back.input_ids, r.input_ids);
    EXPECT_EQ(back.masked_lm_weights, r.masked_lm_weights);
}

// stage() writes the shard under its temporary only; commit_together renames it. A staged file
// dropped in between (an error on another output of the same run) leaves neither file (QA4 §4).
TEST(Hdf5Shard, WriterPublishesOnlyWhenCommitted) {
    TempDir dir;
    const auto names = [&] {
        std::vector<std::string> out;
        for (const auto& e : std::filesystem::directory_iterator(dir.path))
            out.push_back(e.path().filename().string());
        return out;
    };
    const PretrainingRecord r = four_token_record();
    {
        Hdf5ShardWriter w(dir.file("a.hdf5"), 4, 2);
        w.write(r);
        const std::unique_ptr<AtomicFile> staged = w.stage();
        const auto during = names();
        ASSERT_EQ(during.size(), 1u);
        EXPECT_TRUE(during[0].starts_with("a.hdf5.tmp.")) << during[0];
        EXPECT_GT(std::filesystem::file_size(dir.file(during[0])), 0u);
    }
    EXPECT_TRUE(names().empty());
    Hdf5ShardWriter w(dir.file("a.hdf5"), 4, 2);
    w.write(r);
    std::vector<std::unique_ptr<AtomicFile>> files;
    files.push_back(w.stage());
    commit_together(files);
    EXPECT_EQ(names(), std::vector<std::string>{"a.hdf5"});
    EXPECT_EQ(read_hdf5_shard(dir.file("a.hdf5"), 4, 2).records, 1u);
    EXPECT_EQ(w.records(), 1u);
}

TEST(Hdf5Shard, EmptyShardRoundTrips) {
    TempDir dir;
    Hdf5ShardWriter w(dir.file("empty.h5"), 128, 20);
    w.close();
    EXPECT_EQ(read_hdf5_shard(dir.file("empty.h5"), 128, 20).records, 0u);
    // h5py chunks and compresses empty datasets too, guessing a zero-length dim as 1024: what
    // h5py 3.7's create_dataset(data=<(0, 20) int32>, compression='gzip') gives is (256, 10).
    for (const auto& l : hdf5_layout(dir.file("empty.h5"))) {
        EXPECT_EQ(l.shape[0], 0u) << l.name;
        EXPECT_EQ(l.deflate_level, 4) << l.name;
        std::vector<uint64_t> want = {1024};
        if (l.shape.size() == 2) want = l.shape[1] == 128 ? std::vector<uint64_t>{l.name == "input_ids" ? 128u : 256u, 32}
                                                            : std::vector<uint64_t>{256, 10};
        EXPECT_EQ(l.chunks, want) << l.name;
    }
}

TEST(Hdf5Shard, ExtensionDecidesTheFormat) {
    EXPECT_TRUE(is_hdf5_path("a/b.hdf5"));
    EXPECT_TRUE(is_hdf5_path("B.H5"));
    EXPECT_TRUE(is_hdf5_path("x.Hdf5"));
    EXPECT_FALSE(is_hdf5_path("a.tfrecord"));
    EXPECT_FALSE(is_hdf5_path("h5"));
    EXPECT_FALSE(is_hdf5_path("a.hdf5.tmp"));
    EXPECT_FALSE(is_hdf5_path("part-00001-of-00010"));
}

}  // namespace
}  // namespace bertbench::io
