// TensorFlow tensor bundles: every real checkpoint in ../shared/golden/tf_checkpoint reads with each
// tensor's stored bytes matching listing.json's sha256 (computed by the SHA-256 below, independent
// of the code under test) and the table layout matching the listing; the writer re-creates
// keras_bert_tiny byte for byte and round-trips every dtype; hostile files (truncations, every
// single-byte flip of an index, wrong magic, CRC errors, shard mismatches, missing files) give
// one-line Errors naming the file, never a crash (this also runs under ASan + UBSan).
#include "io/tf_bundle.hpp"

#include <gtest/gtest.h>

#include <cstring>
#include <filesystem>
#include <nlohmann/json.hpp>

#include "core/error.hpp"
#include "core/fs.hpp"
#include "io/io_test_util.hpp"
#include "test_util.hpp"

namespace bertbench::io {
namespace {

using bertbench::testing::error_of;
using bertbench::testing::TmpDir;
using nlohmann::json;

// ---- SHA-256 (FIPS 180-4), written for this test only ----
std::string sha256_hex(const uint8_t* data, size_t n) {
    static const uint32_t k[64] = {
        0x428a2f98, 0x71374491, 0xb5c0fbcf, 0xe9b5dba5, 0x3956c25b, 0x59f111f1, 0x923f82a4,
        0xab1c5ed5, 0xd807aa98, 0x12835b01, 0x243185be, 0x550c7dc3, 0x72be5d74, 0x80deb1fe,
        0x9bdc06a7, 0xc19bf174, 0xe49b69c1, 0xefbe4786, 0x0fc19dc6, 0x240ca1cc, 0x2de92c6f,
        0x4a7484aa, 0x5cb0a9dc, 0x76f988da, 0x983e5152, 0xa831c66d, 0xb00327c8, 0xbf597fc7,
        0xc6e00bf3, 0xd5a79147, 0x06ca6351, 0x14292967, 0x27b70a85, 0x2e1b2138, 0x4d2c6dfc,
        0x53380d13, 0x650a7354, 0x766a0abb, 0x81c2c92e, 0x92722c85, 0xa2bfe8a1, 0xa81a664b,
        0xc24b8b70, 0xc76c51a3, 0xd192e819, 0xd6990624, 0xf40e3585, 0x106aa070, 0x19a4c116,
        0x1e376c08, 0x2748774c, 0x34b0bcb5, 0x391c0cb3, 0x4ed8aa4a, 0x5b9cca4f, 0x682e6ff3,
        0x748f82ee, 0x78a5636f, 0x84c87814, 0x8cc70208, 0x90befffa, 0xa4506ceb, 0xbef9a3f7,
        0xc67178f2};
    uint32_t h[8] = {0x6a09e667, 0xbb67ae85, 0x3c6ef372, 0xa54ff53a,
                     0x510e527f, 0x9b05688c, 0x1f83d9ab, 0x5be0cd19};
    std::vector<uint8_t> m(data, data + n);
    m.push_back(0x80);
    while (m.size() % 64 != 56) m.push_back(0);
    const uint64_t bits = uint64_t(n) * 8;
    for (int i = 7; i >= 0; --i) m.push_back(uint8_t(bits >> (8 * i)));
    auto rotr = [](uint32_t x, int r) { return (x >> r) | (x << (32 - r)); };
    for (size_t off = 0; off < m.size(); off += 64) {
        uint32_t w[64];
        for (int i = 0; i < 16; ++i)
            w[i] = uint32_t(m[off + 4 * i]) << 24 | uint32_t(m[off + 4 * i + 1]) << 16 |
                   uint32_t(m[off + 4 * i + 2]) << 8 | m[off + 4 * i + 3];
        for (int i = 16; i < 64; ++i) {
            const uint32_t s0 = rotr(w[i - 15], 7) ^ rotr(w[i - 15], 18) ^ (w[i - 15] >> 3);
            const uint32_t s1 = rotr(w[i - 2], 17) ^ rotr(w[i - 2], 19) ^ (w[i - 2] >> 10);
            w[i] = w[i - 16] + s0 + w[i - 7] + s1;
        }
        uint32_t a = h[0], b = h[1], c = h[2], d = h[3], e = h[4], f = h[5], g = h[6], hh = h[7];
        for (int i = 0; i < 64; ++i) {
            const uint32_t t1 = hh + (rotr(e, 6) ^ rotr(e, 11) ^ rotr(e, 25)) +
                                ((e & f) ^ (~e & g)) + k[i] + w[i];
            const uint32_t t2 = (rotr(a, 2) ^ rotr(a, 13) ^ rotr(a, 22)) + ((a & b) ^ (a & c) ^ (b & c));
            hh = g;
            g = f;
            f = e;
            e = d + t1;
            d = c;
            c = b;
            b = a;
            a = t1 + t2;
        }
        const uint32_t add[8] = {a, b, c, d, e, f, g, hh};
        for (int i = 0; i < 8; ++i) h[i] += add[i];
    }
    std::string out;
    for (uint32_t v : h) out += fmt::format("{:08x}", v);
    return out;
}

TEST(TfBundle, Sha256KnownAnswers) {  // the checker itself: FIPS 180-4 examples
    EXPECT_EQ(sha256_hex(reinterpret_cast<const uint8_t*>("abc"), 3),
              "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad");
    const std::string two = "abcdbcdecdefdefgefghfghighijhijkijkljklmklmnlmnomnopnopq";
    EXPECT_EQ(sha256_hex(reinterpret_cast<const uint8_t*>(two.data()), two.size()),
              "248d6a61d20638b8e5c026930c3e6039a33ce45964ff2167f6ecedd419db06c1");
}

std::string dir_of(const std::string& set) {
    return testing::golden("tf_checkpoint/" + set);
}
json listing() {
    return json::parse(read_file(testing::golden("tf_checkpoint/listing.json")));
}
std::string prefix_of(const std::string& set, const json& s) {
    return dir_of(set) + "/" + s.at("prefix").get<std::string>();
}

// ---- the goldens ----

TEST(TfBundle, EveryGoldenSetMatchesListing) {
    const json all = listing();
    ASSERT_GE(all.size(), 6u);
    int snappy_sets = 0, string_tensors = 0, checked = 0;
    for (const auto& [set, s] : all.items()) {
        SCOPED_TRACE(set);
        const TfBundleReader r(prefix_of(set, s));
        EXPECT_EQ(r.header().num_shards, s["header"]["num_shards"].get<int>());
        EXPECT_EQ(r.header().producer, s["header"]["version"]["producer"].get<int>());
        EXPECT_EQ(r.header().big_endian, s["header"]["endianness"].get<int>() == 1);
        // Table layout as the listing states it.
        const json& t = s["table"];
        EXPECT_EQ(r.table().file_size, t["file_size"].get<uint64_t>());
        EXPECT_EQ(r.table().metaindex.offset, t["metaindex"][0].get<uint64_t>());
        EXPECT_EQ(r.table().metaindex.size, t["metaindex"][1].get<uint64_t>());
        EXPECT_EQ(r.table().index.offset, t["index"][0].get<uint64_t>());
        EXPECT_EQ(r.table().index.size, t["index"][1].get<uint64_t>());
        EXPECT_EQ(r.table().metaindex.type, t["block_types"][0].get<int>());
        EXPECT_EQ(r.table().index.type, t["block_types"][1].get<int>());
        ASSERT_EQ(r.table().data_blocks.size(), t["data_blocks"].size());
        for (size_t i = 0; i < r.table().data_blocks.size(); ++i) {
            const SstBlockInfo& b = r.table().data_blocks[i];
            const json& want = t["data_blocks"][i];
            EXPECT_EQ(b.offset, want["offset"].get<uint64_t>());
            EXPECT_EQ(b.size, want["size"].get<uint64_t>());
            EXPECT_EQ(b.uncompressed_size, want["uncompressed_size"].get<uint64_t>());
            EXPECT_EQ(b.type, want["block_type"].get<int>());
            EXPECT_EQ(b.entries, want["entries"].get<uint64_t>());
            EXPECT_EQ(b.num_restarts, want["num_restarts"].get<uint32_t>());
            EXPECT_EQ(b.index_key, want["index_key"].get<std::string>());
            snappy_sets += b.type == 1;
        }
        // Every tensor: metadata, and for full sets the stored bytes' sha256 and CRC.
        ASSERT_EQ(r.entries().size(), s["tensors"].size());
        for (const json& want : s["tensors"]) {
            const std::string name = want["name"];
            SCOPED_TRACE(name);
            const TfTensorEntry* e = r.find(name);
            ASSERT_NE(e, nullptr);
            EXPECT_EQ(static_cast<int>(e->dtype), want["dtype_enum"].get<int>());
            EXPECT_EQ(tf_dtype_name(e->dtype), want["dtype"].get<std::string>());
            EXPECT_EQ(e->shape, want["shape"].get<std::vector<int64_t>>());
            EXPECT_EQ(e->shard_id, want["shard_id"].get<int>());
            EXPECT_EQ(e->offset, want["offset"].get<uint64_t>());
            EXPECT_EQ(e->size, want["size"].get<uint64_t>());
            EXPECT_EQ(e->crc32c_masked, want["crc32c_masked"].get<uint32_t>());
            if (s["index_only"].get<bool>()) continue;
            const std::vector<uint8_t> raw = r.read_raw(*e);
            EXPECT_EQ(sha256_hex(raw.data(), raw.size()), want["sha256"].get<std::string>());
            string_tensors += e->dtype == TfDType::string;
            ++checked;
        }
    }
    EXPECT_GE(snappy_sets, 2);     // serving_half_plus_two_cpu, serving_half_plus_two_tf2_cpu
    EXPECT_GE(string_tensors, 2);  // the DT_STRING tensors' own checksums were verified
    EXPECT_EQ(checked, 139 + 5 + 9 + 4 + 1);
}

TEST(TfBundle, KerasBertTinyValues) {
    const TfBundleReader r(dir_of("keras_bert_tiny") + "/bert_model.ckpt");
    const TfTensorEntry* beta = r.find("bert/embeddings/LayerNorm/beta");
    ASSERT_NE(beta, nullptr);
    std::vector<float> v(4);
    r.read_f32(*beta, v);
    // listing.json preview: -5.77865966988611e-06, 5.7542583817848936e-06, ...
    EXPECT_FLOAT_EQ(v[0], -5.77865966988611e-06f);
    EXPECT_FLOAT_EQ(v[1], 5.7542583817848936e-06f);
    const TfTensorEntry* step = r.find("global_step");
    ASSERT_NE(step, nullptr);
    EXPECT_EQ(step->dtype, TfDType::int64);
    EXPECT_TRUE(step->shape.empty());
    EXPECT_EQ(r.read_i64(*step), std::vector<int64_t>{20});
    // A float read of an int64 tensor, a wrong destination size: Errors naming the tensor.
    EXPECT_NE(error_of([&] { r.read_f32(*step, v); }).find("global_step"), std::string::npos);
    std::vector<float> three(3);
    EXPECT_NE(error_of([&] { r.read_f32(*beta, three); }).find("expected 3 elements"),
              std::string::npos);
}

TEST(TfBundle, StringTensorIsListedAndNotReadAsNumbers) {
    const TfBundleReader r(dir_of("serving_tf_text_regression") + "/variables");
    ASSERT_EQ(r.entries().size(), 1u);
    const TfTensorEntry& e = r.entries()[0];
    EXPECT_EQ(e.dtype, TfDType::string);
    EXPECT_EQ(r.read_raw(e).size(), 927u);  // CRC (FORMAT.md 6.2) verified inside
    std::vector<float> f(1);
    const std::string err = error_of([&] { r.read_f32(e, f); });
    EXPECT_NE(err.find("DT_STRING"), std::string::npos) << err;
    EXPECT_NE(error_of([&] { r.read_i64(e); }).find("DT_STRING"), std::string::npos);
}

TEST(TfBundle, IndexOnlyGoogleBertBaseListsAllAndNamesTheMissingShard) {
    const std::string prefix = dir_of("google_bert_chinese_base_index") + "/bert_model.ckpt";
    const TfBundleReader r(prefix);
    ASSERT_EQ(r.entries().size(), 206u);
    const TfTensorEntry* emb = r.find("bert/embeddings/word_embeddings");
    ASSERT_NE(emb, nullptr);
    EXPECT_EQ(emb->shape, (std::vector<int64_t>{21128, 768}));
    EXPECT_EQ(r.table().data_blocks.size(), 1u);
    std::vector<float> out(emb->numel());
    const std::string err = error_of([&] { r.read_f32(*emb, out); });
    EXPECT_NE(err.find(prefix + ".data-00000-of-00001"), std::string::npos) << err;
    EXPECT_NE(err.find("bert/embeddings/word_embeddings"), std::string::npos) << err;
    EXPECT_EQ(err.find('\n'), std::string::npos) << err;
}

// ---- writer ----

TEST(TfBundle, WriterRecreatesKerasBertTinyByteForByte) {
    const std::string prefix = dir_of("keras_bert_tiny") + "/bert_model.ckpt";
    const TfBundleReader r(prefix);
    std::vector<const TfTensorEntry*> by_offset;
    for (const auto& e : r.entries()) by_offset.push_back(&e);
    std::sort(by_offset.begin(), by_offset.end(),
              [](auto* a, auto* b) { return a->offset < b->offset; });
    TfBundleWriter w("unused");
    for (const TfTensorEntry* e : by_offset) {
        const std::vector<uint8_t> raw = r.read_raw(*e);
        w.add_copy(e->name, e->dtype, e->shape, raw.data(), raw.size());
    }
    const TfBundleWriter::Images img = w.build();
    EXPECT_EQ(img.data, read_file(prefix + ".data-00000-of-00001"));
    EXPECT_EQ(img.index, read_file(prefix + ".index"));  // header, entries, blocks, footer
}

// FORMAT.md's table invariants on a written index with many data blocks (small block size).
TEST(TfBundle, SstableBuilderKeepsTheFormatInvariants) {
    std::vector<SstEntry> kv{{"", "header"}};
    for (int i = 0; i < 300; ++i)
        kv.push_back({fmt::format("bert/encoder/layer_{:03d}/w{}", i, i % 7),
                      std::string(size_t(i % 50), char('a' + i % 26))});
    const std::string img = build_sstable(kv, {/*block_size=*/1024, /*restart_interval=*/16});
    SstInfo info;
    const std::vector<SstEntry> back = parse_sstable(img, "mem", &info);
    ASSERT_EQ(back.size(), kv.size());
    for (size_t i = 0; i < kv.size(); ++i) {
        EXPECT_EQ(back[i].key, kv[i].key);
        EXPECT_EQ(back[i].value, kv[i].value);
    }
    ASSERT_GT(info.data_blocks.size(), 3u);
    EXPECT_EQ(info.metaindex.size, 8u);  // the empty block: 00000000 01000000
    EXPECT_EQ(img.substr(info.metaindex.offset, 8), std::string("\0\0\0\0\1\0\0\0", 8));
    EXPECT_EQ(info.index.num_restarts, info.index.entries);  // restart interval 1
    size_t k = 0;
    uint64_t expect_offset = 0;
    for (size_t b = 0; b < info.data_blocks.size(); ++b) {
        const SstBlockInfo& bi = info.data_blocks[b];
        EXPECT_EQ(bi.offset, expect_offset);  // blocks back to back, each with a 5-byte trailer
        expect_offset = bi.offset + bi.size + 5;
        EXPECT_EQ(bi.type, 0);
        EXPECT_EQ(bi.num_restarts, (bi.entries + 15) / 16);
        k += bi.entries;
        // separator >= last key of this block and < first key of the next
        EXPECT_GE(bi.index_key, kv[k - 1].key);
        if (k < kv.size()) {
            EXPECT_LT(bi.index_key, kv[k].key);
        }
        if (b + 1 < info.data_blocks.size()) {  // cut right after the estimate reached 1024
            EXPECT_LT(bi.size, 1024u + 100u);
        }
    }
    EXPECT_EQ(k, kv.size());
    EXPECT_EQ(info.metaindex.offset, expect_offset);
    EXPECT_EQ(img.size(), info.index.offset + info.index.size + 5 + 48);
}

TEST(TfBundle, WriterRoundTripEveryDtypeThroughFiles) {
    TmpDir dir;
    const std::string prefix = dir.file("model.ckpt-7");
    std::vector<float> f32(3 * 5);
    for (size_t i = 0; i < f32.size(); ++i) f32[i] = float(i) * 0.37f - 2.0f;
    f32[3] = -0.0f;
    const std::vector<uint16_t> f16 = {0x3C00, 0xC000, 0x0001, 0x7BFF, 0x7C00};  // 1 -2 2^-24 65504 inf
    const std::vector<uint16_t> bf16 = {0x3F80, 0xC040};                         // 1, -3
    const std::vector<double> f64 = {1.0 / 3.0};
    const std::vector<int32_t> i32 = {-5};
    const int64_t step = 123456789012345;
    {
        TfBundleWriter w(prefix);
        w.add("z/kernel", TfDType::float32, {3, 5}, f32.data(), f32.size() * 4);
        w.add("a/half", TfDType::half, {5}, f16.data(), 10);
        w.add("m/bf16", TfDType::bfloat16, {1, 2}, bf16.data(), 4);
        w.add("d/double", TfDType::float64, {}, f64.data(), 8);
        w.add("global_step", TfDType::int64, {}, &step, 8);
        w.add("i/int32", TfDType::int32, {1}, i32.data(), 4);
        w.add("empty", TfDType::float32, {0, 4}, nullptr, 0);
        EXPECT_NE(error_of([&] { w.add("bad", TfDType::float32, {2}, f32.data(), 4); })
                      .find("expected 8 bytes"), std::string::npos);
        EXPECT_NE(error_of([&] { w.add("z/kernel", TfDType::float32, {1}, f32.data(), 4); })
                      .find("added twice"), std::string::npos);
        w.finish();
    }
    EXPECT_FALSE(std::filesystem::exists(prefix + ".index.tmp." + std::to_string(getpid())));
    const TfBundleReader r(prefix);
    ASSERT_TRUE(TfBundleReader::is_bundle(prefix));
    ASSERT_EQ(r.entries().size(), 7u);
    EXPECT_EQ(r.header().num_shards, 1);
    EXPECT_EQ(r.header().producer, 1);
    // keys sorted, data in insertion order
    EXPECT_EQ(r.entries()[0].name, "a/half");
    EXPECT_EQ(r.find("z/kernel")->offset, 0u);
    EXPECT_EQ(r.find("a/half")->offset, 60u);
    std::vector<float> got(15);
    r.read_f32(*r.find("z/kernel"), got);
    EXPECT_EQ(std::memcmp(got.data(), f32.data(), 60), 0);  // bit-exact, -0.0 included
    std::vector<float> h(5);
    r.read_f32(*r.find("a/half"), h);
    EXPECT_EQ(h[0], 1.0f);
    EXPECT_EQ(h[1], -2.0f);
    EXPECT_EQ(h[2], std::ldexp(1.0f, -24));
    EXPECT_EQ(h[3], 65504.0f);
    EXPECT_TRUE(std::isinf(h[4]));
    std::vector<float> b(2);
    r.read_f32(*r.find("m/bf16"), b);
    EXPECT_EQ(b, (std::vector<float>{1.0f, -3.0f}));
    std::vector<float> d(1);
    r.read_f32(*r.find("d/double"), d);
    EXPECT_EQ(d[0], float(1.0 / 3.0));
    EXPECT_EQ(r.read_i64(*r.find("global_step")), std::vector<int64_t>{step});
    EXPECT_EQ(r.read_i64(*r.find("i/int32")), std::vector<int64_t>{-5});
    EXPECT_EQ(r.find("empty")->size, 0u);
    EXPECT_TRUE(r.read_raw(*r.find("empty")).empty());
}

// The files a user may name for a checkpoint: its .index and its data shard name the prefix; a
// shard-like name without an .index beside it, or a directory, names itself.
TEST(TfBundle, PrefixOfTheIndexOrADataShard) {
    TmpDir dir;
    const std::string prefix = dir.file("model.ckpt-7");
    const float x = 1.5f;
    TfBundleWriter w(prefix);
    w.add("w", TfDType::float32, {1}, &x, 4);
    w.finish();
    EXPECT_EQ(TfBundleReader::prefix_of(prefix + ".index"), prefix);
    EXPECT_EQ(TfBundleReader::prefix_of(prefix + ".data-00000-of-00001"), prefix);
    EXPECT_EQ(TfBundleReader::prefix_of(prefix), prefix);
    const std::string lone = dir.file("other.data-00000-of-00001");
    write_file_atomic(lone, "x");
    EXPECT_EQ(TfBundleReader::prefix_of(lone), lone);
    const std::string odd = prefix + ".data-0000x-of-00001";
    write_file_atomic(odd, "x");
    EXPECT_EQ(TfBundleReader::prefix_of(odd), odd);
    std::filesystem::create_directories(dir.file("d.data-00000-of-00001"));
    EXPECT_EQ(TfBundleReader::prefix_of(dir.file("d.data-00000-of-00001")), dir.file("d.data-00000-of-00001"));
}

// A big-endian bundle (header endianness BIG): the CRC covers the stored bytes, values are swapped.
TEST(TfBundle, BigEndianBundleIsSwappedAfterTheCrc) {
    const std::vector<float> want = {1.5f, -2.25f, 3e-7f};
    std::vector<uint8_t> be(12);
    for (size_t i = 0; i < 3; ++i) {
        uint32_t u;
        std::memcpy(&u, &want[i], 4);
        for (int k = 0; k < 4; ++k) be[4 * i + k] = uint8_t(u >> (8 * (3 - k)));
    }
    const int64_t step = 0x0102030405060708;
    uint8_t step_be[8];
    for (int k = 0; k < 8; ++k) step_be[k] = uint8_t(uint64_t(step) >> (8 * (7 - k)));
    TfBundleWriter w("mem");
    w.add("w", TfDType::float32, {3}, be.data(), 12);
    w.add("step", TfDType::int64, {}, step_be, 8);
    TfBundleWriter::Images img = w.build();
    std::vector<SstEntry> kv = parse_sstable(img.index, "mem");
    kv[0].value = std::string("\x08\x01\x10\x01\x1a\x02\x08\x01", 8);  // endianness BIG
    const TfBundleReader r = TfBundleReader::from_memory(build_sstable(kv), {img.data}, "BE");
    EXPECT_TRUE(r.header().big_endian);
    std::vector<float> got(3);
    r.read_f32(*r.find("w"), got);
    EXPECT_EQ(got, want);
    EXPECT_EQ(r.read_i64(*r.find("step")), std::vector<int64_t>{step});
}

// ---- hostile input ----

struct Bundle {
    std::string index, data;
};
Bundle keras_tiny() {
    const std::string p = dir_of("keras_bert_tiny") + "/bert_model.ckpt";
    return {read_file(p + ".index"), read_file(p + ".data-00000-of-00001")};
}

// Opens an in-memory bundle and reads every tensor; returns the Error message ("" if none).
std::string open_and_read_all(const Bundle& b) {
    return error_of([&] {
        const TfBundleReader r = TfBundleReader::from_memory(b.index, {b.data}, "LABEL");
        for (const auto& e : r.entries())
            if (e.dtype != TfDType::string) (void)r.read_raw(e);
    });
}

void expect_one_line_naming(const std::string& err, const std::string& name) {
    EXPECT_NE(err.find(name), std::string::npos) << err;
    EXPECT_EQ(err.find('\n'), std::string::npos) << err;
}

TEST(TfBundle, TruncatedIndexAtEveryLength) {
    const Bundle b = keras_tiny();
    for (size_t n = 0; n < b.index.size(); ++n) {
        const std::string err = open_and_read_all({b.index.substr(0, n), b.data});
        ASSERT_FALSE(err.empty()) << "truncated to " << n;
        expect_one_line_naming(err, "LABEL.index");
    }
}

TEST(TfBundle, EverySingleByteFlipOfTheIndexIsCaughtOrHarmless) {
    for (const char* set : {"keras_bert_tiny", "serving_half_plus_two_cpu",
                            "serving_half_plus_two_tf2_cpu"}) {
        const json all = listing();
        const std::string p = prefix_of(set, all[set]);
        const Bundle b{read_file(p + ".index"), read_file(p + ".data-00000-of-00001")};
        int caught = 0;
        for (size_t i = 0; i < b.index.size(); ++i)
            for (const uint8_t x : {0x01, 0x80, 0xff}) {
                Bundle m = b;
                m.index[i] = static_cast<char>(m.index[i] ^ x);
                const std::string err = open_and_read_all(m);
                if (!err.empty()) {
                    ++caught;
                    expect_one_line_naming(err, "LABEL.index");
                }
            }
        // Only the footer's zero padding (and the unused tail of its handle varints) may change
        // without an error: every block byte is under a CRC.
        EXPECT_GE(caught, static_cast<int>(3 * (b.index.size() - 40))) << set;
    }
}

TEST(TfBundle, CorruptionsNameFileAndWhat) {
    const Bundle b = keras_tiny();
    ASSERT_EQ(open_and_read_all(b), "");
    {  // wrong magic
        Bundle m = b;
        m.index[m.index.size() - 1] = 0;
        expect_one_line_naming(open_and_read_all(m), "magic");
    }
    {  // a byte of the data block: the block CRC catches it
        Bundle m = b;
        m.index[100] ^= 0x20;
        const std::string err = open_and_read_all(m);
        expect_one_line_naming(err, "data block 0: block CRC-32C mismatch");
    }
    {  // a byte of tensor data: the tensor's CRC catches it, naming tensor and shard
        Bundle m = b;
        m.data[20] ^= 0x01;  // inside bert/embeddings/LayerNorm/beta/adam_m (offset 16)
        const std::string err = open_and_read_all(m);
        expect_one_line_naming(err, "LABEL.data-00000-of-00001: tensor \"bert/embeddings/LayerNorm/beta/adam_m\"");
        EXPECT_NE(err.find("data CRC-32C mismatch"), std::string::npos) << err;
    }
    {  // a truncated data shard
        const std::string err = open_and_read_all({b.index, b.data.substr(0, 8000)});
        expect_one_line_naming(err, "LABEL.data-00000-of-00001");
        EXPECT_NE(err.find("truncated"), std::string::npos) << err;
    }
    {  // no data shard at all
        const std::string err = error_of([&] {
            const auto r = TfBundleReader::from_memory(b.index, {}, "LABEL");
            (void)r.read_raw(r.entries()[0]);
        });
        expect_one_line_naming(err, "LABEL.data-00000-of-00001");
    }
}

// Rebuilds keras_bert_tiny's index with one value changed (the blocks stay valid).
std::string with_value(const std::string& index, const std::string& key, const std::string& value) {
    std::vector<SstEntry> kv = parse_sstable(index, "golden");
    bool found = false;
    for (auto& e : kv)
        if (e.key == key) {
            e.value = value;
            found = true;
        }
    EXPECT_TRUE(found) << key;
    return build_sstable(kv);
}

TEST(TfBundle, HostileEntriesAndHeaders) {
    const Bundle b = keras_tiny();
    const std::string beta = "bert/embeddings/LayerNorm/beta";
    struct Case {
        std::string key, value, want;
    };
    const std::vector<Case> cases = {
        // header: num_shards 2 -> the shard file name changes; 0 shards; a newer min_consumer
        {"", std::string("\x08\x00\x1a\x02\x08\x01", 6), "num_shards: expected >= 1, found 0"},
        {"", std::string("\x08\x01\x1a\x04\x08\x01\x10\x05", 8), "min_consumer"},
        {"", std::string("\x08\x01\x1a\x04\x08\x01\x18\x01", 8), "bad_consumers"},
        {"", std::string("\x08\x01\x10\x07", 4), "endianness"},
        // entries: shard_id past num_shards, size != numel x 4, negative dim, bad dtype,
        // offset past the shard, truncated proto, unknown rank, wrong wire type
        {beta, std::string("\x08\x01\x12\x04\x12\x02\x08\x04\x18\x01\x28\x10", 12),
         "shard_id: expected 0..0 (num_shards 1 in the header), found 1"},
        {beta, std::string("\x08\x01\x12\x04\x12\x02\x08\x04\x28\x11", 10),
         "size: expected 16 bytes"},
        // 2^62 floats: the byte count is printed unwrapped (it used to read "expected 0 bytes")
        {beta,
         std::string("\x08\x01\x12\x0c\x12\x0a\x08\x80\x80\x80\x80\x80\x80\x80\x80\x40\x28\x10",
                     18),
         "size: expected more than 2^64 bytes (4611686018427387904 elements of DT_FLOAT x 4 "
         "bytes), found 16"},
        {beta, std::string("\x08\x01\x12\x0d\x12\x0b\x08\xff\xff\xff\xff\xff\xff\xff\xff\xff\x01", 17),
         "expected a size >= 0"},
        {beta, std::string("\x08\x63\x12\x00\x28\x04", 6), "dtype: expected a TensorFlow DataType"},
        {beta, std::string("\x08\x01\x12\x04\x12\x02\x08\x04\x20\x80\x80\x04\x28\x10", 14),
         "truncated"},
        {beta, std::string("\x08\x01\x12\x05\x12\x02\x08", 7), "BundleEntryProto"},
        {beta, std::string("\x08\x01\x12\x02\x18\x01", 6), "unknown_rank"},
        {beta, std::string("\x0d\x01\x00\x00\x00", 5), "expected wire type 0"},
        {beta, std::string("\x08\x01\x12\x04\x12\x02\x08\x04\x28\x10\x35\x00\x00\x00\x00", 15),
         "data CRC-32C mismatch"},
    };
    for (const Case& c : cases) {
        SCOPED_TRACE(c.want);
        const std::string err = open_and_read_all({with_value(b.index, c.key, c.value), b.data});
        expect_one_line_naming(err, c.want);
        EXPECT_NE(err.find("LABEL"), std::string::npos) << err;
    }
    // The header key missing altogether.
    std::vector<SstEntry> kv = parse_sstable(b.index, "golden");
    kv.erase(kv.begin());
    expect_one_line_naming(open_and_read_all({build_sstable(kv), b.data}),
                           "expected the bundle header (empty key) as the first entry");
}

TEST(TfBundle, FilesMissingOrMisnamed) {
    TmpDir dir;
    // no .index
    const std::string err = error_of([&] { TfBundleReader r(dir.file("model.ckpt")); });
    expect_one_line_naming(err, dir.file("model.ckpt.index"));
    EXPECT_FALSE(TfBundleReader::is_bundle(dir.file("model.ckpt")));
    // the data shard named for another shard count than the header's
    const std::string src = dir_of("keras_bert_tiny") + "/bert_model.ckpt";
    write_file_atomic(dir.file("m.index"), read_file(src + ".index"));
    write_file_atomic(dir.file("m.data-00000-of-00002"), read_file(src + ".data-00000-of-00001"));
    const TfBundleReader r(dir.file("m"));
    std::vector<float> v(4);
    const std::string e2 = error_of([&] { r.read_f32(*r.find("bert/embeddings/LayerNorm/beta"), v); });
    expect_one_line_naming(e2, dir.file("m.data-00000-of-00001"));
    EXPECT_NE(e2.find("found m.data-00000-of-00002 instead"), std::string::npos) << e2;
    // a header that names 2 shards beside a single-shard data file
    write_file_atomic(dir.file("two.index"),
                      with_value(read_file(src + ".index"), "", std::string("\x08\x02\x1a\x02\x08\x01", 6)));
    write_file_atomic(dir.file("two.data-00000-of-00001"), read_file(src + ".data-00000-of-00001"));
    const TfBundleReader two(dir.file("two"));
    EXPECT_EQ(two.header().num_shards, 2);
    const std::string e4 = error_of([&] { (void)two.read_raw(two.entries()[0]); });
    expect_one_line_naming(e4, dir.file("two.data-00000-of-00002"));
    EXPECT_NE(e4.find("shard 0 of 2"), std::string::npos) << e4;
    EXPECT_NE(e4.find("found two.data-00000-of-00001 instead"), std::string::npos) << e4;
    // a truncated shard on disk
    write_file_atomic(dir.file("m.data-00000-of-00001"), read_file(src + ".data-00000-of-00001").substr(0, 10));
    const std::string e3 = error_of([&] { r.read_f32(*r.find("bert/embeddings/LayerNorm/beta/adam_v"), v); });
    expect_one_line_naming(e3, "truncated");
    // an index that is a directory
    std::filesystem::create_directories(dir.file("d.index"));
    expect_one_line_naming(error_of([&] { TfBundleReader x(dir.file("d")); }), "d.index");
}

}  // namespace
}  // namespace bertbench::io
