// The guarded backend (guarded_backend.hpp), which the device-memory tests of the optimizer and the
// training loop stand on: its ops, uploads and downloads work on its memory, and the host touching
// that memory directly dies.
#include "backend/guarded_backend.hpp"

#include <gtest/gtest.h>

#include <cstring>
#include <vector>

namespace bertbench::testing {
namespace {

TEST(GuardedBackend, OpsAndCopiesWorkAndTheHostTouchingItsMemoryDies) {
    GuardedBackend be;
    const std::vector<float> host = {1.0f, -2.5f, 3.0f};
    backend::Buffer<float> x(be, std::span<const float>(host));
    backend::Buffer<backend::bf16> y(be, host.size());
    BB_OP(be, to_bf16)(y.get(), x.get(), host.size());  // an op: the CPU's, on the guarded memory
    EXPECT_EQ(x.download(), host);
    std::vector<backend::bf16> want(host.size());
    BB_OP(backend::cpu(), to_bf16)(want.data(), host.data(), host.size());
    const std::vector<backend::bf16> got = y.download();
    EXPECT_EQ(0, std::memcmp(got.data(), want.data(), want.size() * sizeof(backend::bf16)));
    EXPECT_DEATH({ volatile float v = x.get()[1]; (void)v; }, "");
    EXPECT_DEATH(x.get()[0] = 0.0f, "");
    EXPECT_EQ(be.mappings(), 2u);
}

}  // namespace
}  // namespace bertbench::testing
