// TensorFlow checkpoint reader (io/tf_bundle.hpp, io/sstable.hpp) on arbitrary bytes. Input layout:
// fixed32 little-endian n | n bytes of PREFIX.index | the rest = PREFIX.data-00000-of-00001 (an
// n past the end makes the whole input the index, with no data shard). When the index parses,
// every tensor is read as the loaders do (raw with its CRC, fp32, int64). Seeds in
// fuzz/corpus/tf_bundle/ are real bundles from ../shared/golden/tf_checkpoint in this layout
// (keras_bert_tiny; serving_half_plus_two_cpu with a Snappy block; serving_half_plus_two_tf2_cpu
// with Snappy and a DT_STRING).
#include <cstdint>
#include <cstring>
#include <string>
#include <vector>

#include "fuzz_util.hpp"
#include "io/tf_bundle.hpp"

using namespace bertbench;

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
    uint32_t n = 0;
    if (size >= 4) std::memcpy(&n, data, 4);
    const char* p = reinterpret_cast<const char*>(data);
    std::string index;
    std::vector<std::string> shards;
    if (size >= 4 && n <= size - 4) {
        index.assign(p + 4, n);
        shards.emplace_back(p + 4 + n, size - 4 - n);
    } else {
        index.assign(p, size);
    }
    fuzz::expect_clean([&] {
        const auto r = io::TfBundleReader::from_memory(std::move(index), shards, "fuzz");
        for (const io::TfTensorEntry& e : r.entries()) {
            if (r.find(e.name) != &e) std::abort();
            fuzz::expect_clean([&] {
                const std::vector<uint8_t> raw = r.read_raw(e);
                if (raw.size() != e.size) std::abort();
            });
            // The destination is the caller's: only allocate it for tensors the shard can hold.
            if (shards.empty() || e.size > shards[0].size() || e.numel() > shards[0].size()) continue;
            fuzz::expect_clean([&] {
                std::vector<float> f(e.numel());
                r.read_f32(e, f);
            });
            fuzz::expect_clean([&] { (void)r.read_i64(e); });
        }
    });
    return 0;
}
