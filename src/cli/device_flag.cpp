// --device (see device_flag.hpp).
#include "cli/device_flag.hpp"

#include <charconv>
#include <cstdlib>

#include "core/error.hpp"

namespace bertbench::cli {

void DeviceFlag::add(Flags& f) {
    f.add("device", &device,
          "cpu | cuda[:N]: where the engine, the weights and the optimizer live (cuda: a build with "
          "-DBB_CUDA=ON and an NVIDIA GPU; docs/gpu.md). cuda without N: GPU 0, or under mpirun the "
          "rank's local rank on its node (one GPU per rank)");
}

bool DeviceFlag::cuda() const {
    if (device == "cpu") return false;
    if (device == "cuda" || device.starts_with("cuda:")) return true;
    fail("--device: expected cpu, cuda or cuda:N, got \"{}\"", device);
}

namespace {
// The rank's index among the ranks of its node, from the launcher's environment (OpenMPI's, else
// MPICH's); 0 outside mpirun.
int local_rank() {
    for (const char* name : {"OMPI_COMM_WORLD_LOCAL_RANK", "MPI_LOCALRANKID"})
        if (const char* v = std::getenv(name)) return std::atoi(v);
    return 0;
}
}  // namespace

std::unique_ptr<backend::Backend> DeviceFlag::cuda_backend() const {
    int index = device == "cuda" ? local_rank() : 0;
    if (device.starts_with("cuda:")) {
        const std::string n = device.substr(5);
        const auto [end, ec] = std::from_chars(n.data(), n.data() + n.size(), index);
        if (ec != std::errc() || end != n.data() + n.size() || index < 0)
            fail("--device: expected cuda:N with a GPU index N >= 0, got \"{}\"", device);
    }
    return backend::make_cuda_backend(index);
}

std::unique_ptr<backend::Backend> DeviceFlag::backend() const {
    return cuda() ? cuda_backend() : nullptr;
}

void require_precision(const backend::Backend* be, ops::Precision precision) {
    if (be && precision == ops::Precision::int8 && !be->int8_weights())
        fail("--dtype=int8: the {} backend has no int8 path (int8 runs on the CPU backend: --device=cpu)",
             be->name());
}

}  // namespace bertbench::cli
