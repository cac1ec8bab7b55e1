// CRC-32C: SSE4.2 crc32 instruction, 8 bytes per step, with a table fallback.
// The table version is the textbook reflected algorithm (polynomial 0x82F63B78).
#include "io/crc32c.hpp"

#include <nmmintrin.h>

#include <array>
#include <cstring>

namespace bertbench::io {
namespace {

constexpr std::array<uint32_t, 256> make_table() {
    std::array<uint32_t, 256> t{};
    for (uint32_t i = 0; i < 256; ++i) {
        uint32_t c = i;
        for (int k = 0; k < 8; ++k) c = (c & 1) ? (c >> 1) ^ 0x82F63B78u : c >> 1;
        t[i] = c;
    }
    return t;
}
constexpr std::array<uint32_t, 256> kTable = make_table();

__attribute__((target("sse4.2"))) uint32_t crc32c_sse42(const uint8_t* p, size_t n, uint32_t crc) {
    uint64_t c = ~crc;
    while (n >= 8) {
        uint64_t v;
        std::memcpy(&v, p, 8);
        c = _mm_crc32_u64(c, v);
        p += 8;
        n -= 8;
    }
    uint32_t c32 = static_cast<uint32_t>(c);
    while (n > 0) {
        c32 = _mm_crc32_u8(c32, *p++);
        --n;
    }
    return ~c32;
}

bool have_sse42() {
    static const bool has = __builtin_cpu_supports("sse4.2");
    return has;
}

}  // namespace

uint32_t crc32c_portable(const void* data, size_t n, uint32_t crc) {
    const auto* p = static_cast<const uint8_t*>(data);
    uint32_t c = ~crc;
    for (size_t i = 0; i < n; ++i) c = kTable[(c ^ p[i]) & 0xFF] ^ (c >> 8);
    return ~c;
}

uint32_t crc32c(const void* data, size_t n, uint32_t crc) {
    if (have_sse42()) return crc32c_sse42(static_cast<const uint8_t*>(data), n, crc);
    return crc32c_portable(data, n, crc);
}

}  // namespace bertbench::io
