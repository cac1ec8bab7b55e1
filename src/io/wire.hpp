// Byte-level encodings shared by the protobuf and LevelDB-table codecs: little-endian fixed32/64,
// LEB128 varints (at most 10 bytes; varint32 at most 5), and a bounds-checked reading cursor.
// The cursor never reads outside its span; every error is one line that starts with the caller's
// context ("<file>: index block entry 3") and names the byte position inside that span.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <utility>

#include "core/error.hpp"

namespace bertbench::io::wire {

inline size_t varint_size(uint64_t v) {
    size_t n = 1;
    while (v >= 0x80) {
        v >>= 7;
        ++n;
    }
    return n;
}

inline void put_varint(std::string& out, uint64_t v) {
    char buf[10];
    size_t n = 0;
    while (v >= 0x80) {
        buf[n++] = static_cast<char>((v & 0x7F) | 0x80);
        v >>= 7;
    }
    buf[n++] = static_cast<char>(v);
    out.append(buf, n);
}

inline void put_fixed32(std::string& out, uint32_t v) {
    const char b[4] = {static_cast<char>(v), static_cast<char>(v >> 8), static_cast<char>(v >> 16),
                       static_cast<char>(v >> 24)};
    out.append(b, 4);
}

inline uint32_t load_le32(const void* p) {
    const auto* b = static_cast<const uint8_t*>(p);
    return uint32_t(b[0]) | uint32_t(b[1]) << 8 | uint32_t(b[2]) << 16 | uint32_t(b[3]) << 24;
}

inline uint64_t load_le64(const void* p) {
    const auto* b = static_cast<const uint8_t*>(p);
    return uint64_t(load_le32(b)) | uint64_t(load_le32(b + 4)) << 32;
}

// Reads a span front to back. `where` is prefixed to every error message.
class Cursor {
  public:
    Cursor(std::string_view bytes, std::string where)
        : begin_(bytes.data()), p_(bytes.data()), end_(bytes.data() + bytes.size()),
          where_(std::move(where)) {}

    bool done() const { return p_ >= end_; }
    size_t pos() const { return static_cast<size_t>(p_ - begin_); }
    size_t remaining() const { return static_cast<size_t>(end_ - p_); }
    const std::string& where() const { return where_; }

    [[noreturn]] void error(std::string_view what) const {
        fail("{}: {} at byte {}", where_, what, pos());
    }

    uint64_t varint64() {
        uint64_t v = 0;
        for (int shift = 0; shift < 70; shift += 7) {
            if (p_ >= end_) error("truncated varint");
            const uint8_t b = static_cast<uint8_t>(*p_++);
            if (shift == 63 && b > 1) error("varint overflows 64 bits");
            v |= static_cast<uint64_t>(b & 0x7F) << shift;
            if (!(b & 0x80)) return v;
        }
        error("varint longer than 10 bytes");
    }

    uint32_t varint32() {
        uint32_t v = 0;
        for (int shift = 0; shift < 35; shift += 7) {
            if (p_ >= end_) error("truncated varint32");
            const uint8_t b = static_cast<uint8_t>(*p_++);
            if (shift == 28 && b > 0x0F) error("varint32 overflows 32 bits");
            v |= static_cast<uint32_t>(b & 0x7F) << shift;
            if (!(b & 0x80)) return v;
        }
        error("varint32 longer than 5 bytes");
    }

    uint32_t fixed32() {
        if (remaining() < 4) error("truncated fixed32");
        const uint32_t v = load_le32(p_);
        p_ += 4;
        return v;
    }

    uint64_t fixed64() {
        if (remaining() < 8) error("truncated fixed64");
        const uint64_t v = load_le64(p_);
        p_ += 8;
        return v;
    }

    std::string_view bytes(uint64_t n) {
        if (n > remaining())
            fail("{}: expected {} more bytes, found {} at byte {}", where_, n, remaining(), pos());
        std::string_view s(p_, static_cast<size_t>(n));
        p_ += n;
        return s;
    }

    std::string_view length_delimited() { return bytes(varint64()); }

    // Protobuf: skips one field's payload of the given wire type.
    void skip_field(uint32_t wire_type) {
        switch (wire_type) {
            case 0:
                varint64();
                return;
            case 1:
                fixed64();
                return;
            case 2:
                length_delimited();
                return;
            case 5:
                fixed32();
                return;
            default:
                error(fmt::format("unsupported protobuf wire type {}", wire_type));
        }
    }

    // Protobuf: the next tag as (field number, wire type); field 0 is an error.
    std::pair<uint64_t, uint32_t> tag() {
        const uint64_t t = varint64();
        if ((t >> 3) == 0) error("protobuf field number 0");
        return {t >> 3, static_cast<uint32_t>(t & 7)};
    }

  private:
    const char* begin_;
    const char* p_;
    const char* end_;
    std::string where_;
};

}  // namespace bertbench::io::wire
