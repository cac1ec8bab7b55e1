// Host emulation (cuda_runtime.h): the bf16 type as its bits.
#pragma once

#include <cstdint>
#include <cstring>

struct __nv_bfloat16 {
    uint16_t bits;
};
inline float __bfloat162float(__nv_bfloat16 b) {
    const uint32_t u = static_cast<uint32_t>(b.bits) << 16;
    float f;
    std::memcpy(&f, &u, sizeof f);
    return f;
}
