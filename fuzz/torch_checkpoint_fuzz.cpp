// PyTorch checkpoint reader (io/torch_checkpoint.hpp) on arbitrary bytes: the zip container
// (central directory, zip64, local headers, CRCs) or the legacy stream (five pickles, then the
// storages), the restricted pickle VM (io/pickle.hpp) and the state-dict walk; every float tensor
// read as fp32 (strides followed). The bytes also run through the VM alone, so mutations reach
// the opcodes without fixing a zip CRC. Seeds: fuzz/make_torch_seeds.py.
#include <cstdint>
#include <string>

#include "fuzz_util.hpp"
#include "io/pickle.hpp"
#include "io/torch_checkpoint.hpp"

using namespace bertbench;

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
    const std::string bytes(reinterpret_cast<const char*>(data), size);
    fuzz::expect_clean([&] {
        const auto r = io::TorchCheckpointReader::from_bytes(bytes, "fuzz.pt");
        for (const io::TorchTensor& t : r.tensors()) {
            if (r.find(t.name) == nullptr) std::abort();
            if (r.is_float(t) && r.read_f32(t).size() != t.numel) std::abort();
        }
        (void)r.ignored_summary();
    });
    fuzz::expect_clean([&] {
        size_t pos = 0;
        const io::pickle::Unpickler u({reinterpret_cast<const std::byte*>(data), size}, &pos, "fuzz.pkl");
        if (pos > size || u.root() >= u.size()) std::abort();
        for (uint32_t v = 0; v < u.size(); ++v) (void)u.brief(u.at(v));
    });
    return 0;
}
