// safetensors: round trip of every dtype, a hand-made file in the reference layout, and hostile
// files (truncations, targeted header corruptions, a bounded random-mutation loop run under ASan):
// each must give a one-line Error naming the file, never a crash or an out-of-bounds read.
#include "io/safetensors.hpp"

#include <gtest/gtest.h>
#include <unistd.h>

#include <cstring>
#include <filesystem>
#include <functional>
#include <random>

#include "core/error.hpp"
#include "test_util.hpp"
#include "core/fs.hpp"
#include "io/crc32c.hpp"

namespace bertbench::io {
namespace {

using bertbench::testing::error_of;
using bertbench::testing::TmpDir;

// A safetensors image built by hand: 8-byte length, JSON header, data.
std::string image(const std::string& header, const std::string& data) {
    std::string s(8, '\0');
    const uint64_t n = header.size();
    std::memcpy(s.data(), &n, 8);
    return s + header + data;
}

std::string floats(std::initializer_list<float> v) {
    return std::string(reinterpret_cast<const char*>(std::data(v)), v.size() * 4);
}

TEST(Safetensors, RoundTripAllDtypesAndMetadata) {
    TmpDir dir;
    const std::string path = dir.file("a.safetensors");
    const std::vector<float> f32 = {1.5f, -2.0f, 3.25f, 0.0f, 1e-30f, -7.0f};
    const std::vector<double> f64 = {1.0 / 3.0, -1e300};
    const std::vector<int64_t> i64 = {-1, int64_t(1) << 40, 7};
    const std::vector<int32_t> i32 = {-5, 2147483647};
    const std::vector<uint8_t> u8 = {0, 1, 255};
    const std::vector<uint16_t> f16 = {0x3C00, 0xC000, 0x0001, 0x7BFF};  // 1, -2, 2^-24, 65504
    const std::vector<uint16_t> bf16 = {0x3F80, 0xC040};                 // 1, -3
    {
        SafetensorsWriter w(path);
        w.set_metadata("format", "pt");
        w.set_metadata("note", "quote \" and newline \n");
        w.add_f32("w", {2, 3}, f32);
        w.add_copy("d", DType::F64, {2}, f64.data(), 16);
        w.add_i64("step", {3}, i64);
        w.add_i32("ids", {2}, i32);
        w.add_copy("mask", DType::U8, {3}, u8.data(), 3);
        w.add_copy("half", DType::F16, {4}, f16.data(), 8);
        w.add_copy("bf", DType::BF16, {2}, bf16.data(), 4);
        w.add_f32("empty", {0, 5}, {});
        w.add_f32("scalar", {}, std::vector<float>{9.0f});
        EXPECT_THROW(w.add_f32("w", {1}, std::vector<float>{1}), Error);       // twice
        EXPECT_THROW(w.add_f32("bad", {4}, std::vector<float>{1, 2}), Error);  // size
        w.write();
    }
    EXPECT_EQ(std::distance(std::filesystem::directory_iterator(dir.path), {}), 1);  // no temp
    const std::string raw = read_file(path);
    uint64_t n;
    std::memcpy(&n, raw.data(), 8);
    EXPECT_EQ((8 + n) % 64, 0u) << "data section 64-byte aligned";

    const SafetensorsReader r(path);
    EXPECT_EQ(r.metadata().at("format"), "pt");
    EXPECT_EQ(r.metadata().at("note"), "quote \" and newline \n");
    EXPECT_EQ(r.tensors().size(), 9u);
    EXPECT_EQ(r.at("w").shape, (std::vector<int64_t>{2, 3}));
    EXPECT_EQ(r.read_f32("w"), f32);
    EXPECT_EQ(r.read_f32("d"), (std::vector<float>{float(1.0 / 3.0), -INFINITY}));
    EXPECT_EQ(r.read_i64("step"), i64);
    EXPECT_EQ(r.read_i64("ids"), (std::vector<int64_t>{-5, 2147483647}));
    EXPECT_EQ(r.read_i64("mask"), (std::vector<int64_t>{0, 1, 255}));
    EXPECT_EQ(r.read_f32("half"), (std::vector<float>{1.0f, -2.0f, 0x1p-24f, 65504.0f}));
    EXPECT_EQ(r.read_f32("bf"), (std::vector<float>{1.0f, -3.0f}));
    EXPECT_TRUE(r.read_f32("empty").empty());
    EXPECT_EQ(r.at("scalar").numel(), 1u);
    EXPECT_EQ(r.read_f32("scalar"), std::vector<float>{9.0f});
    const std::span<const std::byte> b = r.bytes(r.at("ids"));
    EXPECT_EQ(b.size(), 8u);
    EXPECT_EQ(std::memcmp(b.data(), i32.data(), 8), 0);

    const std::string e1 = error_of([&] { r.read_f32("step"); });
    EXPECT_NE(e1.find("\"step\""), std::string::npos) << e1;
    EXPECT_NE(e1.find(path), std::string::npos) << e1;
    std::vector<float> small(2);
    EXPECT_NE(error_of([&] { r.read_f32("w", small); }).find("expected 2 elements"),
              std::string::npos);
    const std::string e2 = error_of([&] { r.at("nope"); });
    EXPECT_NE(e2.find("\"nope\""), std::string::npos) << e2;

    // Moving keeps the views valid (also for an in-memory image with a short-string buffer).
    SafetensorsReader moved = SafetensorsReader::from_bytes(raw, "mem");
    SafetensorsReader other = std::move(moved);
    EXPECT_EQ(other.read_f32("w"), f32);
}

TEST(Safetensors, ReadsHandMadeReferenceLayout) {
    // As written by huggingface/safetensors: unsorted keys, offsets relative to the data section.
    const std::string h =
        R"({"b":{"dtype":"F32","shape":[1],"data_offsets":[8,12]},)"
        R"("__metadata__":{"format":"pt"},"a":{"dtype":"F32","shape":[2],"data_offsets":[0,8]}})";
    const SafetensorsReader r = SafetensorsReader::from_bytes(image(h, floats({1, 2, 3})), "ref");
    EXPECT_EQ(r.read_f32("a"), (std::vector<float>{1, 2}));
    EXPECT_EQ(r.read_f32("b"), (std::vector<float>{3}));
    EXPECT_EQ(r.tensors()[0].name, "a");  // data order
}

// The writer records the data section's CRC-32C in __metadata__["data_crc32c"]; a changed tensor
// byte (a finite float that no other check would notice) is then one line naming the file, at the
// first tensor read (read_f32, read_i64 and bytes alike). A file without the key (another tool's,
// ReadsHandMadeReferenceLayout) is read as it is.
TEST(Safetensors, TheDataSectionsChecksumCatchesAChangedByte) {
    TmpDir dir;
    const std::string path = dir.file("c.safetensors");
    const std::vector<float> v = {1.f, 2.f, 3.f, 4.f};
    {
        SafetensorsWriter w(path);
        w.set_metadata("data_crc32c", "00000000");  // a caller's value is replaced by the real one
        w.add_f32("w", {4}, v);
        w.write();
    }
    const std::string raw = read_file(path);
    EXPECT_EQ(SafetensorsReader(path).metadata().at("data_crc32c"), fmt::format("{:08x}", crc32c_portable(v.data(), 16)));
    uint64_t n;
    std::memcpy(&n, raw.data(), 8);
    std::string flipped = raw;
    flipped[8 + n + 5] ^= 0x01;  // 2.f -> 2.0000002f: finite, plausible
    // opened (its header and names read) without a pass over the data; the first tensor read checks it
    const SafetensorsReader opened = SafetensorsReader::from_bytes(flipped, "c.safetensors");
    EXPECT_EQ(opened.tensors().size(), 1u);
    const std::string e = error_of([&] { opened.read_f32("w"); });
    EXPECT_NE(e.find("c.safetensors: data section: CRC-32C "), std::string::npos) << e;
    EXPECT_NE(e.find("corrupt"), std::string::npos) << e;
    EXPECT_EQ(e.find('\n'), std::string::npos) << e;
    for (const auto& read : std::vector<std::function<void(const SafetensorsReader&)>>{
             [](const SafetensorsReader& r) { r.read_i64("w"); },
             [](const SafetensorsReader& r) { r.bytes(r.at("w")); }})
        EXPECT_NE(error_of([&] { read(SafetensorsReader::from_bytes(flipped, "c.safetensors")); })
                      .find("data section: CRC-32C "),
                  std::string::npos);
    // a malformed value is named as such
    const std::string h = R"({"__metadata__":{"data_crc32c":"xyz"},"a":{"dtype":"F32","shape":[1],"data_offsets":[0,4]}})";
    const std::string e2 = error_of([&] { SafetensorsReader::from_bytes(image(h, floats({1})), "m"); });
    EXPECT_NE(e2.find("m: __metadata__[\"data_crc32c\"]: expected 8 hex digits"), std::string::npos) << e2;
}

TEST(Safetensors, HostileFilesGiveErrorsNamingFileAndTensor) {
    const std::string d = floats({1, 2, 3});
    auto hdr = [](const std::string& a_offsets, const std::string& a_shape = "[2]",
                  const std::string& a_dtype = "\"F32\"") {
        return R"({"a":{"dtype":)" + a_dtype + R"(,"shape":)" + a_shape + R"(,"data_offsets":)" +
               a_offsets + R"(},"b":{"dtype":"F32","shape":[1],"data_offsets":[8,12]}})";
    };
    struct Case {
        std::string bytes, expect;
    };
    std::string huge_len(8, '\xff');
    std::string deep = "{\"a\":" + std::string(100000, '[') + std::string(100000, ']') + "}";
    const Case cases[] = {
        {"", "at least 8 bytes"},
        {huge_len + "{}", "header length"},
        {image("{}", "").substr(0, 9), "header length"},  // length 2, only 1 byte present
        {image("[1]", ""), "JSON object"},
        {image("{\"a\":", ""), "invalid JSON"},
        {image(deep, ""), "nested deeper"},
        {image(hdr("[0,8]", "[2]", "\"F33\""), d), "tensor \"a\": dtype"},
        {image(hdr("[0,8]", "[2]", "7"), d), "tensor \"a\": dtype"},
        {image(hdr("[0,8]", "[-2]"), d), "tensor \"a\": shape"},
        {image(hdr("[0,8]", "[2.0]"), d), "tensor \"a\": shape"},
        {image(hdr("[0,8]", "2"), d), "tensor \"a\": shape"},
        {image(hdr("[0,8]", "[4611686018427387904,4611686018427387904,4]"), d), "tensor \"a\""},
        {image(hdr("[8,0]"), d), "begin <= end"},
        {image(hdr("[0,8,9]"), d), "data_offsets"},
        {image(hdr("[-1,7]"), d), "data_offsets"},
        {image(hdr("[0,8]"), d.substr(0, 10)), "tensor \"b\": data_offsets"},  // truncated data
        {image(hdr("[0,4]"), d), "tensor \"a\": expected 8 bytes"},
        {image(R"({"a":{"dtype":"F32","shape":[2],"data_offsets":[0,8]},)"
               R"("b":{"dtype":"F32","shape":[1],"data_offsets":[4,8]}})",
               d.substr(0, 8)),
         "overlap tensor \"a\""},
        {image(hdr("[0,8]", "[2]").replace(hdr("[0,8]").find("[8,12]"), 6, "[12,16]"), d + d),
         "holes"},
        {image(hdr("[0,8]"), d + "xyz"), "trailing"},
        {image(R"({"__metadata__":{"k":1}})", ""), "__metadata__[\"k\"]"},
        {image(R"({"__metadata__":[1]})", ""), "__metadata__"},
        {image(R"({"a":[1]})", ""), "tensor \"a\""},
        // A name holding a JSON-escaped newline still gives a one-line message.
        {image(R"({"a\nb":{"dtype":"F32","shape":[2],"data_offsets":[0,4]}})", d.substr(0, 4)),
         "tensor \"a?b\": expected 8 bytes"},
    };
    for (const Case& c : cases) {
        const std::string e = error_of([&] { SafetensorsReader::from_bytes(c.bytes, "evil.st"); });
        ASSERT_FALSE(e.empty()) << "accepted a bad file; expected: " << c.expect;
        EXPECT_EQ(e.rfind("evil.st", 0), 0u) << e;
        EXPECT_EQ(e.find('\n'), std::string::npos) << e;
        EXPECT_NE(e.find(c.expect), std::string::npos) << "want '" << c.expect << "' in: " << e;
    }
    // Every truncation of a valid file is rejected.
    const std::string good = image(hdr("[0,8]"), d);
    ASSERT_NO_THROW(SafetensorsReader::from_bytes(good, "good"));
    for (size_t len = 0; len < good.size(); ++len)
        EXPECT_THROW(SafetensorsReader::from_bytes(good.substr(0, len), "cut"), Error) << len;
    // Files on disk: missing, empty, a directory.
    TmpDir dir;
    EXPECT_NE(error_of([&] { SafetensorsReader r(dir.file("missing")); }).find("missing"),
              std::string::npos);
    write_file_atomic(dir.file("empty"), "");
    EXPECT_NE(error_of([&] { SafetensorsReader r(dir.file("empty")); }).find("at least 8"),
              std::string::npos);
    EXPECT_THROW(SafetensorsReader r(dir.path.string()), Error);
    write_file_atomic(dir.file("cut"), good.substr(0, good.size() - 1));
    EXPECT_THROW(SafetensorsReader r(dir.file("cut")), Error);
}

// Bounded random mutation: every mutant is either rejected with Error or fully readable.
TEST(Safetensors, RandomMutationsNeverCrash) {
    TmpDir dir;
    const std::string path = dir.file("m.safetensors");
    {
        SafetensorsWriter w(path);
        w.set_metadata("k", "v");
        w.add_f32("x", {3, 2}, std::vector<float>{1, 2, 3, 4, 5, 6});
        w.add_i64("step", {1}, std::vector<int64_t>{5});
        w.add_copy("h", DType::F16, {2}, "\x00\x3c\x00\xc0", 4);
        w.write();
    }
    std::string good = read_file(path);
    // Drop the alignment padding so that mutations mostly hit meaningful header bytes.
    uint64_t n;
    std::memcpy(&n, good.data(), 8);
    std::string header = good.substr(8, n);
    while (!header.empty() && header.back() == ' ') header.pop_back();
    good = image(header, good.substr(8 + n));
    std::mt19937_64 rng(20261122);
    const char interesting[] = {'0', '1', '9', '-', '[',  ']',   '{',
                                '}', '"', ',', ':', '\0', '\xff'};
    int accepted = 0, rejected = 0;
    for (int iter = 0; iter < 3000; ++iter) {
        std::string m = good;
        const int edits = 1 + static_cast<int>(rng() % 3);
        for (int k = 0; k < edits; ++k) {
            const size_t pos = rng() % m.size();
            switch (rng() % 4) {
                case 0:
                    m[pos] = static_cast<char>(rng());
                    break;
                case 1:
                    m[pos] = interesting[rng() % sizeof(interesting)];
                    break;
                case 2:
                    m.erase(pos, 1 + rng() % 4);
                    break;
                default:
                    m.insert(pos, 1, interesting[rng() % sizeof(interesting)]);
                    break;
            }
            if (m.empty()) m = "x";
        }
        try {
            const SafetensorsReader r = SafetensorsReader::from_bytes(m, "mutant");
            for (const TensorInfo& t : r.tensors()) {
                ASSERT_LE(t.end, m.size());
                try {
                    (void)r.read_f32(t.name);
                } catch (const Error&) {
                    (void)r.read_i64(t.name);  // an integer tensor
                }
            }
            ++accepted;
        } catch (const Error& e) {
            ASSERT_EQ(std::string(e.what()).rfind("mutant", 0), 0u) << e.what();
            ++rejected;
        }
    }
    EXPECT_GT(rejected, 1000);
    EXPECT_GT(accepted, 10);  // e.g. edits inside metadata strings or tensor values
}

}  // namespace
}  // namespace bertbench::io
