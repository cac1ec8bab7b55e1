// Structure-aware generators (fuzz/*_gen_fuzz.cpp) read the fuzzer's bytes as a recipe: choices of
// counts, shapes, offsets, layouts and values, from which they build a VALID file (consistent
// headers, recomputed checksums) with hostile values, write it to a scratch directory and run the
// real readers on it. Recipe wraps libFuzzer's FuzzedDataProvider with the edge values that hurt
// readers (0, 2^31 - 1, 2^32, 2^53, 2^62, 2^64 - 1 ...); ScratchDir is one directory per process
// (under $TMPDIR, which scripts/fuzz.sh points at its own work directory).
#pragma once

#include <fuzzer/FuzzedDataProvider.h>
#include <unistd.h>

#include <array>
#include <cstdint>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <string>
#include <string_view>
#include <vector>

#include "fuzz_util.hpp"
#include "model/config.hpp"
#include "model/convert.hpp"

namespace bertbench::fuzz {

class Recipe {
  public:
    Recipe(const uint8_t* data, size_t size) : p_(data, size) {}

    bool flip() { return p_.ConsumeBool(); }
    // True with probability about 1 / n (never when the recipe is used up).
    bool one_in(unsigned n) { return p_.remaining_bytes() > 0 && p_.ConsumeIntegralInRange<unsigned>(1, n) == 1; }
    uint64_t upto(uint64_t hi) { return p_.ConsumeIntegralInRange<uint64_t>(0, hi); }
    int64_t range(int64_t lo, int64_t hi) { return p_.ConsumeIntegralInRange<int64_t>(lo, hi); }
    template <typename T>
    T any() { return p_.ConsumeIntegral<T>(); }
    template <typename T, size_t N>
    T pick(const std::array<T, N>& values) { return p_.PickValueInArray(values); }
    // An unsigned value a file might declare: mostly small, else an edge of some integer type.
    uint64_t hostile_u64(uint64_t small = 16) {
        static constexpr std::array<uint64_t, 16> kEdges{
            0, 1, 2, 255, 65536, (1ull << 31) - 1, 1ull << 31, (1ull << 32) - 1, 1ull << 32,
            (1ull << 32) + 5, 1ull << 40, 1ull << 53, 1ull << 62, (1ull << 63) - 1, 1ull << 63,
            ~0ull};
        switch (upto(3)) {
            case 0: return pick(kEdges);
            case 1: return any<uint64_t>();
            default: return upto(small);
        }
    }
    int64_t hostile_i64(uint64_t small = 16) {
        const uint64_t v = hostile_u64(small);
        return static_cast<int64_t>(one_in(4) ? 0 - v : v);  // two's complement, no overflow
    }
    int32_t hostile_i32(uint64_t small = 16) { return static_cast<int32_t>(hostile_i64(small)); }
    std::string bytes(size_t n) { return p_.ConsumeBytesAsString(n); }
    std::string text(size_t max) { return p_.ConsumeRandomLengthString(max); }
    size_t left() { return p_.remaining_bytes(); }

  private:
    FuzzedDataProvider p_;
};

// A directory of this process's own (created on first use, emptied by the caller as it likes).
inline const std::filesystem::path& scratch_dir() {
    static const std::filesystem::path dir = [] {
        const char* tmp = std::getenv("TMPDIR");
        std::string t = std::string(tmp && *tmp ? tmp : "/tmp") + "/bb_gen_XXXXXX";
        if (mkdtemp(t.data()) == nullptr) std::abort();
        return std::filesystem::path(t);
    }();
    return dir;
}

inline void write_file(const std::filesystem::path& p, std::string_view bytes) {
    std::ofstream f(p, std::ios::binary | std::ios::trunc);
    f.write(bytes.data(), static_cast<std::streamsize>(bytes.size()));
    if (!f) std::abort();
}

// The tiny model the generators lay their tensors out for (2 layers, H 4, vocab 15).
inline model::BertConfig tiny_config() {
    model::BertConfig c;
    c.vocab_size = 15;
    c.hidden_size = 4;
    c.num_hidden_layers = 2;
    c.num_attention_heads = 2;
    c.intermediate_size = 8;
    c.max_position_embeddings = 16;
    return c;
}

// bert_config.json of the tiny model, written once into the scratch directory.
inline const std::string& tiny_config_file() {
    static const std::string path = [] {
        const std::string p = (scratch_dir() / "bert_config.json").string();
        write_file(p, tiny_config().to_json().dump());
        return p;
    }();
    return path;
}

// Sum of the sizes of the regular files under `dir` (what a run wrote).
inline uint64_t bytes_in(const std::filesystem::path& dir) {
    uint64_t n = 0;
    std::error_code ec;
    for (const auto& e : std::filesystem::recursive_directory_iterator(dir, ec))
        if (e.is_regular_file(ec)) n += e.file_size(ec);
    return n;
}

// convert_checkpoint of `input` to a format the recipe picks, into `out` (emptied first); true
// when it succeeded. What must hold either way: the output is at most a small multiple of the
// bytes given (tensors are copied, plus a name and some JSON per tensor).
inline void convert_into(Recipe& r, const std::string& input, const std::filesystem::path& out,
                         uint64_t input_bytes) {
    static constexpr std::array<const char*, 4> kTo{"safetensors", "tf", "hf", "pt"};
    static constexpr std::array<const char*, 4> kName{"model.safetensors", "model", "hf", "model.pt"};
    std::filesystem::remove_all(out);
    std::filesystem::create_directories(out);
    const size_t k = r.upto(kTo.size() - 1);
    model::ConvertOptions c;
    c.input = input;
    c.to = kTo[k];
    c.output = (out / kName[k]).string();
    c.bert_config_file = tiny_config_file();
    c.overwrite = true;
    expect_clean([&] { (void)model::convert_checkpoint(c); });
    if (bytes_in(out) > 4 * input_bytes + (1u << 20)) std::abort();
}

}  // namespace bertbench::fuzz
