// Philox-4x32-10 counter-based RNG (Salmon et al., SC'11; the generator behind curand/JAX/PyTorch
// CUDA dropout). A pure function of (key, counter): dropout masks depend only on
// (seed, step, site, element), never on thread count or call order.
#pragma once

#include <array>
#include <cstdint>

namespace bertbench::philox {

using Counter = std::array<uint32_t, 4>;
using Key = std::array<uint32_t, 2>;

inline Counter philox4x32_10(Counter c, Key k) {
    constexpr uint32_t kM0 = 0xD2511F53u, kM1 = 0xCD9E8D57u;
    constexpr uint32_t kW0 = 0x9E3779B9u, kW1 = 0xBB67AE85u;
    for (int round = 0; round < 10; ++round) {
        const uint64_t p0 = uint64_t(kM0) * c[0];
        const uint64_t p1 = uint64_t(kM1) * c[2];
        c = {uint32_t(p1 >> 32) ^ c[1] ^ k[0], uint32_t(p1), uint32_t(p0 >> 32) ^ c[3] ^ k[1],
             uint32_t(p0)};
        k[0] += kW0;
        k[1] += kW1;
    }
    return c;
}

// Four uniform 32-bit words for block `block` (elements 4*block .. 4*block+3) of stream
// (seed, step, site). Counter = (block lo, block hi, site, step lo); key = (seed lo, seed hi ^ step hi).
inline Counter block(uint64_t seed, uint64_t step, uint32_t site, uint64_t blk) {
    return philox4x32_10({uint32_t(blk), uint32_t(blk >> 32), site, uint32_t(step)},
                         {uint32_t(seed), uint32_t(seed >> 32) ^ uint32_t(step >> 32)});
}

}  // namespace bertbench::philox
