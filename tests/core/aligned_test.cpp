// AlignedVector: cache-line alignment for every size, 2 MiB alignment (huge-page candidates) from
// 2 MiB up, and ordinary vector semantics (value-initialised, copyable, resizable).
#include "core/aligned.hpp"

#include <gtest/gtest.h>

#include <cstdint>

namespace bertbench {
namespace {

uintptr_t address(const void* p) { return reinterpret_cast<uintptr_t>(p); }

TEST(AlignedVector, SmallBuffersStartOnACacheLine) {
    for (size_t n : {1, 3, 17, 1000, 100000}) {
        const AlignedVector<float> v(n, 0.5f);
        EXPECT_EQ(address(v.data()) % 64, 0u) << n;
        EXPECT_EQ(v.back(), 0.5f);
    }
}

TEST(AlignedVector, LargeBuffersStartOnAHugePage) {
    AlignedVector<float> v((size_t{5} << 20) / sizeof(float) + 3);
    EXPECT_EQ(address(v.data()) % (size_t{2} << 20), 0u);
    EXPECT_EQ(v[12345], 0.f);
    v.assign(v.size(), 2.f);
    const AlignedVector<float> copy = v;
    EXPECT_EQ(copy, v);
    v.resize(v.size() * 2, 1.f);
    EXPECT_EQ(address(v.data()) % (size_t{2} << 20), 0u);
    EXPECT_EQ(v[copy.size() - 1], 2.f);
    EXPECT_EQ(v.back(), 1.f);
}

}  // namespace
}  // namespace bertbench
