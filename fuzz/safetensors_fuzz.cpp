// safetensors reader (io/safetensors.hpp) on arbitrary bytes: header length, JSON header (dtype,
// shape, data_offsets, __metadata__), then every tensor read as fp32 / int64 as the loaders do.
#include <cstdint>
#include <string>

#include "fuzz_util.hpp"
#include "io/safetensors.hpp"

using namespace bertbench;

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
    fuzz::expect_clean([&] {
        const auto r = io::SafetensorsReader::from_bytes(
            std::string(reinterpret_cast<const char*>(data), size), "fuzz.safetensors");
        for (const io::TensorInfo& t : r.tensors()) {
            if (r.bytes(t).size() != t.end - t.begin) std::abort();
            if (r.find(t.name) == nullptr) std::abort();
            switch (t.dtype) {
                case io::DType::F64:
                case io::DType::F32:
                case io::DType::F16:
                case io::DType::BF16:
                    if (r.read_f32(t.name).size() != t.numel()) std::abort();
                    break;
                default:
                    if (r.read_i64(t.name).size() != t.numel()) std::abort();
            }
        }
    });
    return 0;
}
