// The shared part of the hdf5_gen generator (fuzz/hdf5_gen_fuzz.cpp, which reads the shards) and
// its writer (fuzz/hdf5_gen_writer.cpp, which makes them): the recipe's first choices, and the
// pipe protocol between them (a u32 length and the recipe; one status byte back).
#pragma once

#include <unistd.h>

#include <array>
#include <cerrno>
#include <cstdint>

#include "recipe.hpp"

namespace bertbench::fuzz::hdf5_gen {

// The recipe's first choices: the widths the shard is written with and read with, its rows.
struct Shape {
    int T, P, rT, rP;
    uint64_t rows;
};
inline Shape draw_shape(Recipe& r) {
    static constexpr std::array<int, 5> kT{4, 8, 16, 128, 1};
    static constexpr std::array<int, 4> kP{2, 3, 20, 1};
    static constexpr std::array<uint64_t, 8> kRows{0, 1, 3, 17, 1000, 10000000, 1ull << 40, 5};
    Shape s;
    s.T = r.pick(kT), s.P = r.pick(kP);
    s.rows = r.one_in(3) ? r.pick(kRows) : r.upto(40);
    s.rT = r.one_in(16) ? int(1 + r.upto(200)) : s.T;  // read as written, mostly
    s.rP = r.one_in(16) ? int(1 + r.upto(30)) : s.P;
    return s;
}

inline bool read_all(int fd, void* p, size_t n) {
    auto* b = static_cast<char*>(p);
    while (n > 0) {
        const ssize_t got = read(fd, b, n);
        if (got < 0 && errno == EINTR) continue;
        if (got <= 0) return false;
        b += got, n -= static_cast<size_t>(got);
    }
    return true;
}
inline bool write_all(int fd, const void* p, size_t n) {
    const auto* b = static_cast<const char*>(p);
    while (n > 0) {
        const ssize_t put = write(fd, b, n);
        if (put < 0 && errno == EINTR) continue;
        if (put <= 0) return false;
        b += put, n -= static_cast<size_t>(put);
    }
    return true;
}


}  // namespace bertbench::fuzz::hdf5_gen
