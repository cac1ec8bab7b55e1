// PyTorch checkpoints (io/torch_checkpoint.hpp, io/pickle.hpp): files written in the test by the
// system torch (tests/io/torch_gen.py, python3-torch) in both of torch.save's formats read bit
// exactly against the fp32 values the same script dumps (fp16, bf16, fp64, a shared storage with
// two views at offsets, a transposed view, a Parameter, NVIDIA's dict with optimizer state and a
// DataLoader); pickles naming posix.system / builtins.eval (protocol 2: __builtin__.eval) refused
// without running them; the writer read back by torch.load(weights_only=True); crafted and
// randomly mutated files give one-line errors naming the file.
#include "io/torch_checkpoint.hpp"

#include <gtest/gtest.h>

#include <cstring>
#include <filesystem>
#include <limits>
#include <nlohmann/json.hpp>
#include <random>

#include "core/error.hpp"
#include "core/fs.hpp"
#include "io/pickle.hpp"
#include "test_util.hpp"

namespace bertbench::io {
namespace {

using namespace std::string_literals;
using bertbench::testing::error_of;
using bertbench::testing::TmpDir;
namespace fs = std::filesystem;

std::string source_dir() {
    const char* d = std::getenv("BB_SOURCE_DIR");
    return d ? d : ".";
}

// The generator's files, made once per test binary.
const TmpDir& generated() {
    static TmpDir dir("bb_torch");
    static const bool made = [] {
        const std::string cmd = "/usr/bin/python3 '" + source_dir() + "/tests/io/torch_gen.py' '" +
                                dir.path.string() + "' 2>&1";
        return std::system(cmd.c_str()) == 0;
    }();
    EXPECT_TRUE(made) << "tests/io/torch_gen.py failed (python3-torch installed? scripts/setup.sh)";
    return dir;
}

DType dtype_of(const std::string& torch_name) {
    if (torch_name == "torch.float16") return DType::F16;
    if (torch_name == "torch.bfloat16") return DType::BF16;
    if (torch_name == "torch.float64") return DType::F64;
    if (torch_name == "torch.int64") return DType::I64;
    return DType::F32;
}

// Every tensor of `path` against the script's manifest and fp32 dump, bit for bit.
void expect_matches(const TorchCheckpointReader& r, const std::string& manifest, const std::string& f32) {
    const nlohmann::json m = nlohmann::json::parse(read_file(manifest));
    const std::string want = read_file(f32);
    ASSERT_EQ(r.tensors().size(), m.size()) << r.path();
    size_t at = 0;
    for (size_t i = 0; i < m.size(); ++i) {
        const TorchTensor& t = r.tensors()[i];
        EXPECT_EQ(t.name, m[i]["name"].get<std::string>());
        EXPECT_EQ(t.shape, m[i]["shape"].get<std::vector<int64_t>>()) << t.name;
        EXPECT_EQ(t.dtype, dtype_of(m[i]["dtype"])) << t.name;
        if (!r.is_float(t)) continue;
        const std::vector<float> got = r.read_f32(t);
        ASSERT_LE(at + got.size() * 4, want.size()) << t.name;
        EXPECT_EQ(want.compare(at, got.size() * 4, reinterpret_cast<const char*>(got.data()), got.size() * 4), 0)
            << r.path() << ": tensor " << t.name << " differs from torch's fp32 values";
        at += got.size() * 4;
    }
    EXPECT_EQ(at, want.size()) << r.path();
}

TEST(TorchCheckpoint, BothFormatsReadBitExactly) {
    const TmpDir& g = generated();
    for (const char* fmt : {"zip", "legacy", "legacy_p4", "legacy_p5"}) {  // p4/p5: pickle protocols 4, 5
        SCOPED_TRACE(fmt);
        const TorchCheckpointReader r(g.file(std::string("basic_") + fmt + ".pt"));
        EXPECT_EQ(r.format(), std::string(fmt) == "zip" ? TorchFormat::zip : TorchFormat::legacy);
        EXPECT_EQ(r.state_dict_key(), "");
        EXPECT_TRUE(r.ignored().empty()) << r.ignored_summary();
        expect_matches(r, g.file("basic.json"), g.file("basic.f32"));
        // The two views share one storage at different offsets; the transposed one is strided.
        ASSERT_NE(r.find("view_a"), nullptr);
        EXPECT_EQ(r.find("view_a")->storage, r.find("view_b")->storage);
        EXPECT_EQ(r.find("view_a")->offset, 2);
        EXPECT_EQ(r.find("view_b")->offset, 4);
        EXPECT_FALSE(r.find("transposed")->contiguous);
        EXPECT_THROW((void)r.read_f32(*r.find("position_ids")), Error);
    }
}

TEST(TorchCheckpoint, NvidiaCheckpointKeepsTheModelAndReportsTheRest) {
    const TmpDir& g = generated();
    for (const char* c : {"nvidia", "nvidia_dl"})
        for (const char* fmt : {"zip", "legacy"}) {
            SCOPED_TRACE(std::string(c) + "_" + fmt);
            const TorchCheckpointReader r(g.file(std::string(c) + "_" + fmt + ".pt"));
            EXPECT_EQ(r.state_dict_key(), "model");
            expect_matches(r, g.file(std::string(c) + ".json"), g.file(std::string(c) + ".f32"));
            const std::string s = r.ignored_summary();
            EXPECT_NE(s.find("'optimizer' (2 tensors)"), std::string::npos) << s;
            EXPECT_NE(s.find("'master params' (2 tensors)"), std::string::npos) << s;
            EXPECT_NE(s.find("'epoch' (an int 1)"), std::string::npos) << s;
            EXPECT_NE(s.find(std::string(c) == "nvidia" ? "'data_loader' (None)"
                                                        : "torch.utils.data.dataloader.DataLoader"),
                      std::string::npos) << s;
        }
}

TEST(TorchCheckpoint, MaliciousGlobalsAreRefusedWithoutRunningThem) {
    const TmpDir& g = generated();
    const std::string marker = g.file("PWNED");
    for (const auto& [c, global] : {std::pair{"evil_system", "posix.system"}, {"evil_eval", "__builtin__.eval"}})
        for (const char* fmt : {"zip", "legacy"}) {
            const std::string path = g.file(std::string(c) + "_" + fmt + ".pt");
            const std::string e = error_of([&] { TorchCheckpointReader r(path); });
            EXPECT_EQ(e.rfind(path, 0), 0u) << e;
            EXPECT_NE(e.find(std::string("pickle global '") + global + "' refused"), std::string::npos) << e;
            EXPECT_NE(e.find("nothing in the file was run"), std::string::npos) << e;
            EXPECT_FALSE(fs::exists(marker));
        }
}

TEST(TorchCheckpoint, WrittenFileIsReadByTorchWeightsOnlyBitExactly) {
    TmpDir dir;
    const float nan_payload = std::bit_cast<float>(0x7fc01234u);
    const std::vector<float> a = {1.5f, -0.0f, std::numeric_limits<float>::denorm_min(), nan_payload,
                                  std::numeric_limits<float>::infinity(), 3.14159274f};
    const std::vector<float> b = {7.0f};
    const std::vector<float> empty;
    const std::string path = dir.file("out.pt");
    write_torch_checkpoint(path, {{"bert.encoder.layer.0.attention.self.query.weight", {2, 3}, a},
                                  {"cls.predictions.bias", {}, b},
                                  {"empty", {0, 4}, empty}});
    const TorchCheckpointReader r(path);
    ASSERT_EQ(r.tensors().size(), 3u);
    EXPECT_EQ(r.tensors()[0].shape, (std::vector<int64_t>{2, 3}));
    EXPECT_EQ(std::memcmp(r.read_f32(r.tensors()[0]).data(), a.data(), 24), 0);
    EXPECT_EQ(r.read_f32(r.tensors()[1]), b);
    const std::string script = dir.file("check.py");
    write_file_atomic(script, R"(import sys, torch
sd = torch.load(sys.argv[1], weights_only=True)
assert type(sd).__name__ == 'OrderedDict', type(sd)
with open(sys.argv[2], 'wb') as f:
    for k, t in sd.items():
        assert t.dtype == torch.float32 and t.is_contiguous(), k
        f.write(('%s %s\n' % (k, list(t.shape))).encode() + t.numpy().tobytes())
)");
    const std::string cmd = "/usr/bin/python3 " + script + " " + path + " " + dir.file("dump") + " 2>&1";
    ASSERT_EQ(std::system(cmd.c_str()), 0) << cmd;
    std::string want = "bert.encoder.layer.0.attention.self.query.weight [2, 3]\n";
    want.append(reinterpret_cast<const char*>(a.data()), 24);
    want += "cls.predictions.bias []\n";
    want.append(reinterpret_cast<const char*>(b.data()), 4);
    want += "empty [0, 4]\n";
    EXPECT_EQ(read_file(dir.file("dump")), want);
}

// A legacy-format file around a hand-written object pickle `obj` and storages `data` (each: an
// int64 count then the bytes), keys listed as given.
std::string legacy(const std::string& obj, const std::vector<std::string>& keys, const std::string& data) {
    std::string s = "\x80\x02\x8a\x0a\x6c\xfc\x9c\x46\xf9\x20\x6a\xa8\x50\x19."s;
    s += "\x80\x02M\xe9\x03."s;
    s += "\x80\x02}(X\x0d\x00\x00\x00little_endian\x88u."s;
    s += obj;
    pickle::Pickler k;
    k.mark();
    for (const std::string& key : keys) k.string(key);
    std::string kl = k.finish();  // MARK keys STOP: make it a list
    kl.insert(kl.size() - 1, "l");
    return s + kl + data;
}

// {name: _rebuild_tensor_v2(storage(key "0", FloatStorage, numel), offset, size, stride)}.
// With `view` = {offset, size}: torch <= 1.5's storage view of the root storage.
std::string one_tensor(int64_t numel, int64_t offset, std::vector<int64_t> size, std::vector<int64_t> stride,
                       const char* storage = "FloatStorage", std::vector<int64_t> view = {}) {
    pickle::Pickler p;
    p.mark();
    p.string("w");
    p.global("torch._utils", "_rebuild_tensor_v2");
    p.mark();
    p.mark();
    p.string("storage");
    p.global("torch", storage);
    p.string("0");
    p.string("cpu");
    p.integer(numel);
    if (!view.empty()) {
        p.mark();
        p.string("view0");
        p.integer(view[0]);
        p.integer(view[1]);
        p.tuple();
    }
    p.tuple();
    p.binpersid();
    p.integer(offset);
    p.mark();
    for (int64_t d : size) p.integer(d);
    p.tuple();
    p.mark();
    for (int64_t d : stride) p.integer(d);
    p.tuple();
    p.boolean(false);
    p.global("collections", "OrderedDict");
    p.empty_tuple();
    p.reduce();
    p.tuple();
    p.reduce();
    std::string s = p.finish();
    s.insert(s.size() - 1, "d");  // MARK key value DICT
    return s;
}

std::string storage_bytes(uint64_t count, size_t bytes) {
    std::string s(8, '\0');
    for (int k = 0; k < 8; ++k) s[size_t(k)] = char(count >> (8 * k));
    return s + std::string(bytes, '\x01');
}

TEST(TorchCheckpoint, HostileFilesGiveOneLineErrorsNamingTheFile) {
    const std::string ok = legacy(one_tensor(6, 0, {2, 3}, {3, 1}), {"0"}, storage_bytes(6, 24));
    ASSERT_EQ(TorchCheckpointReader::from_bytes(ok, "ok.pt").tensors().size(), 1u);
    // A legacy storage view (torch <= 1.5): elements [2, 5) of the root storage.
    std::string six;
    for (int i = 0; i < 6; ++i) {
        const float v = float(i);
        six.append(reinterpret_cast<const char*>(&v), 4);
    }
    const auto view = TorchCheckpointReader::from_bytes(
        legacy(one_tensor(6, 1, {2}, {1}, "FloatStorage", {2, 3}), {"0"}, storage_bytes(6, 0) + six), "view.pt");
    EXPECT_EQ(view.read_f32(view.tensors().at(0)), (std::vector<float>{3, 4}));
    struct Case {
        std::string bytes, expect;
    };
    const std::vector<Case> cases = {
        {legacy(one_tensor(6, 0, {2, 3}, {3, 1}), {"0"}, storage_bytes(uint64_t(1) << 62, 24)),
         "4611686018427387904 elements of 4 bytes declared, 24 bytes left"},
        {legacy(one_tensor(6, 4, {2, 3}, {3, 1}), {"0"}, storage_bytes(6, 24)), "reach element 9"},
        {legacy(one_tensor(1, 0, {int64_t(1) << 40}, {0}), {"0"}, storage_bytes(1, 4)),
         "an expanded tensor, stride 0"},
        {legacy(one_tensor(6, 0, {2, 3}, {3, 1}, "DoubleStorage"), {"0"}, storage_bytes(6, 24)),
         "6 elements of 8 bytes declared, 24 bytes left"},
        {legacy(one_tensor(6, 0, {2, 3}, {3, 1}), {"0", "1"}, storage_bytes(6, 24)), "storage '1' is listed"},
        {legacy(one_tensor(6, 0, {2}, {1}, "FloatStorage", {5, 3}), {"0"}, storage_bytes(6, 24)),
         "storage view [5, +3) outside its 6-element storage"},
        {legacy(one_tensor(6, 0, {2, 3}, {3, 1}), {}, ""), "storage '0' is not in the file"},
        {legacy("\x80\x02h\x05.", {}, ""), "memo key 5 was never stored"},
        {legacy("\x80\x02I01\n.", {}, ""), "opcode 0x49 ('I'): not supported"},
        {legacy("\x80\x02\x8c\x02os\x8c\x06system\x93\x8c\x02id\x85R0}.", {}, ""),
         "pickle global 'os.system' refused"},
        {legacy("\x80\x02(ios\npopen\n}.", {}, ""), "pickle global 'os.popen' refused"},
        // a str of invalid UTF-8 (Python's pickle fails on it; a name with it once reached --to=tf)
        {legacy("\x80\x02}\x8c\x02" "a\xff\x88s.", {}, ""), "a str that is not UTF-8 (byte 0xff at offset 1 of 'a?'"},
        {legacy("\x80\x02(\x8c\x01x\x8c\x01yi\x8c\x02os", {}, ""), "truncated"},
        {legacy("\x80\x02" + std::string(3, ']') + "aaa.", {}, ""), "stack underflow"},
        {std::string("PK\x03\x04", 4) + std::string(40, '\0'), "no end-of-central-directory"},
        {"not a checkpoint at all", "expected a PyTorch checkpoint"},
    };
    for (const Case& c : cases) {
        const std::string e = error_of([&] { TorchCheckpointReader::from_bytes(c.bytes, "evil.pt"); });
        ASSERT_FALSE(e.empty()) << "accepted; expected: " << c.expect;
        EXPECT_EQ(e.rfind("evil.pt", 0), 0u) << e;
        EXPECT_EQ(e.find('\n'), std::string::npos) << e;
        EXPECT_NE(e.find(c.expect), std::string::npos) << "want '" << c.expect << "' in: " << e;
    }
    // Nesting is walked to 100 levels only (lists nested 300 deep under an ignored key).
    const std::string deep = "\x80\x02}(X\x05\x00\x00\x00model}X\x01\x00\x00\x00y"s +
                             std::string(300, ']') + std::string(299, 'a') + "u.";
    EXPECT_NE(error_of([&] { TorchCheckpointReader::from_bytes(legacy(deep, {}, ""), "deep.pt"); })
                  .find("nested deeper than 100 levels"),
              std::string::npos);
    // Every truncation of real files is refused.
    const TmpDir& g = generated();
    for (const char* f : {"basic_zip.pt", "basic_legacy.pt"}) {
        const std::string good = read_file(g.file(f));
        ASSERT_NO_THROW(TorchCheckpointReader::from_bytes(good, f));
        for (size_t len = 0; len < good.size(); ++len)
            EXPECT_THROW(TorchCheckpointReader::from_bytes(good.substr(0, len), "cut"), Error) << f << " " << len;
    }
}

// A zip holding two entries of one name (torch.load reads the first; the reader kept the last, and
// read other weights than torch without a word): refused in one line.
TEST(TorchCheckpoint, DuplicateZipEntriesAreRefused) {
    const TmpDir& g = generated();
    const std::string src = g.file("basic_zip.pt"), dup = g.file("dup_entry.pt");
    const std::string cmd = "/usr/bin/python3 -c \"import sys, zipfile, warnings; warnings.simplefilter('ignore'); "
                            "a = zipfile.ZipFile(sys.argv[1]); b = zipfile.ZipFile(sys.argv[2], 'w'); "
                            "n = [i for i in a.infolist() if '/data/' in i.filename][0]; "
                            "[b.writestr(i, a.read(i)) for i in a.infolist()]; "
                            "b.writestr(n.filename, bytes(n.file_size)); b.close()\" '" + src + "' '" + dup + "'";
    ASSERT_EQ(std::system(cmd.c_str()), 0) << cmd;
    const std::string e = error_of([&] { TorchCheckpointReader r(dup); });
    EXPECT_NE(e.find("zip: expected each entry name once, got \""), std::string::npos) << e;
    EXPECT_EQ(e.rfind(dup, 0), 0u) << e;
}

// Bounded random mutation: every mutant is refused with an Error naming it or fully readable.
TEST(TorchCheckpoint, RandomMutationsNeverCrash) {
    const TmpDir& g = generated();
    std::mt19937_64 rng(20261126);
    for (const char* f : {"basic_zip.pt", "basic_legacy.pt", "nvidia_dl_legacy.pt"}) {
        const std::string good = read_file(g.file(f));
        int accepted = 0, rejected = 0;
        for (int iter = 0; iter < 1500; ++iter) {
            std::string m = good;
            for (int k = 0, edits = 1 + int(rng() % 3); k < edits; ++k) {
                const size_t pos = rng() % m.size();
                switch (rng() % 3) {
                    case 0: m[pos] = char(rng()); break;
                    case 1: m.erase(pos, 1 + rng() % 4); break;
                    default: m.insert(pos, 1, char(rng()));
                }
                if (m.empty()) m = "x";
            }
            try {
                const TorchCheckpointReader r = TorchCheckpointReader::from_bytes(m, "mutant");
                for (const TorchTensor& t : r.tensors())
                    if (r.is_float(t)) {
                        ASSERT_EQ(r.read_f32(t).size(), t.numel);
                    }
                ++accepted;
            } catch (const Error& e) {
                ASSERT_EQ(std::string(e.what()).rfind("mutant", 0), 0u) << e.what();
                ASSERT_EQ(std::string(e.what()).find('\n'), std::string::npos) << e.what();
                ++rejected;
            }
        }
        EXPECT_GT(accepted, 0) << f;
        EXPECT_GT(rejected, 0) << f;
    }
}

}  // namespace
}  // namespace bertbench::io
