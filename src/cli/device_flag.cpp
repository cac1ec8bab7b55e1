// --device (see device_flag.hpp).
#include "cli/device_flag.hpp"

#include <charconv>

#include "core/error.hpp"

namespace bertbench::cli {

void DeviceFlag::add(Flags& f) {
    f.add("device", &device,
          "cpu | cuda[:N]: where the work runs. The engine runs on the CPU; on a CUDA build with a GPU "
          "only `bench --mode=gemm` runs on it so far (docs/gpu.md)");
}

bool DeviceFlag::cuda() const {
    if (device == "cpu") return false;
    if (device == "cuda" || device.starts_with("cuda:")) return true;
    fail("--device: expected cpu, cuda or cuda:N, got \"{}\"", device);
}

std::unique_ptr<backend::Backend> DeviceFlag::cuda_backend() const {
    int index = 0;
    if (device.starts_with("cuda:")) {
        const std::string n = device.substr(5);
        const auto [end, ec] = std::from_chars(n.data(), n.data() + n.size(), index);
        if (ec != std::errc() || end != n.data() + n.size() || index < 0)
            fail("--device: expected cuda:N with a GPU index N >= 0, got \"{}\"", device);
    }
    return backend::make_cuda_backend(index);
}

void DeviceFlag::require_cpu(const std::string& what) const {
    if (!cuda()) return;
    cuda_backend();  // a build without CUDA, no GPU or a bad index: that is the first thing to say
    fail("--device={}: {} runs on the CPU backend only so far (this build's CUDA backend has the "
         "ops, the engine does not use them yet: docs/gpu.md); use --device=cpu",
         device, what);
}

}  // namespace bertbench::cli
