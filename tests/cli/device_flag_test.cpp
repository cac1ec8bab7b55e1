// --device's checks that need no GPU: int8 on a backend without int8 kernels (the CUDA backend's
// case, here the guarded test backend) is one line before any work.
#include "cli/device_flag.hpp"

#include <gtest/gtest.h>

#include <string>

#include "backend/guarded_backend.hpp"
#include "core/error.hpp"

namespace bertbench::cli {
namespace {

TEST(DeviceFlag, Int8OnABackendWithoutInt8KernelsIsRefusedInOneLine) {
    testing::GuardedBackend device;
    try {
        require_precision(&device, ops::Precision::int8);
        ADD_FAILURE() << "int8 accepted on a backend without int8 kernels";
    } catch (const Error& e) {
        EXPECT_EQ(std::string(e.what()),
                  "--dtype=int8: the guarded backend has no int8 path (int8 runs on the CPU backend: --device=cpu)");
    }
    EXPECT_NO_THROW(require_precision(&device, ops::Precision::bf16));
    EXPECT_NO_THROW(require_precision(nullptr, ops::Precision::int8));  // the CPU's own
    DeviceFlag cpu;
    EXPECT_EQ(cpu.backend(), nullptr);
    DeviceFlag bad;
    bad.device = "tpu";
    EXPECT_THROW(bad.backend(), Error);
}

}  // namespace
}  // namespace bertbench::cli
