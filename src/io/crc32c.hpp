// CRC-32C (Castagnoli, reflected polynomial 0x82F63B78) and TFRecord's masked form.
// Reference: TensorFlow core/lib/hash/crc32c.h and tfrecord framing (masked CRC-32C).
// crc32c(data, n, crc) extends a previous value: crc32c(b, crc32c(a)) == crc32c(a ++ b).
#pragma once

#include <cstddef>
#include <cstdint>

namespace bertbench::io {

// Hardware (SSE4.2 crc32 instruction) when the CPU has it, else the table version.
uint32_t crc32c(const void* data, size_t n, uint32_t crc = 0);
// Byte-at-a-time table implementation: the independent check for crc32c() in tests.
uint32_t crc32c_portable(const void* data, size_t n, uint32_t crc = 0);

// TFRecord's mask: ((c >> 15) | (c << 17)) + 0xa282ead8 (mod 2^32).
inline uint32_t mask_crc(uint32_t c) {
    return ((c >> 15) | (c << 17)) + 0xa282ead8u;
}
inline uint32_t unmask_crc(uint32_t m) {
    uint32_t r = m - 0xa282ead8u;
    return (r >> 17) | (r << 15);
}
inline uint32_t masked_crc32c(const void* data, size_t n) {
    return mask_crc(crc32c(data, n));
}

}  // namespace bertbench::io
